"""One observer decides what ran, in one vocabulary; every stored row speaks it; a fused baseline that did
not run fused is an error row, never a ratio."""

from __future__ import annotations

import ast
import dataclasses
import json
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from lstmstudy import check, contract, kernels, observe, results, sweep
from lstmstudy.observe import (
    MEANING,
    OBSERVED,
    PREDICTED,
    Observation,
    classify,
    classify_graph,
    keras_loop,
    time_inside,
    what_ran,
)
from lstmstudy.shapes import LSTMShape
from tests.measuring import QUICK

ROOT = Path(__file__).resolve().parent.parent
SHAPE = LSTMShape(batch=2, timesteps=4, features=3, hidden=8)


def stored_sets() -> list[Path]:
    return sorted((ROOT / "results").glob("*/*.csv"))


@pytest.mark.parametrize("path", stored_sets(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_stored_row_speaks_the_vocabulary(path):
    for row in results.read_rows(path):
        assert row["observed_kernel"] in OBSERVED, row["observed_kernel"]
        assert all(label in PREDICTED for label in row["predicted_kernel"].split(",")), row["predicted_kernel"]
        assert not row["observed_detail"] or isinstance(json.loads(row["observed_detail"]), dict)
        if row["status"] == "ok" and row["framework"] == "torch":
            assert row["observed_kernel"], f"{row['kernel']}: a torch row is observed, not predicted"


def test_an_observation_outside_the_vocabulary_is_refused():
    with pytest.raises(ValueError, match="not in the vocabulary"):
        Observation("generic")
    assert Observation("cudnn", {"cuda_graph": True}).detail_text() == '{"cuda_graph":true}'


@pytest.mark.parametrize(("backend", "unroll", "expected"), [
    ("tensorflow", False, "framework-loop"), ("tensorflow", True, "unrolled"), ("jax", False, "framework-loop"),
    ("torch", False, "python-op-loop"), ("torch", True, "python-op-loop"),
])
def test_a_keras_layers_own_loop_is_named_in_the_vocabulary(backend, unroll, expected):
    assert keras_loop(backend, unroll) == expected in PREDICTED
    assert what_ran("", expected) == f"{expected} (predicted)" and what_ran("onednn", expected) == "onednn"


@pytest.mark.parametrize(("ops", "expected"), [
    ({"CudnnRNNV3", "While"}, "cudnn"), ({"CudnnRNNBackpropV3"}, "cudnn"),
    ({"StatelessWhile", "MatMul"}, "framework-loop"), ({"While"}, "framework-loop"), ({"MatMul", "Tanh"}, "unrolled"),
])
def test_a_traced_graph_is_read_into_the_vocabulary(ops, expected):
    assert classify_graph(ops) == expected in PREDICTED


@pytest.mark.parametrize(("ops", "expected"), [
    ({"aten::lstm"}, "aten-loop"), ({"aten::gru"}, "aten-loop"), ({"aten::rnn_tanh"}, "aten-loop"),
    ({"aten::rnn_relu"}, "aten-loop"), ({"aten::lstm_cell"}, "python-op-loop"), ({"aten::gru_cell"}, "python-op-loop"),
])
def test_atens_own_loop_is_one_label_for_every_rnn_mode(ops, expected):
    assert classify(ops) == expected


def test_there_is_one_vocabulary_and_observe_owns_it():
    """Every label has a reader's meaning, `check` holds the fused kernel to observe's `FUSED` (no copy of its
    own), and the modules that name what ran keep none of the explainer's retired words."""
    assert set(MEANING) == set(OBSERVED) | set(PREDICTED)
    assert set(observe.FUSED.values()) | set(observe.GPU_FUSED) <= set(OBSERVED)
    assert check.FUSED is observe.FUSED
    retired = {"generic", "aten"}
    for module in ("watch.py", "check.py", "kernels/criteria.py", "kernels/keras_kernels.py", "kernels/workloads.py"):
        tree = ast.parse((ROOT / "lstmstudy" / module).read_text())
        words = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)}
        assert not words & retired, f"{module} names what ran outside observe's vocabulary: {words & retired}"


