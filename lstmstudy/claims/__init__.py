"""The claim contract and the registry of claims.

Each claim module (`lstmstudy.claims.cudnn_fallback`, ...) exposes one `Claim` as `CLAIM`: its number,
its one name (module, results folder, notebook stem, ledger), its source, the seed's figures, the default grid per
device kind and `verdicts(frame) -> list[Verdict]`, decided by a rule stated before the data (`lstmstudy.rules`).
`registry()` finds them, every module of this package, and lists them in claim order, with the kernel benchmark
(`kernels`, measured but never judged) last; the command line, the notebooks and the ledger all read that list,
and every other list of the claims is read from it or checked against it. Adding a claim (an eighth, say) takes:

1. a module, `lstmstudy/claims/<name>.py`, whose `CLAIM` has the number `"08"` (with its tests,
   `tests/test_claim_<name>.py`, as any module has);
2. its notebook, `notebooks/08_<name>.ipynb` (the page's source: copy another claim's).

A GPU node measures it after the claims `GPU_ORDER` puts first (`scripts/gpu-node.sh` runs `lstmstudy measure
--plan lease`: the judged claims of `LEASE_ORDER` on their `Lease` grids, then the default grids in that order);
its stem there measures it sooner. The rest follows. `lstmstudy reproduce
--claims 08` renders its page into book/claims/, which `_toc.yml` takes whole, and writes the landing page's table
of claims (`ledger.claims_table`, from each claim's `says`); the ledger, the conclusions and the command line read
the registry. tests/test_toc.py checks the book against the registry, tests/test_notebooks.py the notebooks,
tests/test_claims.py the numbering, `GPU_ORDER` and the GPU lease's plan.
"""

from __future__ import annotations

import copy
import importlib
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from lstmstudy.errors import ParameterError
from lstmstudy.results import config_text
from lstmstudy.rules import Bands, Verdict, assess_noise, mark_host_bound

if TYPE_CHECKING:  # the claims' analysis runs without torch; only measuring needs the sweep
    from lstmstudy.contract import Point
    from lstmstudy.sweep import Deadline, SweepReport

#: the order a GPU node measures them (`--claims gpu-order`), the most telling first, with each one's plan
#: (`Claim.estimate_s("cuda")`); a claim not named here comes after them, in claim order. The seconds per point are
#: what the first lease measured (an H100 80GB HBM3, 2026-11-26: the rows' `created_at` over each claim's points,
#: the lease grid and the default one), rounded up, plus what each row's device time (a profiled pass) and
#: `stats.MIN_CALLS` calls a row add (the calls its stored rows lacked, times their medians), except where marked
#: planned: the rows issue 44 added (claim 3 at the paper's sizes, claim 4 queued and against the C++ loop, claim 6's
#: paired idle windows) have not been measured yet. tests/test_claims.py keeps the first five within 21 minutes of
#: measuring, and the whole within 36: the default grids take two or three 15-minute leases.
GPU_ORDER = (
    "06_energy",                  # 20 x 16 s              = 320 s (planned: 5 windows of >= 1 s between idle ones)
    "01_cudnn_fallback",          # 84 x 0.9 s + 2 x 60 s  = 196 s (torch.compiled last, one cold compile each)
    "03_mixed_precision",         # 208 points             = 182 s (planned per point from FLOPs: planned_point_s)
    "04_frameworks_vs_baseline",  # 252 x 1.4 s            = 353 s (planned: each row per call and queued, cudnn.loop)
    "02_cpu_vs_gpu_batch",        # 20 x 8.0 s             = 160 s (each point on the GPU and on its host's CPU)
    #                               the first five          1211 s, 20 minutes
    "05_bucketing",               # 12 x 36 s              = 432 s (8 layers, whole epochs of real PTB, 20 each)
    "07_parallel_training",       # 6 x 5.0 s              =  30 s (one GPU: the 2 one-device points; 4 need >= 2)
    "kernels",                    # 84 x 1.2 s + 6 x 60 s  = 461 s (torch.compiled last)
)                                 # total                   2133 s, 36 minutes
#: the claims a 15-minute GPU lease measures first, each on its `Lease` grid (the points its verdict reads), in this
#: order: 04 last, as its raw baseline (a CUDA graph of cuDNN under the profiler) is the riskiest path, and 02 before
#: it, as its host-CPU half must finish too. `lstmstudy measure --plan lease` then measures the default grids in
#: `GPU_ORDER`, compiles and masked Keras loops last (`lease_plan`).
LEASE_ORDER = ("06_energy", "01_cudnn_fallback", "03_mixed_precision", "02_cpu_vs_gpu_batch",
               "04_frameworks_vs_baseline")
