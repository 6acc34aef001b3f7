"""Claim 6 (energy): energy above idle from repeated windows, each after its own idle window; the proportionality
rule decided for inference and training apart, by a 95% interval from 7 windows and by the rule for few timings
below; rows of the earlier methods (one idle window a round, one window per configuration); the windows against a
fake NVML monitor and a fake RAPL counter; the stability figure; and the CPU run that stores only skipped rows."""

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

from lstmstudy import claims, contract, hardware, notebook, nvml, plots, results, sweep  # noqa: E402
from lstmstudy.claims import energy as claim  # noqa: E402
from lstmstudy.errors import ParameterError, Skip  # noqa: E402
from lstmstudy.nvml import ASSUMED_COUNTER_PERIOD_S, GpuMeasurement, WindowResult, nvml_available  # noqa: E402
from lstmstudy.observe import Observation  # noqa: E402
from lstmstudy.protocols import energy_windows  # noqa: E402
from lstmstudy.rapl import HostReading  # noqa: E402
from lstmstudy.rules import SIGN_RULE_ALPHA, Outcome  # noqa: E402
from lstmstudy.shapes import LSTMShape  # noqa: E402
from lstmstudy.timing import Measurement  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
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
               seed: int | None = SEED, fp=GPU, idle_watts: float | Sequence[float] | None = None,
               host_watts: float | None = None, host_idle_watts: float | None = None,
               host_missing: str = "host energy is not measured: no RAPL in this test") -> dict:
    """A kernel row as the windows store it: `windows` windows of `steps` steps of `step_s`, drawing `watts` in total
    (one value, or one per window). With `idle_watts` (one value or one per window), each window came right after an
    idle window of 1 s of its own drawing that (the current method); without, the group's idle row was measured once
    a round (the first H100 set's). `host_watts`: the host's RAPL power over the work (and `host_idle_watts` over the
    idle window)."""
    config = {"window_s": 1.0, "idle_s": 1.0} if idle_watts is not None else {"window_s": 1.0}
    point = contract.Point(kernel, shape, precision=precision, phase=phase, config=config)
    durations = [steps * step_s] * windows
    energies = [w * d for w, d in zip(per_window(watts, windows), durations)]
    m = Measurement(samples=(step_s,) * (steps * windows), warmup=1, threads=1, sync="cuda-events",
                    round_sizes=(steps,) * windows, seed=seed)
    detail = {"energy_source": "counter", "window_energy_j": energies, "window_duration_s": durations}
    if idle_watts is not None:
        detail.update(window_idle_energy_j=per_window(idle_watts, windows), window_idle_duration_s=[1.0] * windows)
        if host_watts is not None:
            detail.update(host_energy_source="RAPL package-0",
                          window_host_energy_j=[host_watts * d for d in durations], window_host_duration_s=durations,
                          window_host_idle_energy_j=[host_idle_watts] * windows,
                          window_host_idle_duration_s=[1.0] * windows)
        else:
            detail["host_energy_missing"] = host_missing
    return sweep.make_row(claim.NAME, point, torch.device("cuda", 0), fp,
                          outcome=contract.PointResult(measurement=m, energy_j=sum(energies),
                                                       observed=Observation("cudnn", detail)))


def idle_row(watts: float | Sequence[float], shape: LSTMShape, *, phase: str = "inference", windows: int = 5,
             seconds: float = 1.0, seed: int | None = SEED, fp=GPU) -> dict:
    """A group's idle row of the first H100 set's method: `windows` empty windows of `seconds`, once a round,
    drawing `watts` (one value, or one per window)."""
    point = contract.Point(claim.IDLE_KERNEL, shape, phase=phase, config={"idle_s": seconds})
    energies = [w * seconds for w in per_window(watts, windows)]
    m = Measurement(samples=(seconds,) * windows, warmup=0, threads=1, sync="none", round_sizes=(1,) * windows,
                    seed=seed)
    observed = Observation("none", {"energy_source": "counter", "window_energy_j": energies,
                                    "window_duration_s": [seconds] * windows})
    return sweep.make_row(claim.NAME, point, torch.device("cuda", 0), fp,
                          outcome=contract.PointResult(measurement=m, energy_j=sum(energies), observed=observed))


def old_kernel_row(kernel: str, shape: LSTMShape, *, energy_j: float, step_s: float = 0.02, reps: int = 100) -> dict:
    """A row of the first method: one 0.5 s-target window, its steps as one burst, its total energy."""
    point = contract.Point(kernel, shape, config={"window_s": 0.5})
    m = Measurement(samples=(step_s,) * reps, warmup=0, threads=1, sync="synchronize")
    return sweep.make_row(claim.NAME, point, torch.device("cuda", 0), GPU,
                          outcome=contract.PointResult(measurement=m, energy_j=energy_j,
                                                       observed=Observation("cudnn", {"energy_source": "counter"})))


def old_idle_row(watts: float, seconds: float = 1.0) -> dict:
    """The first method's one idle window per hardware set, stored at a placeholder shape."""
    point = contract.Point(claim.IDLE_KERNEL, LSTMShape(batch=1, timesteps=1, features=1, hidden=1),
                           config={"idle_s": seconds})
    m = Measurement(samples=(seconds,), warmup=0, threads=1, sync="none")
    return sweep.make_row(claim.NAME, point, torch.device("cuda", 0), GPU,
                          outcome=contract.PointResult(measurement=m, energy_j=watts * seconds,
                                                       observed=Observation("none", {"energy_source": "counter"})))


IDLE_W, FUSED_W = 50.0, 150.0  # the fused kernel draws 100 W above idle


