"""Claim 6 (the paper's future work): what the fallback kernels and mixed precision cost in energy.

Seed 003 closes with: "another performance benchmark we can also explore is energy consumption [...]
estimate how much energy is used". There is no figure to reproduce, so this page states what we
measure and a hypothesis with its rule, and reports the figure per GPU result set:

*the fallback costs energy in proportion to its time*, i.e. a fallback kernel that is 2x slower than
the fused one (claim 1) also spends at least 2x the energy per sequence.

How one point is measured (`measure_point`), on an NVIDIA GPU only:

1. build the kernel (`kernels.build`), warm it up and time it with `timing.measure` as every claim does;
2. from that median, size a window of N back-to-back steps lasting at least `window_s` (0.5 s by
   default, five periods of NVML's ~100 ms energy counter), and run exactly N synced steps inside a
   `GpuMonitor` window, timing each step again (`timing.measure` with N samples). If the window comes
   out shorter than `window_s`, N grows and the window is run again; a window the counter cannot
   measure is never stored as a number (the point becomes an `error` row with NVML's warning);
3. store the window's N per-step times as the row's samples and its energy as `energy_j` (joules for
   the whole window). So the stored row holds everything the page needs: N = `n_samples`, sequences
   covered = N x `batch`, window duration = sum of the samples (the sync gaps between steps are
   microseconds against >= 0.5 s), `config` records the target `window_s`.

Idle power is one extra row per hardware set (kernel `nvml.idle`): an empty `nvml.idle_power` window of
`idle_s` seconds, its duration as the one sample and its energy as `energy_j`. Energy *above idle* for a
window is `energy_j - idle_W x window_s`: what the work added over a GPU that sat doing nothing.

Where there is no NVML (no NVIDIA driver, no GPU: this CPU-only machine), or the run is on the CPU,
every point raises `Skip` with the reason, so the result set holds `skipped` rows saying why, and the
verdict is `not measured on this hardware`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import pandas as pd
import torch

from lstmstudy import kernels, sweep
from lstmstudy.claims import Bands, Claim, Outcome, Verdict, cudnn_fallback
from lstmstudy.errors import ParameterError, Skip
from lstmstudy.nvml import (
    ENERGY_COUNTER_PERIOD_S,
    GpuMonitor,
    energy_window,
    idle_window,
    nvml_available,
    nvml_index,
    per_item,
    repetitions,
)
from lstmstudy.observe import Observation, what_ran
from lstmstudy.parameters import check_choices
from lstmstudy.shapes import LSTMShape
from lstmstudy.stats import geomean
from lstmstudy.timing import Measurement, sync_for
from lstmstudy.timing import measure as time_call

NAME = "energy"
NUMBER = "06"
STATEMENT = ("Energy per sequence (the paper's future work): a fallback kernel costs energy in proportion "
             "to its time, at least 2x the fused kernel's")
SEED_FIGURE = "not measured (the paper's future work)"
#: claim 1's time band, one-sided: >= 2x reproduced, 1.25x-2x partly
BANDS = Bands((1.25, 2.0), (Outcome.NOT_REPRODUCED, Outcome.PARTLY, Outcome.REPRODUCED))
RULE = ("the hypothesis 'the fallback costs energy in proportion to its time' is reproduced on a GPU set if "
        "the geometric mean, over every measured configuration, of the fallback's total GPU energy per "
        "sequence over the fused kernel's (torch.native over torch.fused; keras.relu and "
        "keras.recurrent_dropout over keras.cudnn_auto) is at least 2x (claim 1's time band); partly "
        "between 1.25x and 2x; not reproduced below 1.25x; not measured where NVML cannot read a GPU's energy. "
        "Decided on the point estimate: one energy window per configuration gives no interval yet")

#: fallback kernel -> the fused kernel it is compared with (claim 1's pairs)
PAIRS: dict[str, str] = {k: cudnn_fallback.TRIGGERS[k][0]
                         for k in ("torch.native", "torch.cell_loop", "keras.relu", "keras.recurrent_dropout")}
#: the comparisons that carry the verdict: claim 1's GPU headline
HEADLINE: tuple[str, ...] = cudnn_fallback.HEADLINE["cuda"]
KERNELS: tuple[str, ...] = ("torch.fused", "torch.native", "torch.cell_loop",
                            "keras.cudnn_auto", "keras.relu", "keras.recurrent_dropout")
QUICK_KERNELS: tuple[str, ...] = ("torch.fused", "torch.native")
#: every precision, in the order the page's figures show them
PRECISIONS: tuple[str, ...] = sweep.PRECISIONS
IDLE_KERNEL = "nvml.idle"
IDLE_SHAPE = LSTMShape(batch=1, timesteps=1, features=1, hidden=1)  # placeholder: an idle window has no shape
#: a window must last at least this long to be sized at all (the counter updates every ~100 ms)
MIN_WINDOW_S = 2 * ENERGY_COUNTER_PERIOD_S
QUICK_WINDOW_S = 0.25


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
    """Energy windows must be long enough for NVML's energy counter."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= MIN_WINDOW_S:
            raise ParameterError(f"parameter {name!r} must be a number of seconds >= {MIN_WINDOW_S:g} "
                                 f"(twice NVML's ~{ENERGY_COUNTER_PERIOD_S:g} s energy counter period), got {value!r}")