#: what one lease call spends besides measuring: the smoke check without pytest (the first lease: measuring
#: began about 60 s after the command started, the wheelhouse's install included), the GPU tests of the timing the
#: check runs (tests/test_gpu_timing.py: pytest's start and four tests, planned), the first use of CUDA, cuDNN and
#: Keras in the measuring process (planned), and what gpu-node.sh keeps for packing
LEASE_FIXED_S = {"start-up and smoke check, no pytest": 60.0, "the check's GPU tests of the timing": 20.0,
                 "first use of CUDA, cuDNN and Keras": 20.0, "packing": 20.0}
#: the worker processes a lease's call spreads rounds over (`lstmstudy measure --plan lease`): one, as each more
#: would prepare every point again (a model built, cuDNN and Keras started) and the five judged claims would no
#: longer fit one call; its rows' intervals hold the noise of one process only, and the hardware sets say so
LEASE_PROCESSES = 1
#: the longest one command may run on a lent GPU node (`scripts/gpu-node.sh`'s LSTMSTUDY_CALL_LIMIT by default)
LEASE_CALL_S = 600
#: which points of a claim's grid a step measures: every one, the lease's, all but the slow kernels', the slow ones
SELECTIONS = ("all", "lease", "fast", "slow")
DEVICE_KINDS = ("cpu", "cuda")
#: the planned time of one point of a `slow` kernel: a cold torch.compile of the LSTM step took 69 s on a
#: 2-core CPU; on a GPU node, the review of the grids puts one at 30-60 s
SLOW_POINT_PLAN_S = {"cpu": 70.0, "cuda": 60.0}