def gpu_set(root: Path, *, time_factor: float = 3.0, power_factor: object = 1.0,
            precisions: Sequence[str] = ("fp32", "fp16"), fp=GPU, windows: int = 5, paired: bool = True,
            idle: float | Sequence[float] = IDLE_W) -> None:
    """A GPU set where every fallback takes `time_factor` x the fused kernel's time per step and draws
    `power_factor` x its power above idle (per window, if a list; per phase, if a dict of those): S = `power_factor`.
    `paired`: each window after its own idle window (else the group's idle row, once a round); `idle`: the idle
    power in each window (drift, if a list), which every kernel's power rides on."""
    rows = []
    idle_w = np.asarray(per_window(idle, windows))
    for shape in (SMALL, LARGE):
        for phase in ("inference", "train"):
            factor = power_factor[phase] if isinstance(power_factor, dict) else power_factor
            above = np.asarray(per_window(factor, windows)) * (FUSED_W - IDLE_W)
            extra = {"idle_watts": list(idle_w)} if paired else {}
            if not paired:
                rows.append(idle_row(list(idle_w), shape, phase=phase, fp=fp, windows=windows))
            for precision in precisions:
                for fused, fallbacks in (("torch.fused", ["torch.native", "torch.cell_loop"]),
                                         ("keras.cudnn_auto", ["keras.relu", "keras.recurrent_dropout"])):
                    rows.append(kernel_row(fused, shape, watts=list(idle_w + FUSED_W - IDLE_W), precision=precision,
                                           phase=phase, fp=fp, windows=windows, **extra))
                    for k in fallbacks:
                        rows.append(kernel_row(k, shape, watts=list(idle_w + above), step_s=0.02 * time_factor,
                                               precision=precision, phase=phase, fp=fp, windows=windows, **extra))
    results.append(claim.NAME, fp.hardware_id, rows, root)


def cpu_skipped_set(root: Path, fp=CPU) -> None:
    reason = "NVML is not available here: NVML Shared Library Not Found; energy is not measured on this machine"
    points = claim.grid(kind="cpu", quick=True, shapes=[[16, 32, 128, 128]])
    rows = [sweep.make_row(claim.NAME, p, torch.device("cpu"), fp, status="skipped", error=reason) for p in points]
    results.append(claim.NAME, fp.hardware_id, rows, root)


def verdict_on(root: Path, hardware_id: str = GPU.hardware_id):
    return {v.hardware_id: v for v in claim.verdicts(results.load(claim.NAME, root))}[hardware_id]


# --- energy above idle, from the per-window numbers ----------------------------------------------

def test_each_window_is_charged_the_idle_window_measured_right_before_it(tmp_path):
    # 100 steps of batch 10 = 1,000 sequences per 2 s window; idle drifts 9-11 W between windows and the kernel
    # with it: each window's own idle window takes the drift out
    idle, kernel = [9.0, 10.0, 11.0, 10.0, 10.0], [24.0, 25.0, 26.0, 25.0, 25.0]
    results.append(claim.NAME, GPU.hardware_id, [kernel_row("torch.fused", SMALL, watts=kernel, idle_watts=idle)],
                   tmp_path)
    data = results.load(claim.NAME, tmp_path)
    (row,) = claim.energy_table(data).itertuples()
    assert row.method == claim.PAIRED and row.windows == 5 and row.sequences == 5 * 1000
    assert row.window_s == pytest.approx(2.0) and row.mean_power_w == pytest.approx(25.0)
    assert row.idle_power_w == pytest.approx(10.0) and list(row.w_idle_power_w) == pytest.approx(idle)
    # total: 48-52 J per window over 1,000 sequences; 5 windows give their spread, no 95% interval
    assert (row.j_per_1k_seq, row.j_per_1k_seq_lo, row.j_per_1k_seq_hi) == pytest.approx((50.0, 48.0, 52.0))
    # above idle: exactly 30 J in every window
    assert (row.above_idle_j_per_1k_seq, row.above_idle_j_per_1k_seq_lo,
            row.above_idle_j_per_1k_seq_hi) == pytest.approx((30.0, 30.0, 30.0))
    assert row.seq_per_j == pytest.approx(20.0) and row.above_idle_seq_per_j == pytest.approx(1000 / 30)
    assert list(row.w_above_power_w) == pytest.approx([15.0] * 5)
    (idle_summary,) = claim.idle_table(data).itertuples()
    assert idle_summary.method == claim.PAIRED and idle_summary.windows == 5
    assert (idle_summary.idle_power_w, idle_summary.idle_power_w_lowest,
            idle_summary.idle_power_w_highest) == pytest.approx((10.0, 9.0, 11.0))
    assert "spread of 5 windows: 48-52" in claim.summary(data)["J per 1,000 seq"].iloc[0]


def test_from_seven_windows_a_row_has_a_95_percent_interval(tmp_path):
    idle, kernel = [10.0] * 7, [24.0, 25.0, 26.0, 25.0, 25.0, 24.5, 25.5]
    results.append(claim.NAME, GPU.hardware_id, [kernel_row("torch.fused", SMALL, watts=kernel, idle_watts=idle,
                                                            windows=7)], tmp_path)
    data = results.load(claim.NAME, tmp_path)
    (row,) = claim.energy_table(data).itertuples()
    # a bootstrap (re-run) interval of the median of 7 windows, not their spread (48-52)
    assert 46 < row.j_per_1k_seq_lo < 50 < row.j_per_1k_seq_hi < 54
    assert (row.j_per_1k_seq_lo, row.j_per_1k_seq_hi) != pytest.approx((48.0, 52.0))
    assert "95% interval" in claim.summary(data)["J per 1,000 seq"].iloc[0]
    assert claim.over_windows([1.0, 2.0]) == pytest.approx((1.5, np.nan, np.nan), nan_ok=True)
    assert claim.over_windows([1.0, np.nan, 3.0]) == pytest.approx((np.nan,) * 3, nan_ok=True)


def test_a_row_of_the_first_h100_method_is_charged_the_idle_window_of_its_round(tmp_path):
    idle, kernel = [9.0, 10.0, 11.0], [24.0, 25.0, 26.0]
    results.append(claim.NAME, GPU.hardware_id, [idle_row(idle, SMALL, windows=3),
                                                 kernel_row("torch.fused", SMALL, watts=kernel, windows=3)], tmp_path)
    data = results.load(claim.NAME, tmp_path)
    (row,) = claim.energy_table(data).itertuples()
    assert row.method == claim.REPEATED and list(row.w_above_power_w) == pytest.approx([15.0] * 3)
    assert row.host_note == claim.NO_HOST and np.isnan(row.host_power_w)
    (idle_summary,) = claim.idle_table(data).itertuples()
    assert idle_summary.method == claim.REPEATED and idle_summary.idle_power_w_highest == pytest.approx(11.0)


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


