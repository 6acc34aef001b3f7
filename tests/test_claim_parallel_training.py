"""Claim 7's grid, its rows and its verdicts on injected result sets: CPU and one-GPU sets are not measured,
a multi-GPU set is decided on the pipeline's tokens/s over DDP's (and over one GPU's on 4 GPUs)."""

from __future__ import annotations

import json

import pytest
import torch

from lstmstudy import contract, hardware, results, sweep
from lstmstudy.claims import parallel_training as claim
from lstmstudy.errors import ParameterError
from lstmstudy.hardware import Fingerprint
from lstmstudy.rules import Outcome
from lstmstudy.timing import Measurement

GPU = Fingerprint(device_kind="cuda", cpu_model="Test CPU 9000", cpu_flags=[], physical_cores=2, threads=2, ram_gb=8.0,
                  gpu_name="Test GPU")
CPU = Fingerprint(device_kind="cpu", cpu_model="Test CPU 9000", cpu_flags=[], physical_cores=2, threads=2, ram_gb=8.0)


def test_the_device_counts_and_a_request_for_more_than_exist(monkeypatch):
    assert claim.device_counts("all", "cpu") == [1, 2]
    monkeypatch.setattr(claim, "visible_devices", lambda kind: 1)
    assert claim.device_counts("all", "cuda") == [1, 2]  # a one-GPU node stores what it lacks
    with pytest.raises(ParameterError, match="asks for 4 devices but 1 GPUs are visible"):
        claim.device_counts([1, 4], "cuda")
    monkeypatch.setattr(claim, "visible_devices", lambda kind: 8)
    assert claim.device_counts("all", "cuda") == [1, 2, 4, 8]


@pytest.mark.parametrize(("overrides", "message"), [
    ({"batch_size": 30}, "must split into 'micro_batches'"),
    ({"plans": ["nowhere"]}, "'plans'"),
    ({"devices": [0]}, "'devices'"),
])
def test_a_bad_grid_is_a_parameter_error(overrides, message):
    with pytest.raises(ParameterError, match=message):
        claim.CLAIM.points("cpu", **overrides)


def test_the_grid_times_one_device_then_both_schemes_per_plan():
    points = claim.CLAIM.points("cpu")
    assert [(p.kernel, p.config["devices"], p.config["plan"]) for p in points[:3]] == [
        ("torch.single", 1, "pad_per_batch"), ("torch.ddp", 2, "pad_per_batch"),
        ("torch.pipeline", 2, "pad_per_batch")]
    assert len(points) == 6 and all(p.shape.layers == 8 for p in points)


def _store(root, fp, seconds: dict[tuple[str, int, str], float], spread: float = 0.01, devices=(1, 2, 4)) -> None:
    """One row per (scheme, devices, plan) of a GPU grid, every round taking about `seconds`; the pipeline's
    rounds drift the other way from the rest, so that the spread reaches the ratios' intervals."""
    points = claim.grid(kind="cuda", quick=False, **claim.CLAIM.parameters("cuda", devices=list(devices)))
    rows = []
    for p in points:
        key = (p.config["scheme"], p.config["devices"], p.config["plan"])
        if key not in seconds:
            continue
        drift = (-1, -0.5, 0, 0.5, 1) if key[0] != "pipeline" else (1, 0.5, 0, -0.5, -1)
        samples = tuple(seconds[key] * (1 + spread * d) for d in drift)
        m = Measurement(samples, warmup=1, threads=1, sync="cuda", round_sizes=(1,) * 5, seed=7)
        rows.append(sweep.make_row(claim.NAME, p, torch.device("cuda"), fp, outcome=contract.PointResult(m)))
    results.append(claim.NAME, fp.hardware_id, rows, root)


@pytest.fixture
def four_gpus(monkeypatch):
    monkeypatch.setattr(claim, "visible_devices", lambda kind: 4)


