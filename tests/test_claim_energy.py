"""Claim 6 (energy): energy above idle from repeated windows, the proportionality rule and its outcomes on
synthetic GPU result sets, rows of the old single-window method, the windows against a fake NVML monitor,
and the CPU run that stores only skipped rows."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402

from lstmstudy import contract, hardware, nvml, plots, results, sweep  # noqa: E402
from lstmstudy.claims import energy as claim  # noqa: E402
from lstmstudy.errors import ParameterError, Skip  # noqa: E402
from lstmstudy.nvml import ENERGY_COUNTER_PERIOD_S, GpuMeasurement, WindowResult, nvml_available  # noqa: E402
from lstmstudy.observe import Observation  # noqa: E402
from lstmstudy.protocols import energy_windows  # noqa: E402
from lstmstudy.rules import Outcome  # noqa: E402
from lstmstudy.shapes import LSTMShape  # noqa: E402
from lstmstudy.timing import Measurement  # noqa: E402

GPU = hardware.Fingerprint(device_kind="cuda", cpu_model="Fake Xeon", cpu_flags=[], physical_cores=16, threads=16,
                           ram_gb=128.0, gpu_name="NVIDIA H100 80GB HBM3", gpu_count=1)
CPU = hardware.Fingerprint(device_kind="cpu", cpu_model="Fake Xeon", cpu_flags=[], physical_cores=2, threads=2,
                           ram_gb=8.0)
SMALL = LSTMShape(batch=10, timesteps=32, features=128, hidden=128)
LARGE = LSTMShape(batch=50, timesteps=128, features=512, hidden=1024)
SEED = 7  # the round seed a group's rows share


def per_window(value: float | Sequence[float], windows: int) -> list[float]:
    return [float(value)] * windows if np.isscalar(value) else [float(v) for v in value]


def kernel_row(kernel: str, shape: LSTMShape, *, watts: float | Sequence[float], step_s: float = 0.02,
               steps: int = 100, windows: int = 5, precision: str = "fp32", phase: str = "inference",
               seed: int | None = SEED, fp=GPU) -> dict:
    """A kernel row as the repeated-window method stores it: `windows` windows of `steps` steps of `step_s`,
    drawing `watts` in total (one value, or one per window)."""
    point = contract.Point(kernel, shape, precision=precision, phase=phase, config={"window_s": 1.0})
    durations = [steps * step_s] * windows
    energies = [w * d for w, d in zip(per_window(watts, windows), durations)]
    m = Measurement(samples=(step_s,) * (steps * windows), warmup=1, threads=1, sync="cuda-events",
                    round_sizes=(steps,) * windows, seed=seed)
    observed = Observation("cudnn", {"energy_source": "counter", "window_energy_j": energies,
                                     "window_duration_s": durations})
    return sweep.make_row(claim.NAME, point, torch.device("cuda", 0), fp,
                          outcome=contract.PointResult(measurement=m, energy_j=sum(energies), observed=observed))


def idle_row(watts: float | Sequence[float], shape: LSTMShape, *, phase: str = "inference", windows: int = 5,
             seconds: float = 1.0, seed: int | None = SEED, fp=GPU) -> dict:
    """A group's idle row: `windows` empty windows of `seconds`, drawing `watts` (one value, or one per window)."""
    point = contract.Point(claim.IDLE_KERNEL, shape, phase=phase, config={"idle_s": seconds})
    energies = [w * seconds for w in per_window(watts, windows)]
    m = Measurement(samples=(seconds,) * windows, warmup=0, threads=1, sync="none", round_sizes=(1,) * windows,
                    seed=seed)
    observed = Observation("none", {"energy_source": "counter", "window_energy_j": energies,
                                    "window_duration_s": [seconds] * windows})
    return sweep.make_row(claim.NAME, point, torch.device("cuda", 0), fp,
                          outcome=contract.PointResult(measurement=m, energy_j=sum(energies), observed=observed))


def old_kernel_row(kernel: str, shape: LSTMShape, *, energy_j: float, step_s: float = 0.02, reps: int = 100) -> dict:
    """A row of the old method: one 0.5 s-target window, its steps as one burst, its total energy."""
    point = contract.Point(kernel, shape, config={"window_s": 0.5})
    m = Measurement(samples=(step_s,) * reps, warmup=0, threads=1, sync="synchronize")
    return sweep.make_row(claim.NAME, point, torch.device("cuda", 0), GPU,
                          outcome=contract.PointResult(measurement=m, energy_j=energy_j,
                                                       observed=Observation("cudnn", {"energy_source": "counter"})))


