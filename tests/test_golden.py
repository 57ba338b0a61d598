"""A golden test needing nothing outside the repo: an independent pure-numpy ELMo (bilm-tf semantics),
reading the HDF5 arrays directly in TensorFlow layout, against BiLM on a tiny random model.

bilm-tf facts used: char ids are the +1-shifted byte ids, row id-1 of ``char_embed``; CNN = VALID conv
over the 50 characters, max over positions, then the activation; highway
y = t * relu(x Wt + bt) + (1 - t) * x with carry gate t = sigmoid(x Wc + bc); LSTMCell with gate order
(i, j, f, o), forget bias +1, cell clip, projection W_P, projection clip; residual connections
from the second layer on; sentences wrapped in <S> ... </S>; the backward LM reads the reversed sentence.
"""
import h5py
import numpy as np
import pytest
import torch

from elmo_features import BiLM, BiLMOptions, batch_to_ids, load_bilm, save_bilm

SENTENCES = [["The", "cat", "sat", "."], ["Ünïcode", "wörds", "and", "a" * 60], ["x"], ["a", "b", "c", "d", "e", "f", "g"]]

VARIANTS = {
    "clipped-skip-relu": {
        "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8], [3, 16]], "n_highway": 2,
                     "n_characters": 262, "activation": "relu"},
        "lstm": {"dim": 24, "projection_dim": 8, "n_layers": 2, "cell_clip": 1, "proj_clip": 1,
                 "use_skip_connections": True},
    },
    "plain-tanh-3layers": {
        "char_cnn": {"embedding": {"dim": 3}, "filters": [[1, 5], [3, 7]], "n_highway": 1, "activation": "tanh"},
        "lstm": {"dim": 16, "projection_dim": 6, "n_layers": 3, "use_skip_connections": False},
    },
}


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _char_ids(token: str) -> list[int]:
    specials = {"<S>": [256], "</S>": [257]}
    inner = specials.get(token) or list(token.encode("utf-8"))[:48]
    row = [258] + inner + [259] + [260] * (48 - len(inner))
    return [c + 1 for c in row]


def reference_elmo(w: dict, opts: dict, sentence: list[str]) -> np.ndarray:
    """All layers (L, n, 2P) for one sentence, float64, from the TF-layout arrays ``w``."""
    cnn, lstm = opts["char_cnn"], opts["lstm"]
    act = np.tanh if cnn.get("activation") == "tanh" else (lambda x: np.maximum(x, 0))
    tokens = ["<S>"] + sentence + ["</S>"]
    emb = []
    for tok in tokens:
        x = w["char_embed"][np.array(_char_ids(tok)) - 1]  # (50, E)
        feats = []
        for i, (width, n) in enumerate(cnn["filters"]):
            W, b = w[f"CNN/W_cnn_{i}"][0], w[f"CNN/b_cnn_{i}"]  # (width, E, n), (n,)
            conv = np.stack([np.einsum("ke,ken->n", x[t : t + width], W) for t in range(50 - width + 1)]) + b
            feats.append(act(conv.max(axis=0)))
        h = np.concatenate(feats)  # (F,)
        for k in range(cnn["n_highway"]):
            carry = sigmoid(h @ w[f"CNN_high_{k}/W_carry"] + w[f"CNN_high_{k}/b_carry"])
            transform = np.maximum(h @ w[f"CNN_high_{k}/W_transform"] + w[f"CNN_high_{k}/b_transform"], 0)
            h = carry * transform + (1 - carry) * h
        emb.append(h @ w["CNN_proj/W_proj"] + w["CNN_proj/b_proj"])
    tok = np.stack(emb)  # (n + 2, P)
    layers = [np.concatenate([tok, tok], axis=-1)]
    C, P = lstm["dim"], lstm["projection_dim"]
    inputs = {0: tok, 1: tok[::-1]}
    for k in range(lstm["n_layers"]):
        outs = {}
        for d in (0, 1):
            pre = f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell"
            W, B, WP = w[f"{pre}/W_0"], w[f"{pre}/B"], w[f"{pre}/W_P_0"]
            h, c, seq = np.zeros(P), np.zeros(C), []
            for x in inputs[d]:
                z = np.concatenate([x, h]) @ W + B
                i, j, f, o = np.split(z, 4)
                c = sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(j)
                if lstm.get("cell_clip"):
                    c = np.clip(c, -lstm["cell_clip"], lstm["cell_clip"])
                h = (sigmoid(o) * np.tanh(c)) @ WP
                if lstm.get("proj_clip"):
                    h = np.clip(h, -lstm["proj_clip"], lstm["proj_clip"])
                seq.append(h)
            out = np.stack(seq)
            if k > 0 and lstm.get("use_skip_connections"):
                out = out + inputs[d]
            outs[d] = out
        inputs = outs
        layers.append(np.concatenate([outs[0], outs[1][::-1]], axis=-1))
    return np.stack(layers)[:, 1:-1]  # drop <S>, </S>


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_bilm_matches_numpy_reference(tmp_path, variant):
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = BiLM(BiLMOptions.from_dict(VARIANTS[variant]))
    with torch.no_grad():  # large enough that both clips and all gates matter (clips set low above)
        for p in model.parameters():
            p.normal_(0.0, 0.5)
    save_bilm(model, tmp_path / "options.json", tmp_path / "weights.hdf5")
    with h5py.File(tmp_path / "weights.hdf5", "r") as f:
        w = {}
        f.visititems(lambda name, obj: w.__setitem__(name, obj[...].astype(np.float64))
                     if isinstance(obj, h5py.Dataset) else None)
    bilm = load_bilm(tmp_path / "options.json", tmp_path / "weights.hdf5")
    with torch.inference_mode():
        out = bilm(batch_to_ids(SENTENCES))
    assert out.layers.shape[0] == VARIANTS[variant]["lstm"]["n_layers"] + 1
    for b, sentence in enumerate(SENTENCES):
        expected = reference_elmo(w, VARIANTS[variant], sentence)  # (L, n, D)
        actual = out.layers[:, b, : len(sentence)].double().numpy()
        assert actual.shape == expected.shape
        np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)  # float32 vs float64
    if variant == "clipped-skip-relu":  # both clips are reached, else the test would not cover them
        assert (out.layers[1].abs() == 1.0).any()  # projection clip (layer 1 has no residual)
        unclipped = dict(VARIANTS[variant], lstm=dict(VARIANTS[variant]["lstm"], cell_clip=0))
        diff = max(np.abs(reference_elmo(w, unclipped, s) - reference_elmo(w, VARIANTS[variant], s)).max()
                   for s in SENTENCES)
        assert diff > 1e-3
