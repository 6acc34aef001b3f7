"""Claim 6 (the paper's future work): what the fallback kernels cost in GPU energy above idle.
Its page is `notebooks/06_energy.ipynb`.

Seed 003 closes with: "While we focused more on performance in our experiment, another performance
benchmark we can also explore is energy consumption. In a future experiment, we could attempt to
benchmark memory bandwidth/movement and estimate how much energy is used." No seed claims anything about
energy, so there is nothing to reproduce: the page states a hypothesis of this study's own and its rule
(`RULE`) before the data, and the rule says whether the hypothesis holds or not:

*the fallback costs energy in proportion to its time*: per sequence, a fallback's GPU energy above idle
over the fused kernel's equals its time over the fused kernel's. The quotient of the two ratios, the
*proportionality* S, is the fallback's power above idle over the fused kernel's: 1 when the hypothesis
holds, above 1 when the fallback costs more energy than its time explains, below 1 when less.

How one group is measured (a shape and a phase: every kernel at every precision, and an idle point) is
the energy-window protocol, `lstmstudy.protocols.energy_windows`: on an NVIDIA GPU only, `windows` rounds
(5 by default) each run one window of every point of the group in a shuffled order, a kernel's window N
synced steps lasting at least `window_s` (>= `MIN_WINDOW_S`: ten periods of NVML's ~100 ms energy counter,
see `nvml.MIN_ENERGY_WINDOW_S`), the idle point's an empty window of `idle_s` seconds.

A stored row keeps every window (the protocol says how): N per window in `round_sizes`, each window's
joules and monitor seconds in `observed_detail` (`window_energy_j`, `window_duration_s`), their total as
`energy_j`, and a group's rows share one `round_seed`. For window w of a kernel at batch B, with E_w joules
over D_w seconds and N_w steps:

    idle power              P_w = joules / seconds of the idle window of the same round
    energy above idle       A_w = E_w - P_w x D_w
    per sequence            E_w / (N_w x B) in total, A_w / (N_w x B) above idle
    time per step           D_w / N_w
    power above idle        A_w / D_w

A ratio of two kernels is formed window by window (they ran in the same rounds), summarised by its
median over windows, and its interval bootstraps the windows (`stats.ratio_replicates`, each window a
round of one value: `stats.one_per_round`); the verdict's geometric mean over configurations carries
both sources of doubt (`stats.geomean_interval`), as claim 1's does.

Rows stored by the earlier method (one 0.5 s window per configuration, one idle window per hardware set,
no per-window detail) still load: each is read as a single window, its `energy_j` over the sum of its
samples, above the set's one idle power; the page marks it "single window (old method)" and the rule
never judges it, since one window gives no interval.

Where there is no NVML (no NVIDIA driver or no NVIDIA GPU), or the run is on the CPU, every point raises
`Skip` with the reason, so the result set holds `skipped` rows saying why, and the verdict is `not measured
on this hardware`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import pandas as pd

from lstmstudy import contract
from lstmstudy.claims import Claim, Lease, cudnn_fallback
from lstmstudy.errors import ParameterError
from lstmstudy.observe import what_ran
from lstmstudy.parameters import check_choices
from lstmstudy.rules import Bands, Outcome, Verdict
from lstmstudy.shapes import LSTMShape
from lstmstudy.stats import geomean, geomean_interval, interleaved, window_median, window_ratio

if TYPE_CHECKING:  # measuring imports torch and NVML; the analysis below runs without them
    from lstmstudy.sweep import SweepReport

NAME = "energy"
NUMBER = "06"
STATEMENT = ("Energy per sequence (the paper's future work): a fallback kernel costs GPU energy above idle in "
             "proportion to its time")
SEED_FIGURE = "not measured (the paper's future work)"
#: the shortest energy window: a second, ten periods of NVML's ~100 ms energy counter (`nvml.MIN_ENERGY_WINDOW_S`,
#: which tests/test_claim_energy.py keeps it at or above); a number here, as the rule is written before the data
MIN_WINDOW_S = 1.0
#: windows per point by default, in a quick run, and at least, for a configuration to be judged
WINDOWS, QUICK_WINDOWS, MIN_JUDGED_WINDOWS = 5, 3, 3
#: the proportional band of S: 1/1.25 to 1.25, symmetric on a log scale
BAND = (0.8, 1.25)
BANDS = Bands(BAND, (Outcome.DOES_NOT_HOLD, Outcome.HOLDS, Outcome.DOES_NOT_HOLD))
RULE = (f"decided on the 95% interval of the geometric mean, over every judged configuration, of the "
        f"proportionality S = (the fallback's GPU energy above idle per sequence over the fused kernel's) / "
        f"(the fallback's time per step over the fused kernel's), i.e. the fallback's power above idle over the "
        f"fused kernel's, for claim 1's GPU headline pairs (torch.native over torch.fused; keras.relu and "
        f"keras.recurrent_dropout over keras.cudnn_auto) at every stored precision, shape and phase; the "
        f"interval is a bootstrap over the configurations and each one's repeated windows. The hypothesis 'the "
        f"fallback costs energy in proportion to its time', this study's own (no seed makes it), holds if the "
        f"interval lies within {BAND[0]:g} <= S < {BAND[1]:g} (proportional); does not hold if it lies at or "
        f"above {BAND[1]:g} (more than proportional) or below {BAND[0]:g} (less than proportional); is undecided "
        f"(inconclusive) if it straddles {BAND[0]:g} or {BAND[1]:g}, or if no configuration can be judged; not "
        f"measured where NVML cannot read a GPU's energy. A configuration is judged when both kernels have at "
        f"least {MIN_JUDGED_WINDOWS} interleaved windows of at least {MIN_WINDOW_S:g} s and each drew more than "
        f"idle power in every window. The band is {BAND[1]:g}x either way: the smallest ratio this study calls a "
        f"material difference (claim 1's floor), and well above the ~10% by which the energy counter's update "
        f"period can move one window's energy")

#: fallback kernel -> the fused kernel it is compared with (claim 1's pairs)
PAIRS: dict[str, str] = {k: cudnn_fallback.TRIGGERS[k][0]
                         for k in ("torch.native", "torch.cell_loop", "keras.relu", "keras.recurrent_dropout")}
#: the comparisons that carry the verdict: claim 1's GPU headline
HEADLINE: tuple[str, ...] = cudnn_fallback.HEADLINE["cuda"]
KERNELS: tuple[str, ...] = ("torch.fused", "torch.native", "torch.cell_loop",
                            "keras.cudnn_auto", "keras.relu", "keras.recurrent_dropout")
#: measured by default: the headline pairs (torch.cell_loop, outside the verdict, only when asked for, to
#: keep every default grid within one GPU lease)
DEFAULT_KERNELS: tuple[str, ...] = tuple(k for k in KERNELS if k in HEADLINE or k in PAIRS.values())
QUICK_KERNELS: tuple[str, ...] = ("torch.fused", "torch.native")
#: every precision, in the order the page's figures show them
PRECISIONS: tuple[str, ...] = contract.PRECISIONS
IDLE_KERNEL = "nvml.idle"


# --- parameters and grid --------------------------------------------------------------------------

def check_shapes(shapes: object) -> list[LSTMShape]:
    """`shapes` is a non-empty list of [batch, timesteps, features, hidden] lists of positive integers."""
    ok = isinstance(shapes, (list, tuple)) and bool(shapes) and all(
        isinstance(s, (list, tuple)) and len(s) == 4
        and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in s) for s in shapes)
    if not ok:
        raise ParameterError("parameter 'shapes' must be a non-empty list of [batch, timesteps, features, hidden] "
                             f"lists of positive integers, got {shapes!r}")
    return [LSTMShape(batch=b, timesteps=t, features=f, hidden=h) for b, t, f, h in shapes]


def check_window(**values: object) -> None:
    """Energy windows must be long enough for NVML's energy counter to measure them to about 10%."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= MIN_WINDOW_S:
            raise ParameterError(f"parameter {name!r} must be a number of seconds >= {MIN_WINDOW_S:g} (ten periods "
                                 f"of NVML's ~0.1 s energy counter), got {value!r}")


