"""How a claim's rule decides, shared by the claims, the published data's rules and the pages: outcomes,
verdicts and their kind of evidence, regions of a statistic decided on its interval (`Bands`), rules made of
parts (`combine`, `crossover`), no verdict where a set's noise was never assessed (`assess_noise`), and what a GPU
set's rows timed (`gpu_timing`, `mark_host_bound`).

A rule is decided on an interval, never on a point estimate: an interval that straddles an edge between two
outcomes is `INCONCLUSIVE`. Torch-free: the rendering house judges stored results with it.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from enum import Enum

import numpy as np
import pandas as pd

from lstmstudy.observe import HOST_BOUND
from lstmstudy.stats import NOISY_WORDS


class Outcome(str, Enum):
    REPRODUCED = "reproduced"
    EXCEEDS = "exceeds the seed"  # the whole interval lies above the seed's ceiling
    PARTLY = "partly"
    NOT_REPRODUCED = "not reproduced"
    INCONCLUSIVE = "inconclusive"  # the interval straddles a threshold of the rule
    NOT_MEASURED = "not measured on this hardware"
    CONTEXT = "context only"  # published data the rule cannot decide on (one batch size, no framework figure)
    NOT_ASSESSED = "no verdict: noise not assessed"  # a set timed in one burst per row, before interleaved rounds
    #: a hypothesis of this study's own, which no seed makes (claim 6): it holds or not, never "reproduced", and no
    #: count of reproductions includes it
    HOLDS = "holds"
    DOES_NOT_HOLD = "does not hold"


#: what each outcome word means wherever the book uses it: the landing page's glossary (`glossary`), which every claim
#: page's opening box links to
MEANINGS: dict[Outcome, str] = {
    Outcome.REPRODUCED: "the whole interval the rule decides on lies in the region it calls the seed's figure (its "
                        "stated band around it)",
    Outcome.EXCEEDS: "the whole interval lies above the seed's figure: the effect is there, and larger than the seed "
                     "said",
    Outcome.PARTLY: "the claim holds in part, and each claim's rule says which part: for a rule on one figure, the "
                    "effect is there but its whole interval lies below the seed's band; for a rule of parts, some "
                    "parts hold and the others fail",
    Outcome.NOT_REPRODUCED: "the whole interval lies where the rule says the claim fails",
    Outcome.INCONCLUSIVE: "the interval straddles an edge between two outcomes, so the data cannot tell which; or a "
                          "row of few timings whose rounds are too few, or not all in one region, to decide by the "
                          "rule for few timings (see *few timings*)",
    Outcome.HOLDS: "the study's own hypothesis, which no seed makes (claim 6), holds; never counted as a reproduction",
    Outcome.DOES_NOT_HOLD: "the study's own hypothesis does not hold; never counted against a seed",
    Outcome.NOT_MEASURED: "the rows the rule reads are not in this set (a GPU claim on a CPU set, say); nothing is "
                          "borrowed from another set or from published figures",
    Outcome.NOT_ASSESSED: "each row was timed in one burst, before interleaved rounds existed, so its interval holds "
                          "no run-to-run drift: the figure is shown, no outcome is given",
    Outcome.CONTEXT: "published figures the rule cannot decide on (one batch size, no repeat, or without the claim's "
                     "mechanism): cited beside the verdicts, never one",
}


def why_not_measured(ours_text: str) -> str:
    """Why a set could not decide a claim: a not-measured verdict's words up to their first colon ('not measured at
    the paper's sizes', 'awaits the loop baseline'), what the opening boxes and the landing table name a GPU set by."""
    return ours_text.split(":")[0].strip()


#: every seed's claim is about GPUs: a verdict on a CPU set tests the claim's CPU analogue, never the claim;
#: a published one was measured by others on their GPUs (`lstmstudy.published`) and is never counted as ours
GPU, CPU_ANALOGUE, PUBLISHED = "GPU", "CPU analogue", "published"
#: the `hardware_id` of a verdict on published data: `published:<source key>/<card>`
PUBLISHED_PREFIX = "published:"


@dataclass(frozen=True)
class Verdict:
    """One claim on one hardware set: the seed's figure, ours with its 95% interval (`low`, `high`; None where
    the rule decides on something else), and the outcome of the stated rule. `parts`: where a rule decides on
    more than one interval, each as (name, low, high), so a page shows every interval that decided."""

    claim: str
    statement: str
    hardware_id: str
    seed_figure: str
    ours: float | None
    ours_text: str
    outcome: Outcome
    rule: str
    low: float | None = None
    high: float | None = None
    parts: tuple[tuple[str, float, float], ...] = ()
    #: the fewest timings of a row the verdict rests on, where that is too few for a 95% interval (`fewest_timings`)
    fewest_timings: int | None = None
    #: whether host-bound rows are among those it rests on (`mark_host_bound`)
    host_bound: bool = False

    @property
    def evidence(self) -> str:
        """`GPU` for a verdict on a GPU set; `CPU analogue` on a CPU set (or arithmetic that needs no device);
        `published` on data others measured."""
        if self.hardware_id.startswith(PUBLISHED_PREFIX):
            return PUBLISHED
        return GPU if self.hardware_id.startswith("cuda-") else CPU_ANALOGUE

    @property
    def evidence_label(self) -> str:
        """What a page calls the evidence: `evidence`, or 'not measured' where nothing of ours was measured (a CPU
        set on which a claim could not be measured is no CPU analogue of it)."""
        return "not measured" if self.outcome == Outcome.NOT_MEASURED and self.evidence != PUBLISHED \
            else self.evidence

    @property
    def counts(self) -> bool:
        """Whether this verdict counts as evidence for or against the seed's (GPU) claim: a hypothesis of the study's
        own has no seed."""
        return self.evidence == GPU and self.outcome not in (Outcome.NOT_MEASURED, Outcome.NOT_ASSESSED, Outcome.HOLDS,
                                                             Outcome.DOES_NOT_HOLD)

    @property
    def interval_text(self) -> str:
        """Every interval the rule decided on (each part's, named), or the one interval; 'none (point rule)' for a
        figure without one, 'none' where nothing was measured."""
        few = f" (few timings: a row of {self.fewest_timings})" if self.fewest_timings else ""
        if self.parts:
            return "; ".join(f"{name} {low:.3g}-{high:.3g}" for name, low, high in self.parts) + few
        if self.low is not None:
            return f"{self.low:.3g}-{self.high:.3g}{few}"
        return "none (point rule)" if self.ours is not None else "none"

    @property
    def interval_name(self) -> str:
        """What `interval_text` is: a 95% interval, or where a row of too few timings decides, a rough range (the
        same bootstrap, over too few timings to hold a second run 95% of the time)."""
        return "rough range from few timings, not a 95% interval" if self.fewest_timings else "95% interval"

    @property
    def brief(self) -> str:
        """The figure in a few characters, for the landing table: '9.54 (6.51-14.2)', each part's interval, or the
        point alone; '' where nothing was measured."""
        if self.parts:
            return self.interval_text
        if self.ours is None:
            return ""
        return f"{self.ours:.3g} ({self.low:.3g}-{self.high:.3g})" if self.low is not None else f"{self.ours:.3g}"

    def as_dict(self) -> dict:
        return {**asdict(self), "outcome": self.outcome.value, "evidence": self.evidence}


ONE_BURST_WORDS = ("no verdict: each row was timed in one burst, before interleaved rounds existed, so its interval "
                   "holds no run-to-run drift (noise not assessed); re-measure this hardware to judge it")


def assess_noise(verdicts: Sequence[Verdict], results: pd.DataFrame) -> list[Verdict]:
    """The verdicts, except on a set timed in one burst per row (`one_burst_sets`), or a pair with such a set:
    there the figure stays and the outcome is `NOT_ASSESSED`. The project's coverage benchmark found that such
    a 95% interval held a second run's ratio far less often than 95% of the time (results/interval_coverage),
    so it cannot decide a rule."""
    bursts = one_burst_sets(results)
    return [replace(v, outcome=Outcome.NOT_ASSESSED, ours_text=f"{v.ours_text}; {ONE_BURST_WORDS}")
            if bursts.intersection(v.hardware_id.split(" vs ")) and v.outcome != Outcome.NOT_MEASURED else v
            for v in verdicts]


def one_burst_sets(results: pd.DataFrame) -> set[str]:
    """The hardware sets none of whose `ok` rows was timed in two or more rounds (those measured before
    interleaved rounds existed; a set that timed nothing is not one of them)."""
    if results.empty:
        return set()
    ok = results[results.status == "ok"]
    rounds = ok.round_sizes.map(lambda sizes: len(sizes) if isinstance(sizes, (list, tuple)) else 0)
    most = rounds.groupby(ok.hardware_id).max()
    return set(most[most < 2].index)


#: a GPU row is host-bound (`results.load`'s `host_bound`) where its time per call is over `observe.HOST_BOUND` times
#: the GPU's own work in it (`device_s`): the GPU waited on the host's launches, so the row timed the host
HOST_BOUND_WORDS = f"their time is over {HOST_BOUND:g}x the GPU's own work"
#: what a page says beside a verdict that rests on host-bound rows (`Verdict.host_bound`), wherever it shows it
RESTS_ON_HOST_BOUND = "rests on host-bound rows: the host's launches, not the GPU, set their time"
#: what a page says of a GPU row without the GPU's own time per call (`device_s`): one stored before it was, say
NO_DEVICE_TIME = "device time not recorded"


def gpu_timing(rows: pd.DataFrame) -> str:
    """What a GPU set's timed rows say of what they timed, where a page describes the set: how many are host-bound,
    or that they recorded no device time, and how many ran while the GPU named a clock slowdown (`results.load`'s
    `throttled`), where any did; '' for a CPU set."""
    ok = rows[(rows.status == "ok") & rows.hardware_id.str.startswith("cuda-")] if not rows.empty else rows
    if ok.empty:
        return ""
    bound = ok["host_bound"].dropna() if "host_bound" in ok else pd.Series(dtype=object)
    if bound.empty:
        timers = ok["timer"].fillna("").astype(bool) if "timer" in ok else pd.Series(False, index=ok.index)
        words = [f"{NO_DEVICE_TIME}: rows stored before it was" if not timers.any() else
                 f"{NO_DEVICE_TIME} for its rows"]
    else:
        without = len(ok) - len(bound)
        words = [f"{int(bound.sum())} of {len(bound)} timed rows host-bound ({HOST_BOUND_WORDS})"
                 + (f", {without} without device time" if without else "")]
    throttled = int(ok["throttled"].eq(True).sum()) if "throttled" in ok else 0
    if throttled:
        words.append(f"{throttled} of {len(ok)} timed rows ran while the GPU named a clock slowdown (throttled)")
    return "; ".join(words)


def mark_host_bound(verdicts: Sequence[Verdict], results: pd.DataFrame) -> list[Verdict]:
    """The verdicts, a GPU one marked `host_bound` where its set holds host-bound `ok` rows of the claim (near enough
    the rows its rule reads: which rows each rule reads is its own)."""
    if results.empty or "host_bound" not in results:
        return list(verdicts)
    ok = results[results.status == "ok"]
    bound = set(ok.loc[ok.host_bound.eq(True), "hardware_id"])
    return [replace(v, host_bound=True) if v.evidence == GPU and v.outcome != Outcome.NOT_MEASURED
            and bound.intersection(v.hardware_id.split(" vs ")) else v for v in verdicts]


@dataclass(frozen=True)
class Bands:
    """A rule's regions of a statistic, decided on its interval, not its point estimate.

    `edges` (increasing) cut the line into `len(edges) + 1` regions, each half-open [edge, next edge)
    with its outcome in `outcomes`. An interval inside one region gets that region's outcome; one that
    straddles an edge between two outcomes is `INCONCLUSIVE`: the data cannot tell which side the claim is on.
    """

    edges: tuple[float, ...]
    outcomes: tuple[Outcome, ...]

    def __post_init__(self) -> None:
        if len(self.outcomes) != len(self.edges) + 1 or list(self.edges) != sorted(set(self.edges)):
            raise ValueError(f"bands need increasing edges and one outcome more than edges: {self}")

    def region(self, value: float) -> Outcome:
        return self.outcomes[bisect.bisect_right(self.edges, value)]

    def possible(self, low: float | None, high: float | None) -> Possible:
        """The outcomes of every region the interval [low, high] touches."""
        if low is None or high is None or not (np.isfinite(low) and np.isfinite(high)):
            return frozenset({Outcome.NOT_MEASURED})
        first, last = bisect.bisect_right(self.edges, low), bisect.bisect_right(self.edges, high)
        return frozenset(self.outcomes[first:last + 1])

    def decide(self, low: float | None, high: float | None) -> Outcome:
        return settle(self.possible(low, high))

    def span(self, outcome: Outcome) -> tuple[float, float]:
        """The first region the rule gives `outcome`, as (low, high) edges (0 or inf at the ends): a plot's band."""
        i = self.outcomes.index(outcome)
        edges = (0.0, *self.edges, float("inf"))
        return edges[i], edges[i + 1]


#: the outcomes a result's interval still allows (one when the data decide it)
Possible = frozenset[Outcome]


def _combine_decided(parts: Sequence[Outcome]) -> Outcome:
    if unknown := set(parts) - {Outcome.REPRODUCED, Outcome.NOT_REPRODUCED, Outcome.PARTLY}:
        raise ValueError(f"a rule's parts hold, fail or hold partly; got {sorted(o.value for o in unknown)}")
    if Outcome.PARTLY in parts or {Outcome.REPRODUCED, Outcome.NOT_REPRODUCED} <= set(parts):
        return Outcome.PARTLY
    return parts[0]


def combine(parts: Sequence[Possible],
            decided: Callable[[Sequence[Outcome]], Outcome] = _combine_decided) -> Possible:
    """What a rule made of parts can still be, given what each part can still be (`Bands.possible`).

    Decided parts combine as `decided` says; by default: reproduced if every part holds (REPRODUCED), not
    reproduced if every part fails (NOT_REPRODUCED), partly if some hold and some fail (or one is partly). An
    undecided part counts every way it can still go, so the whole is undecided only if that changes the
    outcome. A part that was not measured leaves the whole rule not measured: a rule is never decided on some
    of its parts.
    """
    if not parts or any(Outcome.NOT_MEASURED in p for p in parts):
        return frozenset({Outcome.NOT_MEASURED})
    return frozenset(decided(choice) for choice in itertools.product(*parts))


def crossover(small: Outcome, large: Outcome) -> Outcome:
    """A crossover claim ("A is faster at small sizes, B at large") from its two decided parts: `small` holds when
    A is faster at the small end, `large` when B is at the large end. As `combine`, except that B faster at both
    ends is no crossover at all: not reproduced, not partly. Claims 2 (CPU vs GPU) and 4 (Mode 1 vs Mode 2) both
    judge this way."""
    if small == Outcome.NOT_REPRODUCED and large == Outcome.REPRODUCED:
        return Outcome.NOT_REPRODUCED
    return _combine_decided([small, large])


def crossover_possible(small: Possible, large: Possible) -> Possible:
    """`crossover` over every way two undecided parts (`Bands.possible`) can still go (`combine`)."""
    return combine([small, large], lambda ends: crossover(*ends))


def settle(possible: Possible) -> Outcome:
    """The outcome the data decide, or INCONCLUSIVE while they allow more than one."""
    return next(iter(possible)) if len(possible) == 1 else Outcome.INCONCLUSIVE


#: a row timed fewer times than this in all (5 rounds of one sample, say): its bootstrap "interval" is a rough range
#: over a handful of ratios, no 95% interval, so it decides only by the rule for few timings (`few_timings`)
FEW_TIMINGS = 7


def timings(round_sizes: object) -> int:
    """How many timed samples a row holds in all (0 where it records no rounds)."""
    return int(sum(round_sizes)) if isinstance(round_sizes, (list, tuple)) else 0


def fewest_timings(*round_sizes: object) -> int | None:
    """The fewest timings among rows (`round_sizes` each) where one is below `FEW_TIMINGS`, else None:
    a verdict that rests on those rows alone says so and decides nothing. A row that records no rounds (timed in
    one burst) says nothing here: `assess_noise` answers for it."""
    fewest = min((n for n in map(timings, round_sizes) if n), default=0)
    return fewest if 0 < fewest < FEW_TIMINGS else None


def few_timings_words(fewest: int) -> str:
    """Why a rule resting on a row of few timings stays undecided (`few_timings`: its rounds do not settle it)."""
    return (f"few timings: it rests on a row of {fewest} timings, fewer than {FEW_TIMINGS}, too few for a "
            f"95% interval, and too few, or too scattered, for the rule for few timings")


#: the one rule for rows of few timings (a sign test): were the truth on an edge of a rule's bands, each paired
#: round's ratio would fall on either side of it with even odds, so n rounds all on one side happen by chance with
#: probability 0.5^n. Rounds all in one region decide it when 0.5^n <= this: 5 of 5 decide, 4 of 4 do not
SIGN_RULE_ALPHA = 0.05
SIGN_RULE = (f"a row of fewer than {FEW_TIMINGS} timings gives no 95% interval, but its rounds decide when "
             f"every ratio they give lies in one region of the rule and so many agree by chance with probability "
             f"<= {SIGN_RULE_ALPHA}: two rows timed in the same rounds give one ratio a round, and n of them decide "
             f"when 0.5^n <= {SIGN_RULE_ALPHA} (5 or more: a sign test); two rows timed apart, of n and m rounds, give "
             f"every ratio of one's round medians to the other's, and decide when 1 / C(n + m, n) <= "
             f"{SIGN_RULE_ALPHA} (3 and 3 rounds or more: a rank test); otherwise it is inconclusive")


#: the other words a verdict uses, defined once beside the outcome words (`glossary`)
TERMS = {
    "95% interval": "where a second run of the same measurement lands 95% of the time (a re-run interval: a "
                    "bootstrap over processes, rounds and samples; the methods page gives how)",
    "few timings": SIGN_RULE,
    "CPU analogue": "a GPU claim measured on a CPU through the CPU's own counterpart of its mechanism (oneDNN for "
                    "cuDNN, bf16 for fp16, say): reported beside the GPU verdicts and never counted as a "
                    "reproduction",
    "published": "measured by others on their GPUs, cited, judged by the same rule only where it measured the "
                 "claim's mechanism, and never counted as ours",
    "noisy": f"a row whose own 95% re-run interval stayed wider than the timing plan's bound after every round "
             f"({NOISY_WORDS}); figures ring it in red, and a verdict resting on it says so",
    "host-bound": f"a GPU row whose time per call is over {HOST_BOUND:g}x the GPU's own work in it (its kernels' "
                  f"summed durations, from a profiled pass apart from the timed rounds): the GPU waited on the host's "
                  f"launches, so the row timed the host; a verdict resting on such rows says so",
    "modelled": "a figure from a cost model, not a measurement (claim 7 on one GPU): valid only under the "
                "assumptions its page lists, never a verdict",
}


def glossary() -> str:
    """The glossary of outcome words and terms as MyST Markdown, under the label the claim pages link to; `lstmstudy
    reproduce` writes it into the book (`toc.GLOSSARY`), which the landing page includes."""
    words = [f"- **{o.value}**: {MEANINGS[o]}." for o in Outcome]
    terms = [f"- **{name}**: {meaning}." for name, meaning in TERMS.items()]
    return "\n".join(["% written by `lstmstudy reproduce` from lstmstudy.rules.MEANINGS and TERMS: edit those",
                       "(outcome-words)=", "## What the verdicts' words mean", "",
                       "Every verdict in this book is one of these outcomes of its claim's rule:", "", *words, "",
                       "and uses these terms:", "", *terms]) + "\n"


def sign_rule(bands: Bands, per_round: Sequence[float]) -> Outcome | None:
    """The region every one of `per_round` (two interleaved rows' ratio in each round: `stats.row_round_ratios`)
    lies in, where they are enough to decide (`SIGN_RULE_ALPHA`); None where they are too few or disagree."""
    values = [float(v) for v in per_round if np.isfinite(v)]
    if not values or len(values) != len(per_round) or 0.5 ** len(values) > SIGN_RULE_ALPHA:
        return None
    regions = {bands.region(v) for v in values}
    return regions.pop() if len(regions) == 1 else None


def rank_rule(bands: Bands, numerator: Sequence[float], denominator: Sequence[float]) -> Outcome | None:
    """The region every ratio of a `numerator` round median to a `denominator` one lies in (two rows timed apart:
    `stats.row_round_medians`), where their counts are enough to decide; None where they are too few or disagree.
    Were the truth on an edge, every ordering of the n + m scaled medians would be equally likely, and all n of
    one side beyond all m of the other happens in 1 of C(n + m, n)."""
    top, bottom = [float(v) for v in numerator], [float(v) for v in denominator]
    if not (top and bottom) or not np.all(np.isfinite([*top, *bottom])) or min(bottom) <= 0:
        return None
    if 1 / math.comb(len(top) + len(bottom), len(top)) > SIGN_RULE_ALPHA:
        return None
    regions = {bands.region(min(top) / max(bottom)), bands.region(max(top) / min(bottom))}
    return regions.pop() if len(regions) == 1 else None  # the extremes in one region: every ratio between is too


def few_timings(bands: Bands, fewest: int, per_round: Sequence[float],
                apart: tuple[Sequence[float], Sequence[float]] = ((), ())) -> tuple[Outcome, str]:
    """The outcome of a rule resting on a row of `fewest` timings (`fewest_timings`), and why, in words: decided by
    the sign rule where paired rounds (`per_round`) agree, by the rank rule where two rows timed apart (`apart`:
    each one's round medians) agree, else inconclusive."""
    head = f"a row of {fewest} timings, too few for a 95% interval, decided by the rule for few timings: "
    if len(per_round) and (decided := sign_rule(bands, per_round)) is not None:
        spread = f"{min(per_round):.3g}-{max(per_round):.3g}"
        return decided, (f"{head}all {len(per_round)} paired rounds ({spread}) lie in one region of the rule, which "
                         f"happens by chance with probability 0.5^{len(per_round)} = {0.5 ** len(per_round):.3f} at most")
    top, bottom = apart
    if not len(per_round) and (decided := rank_rule(bands, top, bottom)) is not None:
        n, m = len(top), len(bottom)
        spread = f"{min(top) / max(bottom):.3g}-{max(top) / min(bottom):.3g}"
        return decided, (f"{head}all {n * m} ratios of its {n} and {m} rounds timed apart ({spread}) lie in one region "
                         f"of the rule, which happens by chance with probability 1/C({n + m}, {n}) = "
                         f"{1 / math.comb(n + m, n):.3f} at most")
    return Outcome.INCONCLUSIVE, few_timings_words(fewest)


def span(values: Iterable[float | None], sep: str = "-") -> str:
    """Some sets' figures as a page prints their range, at 3 significant figures: '1.5-1.86', one figure where both
    ends print alike, '' where none has a figure (a missing one is skipped)."""
    found = sorted(float(v) for v in values if v is not None and v == v)
    if not found:
        return ""
    low, high = f"{found[0]:.3g}", f"{found[-1]:.3g}"
    return low if low == high else f"{low}{sep}{high}"


def interval_label(fewest: float | None) -> str:
    """What an interval is called beside its figure: a 95% interval, or, on a row of few timings (`fewest_timings`,
    NaN or None where it is not one), a rough range: the same bootstrap over too few timings, which is no 95%
    interval."""
    if fewest is None or fewest != fewest:
        return "95% interval"
    return f"few timings ({int(fewest)}), a rough range:"


#: how a page names the outcome of one part of a rule
PART_WORDS = {Outcome.REPRODUCED: "holds", Outcome.NOT_REPRODUCED: "fails",
              Outcome.INCONCLUSIVE: "undecided (its interval straddles the threshold)",
              Outcome.NOT_MEASURED: "not measured (no interval)"}


def holds_from(threshold: float) -> Bands:
    """A part that holds when the whole interval lies at or above `threshold`."""
    return Bands((threshold,), (Outcome.NOT_REPRODUCED, Outcome.REPRODUCED))


def holds_below(threshold: float) -> Bands:
    """A part that holds when the whole interval lies below `threshold`."""
    return Bands((threshold,), (Outcome.REPRODUCED, Outcome.NOT_REPRODUCED))
