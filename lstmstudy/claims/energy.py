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

How one group is measured (a shape and a phase: every kernel at every precision) is the energy-window
protocol, `lstmstudy.protocols.energy_windows`: on an NVIDIA GPU only, `windows` rounds (5 by default, and at
least: `DECIDING_WINDOWS`) each run one window of every point of the group in a shuffled order, and each
window of N steps, queued and synced once, lasting at least `window_s` (>= `MIN_WINDOW_S`: ten periods of NVML's
energy counter, ~100 ms where it is not measured, see `nvml.MIN_ENERGY_WINDOW_S`), sits between two idle windows
of `idle_s` seconds, each started once power is back at the group's baseline (a bounded wait). Where the node
exposes RAPL (`lstmstudy.rapl`), the host's CPU energy over the window and the idle window before it.

A stored row keeps every window (the protocol says how): N per window in `round_sizes`, each window's
joules and monitor seconds in `observed_detail` (`window_energy_j`, `window_duration_s`), its idle window's
(`window_idle_energy_j`, `window_idle_duration_s`; the one after it, and the waits, are kept beside them), the
host's where measured, their total as `energy_j`, and a group's rows share one `round_seed`. For window w of a
kernel at batch B, with E_w joules over D_w seconds and N_w steps:

    idle power              P_w = joules / seconds of the idle window right before it
    energy above idle       A_w = E_w - P_w x D_w
    per sequence            E_w / (N_w x B) in total, A_w / (N_w x B) above idle
    time per step           D_w / N_w
    power above idle        A_w / D_w