def old_idle_row(watts: float, seconds: float = 1.0) -> dict:
    """The old method's one idle window per hardware set, stored at a placeholder shape."""
    point = contract.Point(claim.IDLE_KERNEL, LSTMShape(batch=1, timesteps=1, features=1, hidden=1),
                           config={"idle_s": seconds})
    m = Measurement(samples=(seconds,), warmup=0, threads=1, sync="none")
    return sweep.make_row(claim.NAME, point, torch.device("cuda", 0), GPU,
                          outcome=contract.PointResult(measurement=m, energy_j=watts * seconds,
                                                       observed=Observation("none", {"energy_source": "counter"})))


IDLE_W, FUSED_W = 50.0, 150.0  # the fused kernel draws 100 W above idle


def gpu_set(root: Path, *, time_factor: float = 3.0, power_factor: float | Sequence[float] = 1.0,
            precisions: Sequence[str] = ("fp32", "fp16"), fp=GPU) -> None:
    """A GPU set where every fallback takes `time_factor` x the fused kernel's time per step and draws
    `power_factor` x its power above idle (per window, if a list): S = `power_factor`."""
    rows = []
    for shape in (SMALL, LARGE):
        for phase in ("inference", "train"):
            rows.append(idle_row(IDLE_W, shape, phase=phase, fp=fp))
            for precision in precisions:
                for fused, fallbacks in (("torch.fused", ["torch.native", "torch.cell_loop"]),
                                         ("keras.cudnn_auto", ["keras.relu", "keras.recurrent_dropout"])):
                    rows.append(kernel_row(fused, shape, watts=FUSED_W, precision=precision, phase=phase, fp=fp))
                    above = np.asarray(per_window(power_factor, 5)) * (FUSED_W - IDLE_W)
                    for k in fallbacks:
                        rows.append(kernel_row(k, shape, watts=list(IDLE_W + above), step_s=0.02 * time_factor,
                                               precision=precision, phase=phase, fp=fp))
    results.append(claim.NAME, fp.hardware_id, rows, root)


def cpu_skipped_set(root: Path) -> None:
    reason = "NVML is not available here: NVML Shared Library Not Found; energy is not measured on this machine"
    points = claim.grid(kind="cpu", quick=True, shapes=[[16, 32, 128, 128]])
    rows = [sweep.make_row(claim.NAME, p, torch.device("cpu"), CPU, status="skipped", error=reason) for p in points]
    results.append(claim.NAME, CPU.hardware_id, rows, root)


# --- energy above idle, from the per-window numbers ----------------------------------------------

def test_energy_above_idle_pairs_each_window_with_the_idle_window_of_its_round(tmp_path):
    # 100 steps of batch 10 = 1,000 sequences per 2 s window; idle drifts 9-11 W and the kernel with it
    idle, kernel = [9.0, 10.0, 11.0, 10.0, 10.0], [24.0, 25.0, 26.0, 25.0, 25.0]
    results.append(claim.NAME, GPU.hardware_id, [idle_row(idle, SMALL), kernel_row("torch.fused", SMALL,
                                                                                   watts=kernel)], tmp_path)
    data = results.load(claim.NAME, tmp_path)
    (row,) = claim.energy_table(data).itertuples()
    assert row.method == claim.REPEATED and row.windows == 5 and row.sequences == 5 * 1000
    assert row.window_s == pytest.approx(2.0) and row.mean_power_w == pytest.approx(25.0)
    assert row.idle_power_w == pytest.approx(10.0)
    # total: 48-52 J per window over 1,000 sequences; above idle: exactly 30 J in every window, since each
    # window is charged the idle power of its own round (the drift cancels)
    # a second run's windows spread as these do: its re-run interval holds their whole range, and not much more
    assert row.j_per_1k_seq == pytest.approx(50.0)
    assert 46 < row.j_per_1k_seq_lo <= 48.0 and 52.0 <= row.j_per_1k_seq_hi < 54
    assert (row.above_idle_j_per_1k_seq, row.above_idle_j_per_1k_seq_lo,
            row.above_idle_j_per_1k_seq_hi) == pytest.approx((30.0, 30.0, 30.0))
    assert row.seq_per_j == pytest.approx(20.0) and row.above_idle_seq_per_j == pytest.approx(1000 / 30)
    assert list(row.w_above_power_w) == pytest.approx([15.0] * 5)
    (idle_summary,) = claim.idle_table(data).itertuples()
    assert idle_summary.windows == 5 and idle_summary.idle_power_w == pytest.approx(10.0)
    # windows of 9-11 W: a second run's median idle power lands within about their range (a re-run interval)
    assert 8.5 < idle_summary.idle_power_w_lo <= 9.0 and 11.0 <= idle_summary.idle_power_w_hi < 11.5


