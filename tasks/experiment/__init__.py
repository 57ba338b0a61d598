"""One run, its training loop and checks; comparisons over seeds, feature sources and folds; their summaries and plots."""