def check_windows(windows: object) -> None:
    """Enough windows per point for the rule to judge a configuration."""
    if isinstance(windows, bool) or not isinstance(windows, int) or windows < MIN_JUDGED_WINDOWS:
        raise ParameterError(f"parameter 'windows' must be an integer >= {MIN_JUDGED_WINDOWS} (fewer windows give "
                             f"no interval the rule can judge), got {windows!r}")


def grid(*, kind: str, quick: bool, shapes: Sequence[Sequence[int]], kernel_names: Sequence[str] = DEFAULT_KERNELS,
         precisions: Sequence[str] = ("fp32",), phases: Sequence[str] = ("inference", "train"),
         window_s: float = MIN_WINDOW_S, idle_s: float = MIN_WINDOW_S) -> list[contract.Point]:
    """Per phase and shape, one group (`sweep.groups`): its idle point, then every kernel at every precision.

    The same grid on every device kind (on a CPU every point becomes a skipped row). `quick` keeps the first
    shape (at most 8 timesteps), the first phase, the two PyTorch kernels and the shortest windows: enough
    to check the plumbing, on a GPU or (all skipped) on a CPU.
    """
    lstm_shapes = check_shapes([list(s) for s in shapes])
    if quick:
        first = lstm_shapes[0]
        lstm_shapes = [LSTMShape(batch=first.batch, timesteps=min(first.timesteps, 8), features=first.features,
                                 hidden=first.hidden)]
        phases = list(phases)[:1]
        kernel_names = [k for k in kernel_names if k in QUICK_KERNELS] or list(kernel_names)[:2]
        window_s = idle_s = MIN_WINDOW_S
    return [point for phase in phases for shape in lstm_shapes for point in [
        contract.Point(IDLE_KERNEL, shape, phase=phase, config={"idle_s": float(idle_s)}),
        *(contract.Point(kernel, shape, precision=precision, phase=phase, config={"window_s": float(window_s)})
          for precision in precisions for kernel in kernel_names)]]