@dataclass(frozen=True)
class Lease:
    """What a claim measures first in a short GPU lease: its GPU grid with `overrides`, cut to `kernels` (every
    kernel when empty): the points its verdict reads, at the usual rounds (fewer shapes, not fewer rounds). A kernel
    the cut leaves out at a lease shape is measured later, in rounds of its own: its ratio to the lease's rows there
    is then bootstrapped unpaired (`stats.row_replicates`), a wider interval, and only context reads it."""

    overrides: Mapping[str, object] = field(default_factory=dict)
    kernels: frozenset[str] = frozenset()
    #: the planned time of one of its points, where the overrides change it (fewer energy windows); else the claim's
    seconds_per_point: float | None = None


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
    #: what the sources say, in a line of MyST (it may cite): its row of the landing page's table of claims
    says: str = ""
    #: what a short GPU lease measures of it first (`LEASE_ORDER`); None for a claim the lease leaves for later
    lease: Lease | None = None
    #: what its CPU analogue stands in for, and what it cannot show, in a line of MyST: the page's opening box says it
    analogue: str = ""
    #: what a verdict's figure is, around its `Verdict.brief` ('{}'), for the landing table: 'slowdown {}'
    figure_words: str = "{}"
    #: the unit after the verdict's figure ('x' for a ratio, '' for a batch size or a dimensionless S), and after each
    #: part's interval where a rule decides on parts of another kind (claim 2's GPU/CPU time ratios); None: `unit`
    unit: str = "x"
    part_unit: str | None = None
    #: what each part's figure is, where a rule decides on parts of another kind than its figure ('GPU time over CPU
    #: time'): the landing figure's row says it; '' where the parts are the figure's own
    part_words: str = ""
    #: what the verdict's figure is, in a sentence a reader needs before reading it (claim 6's S); '' where the
    #: figure's words say it
    figure_meaning: str = ""
    #: what a reader whose LSTM got slower should check, in a few words of MyST, where the claim answers that: the
    #: landing page's answer leads each claim's GPU figure with it ('' leaves the claim out of the answer)
    advice: str = ""
    #: the rule's bands on the verdict's ratio, where it decides on one (the landing figure draws their
    #: 'reproduced' region); None where it decides on parts or on something other than a ratio
    bands: Bands | None = None

    def headline(self, verdict: Verdict, *, parts: bool = True) -> str:
        """A verdict's figure in words with its unit ('slowdown 9.54x (95% interval 6.53-14.2x)'), and where the rule
        decides on parts, each part's interval ('slowdown per part (95% intervals): ReLU 5.24-8.09x; ...'; with
        `parts=False` only where there is no figure besides); '' where it has neither."""
        figure = ""
        if verdict.ours is not None:
            figure = self.figure_words.format(f"{verdict.ours:.3g}{self.unit}")
            if verdict.low is not None and not verdict.parts:
                figure += f" ({verdict.interval_name}: {verdict.low:.3g}-{verdict.high:.3g}{self.unit})"
        if verdict.parts and (parts or not figure):
            name = self.figure_words.format("").strip(" ,=")
            names = [part[0] for part in verdict.parts]
            kind = ("rough ranges from few timings, not 95% intervals" if verdict.fewest_timings else
                    "intervals: 95% unless a part says it rests on few timings" if any("timings" in n for n in names)
                    else "95% intervals")
            common = _common_note(names)
            unit = self.unit if self.part_unit is None else self.part_unit
            listed = "; ".join(f"{n.removesuffix(common)} {low:.3g}-{high:.3g}{unit}"
                               for n, (_, low, high) in zip(names, verdict.parts))
            kind += f", all {common.strip(' ()')}" if common else ""
            figure = f"{figure}; the parts ({kind}): {listed}" if figure else f"{name} per part ({kind}): {listed}"
        return figure

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

    def points(self, kind: str, *, quick: bool = False, select: str = "all", **overrides: object) -> list[Point]:
        """The grid to measure on a device of `kind`, slow kernels last (each group in grid order); `select` keeps
        the lease's points (`Lease`), or all but the slow kernels' ('fast'), or only theirs ('slow')."""
        cut = self.lease or Lease()
        parameters = self.parameters(kind, **self._overrides(select, overrides))
        points = self.grid(kind=kind, quick=quick,
                           **{k: v for k, v in parameters.items() if k not in self.measure_options})
        keep = {"all": lambda p: True, "fast": lambda p: p.kernel not in self.slow,
                "slow": lambda p: p.kernel in self.slow,
                "lease": lambda p: p.kernel not in self.slow and (not cut.kernels or p.kernel in cut.kernels)}[select]
        return sorted((p for p in points if keep(p)), key=lambda p: p.kernel in self.slow)

    def _overrides(self, select: str, overrides: Mapping[str, object]) -> dict[str, object]:
        """`overrides`, over the lease's where `select` is 'lease'."""
        if select not in SELECTIONS:
            raise ParameterError(f"select must be one of {SELECTIONS}, got {select!r}")
        return {**((self.lease or Lease()).overrides if select == "lease" else {}), **overrides}

    def judge(self, results: pd.DataFrame) -> list[Verdict]:
        """`verdicts`, with no verdict on a set whose noise was not assessed (`assess_noise`), and each GPU verdict
        marked where it rests on host-bound rows (`mark_host_bound`)."""
        return mark_host_bound(assess_noise(self.verdicts(results), results), results)

    def estimate_s(self, kind: str, select: str = "all") -> float:
        """Planned seconds to measure the default grid of `kind` (or the part `select` keeps) from scratch (points x
        seconds per point, a slow kernel's points at `seconds_per_slow_point`: `planned`)."""
        return planned([(self, select)], kind)[0][3]

    def run(self, device: str = "auto", *, quick: bool = False, min_time: float | None = None,
            root: Path | None = None, retry_errors: bool = False, rerun: bool = False,
            deadline: Deadline | None = None, progress: bool = True, select: str = "all",
            processes: int | None = None, **overrides: object) -> list[SweepReport]:
        """Measure this claim's grid for `device`, or the part of it `select` keeps (what `lstmstudy measure` and
        the notebooks call), its rounds spread over `processes` worker processes (the claim's plan's when None:
        `timing.WORKER_PROCESSES`)."""
        from lstmstudy import hardware

        kind = hardware.resolve_device(device).type
        parameters = self.parameters(kind, **self._overrides(select, overrides))
        options = {k: v for k, v in parameters.items() if k in self.measure_options}
        return self.measure(self.points(kind, quick=quick, select=select, **overrides), device=device,
                            min_time=self.min_time if min_time is None else min_time, quick=quick, root=root,
                            retry_errors=retry_errors, rerun=rerun, deadline=deadline, slow=self.slow,
                            progress=progress, processes=processes, **options)


