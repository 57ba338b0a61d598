"""Round seven (docs/reliability.md, "Round seven: the Python API, plugins and predict"): masks of the wrong shape or
type, a CRF of no time steps, plugins that change torch's default device or take an installed package's name, bf16
on a model converted to another dtype, and predict over an existing file; each case replayed as a user meets it."""
from __future__ import annotations

import pytest
import torch

from elmo_features.util.errors import UsageError


# ---------------------------------------------------------------- F03/F04/F05/F08: masks of the wrong shape or type

def _encoders():
    from elmo_tasks.heads.base import BiLSTMEncoder
    from elmo_tasks.heads.variational import VariationalBiLSTMEncoder

    return [BiLSTMEncoder(4, 3).eval(), VariationalBiLSTMEncoder(4, 3).eval()]


@pytest.mark.parametrize("mask, got", [(torch.ones(2, 5), "(2, 5)"), (torch.ones(3, 3), "(3, 3)"),
                                       (torch.ones(2, 2), "(2, 2)"), (torch.ones(2), "(2,)"),
                                       ([[1, 1, 0], [1, 0, 0]], "a list (give a tensor: torch.tensor(mask))")])
@pytest.mark.parametrize("encoder", [0, 1], ids=["plain", "variational"])
def test_f03_an_encoder_mask_of_another_shape_or_type_is_one_usage_error_naming_both(mask, got, encoder):
    enc = _encoders()[encoder]
    name = type(enc).__name__
    with pytest.raises(UsageError) as e:
        enc(torch.randn(2, 3, 4), mask)
    assert str(e.value) == f"{name} mask must be a (B, T) tensor matching x's (B, T) = (2, 3), got {got}"


def test_f05_a_mask_of_the_right_shape_is_still_read_as_before():
    for enc in _encoders():
        x = torch.randn(2, 3, 4)
        out = enc(x, torch.tensor([[1, 1, 0], [1, 1, 1]]))  # (2, 3, 6)
        assert out.shape == (2, 3, 6) and not out[0, 2].any() and out[1, 2].any()


def test_f08_the_crf_and_scalar_mix_say_a_list_mask_and_a_mask_of_another_shape_alike():
    from elmo_features.model.scalar_mix import ScalarMix
    from elmo_tasks.heads.crf import ConditionalRandomField

    crf = ConditionalRandomField(3)
    with pytest.raises(UsageError, match=r"^CRF mask must be a \(B, T\) tensor matching the emissions' \(B, T\) = "
                                         r"\(2, 4\), got \(2, 3\)$"):
        crf.viterbi(torch.randn(2, 4, 3), torch.ones(2, 3))
    with pytest.raises(UsageError, match=r"^CRF mask must be a \(B, T\) tensor .* got a list"):
        crf.neg_log_likelihood(torch.randn(1, 2, 3), torch.zeros(1, 2, dtype=torch.long), [[1, 1]])
    with pytest.raises(UsageError, match=r"^ScalarMix mask must be a \(B, T\) tensor matching the layers' \(B, T\) = "
                                         r"\(2, 4\), got a list"):
        ScalarMix(2)(torch.randn(2, 2, 4, 5), [[1] * 4] * 2)


# ---------------------------------------------------------------- F11: a CRF of no time steps

@pytest.mark.parametrize("rows", [2, 0])
def test_f11_a_crf_of_no_time_steps_says_its_own_rule(rows):
    from elmo_tasks.heads.crf import ConditionalRandomField

    crf = ConditionalRandomField(3)
    em, mask = torch.randn(rows, 0, 3), torch.zeros(rows, 0)
    rule = r"^CRF: every sequence needs at least one token \(mask\[:, 0\] must be true\)$"
    with pytest.raises(ValueError, match=rule):
        crf.viterbi(em, mask)
    with pytest.raises(ValueError, match=rule):
        crf.neg_log_likelihood(em, torch.zeros(rows, 0, dtype=torch.long), mask)
