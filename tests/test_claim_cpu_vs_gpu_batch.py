"""Claim 2's verdict logic on synthetic result sets, each built to give one outcome, plus one real torch point."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
import torch

from lstmstudy import contract, kernels, results, sweep, timing
from lstmstudy.claims import cpu_vs_gpu_batch as claim
from lstmstudy.errors import ParameterError
from lstmstudy.hardware import Fingerprint
from lstmstudy.observe import FUSED, Observation
from lstmstudy.rules import SIGN_RULE, Outcome
from lstmstudy.shapes import LSTMShape
from tests.measuring import measure_one

BATCHES = [1, 8, 64, 512]
CPU = Fingerprint(device_kind="cpu", cpu_model="Fake Xeon", cpu_flags=[], physical_cores=2, threads=2, ram_gb=8.0,
                  host="box-a")
GPU = Fingerprint(device_kind="cuda", cpu_model="Fake Xeon", cpu_flags=[], physical_cores=2, threads=2, ram_gb=8.0,
                  gpu_name="Fake GPU", host="box-a")
OTHER_GPU = dataclasses.replace(GPU, host="box-b")  # the same GPU model in another machine


def _samples(ms: float, n: int = 9) -> tuple[float, ...]:
    """`n` samples around `ms` milliseconds (nine spread +-2% by default: tight enough that a 1.5x gap is clear)."""
    return tuple(ms * 1e-3 * (1 + 0.005 * (k - (n - 1) / 2)) for k in range(n))


def store(root, fp: Fingerprint, step_ms: dict[int, float], kernel: str = "torch.autoencoder",
          observed: dict | None = None, predicted: str = "", rounds: int | None = None, seed: int | None = None,
          backend: str | None = None, versions: dict | None = None) -> None:
    """Rows of one model on one set; by default the fused kernel of the device kind, timed in one burst. `rounds`:
    that many rounds of one timing each (`seed` shared by rows timed in the same rounds); `backend`, `versions`:
    what a Keras row records."""
    device = torch.device(fp.device_kind)
    rows = []
    for batch, ms in step_ms.items():
        p = claim.point(kernel, batch, timesteps=32, features=16, seq_len=100)
        m = (timing.Measurement(samples=_samples(ms), warmup=0, threads=2, sync="none") if rounds is None else
             timing.Measurement(samples=_samples(ms, rounds), warmup=0, threads=2, sync="none",
                                round_sizes=(1,) * rounds, seed=seed))
        fused = {"kernel": FUSED[fp.device_kind], "detail": {"aten_ops": 400}}
        seen = Observation(**(observed or fused))
        row = sweep.make_row(claim.NAME, p, device, fp,
                             outcome=contract.PointResult(m, observed=seen, predicted_kernel=predicted))
        rows.append({**row, **({} if backend is None else {"backend": backend}),
                     **({} if versions is None else {"versions": versions})})
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


def test_a_cpu_faster_everywhere_is_no_crossover_not_partly(tmp_path):
    # "partly" means one thing on the page: models that disagree. A CPU ahead at both ends is no crossover in the
    # grid, as a GPU ahead at both ends is
    store(tmp_path, CPU, CPU_MS)
    store(tmp_path, GPU, {1: 6.0, 8: 9.0, 64: 30.0, 512: 120.0})  # the CPU faster at every batch size
    v = only(claim.verdicts(results.load(claim.NAME, tmp_path)))
    assert v.outcome == Outcome.NOT_REPRODUCED and v.ours is None
    assert "no crossover in the grid" in v.ours_text


def test_an_undecided_end_makes_it_inconclusive(tmp_path):
    store(tmp_path, CPU, CPU_MS)
    store(tmp_path, GPU, {1: 6.0, 8: 9.0, 64: 30.0, 512: 80.0})  # CPU faster, then a tie at the largest batch
    data = results.load(claim.NAME, tmp_path)
    assert claim.crossovers(data).iloc[0].outcome == Outcome.INCONCLUSIVE.value
    assert only(claim.verdicts(data)).outcome == Outcome.INCONCLUSIVE
    store(tmp_path, CPU, CPU_MS, kernel="torch.bilstm_imdb")  # beside a model that fails outright, the tie decides
    store(tmp_path, GPU, {1: 1.0, 8: 1.0, 64: 1.0, 512: 2.0}, kernel="torch.bilstm_imdb")  # partly against not
    assert only(claim.verdicts(results.load(claim.NAME, tmp_path))).outcome == Outcome.INCONCLUSIVE


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


# --- issue 44: the devices compared, not two kernels; the host's own CPU; the rule for few timings -----------

KERAS_ON_TORCH = dict(backend="torch", versions={"keras": "3.15.1", "torch": "2.11.0"})


def test_a_keras_pair_that_ran_two_kernels_does_not_decide_the_verdict(tmp_path):
    # the torch model crosses as the claim says; the Keras model, cuDNN on the GPU against its Python loop on the CPU,
    # has the GPU ahead everywhere: were it judged, the pair would be partly
    store(tmp_path, CPU, CPU_MS)
    store(tmp_path, GPU, {1: 6.0, 8: 3.0, 64: 5.0, 512: 8.0})
    store(tmp_path, CPU, {1: 40.0, 8: 40.0, 64: 60.0, 512: 200.0}, kernel="keras.bilstm_imdb",
          observed={"kernel": "python-op-loop", "detail": {"aten_ops": 22351}},
          predicted="python-op-loop,python-op-loop", **KERAS_ON_TORCH)
    store(tmp_path, GPU, {1: 12.0, 8: 11.0, 64: 13.0, 512: 12.0}, kernel="keras.bilstm_imdb",
          observed={"kernel": "cudnn", "detail": {"aten_ops": 637, "gpu_kernels": 117}}, predicted="cudnn,cudnn",
          **KERAS_ON_TORCH)
    data = results.load(claim.NAME, tmp_path)
    cross = claim.crossovers(data).set_index("kernel")
    assert not cross.loc["keras.bilstm_imdb", "same_kernels"] and cross.loc["torch.autoencoder", "same_kernels"]
    assert cross.loc["keras.bilstm_imdb", "outcome"] == Outcome.NOT_REPRODUCED.value  # shown, not judged
    assert cross.loc["keras.bilstm_imdb", "framework_label"] == "Keras 3.15 on its torch backend"
    v = only(claim.verdicts(data))
    assert v.outcome == Outcome.REPRODUCED and v.ours == 64.0  # the torch model's crossover, not the Keras one's
    assert "not a device comparison, what a user of Keras 3.15 on its torch backend meets" in v.ours_text
    assert "cudnn on the GPU, python-op-loop on the CPU, 22,351 ATen ops a CPU step" in v.ours_text
    assert [name for name, _, _ in v.parts] == ["torch autoencoder at batch 1, GPU/CPU",
                                                "torch autoencoder at batch 512, GPU/CPU"]
    # the backend is read off the rows, never assumed
    store(tmp_path / "tf", CPU, CPU_MS, kernel="keras.autoencoder", predicted="framework-loop,framework-loop",
          observed={"kernel": "", "detail": {}}, backend="tensorflow", versions={"keras": "3.14.0"})
    epochs = claim.epoch_times(results.load(claim.NAME, tmp_path / "tf"), 100)
    assert set(epochs.framework_label) == {"Keras 3.14 on its tensorflow backend"}
    # a Keras row that records no backend is named so, never taken for TensorFlow's; a torch row with its release
    store(tmp_path / "none", CPU, CPU_MS, kernel="keras.autoencoder", predicted="framework-loop,framework-loop",
          observed={"kernel": "", "detail": {}}, backend="", versions={"keras": "3.14.0"})
    store(tmp_path / "none", CPU, CPU_MS, versions={"torch": "2.13.0+cpu"})
    epochs = claim.epoch_times(results.load(claim.NAME, tmp_path / "none"), 100)
    assert set(epochs.framework_label) == {"Keras 3.14 (backend not recorded)", "PyTorch 2.13"}


def test_a_keras_pair_of_one_kernel_family_decides_like_torch(tmp_path):
    # Keras's generic loop on both devices (the Q&A's comparison) is the same kernel on each: it compares the devices
    loop = dict(observed={"kernel": "python-op-loop", "detail": {}}, predicted="python-op-loop,python-op-loop",
                **KERAS_ON_TORCH)
    store(tmp_path, CPU, CPU_MS, kernel="keras.autoencoder", **loop)
    store(tmp_path, GPU, {1: 1.0, 8: 1.0, 64: 1.0, 512: 2.0}, kernel="keras.autoencoder", **loop)
    v = only(claim.verdicts(results.load(claim.NAME, tmp_path)))
    assert v.outcome == Outcome.NOT_REPRODUCED and "the devices compared" in v.ours_text
    assert "not a device comparison" not in v.ours_text


def test_no_model_of_one_kernel_family_leaves_the_devices_not_compared(tmp_path):
    store(tmp_path, CPU, CPU_MS, kernel="keras.autoencoder", observed={"kernel": "python-op-loop", "detail": {}},
          predicted="python-op-loop,python-op-loop", **KERAS_ON_TORCH)
    store(tmp_path, GPU, {1: 6.0, 8: 3.0, 64: 5.0, 512: 8.0}, kernel="keras.autoencoder",
          observed={"kernel": "cudnn", "detail": {}}, predicted="python-op-loop,cudnn", **KERAS_ON_TORCH)
    v = only(claim.verdicts(results.load(claim.NAME, tmp_path)))
    assert v.outcome == Outcome.NOT_MEASURED and v.ours is None
    assert v.ours_text.startswith("no model ran one kernel family on both devices")


@pytest.mark.parametrize(("gpu", "cpu", "same"), [
    (("cudnn",), ("onednn",), True), (("miopen",), ("onednn",), True),
    (("python-op-loop", "cudnn"), ("python-op-loop", "python-op-loop"), False), (("cudnn", "cudnn"), ("python-op-loop",
                                                                                                       ), False),
    (("framework-loop",), ("framework-loop",), True), (("framework-loop",), ("python-op-loop",), False),
    (("mixed",), ("mixed",), False), (("",), ("",), False), ((), ("onednn",), False)])
def test_kernel_families(gpu, cpu, same):
    assert claim.same_family(gpu, cpu) is same


def test_an_observation_the_prediction_does_not_name_wins():
    row = pd.Series({"predicted_kernel": "cudnn,cudnn", "observed_kernel": "python-op-loop"})
    assert claim.kernels_run(row) == ("python-op-loop",)
    assert claim.kernels_run(pd.Series({"predicted_kernel": "python-op-loop,cudnn", "observed_kernel": "cudnn"})) == (
        "python-op-loop", "cudnn")
    assert claim.kernels_run(pd.Series({"predicted_kernel": "", "observed_kernel": "onednn"})) == ("onednn",)


def test_each_gpu_set_reads_its_own_hosts_cpu(tmp_path):
    other_cpu = dataclasses.replace(CPU, host="box-b", cpu_model="AMD EPYC")  # sorts first, another machine
    store(tmp_path, other_cpu, {1: 50.0}, observed={"kernel": "onednn", "detail": {"aten_ops": 500}})
    store(tmp_path, CPU, {1: 4.0}, observed={"kernel": "onednn", "detail": {"aten_ops": 400}})
    store(tmp_path, GPU, {1: 2.0}, observed={"kernel": "cudnn", "detail": {"aten_ops": 600, "gpu_kernels": 250}})
    data = results.load(claim.NAME, tmp_path)
    assert sorted(data.hardware_id.unique())[0] == other_cpu.hardware_id
    assert claim.host_cpu(data, GPU.hardware_id) == CPU.hardware_id
    text = claim.pair_floor_text(data)
    assert f"its own host's CPU, {CPU.hardware_id}: autoencoder (onednn LSTM), 4 ms per step" in text
    assert other_cpu.hardware_id not in text and "400 aten ops" in text
    assert claim.cpu_floor_text(data).startswith(f"{other_cpu.hardware_id}: autoencoder 100 us per op")
    lone = claim.epoch_times(data, 100)
    assert claim.cpu_curve_text(lone, other_cpu.hardware_id).startswith(f"on {other_cpu.hardware_id}")
    alone = results.load(claim.NAME, tmp_path, sets="cuda-*")
    assert "no CPU set of its own host" in claim.pair_floor_text(alone)


@pytest.mark.parametrize(("rounds", "gpu_seed", "faster"), [
    (5, 7, "gpu"),     # 5 paired rounds all below 1: 0.5^5 <= 0.05, decided
    (4, 7, "tie"),     # 4 paired rounds: 0.5^4 > 0.05, undecided
    (5, 8, "gpu"),     # 5 rounds each, timed apart: every GPU round beats every CPU round, 1/C(10, 5) <= 0.05
    (2, 8, "tie"),     # 2 rounds each, timed apart: 1/C(4, 2) = 1/6 > 0.05, undecided
])
def test_a_batch_size_of_few_timings_is_decided_only_by_the_sign_or_the_rank_rule(tmp_path, rounds, gpu_seed, faster):
    store(tmp_path, CPU, {1: 2.0, 512: 80.0}, rounds=rounds, seed=7)
    store(tmp_path, GPU, {1: 6.0, 512: 8.0}, rounds=rounds, seed=gpu_seed)
    table = claim.comparisons(results.load(claim.NAME, tmp_path)).set_index("batch")
    assert table.loc[512, "fewest"] == rounds and table.loc[512, "faster"] == faster
    assert ("decided by the rule for few timings" in table.loc[512, "few_words"]) is (faster != "tie")
    v = only(claim.verdicts(results.load(claim.NAME, tmp_path)))
    # the CPU is faster at batch 1 by the same rule: the largest end decides the verdict
    assert v.outcome == (Outcome.REPRODUCED if faster == "gpu" else Outcome.INCONCLUSIVE)
    assert v.fewest_timings == rounds  # either way the verdict rests on the rows of few timings
    assert (f"({rounds} timings: a spread)" in v.parts[-1][0])


def test_few_timings_that_cannot_change_the_verdict_are_not_what_it_rests_on(tmp_path):
    # the GPU ahead at batch 1, on rows of many timings: not reproduced, whatever the few-timing largest end shows
    store(tmp_path, CPU, {1: 2.0}, rounds=9, seed=3)
    store(tmp_path, GPU, {1: 1.0}, rounds=9, seed=4)
    store(tmp_path, CPU, {512: 80.0}, rounds=2, seed=5)  # 2 and 2 rounds timed apart: too few to decide
    store(tmp_path, GPU, {512: 8.0}, rounds=2, seed=6)
    v = only(claim.verdicts(results.load(claim.NAME, tmp_path)))
    assert v.outcome == Outcome.NOT_REPRODUCED and v.fewest_timings is None
    assert "undecided at batch 512 (rows of as few as 2 timings" in v.ours_text


def test_the_rule_states_the_rule_for_few_timings_and_one_meaning_of_partly():
    assert SIGN_RULE in claim.RULE and "partly if some are and some are not (partly means only this)" in claim.RULE
    assert "faster at both ends" not in claim.RULE


def test_the_stored_sets_keras_rows_name_the_backend_their_fingerprint_records():
    data = results.load(claim.NAME)
    stored = results.fingerprints(claim.NAME)
    keras = data[data.kernel.str.startswith("keras.") & (data.status == "ok")]
    checked = 0
    for (hardware_id, fingerprint_id), rows in keras.groupby(["hardware_id", "fingerprint_id"]):
        # a row stored before fingerprint ids: any fingerprint of its set; one before `keras_backend`: not checked
        found = [fp for fp in stored[hardware_id] if fp["id"] == fingerprint_id] or stored[hardware_id]
        recorded = {fp["keras_backend"] for fp in found if "keras_backend" in fp}
        if recorded:
            assert set(rows.backend) <= recorded
            checked += 1
        version = ".".join(json.loads(rows.versions.iloc[0])["keras"].split(".")[:2])
        labels = claim.epoch_times(data[data.index.isin(rows.index)], 100).framework_label
        assert set(labels) == {f"Keras {version} on its {rows.backend.iloc[0]} backend"}
    assert checked and (keras.backend == "torch").any()  # the H100's host ran Keras on its torch backend


def test_the_crossover_view_puts_the_outcome_first_and_prints_no_python(tmp_path):
    store(tmp_path, CPU, CPU_MS)
    store(tmp_path, GPU, {1: 6.0, 8: 3.0, 64: 5.0, 512: 8.0})  # slower, tie, faster, faster: crosses at 64
    store(tmp_path, CPU, {1: 40.0, 8: 40.0, 64: 60.0, 512: 200.0}, kernel="keras.bilstm_imdb",
          observed={"kernel": "python-op-loop", "detail": {"aten_ops": 22351}},
          predicted="python-op-loop,python-op-loop", **KERAS_ON_TORCH)
    store(tmp_path, GPU, {1: 12.0, 8: 11.0, 64: 13.0, 512: 12.0}, kernel="keras.bilstm_imdb",
          observed={"kernel": "cudnn", "detail": {"aten_ops": 637, "gpu_kernels": 117}}, predicted="cudnn,cudnn",
          **KERAS_ON_TORCH)
    store(tmp_path, OTHER_GPU, {1: 6.0, 8: 3.0, 64: 5.0, 512: 8.0})  # another machine's GPU: context only
    crossings = claim.crossovers(results.load(claim.NAME, tmp_path))
    # the compact view holds the same-host pair alone, so it need not name it
    assert list(claim.crossover_view(crossings).columns[:2]) == ["outcome", "model"]
    view = claim.crossover_view(crossings).set_index("model")
    assert len(view) == 2 and list(claim.crossover_view(crossings, full=True).columns[:2]) == [
        "outcome", "pair (GPU vs CPU)"]
    torch, keras = view.loc["PyTorch, autoencoder"], view.loc["Keras 3.15 on its torch backend, bilstm_imdb"]
    assert (torch.outcome, torch.crossover) == (Outcome.REPRODUCED.value, "batch 64")
    assert keras.outcome == "not judged (two kernels)" and keras.crossover == "GPU ahead from batch 1"
    assert torch["GPU/CPU at the smallest batch"].endswith("x at 1")
    full = claim.crossover_view(crossings, full=True)
    assert len(full) == len(crossings) > len(view) and full.outcome.iloc[0] != ""
    cells = " ".join(full.astype(str).to_numpy().ravel())
    assert not any(word in cells for word in ("frozenset", "Outcome.", "<NA>", "nan", "None", "["))
    assert set(full["undecided batches"]) >= {"8"}