def test_a_fused_baseline_that_did_not_run_fused_is_an_error_row(results_root, monkeypatch):
    real_build = kernels.build

    def build_unfused(*args, **kwargs):
        built = real_build(*args, **kwargs)
        return dataclasses.replace(built, observe=lambda: Observation("aten-loop"))

    monkeypatch.setattr(kernels, "build", build_unfused)
    report = sweep.run("demo", [contract.Point("torch.fused", SHAPE)], kernels.prepare, QUICK, device="cpu",
                       progress=False)
    assert report.errors == 1
    row = results.load("demo").iloc[0]
    assert row.status == "error" and "torch.fused at fp32 ran aten-loop, not onednn" in row.error
    assert row.median_s != row.median_s  # no timing stored: it can never enter a ratio


def test_a_fallback_is_not_held_to_the_fused_kernel():
    native = kernels.check_fused(kernels.build("torch.native", SHAPE))
    assert native.observed_kernel() == "aten-loop"


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this torch build")
def test_time_inside_the_kernel_names_what_ran():
    k = kernels.build("torch.fused", SHAPE)
    samples, seen = time_inside(k.step, k.sync, torch.device("cpu"), sessions=2, work_s=0.005)
    assert len(samples) == 2 and all(s > 0 for s in samples)
    assert seen.kernel == "onednn" and seen.detail["kernels"] == ["aten::mkldnn_rnn_layer"]


def test_whole_models_are_registry_rows_apart_from_the_lstm_layers():
    workloads = set(kernels.names(workloads=True)) - set(kernels.names())
    assert workloads == {"keras.blog_model", "keras.autoencoder", "keras.bilstm_imdb", "torch.autoencoder",
                         "torch.bilstm_imdb", "torch.padded", "torch.packed", "keras.masked", "gemm"}
    assert all(kernels.spec(name).workload and not kernels.spec(name).standard for name in workloads)
    gemm = kernels.build("gemm", LSTMShape(batch=16, timesteps=1, features=16, hidden=16), config={"n": 16})
    gemm.step()
    assert gemm.flops == 2 * 16**3 and gemm.observed_kernel() == "none" and gemm.forward is None


def test_observing_keeps_torch_211s_profiler_warning_off_the_terminal(monkeypatch):
    """torch 2.11 (a GPU node's) warns at every profiler's start that events are cleared between cycles; each
    observation is one cycle, so the warning says nothing and must not reach the terminal or a page."""
    from lstmstudy import observe as observe_module

    started = []

    class Torch211Profile:
        def __init__(self, **options):
            self.profiler = SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: []))

        def __enter__(self):
            started.append(True)
            warnings.warn("Warning: Profiler clears events at the end of each cycle.Only events from the current "
                          "cycle will be reported.To keep events across cycles, set acc_events=True.", UserWarning)
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(torch.profiler, "profile", Torch211Profile)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        observed = observe_module.observe([lambda: None], torch.device("cpu"))
    assert started and observed.kernel == "python-op-loop"


def test_an_epoch_on_a_gpu_is_observed_from_its_cpu_ops_alone(monkeypatch):
    """A whole epoch's label comes from its CPU-side ops (`aten::_cudnn_rnn`), so on a GPU its profiler records
    the CPU alone; one step's observation still records the GPU kernels, which can name cuDNN where no op does.
    Checked on any machine: the profiler and the GPU's sync are stand-ins that record what was asked."""
    from lstmstudy import observe as observe_module

    asked = []
    cudnn_op = SimpleNamespace(name=lambda: "aten::_cudnn_rnn", device_type=lambda: DeviceType.CPU)

    class RecordingProfile:
        def __init__(self, activities):
            asked.append(set(activities))
            self.profiler = SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: [cudnn_op] * 16))

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(torch.profiler, "profile", RecordingProfile)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    gpu = torch.device("cuda")
    assert observe_module.observe_batches(lambda: None, gpu, n_batches=2, layers=8) == Observation("cudnn")
    assert observe_module.observe([lambda: None], gpu).kernel == "cudnn"
    assert asked == [{ProfilerActivity.CPU}, {ProfilerActivity.CPU, ProfilerActivity.CUDA}]