@pytest.mark.parametrize(("pipeline_s", "expected"), [
    (0.4, Outcome.REPRODUCED),  # 2.5x over DDP, 2.5x over one GPU
    (0.8, Outcome.PARTLY),  # beats DDP (1.25x) but only 1.25x over one GPU
    (1.2, Outcome.NOT_REPRODUCED),
])
def test_a_four_gpu_set_is_decided_on_both_parts(tmp_path, four_gpus, pipeline_s, expected):
    no = claim.NO_BUCKETING
    _store(tmp_path, GPU, {("single", 1, no): 1.0, ("ddp", 4, no): 1.0, ("pipeline", 4, no): pipeline_s,
                           ("pipeline", 4, claim.BUCKETED): pipeline_s / 2})
    [verdict] = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert verdict.outcome == expected and verdict.counts
    assert verdict.ours == pytest.approx(1.0 / pipeline_s, rel=0.02)
    assert "at 4 GPUs" in verdict.ours_text and "with auto buckets" in verdict.ours_text
    table = claim.speedups(results.load(claim.NAME, tmp_path))
    assert set(table.scheme) == {"single", "ddp", "pipeline"}


def test_a_straddling_interval_is_inconclusive(tmp_path, four_gpus):
    no = claim.NO_BUCKETING
    _store(tmp_path, GPU, {("single", 1, no): 1.0, ("ddp", 2, no): 1.0, ("pipeline", 2, no): 0.91}, spread=0.1)
    [verdict] = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert verdict.outcome == Outcome.INCONCLUSIVE and verdict.low < 1.1 < verdict.high


def test_cpu_and_one_gpu_sets_are_not_measured(tmp_path, monkeypatch):
    monkeypatch.setattr(claim, "visible_devices", lambda kind: 1)
    points = claim.grid(kind="cuda", quick=False, **claim.CLAIM.parameters("cuda"))
    skipped = [sweep.make_row(claim.NAME, p, torch.device("cuda"), GPU, status="skipped",
                              error="not measured (needs >= 2 GPUs; this node has 1): 2 were planned")
               for p in points if p.config["devices"] > 1]
    results.append(claim.NAME, GPU.hardware_id, skipped, tmp_path)
    _store(tmp_path, GPU, {("single", 1, claim.NO_BUCKETING): 1.0}, devices=[1])
    cpu_rows = [sweep.make_row(claim.NAME, p, torch.device("cpu"), CPU, status="skipped",
                               error=f"{claim.NEEDS}: a functional test") for p in claim.CLAIM.points("cpu")]
    results.append(claim.NAME, CPU.hardware_id, cpu_rows, tmp_path)
    verdicts = claim.verdicts(results.load(claim.NAME, tmp_path))
    assert [v.outcome for v in verdicts] == [Outcome.NOT_MEASURED] * 2
    assert all(v.ours_text.startswith("not measured (needs >= 2 GPUs") and not v.counts for v in verdicts)
    assert list(claim.functional_tests(results.load(claim.NAME, tmp_path)).status) == ["skipped", "ok", "skipped"]


def test_a_one_gpu_nodes_skipped_rows_are_stored_before_its_run_starts(tmp_path, monkeypatch):
    """A run that hangs until the command is killed must not take the 'needs >= 2 GPUs' rows with it."""
    from lstmstudy.parallel import launch

    monkeypatch.setattr(hardware, "resolve_device", lambda device: torch.device("cuda"))
    monkeypatch.setattr(hardware, "fingerprint", lambda device: GPU)
    monkeypatch.setattr(hardware, "calibrate", lambda device: 1e-3)  # no real GPU to time
    monkeypatch.setattr(hardware, "calibrate_host", lambda device: 5e-6)
    monkeypatch.setattr(hardware, "gpu_state", lambda device: {})
    monkeypatch.setattr(claim, "visible_devices", lambda kind: 1)
    timeouts = []

    def killed(spec, processes, *, timeout_s, **options):
        timeouts.append(timeout_s)
        raise KeyboardInterrupt  # what a kill at the command's limit leaves: nothing after this line runs

    monkeypatch.setattr(launch, "run", killed)
    points = claim.CLAIM.points("cuda")
    with pytest.raises(KeyboardInterrupt):
        claim.measure(points, device="cuda", min_time=0.1, root=tmp_path, deadline=sweep.Deadline.after(300),
                      progress=False)
    stored = results.load(claim.NAME, tmp_path)
    assert len(stored) == sum(p.config["devices"] > 1 for p in points) > 0 and set(stored.status) == {"skipped"}
    assert 290 <= timeouts[0] <= 301  # the workers are stopped by the deadline, not past the command's limit