def check_parameters(parameters: dict) -> None:
    check_shapes(parameters["shapes"])
    check_choices("kernel_names", parameters["kernel_names"], KERNELS)
    check_choices("precisions", parameters["precisions"], contract.PRECISIONS)
    check_choices("phases", parameters["phases"], contract.PHASES)
    check_window(window_s=parameters["window_s"], idle_s=parameters["idle_s"])
    check_windows(parameters["windows"])


# --- measuring ------------------------------------------------------------------------------------

def measure(points: list[contract.Point], *, device: str, min_time: float, quick: bool = False,
            windows: int = WINDOWS, **sweep_options) -> list[SweepReport]:
    """Measure the points not yet stored for this hardware in rounds of energy windows
    (`protocols.energy_windows`); without NVML every point is a `skipped` row at once."""
    from lstmstudy import sweep
    from lstmstudy.protocols import energy_windows

    timing = dict(min_time=0.02, max_time=0.2, min_samples=3) if quick else dict(min_time=min_time, max_time=1.0,
                                                                                 min_samples=3)
    plan = energy_windows.window_rounds(min(windows, QUICK_WINDOWS) if quick else windows)
    # one process, whatever --processes says: a row's energy detail is per window, and joining the rounds of
    # several processes (`results.load`) would join their windows' times but not their joules
    options = {**sweep_options, "processes": 1}
    return [sweep.run(NAME, points, partial(energy_windows.prepare_point, timing=timing), plan, device=device,
                      **options)]


# --- the arithmetic ---------------------------------------------------------------------------------

REPEATED = "repeated windows"
SINGLE_WINDOW = "single window (old method)"
#: what identifies a group's rows: an idle row and the kernels measured in its rounds agree on all of these
_GROUP = ["hardware_id", "phase", "batch", "timesteps", "features", "hidden", "layers", "bidirectional"]


class Windows(NamedTuple):
    """A stored row's energy windows, one entry each, and the method that stored them."""

    energy_j: np.ndarray
    duration_s: np.ndarray
    steps: np.ndarray  # steps per window (1 per idle window)
    method: str


def row_windows(row: pd.Series) -> Windows:
    """The windows of a loaded row (`results.load`): the lists its `observed_detail` keeps, or a row of the
    old method read as one window, its `energy_j` over the sum of its samples."""
    detail = json.loads(row["observed_detail"]) if row["observed_detail"] else {}
    if "window_energy_j" in detail:
        return Windows(np.asarray(detail["window_energy_j"], dtype=float),
                       np.asarray(detail["window_duration_s"], dtype=float),
                       np.asarray(row["round_sizes"], dtype=float), REPEATED)
    return Windows(np.array([float(row["energy_j"])]), np.array([float(sum(row["samples"]))]),
                   np.array([float(row["n_samples"])]), SINGLE_WINDOW)


