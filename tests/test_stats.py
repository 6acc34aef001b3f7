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


def simulated_run(rng: np.random.Generator, process_sd: float, processes: int = 3, rounds: int = 2,
                  round_sd: float = 0.02, sample_sd: float = 0.05, samples: int = 10) -> list[np.ndarray]:
    """One run's rounds of a time of 1 (log-normal noise): each process shifted by its own offset, each round by
    its own, each sample by its own."""
    out = []
    for _ in range(processes):
        shift = rng.normal(0, process_sd)
        out += [np.exp(shift + rng.normal(0, round_sd) + rng.normal(0, sample_sd, samples)) for _ in range(rounds)]
    return out


def test_a_second_run_lands_inside_the_first_runs_interval_when_processes_differ():
    """What benchmarks/interval_coverage.py checks on a real machine, on simulated runs whose processes differ more
    than their rounds do: drawing the processes keeps the interval honest, drawing only rounds does not."""
    rng = np.random.default_rng(7)
    inside = {"processes drawn": 0, "rounds only": 0}
    trials = 150
    for trial in range(trials):
        first, second = simulated_run(rng, 0.05), simulated_run(rng, 0.05)
        again = stats.center(second)
        _, lo, hi = stats.bootstrap_median(first, processes=[2, 2, 2], seed=trial)
        inside["processes drawn"] += lo <= again <= hi
        _, lo, hi = stats.bootstrap_median(first, seed=trial)
        inside["rounds only"] += lo <= again <= hi
    assert inside["processes drawn"] / trials >= 0.9
    assert inside["rounds only"] / trials < 0.86


def test_a_ratio_over_processes_draws_the_same_processes_for_both_rows_and_refuses_others():
    rng = np.random.default_rng(3)
    slow = [r * 2 for r in simulated_run(rng, 0.05)]
    fast = simulated_run(rng, 0.05)
    ratio, lo, hi = stats.bootstrap_ratio(slow, fast, paired=True, processes=([2, 2, 2], [2, 2, 2]))
    assert lo < ratio < hi and 1.5 < ratio < 2.6
    with pytest.raises(ValueError, match="same rounds"):
        stats.bootstrap_ratio(slow, fast, paired=True, processes=([2, 2, 2], [3, 3]))
    with pytest.raises(ValueError, match="do not add up"):
        stats.bootstrap_median(fast, processes=[2, 2])
