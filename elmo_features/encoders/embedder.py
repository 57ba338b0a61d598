"""``TransformerEmbedder``: per-word layer arrays (L, n, D) from a frozen Transformer encoder, like ``Embedder``.

Every hidden state the model returns (the embedding output, then each layer) is one layer of the output,
``layers`` selecting a subset. Pieces are pooled to words (``subword_pooling``: mean, first or last piece;
``elmo_features.encoders.pieces``), long sentences run in overlapping windows, and windows are batched by
piece length (longest first) with at most ``batch_size`` windows and ``max_pieces_per_batch`` padded pieces
per batch. A sentence gets the same vectors whatever batch it is in, up to float rounding of the padded
matrix products (tests check 1e-5 absolute; MiniLM alone vs in a batch of 64: at most 7e-6).

``precision`` (fp32, bf16 or auto; ``elmo_features.encoders.precision``) is the forward pass's arithmetic, resolved
when the embedder is built. ``fingerprint`` (the cache key of the features) covers the model files' content hash,
the pooling, the layers, the window settings, the transformers version and, for bf16, the precision and the
hardware's bf16 flags.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from elmo_features.embedding.embedder import SentenceEmbedder, plan_batches
from elmo_features.embedding.feature_cache import hash_tensor, tensors_state
from elmo_features.encoders.loading import EncoderError, LoadedEncoder, load_encoder
from elmo_features.encoders.pieces import POOLINGS, Window, piece_counts, plan_windows, pool_pieces
from elmo_features.encoders.precision import Bf16Linears, bf16_hardware, forward_precision, resolve_encoder_precision
from elmo_features.util import stop
from elmo_features.util.arguments import check_int, check_optional_bool, check_sentences


@dataclass
class PieceStats:
    """What the alignment did to a set of sentences (for the run's report)."""

    words: int = 0
    words_without_pieces: int = 0  # given a zero vector
    words_cut: int = 0  # a single word longer than a window: its pieces past the window were left out
    windowed_sentences: int = 0  # sentences longer than one window
    examples: list[str] = field(default_factory=list)  # a few words without pieces

    def as_dict(self) -> dict:
        return {"words": self.words, "words_without_pieces": self.words_without_pieces, "words_cut": self.words_cut,
                "windowed_sentences": self.windowed_sentences, "examples_without_pieces": self.examples[:5]}


@dataclass
class _Piece:
    """One window of one sentence, tokenized: input ids with special tokens, and each piece's word (or -1)."""

    sentence: int
    window: Window
    ids: list[int]
    words: list[int]  # word index in the sentence per piece, -1 for special tokens


def _moved_weights(encoder: LoadedEncoder) -> str | None:
    """None while the encoder's weights are those loaded from its files; else the sha256 of its state_dict
    (memoised on the weights' state: an edit through ``param.data`` or a fine-tuning step changes it)."""
    tensors = encoder.model.state_dict(keep_vars=True)
    state = tensors_state(list(tensors.values()))
    if state == encoder.loaded_state:
        return None
    memo = getattr(encoder, "_weights_memo", None)
    if state is not None and memo is not None and memo[0] == state:
        return memo[1]
    h = hashlib.sha256()
    for name in sorted(tensors):
        hash_tensor(h, name, tensors[name])
    encoder._weights_memo = (state, h.hexdigest())
    return encoder._weights_memo[1]


class TransformerEmbedder(SentenceEmbedder):
    """Runs a frozen encoder over many tokenized sentences -> float32 arrays (L, n_i, D) in input order."""

    def __init__(self, encoder: LoadedEncoder | str | os.PathLike, subword_pooling: str = "mean",
                 layers: str | Sequence[int] = "all", window_pieces: int | None = None,
                 window_stride: int | None = None, batch_size: int = 64, max_pieces_per_batch: int = 8192,
                 progress: bool | None = None, precision: str = "fp32"):
        if isinstance(encoder, (str, os.PathLike)):  # a folder, a packaged name or a hub id, as load_encoder takes
            encoder = load_encoder(os.fspath(encoder))
        elif not isinstance(encoder, LoadedEncoder):
            raise TypeError(f"TransformerEmbedder: encoder must be a LoadedEncoder (load_encoder(...)) or what "
                            f"load_encoder takes (a folder, a packaged name, a hub id), got "
                            f"{type(encoder).__name__}: {repr(encoder)[:60]}")
        if subword_pooling not in POOLINGS:
            raise EncoderError(f"subword_pooling: {subword_pooling!r} is not one of {', '.join(POOLINGS)}")
        batch_size = check_int(batch_size, "batch_size")
        max_pieces_per_batch = check_int(max_pieces_per_batch, "max_pieces_per_batch")
        self.encoder = encoder
        self.pooling = subword_pooling
        n = encoder.num_hidden_states
        if hasattr(layers, "tolist") and not isinstance(layers, str):  # a NumPy array or a tensor of indices
            layers = layers.tolist()
            layers = [layers] if not isinstance(layers, list) else layers
        if isinstance(layers, str) and layers == "all":
            self.layers = list(range(n))
        elif isinstance(layers, str):
            raise EncoderError(f"layers: {layers!r}; give 'all' or a list of hidden-state indices 0..{n - 1}")
        elif not isinstance(layers, (list, tuple, range)):  # one index (5, 2.0, True) is not a list of them
            raise TypeError(f"layers must be 'all' or a list of hidden-state indices 0..{n - 1}, got "
                            f"{type(layers).__name__}: {layers!r}" + (f" (for one layer: [{layers}])"
                                                                       if type(layers) is int else ""))
        else:
            wrong = [i for i in layers if isinstance(i, bool) or not isinstance(i, (int, np.integer))]
            if wrong:  # 2.7 or True would silently become other layers
                raise EncoderError(f"layers: {list(layers)} has {wrong}, not integer hidden-state indices; this model "
                                   f"has hidden states 0..{n - 1} (0 = the embedding output)")
            bad = [i for i in layers if not -n <= int(i) < n]
            if bad or not layers:
                raise EncoderError(f"layers: {list(layers)} {'has ' + str(bad) + ' out of range' if bad else 'is empty'}; "
                                   f"this model has hidden states 0..{n - 1} (0 = the embedding output)")
            self.layers = [int(i) % n for i in layers]
            if len(set(self.layers)) != len(self.layers):
                raise EncoderError(f"layers: {list(layers)} names a hidden state twice (0..{n - 1}, -1 = {n - 1})")
        limit = encoder.max_pieces()
        window_pieces = check_int(window_pieces, "window_pieces") if window_pieces is not None else None
        window_stride = check_int(window_stride, "window_stride") if window_stride is not None else None
        self.window = int(window_pieces) if window_pieces is not None else limit
        if not 1 <= self.window <= limit:
            raise EncoderError(f"window_pieces: {self.window} must be in 1..{limit} (the model's maximum length less "
                               "its special tokens)")
        self.stride = int(window_stride) if window_stride is not None else max(1, self.window // 2)
        if not 1 <= self.stride <= self.window:
            raise EncoderError(f"window_stride: {self.stride} must be in 1..window_pieces ({self.window})")
        self.batch_size = int(batch_size)
        self.max_pieces_per_batch = int(max_pieces_per_batch)
        self.progress = check_optional_bool(progress, "progress")
        self.stats = PieceStats()
        device = next(encoder.model.parameters()).device
        self.precision = resolve_encoder_precision(precision, device)  # "fp32" or "bf16", fixed from here on
        self.bf16_hardware = bf16_hardware(device) if self.precision == "bf16" else None
        self._bf16 = Bf16Linears() if self.precision == "bf16" else None
        self._fast = None  # the fast tokenizer's backend, once asked for (``_backend``)

    @property
    def num_output_layers(self) -> int:
        return len(self.layers)

    @property
    def output_dim(self) -> int:
        return self.encoder.hidden_size

    @property
    def fingerprint(self) -> str:
        """sha256 over everything that determines the vectors (the features' cache key)."""
        import transformers

        settings = {"kind": "transformer", "files_sha256": self.encoder.files_sha256, "pooling": self.pooling,
                    "layers": self.layers, "window": self.window, "stride": self.stride,
                    "transformers": transformers.__version__,
                    "attention": getattr(self.encoder.model.config, "_attn_implementation", None)}
        if self.precision != "fp32":  # (fp32 adds nothing: caches made before the option existed stay valid)
            settings.update(precision=self.precision, bf16_hardware=self.bf16_hardware)
        moved = _moved_weights(self.encoder)
        if moved is not None:  # weights edited in memory since they were loaded: they are what counts
            settings["weights_sha256"] = moved
        return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()

    # ------------------------------------------------------------------ tokenization and windows

    def _tokenize(self, words: list[list[str]]) -> list[tuple[list[int], list[int | None]]]:
        """Per sentence (piece ids, the word of each piece or None), special tokens included, never truncated."""
        backend = self._backend()
        if backend is not None:  # (what the Hugging Face call below runs, without its per-sentence dicts)
            return [(e.ids, e.word_ids) for e in backend.encode_batch(words, is_pretokenized=True,
                                                                       add_special_tokens=True)]
        tok = self.encoder.tokenizer
        enc = tok(words, is_split_into_words=True, add_special_tokens=True, truncation=False, verbose=False)
        return [(enc["input_ids"][i], enc.word_ids(i)) for i in range(len(words))]

    def _backend(self):
        """A fast tokenizer's ``tokenizers.Tokenizer`` (a copy, its truncation and padding off: a tokenizer.json
        may set them), or None for a slow tokenizer."""
        if self._fast is None:
            tok = self.encoder.tokenizer
            backend = getattr(tok, "_tokenizer", None) if getattr(tok, "is_fast", False) else None
            if backend is not None:
                backend = copy.deepcopy(backend)
                backend.no_truncation()
                backend.no_padding()
            self._fast = backend if backend is not None else False
        return self._fast or None

    def plan(self, sentences: Sequence[Sequence[str]], stats: PieceStats | None = None) -> list[_Piece]:
        """Tokenize and window sentences (non-empty ones); fills ``stats``."""
        stats = self.stats if stats is None else stats
        sentences = [list(s) for s in sentences]
        todo = [i for i, s in enumerate(sentences) if s]
        out: list[_Piece] = []
        encoded = self._tokenize([sentences[i] for i in todo]) if todo else []
        for i, (ids, wids) in zip(todo, encoded):
            s = sentences[i]
            counts = piece_counts(wids, len(s))
            stats.words += len(s)
            for w, c in enumerate(counts):
                if c == 0:
                    stats.words_without_pieces += 1
                    if len(stats.examples) < 5:
                        stats.examples.append(repr(s[w]))
            windows = plan_windows(counts, self.window, self.stride)
            if sum(counts) <= self.window:
                out.append(_Piece(i, windows[0], list(ids), [-1 if w is None else w for w in wids]))
                continue
            stats.windowed_sentences += 1
            sub = self._tokenize([s[w.start:w.end] for w in windows])
            for w, (wid_ids, wid_words) in zip(windows, sub):
                words = [-1 if x is None else x + w.start for x in wid_words]
                if len(wid_ids) > self.window + (len(ids) - sum(counts)):  # one word longer than a window
                    stats.words_cut += 1
                    keep = self.window + (len(ids) - sum(counts))
                    specials = [k for k, x in enumerate(words) if x < 0]
                    head = [k for k in range(len(words)) if words[k] >= 0][: self.window]
                    picked = sorted(set(specials) | set(head))[:keep]
                    wid_ids = [wid_ids[k] for k in picked]
                    words = [words[k] for k in picked]
                out.append(_Piece(i, w, list(wid_ids), words))
        return out

    # ------------------------------------------------------------------ the model

    def _batches(self, pieces: list[_Piece]) -> list[list[int]]:
        """Windows grouped longest first, as ``elmo_features.embedding.embedder.plan_batches`` groups sentences."""
        return plan_batches([len(p.ids) for p in pieces], self.batch_size, self.max_pieces_per_batch)

    def _run(self, batch: list[_Piece]) -> list[np.ndarray]:
        """One model call: B windows -> B arrays (L, words in the window, D) (zeros for words it does not own)."""
        model = self.encoder.model
        device = next(model.parameters()).device
        B, P = len(batch), max(len(p.ids) for p in batch)
        pad = self.encoder.tokenizer.pad_token_id or 0
        ids = torch.full((B, P), pad, dtype=torch.long, device=device)  # (B, P)
        mask = torch.zeros((B, P), dtype=torch.long, device=device)  # (B, P)
        slot = torch.full((B, P), -1, dtype=torch.long, device=device)  # (B, P) word slot in the batch, -1: none
        offsets, n_slots = [], 0
        for b, p in enumerate(batch):
            n = len(p.ids)
            ids[b, :n] = torch.tensor(p.ids, device=device)
            mask[b, :n] = 1
            w = torch.tensor(p.words, device=device) - p.window.start  # (n,) word within the window, <0: special
            slot[b, :n] = torch.where(w >= 0, w + n_slots, torch.full_like(w, -1))
            offsets.append(n_slots)
            n_slots += p.window.end - p.window.start
        with forward_precision(self.precision, device):  # bf16: autocast; the hidden states are cast back below
            if self._bf16 is not None:  # (the linear weights cast once: Bf16Linears)
                out = self._bf16(model, input_ids=ids, attention_mask=mask, output_hidden_states=True)
            else:
                out = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        D = out.hidden_states[0].shape[-1]
        pooled = torch.empty(len(self.layers), n_slots, D, device=device)  # (L, S, D), one layer at a time (no stack)
        flat_slot = slot.reshape(-1)  # (B * P,)
        for k, i in enumerate(self.layers):
            pooled[k] = pool_pieces(out.hidden_states[i].reshape(1, B * P, D).float(), flat_slot, n_slots,
                                    self.pooling)[0][0]  # (S, D)
        pooled = pooled.cpu().numpy()
        return [pooled[:, o:o + (p.window.end - p.window.start)] for o, p in zip(offsets, batch)]

    def embed_batches(self, sentences: Sequence[Sequence[str]]) -> Iterator[tuple[list[int], list[np.ndarray]]]:
        """Yield (input indices, arrays (L, n_i, D)) as sentences complete; empty sentences come first."""
        sentences = check_sentences(sentences)
        L, D = self.num_output_layers, self.output_dim
        empty = [i for i, s in enumerate(sentences) if not s]
        pieces = self.plan(sentences)
        if self._bf16 is not None:  # the bf16 copies of the weights as they are now (an edit since makes them again)
            self._bf16.refresh(self.encoder.model, tensors_state(list(self.encoder.model.state_dict().values())))
        left = {}  # sentence -> windows still to run
        for p in pieces:
            left[p.sentence] = left.get(p.sentence, 0) + 1
        partial: dict[int, np.ndarray] = {}
        bar = tqdm(total=len(sentences), unit="sent", desc="embed", disable=not self._show_progress(len(sentences)))
        try:
            if empty:
                yield empty, [np.zeros((L, 0, D), dtype=np.float32) for _ in empty]
                bar.update(len(empty))
            for batch in self._batches(pieces):
                stop.check()  # a stop request whose KeyboardInterrupt was swallowed (elmo_features.util.stop)
                model, was_training = self.encoder.model, self.encoder.model.training
                model.eval()  # frozen features: never dropout, even if the caller put the model in train mode
                try:
                    with torch.inference_mode():
                        arrays = self._run([pieces[k] for k in batch])
                finally:
                    model.train(was_training)
                done_idx, done_arr = [], []
                for k, a in zip(batch, arrays):
                    p = pieces[k]
                    full = partial.get(p.sentence)
                    if full is None:
                        full = partial[p.sentence] = np.zeros((L, len(sentences[p.sentence]), D), dtype=np.float32)
                    own = np.asarray(p.window.owns)
                    full[:, own] = a[:, own - p.window.start]
                    left[p.sentence] -= 1
                    if left[p.sentence] == 0:
                        done_idx.append(p.sentence)
                        done_arr.append(partial.pop(p.sentence))
                if done_idx:
                    yield done_idx, done_arr
                    bar.update(len(done_idx))
        finally:
            bar.close()