def shape_label(batch: int, timesteps: int, hidden: int) -> str:
    return f"batch {batch}, {timesteps} steps, hidden {hidden}"


def _measured(results: pd.DataFrame, idle: bool) -> pd.DataFrame:
    """The `ok` rows with energy: the idle rows, or the kernels'."""
    if results.empty:
        return results
    rows = results[(results.status == "ok") & results.energy_j.notna()]
    return rows[(rows.kernel == IDLE_KERNEL) == idle]


IDLE_COLUMNS = ["hardware_id", "phase", "shape", "method", "windows", "window_s", "idle_power_w", "idle_power_w_lo",
                "idle_power_w_hi"]


def idle_table(results: pd.DataFrame) -> pd.DataFrame:
    """The idle power of every group (or, by the old method, hardware set) where it was measured: the
    median over its windows with the interval over windows."""
    rows = []
    for _, row in _measured(results, idle=True).iterrows():
        w = row_windows(row)
        rows.append({"hardware_id": row["hardware_id"], "phase": row["phase"], "method": w.method,
                     "shape": ("whole hardware set" if w.method == SINGLE_WINDOW
                               else shape_label(int(row["batch"]), int(row["timesteps"]), int(row["hidden"]))),
                     "windows": len(w.energy_j), "window_s": float(np.median(w.duration_s)),
                     **dict(zip(IDLE_COLUMNS[-3:], window_median(w.energy_j / w.duration_s, MIN_JUDGED_WINDOWS)))})
    return pd.DataFrame(rows, columns=IDLE_COLUMNS)


def _idle_power(row: pd.Series, idle: pd.DataFrame) -> np.ndarray:
    """Idle power (W) for each window of a kernel row: the idle window of the same round where its group
    measured one in the same rounds; else, for every window, the median idle power of its group's idle
    row, or, for a row of the old method only, of the set's newest idle row (its one per set); NaN without
    any: a row of repeated windows is never charged another group's idle power."""
    n = len(row_windows(row).energy_j)
    mine = idle[idle.hardware_id == row["hardware_id"]] if not idle.empty else idle
    if mine.empty:
        return np.full(n, np.nan)
    group = mine[np.logical_and.reduce([mine[k] == row[k] for k in _GROUP])]
    for _, candidate in group.iterrows():
        if interleaved(row, candidate):
            w = row_windows(candidate)
            return w.energy_j / w.duration_s
    if group.empty and row_windows(row).method != SINGLE_WINDOW:  # never another shape's or phase's idle
        return np.full(n, np.nan)
    w = row_windows((group if not group.empty else mine).sort_values("created_at").iloc[-1])
    return np.full(n, float(np.median(w.energy_j / w.duration_s)))


ENERGY_COLUMNS = ["hardware_id", "kernel", "precision", "phase", "shape", "batch", "timesteps", "features", "hidden",
                  "layers", "bidirectional", "config", "method", "windows", "sequences", "window_s", "median_ms",
                  "mean_power_w", "idle_power_w", "j_per_1k_seq", "j_per_1k_seq_lo", "j_per_1k_seq_hi",
                  "above_idle_j_per_1k_seq", "above_idle_j_per_1k_seq_lo", "above_idle_j_per_1k_seq_hi",
                  "seq_per_j", "above_idle_seq_per_j", "observed_kernel", "round_seed", "round_sizes",
                  # per window, for the ratios
                  "w_j_per_seq", "w_above_j_per_seq", "w_s_per_step", "w_above_power_w"]