def test_the_ratios_come_window_by_window_and_few_windows_give_their_spread(tmp_path):
    gpu_set(tmp_path, time_factor=3.0, power_factor=[0.9, 1.0, 1.1, 1.2, 1.0], idle=[50, 60, 45, 70, 50])
    data = results.load(claim.NAME, tmp_path)
    ratios = claim.energy_ratios(data)
    assert set(zip(ratios.kernel, ratios.baseline)) == set(claim.PAIRS.items())
    assert len(ratios) == 4 * 2 * 2 * 2  # fallbacks x shapes x phases x precisions
    assert ratios.paired.all() and ratios.judged.all() and (ratios.windows == 5).all()
    assert (ratios.method == claim.PAIRED).all()
    assert ratios.time_ratio.tolist() == pytest.approx([3.0] * len(ratios))
    # S in each window is the power factor, whatever idle power did: 5 windows give their spread, no interval
    assert ratios.proportionality.tolist() == pytest.approx([1.0] * len(ratios))
    assert ratios.proportionality_lo.tolist() == pytest.approx([0.9] * len(ratios))
    assert ratios.proportionality_hi.tolist() == pytest.approx([1.2] * len(ratios))
    assert all(list(w) == pytest.approx([0.9, 1.0, 1.1, 1.2, 1.0]) for w in ratios.w_proportionality)
    # energy above idle per sequence = S x the time ratio, window by window
    assert ratios.above_idle_ratio.tolist() == pytest.approx([3.0] * len(ratios))
    assert all(len(r) == 1000 for r in ratios.replicates)
    assert ratios.host_proportionality.isna().all()  # no RAPL in this set
    amp = claim.amp_ratios(data)
    assert len(amp) == 6 * 2 * 2 and set(amp.baseline.str.endswith(" fp32")) == {True}
    assert "spread of 5 windows: 0.9-1.2" in claim.ratio_summary(ratios).S.iloc[0]


def test_the_hosts_rapl_energy_is_read_beside_the_board_never_in_s(tmp_path):
    # the fallback draws as much GPU power above idle as the fused kernel (S = 1) but 30 W more on the host
    rows = [kernel_row("torch.fused", LARGE, watts=FUSED_W, idle_watts=IDLE_W, host_watts=60.0, host_idle_watts=40.0),
            kernel_row("torch.native", LARGE, watts=FUSED_W, idle_watts=IDLE_W, step_s=0.06, host_watts=90.0,
                       host_idle_watts=40.0)]
    results.append(claim.NAME, GPU.hardware_id, rows, tmp_path)
    data = results.load(claim.NAME, tmp_path)
    table = claim.energy_table(data).set_index("kernel")
    assert table.loc["torch.native", "host_power_w"] == pytest.approx(90.0)
    assert table.loc["torch.native", "host_above_idle_w"] == pytest.approx(50.0)
    assert table.loc["torch.fused", "host_note"] == "RAPL package-0"
    (pair,) = claim.energy_ratios(data).itertuples()
    assert pair.proportionality == pytest.approx(1.0)  # the board's alone
    assert pair.host_proportionality == pytest.approx((100.0 + 50.0) / (100.0 + 20.0))
    assert "measured through RAPL package-0" in claim.host_note(data)


# --- the rule -------------------------------------------------------------------------------------

@pytest.mark.parametrize("power_factor, outcome, words", [
    (1.0, Outcome.HOLDS, "all 5 lie within 0.8-1.25 (proportional), which the rule for few timings decides"),
    (1.6, Outcome.DOES_NOT_HOLD, "all 5 lie at or above 1.25 (more than proportional)"),
    (0.5, Outcome.DOES_NOT_HOLD, "all 5 lie below 0.8 (less than proportional)"),
    ([1.0, 1.1, 1.2, 1.4, 1.5], Outcome.INCONCLUSIVE, "they lie on both sides of an edge of the band"),
], ids=["holds", "more", "less", "straddles"])
def test_five_windows_decide_a_part_only_when_all_agree(tmp_path, power_factor, outcome, words):
    gpu_set(tmp_path, time_factor=3.0, power_factor=power_factor, idle=[50, 65, 45, 55, 50])
    cpu_skipped_set(tmp_path)
    gpu = verdict_on(tmp_path)
    assert gpu.outcome == outcome and words in gpu.ours_text
    assert [name for name, _, _ in gpu.parts] == ["inference", "training"]
    assert all(low <= high for _, low, high in gpu.parts)
    assert gpu.fewest_timings == 5 and gpu.interval_name == "rough range from few timings, not a 95% interval"  # 5 windows: no interval
    assert gpu.ours is None and gpu.low is None  # decided on the parts, each phase apart
    assert "torch.native" in gpu.ours_text and "torch.cell_loop" not in gpu.ours_text  # not in the headline
    assert gpu.ours_text.count("geometric mean of 12 configuration(s)") == 2  # 3 pairs x 2 shapes x 2 precisions
    cpu = verdict_on(tmp_path, CPU.hardware_id)
    assert cpu.outcome == Outcome.NOT_MEASURED and cpu.ours is None
    assert "NVML is not available" in cpu.ours_text


def test_from_seven_windows_a_part_is_decided_on_its_95_percent_interval(tmp_path):
    gpu_set(tmp_path, power_factor=[0.95, 1.0, 1.05, 1.1, 1.0, 0.9, 1.0], windows=7, precisions=("fp32",))
    gpu = verdict_on(tmp_path)
    assert gpu.outcome == Outcome.HOLDS and gpu.fewest_timings is None
    assert gpu.ours_text.count("(95% interval ") == 2 and "rule for few timings" not in gpu.ours_text
    for _, low, high in gpu.parts:
        assert 0.8 <= low <= 1.0 <= high < 1.25


def test_three_windows_never_decide_even_all_on_one_side(tmp_path):
    gpu_set(tmp_path, power_factor=0.3, windows=3, precisions=("fp32",))
    gpu = verdict_on(tmp_path)
    assert gpu.outcome == Outcome.INCONCLUSIVE and gpu.fewest_timings == 3
    assert "all 3 lie below 0.8, but 3 windows cannot decide by the rule for few timings (0.5^3 = 0.125 > 0.05" \
        in gpu.ours_text
    assert "lacks 5 windows a configuration (it has 3" in gpu.ours_text
    assert 0.5 ** claim.DECIDING_WINDOWS <= SIGN_RULE_ALPHA < 0.5 ** (claim.DECIDING_WINDOWS - 1)


