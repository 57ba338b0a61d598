"""Tiny random Transformer encoders saved as Hugging Face folders, built in-process (no download).

``make_bert(folder)``: a BERT-style encoder with a WordPiece tokenizer (tokenizer.json: fast); ``make_roberta``:
a RoBERTa-style one with a byte-level BPE tokenizer trained on a few sentences. Both have few positions
(``max_positions``), so long-sentence windows are cheap to test.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "bank", "river", "money", "went", "to", "of", "and",
         "john", "lives", "in", "paris", "mary", "smith", "visited", "berlin", "great", "film", "boring", "new",
         "york", "is", "big", "met", "."]
PIECES = ["##s", "##ing", "##ed", "un", "##believ", "##able", "##ly", "comfort", "##ab", "##le", "##er"]
TEXT = ["the cat sat on the mat .", "a dog ran to the river bank .", "john lives in paris and mary in berlin .",
        "the comfortable bank of the river is big .", "money went to new york ."]


def make_bert(folder: Path, seed: int = 0, max_positions: int = 40, layers: int = 2, hidden: int = 16) -> Path:
    """A random tiny BERT (``layers`` layers, ``hidden`` dims) with a fast WordPiece tokenizer, in ``folder``."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + PIECES + list("abcdefghijklmnopqrstuvwxyz")
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True,
                            model_max_length=max_positions)
    tok.save_pretrained(folder)
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=2 * hidden, max_position_embeddings=max_positions, hidden_dropout_prob=0.1,
                        attention_probs_dropout_prob=0.1)
    BertModel(config).save_pretrained(folder, safe_serialization=True)
    return folder


def make_roberta(folder: Path, seed: int = 0, max_positions: int = 40) -> Path:
    """A random tiny RoBERTa with a byte-level BPE tokenizer (trained here on TEXT), in ``folder``."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TEXT * 3, vocab_size=300, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(folder))
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    merges = [tuple(m.split()) for m in (folder / "merges.txt").read_text(encoding="utf-8").splitlines()[1:] if m]
    tok = RobertaTokenizerFast(vocab=vocab, merges=merges, model_max_length=max_positions - 2)
    tok.save_pretrained(folder)
    torch.manual_seed(seed)
    config = RobertaConfig(vocab_size=len(tok), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=max_positions, pad_token_id=tok.pad_token_id,
                           bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    RobertaModel(config).save_pretrained(folder, safe_serialization=True)
    return folder


def make_config_only(folder: Path, config: dict) -> Path:
    """A folder with just a config.json (for the refusals that come before weights are read)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder
