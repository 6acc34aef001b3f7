"""The PyTorch kernels agree before they are compared, and say what actually ran (fastrnns' test.py idea)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from lstmstudy import contract, kernels, results, sweep
from lstmstudy.errors import InvalidShape, Skip, UnknownKernel
from lstmstudy.kernels.built import LSTMWeights
from lstmstudy.observe import classify
from lstmstudy.shapes import LSTMShape
from tests.measuring import QUICK, measure_one

TORCH_KERNELS = ("torch.fused", "torch.native", "torch.cell_loop", "torch.custom_activation", "torch.compiled",
                 "torch.raw", "torch.raw_noinput")
#: The standard kernels that must match torch.fused exactly (raw_noinput is tested on its own shapes).
STANDARD = ("torch.native", "torch.cell_loop", "torch.raw")
SHAPES = {
    "single": LSTMShape(batch=2, timesteps=5, features=3, hidden=4),
    "two-layer-bidirectional": LSTMShape(batch=2, timesteps=4, features=3, hidden=5, layers=2, bidirectional=True),
    "bidirectional-batch1": LSTMShape(batch=1, timesteps=3, features=2, hidden=3, bidirectional=True),
}
ATOL = 1e-5
LOW_PRECISION_ATOL = {"bf16": 5e-2, "fp16": 1e-2}

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible to torch")


def run(name: str, shape: LSTMShape, device: str = "cpu", precision: str = "fp32",
        weights: LSTMWeights | None = None) -> tuple[np.ndarray, list]:
    """Forward output and train-step gradients of one kernel with fixed weights."""
    built = kernels.build(name, shape, device, precision, "train", weights=weights or LSTMWeights.random(shape))
    return built.forward(), built.grads()


def assert_grads_close(got: list, want: list, atol: float) -> None:
    assert len(got) == len(want)
    for layer, (got_layer, want_layer) in enumerate(zip(got, want)):
        assert len(got_layer) == len(want_layer)
        for direction, (g, w) in enumerate(zip(got_layer, want_layer)):
            assert set(g) == {"w_ih", "w_hh", "b_ih", "b_hh"}
            for key in w:
                np.testing.assert_allclose(g[key], w[key], atol=atol, rtol=0,
                                           err_msg=f"layer {layer} direction {direction} {key}")


@pytest.fixture(scope="module")
def fused() -> dict[str, tuple[np.ndarray, list]]:
    """torch.fused's output and gradients per shape: the reference every standard kernel must match."""
    return {key: run("torch.fused", shape) for key, shape in SHAPES.items()}


@pytest.mark.parametrize("shape_key", SHAPES)
@pytest.mark.parametrize("name", STANDARD)
def test_standard_kernels_agree_with_fused(name, shape_key, fused):
    out, grads = run(name, SHAPES[shape_key])
    want_out, want_grads = fused[shape_key]
    assert out.shape == (SHAPES[shape_key].batch, SHAPES[shape_key].timesteps,
                         SHAPES[shape_key].hidden * SHAPES[shape_key].directions)
    np.testing.assert_allclose(out, want_out, atol=ATOL, rtol=0)
    assert_grads_close(grads, want_grads, ATOL)


@pytest.mark.parametrize("shape_key", ["single", "bidirectional-batch1"])
def test_raw_noinput_computes_the_same_recurrence(shape_key, fused):
    """With the input projection precomputed, the recurrence gives the full LSTM's outputs and gradients."""
    out, grads = run("torch.raw_noinput", SHAPES[shape_key])
    np.testing.assert_allclose(out, fused[shape_key][0], atol=ATOL, rtol=0)
    assert_grads_close(grads, fused[shape_key][1], ATOL)


def test_raw_noinput_skips_deeper_layers():
    with pytest.raises(Skip, match="layers=2"):
        kernels.build("torch.raw_noinput", SHAPES["two-layer-bidirectional"])


@pytest.mark.parametrize("shape_key", ["single", "two-layer-bidirectional"])
def test_custom_activation_is_a_different_function(shape_key, fused):
    """The LeakyReLU cell must differ from the standard one, or the agreement tests prove nothing."""
    out, grads = run("torch.custom_activation", SHAPES[shape_key])
    assert np.abs(out - fused[shape_key][0]).max() > 1e-2
    assert np.isfinite(out).all()
    assert not kernels.spec("torch.custom_activation").standard


@pytest.mark.slow  # Inductor compiles C++ for the step: ~8 s with a warm cache, ~30 s cold, on 2 cores
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # inductor's import
def test_compiled_agrees_with_custom_activation():
    shape = LSTMShape(batch=2, timesteps=3, features=3, hidden=4)
    weights = LSTMWeights.random(shape, seed=3)
    compiled = kernels.build("torch.compiled", shape, "cpu", weights=weights)
    eager = kernels.build("torch.custom_activation", shape, "cpu", weights=weights)
    np.testing.assert_allclose(compiled.forward(), eager.forward(), atol=ATOL, rtol=0)
    assert compiled.observed_kernel() == "inductor"


@pytest.mark.isa
@pytest.mark.parametrize("phase", ["inference", "train"])
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("name", ["torch.fused", "torch.native", "torch.cell_loop", "torch.raw"])
def test_low_precision_runs_close_to_fp32_or_skips(name, precision, phase):
    shape = SHAPES["two-layer-bidirectional"]
    weights = LSTMWeights.random(shape)
    reference = kernels.build(name, shape, weights=weights).forward()
    if reason := kernels.spec(name).unavailable(torch.device("cpu"), precision):
        with pytest.raises(Skip, match=re.escape(reason)):
            kernels.build(name, shape, "cpu", precision, phase, weights=weights)
        return
    try:
        built = kernels.build(name, shape, "cpu", precision, phase, weights=weights)
    except Skip as exc:  # a configuration the library refuses at run time, e.g. oneDNN fp16 training
        assert str(exc).strip()
        return
    built.step()
    out = built.forward()
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, reference, atol=LOW_PRECISION_ATOL[precision], rtol=0)
    assert np.abs(out - reference).max() > 0, "the low-precision step computed in fp32"
    if phase == "train":
        assert all(np.isfinite(g).all() for layer in built.grads() for d in layer for g in d.values())


@pytest.mark.isa
@pytest.mark.parametrize("phase", ["inference", "train"])
def test_compute_dtype_is_what_the_lstm_output_had(phase):
    """fp32 is float32; bf16 is bfloat16 where oneDNN ran it, float32 where only the matmuls were autocast.

    The fused rows at bf16 exist only where this CPU's oneDNN has a bf16 LSTM (AVX-512); elsewhere they are
    skipped with that reason, never built on ATen's loop."""
    shape = SHAPES["two-layer-bidirectional"]
    assert kernels.build("torch.fused", shape, phase=phase).compute_dtype == "float32"
    for name in ("torch.fused", "torch.raw"):
        if reason := kernels.available("cpu", "bf16")[name]:
            assert "this CPU has no fused bf16 LSTM" in reason
            with pytest.raises(Skip, match=re.escape(reason)):
                kernels.build(name, shape, "cpu", "bf16", phase)
            continue
        built = kernels.build(name, shape, "cpu", "bf16", phase)
        assert built.observed_kernel() == "onednn" and built.compute_dtype == "bfloat16"
    assert kernels.build("torch.raw_noinput", SHAPES["single"], "cpu", "fp16", phase).compute_dtype == "float16"
    # autocast runs the cell loop's matmuls in bf16 but its cell state stays fp32, and the field says so
    assert kernels.build("torch.cell_loop", shape, "cpu", "bf16", phase).compute_dtype == "float32"


@pytest.mark.isa
def test_a_measured_point_passes_the_compute_dtype_on():
    """The recurrence alone computes in bf16 on any CPU (op by op), so the point is measured everywhere."""
    point = contract.Point("torch.raw_noinput", SHAPES["single"], precision="bf16")
    outcome = measure_one(point)
    assert outcome.compute_dtype == "bfloat16"


@pytest.mark.isa
@pytest.mark.parametrize("name", ["torch.fused", "torch.raw"])
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_a_cpu_without_a_fused_16_bit_lstm_skips_the_fused_rows_with_the_reason(monkeypatch, name, precision):
    """As on a CPU without AVX-512, whatever this one has: a skipped row naming the missing ISA, never an error."""
    from lstmstudy.kernels import criteria

    monkeypatch.setattr(criteria, "onednn_dtype_unsupported", lambda dtype: f"{dtype} needs a newer CPU")
    outcome = sweep.measure_group([contract.Point(name, SHAPES["single"], precision)], kernels.prepare,
                                  torch.device("cpu"), QUICK)[0]
    assert isinstance(outcome, Skip)
    assert str(outcome) == (f"{name} at {precision} on cpu: this CPU has no fused {precision} LSTM: "
                            f"torch.{'bfloat16' if precision == 'bf16' else 'float16'} needs a newer CPU")
    assert kernels.available("cpu", precision)[name] and kernels.available("cpu", "fp32")[name] is None


@pytest.mark.isa
def test_a_fused_row_that_ran_the_loop_at_16_bits_on_a_cpu_is_skipped_not_an_error(monkeypatch, tmp_path):
    """oneDNN may still refuse a precision the availability check allowed (fp16 training, or an ISA capped by
    ONEDNN_MAX_CPU_ISA): what ran says so, and the sweep stores a skipped row; at fp32 it stays an error."""
    import dataclasses

    from lstmstudy.observe import Observation

    real_build = kernels.build
    monkeypatch.setattr(kernels, "build", lambda *args, **kwargs: dataclasses.replace(
        real_build(*args, **kwargs), observe=lambda: Observation("aten-loop"), compute_dtype="bfloat16"))
    monkeypatch.setitem(kernels.REGISTRY, "torch.raw_noinput",
                        dataclasses.replace(kernels.spec("torch.raw_noinput"), fused_on=("cpu",)))
    points = [contract.Point("torch.raw_noinput", SHAPES["single"], "bf16"),
              contract.Point("torch.raw_noinput", SHAPES["single"], "fp32")]
    report = sweep.run("demo", points, kernels.prepare, QUICK, device="cpu", root=tmp_path, progress=False)
    rows = {row["precision"]: row for row in results.read_rows(report.path)}
    assert rows["bf16"]["status"] == "skipped"
    assert rows["bf16"]["error"] == ("torch.raw_noinput at bf16: this CPU's oneDNN ran aten-loop, not its fused "
                                     "LSTM, at bf16: no fused baseline here")
    assert rows["fp32"]["status"] == "error" and "NotFused" in rows["fp32"]["error"]


@pytest.mark.isa
def test_available_lists_every_torch_kernel():
    for precision in ("fp32", "bf16", "fp16"):
        listed = kernels.available("cpu", precision)
        assert set(TORCH_KERNELS) <= set(listed)
        assert all(reason is None or (isinstance(reason, str) and reason) for reason in listed.values())
    assert kernels.available("cpu", "fp32")["torch.fused"] is None


def test_unknown_kernel_and_invalid_shape_are_reported():
    with pytest.raises(UnknownKernel, match="torch.fused"):
        kernels.build("torch.no_such_kernel", SHAPES["single"])
    with pytest.raises(InvalidShape):
        kernels.build("torch.fused", LSTMShape(batch=0, timesteps=4, features=3, hidden=4))


def test_observed_kernel_on_cpu_is_what_ran():
    shape = SHAPES["single"]
    expected_fused = "onednn" if torch.backends.mkldnn.is_available() else "aten-loop"
    for phase in ("inference", "train"):
        assert kernels.build("torch.fused", shape, phase=phase).observed_kernel() == expected_fused
        assert kernels.build("torch.native", shape, phase=phase).observed_kernel() == "aten-loop"
    assert kernels.build("torch.cell_loop", shape).observed_kernel() == "python-op-loop"
    assert kernels.build("torch.raw_noinput", shape).observed_kernel() == "python-op-loop"
    assert kernels.build("torch.cell_loop", shape).observe().detail["aten_ops"] > 10


@pytest.mark.parametrize(("ops", "kernel_names", "expected"), [
    ({"aten::lstm", "aten::_cudnn_rnn"}, ["RNN_blockPersist_fp_LSTM<float>", "sm90_xmma_gemm"], "cudnn"),
    ({"aten::lstm", "aten::addmm"}, ["at::native::lstm_cell_forward<float>", "sm90_xmma_gemm"], "aten-loop"),
    ({"cudaGraphLaunch"}, ["LSTM_elementWise_fp<float>"], "cudnn"),  # a graph replay: the kernels tell
    ({"aten::addmm", "aten::sigmoid", "cudaGraphLaunch"}, ["sm90_xmma_gemm"], "python-op-loop"),
    ({"Torch-Compiled Region: 0/0", "aten::mm"}, ["triton_poi_fused_add_0"], "inductor"),
    ({"aten::lstm", "aten::miopen_rnn"}, ["MIOpenRNN"], "miopen"),
    ({"aten::lstm", "aten::mkldnn_rnn_layer"}, [], "onednn"),
    ({"aten::lstm", "aten::linear"}, [], "aten-loop"),
    ({"aten::lstm_cell", "aten::linear"}, [], "python-op-loop"),
])
def test_profile_classification(ops, kernel_names, expected):
    """How profiler names map to the vocabulary, GPU cases included (checked here without a GPU)."""
    assert classify(ops, kernel_names) == expected


def test_vendor_flag_is_scoped_to_the_step():
    """torch.native switches oneDNN off inside its step only: the rest of the process is unaffected."""
    before = torch.backends.mkldnn.enabled
    native = kernels.build("torch.native", SHAPES["single"], phase="train")
    native.step()
    assert native.observed_kernel() == "aten-loop"
    assert torch.backends.mkldnn.enabled == before


def test_inference_step_keeps_no_autograd_graph():
    built = kernels.build("torch.fused", SHAPES["single"])
    out = built.step()
    assert isinstance(out, torch.Tensor) and not out.requires_grad
    assert built.grads is None  # gradients are a train-build feature


def test_kernel_sweep_stores_rows(tmp_path):
    points = [contract.Point(name, SHAPES["single"], phase=phase)
              for name in ("torch.fused", "torch.raw_noinput") for phase in ("inference", "train")]
    points.append(contract.Point("torch.raw_noinput", SHAPES["two-layer-bidirectional"]))
    report = sweep.run("kernels", points, kernels.prepare, QUICK, device="cpu", root=tmp_path, progress=False)
    assert (report.measured, report.skipped, report.errors) == (4, 1, 0)
    rows = results.read_rows(report.path)
    assert {r["observed_kernel"] for r in rows if r["kernel"] == "torch.raw_noinput" and r["status"] == "ok"} == {
        "python-op-loop"}
    assert all(json.loads(r["observed_detail"])["aten_ops"] > 0 for r in rows if r["status"] == "ok")
    assert all(float(r["achieved_flops"]) > 0 for r in rows if r["status"] == "ok")


# --- GPU ------------------------------------------------------------------------------------------

@pytest.mark.gpu
@needs_gpu
def test_gpu_observed_kernels():
    shape = SHAPES["two-layer-bidirectional"]
    assert kernels.build("torch.fused", shape, "cuda").observed_kernel() == "cudnn"
    assert kernels.build("torch.native", shape, "cuda").observed_kernel() == "aten-loop"
    assert kernels.build("torch.fused", shape, "cuda", phase="train").observed_kernel() == "cudnn"


@pytest.mark.gpu
@needs_gpu
def test_gpu_raw_inference_replays_a_cuda_graph():
    shape = SHAPES["single"]
    raw = kernels.build("torch.raw", shape, "cuda")
    assert raw.observed_kernel() == "cudnn" and raw.observe().detail["cuda_graph"] is True
    assert kernels.build("torch.raw_noinput", shape, "cuda").observe().detail["cuda_graph"] is True
    assert "cuda_graph" not in kernels.build("torch.raw", shape, "cuda", phase="train").observe().detail
    np.testing.assert_allclose(raw.forward(), kernels.build("torch.fused", shape, "cpu").forward(), atol=ATOL, rtol=0)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("shape_key", SHAPES)
def test_gpu_kernels_agree_with_cpu(shape_key, fused):
    shape = SHAPES[shape_key]
    names = ["torch.fused", *STANDARD] + (["torch.raw_noinput"] if shape.layers == 1 else [])
    for name in names:
        out, grads = run(name, shape, "cuda")
        np.testing.assert_allclose(out, fused[shape_key][0], atol=ATOL, rtol=0, err_msg=name)
        assert_grads_close(grads, fused[shape_key][1], ATOL)


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_gpu_low_precision(precision):
    shape = SHAPES["two-layer-bidirectional"]
    weights = LSTMWeights.random(shape)
    reference = kernels.build("torch.fused", shape, "cuda", weights=weights).forward()
    checked = []
    for name in ("torch.fused", "torch.native", "torch.cell_loop", "torch.raw"):
        if kernels.spec(name).unavailable(torch.device("cuda"), precision):
            continue
        out = kernels.build(name, shape, "cuda", precision, weights=weights).forward()
        np.testing.assert_allclose(out, reference, atol=LOW_PRECISION_ATOL[precision], rtol=0, err_msg=name)
        checked.append(name)
    assert checked, f"no kernel runs {precision} on this GPU: nothing was checked"


@pytest.mark.gpu
@needs_gpu
@pytest.mark.parametrize("phase", ["inference", "train"])
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_gpu_nn_lstm_computes_in_the_dtype_asked_for(precision, phase):
    """Not autocast's fp16 for bf16: the module is held in the 16-bit type (cuDNN where it takes it)."""
    shape = SHAPES["two-layer-bidirectional"]
    checked = []
    for name in ("torch.fused", "torch.native"):
        if kernels.spec(name).unavailable(torch.device("cuda"), precision):
            continue
        built = kernels.build(name, shape, "cuda", precision, phase)
        assert built.compute_dtype == {"bf16": "bfloat16", "fp16": "float16"}[precision], name
        assert built.observed_kernel() in ("cudnn", "aten-loop")
        checked.append(name)
    assert checked, f"no nn.LSTM kernel runs {precision} on this GPU: nothing was checked"