def test_without_the_same_rounds_the_median_idle_power_is_charged(tmp_path):
    idle = idle_row([9.0, 10.0, 11.0, 10.0, 10.0], SMALL, seed=1)  # another sweep's rounds
    kernel = kernel_row("torch.fused", SMALL, watts=[24.0, 25.0, 26.0, 25.0, 25.0])
    results.append(claim.NAME, GPU.hardware_id, [idle, kernel], tmp_path)
    (row,) = claim.energy_table(results.load(claim.NAME, tmp_path)).itertuples()
    assert list(row.w_above_power_w) == pytest.approx([14.0, 15.0, 16.0, 15.0, 15.0])


def test_another_groups_idle_power_is_never_charged(tmp_path):
    idle = idle_row([9.0, 10.0, 11.0, 10.0, 10.0], SMALL, seed=1)  # the small shape's idle only
    kernel = kernel_row("torch.fused", LARGE, watts=[24.0, 25.0, 26.0, 25.0, 25.0])
    results.append(claim.NAME, GPU.hardware_id, [idle, kernel], tmp_path)
    (row,) = claim.energy_table(results.load(claim.NAME, tmp_path)).itertuples()
    assert np.isnan(row.w_above_power_w).all() and np.isnan(row.above_idle_j_per_1k_seq)


def test_the_ratios_and_their_intervals_come_window_by_window(tmp_path):
    gpu_set(tmp_path, time_factor=3.0, power_factor=[0.9, 1.0, 1.1, 1.2, 1.0])
    data = results.load(claim.NAME, tmp_path)
    ratios = claim.energy_ratios(data)
    assert set(zip(ratios.kernel, ratios.baseline)) == set(claim.PAIRS.items())
    assert len(ratios) == 4 * 2 * 2 * 2  # fallbacks x shapes x phases x precisions
    assert ratios.paired.all() and ratios.judged.all() and (ratios.windows == 5).all()
    assert ratios.time_ratio.tolist() == pytest.approx([3.0] * len(ratios))
    # S per window is the power factor: its median, and with 5 windows the re-run interval spans them and a little
    # more (a second run's median lands anywhere a first run's could)
    assert ratios.proportionality.tolist() == pytest.approx([1.0] * len(ratios))
    assert ((ratios.proportionality_lo > 0.8) & (ratios.proportionality_lo <= 0.9)).all()
    assert ((ratios.proportionality_hi >= 1.2) & (ratios.proportionality_hi < 1.35)).all()
    # energy above idle per sequence = S x the time ratio, window by window
    assert ratios.above_idle_ratio.tolist() == pytest.approx([3.0] * len(ratios))
    assert all(len(r) == 1000 for r in ratios.replicates)
    amp = claim.amp_ratios(data)
    assert len(amp) == 6 * 2 * 2 and set(amp.baseline.str.endswith(" fp32")) == {True}


# --- the rule -------------------------------------------------------------------------------------

@pytest.mark.parametrize("power_factor, outcome, reading", [
    (1.0, Outcome.HOLDS, "proportional"),
    (1.6, Outcome.DOES_NOT_HOLD, "more than proportional"),
    (0.5, Outcome.DOES_NOT_HOLD, "less than proportional"),
    ([1.0, 1.1, 1.2, 1.4, 1.5], Outcome.INCONCLUSIVE, "cannot tell whether proportional"),
], ids=["holds", "more", "less", "straddles"])
def test_the_rule_decides_on_the_interval_of_s(tmp_path, power_factor, outcome, reading):
    gpu_set(tmp_path, time_factor=3.0, power_factor=power_factor)
    cpu_skipped_set(tmp_path)
    verdicts = {v.hardware_id: v for v in claim.verdicts(results.load(claim.NAME, tmp_path))}
    gpu = verdicts[GPU.hardware_id]
    assert gpu.outcome == outcome and f": {reading};" in gpu.ours_text
    assert gpu.low <= gpu.ours <= gpu.high
    assert "torch.native" in gpu.ours_text and "torch.cell_loop" not in gpu.ours_text  # not in the headline
    assert "geometric mean of 24 configurations" in gpu.ours_text  # 3 headline pairs x 2 shapes x 2 phases x 2
    cpu = verdicts[CPU.hardware_id]
    assert cpu.outcome == Outcome.NOT_MEASURED and cpu.ours is None
    assert "NVML is not available" in cpu.ours_text