def energy_table(results: pd.DataFrame) -> pd.DataFrame:
    """One row per measured kernel row: its windows' energy per sequence, in total and above idle (the
    median over windows with its interval), and the per-window values the ratios pair."""
    idle = _measured(results, idle=True)
    rows = []
    for _, row in _measured(results, idle=False).iterrows():
        w = row_windows(row)
        sequences = w.steps * int(row["batch"])
        above_j = w.energy_j - _idle_power(row, idle) * w.duration_s
        total = np.array(window_median(w.energy_j / sequences, MIN_JUDGED_WINDOWS)) * 1000
        above = np.array(window_median(above_j / sequences, MIN_JUDGED_WINDOWS)) * 1000
        rows.append({
            **{k: row[k] for k in ("hardware_id", "kernel", "precision", "phase", "batch", "timesteps", "features",
                                   "hidden", "layers", "bidirectional", "config", "round_seed", "round_sizes")},
            "observed_kernel": what_ran(row["observed_kernel"], row["predicted_kernel"]),
            "shape": shape_label(int(row["batch"]), int(row["timesteps"]), int(row["hidden"])),
            "method": w.method, "windows": len(w.energy_j), "sequences": int(sequences.sum()),
            "window_s": float(np.median(w.duration_s)), "median_ms": float(row["median_s"]) * 1e3,
            "mean_power_w": float(np.median(w.energy_j / w.duration_s)),
            "idle_power_w": float(np.median((w.energy_j - above_j) / w.duration_s)),
            **dict(zip(["j_per_1k_seq", "j_per_1k_seq_lo", "j_per_1k_seq_hi"], total)),
            **dict(zip(["above_idle_j_per_1k_seq", "above_idle_j_per_1k_seq_lo", "above_idle_j_per_1k_seq_hi"], above)),
            "seq_per_j": 1000 / total[0], "above_idle_seq_per_j": 1000 / above[0] if above[0] > 0 else np.nan,
            "w_j_per_seq": w.energy_j / sequences, "w_above_j_per_seq": above_j / sequences,
            "w_s_per_step": w.duration_s / w.steps, "w_above_power_w": above_j / w.duration_s,
        })
    return pd.DataFrame(rows, columns=ENERGY_COLUMNS)


_MATCH = ["hardware_id", "phase", "batch", "timesteps", "features", "hidden", "layers", "bidirectional", "config"]
#: per ratio: its column prefix in the ratio table, and the per-window column of the energy table it divides
_RATIOS = {"energy_ratio": "w_j_per_seq", "above_idle_ratio": "w_above_j_per_seq", "time_ratio": "w_s_per_step",
           "proportionality": "w_above_power_w"}
RATIO_COLUMNS = ["hardware_id", "kernel", "baseline", "precision", "phase", "shape", "method", "windows", "paired",
                 "judged", "why_not_judged",
                 *(f"{name}{end}" for name in _RATIOS for end in ("", "_lo", "_hi")), "replicates"]


def _why_not_judged(a: pd.Series, b: pd.Series, paired: bool) -> str:
    """Why the rule cannot judge the pair of rows `a`, `b` ('' when it can)."""
    if SINGLE_WINDOW in (a["method"], b["method"]):
        return "a single window (old method): no interval"
    if min(a["windows"], b["windows"]) < MIN_JUDGED_WINDOWS:
        return f"fewer than {MIN_JUDGED_WINDOWS} windows"
    if not paired:
        return "the two kernels' windows were not interleaved"
    above = np.concatenate([np.asarray(a["w_above_power_w"], float), np.asarray(b["w_above_power_w"], float)])
    if np.isnan(above).any():
        return "no idle window to subtract"
    if not np.all(above > 0):  # a small shape on a big GPU: its work is within idle power's own noise
        return "a window drew no more than idle power (too little work above idle to measure)"
    return ""


