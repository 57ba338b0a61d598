"""Train an ELMo-style biLM on plain text and export it in the bilm-tf / AllenNLP format."""
