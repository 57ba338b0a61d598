"""Stand-in: AllenNLP imports ``CacheFile`` but the benchmark never downloads anything."""


class CacheFile:
    pass
