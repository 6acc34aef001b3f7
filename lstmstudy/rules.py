"""How a claim's rule decides, shared by the claims, the published data's rules and the pages: outcomes,
verdicts and their kind of evidence, regions of a statistic decided on its interval (`Bands`), rules made of
parts (`combine`, `crossover`), and no verdict where a set's noise was never assessed (`assess_noise`).

A rule is decided on an interval, never on a point estimate: an interval that straddles an edge between two
outcomes is `INCONCLUSIVE`. Torch-free: the rendering house judges stored results with it.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from enum import Enum

import numpy as np
import pandas as pd


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
    #: the fewest timings of a row the verdict rests on, where that is too few for a 95% interval (`low_precision`)
    low_precision: int | None = None

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
        few = f" (low precision: a row of {self.low_precision} timings)" if self.low_precision else ""
        if self.parts:
            return "; ".join(f"{name} {low:.3g}-{high:.3g}" for name, low, high in self.parts) + few
        if self.low is not None:
            return f"{self.low:.3g}-{self.high:.3g}{few}"
        return "none (point rule)" if self.ours is not None else "none"

    @property
    def interval_name(self) -> str:
        """What `interval_text` is: a 95% interval, or where a row of too few timings decides, only a spread."""
        return "spread, not a 95% interval" if self.low_precision else "95% interval"

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


#: a row timed fewer times than this in all (5 rounds of one sample, say): its "interval" is the spread of a handful
#: of ratios, so a verdict resting on it alone is not definite (`low_precision`)
LOW_PRECISION_TIMINGS = 7


def timings(round_sizes: object) -> int:
    """How many timed samples a row holds in all (0 where it records no rounds)."""
    return int(sum(round_sizes)) if isinstance(round_sizes, (list, tuple)) else 0


def low_precision(*round_sizes: object) -> int | None:
    """The fewest timings among rows (`round_sizes` each) where one is below `LOW_PRECISION_TIMINGS`, else None:
    a verdict that rests on those rows alone says so and decides nothing. A row that records no rounds (timed in
    one burst) says nothing here: `assess_noise` answers for it."""
    fewest = min((n for n in map(timings, round_sizes) if n), default=0)
    return fewest if 0 < fewest < LOW_PRECISION_TIMINGS else None


def low_precision_words(fewest: int) -> str:
    return (f"low precision: it rests on a row of {fewest} timings, fewer than {LOW_PRECISION_TIMINGS}, too few for a "
            f"definite verdict by itself")


def interval_label(fewest: float | None) -> str:
    """What an interval is called beside its figure: a 95% interval, or, on a low-precision row (`low_precision`, NaN or
    None where it is not one), the spread of its few timings, which is no 95% interval."""
    if fewest is None or fewest != fewest:
        return "95% interval"
    return f"low precision, the spread of {int(fewest)} timings"


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