def _pairs(table: pd.DataFrame, selectors: Sequence[tuple[dict, dict]], keys: Sequence[str]) -> pd.DataFrame:
    """For each (numerator selector, denominator selector): every ratio of `_RATIOS` at equal `keys`, window by
    window where the two were interleaved, and whether the rule can judge the pair."""
    rows = []
    for num_sel, den_sel in selectors:
        num = table.loc[np.logical_and.reduce([table[k] == v for k, v in num_sel.items()])]
        den = table.loc[np.logical_and.reduce([table[k] == v for k, v in den_sel.items()])]
        for _, a in num.iterrows():
            match = den.loc[np.logical_and.reduce([den[k] == a[k] for k in keys])]
            if match.empty:
                continue
            b = match.iloc[-1]
            paired = interleaved(a, b)
            why = _why_not_judged(a, b, paired)
            row = {k: a[k] for k in ("hardware_id", "kernel", "precision", "phase", "shape", "method")}
            row.update(baseline=b["kernel"], baseline_precision=b["precision"], paired=paired,
                       method=b["method"] if b["method"] == SINGLE_WINDOW else a["method"],
                       windows=min(a["windows"], b["windows"]), judged=not why, why_not_judged=why)
            for name, column in _RATIOS.items():
                ratio, lo, hi, boot = window_ratio(a[column], b[column], paired, MIN_JUDGED_WINDOWS)
                row.update({name: ratio, f"{name}_lo": lo, f"{name}_hi": hi})
            row["replicates"] = boot  # the proportionality's, the last of _RATIOS
            rows.append(row)
    return pd.DataFrame(rows, columns=[*RATIO_COLUMNS, "baseline_precision"])


def energy_ratios(results: pd.DataFrame) -> pd.DataFrame:
    """Each fallback over its fused kernel at the same configuration and precision: energy per sequence in
    total and above idle, time per step, and their quotient, the proportionality S (see the module)."""
    table = energy_table(results)
    if table.empty:
        return pd.DataFrame(columns=RATIO_COLUMNS)
    pairs = [({"kernel": k}, {"kernel": base}) for k, base in PAIRS.items()]
    return _pairs(table, pairs, [*_MATCH, "precision"])[RATIO_COLUMNS]


def amp_ratios(results: pd.DataFrame, low: str = "fp16") -> pd.DataFrame:
    """Each kernel's energy per sequence (and time) under AMP (`low`) over fp32 at the same configuration."""
    table = energy_table(results)
    if table.empty:
        return pd.DataFrame(columns=RATIO_COLUMNS)
    pairs = [({"kernel": k, "precision": low}, {"kernel": k, "precision": "fp32"}) for k in sorted(set(table.kernel))]
    out = _pairs(table, pairs, [*_MATCH, "kernel"])
    out["baseline"] = out["kernel"] + " " + out["baseline_precision"]
    return out[RATIO_COLUMNS]


# --- verdicts -------------------------------------------------------------------------------------

def skip_reasons(results: pd.DataFrame) -> dict[str, str]:
    """Per hardware set with no energy measured: why (the reason its skipped rows carry)."""
    if results.empty:
        return {}
    measured = set(_measured(results, idle=False).hardware_id)
    out = {}
    for hardware_id, part in results.groupby("hardware_id"):
        if hardware_id in measured:
            continue
        reasons = part.loc[part.status != "ok", "error"].dropna()
        reasons = reasons[reasons != ""]
        out[hardware_id] = reasons.value_counts().index[0] if not reasons.empty else "no energy window stored"
    return out


def reading(low: float, high: float) -> str:
    """What an interval of the proportionality S says, in the rule's words."""
    if high < BAND[0]:
        return "less than proportional"
    if low >= BAND[1]:
        return "more than proportional"
    if BAND[0] <= low and high < BAND[1]:
        return "proportional"
    return "cannot tell whether proportional"


def verdicts(results: pd.DataFrame) -> list[Verdict]:
    """One verdict per hardware set: the geometric-mean proportionality of the headline pairs it can judge,
    decided on its interval."""
    table = energy_ratios(results)
    reasons = skip_reasons(results)
    out = []
    for hardware_id in sorted(results.hardware_id.unique()) if not results.empty else []:
        mine = table[(table.hardware_id == hardware_id) & table.kernel.isin(HEADLINE)]
        if mine.empty:
            why = reasons.get(hardware_id, "no fallback/fused energy pair stored")
            out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, f"not measured: {why}",
                               Outcome.NOT_MEASURED, RULE))
            continue
        judged, left_out = mine[mine.judged], mine[~mine.judged]
        left = (f"; {len(left_out)} configuration(s) not judged: "
                + "; ".join(f"{n} {why}" for why, n in left_out.why_not_judged.value_counts().items())
                if len(left_out) else "")
        if judged.empty:
            out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None,
                               f"no configuration can be judged{left}", Outcome.INCONCLUSIVE, RULE))
            continue
        figure = geomean(judged.proportionality)
        low, high = geomean_interval(list(judged.replicates))
        text = (f"S = {figure:.2f} (95% interval {low:.2f}-{high:.2f}): {reading(low, high)}; energy above idle per "
                f"sequence {geomean(judged.above_idle_ratio):.2f}x the fused kernel's for "
                f"{geomean(judged.time_ratio):.2f}x its time (total energy {geomean(judged.energy_ratio):.2f}x); "
                f"geometric mean of {len(judged)} configurations: {', '.join(sorted(judged.kernel.unique()))}"
                f"{left}")
        out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, figure, text, BANDS.decide(low, high), RULE,
                           low, high))
    return out


