"""The claim contract, and what every claim module shares: verdicts decided by a rule stated before the
data, and ratios with confidence intervals computed from the raw samples.

Each claim module (`lstmstudy.claims.cudnn_fallback`, ...) exposes one `Claim` as `CLAIM`: its number,
its one name (module, results folder, notebook stem, ledger), its source, the seed's figures, the default grid per
device kind and `verdicts(frame) -> list[Verdict]`. `registry()` lists them in order, with the kernel
benchmark (`kernels`, measured but never judged) last; the command line, the notebooks and the ledger all
read that list.

The registry is `MODULES` and `GPU_ORDER` below: every other list of the claims is read from it or checked
against it. Adding a claim (an eighth, say) takes:

1. a module, `lstmstudy/claims/<name>.py`, whose `CLAIM` has the number `"08"` (with its tests,
   `tests/test_claim_<name>.py`, as any module has);
2. its notebook, `notebooks/08_<name>.ipynb` (the page's source: copy another claim's);
3. its name at the end of `MODULES` (before `kernel_benchmark`), and its stem in `GPU_ORDER` where a GPU node
   should measure it (`scripts/gpu-node.sh` reads that order from `lstmstudy measure --claims gpu-order`).

The rest follows. `lstmstudy reproduce --claims 08` renders its page into book/claims/; the ledger, the
conclusions and the command line read the registry. Two lines of the book cannot be derived, and the tests name
them, with the line to add, where one is missing: its entry in `_toc.yml` and its row in the table of
`book/intro.md`, whose words are prose (tests/test_toc.py). tests/test_notebooks.py checks the notebooks against
the registry, tests/test_claims.py the numbering, `GPU_ORDER` and the GPU lease's plan.
"""

from __future__ import annotations

import bisect
import copy
import importlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lstmstudy.errors import ParameterError

if TYPE_CHECKING:  # the claims' analysis runs without torch; only measuring needs the sweep
    from lstmstudy.contract import Point
    from lstmstudy.sweep import Deadline, SweepReport
    from lstmstudy.timing import Rounds

#: the registry: every entry `lstmstudy measure` knows, by module, in the order it measures them by default: the
#: claims, numbered in this order (01, 02, ...), then the kernel benchmark
MODULES = ("cudnn_fallback", "cpu_vs_gpu_batch", "mixed_precision", "frameworks_vs_baseline", "bucketing", "energy",
           "parallel_training", "kernel_benchmark")
#: the order a GPU node measures them (`--claims gpu-order`), the most telling first, with each one's plan
#: (`Claim.estimate_s("cuda")`). It is planned from the CPU runs and a review of the grids, not yet measured on a GPU;
#: tests/test_claims.py keeps the first five within 15 minutes of measuring, and the whole within 26.
GPU_ORDER = (
    "06_energy",                  # 24 x 7.5 s            = 180 s (fp32; 5 interleaved energy windows of >= 1 s)
    "01_cudnn_fallback",          # 84 x 1.5 s + 2 x 60 s = 246 s (torch.compiled last, one cold compile each)
    "03_mixed_precision",         # 134 x 1.3 s           = 174 s (44 of them at DeepBench's training shapes)
    "04_frameworks_vs_baseline",  # 132 x 1.3 s           = 172 s (20 of them: raw cuDNN at DeepBench's shapes)
    "02_cpu_vs_gpu_batch",        # 20 x 6.0 s            = 120 s (each point on the GPU and on its host's CPU)
    #                               the first five          892 s, 15 minutes
    "05_bucketing",               # 12 x 12 s             = 144 s (8 layers, whole epochs of real PTB)
    "07_parallel_training",       # 6 x 5.0 s             =  30 s (one GPU: the 2 one-device points; 4 need >= 2)
    "kernels",                    # 84 x 1.5 s + 6 x 60 s = 486 s (torch.compiled last)
)                                 # total                  1552 s, 26 minutes
DEVICE_KINDS = ("cpu", "cuda")
#: the planned time of one point of a `slow` kernel: a cold torch.compile of the LSTM step took 69 s on a
#: 2-core CPU; on a GPU node, the review of the grids puts one at 30-60 s
SLOW_POINT_PLAN_S = {"cpu": 70.0, "cuda": 60.0}