def test_the_rule_names_its_regions_and_the_bands_match_them():
    assert claim.BANDS.decide(0.85, 1.2) == Outcome.HOLDS
    assert claim.BANDS.decide(1.3, 2.0) == claim.BANDS.decide(0.3, 0.7) == Outcome.DOES_NOT_HOLD
    assert claim.BANDS.decide(0.7, 0.9) == claim.BANDS.decide(1.1, 1.3) == Outcome.INCONCLUSIVE
    for text in ("holds if the interval lies within 0.8 <= S < 1.25 (proportional)",
                 "does not hold if it lies at or above 1.25 (more than proportional)",
                 "below 0.8 (less than proportional)", "undecided (inconclusive) if it straddles",
                 "not measured where NVML"):
        assert text in claim.RULE


PAGE = Path(__file__).resolve().parent.parent / "book" / "claims" / f"{claim.CLAIM.stem}.ipynb"


def test_no_seed_claims_it_so_the_rule_and_the_page_say_holds_not_reproduced():
    """No seed claims energy proportionality (the paper left energy as future work): the hypothesis is the study's
    own, so its rule and its page say whether it holds, never that it was reproduced."""
    markdown = " ".join("".join(c["source"]) for c in json.loads(PAGE.read_text())["cells"]
                        if c["cell_type"] == "markdown")
    for text in (claim.RULE, markdown, claim.__doc__):
        assert not re.search(r"\breproduced\b", text)
    assert all(f"**{words}**" in markdown for words in ("holds", "does not hold", "undecided"))
    assert "this CPU-only machine" not in claim.__doc__


def test_the_headline_only_counts(tmp_path):
    # cell_loop draws 3x the power above idle but the headline fallback draws the same: proportional
    rows = [idle_row(IDLE_W, SMALL), kernel_row("torch.fused", SMALL, watts=FUSED_W),
            kernel_row("torch.native", SMALL, watts=FUSED_W, step_s=0.06),
            kernel_row("torch.cell_loop", SMALL, watts=IDLE_W + 300.0, step_s=0.06)]
    results.append(claim.NAME, GPU.hardware_id, rows, tmp_path)
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert verdict.outcome == Outcome.HOLDS and verdict.ours == pytest.approx(1.0)


def test_a_window_at_idle_power_leaves_its_configuration_unjudged(tmp_path):
    rows = [idle_row(IDLE_W, SMALL), kernel_row("torch.fused", SMALL, watts=FUSED_W),
            kernel_row("torch.native", SMALL, watts=[IDLE_W, 150.0, 150.0, 150.0, 150.0], step_s=0.06),
            idle_row(IDLE_W, LARGE), kernel_row("torch.fused", LARGE, watts=FUSED_W),
            kernel_row("torch.native", LARGE, watts=FUSED_W, step_s=0.06)]
    results.append(claim.NAME, GPU.hardware_id, rows, tmp_path)
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert verdict.outcome == Outcome.HOLDS and "geometric mean of 1 configurations" in verdict.ours_text
    assert "1 configuration(s) not judged: 1 a window drew no more than idle power" in verdict.ours_text


def test_a_configuration_without_its_idle_window_says_so(tmp_path):
    rows = [idle_row(IDLE_W, SMALL), kernel_row("torch.fused", SMALL, watts=FUSED_W),
            kernel_row("torch.native", SMALL, watts=FUSED_W, step_s=0.06),
            kernel_row("torch.fused", LARGE, watts=FUSED_W), kernel_row("torch.native", LARGE, watts=FUSED_W)]
    results.append(claim.NAME, GPU.hardware_id, rows, tmp_path)
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert "1 configuration(s) not judged: 1 no idle window to subtract" in verdict.ours_text


def test_a_gpu_set_without_energy_windows_is_not_measured(tmp_path):
    row = kernel_row("torch.fused", SMALL, watts=FUSED_W)
    row.update(status="error", error="RuntimeError: the energy counter did not increase", energy_j=None)
    results.append(claim.NAME, GPU.hardware_id, [row], tmp_path)
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert verdict.outcome == Outcome.NOT_MEASURED and "did not increase" in verdict.ours_text


# --- rows of the old single-window method -------------------------------------------------------

