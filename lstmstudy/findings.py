"""What a recurrent layer that misses cuDNN is told: every reason, the fix, and the slowdown claim 1 measured.

The watch (`lstmstudy.watch`), the saved-model explainer (`lstmstudy.saved_config`) and `lstmstudy explain` all
answer with a `Finding`. This module imports no framework: the cost is read from claim 1's stored results with
pandas, only where a layer falls back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lstmstudy import observe
from lstmstudy.cudnn_rules import (BY_CODE, GENERIC_PUBLISHED, LACKS_GPU, TRIGGER_TABLE, Explanation, Reason,
                                   Trigger)

# --- the cost, from claim 1's measurements ------------------------------------------------------------


@dataclass(frozen=True)
class Cost:
    """The slowdown claim 1 measured on a GPU for the closest stored configuration of one trigger.

    `ratio` is None when no such measurement is stored; `missing` then says what is missing.
    """

    trigger: str | None
    setting: str = ""
    hardware_id: str = ""
    batch: int | None = None
    hidden: int | None = None
    phase: str = ""
    ratio: float | None = None
    ratio_lo: float | None = None
    ratio_hi: float | None = None
    missing: str = ""
    framework: str = ""  # what the measured rows ran on: "keras/tensorflow", "keras/torch", "torch"
    #: the same in words, with the release the rows recorded: "Keras 3.15 on its torch backend"
    measured_on: str = ""

    def __str__(self) -> str:
        if self.ratio is None:
            return self.missing
        on = f" with {self.measured_on}" if self.measured_on else ""
        return (f"{self.ratio:.2f}x slower than cuDNN (95% interval {self.ratio_lo:.2f}-{self.ratio_hi:.2f}), measured "
                f"here for the nearest setting claim 1 timed: {self.setting} on {self.hardware_id}{on} "
                f"({self.framework}, fp32, batch {self.batch}, hidden {self.hidden}, {self.phase})")


def measured_cost(codes: Iterable[str], *, layer_type: str = "LSTM", batch: int | None = None,
                  hidden: int | None = None, phase: str | None = None, framework: str | None = None,
                  root: Path | None = None) -> Cost:
    """The slowdown stored for the closest GPU configuration of the first of `codes` that claim 1 measured.

    Only fp32 rows are quoted (a precision is a different kernel). Closest: the same framework and backend
    as the layer (`framework`, as `explain_cudnn` names it: "keras/torch", "torch"; None compares none)
    first, then the same phase ('train' or 'inference'; None prefers 'train'), then the nearest batch and
    hidden size on a log scale (a size not known is not compared). The cost names what it was measured on, in
    words too ("Keras 3.15 on its torch backend", from the rows' recorded backend and versions).
    Claim 1 measures LSTMs only, on every hardware set under `root` (default: the study's `results/`);
    GPU sets are those named `cuda-*`. Without a measurement, the cost quotes the figures published for the trigger
    (`published`).
    """
    # an unrolled layer runs the unrolled loop, whatever else it breaks
    ordered = [BY_CODE[code] for code in sorted(codes, key=lambda code: code != "unroll") if code in BY_CODE]
    timed = next((row for row in ordered if row.kernel), None)
    if layer_type != "LSTM":
        return Cost(None, missing=f"no measurement: claim 1 measures LSTM layers only, not {layer_type}")
    if timed is None:
        settings = ", ".join(row.setting for row in TRIGGER_TABLE if row.code and row.kernel)
        return Cost(None, missing=f"no measurement: claim 1 has not timed this trigger (it times {settings}); "
                                  f"{published(ordered[0] if ordered else None)}")
    trigger, setting = timed.kernel, timed.setting

    def not_yet(why: str) -> Cost:
        return Cost(trigger, setting, missing=f"no measurement yet on a GPU for the nearest setting claim 1 times, "
                                              f"{setting} ({why}); {published(timed)}")

    rows, measured = _gpu_rows(root, trigger)
    if not measured:
        where = "claim 1 has no cuda-* result set" if rows is None else "none of claim 1's cuda-* result sets has it"
        return not_yet(f"{where}; `lstmstudy measure --claims 01 --device cuda` on a GPU adds one")

    def distance(row) -> tuple:
        sizes = sum(abs(math.log2(mine / int(theirs))) for mine, theirs in ((batch, row.batch), (hidden, row.hidden))
                    if mine)
        other_framework = framework is not None and _ran_on(row) != framework
        return other_framework, row.phase != (phase or "train"), sizes, row.hardware_id, int(row.batch), int(row.hidden)

    from lstmstudy import stats
    from lstmstudy.claims import cudnn_fallback

    for near in sorted(measured, key=distance):  # the nearest first; its slowdown needs its fused baseline's row
        keys = [key for key in [*stats.SHAPE_KEYS, "backend"] if key in rows.columns]  # its own backend's ratio
        same = (rows[keys] == rows.loc[near.Index, keys]).all(axis=1)
        table = cudnn_fallback.slowdowns(rows[same], [trigger])
        if not table.empty:
            best = table.iloc[0]
            return Cost(trigger, setting, best.hardware_id, int(best.batch), int(best.hidden), best.phase,
                        float(best.ratio), float(best.ratio_lo), float(best.ratio_hi), framework=_ran_on(near),
                        measured_on=cudnn_fallback.row_words(near))
    return not_yet("no stored row has its fused baseline")


def published(row: Trigger | None) -> str:
    """What others published for a trigger (`Trigger.published`), or, where nobody timed that trigger alone, for
    Keras's generic kernel against cuDNN: the figures a user can weigh while no measurement is stored."""
    if row is not None and row.published:
        return f"published figures for this trigger: {row.published}"
    return f"no published figure for this trigger; published for the generic kernel against cuDNN: {GENERIC_PUBLISHED}"


def _ran_on(row) -> str:
    """What a stored row ran on, named as `explain_cudnn` names a layer's framework ('keras/torch', 'torch')."""
    return f"keras/{row.backend}" if row.framework == "keras" else row.framework


_GPU_ROWS: dict[tuple, object] = {}


def _gpu_rows(root: Path | None, trigger: str):
    """Claim 1's stored rows of `trigger` and its fused baseline on the GPU sets under `root` (None where there is no
    such set) and the `ok` fp32 rows of `trigger` among them. pandas is imported only here, only these two kernels'
    rows are read, and only the nearest row is bootstrapped."""
    from lstmstudy import results
    from lstmstudy.claims import cudnn_fallback

    folder = Path(root or results.default_root()) / cudnn_fallback.NAME
    state = tuple((path.name, path.stat().st_mtime_ns) for path in sorted(folder.glob("cuda-*.csv")))
    if not state:
        return None, []
    if (folder, state, trigger) not in _GPU_ROWS:  # read once per state of the files, however many layers ask
        kernels = {trigger, cudnn_fallback.TRIGGERS[trigger][0]}
        _GPU_ROWS[(folder, state, trigger)] = results.load(cudnn_fallback.NAME, root, sets="cuda-*", kernels=kernels)
    gpu = _GPU_ROWS[(folder, state, trigger)]
    mine = gpu[(gpu.kernel == trigger) & (gpu.precision == "fp32") & (gpu.status == "ok")]
    return gpu, list(mine.itertuples())


# --- one layer's finding ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One recurrent layer: the kernel it runs, every reason it is not cuDNN, what to change, and the cost.

    `on_gpu` is True when the reasons are what a GPU would meet, explained on a machine without one
    (`ran_here` then names what ran here, where it was observed). `cost` is None for a layer that gets cuDNN.
    """

    layer: str
    layer_type: str
    framework: str
    kernel: str
    reasons: tuple[Reason, ...] = ()
    notes: tuple[Reason, ...] = ()
    on_gpu: bool = False
    ran_here: str = ""
    cost: Cost | None = None
    fixes: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        fixes = dict.fromkeys(BY_CODE[r.code].fix for r in self.reasons  # in order, once each
                              if r.code in BY_CODE and BY_CODE[r.code].fix)
        object.__setattr__(self, "fixes", tuple(fixes))

    @property
    def told(self) -> bool:
        """False where the kernel could not be told (a custom class a saved config cannot see into)."""
        return bool(self.kernel)

    @property
    def fused(self) -> bool:
        return self.kernel in observe.GPU_FUSED and not self.reasons

    def __str__(self) -> str:
        name = f"{self.layer_type} layer {self.layer!r} [{self.framework}]"
        what = observe.MEANING.get(self.kernel, self.kernel)
        if self.fused:  # a note still matters: a mask that cuDNN takes only right-padded
            return "\n".join([f"{name}: {what}" + (" on a GPU" if self.on_gpu else ""),
                              *(f"  note: {n.message}" for n in self.notes)])
        if not self.kernel:  # explained from a saved config that cannot see into it
            head = f"{name}: cannot tell which kernel it gets on a GPU, because:"
        elif self.on_gpu:
            head = f"{name}: on a GPU this layer would not use cuDNN but {what}, because:"
        else:
            head = f"{name} ran {what}, not cuDNN, because:"
        lines = [head, *(f"  - {r.message}" for r in self.reasons)]
        if self.ran_here:
            lines.append(f"  here (no GPU) it ran {observe.MEANING.get(self.ran_here, self.ran_here)}")
        lines += [f"  note: {n.message}" for n in self.notes]
        lines += [f"  fix: {fix}" for fix in self.fixes]
        if self.cost is not None:
            lines.append(f"  cost: {self.cost}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """For `lstmstudy explain --json`: plain types only."""
        out = asdict(self)
        out["fused"] = self.fused
        out["told"] = self.told
        return out


def finding(explanation: Explanation, layer_type: str, *, ran: str | None = None, on_gpu: Explanation | None = None,
            report_missing_gpu: bool = False, batch: int | None = None,
            hidden: int | None = None, phase: str | None = None, root: Path | None = None) -> Finding | None:
    """What to say about one layer, or None when there is nothing to say.

    `explanation` is `explain_cudnn`'s answer for this machine and `ran` the kernel observed (None when not
    observed). On a machine without a GPU, `on_gpu` (the answer for a machine with one) decides: its reasons
    are reported as what a GPU would meet, since that is what the user can act on, and a layer that would get
    cuDNN there is reported only with `report_missing_gpu`.
    """
    kernel = ran or explanation.kernel
    reasons = explanation.reasons
    if kernel in observe.GPU_FUSED and not reasons:
        return None
    if not reasons:  # a fallback was observed that the explainer does not predict
        reasons = (Reason("unexplained", "the framework fell back for a reason explain_cudnn does not model"),)
    ran_here = ""
    if on_gpu is not None and on_gpu.reasons and {r.code for r in reasons} & LACKS_GPU:
        explanation, ran_here, kernel, reasons = on_gpu, kernel, on_gpu.kernel, on_gpu.reasons
    if {r.code for r in reasons} <= LACKS_GPU:
        if not report_missing_gpu:
            return None
        cost = Cost(None, missing="no measured cost: only the GPU is missing; on one this layer would get cuDNN")
    else:
        cost = measured_cost([r.code for r in reasons], layer_type=layer_type, batch=batch, hidden=hidden,
                             phase=phase, framework=explanation.framework, root=root)
    return Finding(explanation.layer, layer_type, explanation.framework, kernel, tuple(reasons), explanation.notes,
                   bool(ran_here), ran_here, cost)
