"""Random-weight biLMs of the public ELMo architectures (options from ``elmo_features.formats.presets``).

"original" is elmo_2x4096_512_2048cnn_2xhighway (bilm-tf's ``bin/train_elmo.py``: char dim 16,
filters [[1,32],[2,32],[3,64],[4,128],[5,256],[6,512],[7,1024]], 2 highway layers, LSTM cell 4096,
projection 512, 2 layers, clips 3); "small" is elmo_2x1024_128_2048cnn_1xhighway (same CNN, 1
highway layer, LSTM cell 1024, projection 128). Only the architecture matters for speed.
"""
from __future__ import annotations

import torch

from elmo_features import BiLM, BiLMOptions
from elmo_features.formats.presets import get_preset


def random_bilm(name: str, seed: int = 0, stateful: bool = False) -> BiLM:
    """A BiLM of preset ``name`` with seeded random weights, in eval mode with frozen parameters.

    Matrices are uniform with variance gain^2 / fan_in (gain 1 in the CNN, 1.25 in the LSTM), biases
    uniform(-0.1, 0.1), character embeddings uniform(-1, 1): outputs then look like a trained ELMo's
    (layer std ~0.3-0.6, values up to ~2), so output comparisons are meaningful; a larger LSTM gain
    makes the recurrence amplify float rounding, and two exact implementations then differ by >1e-5.
    """
    torch.manual_seed(seed)
    bilm = BiLM(BiLMOptions.from_dict(get_preset(name).options), stateful=stateful)
    with torch.no_grad():
        for pname, p in bilm.named_parameters():
            if pname.endswith("char_embedding.weight"):
                p.uniform_(-1.0, 1.0)
                p[0].zero_()  # the padding-token row
            elif p.dim() >= 2:
                a = (1.25 if pname.startswith("lstm.") else 1.0) * (3.0 / p[0].numel()) ** 0.5
                p.uniform_(-a, a)
            else:
                p.uniform_(-0.1, 0.1)
    bilm.eval()
    for p in bilm.parameters():
        p.requires_grad_(False)
    return bilm