class Outcome(str, Enum):
    REPRODUCED = "reproduced"
    EXCEEDS = "exceeds the seed"  # the whole interval lies above the seed's ceiling
    PARTLY = "partly"
    NOT_REPRODUCED = "not reproduced"
    INCONCLUSIVE = "inconclusive"  # the interval straddles a threshold of the rule
    NOT_MEASURED = "not measured on this hardware"
    CONTEXT = "context only"  # published data the rule cannot decide on (one batch size, no framework figure)
    NOT_ASSESSED = "no verdict: noise not assessed"  # a set timed in one burst per row, before interleaved rounds


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
        """Whether this verdict counts as evidence for or against the seed's (GPU) claim."""
        return self.evidence == GPU and self.outcome not in (Outcome.NOT_MEASURED, Outcome.NOT_ASSESSED)

    @property
    def interval_text(self) -> str:
        """Every interval the rule decided on (each part's, named), or the one interval; 'none (point rule)' for a
        figure without one, 'none' where nothing was measured."""
        if self.parts:
            return "; ".join(f"{name} {low:.3g}-{high:.3g}" for name, low, high in self.parts)
        if self.low is not None:
            return f"{self.low:.3g}-{self.high:.3g}"
        return "none (point rule)" if self.ours is not None else "none"

    def as_dict(self) -> dict:
        return {**asdict(self), "outcome": self.outcome.value, "evidence": self.evidence}


@dataclass(frozen=True)
class Claim:
    """One claim of the study: what the command line, its notebook and the ledger need to know.

    `defaults[kind]` is the grid measured by default on a device kind ('cpu', 'cuda'): keyword arguments
    of `grid(kind=, quick=, **parameters)`, which returns the points (`quick` shrinks them to a smoke
    run). `measure(points, device=, min_time=, quick=, **sweep_options)` times them through `sweep.run`
    and returns its reports. `seconds_per_point[kind]` is the planning estimate of one point's time,
    measuring included (build, warm-up, samples, the profiler's look at what ran), from earlier runs; a point
    of a `slow` kernel is planned at `seconds_per_slow_point[kind]` instead (by default, a cold Inductor compile).

    The GPU plan of each, in the order a GPU node measures them, is beside `GPU_ORDER`.
    """

    number: str  # "01"; "" for the kernel benchmark, which is measured but not judged
    name: str
    statement: str
    seed_figure: str
    rule: str  # how the verdict is decided, stated before the data
    defaults: Mapping[str, Mapping[str, object]]
    grid: Callable[..., list[Point]]
    measure: Callable[..., list[SweepReport]]
    verdicts: Callable[[pd.DataFrame], list[Verdict]]
    seconds_per_point: Mapping[str, float]
    #: kernels measured after every other point of a grid, a group each (compiles, masked Keras loops)
    slow: frozenset[str] = frozenset()
    seconds_per_slow_point: Mapping[str, float] = field(default_factory=lambda: dict(SLOW_POINT_PLAN_S))
    #: parameters that change how the points are measured, not which: passed to `measure`, not `grid`
    measure_options: tuple[str, ...] = ()
    min_time: float = 0.1
    check: Callable[[dict[str, object]], None] = field(default=lambda parameters: None)
    #: where the claim comes from, in words, and the references.bib keys behind it (the ledger cites them)
    source: str = ""
    citations: tuple[str, ...] = ()

    @property
    def stem(self) -> str:
        """The notebook's and the page's name (`01_cudnn_fallback`)."""
        return f"{self.number}_{self.name}" if self.number else self.name

    def parameters(self, kind: str, **overrides: object) -> dict[str, object]:
        """The default grid of a device kind with `overrides` applied; an unknown name is an error."""
        if kind not in DEVICE_KINDS:
            raise ParameterError(f"device kind must be one of {DEVICE_KINDS}, got {kind!r}")
        known = copy.deepcopy(dict(self.defaults[kind]))  # a caller may edit the lists it gets
        if unknown := sorted(set(overrides) - set(known)):
            raise ParameterError(f"claim {self.stem} has no grid parameter {', '.join(map(repr, unknown))}; "
                                 f"its parameters: {', '.join(known)}")
        known.update(overrides)
        self.check(known)
        return known

    def points(self, kind: str, *, quick: bool = False, **overrides: object) -> list[Point]:
        """The grid to measure on a device of `kind`, slow kernels last (each group in grid order)."""
        parameters = self.parameters(kind, **overrides)
        points = self.grid(kind=kind, quick=quick,
                           **{k: v for k, v in parameters.items() if k not in self.measure_options})
        return sorted(points, key=lambda p: p.kernel in self.slow)

    def judge(self, results: pd.DataFrame) -> list[Verdict]:
        """`verdicts`, with no verdict on a set whose noise was not assessed (`assess_noise`)."""
        return assess_noise(self.verdicts(results), results)

    def estimate_s(self, kind: str) -> float:
        """Planned seconds to measure the default grid of `kind` from scratch (points x seconds per point, a slow
        kernel's points at `seconds_per_slow_point`)."""
        points = self.points(kind)
        slow = sum(p.kernel in self.slow for p in points)
        return (len(points) - slow) * self.seconds_per_point[kind] + slow * self.seconds_per_slow_point[kind]

    def run(self, device: str = "auto", *, quick: bool = False, min_time: float | None = None,
            root: Path | None = None, retry_errors: bool = False, rerun: bool = False,
            deadline: Deadline | None = None, progress: bool = True, **overrides: object) -> list[SweepReport]:
        """Measure this claim's grid for `device` (what `lstmstudy measure` and the notebooks call)."""
        from lstmstudy import hardware

        kind = hardware.resolve_device(device).type
        options = {k: v for k, v in self.parameters(kind, **overrides).items() if k in self.measure_options}
        return self.measure(self.points(kind, quick=quick, **overrides), device=device,
                            min_time=self.min_time if min_time is None else min_time, quick=quick, root=root,
                            retry_errors=retry_errors, rerun=rerun, deadline=deadline, slow=self.slow,
                            progress=progress, **options)


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


