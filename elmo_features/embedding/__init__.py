"""embedding"""