def test_old_single_window_rows_are_read_shown_and_never_judged(tmp_path):
    # one 2 s window of 100 steps at batch 10 that cost 50 J; the set's one idle window drew 10 W
    rows = [old_idle_row(10.0), old_kernel_row("torch.fused", SMALL, energy_j=50.0),
            old_kernel_row("torch.native", SMALL, energy_j=150.0, step_s=0.06)]
    results.append(claim.NAME, GPU.hardware_id, rows, tmp_path)
    data = results.load(claim.NAME, tmp_path)
    table = claim.energy_table(data).set_index("kernel")
    fused = table.loc["torch.fused"]
    assert fused.method == claim.SINGLE_WINDOW and fused.windows == 1 and fused.sequences == 1000
    assert fused.window_s == pytest.approx(2.0) and fused.idle_power_w == pytest.approx(10.0)
    assert fused.j_per_1k_seq == pytest.approx(50.0) and fused.above_idle_j_per_1k_seq == pytest.approx(30.0)
    assert claim.idle_table(data)["shape"].tolist() == ["whole hardware set"]
    (pair,) = claim.energy_ratios(data).itertuples()
    assert pair.above_idle_ratio == pytest.approx(90.0 / 30.0) and pair.time_ratio == pytest.approx(3.0)
    assert not pair.judged and "old method" in pair.why_not_judged
    (verdict,) = claim.verdicts(data)
    assert verdict.outcome == Outcome.INCONCLUSIVE and verdict.ours is None
    assert "no configuration can be judged" in verdict.ours_text and "single window (old method)" in verdict.ours_text
    assert "old method" in claim.summary(data).method.iloc[0]


def test_old_rows_beside_new_ones_leave_the_verdict_to_the_new(tmp_path):
    gpu_set(tmp_path, power_factor=1.0, precisions=("fp32",))
    results.append(claim.NAME, GPU.hardware_id, [old_idle_row(10.0), old_kernel_row("torch.fused", SMALL, energy_j=50),
                                                 old_kernel_row("torch.native", SMALL, energy_j=500)], tmp_path)
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert verdict.outcome == Outcome.HOLDS and verdict.ours == pytest.approx(1.0)
    assert "1 configuration(s) not judged: 1 a single window (old method)" in verdict.ours_text


# --- the windows against a fake NVML monitor ----------------------------------------------------

class FakeMonitor:
    """A `GpuMonitor` stand-in: idle windows (key 'idle') draw `idle_w`, work windows `busy_w`, timed on the
    real clock; the first `unmeasured` windows report no energy."""

    def __init__(self, busy_w: float = 100.0, idle_w: float = 30.0, unmeasured: int = 0) -> None:
        self.busy_w, self.idle_w, self.unmeasured, self.windows = busy_w, idle_w, unmeasured, []

    @contextmanager
    def window(self, key):
        holder = WindowResult(key)
        start = time.perf_counter()
        try:
            yield holder
        finally:
            duration = time.perf_counter() - start
            watts = self.idle_w if key == "idle" else self.busy_w
            measured = len(self.windows) >= self.unmeasured
            holder.result = GpuMeasurement(
                key=key, duration_s=duration, energy_j=watts * duration if measured else None,
                energy_source="counter", mean_power_w=watts, peak_power_w=watts, mean_util_pct=50.0,
                peak_memory_bytes=0, n_samples=2, warning="" if measured else "the energy counter did not increase")
            self.windows.append(holder.result)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def test_the_window_grows_until_it_is_long_enough_and_measured():
    monitor = FakeMonitor(unmeasured=1)
    m, gm = nvml.energy_window(lambda: time.sleep(0.002), None, monitor, n=3, window_s=0.05)
    assert len(monitor.windows) >= 2 and monitor.windows[0].energy_j is None
    assert gm.duration_s >= 0.05 and gm.energy_j == pytest.approx(100.0 * gm.duration_s)
    assert m.n >= 3 and sum(m.samples) <= gm.duration_s  # the stored samples are the window's steps


def test_a_window_never_measured_raises_instead_of_storing_a_number():
    with pytest.raises(RuntimeError, match="did not increase"):
        nvml.energy_window(lambda: None, None, FakeMonitor(unmeasured=99), n=3, window_s=0.0)


