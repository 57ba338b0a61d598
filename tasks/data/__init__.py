"""Task data: readers (CoNLL-2003, TSV/CSV, SST trees, HF datasets, WSD framework folders), tag schemes, the
project tokenizer, static word vectors, and ``elmo-tasks data get`` for public data in registry packages."""
from elmo_tasks.data.types import DataFormatError, LabeledSentence, TaggedSentence
from elmo_tasks.data.registry import READERS, get_reader, read_data, reader_options
from elmo_tasks.data.hf import to_hf_dataset
from elmo_tasks.data.static_vectors import StaticVectors, load_static_vectors
from elmo_tasks.data.tokenizer import tokenize
from elmo_tasks.data import classification, conll, hf, sst  # noqa: F401  (each registers its readers)

__all__ = ["DataFormatError", "LabeledSentence", "TaggedSentence", "READERS", "get_reader", "read_data",
           "reader_options", "to_hf_dataset", "StaticVectors", "load_static_vectors", "tokenize"]
