"""The ELMo biLM: character CNN token encoder + biLSTM stack, returning all L = n_layers + 1 layers."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from elmo_features.model.char_cnn import CharCNN
from elmo_features.model.char_ids import BOS_CHAR_IDS, EOS_CHAR_IDS, N_CHARACTERS
from elmo_features.model.lstm import ElmoLstm
from elmo_features.model.options import BiLMOptions
from elmo_features.model.precision import precision_of
from elmo_features.model.transformer import TransformerBiEncoder
from elmo_features.util.arguments import check_bool


@dataclass
class BiLMOutput:
    """layers: (L, B, T, D) float; mask: (B, T) bool (True at real tokens)."""

    layers: torch.Tensor
    mask: torch.Tensor


def add_sentence_boundaries(char_ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B, T, 50) -> (B, T + 2, 50) with <S> at 0 and </S> right after each sentence."""
    B, T, C = char_ids.shape
    out = char_ids.new_zeros(B, T + 2, C)
    out[:, 1:-1] = char_ids
    dev = char_ids.device
    out[:, 0] = torch.tensor(BOS_CHAR_IDS, dtype=char_ids.dtype, device=dev)
    out[torch.arange(B, device=dev), lengths + 1] = torch.tensor(EOS_CHAR_IDS, dtype=char_ids.dtype, device=dev)
    return out


def check_char_ids(char_ids) -> None:
    """A (B, T, 50) integer tensor of ids in 0..261 (``batch_to_ids``); one min/max reduction, no per-id work."""
    if not torch.is_tensor(char_ids):
        raise TypeError(f"char_ids must be a tensor from batch_to_ids, got {type(char_ids).__name__}")
    if char_ids.dim() != 3 or char_ids.shape[-1] != 50:
        raise ValueError(f"char_ids must have shape (batch, tokens, 50), got {tuple(char_ids.shape)}")
    if char_ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"char_ids must be an integer tensor (torch.long, from batch_to_ids), got {char_ids.dtype}")
    if char_ids.numel():
        low, high = (int(v) for v in torch.aminmax(char_ids))
        if low < 0 or high >= N_CHARACTERS:
            raise ValueError(f"char_ids must be in 0..{N_CHARACTERS - 1} (batch_to_ids' character ids), got "
                             f"{low if low < 0 else high}")