def test_a_window_is_sized_from_host_wall_time_not_the_device_timed_median(monkeypatch):
    # a 2 ms step whose device-timed median is a quarter of it, as CUDA events leave out launch and sync
    medians, real = [], energy_windows.time_call

    def device_timed(step, **options) -> Measurement:
        m = real(step, **options)
        m = replace(m, samples=tuple(s / 4 for s in m.samples))
        medians.append(m.median)
        return m

    monkeypatch.setattr(energy_windows, "time_call", device_timed)
    monitor, window_s = FakeMonitor(), 0.05
    windows = energy_windows.KernelWindows(SimpleNamespace(step=lambda: time.sleep(0.002)), None, window_s,
                                           lambda: monitor, dict(min_time=0.01, max_time=0.05, min_samples=3))
    windows()  # the rounds' warm-up call sizes the window
    # about a quarter of the steps the device-timed median asks for (4x more than fit the window)
    device_n = nvml.repetitions(medians[0], window_s)
    assert device_n / 8 <= windows.n <= device_n / 3
    windows()
    ((_, window),) = windows.kept
    # the window lasts about what was planned (window_s with the margin), not the 4x that from the median
    assert window_s <= window.duration_s < 2 * nvml.SIZING_MARGIN * window_s


def test_a_group_runs_interleaved_windows_and_stores_every_one(tmp_path):
    shape = LSTMShape(batch=4, timesteps=4, features=4, hidden=8)
    points = [contract.Point(claim.IDLE_KERNEL, shape, config={"idle_s": 0.03}),
              contract.Point("torch.fused", shape, config={"window_s": 0.03}),
              contract.Point("torch.native", shape, config={"window_s": 0.03})]
    monitors = []

    def factory(device, sync):
        monitors.append(FakeMonitor(busy_w=50.0, idle_w=30.0))
        return monitors[-1]

    prepare = lambda point, device: energy_windows.prepare_point(  # noqa: E731
        point, device, timing=dict(min_time=0.01, max_time=0.05, min_samples=3),
        unavailable_reason=lambda d: None, monitor_factory=factory)
    outcomes = sweep.measure_group(points, prepare, torch.device("cpu"), energy_windows.window_rounds(3))
    assert all(isinstance(o, contract.PointResult) for o in outcomes), outcomes
    assert len(monitors) == 3 * 3  # one monitor per window: nothing stays open between rounds
    idle, fused, native = outcomes
    assert len({o.measurement.seed for o in outcomes}) == 1  # one group, the same rounds
    for out in (fused, native):
        detail = out.observed.detail
        assert len(detail["window_energy_j"]) == len(out.measurement.round_sizes) == 3
        assert all(d >= 0.03 for d in detail["window_duration_s"])  # no window shorter than asked
        assert sum(out.measurement.round_sizes) == out.measurement.n
        assert out.energy_j == pytest.approx(sum(detail["window_energy_j"]))
        assert out.observed.kernel in ("onednn", "aten-loop") and out.measurement.noisy in (True, False)
    assert idle.measurement.round_sizes == (1, 1, 1) and idle.observed.kernel == "none"
    rows = [sweep.make_row(claim.NAME, p, torch.device("cuda", 0), GPU, outcome=o) for p, o in zip(points, outcomes)]
    results.append(claim.NAME, GPU.hardware_id, rows, tmp_path)
    table = claim.energy_table(results.load(claim.NAME, tmp_path))
    assert (table.method == claim.REPEATED).all()
    assert table.idle_power_w.tolist() == pytest.approx([30.0, 30.0])
    for powers in table.w_above_power_w:  # 50 W busy - 30 W idle, window by window
        assert list(powers) == pytest.approx([20.0] * 3)


def test_a_window_the_counter_cannot_measure_makes_an_error_row_not_a_number():
    point = contract.Point("torch.fused", LSTMShape(batch=2, timesteps=2, features=2, hidden=4),
                           config={"window_s": 0.0})
    prepare = lambda point, device: energy_windows.prepare_point(  # noqa: E731
        point, device, timing=dict(min_time=0.0, max_time=0.01, min_samples=3),
        unavailable_reason=lambda d: None, monitor_factory=lambda d, s: FakeMonitor(unmeasured=99))
    (outcome,) = sweep.measure_group([point], prepare, torch.device("cpu"), energy_windows.window_rounds(3))
    assert isinstance(outcome, RuntimeError) and "did not increase" in str(outcome)


def test_without_nvml_every_point_skips_with_the_reason():
    for point in claim.grid(kind="cpu", quick=True, shapes=[[2, 4, 4, 8]]):
        with pytest.raises(Skip, match="no NVML"):
            energy_windows.prepare_point(point, torch.device("cpu"), timing={},
                                         unavailable_reason=lambda d: "no NVML here")


def test_on_a_cpu_energy_is_unavailable_with_the_reason():
    reason = energy_windows.unavailable(torch.device("cpu"))
    assert reason and ("NVML is not available" in reason or "this run is on cpu" in reason)