def grid(*, kind: str, quick: bool, shapes: Sequence[Sequence[int]], kernel_names: Sequence[str] = KERNELS,
         precisions: Sequence[str] = ("fp32", "fp16"), phases: Sequence[str] = ("inference", "train"),
         window_s: float = 0.5, idle_s: float = 1.0) -> list[sweep.Point]:
    """The idle window first, then every kernel at every shape, precision and phase.

    `quick` keeps the first shape (at most 8 timesteps), the first phase, the two PyTorch kernels and a
    `QUICK_WINDOW_S` window: enough to check the plumbing, on a GPU or (all skipped) on a CPU.
    """
    lstm_shapes = check_shapes([list(s) for s in shapes])
    if quick:
        first = lstm_shapes[0]
        lstm_shapes = [LSTMShape(batch=first.batch, timesteps=min(first.timesteps, 8), features=first.features,
                                 hidden=first.hidden)]
        phases = list(phases)[:1]
        kernel_names = [k for k in kernel_names if k in QUICK_KERNELS] or list(kernel_names)[:2]
        window_s, idle_s = min(window_s, QUICK_WINDOW_S), min(idle_s, QUICK_WINDOW_S)
    idle = sweep.Point(IDLE_KERNEL, IDLE_SHAPE, config={"idle_s": float(idle_s)})
    return [idle] + [sweep.Point(kernel, shape, precision=precision, phase=phase,
                                 config={"window_s": float(window_s)})
                     for phase in phases for shape in lstm_shapes for precision in precisions
                     for kernel in kernel_names]


# --- measuring ------------------------------------------------------------------------------------

def unavailable(device: torch.device) -> str | None:
    """Why energy cannot be measured for a run on `device` (None: it can)."""
    reason = nvml_available(_nvml_index(device) if device.type == "cuda" else 0)
    if reason:
        return reason
    if device.type != "cuda":
        return (f"energy is read from an NVIDIA GPU's NVML counters and this run is on {device.type}; "
                "run with device='cuda' to measure it")
    return None


def _nvml_index(device: torch.device) -> int:
    """NVML's index of a torch CUDA device (matched by UUID: CUDA_VISIBLE_DEVICES renumbers)."""
    return nvml_index(str(torch.cuda.get_device_properties(device).uuid), device.index or 0)


def _open_monitor(device: torch.device, sync) -> GpuMonitor:
    return GpuMonitor(_nvml_index(device), sync=sync)


def measure_point(point: sweep.Point, device: torch.device, *, unavailable_reason: Callable = unavailable,
                  monitor_factory: Callable = _open_monitor, **timing_kwargs) -> sweep.PointResult:
    """The `prepare` of this claim's sweep, which measures each point its own way (not in interleaved
    rounds): the idle window, or a kernel's timing plus its energy window."""
    if reason := unavailable_reason(device):
        raise Skip(reason)
    if point.kernel == IDLE_KERNEL:
        return _measure_idle(point, device, monitor_factory)
    k = kernels.check_fused(kernels.build(point.kernel, point.shape, device, point.precision, point.phase))
    timed = time_call(k.step, sync=k.sync, **timing_kwargs)  # warm-up and timing as every claim does
    window_s = float(point.config["window_s"])
    sync = k.sync or sync_for(device)
    with monitor_factory(device, sync) as monitor:
        m, gm = energy_window(k.step, sync, monitor, n=repetitions(timed.median, window_s), window_s=window_s)
    seen = k.observe()
    return sweep.PointResult(measurement=m, flops=point.shape.flops(point.phase), energy_j=gm.energy_j,
                         observed=Observation(seen.kernel, {**seen.detail, "energy_source": gm.energy_source}),
                         predicted_kernel=k.predicted_kernel, compute_dtype=k.compute_dtype)


