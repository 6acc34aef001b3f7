"""Claim 6 (energy): the arithmetic, the verdict's bands and the page's figures on synthetic GPU result
sets, the energy window against a fake NVML monitor, and the CPU run that stores only skipped rows."""

from __future__ import annotations

import re
import time
from contextlib import contextmanager
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from lstmstudy import hardware, nvml, plots, results, sweep  # noqa: E402
from lstmstudy.claims import Outcome  # noqa: E402
from lstmstudy.claims import energy as claim  # noqa: E402
from lstmstudy.errors import ParameterError, Skip  # noqa: E402
from lstmstudy.nvml import GpuMeasurement, WindowResult, nvml_available  # noqa: E402
from lstmstudy.observe import Observation  # noqa: E402
from lstmstudy.shapes import LSTMShape  # noqa: E402
from lstmstudy.timing import Measurement  # noqa: E402

GPU = hardware.Fingerprint(device_kind="cuda", cpu_model="Fake Xeon", cpu_flags=[], physical_cores=16, threads=16,
                           ram_gb=128.0, gpu_name="NVIDIA H100 80GB HBM3", gpu_count=1)
CPU = hardware.Fingerprint(device_kind="cpu", cpu_model="Fake Xeon", cpu_flags=[], physical_cores=2, threads=2,
                           ram_gb=8.0)
SMALL = LSTMShape(batch=10, timesteps=32, features=128, hidden=128)
LARGE = LSTMShape(batch=50, timesteps=128, features=512, hidden=1024)


def gpu_row(kernel: str, shape: LSTMShape, *, energy_j: float, step_s: float = 0.02, reps: int = 100,
            precision: str = "fp32", phase: str = "inference", fp=GPU) -> dict:
    point = sweep.Point(kernel, shape, precision=precision, phase=phase, config={"window_s": 0.5})
    m = Measurement(samples=(step_s,) * reps, warmup=0, threads=1, sync="synchronize")
    return sweep.make_row(claim.NAME, point, torch.device("cuda", 0), fp,
                          outcome=sweep.PointResult(measurement=m, energy_j=energy_j,
                                                observed=Observation("cudnn", {"energy_source": "counter"})))


def idle_row(watts: float, seconds: float = 1.0, fp=GPU) -> dict:
    point = sweep.Point(claim.IDLE_KERNEL, claim.IDLE_SHAPE, config={"idle_s": seconds})
    m = Measurement(samples=(seconds,), warmup=0, threads=1, sync="none")
    return sweep.make_row(claim.NAME, point, torch.device("cuda", 0), fp,
                          outcome=sweep.PointResult(measurement=m, energy_j=watts * seconds,
                                                    observed=Observation("none")))


def gpu_set(factor: float, root: Path, *, fp=GPU) -> None:
    """A GPU set where every fallback takes `factor` x the fused kernel's time and energy per sequence."""
    rows = [idle_row(10.0, fp=fp)]
    for shape in (SMALL, LARGE):
        for phase in ("inference", "train"):
            for precision, amp in (("fp32", 1.0), ("fp16", 0.8)):
                for fused, fallbacks in (("torch.fused", ["torch.native", "torch.cell_loop"]),
                                         ("keras.cudnn_auto", ["keras.relu", "keras.recurrent_dropout"])):
                    rows.append(gpu_row(fused, shape, energy_j=50.0 * amp, step_s=0.02 * amp, precision=precision,
                                        phase=phase, fp=fp))
                    for k in fallbacks:  # same repetitions, so the window's energy ratio is the per-sequence one
                        rows.append(gpu_row(k, shape, energy_j=50.0 * amp * factor, step_s=0.02 * amp * factor,
                                            precision=precision, phase=phase, fp=fp))
    results.append(claim.NAME, fp.hardware_id, rows, root)


def cpu_skipped_set(root: Path) -> None:
    reason = "NVML is not available here: NVML Shared Library Not Found; energy is not measured on this machine"
    points = claim.grid(kind="cpu", quick=True, shapes=[[16, 32, 128, 128]])
    rows = [sweep.make_row(claim.NAME, p, torch.device("cpu"), CPU, status="skipped", error=reason) for p in points]
    results.append(claim.NAME, CPU.hardware_id, rows, root)


# --- the arithmetic ---------------------------------------------------------------------------------

