"""`stats.one_per_round`: values measured once per round (energy windows) through the rounds' bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from lstmstudy.stats import bootstrap_median, one_per_round, percentile_interval, ratio_replicates


def test_each_value_is_a_round_of_one_sample():
    rounds = one_per_round([3.0, 1.0, 2.0])
    assert [r.tolist() for r in rounds] == [[3.0], [1.0], [2.0]]


def test_the_median_of_five_windows_and_its_interval_spans_them():
    # the bootstrap median of five values falls on the smallest or largest in about 6% of replicates each, so a
    # confidence interval would run from the smallest to the largest window; a second run's median has as much
    # room of its own, so the re-run interval holds every window and a little more on each side
    median, lo, hi = bootstrap_median(one_per_round([10.0, 12.0, 11.0, 9.0, 13.0]))
    assert median == 11.0 and 7.5 < lo < 9.0 and 13.0 < hi < 15.0


def test_a_paired_ratio_is_formed_window_by_window():
    # drift that doubles both in window 3 cancels: every per-window ratio is 2
    ratio, boot = ratio_replicates(one_per_round([2.0, 2.0, 4.0]), one_per_round([1.0, 1.0, 2.0]), paired=True)
    assert ratio == pytest.approx(2.0) and np.allclose(boot, 2.0)
    assert percentile_interval(boot) == pytest.approx((2.0, 2.0))
    unpaired, boot = ratio_replicates(one_per_round([2.0, 2.0, 4.0]), one_per_round([1.0, 1.0, 2.0]))
    assert unpaired == pytest.approx(2.0) and percentile_interval(boot)[1] > 2.0  # the drift now widens it
