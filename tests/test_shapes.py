from __future__ import annotations

import pytest

from lstmstudy.errors import InvalidShape
from lstmstudy.shapes import POINTWISE_FLOPS_PER_UNIT, LSTMShape


@pytest.mark.parametrize("field", ["batch", "timesteps", "features", "hidden", "layers"])
@pytest.mark.parametrize("bad", [0, -3, 1.5, "8", True, None])
def test_every_size_must_be_a_positive_integer(field, bad):
    sizes = dict(batch=1, timesteps=2, features=3, hidden=4, layers=1)
    with pytest.raises(InvalidShape, match=f"LSTMShape.{field} must be a positive integer"):
        LSTMShape(**{**sizes, field: bad})


def test_bidirectional_must_be_a_bool():
    with pytest.raises(InvalidShape, match="bidirectional"):
        LSTMShape(1, 1, 1, 1, bidirectional="yes")


def test_flops_follow_the_stated_formula():
    s = LSTMShape(batch=2, timesteps=3, features=5, hidden=7)
    per_step = 8 * 7 * (5 + 7) + POINTWISE_FLOPS_PER_UNIT * 7
    assert s.flops() == per_step * 2 * 3
    assert s.flops("train") == 3 * s.flops()


def test_flops_of_stacked_bidirectional_layers():
    s = LSTMShape(batch=1, timesteps=1, features=5, hidden=7, layers=2, bidirectional=True)
    first = 8 * 7 * (5 + 7) + POINTWISE_FLOPS_PER_UNIT * 7
    second = 8 * 7 * (14 + 7) + POINTWISE_FLOPS_PER_UNIT * 7
    assert s.flops() == 2 * (first + second)


def test_unknown_phase():
    with pytest.raises(ValueError, match="phase"):
        LSTMShape(1, 1, 1, 1).flops("eval")
