"""Claim 2's verdict logic on synthetic result sets, each built to give one outcome, plus one real torch point."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch

from lstmstudy import contract, kernels, results, sweep, timing
from lstmstudy.claims import cpu_vs_gpu_batch as claim
from lstmstudy.errors import ParameterError
from lstmstudy.hardware import Fingerprint
from lstmstudy.observe import Observation
from lstmstudy.rules import Outcome
from lstmstudy.shapes import LSTMShape
from tests.measuring import measure_one

BATCHES = [1, 8, 64, 512]
CPU = Fingerprint(device_kind="cpu", cpu_model="Fake Xeon", cpu_flags=[], physical_cores=2, threads=2, ram_gb=8.0,
                  host="box-a")
GPU = Fingerprint(device_kind="cuda", cpu_model="Fake Xeon", cpu_flags=[], physical_cores=2, threads=2, ram_gb=8.0,
                  gpu_name="Fake GPU", host="box-a")
OTHER_GPU = dataclasses.replace(GPU, host="box-b")  # the same GPU model in another machine


def _samples(ms: float) -> tuple[float, ...]:
    """Nine samples around `ms` milliseconds, spread +-2%: tight enough that a 1.5x gap is clear."""
    return tuple(ms * 1e-3 * (1 + 0.005 * k) for k in range(-4, 5))


def store(root, fp: Fingerprint, step_ms: dict[int, float], kernel: str = "torch.autoencoder",
          observed: dict | None = None) -> None:
    device = torch.device(fp.device_kind)
    rows = []
    for batch, ms in step_ms.items():
        p = claim.point(kernel, batch, timesteps=32, features=16, seq_len=100)
        m = timing.Measurement(samples=_samples(ms), warmup=0, threads=2, sync="none")
        seen = Observation(**(observed or {"kernel": "onednn", "detail": {"aten_ops": 400}}))
        rows.append(sweep.make_row(claim.NAME, p, device, fp, outcome=contract.PointResult(m, observed=seen)))
    results.record_fingerprint(claim.NAME, fp.as_dict(), root)  # its host pairs a GPU set with its CPU set
    results.append(claim.NAME, fp.hardware_id, rows, root)


CPU_MS = {1: 2.0, 8: 3.0, 64: 10.0, 512: 80.0}


def only(verdicts):
    assert len(verdicts) == 1
    return verdicts[0]


def test_crossover_inside_the_grid_is_reproduced_with_its_uncertainty(tmp_path):
    store(tmp_path, CPU, CPU_MS)
    store(tmp_path, GPU, {1: 6.0, 8: 3.0, 64: 5.0, 512: 8.0})  # slower, tie, faster, faster
    data = results.load(claim.NAME, tmp_path)
    cross = claim.crossovers(data).iloc[0]
    assert cross.outcome == Outcome.REPRODUCED.value
    assert cross.crossover == 64 and cross.cpu_clearly_up_to == 1 and cross.gpu_clearly_from == 64
    assert cross.undecided == [8]
    v = only(claim.verdicts(data))
    assert v.outcome == Outcome.REPRODUCED and v.ours == 64.0
    assert v.hardware_id == f"{GPU.hardware_id} vs {CPU.hardware_id}" and v.hardware_id.startswith("cuda-")
    assert "crossover at batch 64" in v.ours_text


def test_only_one_end_holding_is_partly(tmp_path):
    store(tmp_path, CPU, CPU_MS)
    store(tmp_path, GPU, {1: 6.0, 8: 9.0, 64: 30.0, 512: 120.0})  # the CPU faster at every batch size
    assert only(claim.verdicts(results.load(claim.NAME, tmp_path))).outcome == Outcome.PARTLY


def test_an_undecided_end_makes_it_inconclusive(tmp_path):
    store(tmp_path, CPU, CPU_MS)
    store(tmp_path, GPU, {1: 6.0, 8: 9.0, 64: 30.0, 512: 80.0})  # CPU faster, then a tie at the largest batch
    data = results.load(claim.NAME, tmp_path)
    assert claim.crossovers(data).iloc[0].outcome == Outcome.INCONCLUSIVE.value
    assert only(claim.verdicts(data)).outcome == Outcome.INCONCLUSIVE
    store(tmp_path, CPU, CPU_MS, kernel="torch.bilstm_imdb")  # a model that fails outright: partly, whatever
    store(tmp_path, GPU, {1: 1.0, 8: 1.0, 64: 1.0, 512: 2.0}, kernel="torch.bilstm_imdb")  # the tie turns out
    assert only(claim.verdicts(results.load(claim.NAME, tmp_path))).outcome == Outcome.PARTLY


def test_a_gpu_faster_everywhere_is_not_reproduced(tmp_path):
    store(tmp_path, CPU, CPU_MS)
    store(tmp_path, GPU, {1: 1.0, 8: 1.0, 64: 1.0, 512: 2.0})
    data = results.load(claim.NAME, tmp_path)
    v = only(claim.verdicts(data))
    assert v.outcome == Outcome.NOT_REPRODUCED and v.ours == 1.0
    assert "GPU ahead from the smallest batch" in v.ours_text


def test_a_gpu_ahead_at_both_ends_is_no_crossover_even_if_the_cpu_wins_between(tmp_path):
    store(tmp_path, CPU, CPU_MS)
    store(tmp_path, GPU, {1: 1.0, 8: 9.0, 64: 30.0, 512: 8.0})  # GPU, CPU, CPU, GPU: the GPU wins both ends
    assert only(claim.verdicts(results.load(claim.NAME, tmp_path))).outcome == Outcome.NOT_REPRODUCED


def test_a_pair_with_a_set_timed_in_one_burst_gets_no_verdict(tmp_path):
    store(tmp_path, CPU, CPU_MS)  # these rows carry no rounds: timed as the sets before interleaved rounds
    store(tmp_path, GPU, {1: 6.0, 8: 3.0, 64: 5.0, 512: 8.0})
    data = results.load(claim.NAME, tmp_path)
    assert only(claim.verdicts(data)).outcome == Outcome.REPRODUCED
    judged = only(claim.CLAIM.judge(data))
    assert judged.outcome == Outcome.NOT_ASSESSED and not judged.counts and judged.hardware_id.startswith("cuda-")


def test_models_that_disagree_make_the_pair_partly(tmp_path):
    store(tmp_path, CPU, CPU_MS)
    store(tmp_path, GPU, {1: 6.0, 8: 3.0, 64: 5.0, 512: 8.0})
    store(tmp_path, CPU, CPU_MS, kernel="torch.bilstm_imdb")
    store(tmp_path, GPU, {1: 1.0, 8: 1.0, 64: 1.0, 512: 2.0}, kernel="torch.bilstm_imdb")
    data = results.load(claim.NAME, tmp_path)
    assert sorted(claim.crossovers(data).outcome) == [Outcome.NOT_REPRODUCED.value, Outcome.REPRODUCED.value]
    assert only(claim.verdicts(data)).outcome == Outcome.PARTLY


def test_a_lone_cpu_set_is_not_measured_but_keeps_its_curve(tmp_path):
    store(tmp_path, CPU, CPU_MS)
    data = results.load(claim.NAME, tmp_path)
    v = only(claim.verdicts(data))
    assert v.outcome == Outcome.NOT_MEASURED and v.ours is None and v.hardware_id == CPU.hardware_id
    assert claim.crossovers(data).empty and claim.comparisons(data).empty
    epochs = claim.epoch_times(data, dataset_size=25_000).set_index("batch")
    assert epochs.loc[8, "epoch_s"] == pytest.approx(25_000 / 8 * 3.0e-3)
    assert epochs.loc[8, "epoch_lo_s"] <= epochs.loc[8, "epoch_s"] <= epochs.loc[8, "epoch_hi_s"]
    assert claim.cpu_curve_text(epochs.reset_index()).startswith(f"on {CPU.hardware_id}")


def test_only_batch_sizes_measured_on_both_sides_are_compared(tmp_path):
    store(tmp_path, CPU, {1: 2.0, 8: 3.0})
    store(tmp_path, GPU, {1: 6.0, 8: 1.0, 4096: 2.0})
    table = claim.comparisons(results.load(claim.NAME, tmp_path))
    assert table.batch.tolist() == [1, 8] and table.faster.tolist() == ["cpu", "gpu"]


def test_the_latency_floor_divides_the_step_by_the_work_items(tmp_path):
    store(tmp_path, CPU, {1: 4.0, 8: 5.0})
    store(tmp_path, GPU, {1: 2.0}, observed={"kernel": "cudnn", "detail": {"aten_ops": 600, "gpu_kernels": 250}})
    floor = claim.latency_floor(results.load(claim.NAME, tmp_path)).set_index("device_kind")
    assert floor.loc["cpu", "batch"] == 1 and floor.loc["cpu", "us_per_op"] == pytest.approx(4000 / 400)
    assert floor.loc["cuda", "us_per_op"] == pytest.approx(2000 / 250)
    assert floor.loc["cuda", "ops_per_timestep"] == pytest.approx(250 / 32)


def test_no_results_give_no_verdicts(tmp_path):
    empty = results.load(claim.NAME, tmp_path)
    assert claim.verdicts(empty) == [] and claim.latency_floor(empty).empty and claim.epoch_times(empty, 10).empty


def test_the_quick_grid_is_small_and_every_point_is_a_training_step():
    points = claim.grid(kind="cpu", quick=True, batches=BATCHES, workloads=list(claim.WORKLOADS),
                        frameworks=list(claim.FRAMEWORKS), timesteps=32, features=16, seq_len=100)
    assert {p.shape.batch for p in points} == {1, 8} and len(points) == 8
    assert all(p.phase == "train" for p in points)
    full = claim.grid(kind="cpu", quick=False, batches=BATCHES, workloads=["bilstm_imdb"], frameworks=["torch"],
                      timesteps=32, features=16, seq_len=100)
    assert [p.shape.batch for p in full] == BATCHES and all(p.shape.bidirectional for p in full)
    # the same points on either device kind; `also_cpu` is a measuring option, not part of any point
    on_gpu = claim.grid(kind="cuda", quick=False, batches=BATCHES, workloads=["bilstm_imdb"], frameworks=["torch"],
                        timesteps=32, features=16, seq_len=100)
    assert [p.key() for p in on_gpu] == [p.key() for p in full]


def test_also_cpu_reaches_measure_and_can_be_turned_off(monkeypatch):
    seen = {}
    monkeypatch.setattr(claim.hardware, "resolve_device", lambda device: torch.device("cuda", 0))
    spy = dataclasses.replace(claim.CLAIM, measure=lambda points, **options: seen.update(options) or [])
    spy.run("cuda", quick=True)
    assert seen["also_cpu"] is True
    spy.run("cuda", quick=True, also_cpu=False)
    assert seen["also_cpu"] is False

def test_the_default_grids_per_device_kind():
    cpu, cuda = claim.CLAIM.defaults["cpu"], claim.CLAIM.defaults["cuda"]
    assert cpu["batches"] == BATCHES and cuda["batches"] == [*BATCHES, 4096]
    assert cpu["also_cpu"] is False and cuda["also_cpu"] is True  # a GPU run also measures its host's CPU
    assert len(claim.CLAIM.points("cpu")) == len(claim.KERNELS) * len(BATCHES)
    assert {p.shape.batch for p in claim.CLAIM.points("cuda", quick=True)} == {1, 8}


@pytest.mark.parametrize("bad", [dict(batches=[0, 8]), dict(batches=[]), dict(workloads=["mnist"]),
                                 dict(frameworks=["jax"]), dict(also_cpu="yes"), dict(seq_len=0),
                                 dict(dataset_size=25_000)])  # a page parameter, not a grid one
def test_bad_parameters_name_themselves(bad):
    name = next(iter(bad))
    with pytest.raises(ParameterError, match=f"'{name}'"):
        claim.CLAIM.parameters("cpu", **bad)


def test_every_point_is_a_registered_workload():
    points = claim.CLAIM.points("cuda")
    assert {p.kernel for p in points} == set(claim.KERNELS)
    assert all(kernels.spec(p.kernel).workload for p in points)


@pytest.mark.parametrize("kernel", ["torch.autoencoder", "torch.bilstm_imdb"])
def test_a_real_torch_training_step_is_timed_and_its_ops_counted(kernel):
    p = claim.point(kernel, 2, timesteps=4, features=3, seq_len=5)
    outcome = measure_one(p)
    assert len(outcome.measurement.round_sizes) == 2 and outcome.flops > 0
    assert outcome.observed.detail["aten_ops"] > 10 and "gpu_kernels" not in outcome.observed.detail
    assert outcome.observed.kernel in {"onednn", "aten-loop"}


def test_the_torch_step_is_an_adam_update(monkeypatch):
    steps = []
    real_step = torch.optim.Adam.step
    monkeypatch.setattr(torch.optim.Adam, "step", lambda self, *a, **k: steps.append(1) or real_step(self, *a, **k))
    p = claim.point("torch.autoencoder", 2, timesteps=4, features=3, seq_len=5)
    k = kernels.build(p.kernel, p.shape, "cpu", phase="train", config=p.config)
    k.step()
    k.step()
    # its FLOPs count both LSTM layers, the second one narrower than the point's shape says
    second = LSTMShape(batch=2, timesteps=4, features=p.shape.hidden, hidden=int(p.config["hidden2"]))
    assert len(steps) == 2 and k.flops == pytest.approx(
        LSTMShape(batch=2, timesteps=4, features=3, hidden=p.shape.hidden).flops("train") + second.flops("train"))


def test_epoch_table_has_one_column_per_batch(tmp_path):
    store(tmp_path, CPU, CPU_MS)
    table = claim.epoch_table(results.load(claim.NAME, tmp_path), dataset_size=1000)
    assert list(table.columns[-4:]) == [f"batch {b} (s)" for b in BATCHES]
    assert isinstance(table, pd.DataFrame) and len(table) == 1


def test_only_a_gpu_and_the_cpu_of_its_own_host_make_a_verdict(tmp_path):
    store(tmp_path, CPU, CPU_MS)
    store(tmp_path, OTHER_GPU, {1: 6.0, 8: 3.0, 64: 5.0, 512: 8.0})
    data = results.load(claim.NAME, tmp_path)
    assert claim.pairs(data) == [] and claim.pairs(data, same_host=False) == [(CPU.hardware_id, OTHER_GPU.hardware_id)]
    context = claim.comparisons(data)
    assert not context.empty and not context.same_host.any() and context.pair.str.endswith("(two hosts: context)").all()
    found = claim.verdicts(data)
    assert {v.outcome for v in found} == {Outcome.NOT_MEASURED}
    assert all("of the same host" in v.ours_text for v in found)
    store(tmp_path, GPU, {1: 6.0, 8: 3.0, 64: 5.0, 512: 8.0})
    paired = [v for v in claim.verdicts(results.load(claim.NAME, tmp_path)) if v.outcome != Outcome.NOT_MEASURED]
    assert [v.hardware_id for v in paired] == [f"{GPU.hardware_id} vs {CPU.hardware_id}"]


def test_every_way_the_ties_can_go_is_counted(tmp_path):
    # a tie at the smallest batch, the GPU faster above: the tie decides between reproduced and "GPU faster
    # everywhere" (not reproduced), never partly; beside a model that is not reproduced, the pair is partly
    # or not reproduced, so it is inconclusive
    store(tmp_path, CPU, CPU_MS)
    store(tmp_path, GPU, {1: 2.0, 8: 1.0, 64: 1.0, 512: 2.0})
    store(tmp_path, CPU, CPU_MS, kernel="torch.bilstm_imdb")
    store(tmp_path, GPU, {1: 1.0, 8: 1.0, 64: 1.0, 512: 2.0}, kernel="torch.bilstm_imdb")
    data = results.load(claim.NAME, tmp_path)
    tied = claim.crossovers(data).set_index("kernel").loc["torch.autoencoder"]
    assert tied.possible == {Outcome.REPRODUCED, Outcome.NOT_REPRODUCED} and tied.outcome == "inconclusive"
    assert only(claim.verdicts(data)).outcome == Outcome.INCONCLUSIVE