@pytest.mark.parametrize("factors, outcome, why", [
    ({"inference": 1.0, "train": 1.0}, Outcome.HOLDS, "the hypothesis holds: both parts hold"),
    ({"inference": 1.0, "train": 0.5}, Outcome.DOES_NOT_HOLD,
     "the hypothesis does not hold: the training part does not hold"),
    ({"inference": 0.5, "train": 1.6}, Outcome.DOES_NOT_HOLD, "the hypothesis does not hold: neither part holds"),
    ({"inference": 1.0, "train": [0.7, 0.9, 1.0, 1.1, 1.0]}, Outcome.INCONCLUSIVE,
     "the hypothesis is undecided: the training part is undecided"),
], ids=["both-hold", "one-fails", "both-fail", "one-undecided"])
def test_training_and_inference_are_decided_apart_and_combined(tmp_path, factors, outcome, why):
    gpu_set(tmp_path, power_factor=factors, precisions=("fp32",))
    gpu = verdict_on(tmp_path)
    assert gpu.outcome == outcome and why in gpu.ours_text
    inference, training = gpu.parts
    assert inference[0] == "inference" and training[0] == "training"


def test_the_parts_combine_as_the_rule_says():
    H, F, U, N = Outcome.HOLDS, Outcome.DOES_NOT_HOLD, Outcome.INCONCLUSIVE, Outcome.NOT_MEASURED
    assert claim.combine_parts([H, H]) == H
    assert claim.combine_parts([H, F]) == claim.combine_parts([U, F]) == claim.combine_parts([N, F]) == F
    assert claim.combine_parts([H, U]) == claim.combine_parts([H, N]) == claim.combine_parts([U, N]) == U
    assert claim.combine_parts([N, N]) == N


def test_a_phase_not_measured_leaves_the_other_undecided_at_best(tmp_path):
    rows = [kernel_row("torch.fused", LARGE, watts=FUSED_W, idle_watts=IDLE_W),
            kernel_row("torch.native", LARGE, watts=FUSED_W, idle_watts=IDLE_W, step_s=0.06)]
    results.append(claim.NAME, GPU.hardware_id, rows, tmp_path)
    gpu = verdict_on(tmp_path)
    assert gpu.outcome == Outcome.INCONCLUSIVE and "training not measured: no pair measured" in gpu.ours_text
    assert [name for name, _, _ in gpu.parts] == ["inference"]


def test_the_rule_names_its_parts_regions_and_the_bands_match_them():
    assert claim.BANDS.decide(0.85, 1.2) == Outcome.HOLDS
    assert claim.BANDS.decide(1.3, 2.0) == claim.BANDS.decide(0.3, 0.7) == Outcome.DOES_NOT_HOLD
    assert claim.BANDS.decide(0.7, 0.9) == claim.BANDS.decide(1.1, 1.3) == Outcome.INCONCLUSIVE
    for text in ("decided for inference and for training apart (two parts)",
                 "charged the power of an idle window measured right before it",
                 "at least 7 windows is decided on the 95% interval", "0.5^n <= 0.05 (5 windows or more)",
                 "holds if its interval (or every window) lies within 0.8 <= S < 1.25 (proportional)",
                 "does not hold if it lies at or above 1.25 (more than proportional)",
                 "below 0.8 (less than proportional)", "undecided (inconclusive) if it straddles",
                 "holds if both parts hold; does not hold if either part does not hold",
                 "not measured where NVML", "the host's CPU energy (RAPL), where measured, is shown beside it"):
        assert text in claim.RULE, text
    assert claim.WINDOWS >= claim.DECIDING_WINDOWS == 5 and claim.INTERVAL_WINDOWS == 7


PAGE = ROOT / "notebooks" / f"{claim.CLAIM.stem}.ipynb"


def _markdown(page: Path) -> str:
    return " ".join("".join(c["source"]) for c in json.loads(page.read_text())["cells"] if c["cell_type"] == "markdown")


def test_no_seed_claims_it_so_the_rule_and_the_page_say_holds_not_reproduced():
    """No seed claims energy proportionality (the paper left energy as future work): the hypothesis is the study's
    own, so its rule and its page say whether it holds, never that it was reproduced."""
    markdown = _markdown(PAGE)
    for text in (claim.RULE, markdown, claim.__doc__):
        assert not re.search(r"\breproduced\b", text)
    assert all(f"**{words}**" in markdown for words in ("holds", "does not hold", "undecided"))
    assert "this CPU-only machine" not in claim.__doc__


def test_the_page_states_the_rule_once_glued_from_the_claim():
    markdown = _markdown(PAGE)
    assert markdown.count("{glue:text}`c06_rule`") == 1 and "c06_rule_history" in markdown
    # no hand-written copy of the rule's edges beside it
    assert "0.8 <= *S* < 1.25" not in markdown and "0.8 <= S < 1.25" not in markdown
    sources = " ".join("".join(c["source"]) for c in json.loads(PAGE.read_text())["cells"] if c["cell_type"] == "code")
    assert "verdict_table(verdicts)" in sources and "rule" not in notebook.verdict_table([]).columns  # not again
    assert "c06_cpu" not in markdown  # the CPU sets' one NVML reason is said once, by status_note


def test_the_headline_only_counts(tmp_path):
    # cell_loop draws 3x the power above idle but the headline fallback draws the same: proportional
    rows = [kernel_row("torch.fused", SMALL, watts=FUSED_W, idle_watts=IDLE_W, phase=phase) for phase in
            ("inference", "train")]
    rows += [kernel_row("torch.native", SMALL, watts=FUSED_W, step_s=0.06, idle_watts=IDLE_W, phase=phase)
             for phase in ("inference", "train")]
    rows += [kernel_row("torch.cell_loop", SMALL, watts=IDLE_W + 300.0, step_s=0.06, idle_watts=IDLE_W, phase=phase)
             for phase in ("inference", "train")]
    results.append(claim.NAME, GPU.hardware_id, rows, tmp_path)
    verdict = verdict_on(tmp_path)
    assert verdict.outcome == Outcome.HOLDS and all(low == pytest.approx(1.0) for _, low, _ in verdict.parts)