def _measure_idle(point: sweep.Point, device: torch.device, monitor_factory: Callable) -> sweep.PointResult:
    with monitor_factory(device, sync_for(device)) as monitor:
        gm = idle_window(monitor, float(point.config["idle_s"]))
    m = Measurement(samples=(gm.duration_s,), warmup=0, threads=torch.get_num_threads(), sync="none")
    return sweep.PointResult(measurement=m, energy_j=gm.energy_j,
                         observed=Observation("none", {"energy_source": gm.energy_source}))


def measure(points: list[sweep.Point], *, device: str, min_time: float, quick: bool = False,
            **sweep_options) -> list[sweep.SweepReport]:
    """Measure the points not yet stored for this hardware; without NVML every point is a `skipped` row."""
    # one burst sizes each energy window (a quick run only checks the plumbing)
    timing = dict(min_time=0.02, max_time=0.2, min_samples=3) if quick else dict(min_time=min_time, max_time=1.0)
    return [sweep.run(NAME, points, partial(measure_point, **timing), device=device,
                      **sweep_options)]


def check_parameters(parameters: dict) -> None:
    check_shapes(parameters["shapes"])
    check_choices("kernel_names", parameters["kernel_names"], KERNELS)
    check_choices("precisions", parameters["precisions"], sweep.PRECISIONS)
    check_choices("phases", parameters["phases"], sweep.PHASES)
    check_window(window_s=parameters["window_s"], idle_s=parameters["idle_s"])


# --- the arithmetic ---------------------------------------------------------------------------------

ENERGY_COLUMNS = ["hardware_id", "kernel", "precision", "phase", "shape", "batch", "timesteps", "features",
                  "hidden", "layers", "bidirectional", "config", "repetitions", "sequences", "window_s",
                  "median_ms", "energy_j", "mean_power_w", "idle_power_w", "above_idle_j", "j_per_seq",
                  "seq_per_j", "j_per_1k_seq", "above_idle_j_per_1k_seq", "above_idle_seq_per_j", "observed_kernel"]


def shape_label(batch: int, timesteps: int, hidden: int) -> str:
    return f"batch {batch}, {timesteps} steps, hidden {hidden}"


def idle_table(results: pd.DataFrame) -> pd.DataFrame:
    """The idle power of every hardware set where it was measured (the newest idle window)."""
    columns = ["hardware_id", "idle_power_w", "window_s", "energy_j", "observed_kernel"]
    if results.empty:
        return pd.DataFrame(columns=columns)
    idle = results[(results.kernel == IDLE_KERNEL) & (results.status == "ok") & results.energy_j.notna()]
    rows = []
    for _, row in idle.sort_values("created_at").groupby("hardware_id").tail(1).iterrows():
        window = float(sum(row["samples"]))
        rows.append({"hardware_id": row["hardware_id"], "idle_power_w": row["energy_j"] / window,
                     "window_s": window, "energy_j": row["energy_j"], "observed_kernel": row["observed_kernel"]})
    return pd.DataFrame(rows, columns=columns)


def energy_table(results: pd.DataFrame) -> pd.DataFrame:
    """One row per measured energy window: the sequences it covered, its energy total and above idle,
    J per sequence, sequences per J and J per 1,000 sequences."""
    if results.empty:
        return pd.DataFrame(columns=ENERGY_COLUMNS)
    ok = results[(results.kernel != IDLE_KERNEL) & (results.status == "ok") & results.energy_j.notna()]
    idle = idle_table(results).set_index("hardware_id").idle_power_w.to_dict()
    rows = []
    for _, row in ok.iterrows():
        reps, batch = int(row["n_samples"]), int(row["batch"])
        window = float(sum(row["samples"]))
        sequences = reps * batch
        energy = float(row["energy_j"])
        idle_w = idle.get(row["hardware_id"], float("nan"))
        above = energy - idle_w * window
        total = per_item(energy, sequences)
        above_per = per_item(above, sequences) if above > 0 else None
        rows.append({
            **{k: row[k] for k in ("hardware_id", "kernel", "precision", "phase", "batch", "timesteps", "features",
                                   "hidden", "layers", "bidirectional", "config")},
            "observed_kernel": what_ran(row["observed_kernel"], row["predicted_kernel"]),
            "shape": shape_label(batch, int(row["timesteps"]), int(row["hidden"])),
            "repetitions": reps, "sequences": sequences, "window_s": window,
            "median_ms": float(row["median_s"]) * 1e3, "energy_j": energy, "mean_power_w": energy / window,
            "idle_power_w": idle_w, "above_idle_j": above,
            "j_per_seq": total.joules_per_item, "seq_per_j": total.items_per_joule,
            "j_per_1k_seq": total.joules_per_item * 1000,
            "above_idle_j_per_1k_seq": above_per.joules_per_item * 1000 if above_per else float("nan"),
            "above_idle_seq_per_j": above_per.items_per_joule if above_per else float("nan"),
        })
    return pd.DataFrame(rows, columns=ENERGY_COLUMNS)


