"""Word-sense disambiguation on frozen features: the ELMo paper's 1-NN comparison (Peters et al. 2018, sec. 5.3)."""