def test_a_window_at_idle_power_leaves_its_configuration_unjudged(tmp_path):
    rows = []
    for phase in ("inference", "train"):
        rows += [kernel_row("torch.fused", SMALL, watts=FUSED_W, idle_watts=IDLE_W, phase=phase),
                 kernel_row("torch.native", SMALL, watts=[IDLE_W, 150.0, 150.0, 150.0, 150.0], step_s=0.06,
                            idle_watts=IDLE_W, phase=phase),
                 kernel_row("torch.fused", LARGE, watts=FUSED_W, idle_watts=IDLE_W, phase=phase),
                 kernel_row("torch.native", LARGE, watts=FUSED_W, step_s=0.06, idle_watts=IDLE_W, phase=phase)]
    results.append(claim.NAME, GPU.hardware_id, rows, tmp_path)
    verdict = verdict_on(tmp_path)
    assert verdict.outcome == Outcome.HOLDS and verdict.ours_text.count("geometric mean of 1 configuration(s)") == 2
    assert "2 configuration(s) not judged: 2 a window drew no more than idle power" in verdict.ours_text


def test_a_configuration_without_its_idle_window_says_so(tmp_path):
    rows = [idle_row(IDLE_W, SMALL), kernel_row("torch.fused", SMALL, watts=FUSED_W),
            kernel_row("torch.native", SMALL, watts=FUSED_W, step_s=0.06),
            kernel_row("torch.fused", LARGE, watts=FUSED_W), kernel_row("torch.native", LARGE, watts=FUSED_W)]
    results.append(claim.NAME, GPU.hardware_id, rows, tmp_path)
    assert "1 configuration(s) not judged: 1 no idle window to subtract" in verdict_on(tmp_path).ours_text


def test_a_gpu_set_without_energy_windows_is_not_measured(tmp_path):
    row = kernel_row("torch.fused", SMALL, watts=FUSED_W, idle_watts=IDLE_W)
    row.update(status="error", error="RuntimeError: the energy counter did not increase", energy_j=None)
    results.append(claim.NAME, GPU.hardware_id, [row], tmp_path)
    verdict = verdict_on(tmp_path)
    assert verdict.outcome == Outcome.NOT_MEASURED and "did not increase" in verdict.ours_text


def test_the_nvml_reason_is_said_once_for_every_set_it_holds_for(tmp_path):
    gpu_set(tmp_path, precisions=("fp32",))
    others = [replace(CPU, cpu_model=f"Fake Xeon {i}") for i in range(3)]
    for fp in others:
        cpu_skipped_set(tmp_path, fp=fp)
    data = results.load(claim.NAME, tmp_path)
    note = claim.status_note(data)
    assert note.count("NVML Shared Library Not Found") == 1 and all(f"`{fp.hardware_id}`" in note for fp in others)
    assert "Their rows are stored as `skipped`" in note
    for fp in others:  # each set's verdict says it in a few words, not the whole reason again
        verdict = verdict_on(tmp_path, fp.hardware_id)
        assert "Shared Library" not in verdict.ours_text and "NVML is not available" in verdict.ours_text


# --- rows of the earlier methods ------------------------------------------------------------------

def test_the_first_h100_method_is_judged_and_says_what_it_lacks(tmp_path):
    # one idle window a round, 3 windows a configuration, all of them far below the band
    gpu_set(tmp_path, paired=False, windows=3, power_factor=[0.2, 0.3, 0.25], precisions=("fp32",))
    data = results.load(claim.NAME, tmp_path)
    ratios = claim.energy_ratios(data)
    assert (ratios.method == claim.REPEATED).all() and ratios.judged.all()
    gpu = verdict_on(tmp_path)
    assert gpu.outcome == Outcome.INCONCLUSIVE and gpu.fewest_timings == 3
    assert (f"this set ({claim.REPEATED}) lacks an idle window right before each window of work" in gpu.ours_text
            and "and 5 windows a configuration (it has 3" in gpu.ours_text)
    assert [name for name, _, _ in gpu.parts] == ["inference", "training"]
    assert "host energy is not measured" in claim.host_note(data)


def test_the_first_h100_method_with_five_windows_decides_and_still_says_what_it_lacks(tmp_path):
    gpu_set(tmp_path, paired=False, power_factor=0.3, precisions=("fp32",))
    gpu = verdict_on(tmp_path)
    assert gpu.outcome == Outcome.DOES_NOT_HOLD and "lacks an idle window right before each" in gpu.ours_text
    assert "5 windows a configuration" not in gpu.ours_text


def test_where_a_set_holds_both_methods_the_windows_with_their_own_idle_decide(tmp_path):
    gpu_set(tmp_path, paired=False, windows=3, power_factor=0.3, precisions=("fp32",))
    gpu_set(tmp_path, paired=True, power_factor=1.0, precisions=("fp32",))
    gpu = verdict_on(tmp_path)
    assert gpu.outcome == Outcome.HOLDS and "lacks" not in gpu.ours_text
    assert f"12 configuration(s) not judged: 12 superseded by the rows of {claim.PAIRED}" in gpu.ours_text


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
    assert "no interval: 1 window" in claim.summary(data)["J per 1,000 seq"].iloc[0]


def test_old_rows_beside_new_ones_leave_the_verdict_to_the_new(tmp_path):
    gpu_set(tmp_path, power_factor=1.0, precisions=("fp32",))
    results.append(claim.NAME, GPU.hardware_id, [old_idle_row(10.0), old_kernel_row("torch.fused", SMALL, energy_j=50),
                                                 old_kernel_row("torch.native", SMALL, energy_j=500)], tmp_path)
    verdict = verdict_on(tmp_path)
    assert verdict.outcome == Outcome.HOLDS
    assert "1 configuration(s) not judged: 1 a single window (old method)" in verdict.ours_text


def test_the_stored_h100_set_reads_undecided_and_says_why():
    """The first GPU set (3 windows a configuration, idle once a round): every window's S lies below 0.8, but three
    windows cannot decide under the rule for few timings, so both parts stay undecided."""
    data = results.load(claim.NAME)
    h100 = [v for v in claim.CLAIM.judge(data) if v.hardware_id.startswith("cuda-h100")]
    if not h100:
        pytest.skip("no H100 energy set is stored in results/energy")
    (verdict,) = h100
    assert verdict.outcome == Outcome.INCONCLUSIVE and verdict.fewest_timings == 3
    assert all(high < claim.BAND[0] for _, _, high in verdict.parts)
    assert verdict.ours_text.count("but 3 windows cannot decide") == 2 and "lacks an idle window" in verdict.ours_text


# --- the windows against a fake NVML monitor and a fake RAPL counter ------------------------------