class BiLM(nn.Module):
    """A frozen-by-default ELMo biLM.

    ``bilm(char_ids)`` with char_ids (B, T, 50) from ``batch_to_ids`` returns a BiLMOutput whose
    ``layers`` are (L, B, T, 2 * projection_dim): layer 0 is the token embedding as [x; x],
    layers 1..n the contextual layers [forward; backward] of the backbone (``options.backbone``:
    the biLSTM of ELMo, or a Transformer biLM, ``transformer.py``). Sentence-boundary tokens are added
    internally and removed from the output unless ``keep_sentence_boundaries``.

    Stateless by default. With ``stateful=True`` (LSTM backbone only) the final LSTM state of batch row r
    is the initial state of row r in the next call, as in AllenNLP and bilm-tf (``reset_states()`` clears it).
    """

    def __init__(self, options: BiLMOptions, stateful: bool = False, keep_sentence_boundaries: bool = False):
        super().__init__()
        if not isinstance(options, BiLMOptions):  # (a dict of an options.json: BiLMOptions.from_dict reads it)
            raise TypeError(f"BiLM: options must be a BiLMOptions (BiLMOptions.from_dict(json.load(...)), or "
                            f"elmo_features.load_bilm(options_file, weight_file)), got {type(options).__name__}")
        self.options = options
        self.stateful = check_bool(stateful, "stateful")
        self.keep_sentence_boundaries = check_bool(keep_sentence_boundaries, "keep_sentence_boundaries")
        vdim = options.token_vectors.dim if options.token_vectors is not None else 0
        self.char_cnn = CharCNN(options.char_cnn, options.projection_dim, vector_dim=vdim)
        if options.backbone == "transformer":
            if stateful:
                raise ValueError("stateful=True needs the lstm backbone; a transformer biLM carries no state")
            self.transformer = TransformerBiEncoder(options.transformer)
        else:
            self.lstm = ElmoLstm(options.lstm.projection_dim, options.lstm)
        self._states: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def encoder(self) -> nn.Module:
        """The contextual stack: ``ElmoLstm`` or ``TransformerBiEncoder`` (same call contract)."""
        return self.transformer if self.options.backbone == "transformer" else self.lstm

    @property
    def output_dim(self) -> int:
        return self.options.output_dim

    @property
    def num_output_layers(self) -> int:
        return self.options.num_output_layers

    def reset_states(self) -> None:
        self._states = None

    def _token_layer(self, char_ids: torch.Tensor, mask: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Token embeddings with boundaries, (B, T, 50) -> (B, T + 2, P); <S> and </S> go through the CNN once."""
        if precision_of(self) == "reference":  # AllenNLP's: the CNN over every position of the (B, T + 2) grid
            ids_b = add_sentence_boundaries(char_ids, lengths)  # (B, T + 2, 50)
            B, T2, _ = ids_b.shape
            emb = self.char_cnn(ids_b.reshape(B * T2, -1)).view(B, T2, -1)  # (B, T + 2, P)
            keep = torch.arange(T2, device=emb.device).unsqueeze(0) < (lengths + 2).unsqueeze(1)  # (B, T + 2)
            return emb * keep.unsqueeze(-1).to(emb.dtype)  # padding zero, as on the default path
        bounds = torch.tensor([BOS_CHAR_IDS, EOS_CHAR_IDS], dtype=char_ids.dtype, device=char_ids.device)  # (2, 50)
        emb = self.char_cnn(torch.cat([bounds, char_ids[mask]]))  # (2 + N, P)
        return self._assemble_tokens(emb[:2], emb[2:], mask, lengths)

    def _assemble_tokens(self, boundary, real, mask, lengths):
        """(2, P) boundary embeddings and (N, P) real-token embeddings -> (B, T + 2, P) with zero padding."""
        B, T = mask.shape
        tok = real.new_zeros(B, T + 2, real.shape[-1])
        tok[:, 1:-1][mask] = real
        tok[:, 0] = boundary[0]
        tok[torch.arange(B, device=mask.device), lengths + 1] = boundary[1]
        return tok

    def forward(self, char_ids: torch.Tensor, token_embeddings: torch.Tensor | None = None) -> BiLMOutput:
        """char_ids: (B, T, 50). token_embeddings: optional precomputed (B, T, P) (e.g. from a cache)."""
        check_char_ids(char_ids)
        B, T, _ = char_ids.shape
        mask = (char_ids > 0).any(dim=-1)  # (B, T)
        lengths = mask.sum(dim=1)  # (B,)
        ids_b = add_sentence_boundaries(char_ids, lengths)  # (B, T+2, 50)
        lengths_b = lengths + 2
        mask_b = torch.arange(T + 2, device=char_ids.device).unsqueeze(0) < lengths_b.unsqueeze(1)  # (B, T+2)
        if token_embeddings is None:
            tok = self._token_layer(char_ids, mask, lengths)  # (B, T+2, P)
        else:
            tok = self._with_given_tokens(ids_b, lengths, token_embeddings)  # (B, T+2, P)
        init = self._initial_state(B) if self.stateful else None
        lstm_out, final = self.encoder(tok, lengths_b, init)  # [(B, T+2, 2P)] * n_layers
        if self.stateful:
            self._update_states(final)
        if self.keep_sentence_boundaries:
            layers = torch.stack([torch.cat([tok, tok], dim=-1)] + lstm_out)  # (L, B, T+2, D)
            return BiLMOutput(layers, mask_b)
        if torch.is_grad_enabled() and (tok.requires_grad or any(o.requires_grad for o in lstm_out)):
            layers = torch.stack([torch.cat([tok, tok], dim=-1)] + lstm_out)  # (L, B, T+2, D)
            layers = layers[:, :, 1 : T + 1] * mask.view(1, B, T, 1).to(layers.dtype)  # (L, B, T, D)
            return BiLMOutput(layers, mask)
        P = tok.shape[-1]
        layers = tok.new_empty(self.num_output_layers, B, T, 2 * P)  # filled in place: (L, B, T, D)
        layers[0, :, :, :P] = tok[:, 1 : T + 1]
        layers[0, :, :, P:] = tok[:, 1 : T + 1]
        for k, out in enumerate(lstm_out):
            layers[k + 1] = out[:, 1 : T + 1]
        layers.masked_fill_(~mask.view(1, B, T, 1), 0.0)  # </S> and padding
        return BiLMOutput(layers, mask)

    def _with_given_tokens(self, ids_b, lengths, token_embeddings):
        """Token layer with boundaries from the CNN and real tokens from ``token_embeddings``."""
        B, T2, _ = ids_b.shape
        P = self.options.projection_dim
        if token_embeddings.shape != (B, T2 - 2, P):
            raise ValueError(f"token_embeddings must be {(B, T2 - 2, P)}, got {tuple(token_embeddings.shape)}")
        boundary = self.char_cnn(torch.stack([ids_b[0, 0], ids_b[0, lengths[0] + 1]]))  # (2, P)
        tok = ids_b.new_zeros(B, T2, P, dtype=torch.float32)
        tok[:, 1:-1] = token_embeddings
        tok[:, 0] = boundary[0]
        tok[torch.arange(B, device=tok.device), lengths + 1] = boundary[1]
        return tok

    def _initial_state(self, B: int):
        if self._states is None:
            return None
        h, c = self._states  # (n_layers, 2, B_prev, P), (n_layers, 2, B_prev, C)
        if h.shape[2] < B:
            pad = B - h.shape[2]
            h = torch.cat([h, h.new_zeros(*h.shape[:2], pad, h.shape[3])], dim=2)
            c = torch.cat([c, c.new_zeros(*c.shape[:2], pad, c.shape[3])], dim=2)
            self._states = (h, c)
        return h[:, :, :B], c[:, :, :B]

    def _update_states(self, final):
        h, c = (s.detach() for s in final)
        if self._states is None or self._states[0].shape[2] == h.shape[2]:
            self._states = (h, c)
        else:  # fewer rows than before: update the first rows, keep the rest
            oh, oc = (s.clone() for s in self._states)
            oh[:, :, : h.shape[2]] = h
            oc[:, :, : c.shape[2]] = c
            self._states = (oh, oc)

    def flops_per_token(self) -> int:
        """Model FLOPs (2 x multiply-adds) to run one token through the CNN and the contextual stack."""
        return self.char_cnn.flops_per_token() + self.encoder.flops_per_token()