def test_a_run_the_deadline_cut_short_is_left_for_the_next_call(tmp_path, monkeypatch):
    """Claim 7 runs last in a call: a run stopped by what was left of the deadline is no error of the run."""
    from lstmstudy.parallel import launch

    monkeypatch.setattr(claim, "visible_devices", lambda kind: 1)
    monkeypatch.setattr(hardware, "resolve_device", lambda device: torch.device("cuda"))
    monkeypatch.setattr(hardware, "fingerprint", lambda device: GPU)
    monkeypatch.setattr(hardware, "calibrate", lambda device: 1e-3)  # no real GPU to time
    monkeypatch.setattr(hardware, "calibrate_host", lambda device: 5e-6)
    monkeypatch.setattr(hardware, "gpu_state", lambda device: {})

    def timed_out(spec, processes, *, timeout_s, **options):
        raise launch.TimedOut(f"the run passed its time limit of {timeout_s:.0f} s and was stopped")

    monkeypatch.setattr(launch, "run", timed_out)
    points = claim.CLAIM.points("cuda")
    deadline = sweep.Deadline.after(200)
    deadline.record("energy", 10.0)  # earlier claims of this call used some of it
    [report] = claim.measure(points, device="cuda", min_time=0.1, root=tmp_path, deadline=deadline, progress=False)
    assert report.left == sum(p.config["devices"] == 1 for p in points) > 0 and report.errors == 0
    [report] = claim.measure(points, device="cuda", min_time=0.1, root=tmp_path, deadline=sweep.Deadline.after(200),
                             progress=False)  # a fresh call: its whole deadline was not enough, an error each
    assert report.errors == sum(p.config["devices"] == 1 for p in points) and report.left == 0


def test_measure_goes_through_the_sweep(tmp_path, monkeypatch):
    """The sweep resumes and keeps the deadline for claim 7 too: a call with no time left starts no run, the next
    stores one run's rows, and a rerun launches nothing and stores nothing twice."""
    from lstmstudy.parallel import launch

    monkeypatch.setattr(hardware, "resolve_device", lambda device: torch.device("cuda"))
    monkeypatch.setattr(hardware, "fingerprint", lambda device: GPU)
    monkeypatch.setattr(hardware, "calibrate", lambda device: 1e-3)  # no real GPU to time
    monkeypatch.setattr(hardware, "calibrate_host", lambda device: 5e-6)
    monkeypatch.setattr(hardware, "gpu_state", lambda device: {})
    monkeypatch.setattr(claim, "visible_devices", lambda kind: 2)
    runs = []

    def ran(spec, processes, *, timeout_s, **options):
        runs.append((len(spec["points"]), processes))
        check = {"parameters": 4, "expected_parameters": 4, "loss_rel_diff": 0.0, "grad_rel_diff": 0.0}
        return {"check": {"ddp": check, "pipeline": check}, "world_size": processes, "threads": 1,
                "samples": {p["id"]: [0.1, 0.1] for p in spec["points"]}}

    monkeypatch.setattr(launch, "run", ran)
    points = claim.CLAIM.points("cuda", quick=True)
    spent = sweep.Deadline.after(200)
    spent.record(claim.NAME, 300.0)  # an earlier group of this claim in this call took longer than what is left
    [report] = claim.measure(points, device="cuda", min_time=0.1, quick=True, root=tmp_path, deadline=spent,
                             progress=False)
    assert report.left == len(points) and not runs and not results.set_path(claim.NAME, GPU.hardware_id,
                                                                            tmp_path).exists()
    [report] = claim.measure(points, device="cuda", min_time=0.1, quick=True, root=tmp_path, progress=False)
    assert report.measured == len(points) == 6 and runs == [(6, 2)]
    [report] = claim.measure(points, device="cuda", min_time=0.1, quick=True, root=tmp_path, progress=False)
    assert report.already_stored == len(points) and runs == [(6, 2)]
    stored = results.load(claim.NAME, tmp_path)
    assert len(stored) == len(points) and set(stored.status) == {"ok"}
    detail = json.loads(stored.observed_detail.iloc[0])
    assert detail["processes"] == 2 and "losses and gradients over two SGD steps match" in detail["check"]