A ratio of two kernels is formed window by window (they ran in the same rounds) and summarised by its
median over windows. Inference and training are decided apart (the verdict's two `parts`), each on the
geometric mean of S over its configurations: with every configuration at `INTERVAL_WINDOWS` (7) windows or
more, on its 95% interval (`stats.geomean_interval`, over configurations and windows, as claim 1's); with
fewer, a handful of windows gives no 95% interval, and the study's rule for few timings decides
(`rules.sign_rule`): the part's geometric mean in each window, all n in one region of the rule with 0.5^n <=
0.05, so 5 of 5 decide and 3 never do. The parts combine as `combine_parts` says.

Rows stored by earlier methods still load and are judged with what they have, and say what they lack:
`REPEATED`, the first H100 set's (3 windows a configuration, idle power from one idle window a round, the
group's `nvml.idle` row, not from one right before each window); `SINGLE_WINDOW`, the first method's (one 0.5 s
window per configuration, one idle window per hardware set): each read as a single window above the set's one
idle power, marked on the page and never judged, since one window gives no interval. Where a set holds rows of
two methods, the newest decides.

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
from lstmstudy.rules import FEW_TIMINGS, SIGN_RULE_ALPHA, Bands, Outcome, Verdict, sign_rule
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
#: the fewest windows the rule for few timings can decide on: n windows all on one side of an edge happen by
#: chance with probability 0.5^n, at most `rules.SIGN_RULE_ALPHA` from 5 on
DECIDING_WINDOWS = next(n for n in range(1, 64) if 0.5 ** n <= SIGN_RULE_ALPHA)
#: windows from which a configuration's (and a part's) 95% interval is a bootstrap's; fewer give their spread only
INTERVAL_WINDOWS = FEW_TIMINGS
#: windows per point by default (and at least, when measuring), in a quick run (a smoke test: it never decides),
#: and at least for a configuration to enter S
WINDOWS, QUICK_WINDOWS, MIN_JUDGED_WINDOWS = DECIDING_WINDOWS, 3, 3
#: the proportional band of S: 1/1.25 to 1.25, symmetric on a log scale
BAND = (0.8, 1.25)
BANDS = Bands(BAND, (Outcome.DOES_NOT_HOLD, Outcome.HOLDS, Outcome.DOES_NOT_HOLD))
#: the rule's two parts: a phase as the rows store it -> its name in the verdict
PARTS = {"inference": "inference", "train": "training"}
RULE = (f"decided for inference and for training apart (two parts), each on the proportionality S = (the fallback's "
        f"GPU energy above idle per sequence over the fused kernel's) / (the fallback's time per step over the fused "
        f"kernel's), i.e. the fallback's power above idle over the fused kernel's, as the geometric mean over the "
        f"part's judged configurations of three fallback/fused pairs (torch.native over torch.fused; keras.relu and "
        f"keras.recurrent_dropout over keras.cudnn_auto, on the same Keras backend) at every stored precision and "
        f"shape, each window of work "
        f"charged the power of an idle window measured right before it. A part whose configurations all have at "
        f"least {INTERVAL_WINDOWS} windows is decided on the 95% interval of that geometric mean (a bootstrap over "
        f"the configurations and their windows); with fewer it has no 95% interval and the rule for few timings "
        f"decides: the part's geometric mean in each window (every configuration's k-th window) decides when all n "
        f"of them lie in one region and 0.5^n <= {SIGN_RULE_ALPHA:g} ({DECIDING_WINDOWS} windows or more), and "
        f"otherwise the part is undecided. A part holds if its interval (or every window) lies within "
        f"{BAND[0]:g} <= S < {BAND[1]:g} (proportional); does not hold if it lies at or above {BAND[1]:g} (more "
        f"than proportional) or below {BAND[0]:g} (less than proportional); is undecided (inconclusive) if it "
        f"straddles {BAND[0]:g} or {BAND[1]:g}, if its windows are too few to decide, or if no configuration can be "
        f"judged. The hypothesis 'the fallback costs energy in proportion to its time', this study's own (no seed "
        f"makes it), holds if both parts hold; does not hold if either part does not hold; is undecided "
        f"(inconclusive) otherwise, a part not measured counting as undecided; not measured where NVML cannot read "
        f"a GPU's energy. A configuration is judged when both kernels have at least {MIN_JUDGED_WINDOWS} "
        f"interleaved windows of at least {MIN_WINDOW_S:g} s and each drew more than idle power in every window; "
        f"a set measured with one idle window a round instead of one before each window is judged with what it has "
        f"and says so, and where a set holds both, the windows with their own idle decide. The band is "
        f"{BAND[1]:g}x either way: the smallest ratio this study calls a material difference (claim 1's floor), "
        f"and well above the ~10% by which the energy counter's update period can move one window's energy. S is "
        f"the GPU board's alone: the host's CPU energy (RAPL), where measured, is shown beside it, never in it")

#: fallback kernel -> the fused kernel it is compared with (claim 1's pairs)
PAIRS: dict[str, str] = {k: cudnn_fallback.TRIGGERS[k][0]
                         for k in ("torch.native", "torch.cell_loop", "keras.relu", "keras.recurrent_dropout")}
#: the comparisons that carry the verdict: the two Keras fallbacks the seeds name (the blog's ReLU layer, Chollet's
#: recurrent dropout) and PyTorch's generic LSTM, each over its framework's fused kernel
HEADLINE: tuple[str, ...] = ("keras.recurrent_dropout", "keras.relu", "torch.native")
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
    """Enough windows per point for the rule to decide a part (`DECIDING_WINDOWS`)."""
    if isinstance(windows, bool) or not isinstance(windows, int) or windows < DECIDING_WINDOWS:
        raise ParameterError(f"parameter 'windows' must be an integer >= {DECIDING_WINDOWS} (fewer windows can never "
                             f"decide the rule: 0.5^n > {SIGN_RULE_ALPHA:g}), got {windows!r}")


def grid(*, kind: str, quick: bool, shapes: Sequence[Sequence[int]], kernel_names: Sequence[str] = DEFAULT_KERNELS,
         precisions: Sequence[str] = ("fp32",), phases: Sequence[str] = ("inference", "train"),
         window_s: float = MIN_WINDOW_S, idle_s: float = MIN_WINDOW_S) -> list[contract.Point]:
    """Per phase and shape, one group (`sweep.groups`): every kernel at every precision, each window of work
    after an idle window of `idle_s` of its own (the point's config holds both lengths).

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
    return [contract.Point(kernel, shape, precision=precision, phase=phase,
                           config={"window_s": float(window_s), "idle_s": float(idle_s)})
            for phase in phases for shape in lstm_shapes for precision in precisions for kernel in kernel_names]


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
    prepare = partial(energy_windows.prepare_point, timing=timing, state=energy_windows.RunState())
    return [sweep.run(NAME, points, prepare, plan, device=device, **options)]


# --- the arithmetic ---------------------------------------------------------------------------------

PAIRED = "windows each after their own idle window"
REPEATED = "repeated windows, one idle window a round"
SINGLE_WINDOW = "single window (old method)"
#: the methods, newest first: where a set holds rows of two, the newest decides
METHODS = (PAIRED, REPEATED, SINGLE_WINDOW)
#: what a set measured by an earlier method lacks, in the verdict's words
LACKS = {REPEATED: "an idle window right before each window of work (each was charged the idle power of its round's "
                   "one idle window)",
         SINGLE_WINDOW: "repeated windows (one window a configuration gives no interval)"}
#: a row with no word on the host's energy: measured before the protocol read RAPL
NO_HOST = "host energy is not measured: these rows predate the host's RAPL readings"
#: what identifies a group's rows: an idle row and the kernels measured in its rounds agree on all of these
_GROUP = ["hardware_id", "phase", "batch", "timesteps", "features", "hidden", "layers", "bidirectional"]


class Windows(NamedTuple):
    """A stored row's energy windows, one entry each, and the method that stored them; for a row of `PAIRED`
    windows, the idle window right before each; where RAPL was read, the host's mean power over each window of
    work and over its idle window (`host_note`: the source, or why the host's energy is not there)."""

    energy_j: np.ndarray
    duration_s: np.ndarray
    steps: np.ndarray  # steps per window (1 per idle window)
    method: str
    idle_energy_j: np.ndarray | None = None
    idle_duration_s: np.ndarray | None = None
    host_power_w: np.ndarray | None = None
    host_idle_power_w: np.ndarray | None = None
    host_note: str = NO_HOST


def _array(detail: dict, key: str) -> np.ndarray | None:
    return np.asarray(detail[key], dtype=float) if key in detail else None


def row_windows(row: pd.Series) -> Windows:
    """The windows of a loaded row (`results.load`): the lists its `observed_detail` keeps, or a row of the
    old method read as one window, its `energy_j` over the sum of its samples."""
    detail = json.loads(row["observed_detail"]) if row["observed_detail"] else {}
    if "window_energy_j" not in detail:
        return Windows(np.array([float(row["energy_j"])]), np.array([float(sum(row["samples"]))]),
                       np.array([float(row["n_samples"])]), SINGLE_WINDOW)
    idle_j, host_j, host_idle_j = (_array(detail, k) for k in (
        "window_idle_energy_j", "window_host_energy_j", "window_host_idle_energy_j"))
    return Windows(
        _array(detail, "window_energy_j"), _array(detail, "window_duration_s"),
        np.asarray(row["round_sizes"], dtype=float), PAIRED if idle_j is not None else REPEATED,
        idle_j, _array(detail, "window_idle_duration_s"),
        host_j / _array(detail, "window_host_duration_s") if host_j is not None else None,
        host_idle_j / _array(detail, "window_host_idle_duration_s") if host_idle_j is not None else None,
        detail.get("host_energy_source") or detail.get("host_energy_missing") or NO_HOST)


def over_windows(values: Sequence[float]) -> tuple[float, float, float]:
    """A row's median over its windows with, from `INTERVAL_WINDOWS` windows, its 95% (re-run) interval; from
    fewer (but at least `MIN_JUDGED_WINDOWS`), the lowest and the highest window, a spread and no 95% interval;
    NaN for the ends below that, and for everything where a window has no finite value."""
    values = np.asarray(values, dtype=float)
    if not values.size or not np.all(np.isfinite(values)):
        return float("nan"), float("nan"), float("nan")
    if values.size < MIN_JUDGED_WINDOWS:
        return float(np.median(values)), float("nan"), float("nan")
    if values.size < INTERVAL_WINDOWS:
        return float(np.median(values)), float(values.min()), float(values.max())
    return window_median(values, MIN_JUDGED_WINDOWS)


def shape_label(batch: int, timesteps: int, hidden: int) -> str:
    return f"batch {batch}, {timesteps} steps, hidden {hidden}"


def _measured(results: pd.DataFrame, idle: bool) -> pd.DataFrame:
    """The `ok` rows with energy: the idle rows (of the earlier methods), or the kernels'."""
    if results.empty:
        return results
    rows = results[(results.status == "ok") & results.energy_j.notna()]
    return rows[(rows.kernel == IDLE_KERNEL) == idle]


IDLE_COLUMNS = ["hardware_id", "phase", "shape", "method", "windows", "window_s", "idle_power_w",
                "idle_power_w_lowest", "idle_power_w_highest"]


def idle_table(results: pd.DataFrame) -> pd.DataFrame:
    """The idle power of every group (or, by the first method, hardware set) where it was measured: the median
    over its idle windows, the lowest and the highest (how far idle power drifted). A group of `PAIRED` windows
    pools the idle windows measured before every window of its kernels."""
    rows = []

    def add(hardware_id: str, phase: str, shape: str, method: str, power: np.ndarray, seconds: np.ndarray) -> None:
        rows.append({"hardware_id": hardware_id, "phase": phase, "shape": shape, "method": method,
                     "windows": len(power), "window_s": float(np.median(seconds)),
                     "idle_power_w": float(np.median(power)), "idle_power_w_lowest": float(power.min()),
                     "idle_power_w_highest": float(power.max())})

    for _, row in _measured(results, idle=True).iterrows():
        w = row_windows(row)
        add(row["hardware_id"], row["phase"], "whole hardware set" if w.method == SINGLE_WINDOW
            else shape_label(int(row["batch"]), int(row["timesteps"]), int(row["hidden"])), w.method,
            w.energy_j / w.duration_s, w.duration_s)
    paired: dict[tuple, list[Windows]] = {}
    for _, row in _measured(results, idle=False).iterrows():
        w = row_windows(row)
        if w.method == PAIRED:
            key = (row["hardware_id"], row["phase"], shape_label(int(row["batch"]), int(row["timesteps"]),
                                                                 int(row["hidden"])))
            paired.setdefault(key, []).append(w)
    for (hardware_id, phase, shape), found in paired.items():
        add(hardware_id, phase, shape, PAIRED, np.concatenate([w.idle_energy_j / w.idle_duration_s for w in found]),
            np.concatenate([w.idle_duration_s for w in found]))
    return pd.DataFrame(rows, columns=IDLE_COLUMNS)


def _idle_power(row: pd.Series, w: Windows, idle: pd.DataFrame) -> np.ndarray:
    """Idle power (W) for each window of a kernel row: the idle window measured right before it (`PAIRED`);
    else the idle window of the same round where its group measured one in the same rounds; else, for every
    window, the median idle power of its group's idle row, or, for a row of the first method only, of the set's
    newest idle row (its one per set); NaN without any: a row of repeated windows is never charged another
    group's idle power."""
    n = len(w.energy_j)
    if w.method == PAIRED:
        return w.idle_energy_j / w.idle_duration_s
    mine = idle[idle.hardware_id == row["hardware_id"]] if not idle.empty else idle
    if mine.empty:
        return np.full(n, np.nan)
    group = mine[np.logical_and.reduce([mine[k] == row[k] for k in _GROUP])]
    for _, candidate in group.iterrows():
        if interleaved(row, candidate):
            other = row_windows(candidate)
            return other.energy_j / other.duration_s
    if group.empty and w.method != SINGLE_WINDOW:  # never another shape's or phase's idle
        return np.full(n, np.nan)
    other = row_windows((group if not group.empty else mine).sort_values("created_at").iloc[-1])
    return np.full(n, float(np.median(other.energy_j / other.duration_s)))


ENERGY_COLUMNS = ["hardware_id", "kernel", "precision", "phase", "shape", "batch", "timesteps", "features", "hidden",
                  "layers", "bidirectional", "config", "backend", "method", "windows", "sequences", "window_s", "median_ms",
                  "mean_power_w", "idle_power_w", "j_per_1k_seq", "j_per_1k_seq_lo", "j_per_1k_seq_hi",
                  "above_idle_j_per_1k_seq", "above_idle_j_per_1k_seq_lo", "above_idle_j_per_1k_seq_hi",
                  "seq_per_j", "above_idle_seq_per_j", "observed_kernel", "round_seed", "round_sizes",
                  "host_note", "host_power_w", "host_above_idle_w",
                  # per window, for the ratios and the stability figure
                  "w_j_per_seq", "w_above_j_per_seq", "w_s_per_step", "w_above_power_w", "w_idle_power_w",
                  "w_host_above_power_w"]


def energy_table(results: pd.DataFrame) -> pd.DataFrame:
    """One row per measured kernel row: its windows' energy per sequence, in total and above idle (the median
    over windows with its interval, or from fewer than `INTERVAL_WINDOWS` windows their spread: `over_windows`),
    the host's power where RAPL was read, and the per-window values the ratios pair."""
    idle = _measured(results, idle=True)
    rows = []
    for _, row in _measured(results, idle=False).iterrows():
        w = row_windows(row)
        sequences = w.steps * int(row["batch"])
        idle_w = _idle_power(row, w, idle)
        above_j = w.energy_j - idle_w * w.duration_s
        total = np.array(over_windows(w.energy_j / sequences)) * 1000
        above = np.array(over_windows(above_j / sequences)) * 1000
        host_above = (w.host_power_w - w.host_idle_power_w if w.host_power_w is not None
                      and w.host_idle_power_w is not None else np.full(len(w.energy_j), np.nan))
        rows.append({
            **{k: row[k] for k in ("hardware_id", "kernel", "precision", "phase", "batch", "timesteps", "features",
                                   "hidden", "layers", "bidirectional", "config", "backend", "round_seed",
                                   "round_sizes")},
            "observed_kernel": what_ran(row["observed_kernel"], row["predicted_kernel"]),
            "shape": shape_label(int(row["batch"]), int(row["timesteps"]), int(row["hidden"])),
            "method": w.method, "windows": len(w.energy_j), "sequences": int(sequences.sum()),
            "window_s": float(np.median(w.duration_s)), "median_ms": float(row["median_s"]) * 1e3,
            "mean_power_w": float(np.median(w.energy_j / w.duration_s)),
            "idle_power_w": float(np.median(idle_w)) if np.isfinite(idle_w).all() else float("nan"),
            **dict(zip(["j_per_1k_seq", "j_per_1k_seq_lo", "j_per_1k_seq_hi"], total)),
            **dict(zip(["above_idle_j_per_1k_seq", "above_idle_j_per_1k_seq_lo", "above_idle_j_per_1k_seq_hi"], above)),
            "seq_per_j": 1000 / total[0], "above_idle_seq_per_j": 1000 / above[0] if above[0] > 0 else np.nan,
            "host_note": w.host_note,
            "host_power_w": float(np.median(w.host_power_w)) if w.host_power_w is not None else float("nan"),
            "host_above_idle_w": float(np.median(host_above)) if np.isfinite(host_above).all() else float("nan"),
            "w_j_per_seq": w.energy_j / sequences, "w_above_j_per_seq": above_j / sequences,
            "w_s_per_step": w.duration_s / w.steps, "w_above_power_w": above_j / w.duration_s,
            "w_idle_power_w": idle_w, "w_host_above_power_w": host_above,
        })
    return pd.DataFrame(rows, columns=ENERGY_COLUMNS)


_MATCH = ["hardware_id", "phase", "batch", "timesteps", "features", "hidden", "layers", "bidirectional", "config",
          "backend"]
#: per ratio: its column prefix in the ratio table, and the per-window column of the energy table it divides
_RATIOS = {"energy_ratio": "w_j_per_seq", "above_idle_ratio": "w_above_j_per_seq", "time_ratio": "w_s_per_step",
           "proportionality": "w_above_power_w"}
RATIO_COLUMNS = ["hardware_id", "kernel", "baseline", "precision", "phase", "shape", "method", "windows", "paired",
                 "judged", "why_not_judged",
                 *(f"{name}{end}" for name in _RATIOS for end in ("", "_lo", "_hi")), "replicates",
                 "w_proportionality", "host_proportionality"]


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


def _window_ratio(a: np.ndarray, b: np.ndarray, paired: bool) -> tuple[float, float, float, np.ndarray | None,
                                                                        np.ndarray]:
    """`stats.window_ratio` of two rows' per-window values, its ends the lowest and the highest window's ratio
    where the windows are paired and fewer than `INTERVAL_WINDOWS` (a spread, no 95% interval), and the
    per-window ratios (empty unless paired and all positive)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ratio, lo, hi, boot = window_ratio(a, b, paired, MIN_JUDGED_WINDOWS)
    per = a / b if paired and len(a) == len(b) and np.isfinite(ratio) else np.array([])
    if per.size and np.isfinite(lo) and per.size < INTERVAL_WINDOWS:
        lo, hi = float(per.min()), float(per.max())
    return ratio, lo, hi, boot, per


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
                       method=next(m for m in reversed(METHODS) if m in (a["method"], b["method"])),
                       windows=min(a["windows"], b["windows"]), judged=not why, why_not_judged=why)
            for name, column in _RATIOS.items():
                ratio, lo, hi, boot, per = _window_ratio(a[column], b[column], paired)
                row.update({name: ratio, f"{name}_lo": lo, f"{name}_hi": hi})
                if name == "proportionality":
                    row.update(replicates=boot, w_proportionality=per)
            host = _window_ratio(np.asarray(a["w_above_power_w"]) + np.asarray(a["w_host_above_power_w"]),
                                 np.asarray(b["w_above_power_w"]) + np.asarray(b["w_host_above_power_w"]), paired)
            row["host_proportionality"] = host[0]
            rows.append(row)
    return pd.DataFrame(rows, columns=[*RATIO_COLUMNS, "baseline_precision"])


def energy_ratios(results: pd.DataFrame) -> pd.DataFrame:
    """Each fallback over its fused kernel at the same configuration and precision: energy per sequence in
    total and above idle, time per step, and their quotient, the proportionality S (see the module), with S in
    each window; where both rows read the host's RAPL, S of the board and the host together (context)."""
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


def short_reason(why: str) -> str:
    """A skip reason in a few words, for a verdict (the page gives the whole reason once: `status_note`)."""
    if "NVML is not available" in why:
        return "NVML is not available on this host (no NVIDIA GPU or driver)"
    if "this run is on" in why:
        return "the run was not on an NVIDIA GPU, whose NVML counters are the only energy read"
    return why


def reading(low: float, high: float) -> str:
    """What an interval (or a spread) of the proportionality S says, in the rule's words."""
    if high < BAND[0]:
        return "less than proportional"
    if low >= BAND[1]:
        return "more than proportional"
    if BAND[0] <= low and high < BAND[1]:
        return "proportional"
    return "cannot tell whether proportional"


def _edge_words(low: float, high: float) -> str:
    """Where a spread of S lies against the band, in words."""
    if high < BAND[0]:
        return f"below {BAND[0]:g}"
    if low >= BAND[1]:
        return f"at or above {BAND[1]:g}"
    return f"within {BAND[0]:g}-{BAND[1]:g}"


class Part(NamedTuple):
    """One part of the rule (a phase) decided on its judged configurations: the geometric mean of S, the interval
    it is decided on (`on_interval`) or the spread of its per-window geometric means (`per_window`), the fewest
    windows of a configuration, and the outcome."""

    name: str
    configurations: pd.DataFrame
    figure: float
    low: float
    high: float
    per_window: np.ndarray
    fewest: int
    on_interval: bool
    outcome: Outcome


def decide_part(name: str, judged: pd.DataFrame) -> Part:
    """A part from its judged configurations (rows of `energy_ratios`, every one paired): on the 95% interval of
    the geometric mean of S where every configuration has `INTERVAL_WINDOWS` windows; else by the rule for few
    timings (`rules.sign_rule`) on the geometric mean in each window, the k-th window of every configuration."""
    fewest = int(judged.windows.min())
    per_window = np.array([geomean([w[k] for w in judged.w_proportionality]) for k in range(fewest)])
    figure = geomean(judged.proportionality)
    if fewest >= INTERVAL_WINDOWS:
        low, high = geomean_interval(list(judged.replicates))
        return Part(name, judged, figure, low, high, per_window, fewest, True, BANDS.decide(low, high))
    decided = sign_rule(BANDS, list(per_window))
    return Part(name, judged, figure, float(per_window.min()), float(per_window.max()), per_window, fewest, False,
                decided or Outcome.INCONCLUSIVE)


_PART_WORDS = {Outcome.HOLDS: "holds", Outcome.DOES_NOT_HOLD: "does not hold", Outcome.INCONCLUSIVE: "undecided",
               Outcome.NOT_MEASURED: "not measured"}


def part_text(part: Part) -> str:
    """A part in words: its outcome, S with the interval or the windows that decided it, and the two ratios S
    comes from."""
    n = len(part.per_window)
    if part.on_interval:
        how = (f"S = {part.figure:.2f} (95% interval {part.low:.2f}-{part.high:.2f}): "
               f"{reading(part.low, part.high)}")
    else:
        windows = ", ".join(f"{v:.2f}" for v in part.per_window)
        how = f"S = {part.figure:.2f}, in each of {n} windows {windows} (too few windows for a 95% interval): "
        if part.outcome != Outcome.INCONCLUSIVE:
            how += (f"all {n} lie {_edge_words(part.low, part.high)} ({reading(part.low, part.high)}), which the "
                    f"rule for few timings decides (0.5^{n} = {0.5 ** n:.3f} <= {SIGN_RULE_ALPHA:g})")
        elif len({BANDS.region(v) for v in part.per_window}) == 1:
            how += (f"all {n} lie {_edge_words(part.low, part.high)}, but {n} windows cannot decide by the rule for "
                    f"few timings (0.5^{n} = {0.5 ** n:.3f} > {SIGN_RULE_ALPHA:g}: it takes {DECIDING_WINDOWS})")
        else:
            how += f"they lie on both sides of an edge of the band ({part.low:.2f}-{part.high:.2f})"
    judged = part.configurations
    return (f"{part.name} {_PART_WORDS[part.outcome]}: {how}; energy above idle per sequence "
            f"{geomean(judged.above_idle_ratio):.2f}x the fused kernel's for {geomean(judged.time_ratio):.2f}x its "
            f"time (geometric mean of {len(judged)} configuration(s): {', '.join(sorted(judged.kernel.unique()))})")


def combine_parts(outcomes: Sequence[Outcome]) -> Outcome:
    """The hypothesis from its parts (`PARTS`, each HOLDS, DOES_NOT_HOLD, INCONCLUSIVE or NOT_MEASURED): it does
    not hold if any part does not hold (it claims proportion in both phases); it holds if every part holds; not
    measured if no part was; otherwise undecided, a part not measured counting as undecided."""
    if all(o == Outcome.NOT_MEASURED for o in outcomes):
        return Outcome.NOT_MEASURED
    if Outcome.DOES_NOT_HOLD in outcomes:
        return Outcome.DOES_NOT_HOLD
    if all(o == Outcome.HOLDS for o in outcomes):
        return Outcome.HOLDS
    return Outcome.INCONCLUSIVE


def _why(outcome: Outcome, named: dict[str, Outcome]) -> str:
    """Why the parts combine to `outcome`, in words."""
    if outcome == Outcome.HOLDS:
        return "the hypothesis holds: both parts hold"
    if outcome == Outcome.DOES_NOT_HOLD:
        failing = [n for n, o in named.items() if o == Outcome.DOES_NOT_HOLD]
        return ("the hypothesis does not hold: " + ("neither part holds" if len(failing) == len(named) else
                                                    f"the {failing[0]} part does not hold"))
    others = {n: o for n, o in named.items() if o != Outcome.HOLDS}
    if len(others) == len(named) and len(set(others.values())) == 1:
        return f"the hypothesis is undecided: both parts are {_PART_WORDS[next(iter(others.values()))]}"
    return "the hypothesis is undecided: " + " and ".join(f"the {n} part is {_PART_WORDS[o]}" for n, o in others.items())


def _deciding_method(mine: pd.DataFrame) -> str:
    """The newest method with a judged configuration in a set's headline pairs (else the newest there)."""
    judged = set(mine.loc[mine.judged.astype(bool), "method"])
    return next((m for m in METHODS if m in judged), next(m for m in METHODS if m in set(mine.method)))


def verdicts(results: pd.DataFrame) -> list[Verdict]:
    """One verdict per hardware set: inference and training decided apart (`parts`), each on the geometric-mean
    proportionality of the headline pairs it can judge (`decide_part`), and combined (`combine_parts`)."""
    table = energy_ratios(results)
    reasons = skip_reasons(results)
    out = []
    for hardware_id in sorted(results.hardware_id.unique()) if not results.empty else []:
        mine = table[(table.hardware_id == hardware_id) & table.kernel.isin(HEADLINE)]
        if mine.empty:
            why = short_reason(reasons.get(hardware_id, "no fallback/fused energy pair stored"))
            out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, f"not measured: {why}",
                               Outcome.NOT_MEASURED, RULE))
            continue
        method = _deciding_method(mine)
        deciding = mine[mine.judged.astype(bool) & (mine.method == method)]
        left_out = mine.drop(deciding.index)
        why_left = left_out.why_not_judged.where(left_out.why_not_judged != "",
                                                 f"superseded by the rows of {method}")
        left = (f"; {len(left_out)} configuration(s) not judged: "
                + "; ".join(f"{n} {why}" for why, n in why_left.value_counts().items()) if len(left_out) else "")
        if deciding.empty:
            out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None,
                               f"no configuration can be judged{left}", Outcome.INCONCLUSIVE, RULE))
            continue
        parts, texts, named = [], [], {}
        for phase, name in PARTS.items():
            judged = deciding[deciding.phase == phase]
            if judged.empty:
                named[name] = Outcome.INCONCLUSIVE if (mine.phase == phase).any() else Outcome.NOT_MEASURED
                texts.append(f"{name} {_PART_WORDS[named[name]]}: "
                             + ("no configuration can be judged" if named[name] == Outcome.INCONCLUSIVE
                                else "no pair measured"))
                continue
            part = decide_part(name, judged)
            parts.append(part)
            named[name] = part.outcome
            texts.append(part_text(part))
        outcome = combine_parts(list(named.values()))
        fewest = min(p.fewest for p in parts)
        lacks = [LACKS[method]] if method in LACKS else []
        if fewest < DECIDING_WINDOWS:
            lacks.append(f"{DECIDING_WINDOWS} windows a configuration (it has {fewest}, and the rule for few timings "
                         f"decides on no fewer than {DECIDING_WINDOWS})")
        lacking = (f"; this set ({method}) lacks " + ", and ".join(lacks)) if lacks else ""
        few = [p.fewest for p in parts if not p.on_interval]
        out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None,
                           f"{'; '.join(texts)}; so {_why(outcome, named)}{lacking}{left}", outcome, RULE,
                           parts=tuple((p.name, p.low, p.high) for p in parts),
                           fewest_timings=min(few) if few else None))
    return out