class FakeMonitor:
    """A `GpuMonitor` stand-in: idle windows (key 'idle') draw `idle_w`, work windows `busy_w`, timed on the
    real clock; the first `unmeasured` windows report no energy. What it does goes into `log` (a list a test
    may share between monitors): 'baseline', 'settle' and each window's key."""

    counter_period_s = period_s = 0.025
    min_window_s = 0.0

    def __init__(self, busy_w: float = 100.0, idle_w: float = 30.0, unmeasured: int = 0,
                 log: list[str] | None = None) -> None:
        self.busy_w, self.idle_w, self.unmeasured, self.windows = busy_w, idle_w, unmeasured, []
        self.log = [] if log is None else log

    def baseline_power_w(self) -> float:
        self.log.append("baseline")
        return self.idle_w

    def settle(self, baseline_w: float) -> nvml.Settled:
        self.log.append("settle")
        return nvml.Settled(0.01, baseline_w == self.idle_w, self.idle_w)

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
            self.log.append(key)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


class FakeHost:
    """A RAPL reader (`rapl.HostEnergy`) whose one package draws `watts` at every instant of the real clock."""

    source = "RAPL package-0"

    def __init__(self, watts: float = 20.0) -> None:
        self.watts = watts

    def read(self) -> HostReading:
        t = time.perf_counter()
        return HostReading(t, (round(t * self.watts * 1e6),))

    def joules(self, start: HostReading, end: HostReading) -> float:
        return (end.uj[0] - start.uj[0]) / 1e6


def test_the_window_grows_until_it_is_long_enough_and_measured():
    monitor = FakeMonitor(unmeasured=1)
    n, gm = nvml.energy_window(lambda: time.sleep(0.002), monitor, n=3, window_s=0.05)
    assert len(monitor.windows) >= 2 and monitor.windows[0].energy_j is None
    assert gm.duration_s >= 0.05 and gm.energy_j == pytest.approx(100.0 * gm.duration_s)
    assert n >= 3 * 2  # doubled once for the unmeasured window, and grown further where it came out short


def test_a_window_never_measured_raises_instead_of_storing_a_number():
    with pytest.raises(RuntimeError, match="did not increase"):
        nvml.energy_window(lambda: None, FakeMonitor(unmeasured=99), n=3, window_s=0.0)


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
                                           lambda period_s: monitor, dict(min_time=0.01, max_time=0.05, min_samples=3),
                                           energy_windows.RunState())
    windows()  # the rounds' warm-up call sizes the window
    # about a quarter of the steps the device-timed median asks for (4x more than fit the window)
    device_n = nvml.repetitions(medians[0], window_s)
    assert device_n / 8 <= windows.n <= device_n / 3
    windows()
    (kept,) = windows.kept
    # the window lasts about what was planned (window_s with the margin), not the 4x that from the median
    assert window_s <= kept.work.duration_s < 2 * nvml.SIZING_MARGIN * window_s
    assert kept.idle is None and kept.after is None  # this point asked for no idle window
    assert set(monitor.log) == {"energy"}  # and so waited for no settling either


def _group(points, factory, host_energy, rounds: int = 3, state: energy_windows.RunState | None = None):
    state = energy_windows.RunState() if state is None else state  # one a run, shared by its points
    prepare = lambda point, device: energy_windows.prepare_point(  # noqa: E731
        point, device, timing=dict(min_time=0.01, max_time=0.05, min_samples=3), state=state,
        unavailable_reason=lambda d: None, monitor_factory=factory, host_energy=host_energy)
    return sweep.measure_group(points, prepare, torch.device("cpu"), energy_windows.window_rounds(rounds))


def _calls(log: list[str]) -> list[str]:
    """The protocol's log with each window of work once (a short one runs again, at once)."""
    return [e for i, e in enumerate(log) if not (e == "energy" and i and log[i - 1] == "energy")]


def test_every_window_of_work_sits_between_idle_windows_started_from_the_baseline(tmp_path):
    shape = LSTMShape(batch=4, timesteps=4, features=4, hidden=8)
    points = [contract.Point(k, shape, config={"window_s": 0.03, "idle_s": 0.02})
              for k in ("torch.fused", "torch.native")]
    monitors, periods, log = [], [], []

    def factory(device, sync, period_s):
        periods.append(period_s)
        monitors.append(FakeMonitor(busy_w=50.0, idle_w=30.0, log=log))
        return monitors[-1]

    outcomes = _group(points, factory, lambda: (FakeHost(20.0), ""))
    assert all(isinstance(o, contract.PointResult) for o in outcomes), outcomes
    # the group's baseline once, before any of its work; then 2 points x 3 rounds, each window of work between two
    # idle windows, each after a wait for power to settle: the idle window after one call is the one before the
    # next, so every round starts and ends idle
    assert _calls(log) == ["baseline", "settle", "idle"] + ["energy", "settle", "idle"] * 2 * 3
    # one monitor for the baseline, which measures the counter's period, then one per call, which goes by it
    # (nothing stays open between rounds)
    assert len(monitors) == 1 + 2 * 3 and periods == [None] + [FakeMonitor.period_s] * 2 * 3
    assert len({o.measurement.seed for o in outcomes}) == 1  # one group, the same rounds
    for out in outcomes:
        detail = out.observed.detail
        assert detail["baseline_w"] == 30.0 and detail["counter_period_s"] == FakeMonitor.counter_period_s
        for prefix in ("window_idle", "window_idle_after"):
            assert len(detail[f"{prefix}_energy_j"]) == len(detail[f"{prefix}_duration_s"]) == 3
            assert all(d >= 0.02 for d in detail[f"{prefix}_duration_s"])
            assert detail[f"{prefix}_settle_s"] == [0.01] * 3 and detail[f"{prefix}_settled"] == [True] * 3
        assert len(detail["window_energy_j"]) == 3
        assert len(out.measurement.round_sizes) == 3 and sum(out.measurement.round_sizes) == out.measurement.n
        assert all(d >= 0.03 for d in detail["window_duration_s"])  # no window shorter than asked
        # each step's time is its window's duration / N: one round of equal samples a window
        for round_, seconds, n in zip(out.measurement.rounds, detail["window_duration_s"],
                                      out.measurement.round_sizes):
            assert list(round_) == pytest.approx([seconds / n] * n)
        assert out.energy_j == pytest.approx(sum(detail["window_energy_j"]))
        assert detail["host_energy_source"] == "RAPL package-0" and "host_energy_missing" not in detail
        for joules, seconds in [(detail["window_host_energy_j"], detail["window_host_duration_s"]),
                                (detail["window_host_idle_energy_j"], detail["window_host_idle_duration_s"])]:
            assert np.asarray(joules) / np.asarray(seconds) == pytest.approx([20.0] * 3, rel=1e-3)
        assert out.observed.kernel in ("onednn", "aten-loop") and out.measurement.noisy in (True, False)
    # the idle window that ended one call opened the next: every window but the first is both
    fused, native = (o.observed.detail for o in outcomes)
    befores = fused["window_idle_energy_j"] + native["window_idle_energy_j"]
    afters = fused["window_idle_after_energy_j"] + native["window_idle_after_energy_j"]
    assert len(set(befores) & set(afters)) == 2 * 3 - 1
    rows = [sweep.make_row(claim.NAME, p, torch.device("cuda", 0), GPU, outcome=o) for p, o in zip(points, outcomes)]
    results.append(claim.NAME, GPU.hardware_id, rows, tmp_path)
    table = claim.energy_table(results.load(claim.NAME, tmp_path))
    assert (table.method == claim.PAIRED).all()
    assert table.idle_power_w.tolist() == pytest.approx([30.0, 30.0])
    for powers in table.w_above_power_w:  # 50 W busy - 30 W idle, window by window
        assert list(powers) == pytest.approx([20.0] * 3)
    assert table.host_power_w.tolist() == pytest.approx([20.0, 20.0], rel=1e-3)
    assert np.allclose(table.host_above_idle_w.tolist(), 0.0, atol=0.05)


