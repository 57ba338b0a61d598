"""tasks: pluggable heads (NER, sentiment, WSD) on frozen biLM / static features."""