# --- what the page shows --------------------------------------------------------------------------

def status_note(results: pd.DataFrame) -> str:
    """Markdown: where energy was measured, and where not and why (each reason once, with every set it holds
    for); and whether the host's energy was measured beside the GPU's."""
    measured = sorted(set(_measured(results, idle=False).hardware_id)) if not results.empty else []
    lines = []
    if measured:
        lines.append("Energy was measured on: " + ", ".join(f"`{h}`" for h in measured) + ".")
    by_reason: dict[str, list[str]] = {}
    for hardware_id, why in skip_reasons(results).items():
        by_reason.setdefault(why, []).append(hardware_id)
    for why, sets in by_reason.items():
        lines.append(f"**Energy was not measured on {', '.join(f'`{h}`' for h in sets)}**: {why}. "
                     f"{'Their' if len(sets) > 1 else 'Its'} rows are stored as `skipped` with that reason.")
    if not lines:
        lines.append("**No result set is stored yet**: run this page with `measure=True` on a machine with an "
                     "NVIDIA GPU.")
    return "\n\n".join(lines)


def host_note(results: pd.DataFrame) -> str:
    """Markdown: per GPU set, whether the host's CPU energy (RAPL) was measured beside the board's, and if not,
    why (each reason once)."""
    table = energy_table(results)
    if table.empty:
        return "Host energy: no GPU set is stored, so none was measured."
    lines = []
    for hardware_id, part in table.groupby("hardware_id"):
        notes = part.host_note.value_counts()
        measured = [n for n in notes.index if n.startswith("RAPL")]
        missing = [n for n in notes.index if not n.startswith("RAPL")]
        if measured:
            lines.append(f"Host (CPU package) energy on `{hardware_id}`: measured through {', '.join(measured)} "
                         f"for {int(notes[measured].sum())} of its {len(part)} kernel rows.")
        for why in missing:
            lines.append(f"**Host energy on `{hardware_id}`** ({int(notes[why])} of its {len(part)} kernel rows): "
                         f"{why}. Its joules are the GPU board's alone, and a fallback's extra host work (Keras on "
                         f"torch runs its loop in Python on the host) is not in them.")
    return "\n\n".join(lines)