@pytest.mark.gpu
def test_a_real_gpu_window_measures_energy(results_root):
    if reason := nvml_available():
        pytest.skip(reason)
    points = claim.grid(kind="cuda", quick=True, shapes=[[16, 32, 64, 64]])[:2]  # the idle window and torch.fused
    (report,) = claim.measure(points, device="cuda", min_time=0.05, quick=True)
    assert report.measured == 2, report
    (row,) = claim.energy_table(results.load(claim.NAME)).itertuples()
    assert row.windows == claim.QUICK_WINDOWS and row.window_s >= claim.MIN_WINDOW_S
    assert row.j_per_1k_seq > 0 and row.idle_power_w > 0 and row.method == claim.REPEATED


@pytest.mark.skipif(nvml_available() is None, reason="NVML works here: a CPU run would not skip at NVML")
def test_a_quick_cpu_run_stores_skipped_rows_at_once(results_root):
    start = time.monotonic()
    (report,) = claim.measure(claim.grid(kind="cpu", quick=True, shapes=[[16, 32, 128, 128]]), device="cpu",
                              min_time=0.1, quick=True, progress=False)
    assert time.monotonic() - start < 30
    assert report.claim == claim.NAME and report.left == 0
    assert report.skipped == 3 and report.measured == report.errors == 0  # the idle point and two kernels
    data = results.load(claim.NAME)
    assert set(data.status) == {"skipped"} and data.error.str.contains("NVML is not available").all()
    (verdict,) = claim.verdicts(data)
    assert verdict.outcome == Outcome.NOT_MEASURED and "NVML is not available" in verdict.ours_text


# --- parameters and grid --------------------------------------------------------------------------

def test_every_window_lasts_a_second_and_ten_counter_periods():
    assert claim.MIN_WINDOW_S >= 1.0 and claim.MIN_WINDOW_S >= 10 * ENERGY_COUNTER_PERIOD_S
    assert claim.MIN_WINDOW_S >= nvml.MIN_ENERGY_WINDOW_S  # the claim's number keeps NVML's floor
    for kind in ("cpu", "cuda"):
        for quick in (False, True):
            for point in claim.CLAIM.points(kind, quick=quick):
                assert point.config.get("window_s", point.config.get("idle_s")) >= claim.MIN_WINDOW_S
    assert claim.CLAIM.parameters("cuda")["windows"] == claim.WINDOWS >= claim.MIN_JUDGED_WINDOWS
    plan = energy_windows.window_rounds(5)
    assert (plan.rounds, plan.warmup, plan.burst_max_samples, plan.extra_rounds) == (5, 1, 1, 0)


def test_grid_puts_each_groups_idle_point_first_and_quick_shrinks_it():
    shapes = [[16, 32, 128, 128], [64, 128, 512, 1024]]
    full = claim.grid(kind="cuda", quick=False, shapes=shapes, precisions=["fp32", "fp16"])
    groups = sweep.groups(full)
    assert len(groups) == 2 * 2 and all(g[0].kernel == claim.IDLE_KERNEL for g in groups)
    assert all(len(g) == 1 + len(claim.DEFAULT_KERNELS) * 2 for g in groups)
    assert "torch.cell_loop" not in claim.DEFAULT_KERNELS and set(claim.HEADLINE) <= set(claim.DEFAULT_KERNELS)
    quick = claim.grid(kind="cuda", quick=True, shapes=shapes, window_s=2.0)
    assert len(quick) == 1 + 2 and {p.shape.timesteps for p in quick} == {8}
    assert all(p.config["window_s"] == claim.MIN_WINDOW_S for p in quick[1:])
    # the claim's defaults are the same grid on both kinds (on a CPU every point becomes a skipped row)
    assert claim.CLAIM.defaults["cpu"] == claim.CLAIM.defaults["cuda"]
    assert [p.key() for p in claim.CLAIM.points("cpu")] == [
        p.key() for p in claim.grid(kind="cpu", quick=False, shapes=shapes)]


@pytest.mark.parametrize("bad", [[], [[16, 32, 128]], [[16, 32, 128, 0]], [16, 32, 128, 128], "small"])
def test_bad_shapes_are_a_parameter_error(bad):
    with pytest.raises(ParameterError, match="'shapes'"):
        claim.CLAIM.parameters("cpu", shapes=bad)
    with pytest.raises(ParameterError, match="'shapes'"):
        claim.check_shapes(bad)