def test_each_group_takes_its_own_baseline_and_the_run_one_period():
    shape = LSTMShape(batch=2, timesteps=2, features=2, hidden=4)
    state, periods, log = energy_windows.RunState(), [], []

    def factory(device, sync, period_s):
        periods.append(period_s)
        return FakeMonitor(log=log)

    for phase in ("inference", "train"):  # two groups of one run
        points = [contract.Point(k, shape, phase=phase, config={"window_s": 0.02, "idle_s": 0.02})
                  for k in ("torch.fused", "torch.native")]
        _group(points, factory, lambda: (None, "no RAPL"), rounds=1, state=state)
    assert log.count("baseline") == 2 and _calls(log)[0] == "baseline"
    second = log.index("baseline", 1)
    assert _calls(log[second:]) == ["baseline", "settle", "idle"] + ["energy", "settle", "idle"] * 2
    assert periods.count(None) == 1 and periods[0] is None  # the period is measured by the run's first monitor


def test_without_rapl_the_row_says_why_host_energy_is_missing():
    shape = LSTMShape(batch=2, timesteps=2, features=2, hidden=4)
    point = contract.Point("torch.fused", shape, config={"window_s": 0.02, "idle_s": 0.02})
    why = "host energy is not measured: this machine has no /sys/class/powercap"
    (outcome,) = _group([point], lambda d, s, p: FakeMonitor(), lambda: (None, why), rounds=2)
    assert outcome.observed.detail["host_energy_missing"] == why
    assert "window_host_energy_j" not in outcome.observed.detail


def test_a_window_the_counter_cannot_measure_makes_an_error_row_not_a_number():
    point = contract.Point("torch.fused", LSTMShape(batch=2, timesteps=2, features=2, hidden=4),
                           config={"window_s": 0.0, "idle_s": 0.0})
    (outcome,) = _group([point], lambda d, s, p: FakeMonitor(unmeasured=99), lambda: (None, "no RAPL"))
    assert isinstance(outcome, RuntimeError) and "did not increase" in str(outcome)


def test_without_nvml_every_point_skips_with_the_reason():
    for point in claim.grid(kind="cpu", quick=True, shapes=[[2, 4, 4, 8]]):
        with pytest.raises(Skip, match="no NVML"):
            energy_windows.prepare_point(point, torch.device("cpu"), timing={}, state=energy_windows.RunState(),
                                         unavailable_reason=lambda d: "no NVML here")


def test_on_a_cpu_energy_is_unavailable_with_the_reason():
    reason = energy_windows.unavailable(torch.device("cpu"))
    assert reason and ("NVML is not available" in reason or "this run is on cpu" in reason)


@pytest.mark.gpu
def test_a_real_gpu_window_measures_energy(results_root):
    if reason := nvml_available():
        pytest.skip(reason)
    points = claim.grid(kind="cuda", quick=True, shapes=[[16, 32, 64, 64]])[:1]  # torch.fused
    (report,) = claim.measure(points, device="cuda", min_time=0.05, quick=True)
    assert report.measured == 1, report
    (row,) = claim.energy_table(results.load(claim.NAME)).itertuples()
    assert row.windows == claim.QUICK_WINDOWS and row.window_s >= claim.MIN_WINDOW_S
    assert row.j_per_1k_seq > 0 and row.idle_power_w > 0 and row.method == claim.PAIRED


@pytest.mark.skipif(nvml_available() is None, reason="NVML works here: a CPU run would not skip at NVML")
def test_a_quick_cpu_run_stores_skipped_rows_at_once(results_root):
    start = time.monotonic()
    (report,) = claim.measure(claim.grid(kind="cpu", quick=True, shapes=[[16, 32, 128, 128]]), device="cpu",
                              min_time=0.1, quick=True, progress=False)
    assert time.monotonic() - start < 30
    assert report.claim == claim.NAME and report.left == 0
    assert report.skipped == 2 and report.measured == report.errors == 0  # the two kernels
    data = results.load(claim.NAME)
    assert set(data.status) == {"skipped"} and data.error.str.contains("NVML is not available").all()
    (verdict,) = claim.verdicts(data)
    assert verdict.outcome == Outcome.NOT_MEASURED and "NVML is not available" in verdict.ours_text


# --- parameters, grid and the lease ---------------------------------------------------------------

def test_every_window_lasts_a_second_and_ten_counter_periods():
    assert claim.MIN_WINDOW_S >= 1.0 and claim.MIN_WINDOW_S >= 10 * ASSUMED_COUNTER_PERIOD_S
    assert claim.MIN_WINDOW_S >= nvml.MIN_ENERGY_WINDOW_S  # the claim's number keeps NVML's floor
    for kind in ("cpu", "cuda"):
        for quick in (False, True):
            for point in claim.CLAIM.points(kind, quick=quick):
                assert point.config["window_s"] >= claim.MIN_WINDOW_S and point.config["idle_s"] >= claim.MIN_WINDOW_S
    assert claim.CLAIM.parameters("cuda")["windows"] == claim.WINDOWS >= claim.DECIDING_WINDOWS
    plan = energy_windows.window_rounds(5)
    assert (plan.rounds, plan.warmup, plan.burst_max_samples, plan.extra_rounds) == (5, 1, 1, 0)