def rounded(table: pd.DataFrame) -> pd.DataFrame:
    """A table for the page: every float cell to 3 significant figures (a missing one stays missing, for
    `notebook.shown` to say why), so no 6-decimal figure runs across the page."""
    out = table.copy()
    for column in out.columns:
        if pd.api.types.is_float_dtype(out[column]):
            out[column] = [f"{v:.3g}" if pd.notna(v) else v for v in out[column]]
    return out


def method_table() -> pd.DataFrame:
    """The comparisons this page makes, as a table."""
    rows = [{"fallback": k, "fused baseline": base, "what breaks the fused path": cudnn_fallback.TRIGGERS[k][1],
             "measured by default": k in DEFAULT_KERNELS, "in the verdict": k in HEADLINE}
            for k, base in PAIRS.items()]
    return pd.DataFrame(rows)


def _with_interval(value: float, low: float, high: float, windows: int) -> str:
    """A median over windows with its 95% interval, or from fewer than `INTERVAL_WINDOWS` windows their spread."""
    if not np.isfinite(value):
        return "n/a"
    if not np.isfinite(low):
        return f"{value:.3g} (no interval: {int(windows)} window{'s' if windows != 1 else ''})"
    if windows < INTERVAL_WINDOWS:
        return f"{value:.3g} (spread of {int(windows)} windows: {low:.3g}-{high:.3g})"
    return f"{value:.3g} (95% interval {low:.3g}-{high:.3g})"


