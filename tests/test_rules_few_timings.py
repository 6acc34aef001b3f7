"""The one rule for rows of few timings (`rules.SIGN_RULE`): paired rounds by a sign test, rows timed apart by a rank
test, each deciding only when its rounds all lie in one region of the rule and agree too often for chance."""

from __future__ import annotations


import pytest

from lstmstudy.rules import Outcome, few_timings, holds_from, rank_rule, sign_rule

BANDS = holds_from(1.0)  # holds at or above 1


@pytest.mark.parametrize(("per_round", "expected"), [
    ([1.1, 1.2, 1.05, 1.3, 1.1], Outcome.REPRODUCED),
    ([0.9, 0.8, 0.95, 0.7, 0.9], Outcome.NOT_REPRODUCED),
    ([1.1, 1.2, 1.05, 1.3], None),            # 0.5^4 = 0.0625 > 0.05
    ([1.1, 1.2, 0.95, 1.3, 1.1], None),       # one round across the edge
    ([1.1, 1.2, float("nan"), 1.3, 1.1, 1.2], None),
])
def test_the_sign_rule(per_round, expected):
    assert sign_rule(BANDS, per_round) == expected


@pytest.mark.parametrize(("top", "bottom", "expected"), [
    ([2.0, 2.1, 2.2], [1.0, 1.1, 1.2], Outcome.REPRODUCED),   # 1 / C(6, 3) = 0.05
    ([2.0, 2.1], [1.0, 1.1], None),                            # 1 / C(4, 2) = 1/6
    ([2.0, 2.1, 2.2], [1.0, 1.1, 2.05], None),                 # 2.0 / 2.05 < 1: one ratio across the edge
    ([1.0, 1.1, 1.2, 1.0, 1.1], [2.0, 2.1, 2.2, 2.0, 2.1], Outcome.NOT_REPRODUCED),
])
def test_the_rank_rule(top, bottom, expected):
    assert rank_rule(BANDS, top, bottom) == expected


def test_few_timings_say_which_rule_decided_or_why_none_did():
    outcome, why = few_timings(BANDS, 5, [1.1, 1.2, 1.05, 1.3, 1.1])
    assert outcome == Outcome.REPRODUCED and "all 5 paired rounds (1.05-1.3)" in why and "0.5^5 = 0.031" in why
    outcome, why = few_timings(BANDS, 3, [], ([2.0, 2.1, 2.2], [1.0, 1.1, 1.2]))
    assert outcome == Outcome.REPRODUCED and "all 9 ratios of its 3 and 3 rounds timed apart" in why
    assert "1/C(6, 3) = 0.050" in why
    outcome, why = few_timings(BANDS, 4, [1.1, 1.2, 1.05, 1.3], ([2.0] * 5, [1.0] * 5))
    assert outcome == Outcome.INCONCLUSIVE and why.startswith("few timings: it rests on a row of 4 timings")
