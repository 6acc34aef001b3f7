"""Claim 5's verdict logic on synthetic result sets, its timing sample, and a real torch step at a tiny size."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lstmstudy import data, results, sweep
from lstmstudy.claims import Outcome
from lstmstudy.claims import bucketing as claim
from lstmstudy.errors import ParameterError
from lstmstudy.hardware import Fingerprint
from lstmstudy.timing import Measurement
from tests.measuring import measure_one

CPU = Fingerprint(device_kind="cpu", cpu_model="Test CPU 9000", cpu_flags=[], physical_cores=2, threads=2, ram_gb=8.0)
GPU = Fingerprint(device_kind="cuda", cpu_model="Test CPU 9000", cpu_flags=[], physical_cores=2, threads=2, ram_gb=8.0,
                  gpu_name="Test GPU")
SIZES = dict(batch_size=8, corpus_size=400, sample_batches=3, layers=1, hidden=16, features=4)


def _points(kernels=claim.KERNELS, kind: str = "cpu"):
    """The full (not quick) grid at the small SIZES, the other parameters at the claim's defaults for `kind`."""
    return claim.grid(kind=kind, quick=False, **claim.CLAIM.parameters(kind, **SIZES, kernels=list(kernels)))


def _store(root, fp, per_batch_s: dict[tuple[str, str], float], spread: float = 0.01):
    """One stored row per (kernel, plan): every timed call takes per-batch seconds x the sampled batches."""
    device = torch.device(fp.device_kind)
    rows = []
    for point in _points():
        key = (point.kernel, point.config["plan"])
        if key not in per_batch_s:
            continue
        call = per_batch_s[key] * point.config["sample_batches"]
        samples = tuple(call * (1 + spread * d) for d in (-1.0, -0.5, 0.0, 0.5, 1.0))
        outcome = sweep.PointResult(measurement=Measurement(samples=samples, warmup=1, threads=2, sync="none"))
        rows.append(sweep.make_row(claim.NAME, point, device, fp, outcome=outcome))
    results.append(claim.NAME, fp.hardware_id, rows, root)


def _headline(global_s: float, auto_s: float, per_batch_s: float = 0.5, kernel: str = claim.HEADLINE):
    times = {claim.NO_BUCKETING: global_s, claim.PER_BATCH: per_batch_s, "static_buckets": 0.4, claim.AUTO: auto_s}
    return {(kernel, plan): t for plan, t in times.items()}


def test_worked_example_is_an_exact_check():
    assert claim.worked_example_verdict().outcome == Outcome.REPRODUCED
    wrong = {**data.worked_example(), "padded": 31}
    assert claim.worked_example_verdict(wrong).outcome == Outcome.NOT_REPRODUCED
    assert list(claim.worked_example_table().steps) == [22, 30, 24]


@pytest.mark.parametrize(("auto_s", "expected"), [(0.3, Outcome.REPRODUCED), (0.5, Outcome.PARTLY),
                                                  (0.8, Outcome.NOT_REPRODUCED)])
def test_verdict_bands_on_the_headline_speedup(tmp_path, auto_s, expected):
    # per-batch times; the plans have nearly the same number of batches, so the epoch ratio is ~1.0 / auto_s
    _store(tmp_path, CPU, _headline(1.0, auto_s))
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert verdict.hardware_id == CPU.hardware_id
    assert verdict.outcome == expected
    plan_set = data.plans(SIZES["corpus_size"], SIZES["batch_size"])
    scale = plan_set[claim.NO_BUCKETING].n_batches / plan_set[claim.AUTO].n_batches
    assert verdict.ours == pytest.approx(scale / auto_s, rel=1e-9)
    assert "over per-batch padding" in verdict.ours_text


def test_only_the_headline_kernel_decides(tmp_path):
    # packed and masked look spectacular, torch.padded is missing: the set is not measured, not reproduced
    _store(tmp_path, GPU, {**_headline(1.0, 0.1, kernel="torch.packed"), **_headline(1.0, 0.1, kernel="keras.masked")})
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert verdict.outcome == Outcome.NOT_MEASURED and verdict.ours is None


def test_missing_baseline_is_not_measured(tmp_path):
    times = _headline(1.0, 0.2)
    del times[(claim.HEADLINE, claim.NO_BUCKETING)]
    _store(tmp_path, CPU, times)
    (verdict,) = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert verdict.outcome == Outcome.NOT_MEASURED


def test_hardware_sets_get_their_own_verdicts(tmp_path):
    _store(tmp_path, CPU, _headline(1.0, 0.9))
    _store(tmp_path, GPU, _headline(1.0, 0.25))
    got = {v.hardware_id: v.outcome for v in claim.verdicts(results.load(claim.NAME, tmp_path))}
    assert got == {CPU.hardware_id: Outcome.NOT_REPRODUCED, GPU.hardware_id: Outcome.REPRODUCED}