_MATCH = ["hardware_id", "phase", "batch", "timesteps", "features", "hidden", "layers", "bidirectional", "config"]
RATIO_COLUMNS = ["hardware_id", "kernel", "baseline", "precision", "phase", "shape", "energy_ratio",
                 "above_idle_ratio", "time_ratio", "power_ratio"]


def _pair_ratios(table: pd.DataFrame, pairs: Sequence[tuple[dict, dict]], keys: Sequence[str]) -> pd.DataFrame:
    """For each (numerator selector, denominator selector): numerator / denominator at equal `keys`."""
    rows = []
    for num_sel, den_sel in pairs:
        num = table.loc[np.logical_and.reduce([table[k] == v for k, v in num_sel.items()])]
        den = table.loc[np.logical_and.reduce([table[k] == v for k, v in den_sel.items()])]
        merged = num.merge(den, on=list(keys), suffixes=("", "_base"))
        for _, r in merged.iterrows():
            base = lambda column: r.get(f"{column}_base", r[column])  # noqa: E731 - a key column has no _base
            rows.append({"hardware_id": r["hardware_id"], "kernel": r["kernel"], "baseline": base("kernel"),
                         "precision": r["precision"], "precision_base": base("precision"), "phase": r["phase"],
                         "shape": r["shape"],
                         "energy_ratio": r["j_per_seq"] / r["j_per_seq_base"],
                         "above_idle_ratio": r["above_idle_j"] / r["sequences"]
                         / (r["above_idle_j_base"] / r["sequences_base"]),
                         "time_ratio": r["median_ms"] / r["median_ms_base"],
                         "power_ratio": r["mean_power_w"] / r["mean_power_w_base"]})
    return pd.DataFrame(rows, columns=[*RATIO_COLUMNS, "precision_base"])


def energy_ratios(results: pd.DataFrame) -> pd.DataFrame:
    """Each fallback's energy per sequence over its fused kernel's at the same configuration and precision,
    total and above idle, beside the time ratio (the hypothesis: the two are equal) and the power ratio."""
    table = energy_table(results)
    if table.empty:
        return pd.DataFrame(columns=RATIO_COLUMNS)
    pairs = [({"kernel": k}, {"kernel": base}) for k, base in PAIRS.items()]
    return _pair_ratios(table, pairs, [*_MATCH, "precision"])[RATIO_COLUMNS]


def amp_ratios(results: pd.DataFrame, low: str = "fp16") -> pd.DataFrame:
    """Each kernel's energy per sequence under AMP (`low`) over fp32 at the same configuration."""
    table = energy_table(results)
    if table.empty:
        return pd.DataFrame(columns=RATIO_COLUMNS)
    pairs = [({"kernel": k, "precision": low}, {"kernel": k, "precision": "fp32"})
             for k in sorted(table.kernel.unique())]
    out = _pair_ratios(table, pairs, [*_MATCH, "kernel"])
    out["baseline"] = out["kernel"] + " fp32"
    return out[RATIO_COLUMNS]


# --- verdicts -------------------------------------------------------------------------------------

def skip_reasons(results: pd.DataFrame) -> dict[str, str]:
    """Per hardware set with no energy measured: why (the reason its skipped rows carry)."""
    if results.empty:
        return {}
    measured = set(energy_table(results).hardware_id)
    out = {}
    for hardware_id, part in results.groupby("hardware_id"):
        if hardware_id in measured:
            continue
        reasons = part.loc[part.status != "ok", "error"].dropna()
        reasons = reasons[reasons != ""]
        out[hardware_id] = reasons.value_counts().index[0] if not reasons.empty else "no energy window stored"
    return out