def test_grid_gives_every_kernel_its_own_idle_windows_and_quick_shrinks_it():
    shapes = [[16, 32, 128, 128], [64, 128, 512, 1024]]
    full = claim.grid(kind="cuda", quick=False, shapes=shapes, precisions=["fp32", "fp16"])
    groups = sweep.groups(full)
    assert len(groups) == 2 * 2 and all(len(g) == len(claim.DEFAULT_KERNELS) * 2 for g in groups)
    assert claim.IDLE_KERNEL not in {p.kernel for p in full}  # no idle point: every window has its own
    assert all(p.config == {"window_s": 1.0, "idle_s": 1.0} for p in full)
    assert "torch.cell_loop" not in claim.DEFAULT_KERNELS and set(claim.HEADLINE) <= set(claim.DEFAULT_KERNELS)
    quick = claim.grid(kind="cuda", quick=True, shapes=shapes, window_s=2.0)
    assert len(quick) == 2 and {p.shape.timesteps for p in quick} == {8}
    assert all(p.config["window_s"] == claim.MIN_WINDOW_S for p in quick)
    # the claim's defaults are the same grid on both kinds (on a CPU every point becomes a skipped row)
    assert claim.CLAIM.defaults["cpu"] == claim.CLAIM.defaults["cuda"]
    assert [p.key() for p in claim.CLAIM.points("cpu")] == [
        p.key() for p in claim.grid(kind="cpu", quick=False, shapes=shapes)]


def test_the_lease_measures_every_headline_pair_in_both_phases_with_five_windows_at_the_large_shape():
    lease = claim.CLAIM.points("cuda", select="lease")
    assert {p.shape for p in lease} == {LSTMShape(batch=64, timesteps=128, features=512, hidden=1024)}
    assert {p.phase for p in lease} == {"inference", "train"}
    assert {p.kernel for p in lease} >= {*claim.HEADLINE, *(claim.PAIRS[k] for k in claim.HEADLINE)}
    assert claim.CLAIM.parameters("cuda", **claim.CLAIM.lease.overrides)["windows"] >= claim.DECIDING_WINDOWS
    ((_, _, points, seconds),) = claims.planned([(claim.CLAIM, "lease")], "cuda")
    # 5 pairs of a 1 s idle window and a ~1.16 s window of work, and the build and sizing, per point
    assert points == len(lease) == 10 and seconds == pytest.approx(10 * claim.CLAIM.seconds_per_point["cuda"])
    assert claim.CLAIM.seconds_per_point["cuda"] >= claim.WINDOWS * (1.0 + 1.16)


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
                                 dict(phases=["backward"]), dict(window=1.0), dict(windows=2), dict(windows=3),
                                 dict(windows=4), dict(windows=True)])
def test_other_bad_parameters_name_themselves(bad):
    name = next(iter(bad))
    with pytest.raises(ParameterError, match=f"'{name}'"):
        claim.CLAIM.parameters("cpu", **bad)
    assert claim.CLAIM.parameters("cpu", windows=7)["windows"] == 7


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
    summary = claim.proportionality_summary(ratios)
    assert len(summary) == 3 * 2 and (summary.ratio_lo <= summary.ratio).all()
    assert summary.ratio_hi.tolist() == pytest.approx([1.1] * 6)  # 5 windows: the spread of the per-window means
    plots.ratio_bars(summary, x="kernel", hue="phase", xlabel="fallback", ylabel="S", seed_band=claim.BAND)
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
    assert claim.stability(cpu_only).empty and plots.s_per_window(claim.stability(cpu_only), band=claim.BAND,
                                                                    part_series=claim.PART_SERIES) == []
    assert "not measured" in claim.status_note(cpu_only)


def test_the_stability_figure_shows_s_in_every_window_with_units_and_hardware(tmp_path):
    gpu_set(tmp_path, power_factor={"inference": [0.9, 1.0, 1.1, 1.2, 1.0], "train": 0.5},
            idle=[50, 60, 45, 70, 50], precisions=("fp32",))
    frame = claim.stability(results.load(claim.NAME, tmp_path))
    configurations = frame[frame.series != claim.PART_SERIES]
    assert len(configurations) == 3 * 2 * 2 * 5  # pairs x shapes x phases x windows
    inference = frame[(frame.series == claim.PART_SERIES) & (frame.phase == "inference")].sort_values("window")
    assert inference.S.tolist() == pytest.approx([0.9, 1.0, 1.1, 1.2, 1.0])  # what the rule for few timings counts
    assert configurations.idle_w.tolist() == pytest.approx([50, 60, 45, 70, 50] * 12)
    (fig,) = plots.s_per_window(frame, band=claim.BAND, part_series=claim.PART_SERIES)
    top, bottom = fig.axes[0], fig.axes[2]
    assert GPU.hardware_id in top.get_title() and top.get_yscale() == "log"
    assert "S in the window (x)" in top.get_ylabel() and "(W)" in bottom.get_ylabel()
    assert "window" in bottom.get_xlabel() and len(top.lines) == 2 * 3 + 1  # each configuration, and the mean
    assert any(t.get_text() == claim.PART_SERIES for t in fig.legends[0].get_texts())
    plt.close("all")


@pytest.mark.slow
def test_the_page_renders_a_stored_gpu_set(tmp_path):
    import nbformat
    import papermill

    gpu_set(tmp_path / "results", power_factor=[0.9, 1.0, 1.1, 1.0, 1.0])
    cpu_skipped_set(tmp_path / "results")
    out = tmp_path / "06.ipynb"
    papermill.execute_notebook(str(PAGE), str(out), kernel_name="python3", progress_bar=False,
                               parameters={"measure": False, "results_dir": str(tmp_path / "results"),
                                           "grid": {"window_s": 1.5}})
    executed = nbformat.read(out, as_version=4)
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 5  # energy, S, energy vs time, S per window, AMP
    text = " ".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "holds" in text and "reproduced" not in text and "not measured on this hardware" in text
    # the page shows the grid it would measure, with the override applied
    assert "default grid of 06_energy" in text and re.search(r"window_s\s+1\.5\b", text)