# --- what the page shows --------------------------------------------------------------------------

def status_note(results: pd.DataFrame) -> str:
    """Markdown: where energy was measured, and where not and why."""
    measured = sorted(set(_measured(results, idle=False).hardware_id)) if not results.empty else []
    lines = []
    if measured:
        lines.append("Energy was measured on: " + ", ".join(f"`{h}`" for h in measured) + ".")
    for hardware_id, why in skip_reasons(results).items():
        lines.append(f"**Energy was not measured on `{hardware_id}`**: {why}. Its rows are stored as "
                     "`skipped` with that reason.")
    if not lines:
        lines.append("**No result set is stored yet**: run this page with `measure=True` on a machine with an "
                     "NVIDIA GPU.")
    return "\n\n".join(lines)


def method_table() -> pd.DataFrame:
    """The comparisons this page makes, as a table."""
    rows = [{"fallback": k, "fused baseline": base, "what breaks the fused path": cudnn_fallback.TRIGGERS[k][1],
             "measured by default": k in DEFAULT_KERNELS, "in the verdict": k in HEADLINE}
            for k, base in PAIRS.items()]
    return pd.DataFrame(rows)


def _with_interval(value: float, low: float, high: float) -> str:
    if not np.isfinite(value):
        return "n/a"
    return f"{value:.3g} ({low:.3g}-{high:.3g})" if np.isfinite(low) else f"{value:.3g} (no interval: one window)"


def summary(results: pd.DataFrame) -> pd.DataFrame:
    """The energy table as the page shows it: per hardware set, shape, phase, kernel and precision, the
    median over windows with its 95% interval."""
    table = energy_table(results)
    columns = ["hardware", "shape", "phase", "kernel", "precision", "method", "windows", "ms per step",
               "window (s)", "mean power (W)", "idle (W)", "J per 1,000 seq", "J per 1,000 seq above idle",
               "seq per J", "seq per J above idle"]
    if table.empty:
        return pd.DataFrame(columns=columns)
    table = table.sort_values(["hardware_id", "batch", "phase", "kernel", "precision"])
    return pd.DataFrame({
        "hardware": table.hardware_id, "shape": table["shape"], "phase": table.phase, "kernel": table.kernel,
        "precision": table.precision, "method": table.method, "windows": table.windows,
        "ms per step": table.median_ms, "window (s)": table.window_s, "mean power (W)": table.mean_power_w,
        "idle (W)": table.idle_power_w,
        "J per 1,000 seq": [_with_interval(*v) for v in table[["j_per_1k_seq", "j_per_1k_seq_lo",
                                                                  "j_per_1k_seq_hi"]].to_numpy()],
        "J per 1,000 seq above idle": [_with_interval(*v) for v in table[[
            "above_idle_j_per_1k_seq", "above_idle_j_per_1k_seq_lo", "above_idle_j_per_1k_seq_hi"]].to_numpy()],
        "seq per J": table.seq_per_j, "seq per J above idle": table.above_idle_seq_per_j,
    }).reset_index(drop=True)