def summary(results: pd.DataFrame) -> pd.DataFrame:
    """The energy table as the page shows it: per hardware set, shape, phase, kernel and precision, the
    median over windows with its 95% interval (or, from fewer than `INTERVAL_WINDOWS` windows, their spread)."""
    table = energy_table(results)
    columns = ["hardware", "shape", "phase", "kernel", "precision", "method", "windows", "ms per step",
               "window (s)", "mean power (W)", "idle (W)", "J per 1,000 seq", "J per 1,000 seq above idle",
               "seq per J", "seq per J above idle", "host power above idle (W)"]
    if table.empty:
        return pd.DataFrame(columns=columns)
    table = table.sort_values(["hardware_id", "batch", "phase", "kernel", "precision"])
    return pd.DataFrame({
        "hardware": table.hardware_id, "shape": table["shape"], "phase": table.phase, "kernel": table.kernel,
        "precision": table.precision, "method": table.method, "windows": table.windows,
        "ms per step": table.median_ms, "window (s)": table.window_s, "mean power (W)": table.mean_power_w,
        "idle (W)": table.idle_power_w,
        "J per 1,000 seq": [_with_interval(*v) for v in table[["j_per_1k_seq", "j_per_1k_seq_lo",
                                                                  "j_per_1k_seq_hi", "windows"]].to_numpy()],
        "J per 1,000 seq above idle": [_with_interval(*v) for v in table[[
            "above_idle_j_per_1k_seq", "above_idle_j_per_1k_seq_lo", "above_idle_j_per_1k_seq_hi",
            "windows"]].to_numpy()],
        "seq per J": table.seq_per_j, "seq per J above idle": table.above_idle_seq_per_j,
        "host power above idle (W)": table.host_above_idle_w,
    }).reset_index(drop=True)