def test_joules_per_sequence_total_and_above_idle(tmp_path):
    # 100 steps of batch 10 = 1,000 sequences in a 2 s window that cost 50 J; idle draws 10 W
    results.append(claim.NAME, GPU.hardware_id, [idle_row(10.0), gpu_row("torch.fused", SMALL, energy_j=50.0)],
                   tmp_path)
    table = claim.energy_table(results.load(claim.NAME, tmp_path))
    assert len(table) == 1
    row = table.iloc[0]
    assert row.sequences == 1000 and row.repetitions == 100
    assert row.window_s == pytest.approx(2.0) and row.mean_power_w == pytest.approx(25.0)
    assert row.j_per_seq == pytest.approx(0.05) and row.seq_per_j == pytest.approx(20.0)
    assert row.j_per_1k_seq == pytest.approx(50.0)
    assert row.idle_power_w == pytest.approx(10.0) and row.above_idle_j == pytest.approx(30.0)
    assert row.above_idle_j_per_1k_seq == pytest.approx(30.0)
    assert row.above_idle_seq_per_j == pytest.approx(1000 / 30)
    assert claim.idle_table(results.load(claim.NAME, tmp_path)).idle_power_w.tolist() == pytest.approx([10.0])


def test_ratios_pair_fallbacks_with_their_fused_kernel_and_amp_with_fp32(tmp_path):
    gpu_set(3.0, tmp_path)
    data = results.load(claim.NAME, tmp_path)
    ratios = claim.energy_ratios(data)
    assert set(zip(ratios.kernel, ratios.baseline)) == set(claim.PAIRS.items())
    assert len(ratios) == 4 * 2 * 2 * 2  # fallbacks x shapes x phases x precisions
    assert ratios.energy_ratio.tolist() == pytest.approx([3.0] * len(ratios))
    assert ratios.time_ratio.tolist() == pytest.approx([3.0] * len(ratios))
    # above idle: fused 50 J - 10 W x 2 s = 30 J; fallback 150 J - 10 W x 6 s = 90 J -> also 3x
    fp32 = ratios[ratios.precision == "fp32"]
    assert fp32.above_idle_ratio.tolist() == pytest.approx([3.0] * len(fp32))
    amp = claim.amp_ratios(data)
    assert len(amp) == 6 * 2 * 2 and amp.energy_ratio.tolist() == pytest.approx([0.8] * len(amp))


# --- the verdict ----------------------------------------------------------------------------------

@pytest.mark.parametrize("factor, outcome", [(3.0, Outcome.REPRODUCED), (1.5, Outcome.PARTLY),
                                             (1.1, Outcome.NOT_REPRODUCED)])
def test_the_verdict_bands_the_energy_ratio(tmp_path, factor, outcome):
    gpu_set(factor, tmp_path)
    cpu_skipped_set(tmp_path)
    verdicts = {v.hardware_id: v for v in claim.verdicts(results.load(claim.NAME, tmp_path))}
    gpu = verdicts[GPU.hardware_id]
    assert gpu.outcome == outcome and gpu.ours == pytest.approx(factor)
    assert "torch.native" in gpu.ours_text and "torch.cell_loop" not in gpu.ours_text  # not in the headline
    cpu = verdicts[CPU.hardware_id]
    assert cpu.outcome == Outcome.NOT_MEASURED and cpu.ours is None
    assert "NVML is not available" in cpu.ours_text


def test_the_headline_only_counts(tmp_path):
    # cell_loop 10x but the headline fallbacks 1x: not reproduced
    rows = [idle_row(10.0)]
    for kernel, factor in (("torch.fused", 1.0), ("torch.native", 1.0), ("torch.cell_loop", 10.0)):
        rows.append(gpu_row(kernel, SMALL, energy_j=50.0 * factor))
    results.append(claim.NAME, GPU.hardware_id, rows, tmp_path)
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert verdict.outcome == Outcome.NOT_REPRODUCED and verdict.ours == pytest.approx(1.0)


def test_a_gpu_set_without_energy_windows_is_not_measured(tmp_path):
    row = gpu_row("torch.fused", SMALL, energy_j=50.0)
    row.update(status="error", error="RuntimeError: the energy counter did not increase", energy_j=None)
    results.append(claim.NAME, GPU.hardware_id, [row], tmp_path)
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert verdict.outcome == Outcome.NOT_MEASURED and "did not increase" in verdict.ours_text


# --- the energy window against a fake NVML monitor ----------------------------------------------