def registry(*, judged_only: bool = False) -> list[Claim]:
    """Every claim in order (and the kernel benchmark last, unless `judged_only`)."""
    entries = [importlib.import_module(f"lstmstudy.claims.{name}").CLAIM for name in MODULES]
    return [c for c in entries if c.number or not judged_only]


def lookup(wanted: Sequence[str] | None) -> list[Claim]:
    """Claims by number (`01`), name (`cudnn_fallback`) or stem, in the order asked (a short GPU lease measures
    the most telling first), each once; None or 'all': every one, in registry order; 'gpu-order': every one, in
    `GPU_ORDER`."""
    entries = registry()
    if not wanted or list(wanted) == ["all"]:
        return entries
    if list(wanted) == ["gpu-order"]:
        wanted = GPU_ORDER
    chosen: dict[str, Claim] = {}
    for want in wanted:
        matches = [c for c in entries if want in (c.number, c.name, c.stem)]
        if not matches:
            known = ", ".join(["all", "gpu-order", *(c.stem for c in entries)])
            raise ParameterError(f"unknown claim {want!r}; known: {known}")
        chosen.update((c.stem, c) for c in matches if c.stem not in chosen)
    return list(chosen.values())


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


def timing_plan(min_time: float, quick: bool, **changes: object) -> Rounds:
    """How a claim's sweep times each group of compared points (`timing.Rounds`): `min_time` seconds of
    samples per point spread over 5 interleaved rounds, and up to 3 more rounds while a point's interval
    is wider than +-10%. A quick run only checks the plumbing: 2 short rounds. `changes` adapt the plan
    to a claim's steps (fewer warm-up calls where one step takes a second)."""
    from lstmstudy.timing import Rounds  # imports torch; the claims' analysis runs without it

    if quick:
        return replace(Rounds(rounds=2, warmup=1, burst_s=0.005, burst_min_samples=1, extra_rounds=0), **changes)
    return replace(Rounds(), **changes).with_min_time(min_time)