def _common_note(names: Sequence[str]) -> str:
    """The parenthesis every name ends with (' (Keras 3.15 on its torch backend)'), said once; '' if they differ."""
    notes = {n[n.rfind(" ("):] if n.endswith(")") and " (" in n else "" for n in names}
    return notes.pop() if len(notes) == 1 and len(names) > 1 else ""


def registry(*, judged_only: bool = False) -> list[Claim]:
    """The `CLAIM` of every module of this package, in claim order (01, 02, ...), then the kernel benchmark (it has
    no number), unless `judged_only`."""
    modules = [importlib.import_module(f"{__name__}.{module.name}") for module in pkgutil.iter_modules(__path__)]
    entries = sorted((module.CLAIM for module in modules), key=lambda claim: claim.number or "~")
    return [c for c in entries if c.number or not judged_only]


def lease_plan() -> list[tuple[Claim, str]]:
    """What `lstmstudy measure --plan lease` measures, step by step: each claim of `LEASE_ORDER` on its lease grid,
    then every entry's default grid in `GPU_ORDER` without its slow kernels, then those (compiles, masked Keras
    loops). A step finds the points an earlier one stored already done (the sweep resumes)."""
    first = [(claim, "lease") for claim in lookup(LEASE_ORDER)]
    rest = lookup(["gpu-order"])
    return [*first, *((claim, "fast") for claim in rest), *((claim, "slow") for claim in rest if claim.slow)]


def planned(steps: Sequence[tuple[Claim, str]], kind: str, *,
            quick: bool = False) -> list[tuple[Claim, str, int, float]]:
    """Each step of a plan with the points it adds (those no earlier step measured: the sweep resumes past them)
    and their planned seconds (`Claim.seconds_per_point`, a slow kernel's at `seconds_per_slow_point`); `quick`
    plans the shrunken grids, each point still at a full point's seconds (an upper bound)."""
    def ident(claim: Claim, p: Point) -> tuple:  # `Point.key` without its Keras backend: no Keras import to plan
        return claim.name, p.kernel, p.shape, p.precision, p.phase, config_text(p.config)

    seen: set[tuple] = set()
    out = []
    for claim, select in steps:
        new = [p for p in claim.points(kind, quick=quick, select=select) if ident(claim, p) not in seen]
        seen.update(ident(claim, p) for p in new)
        slow = sum(p.kernel in claim.slow for p in new)
        each = claim.seconds_per_point[kind]
        if select == "lease" and claim.lease and claim.lease.seconds_per_point is not None:
            each = claim.lease.seconds_per_point
        out.append((claim, select, len(new), (len(new) - slow) * each + slow * claim.seconds_per_slow_point[kind]))
    return out


def lookup(wanted: Sequence[str] | None) -> list[Claim]:
    """Claims by number (`01`), name (`cudnn_fallback`) or stem, in the order asked (a short GPU lease measures
    the most telling first), each once; None or 'all': every one, in registry order; 'gpu-order': every one, those
    of `GPU_ORDER` first."""
    entries = registry()
    if not wanted or list(wanted) == ["all"]:
        return entries
    if list(wanted) == ["gpu-order"]:
        wanted = [*GPU_ORDER, *(c.stem for c in entries)]
    chosen: dict[str, Claim] = {}
    for want in wanted:
        matches = [c for c in entries if want in (c.number, c.name, c.stem)]
        if not matches:
            known = ", ".join(["all", "gpu-order", *(c.stem for c in entries)])
            raise ParameterError(f"unknown claim {want!r}; known: {known}")
        chosen.update((c.stem, c) for c in matches if c.stem not in chosen)
    return list(chosen.values())
