"""WSD data: the Raganato XML reader, gold keys and the scorer, WordNet's sense inventory and data files, morphy, the WSD Evaluation Framework fetcher."""