def ratio_summary(ratios: pd.DataFrame) -> pd.DataFrame:
    """Every fallback/fused pair as the page shows it: the three ratios and S with their 95% intervals (or, from
    fewer than `INTERVAL_WINDOWS` windows, their spread), what S says, S of board and host together where RAPL
    was read, and whether the rule judges the pair (and why not)."""
    columns = ["hardware", "kernel", "baseline", "precision", "phase", "shape", "method", "windows", "time ratio",
               "energy ratio above idle", "energy ratio, total", "S", "reading", "S, board and host", "judged"]
    if ratios.empty:
        return pd.DataFrame(columns=columns)

    def interval(row: pd.Series, name: str) -> str:
        return _with_interval(row[name], row[f"{name}_lo"], row[f"{name}_hi"], row["windows"])

    return pd.DataFrame([{
        "hardware": r.hardware_id, "kernel": r.kernel, "baseline": r.baseline, "precision": r.precision,
        "phase": r.phase, "shape": r["shape"], "method": r.method, "windows": r.windows,
        "time ratio": interval(r, "time_ratio"), "energy ratio above idle": interval(r, "above_idle_ratio"),
        "energy ratio, total": interval(r, "energy_ratio"), "S": interval(r, "proportionality"),
        "reading": (reading(r.proportionality_lo, r.proportionality_hi) if np.isfinite(r.proportionality_lo)
                    else "n/a (no interval)"),
        "S, board and host": (f"{r.host_proportionality:.3g}" if np.isfinite(r.host_proportionality)
                              else "host not measured"),
        "judged": "yes" if r.judged else f"no: {r.why_not_judged}"} for _, r in ratios.iterrows()], columns=columns)


