"""The intervals behind every ratio: over rounds and samples, paired when rows were interleaved."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lstmstudy import stats

DRIFT = [1.0, 1.6, 0.8, 1.3, 1.1]  # a shared machine: each round runs at another speed


def drifting(base: float, rng: np.random.Generator, n: int = 20) -> list[np.ndarray]:
    return [base * d * (1 + 0.01 * rng.standard_normal(n)) for d in DRIFT]


def test_a_row_splits_into_its_rounds_and_an_old_row_is_one_round():
    assert [r.tolist() for r in stats.rounds_of([1, 2, 3, 4, 5], [2, 3])] == [[1, 2], [3, 4, 5]]
    assert [r.tolist() for r in stats.rounds_of([1, 2, 3])] == [[1, 2, 3]]
    with pytest.raises(ValueError, match="do not add up"):
        stats.rounds_of([1, 2, 3], [1, 1])


def test_the_time_is_the_median_of_round_medians():
    assert stats.center([np.array([1.0, 2, 9]), np.array([3.0, 3, 3]), np.array([10.0, 11, 12])]) == 3.0


def test_drift_between_rounds_widens_the_interval_of_a_time():
    rng = np.random.default_rng(1)
    rounds = drifting(1.0, rng)
    _, lo, hi = stats.bootstrap_median(rounds)
    one_burst = rounds[0]
    _, lo1, hi1 = stats.bootstrap_median([one_burst])
    assert (hi - lo) > 10 * (hi1 - lo1)  # a single burst hides the drift; the rounds show it
    assert lo <= stats.center(rounds) <= hi


def test_an_interleaved_ratio_cancels_drift_that_an_unpaired_one_cannot():
    rng = np.random.default_rng(2)
    slow, fast = drifting(3.0, rng), drifting(1.0, rng)
    ratio, lo, hi = stats.bootstrap_ratio(slow, fast, paired=True)
    assert ratio == pytest.approx(3.0, rel=0.01) and hi - lo < 0.1
    unpaired, ulo, uhi = stats.bootstrap_ratio(slow, fast, paired=False)
    assert uhi - ulo > 5 * (hi - lo) and ulo < 3.0 < uhi


def test_paired_rows_need_the_same_rounds():
    with pytest.raises(ValueError, match="same rounds"):
        stats.bootstrap_ratio([np.ones(3)] * 5, [np.ones(3)] * 4, paired=True)


def row(samples, sizes, seed):
    return pd.Series({"samples": samples, "round_sizes": sizes, "round_seed": seed})


def test_rows_pair_only_when_timed_in_the_same_rounds():
    a, b = row([2.0, 2.0, 4.0, 4.0], [2, 2], 7), row([1.0, 1.0, 2.0, 2.0], [2, 2], 7)
    assert stats.interleaved(a, b) and stats.row_ratio(a, b)[0] == 2.0
    assert not stats.interleaved(a, row([1.0, 1.0, 2.0, 2.0], [2, 2], 8))  # another group
    assert not stats.interleaved(a, row([1.0, 1.0, 2.0, 2.0], [], ""))  # a row stored before rounds
    assert not stats.interleaved(row([1.0], [], ""), row([1.0], [], ""))
    assert not stats.interleaved({"samples": [1.0]}, {"samples": [1.0]})  # a frame without the columns


def test_an_old_row_pair_gives_the_ratio_of_medians():
    ratio, lo, hi = stats.row_ratio({"samples": [2.0, 4.0, 6.0]}, {"samples": [1.0, 2.0, 3.0]})
    assert ratio == 2.0 and lo <= 2.0 <= hi