def test_epoch_times_scale_the_sample_to_the_plan(tmp_path):
    _points_by_plan = {p.config["plan"]: p for p in _points([claim.HEADLINE])}
    _store(tmp_path, CPU, {(claim.HEADLINE, plan): 0.1 for plan in claim.PLAN_NAMES})
    frame = results.load(claim.NAME, tmp_path)
    epochs = claim.epoch_times(frame).set_index("plan")
    for plan, point in _points_by_plan.items():
        assert epochs.epoch_s[plan] == pytest.approx(0.1 * point.config["epoch_batches"])
        assert epochs.ms_per_batch[plan] == pytest.approx(100.0)
    gains = claim.speedups(frame)
    row = gains[(gains.plan == claim.AUTO) & (gains.baseline == claim.NO_BUCKETING)].iloc[0]
    assert row.work_ratio == pytest.approx(_points_by_plan[claim.NO_BUCKETING].config["epoch_padded_steps"]
                                           / _points_by_plan[claim.AUTO].config["epoch_padded_steps"])
    assert row.ratio_lo <= row.ratio <= row.ratio_hi


def test_timing_sample_is_a_stratified_subplan():
    plan = data.plans(2000, 16)[claim.PER_BATCH]
    sample = data.timing_sample(plan, 8)
    assert sample.n_batches == 8
    assert all(w in plan.widths for w in sample.widths)
    # each sampled batch stands for an eighth of the plan: the estimate of the padded work is close
    estimate = sample.padded_steps * plan.n_batches / sample.n_batches
    assert estimate == pytest.approx(plan.padded_steps, rel=0.1)
    whole = data.timing_sample(plan, plan.n_batches + 5)
    assert whole.n_batches == plan.n_batches and whole.padded_steps == plan.padded_steps


def test_global_max_keeps_its_width_in_the_sample():
    plan = data.plans(500, 8)[claim.NO_BUCKETING]
    sample = data.timing_sample(plan, 4)
    assert set(sample.widths) == {int(max(plan.lengths))}


def test_grid_covers_every_plan_and_kernel():
    points = _points()
    assert len(points) == len(claim.PLAN_NAMES) * len(claim.KERNELS)
    assert {p.phase for p in points} == {"train"}
    plan_set = data.plans(SIZES["corpus_size"], SIZES["batch_size"])
    for point in points:
        assert point.config["epoch_batches"] == plan_set[point.config["plan"]].n_batches
        assert point.shape.layers == 1


def test_default_layers_by_device_kind():
    assert claim.CLAIM.defaults["cuda"]["layers"] == claim.SEED_LAYERS
    assert claim.CLAIM.defaults["cpu"]["layers"] == 2
    # the depth is the only default that differs between the device kinds
    assert {k: v for k, v in claim.CLAIM.defaults["cuda"].items() if k != "layers"} == \
        {k: v for k, v in claim.CLAIM.defaults["cpu"].items() if k != "layers"}
    small = dict(batch_size=32, corpus_size=100, sample_batches=4, hidden=64, features=8)
    assert {p.shape.layers for p in claim.CLAIM.points("cuda", **small)} == {claim.SEED_LAYERS}
    assert {p.shape.layers for p in claim.CLAIM.points("cpu", **small)} == {2}
    assert {p.shape.layers for p in claim.CLAIM.points("cuda", **small, layers=3)} == {3}
    # quick shrinks every size to a smoke run, the depth to one layer
    quick = claim.CLAIM.points("cpu", quick=True, **small)
    assert {p.shape.layers for p in quick} == {1}
    assert {p.shape.batch for p in quick} == {8} and {p.shape.hidden for p in quick} == {32}
    assert {p.config["sample_batches"] for p in quick} <= {1, 2}


@pytest.mark.parametrize("bad", [dict(kernels=["torch.fused"]), dict(layers=-1), dict(layers=True),
                                 dict(layers=0),  # no "0: the device's default" sentinel any more
                                 dict(static_boundaries=[20, 10]), dict(static_boundaries=[]),
                                 dict(static_pad_to="bucket"),
                                 dict(boundaries=[10, 20])])  # an unknown name (the old grid's) is refused too
def test_bad_parameters_name_themselves(bad):
    name = next(iter(bad))
    with pytest.raises(ParameterError, match=f"'{name}'"):
        claim.CLAIM.parameters("cpu", **bad)


def test_good_parameters_pass_and_override_the_defaults():
    params = claim.CLAIM.parameters("cpu", static_boundaries=[10, 20], static_pad_to="boundary", layers=3)
    assert params["static_boundaries"] == [10, 20] and params["layers"] == 3
    assert params["kernels"] == list(claim.KERNELS)
    static = [p for p in claim.grid(kind="cpu", quick=True, **params) if p.config["plan"] == "static_buckets"]
    assert static and all(p.config["boundaries"] == [10, 20] for p in static)


@pytest.mark.parametrize("kernel", ["torch.padded", "torch.packed"])
def test_torch_steps_train_and_report_their_kernel(kernel):
    point = next(p for p in _points([kernel]) if p.config["plan"] == claim.PER_BATCH)
    outcome = measure_one(point)
    assert outcome.measurement.n >= 1 and outcome.measurement.median > 0
    onednn = torch.backends.mkldnn.is_available()
    expected = {"torch.padded": "onednn", "torch.packed": "aten-loop"}[kernel] if onednn else "aten-loop"
    assert outcome.observed.kernel == expected
    assert outcome.flops and np.isfinite(outcome.flops)