def _deciding(ratios: pd.DataFrame) -> pd.DataFrame:
    """The configurations each set's verdict decides on: its judged headline pairs of the deciding method."""
    judged = ratios[ratios.judged.astype(bool) & ratios.kernel.isin(HEADLINE)] if not ratios.empty else ratios
    if judged.empty:
        return judged
    keep = [part[part.method == _deciding_method(part)] for _, part in judged.groupby("hardware_id")]
    return pd.concat(keep)


def proportionality_summary(ratios: pd.DataFrame) -> pd.DataFrame:
    """S per hardware set, fallback and phase over the configurations the verdict decides on: the geometric mean
    with the interval the rule would use (`decide_part`: its 95% interval, or from fewer than `INTERVAL_WINDOWS`
    windows the spread of the per-window geometric means), in the layout `plots.ratio_bars` draws."""
    columns = ["hardware_id", "kernel", "phase", "ratio", "ratio_lo", "ratio_hi"]
    judged = _deciding(ratios)
    if judged.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for (hardware_id, kernel, phase), part in judged.groupby(["hardware_id", "kernel", "phase"]):
        decided = decide_part(PARTS.get(phase, phase), part)
        rows.append({"hardware_id": hardware_id, "kernel": kernel, "phase": phase,
                     "ratio": decided.figure, "ratio_lo": decided.low, "ratio_hi": decided.high})
    return pd.DataFrame(rows, columns=columns)