def ratio_summary(ratios: pd.DataFrame) -> pd.DataFrame:
    """Every fallback/fused pair as the page shows it: the three ratios and S with their 95% intervals, what
    S says, and whether the rule judges the pair (and why not)."""
    columns = ["hardware", "kernel", "baseline", "precision", "phase", "shape", "windows", "time ratio",
               "energy ratio above idle", "energy ratio, total", "S", "reading", "judged"]
    if ratios.empty:
        return pd.DataFrame(columns=columns)

    def interval(row: pd.Series, name: str) -> str:
        return _with_interval(row[name], row[f"{name}_lo"], row[f"{name}_hi"])

    return pd.DataFrame([{
        "hardware": r.hardware_id, "kernel": r.kernel, "baseline": r.baseline, "precision": r.precision,
        "phase": r.phase, "shape": r["shape"], "windows": r.windows, "time ratio": interval(r, "time_ratio"),
        "energy ratio above idle": interval(r, "above_idle_ratio"), "energy ratio, total": interval(r, "energy_ratio"),
        "S": interval(r, "proportionality"),
        "reading": (reading(r.proportionality_lo, r.proportionality_hi) if np.isfinite(r.proportionality_lo)
                    else "n/a (no interval)"),
        "judged": "yes" if r.judged else f"no: {r.why_not_judged}"} for _, r in ratios.iterrows()], columns=columns)


def proportionality_summary(ratios: pd.DataFrame) -> pd.DataFrame:
    """S per hardware set, fallback and phase over the judged configurations: the geometric mean with the
    interval over configurations and windows the verdict uses, in the layout `plots.ratio_bars` draws."""
    columns = ["hardware_id", "kernel", "phase", "ratio", "ratio_lo", "ratio_hi"]
    judged = ratios[ratios.judged.astype(bool)] if not ratios.empty else ratios
    if judged.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for (hardware_id, kernel, phase), part in judged.groupby(["hardware_id", "kernel", "phase"]):
        low, high = geomean_interval(list(part.replicates))
        rows.append({"hardware_id": hardware_id, "kernel": kernel, "phase": phase,
                     "ratio": geomean(part.proportionality), "ratio_lo": low, "ratio_hi": high})
    return pd.DataFrame(rows, columns=columns)


def amp_summary(results: pd.DataFrame) -> pd.DataFrame:
    """AMP's total energy per sequence over fp32 with its interval over windows, in the layout
    `plots.ratio_bars` draws; `case` names the shape and phase."""
    columns = ["hardware_id", "kernel", "case", "ratio", "ratio_lo", "ratio_hi", "time_ratio"]
    table = amp_ratios(results)
    table = table[np.isfinite(table.energy_ratio.astype(float))] if not table.empty else table
    if table.empty:
        return pd.DataFrame(columns=columns)
    return table.assign(case=table["shape"] + ", " + table["phase"], ratio=table.energy_ratio,
                        ratio_lo=table.energy_ratio_lo, ratio_hi=table.energy_ratio_hi)[columns]


_DEFAULTS = dict(shapes=[[16, 32, 128, 128], [64, 128, 512, 1024]], kernel_names=list(DEFAULT_KERNELS),
                 precisions=["fp32"], phases=list(contract.PHASES), window_s=MIN_WINDOW_S, idle_s=MIN_WINDOW_S,
                 windows=WINDOWS)
CLAIM = Claim(
    says=(
        "Energy per sequence, which the paper left as future work."),
    bands=BANDS,
    figure_words="S = {}",
    number=NUMBER, name=NAME, statement=STATEMENT, seed_figure=SEED_FIGURE, rule=RULE,
    source="paper (seed 003) left energy as future work; measured as Zeus does",
    citations=("mahorker-lstm-kernels", "zeus-nsdi23"),
    # shapes are [batch, timesteps, features, hidden]: a small and a large one; on a CPU every point is a
    # skipped row saying NVML is not there. fp32 only by default, so that five windows of a second per
    # point fit the GPU lease beside the other claims; AMP's energy is measured with precisions
    # ["fp32", "fp16"]
    defaults={"cpu": dict(_DEFAULTS), "cuda": dict(_DEFAULTS)},
    grid=grid, measure=measure, verdicts=verdicts, check=check_parameters, measure_options=("windows",),
    # a kernel point: build, the warm-up that sizes its window, 5 windows of ~1.1 s, the look at what ran
    seconds_per_point={"cpu": 0.05, "cuda": 8.0},
    # the verdict reads every pair at every shape and phase, each against its own group's idle point: the lease
    # keeps them all and takes the 3 windows the rule needs (MIN_JUDGED_WINDOWS) instead of 5 (planned, not measured)
    lease=Lease(overrides={"windows": MIN_JUDGED_WINDOWS}, seconds_per_point=5.0),
)