@pytest.mark.parametrize("name", ["window_s", "idle_s"])
def test_a_window_shorter_than_ten_counter_periods_is_a_parameter_error(name):
    for short in (0.05, 0.5, 0.99):
        with pytest.raises(ParameterError, match=f"'{name}'.*ten periods"):
            claim.CLAIM.parameters("cpu", **{name: short})
    claim.check_window(window_s=1.0, idle_s=2)
    assert claim.CLAIM.parameters("cuda", window_s=1.5, idle_s=2)["idle_s"] == 2


@pytest.mark.parametrize("bad", [dict(kernel_names=["torch.raw"]), dict(precisions=["fp8"]),
                                 dict(phases=["backward"]), dict(window=1.0), dict(windows=2),
                                 dict(windows=True)])
def test_other_bad_parameters_name_themselves(bad):
    name = next(iter(bad))
    with pytest.raises(ParameterError, match=f"'{name}'"):
        claim.CLAIM.parameters("cpu", **bad)


# --- the page's figures -------------------------------------------------------------------------

def test_figures_draw_a_gpu_set_and_nothing_without_one(tmp_path):
    gpu_set(tmp_path, time_factor=2.5, power_factor=[0.9, 1.0, 1.1, 1.0, 1.0])
    cpu_skipped_set(tmp_path)
    data = results.load(claim.NAME, tmp_path)
    grids = plots.energy_bars(claim.energy_table(data), claim.KERNELS, claim.PRECISIONS)
    assert len(grids) == 1 and len(grids[0].axes.flat) == 4  # 2 phases x 2 shapes
    assert "J" in grids[0].axes.flat[0].get_ylabel() and "h100" in grids[0].axes.flat[0].get_title()
    assert "linear" in grids[0].figure._suptitle.get_text()
    for ax in grids[0].axes.flat:  # every panel: 6 kernels x 2 precisions, each with its hatched above-idle part
        assert sum(patch.get_hatch() == "///" for patch in ax.patches) == 6 * 2
        assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    ratios = claim.energy_ratios(data)
    proportion = plots.energy_vs_time(ratios, claim.PRECISIONS, band=claim.BAND)
    assert proportion is not None and len(proportion.axes.flat) == 1  # the one GPU set
    ax = proportion.axes.flat[0]
    assert ax.get_xscale() == ax.get_yscale() == "log" and "log-log" in ax.get_title()
    assert any(isinstance(c, PolyCollection) for c in ax.collections)  # the proportional band
    plots.ratio_bars(claim.proportionality_summary(ratios), x="kernel", hue="phase", xlabel="fallback",
                     ylabel="S", seed_band=claim.BAND)
    amp = claim.amp_summary(data)
    assert (amp.ratio_lo <= amp.ratio).all() and (amp.ratio <= amp.ratio_hi).all()
    plots.ratio_bars(amp, x="kernel", hue="case", xlabel="kernel", ylabel="AMP / fp32 (x)")
    assert not claim.summary(data).empty and "Energy was measured on" in claim.status_note(data)
    assert claim.ratio_summary(ratios).judged.eq("yes").all()
    plt.close("all")
    cpu_only = data[data.device_kind == "cpu"]
    assert plots.energy_bars(claim.energy_table(cpu_only), claim.KERNELS, claim.PRECISIONS) == []
    assert plots.energy_vs_time(claim.energy_ratios(cpu_only), claim.PRECISIONS, band=claim.BAND) is None
    assert claim.amp_summary(cpu_only).empty and claim.proportionality_summary(claim.energy_ratios(cpu_only)).empty
    assert "not measured" in claim.status_note(cpu_only)


@pytest.mark.slow
def test_the_page_renders_a_stored_gpu_set(tmp_path):
    import nbformat
    import papermill

    gpu_set(tmp_path / "results", power_factor=[0.9, 1.0, 1.1, 1.0, 1.0])
    cpu_skipped_set(tmp_path / "results")
    out = tmp_path / "06.ipynb"
    papermill.execute_notebook(str(Path(__file__).resolve().parent.parent / "notebooks" / "06_energy.ipynb"),
                               str(out), kernel_name="python3", progress_bar=False,
                               parameters={"measure": False, "results_dir": str(tmp_path / "results"),
                                           "grid": {"window_s": 1.5}})
    executed = nbformat.read(out, as_version=4)
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 4  # energy, S, energy vs time, AMP
    text = " ".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "holds" in text and "reproduced" not in text and "not measured on this hardware" in text
    # the page shows the grid it would measure, with the override applied
    assert "default grid of 06_energy" in text and re.search(r"window_s\s+1\.5\b", text)