STABILITY_COLUMNS = ["hardware_id", "phase", "series", "window", "S", "idle_w", "deciding"]
#: the series of `stability` that the rule counts: the part's geometric mean in each window
PART_SERIES = "geometric mean (what the rule counts)"


def stability(results: pd.DataFrame) -> pd.DataFrame:
    """S in each window, for the stability figure (`plots.s_per_window`): per hardware set and phase, one series
    per judged headline configuration ('keras.relu, batch 64, 128 steps, hidden 1024, fp32') and the part's
    geometric mean in each window (`PART_SERIES`, what the rule for few timings counts); `idle_w` is the idle
    power charged to the fallback's window (W), `deciding` whether the configuration is one the verdict decides on."""
    ratios = energy_ratios(results)
    judged = ratios[ratios.judged.astype(bool) & ratios.kernel.isin(HEADLINE)] if not ratios.empty else ratios
    if judged.empty:
        return pd.DataFrame(columns=STABILITY_COLUMNS)
    table = energy_table(results)
    deciding = set(_deciding(ratios).index)
    rows = []
    for index, r in judged.iterrows():
        mine = table[(table.hardware_id == r.hardware_id) & (table.kernel == r.kernel) & (table.phase == r.phase)
                     & (table["shape"] == r["shape"]) & (table.precision == r.precision)
                     & (table.method == r.method)]
        idle = np.asarray(mine.iloc[-1].w_idle_power_w, dtype=float) if not mine.empty else []
        series = f"{r.kernel}, {r['shape']}, {r.precision}"
        for k, value in enumerate(r.w_proportionality):
            rows.append({"hardware_id": r.hardware_id, "phase": r.phase, "series": series, "window": k + 1,
                         "S": float(value), "idle_w": float(idle[k]) if k < len(idle) else float("nan"),
                         "deciding": index in deciding})
    for (hardware_id, phase), part in _deciding(ratios).groupby(["hardware_id", "phase"]):
        for k, value in enumerate(decide_part(PARTS.get(phase, phase), part).per_window):
            rows.append({"hardware_id": hardware_id, "phase": phase, "series": PART_SERIES, "window": k + 1,
                         "S": float(value), "idle_w": float("nan"), "deciding": True})
    return pd.DataFrame(rows, columns=STABILITY_COLUMNS)


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


#: the shape the lease measures: the large one, where the arithmetic shows (on the first H100 set no window of the
#: small one drew more than idle power, so none of its configurations could be judged)
LEASE_SHAPES = [[64, 128, 512, 1024]]
_DEFAULTS = dict(shapes=[[16, 32, 128, 128], *LEASE_SHAPES], kernel_names=list(DEFAULT_KERNELS),
                 precisions=["fp32"], phases=list(contract.PHASES), window_s=MIN_WINDOW_S, idle_s=MIN_WINDOW_S,
                 windows=WINDOWS)
CLAIM = Claim(
    says=(
        "Energy per sequence, which the paper left as future work."),
    bands=BANDS,
    figure_words="S = {}", unit="",
    figure_meaning=("*S* is the fallback's power above idle over the fused kernel's: its GPU energy above idle per "
                    "sequence over the fused kernel's, divided by its time per step over the fused kernel's (1 when "
                    "energy grows in proportion to time)."),
    number=NUMBER, name=NAME, statement=STATEMENT, seed_figure=SEED_FIGURE, rule=RULE,
    source="paper (seed 003) left energy as future work; measured as Zeus does",
    citations=("mahorker-lstm-kernels", "zeus-nsdi23"),
    # shapes are [batch, timesteps, features, hidden]: a small and a large one; on a CPU every point is a
    # skipped row saying NVML is not there. fp32 only by default, so that five windows of a second per
    # point, each after an idle window of a second, fit the GPU lease beside the other claims; AMP's energy
    # is measured with precisions ["fp32", "fp16"]
    defaults={"cpu": dict(_DEFAULTS), "cuda": dict(_DEFAULTS)},
    grid=grid, measure=measure, verdicts=verdicts, check=check_parameters, measure_options=("windows",),
    # a kernel point: build, the warm-up that sizes its window, 5 pairs of an idle window of 1.0 s and a window of
    # work of ~1.16 s (the first H100 set's mean), NVML opened for each (13 s, planned from that set), and a wait for
    # power to settle before each idle window (at most `nvml.SETTLE_MAX_S`, planned at ~0.5 s), a group's baseline
    # and its one idle window more (~0.3 s a point): not yet measured
    seconds_per_point={"cpu": 0.05, "cuda": 16.0},
    # the verdict reads every headline pair in both phases: the lease keeps them all, with the 5 windows the rule
    # needs, at the large shape only (10 points)
    lease=Lease(overrides={"shapes": LEASE_SHAPES}),
)