class FakeMonitor:
    """A `GpuMonitor` stand-in: a constant `watts`, windows timed on the real clock, optionally unmeasured."""

    def __init__(self, watts: float = 100.0, unmeasured: int = 0) -> None:
        self.watts, self.unmeasured, self.windows = watts, unmeasured, []

    @contextmanager
    def window(self, key):
        holder = WindowResult(key)
        start = time.perf_counter()
        try:
            yield holder
        finally:
            duration = time.perf_counter() - start
            measured = len(self.windows) >= self.unmeasured
            holder.result = GpuMeasurement(
                key=key, duration_s=duration, energy_j=self.watts * duration if measured else None,
                energy_source="counter", mean_power_w=self.watts, peak_power_w=self.watts, mean_util_pct=50.0,
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


def test_measure_point_stores_the_window_energy_and_its_steps():
    monitor = FakeMonitor(watts=50.0)
    point = sweep.Point("torch.fused", LSTMShape(batch=4, timesteps=4, features=4, hidden=8),
                        config={"window_s": 0.2})
    out = claim.measure_point(point, torch.device("cpu"), unavailable_reason=lambda d: None,
                              monitor_factory=lambda d, s: monitor, min_time=0.01, max_time=0.05, min_samples=3)
    window = monitor.windows[-1]
    assert window.duration_s >= 0.2 and out.energy_j == window.energy_j
    assert sum(out.measurement.samples) == pytest.approx(window.duration_s, rel=0.2)
    assert out.observed.kernel == "onednn" and out.observed.detail["energy_source"] == "counter"
    idle = claim.measure_point(sweep.Point(claim.IDLE_KERNEL, claim.IDLE_SHAPE, config={"idle_s": 0.2}),
                               torch.device("cpu"), unavailable_reason=lambda d: None,
                               monitor_factory=lambda d, s: FakeMonitor(watts=30.0))
    assert idle.energy_j / idle.measurement.samples[0] == pytest.approx(30.0)


def test_without_nvml_every_point_skips_with_the_reason():
    with pytest.raises(Skip, match="no NVML"):
        claim.measure_point(claim.grid(kind="cpu", quick=True, shapes=[[2, 4, 4, 8]])[1], torch.device("cpu"),
                            unavailable_reason=lambda d: "no NVML here")


@pytest.mark.gpu
def test_a_real_gpu_window_measures_energy(results_root):
    if reason := nvml_available():
        pytest.skip(reason)
    points = claim.grid(kind="cuda", quick=True, shapes=[[16, 32, 64, 64]])[:2]  # the idle window and torch.fused
    (report,) = claim.measure(points, device="cuda", min_time=0.05, quick=True)
    assert report.measured == 2, report
    table = claim.energy_table(results.load(claim.NAME))
    row = table.iloc[0]
    assert row.window_s >= 0.9 * claim.QUICK_WINDOW_S and row.energy_j > 0 and row.idle_power_w > 0
    assert row.j_per_seq == pytest.approx(row.energy_j / row.sequences)


@pytest.mark.skipif(nvml_available() is None, reason="NVML works here: a CPU run would not skip at NVML")
def test_a_quick_cpu_run_stores_skipped_rows_at_once(results_root):
    start = time.monotonic()
    (report,) = claim.measure(claim.grid(kind="cpu", quick=True, shapes=[[16, 32, 128, 128]]), device="cpu",
                              min_time=0.1, quick=True, progress=False)
    assert time.monotonic() - start < 30
    assert report.claim == claim.NAME and report.left == 0
    assert report.skipped == 5 and report.measured == report.errors == 0
    data = results.load(claim.NAME)
    assert set(data.status) == {"skipped"} and data.error.str.contains("NVML is not available").all()
    assert [v.outcome for v in claim.verdicts(data)] == [Outcome.NOT_MEASURED]


# --- parameters and grid --------------------------------------------------------------------------

def test_grid_puts_idle_first_and_quick_shrinks_it():
    full = claim.grid(kind="cuda", quick=False, shapes=[[16, 32, 128, 128], [64, 128, 512, 1024]])
    assert full[0].kernel == claim.IDLE_KERNEL and len(full) == 1 + 6 * 2 * 2 * 2
    quick = claim.grid(kind="cuda", quick=True, shapes=[[16, 32, 128, 128], [64, 128, 512, 1024]], window_s=2.0)
    assert len(quick) == 1 + 2 * 2 and {p.shape.timesteps for p in quick[1:]} == {8}
    assert all(p.config["window_s"] == claim.QUICK_WINDOW_S for p in quick[1:])
    # the claim's defaults are the same grid on both kinds (on a CPU every point becomes a skipped row)
    assert claim.CLAIM.defaults["cpu"] == claim.CLAIM.defaults["cuda"]
    assert [p.key() for p in claim.CLAIM.points("cpu")] == [p.key() for p in full]


@pytest.mark.parametrize("bad", [[], [[16, 32, 128]], [[16, 32, 128, 0]], [16, 32, 128, 128], "small"])
def test_bad_shapes_are_a_parameter_error(bad):
    with pytest.raises(ParameterError, match="'shapes'"):
        claim.CLAIM.parameters("cpu", shapes=bad)
    with pytest.raises(ParameterError, match="'shapes'"):
        claim.check_shapes(bad)


@pytest.mark.parametrize("name", ["window_s", "idle_s"])
def test_a_window_shorter_than_the_counter_allows_is_a_parameter_error(name):
    with pytest.raises(ParameterError, match=f"'{name}'"):
        claim.CLAIM.parameters("cpu", **{name: 0.05})
    with pytest.raises(ParameterError, match=f"'{name}'"):
        claim.check_window(**{name: 0.05})
    claim.check_window(window_s=0.5, idle_s=1)
    assert claim.CLAIM.parameters("cuda", window_s=0.5, idle_s=1)["idle_s"] == 1


@pytest.mark.parametrize("bad", [dict(kernel_names=["torch.raw"]), dict(precisions=["fp8"]),
                                 dict(phases=["backward"]), dict(window=1.0)])
def test_other_bad_parameters_name_themselves(bad):
    name = next(iter(bad))
    with pytest.raises(ParameterError, match=f"'{name}'"):
        claim.CLAIM.parameters("cpu", **bad)


# --- the page's figures -------------------------------------------------------------------------

def _energy_vs_time(data):
    return plots.energy_vs_time(claim.energy_ratios(data), claim.PRECISIONS, reproduced_from=claim.BANDS.edges[1],
                                partly_from=claim.BANDS.edges[0])


def test_figures_draw_a_gpu_set_and_nothing_without_one(tmp_path):
    gpu_set(2.5, tmp_path)
    cpu_skipped_set(tmp_path)
    data = results.load(claim.NAME, tmp_path)
    grids = plots.energy_bars(claim.energy_table(data), claim.KERNELS, claim.PRECISIONS)
    assert len(grids) == 1 and len(grids[0].axes.flat) == 4  # 2 phases x 2 shapes
    assert "J" in grids[0].axes.flat[0].get_ylabel() and "h100" in grids[0].axes.flat[0].get_title()
    for ax in grids[0].axes.flat:  # every panel: 6 kernels x 2 precisions, each with its hatched above-idle part
        assert sum(patch.get_hatch() == "///" for patch in ax.patches) == 6 * 2
    proportion = _energy_vs_time(data)
    assert proportion is not None and len(proportion.axes.flat) == 1  # the one GPU set
    levels = {line.get_ydata()[0] for line in proportion.axes.flat[0].get_lines() if len(set(line.get_ydata())) == 1}
    assert {*claim.BANDS.edges, 1.0} <= levels  # the verdict's bands and 1x marked
    amp = claim.amp_summary(data)
    plots.ratio_bars(amp, x="kernel", hue="case", xlabel="kernel", ylabel="AMP / fp32 (x)")
    assert not claim.summary(data).empty and "Energy was measured on" in claim.status_note(data)
    plt.close("all")
    cpu_only = data[data.device_kind == "cpu"]
    assert plots.energy_bars(claim.energy_table(cpu_only), claim.KERNELS, claim.PRECISIONS) == []
    assert _energy_vs_time(cpu_only) is None
    assert claim.amp_summary(cpu_only).empty and "not measured" in claim.status_note(cpu_only)


@pytest.mark.slow
def test_the_page_renders_a_stored_gpu_set(tmp_path):
    import nbformat
    import papermill

    gpu_set(3.0, tmp_path / "results")
    cpu_skipped_set(tmp_path / "results")
    out = tmp_path / "06.ipynb"
    papermill.execute_notebook(str(Path(__file__).resolve().parent.parent / "notebooks" / "06_energy.ipynb"),
                               str(out), kernel_name="python3", progress_bar=False,
                               parameters={"measure": False, "results_dir": str(tmp_path / "results"),
                                           "grid": {"window_s": 1.0}})
    executed = nbformat.read(out, as_version=4)
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 3  # energy, proportion, AMP
    text = " ".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "reproduced" in text and "not measured on this hardware" in text
    # the page shows the grid it would measure, with the override applied
    assert "default grid of 06_energy" in text and re.search(r"window_s\s+1\.0\b", text)