def verdicts(results: pd.DataFrame) -> list[Verdict]:
    """One verdict per hardware set: the geometric-mean energy ratio of the headline fallbacks, banded."""
    table = energy_ratios(results)
    reasons = skip_reasons(results)
    out = []
    for hardware_id in sorted(results.hardware_id.unique()) if not results.empty else []:
        mine = table[(table.hardware_id == hardware_id) & table.kernel.isin(HEADLINE)]
        mine = mine[np.isfinite(mine.energy_ratio.astype(float))]
        if mine.empty:
            why = reasons.get(hardware_id, "no fallback/fused energy pair stored")
            out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, f"not measured: {why}",
                               Outcome.NOT_MEASURED, RULE))
            continue
        figure = geomean(mine.energy_ratio)
        above = mine.above_idle_ratio.astype(float)
        above = above[np.isfinite(above) & (above > 0)]
        what = ", ".join(sorted(mine.kernel.unique()))
        text = (f"{figure:.2f}x the fused kernel's energy per sequence (geometric mean of {len(mine)} "
                f"configurations: {what}; time ratio {geomean(mine.time_ratio):.2f}x"
                + (f", above idle {geomean(above):.2f}x" if len(above) else "") + ")")
        out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, figure, text,
                           BANDS.decide(figure, figure), RULE))
    return out


# --- what the page shows --------------------------------------------------------------------------

def status_note(results: pd.DataFrame) -> str:
    """Markdown: where energy was measured, and where not and why."""
    measured = sorted(set(energy_table(results).hardware_id))
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
             "in the verdict": k in HEADLINE} for k, base in PAIRS.items()]
    return pd.DataFrame(rows)


def summary(results: pd.DataFrame) -> pd.DataFrame:
    """The energy table as the page shows it: per hardware set, shape, phase, kernel and precision."""
    table = energy_table(results)
    columns = {"hardware_id": "hardware", "shape": "shape", "phase": "phase", "kernel": "kernel",
               "precision": "precision", "median_ms": "ms per step", "sequences": "sequences in window",
               "window_s": "window (s)", "mean_power_w": "mean power (W)", "idle_power_w": "idle (W)",
               "j_per_1k_seq": "J per 1,000 seq", "above_idle_j_per_1k_seq": "J per 1,000 seq above idle",
               "seq_per_j": "seq per J", "above_idle_seq_per_j": "seq per J above idle"}
    if table.empty:
        return pd.DataFrame(columns=list(columns.values()))
    return (table.sort_values(["hardware_id", "batch", "phase", "kernel", "precision"])[list(columns)]
            .rename(columns=columns).reset_index(drop=True))


def amp_summary(results: pd.DataFrame) -> pd.DataFrame:
    """AMP's energy per sequence over fp32, with `ratio_lo`/`ratio_hi` equal to the ratio (one window each,
    no interval), in the layout `plots.ratio_bars` draws; `case` names the shape and phase."""
    table = amp_ratios(results)
    if table.empty:
        return pd.DataFrame(columns=["hardware_id", "kernel", "case", "ratio", "ratio_lo", "ratio_hi", "time_ratio"])
    return table.assign(case=table["shape"] + ", " + table["phase"], ratio=table.energy_ratio,
                        ratio_lo=table.energy_ratio, ratio_hi=table.energy_ratio)[
        ["hardware_id", "kernel", "case", "ratio", "ratio_lo", "ratio_hi", "time_ratio"]]


_DEFAULTS = dict(shapes=[[16, 32, 128, 128], [64, 128, 512, 1024]], kernel_names=list(KERNELS),
                 precisions=["fp32", "fp16"], phases=list(sweep.PHASES), window_s=0.5, idle_s=1.0)
CLAIM = Claim(
    number=NUMBER, name=NAME, statement=STATEMENT, seed_figure=SEED_FIGURE, rule=RULE,
    # shapes are [batch, timesteps, features, hidden]: a small and a large one; on a CPU every point is a
    # skipped row saying NVML is not there
    defaults={"cpu": dict(_DEFAULTS), "cuda": dict(_DEFAULTS)},
    grid=grid, measure=measure, verdicts=verdicts, check=check_parameters,
    seconds_per_point={"cpu": 0.05, "cuda": 2.5},
)
