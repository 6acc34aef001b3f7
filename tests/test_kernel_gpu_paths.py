"""The GPU-only paths of the kernels, checked on a CPU with fakes: they must be right on their first GPU run.

- bf16 under autocast on a GPU: PyTorch's cuDNN RNN wrapper computes in fp16, so the nn.LSTM rows hold
  the compute type there, and a build whose output has another 16-bit dtype is an error, never a bf16 row;
- CUDA-graph capture: the profiler is initialised once before the first capture, and a failed capture
  becomes `GraphCaptureFailed` (an error row) with the capture ended and the stream restored;
- IEEE fp32: `ieee_fp32` sets cuDNN's RNN and cuBLAS's matmul flags for a block and restores them.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import replace

import numpy as np
import pytest
import torch
from torch import nn

from lstmstudy import contract, kernels, results, sweep
from lstmstudy.backends import ieee_fp32
from lstmstudy.errors import Skip
from lstmstudy.kernels import torch_kernels
from lstmstudy.kernels.built import LSTMWeights, PrecisionMismatch, checked_compute_dtype
from lstmstudy.kernels.torch_kernels import GraphCaptureFailed, _backend, _capture
from lstmstudy.shapes import LSTMShape
from tests.measuring import QUICK

pytestmark = pytest.mark.isa  # 16-bit kernels throughout

SHAPE = LSTMShape(batch=2, timesteps=4, features=3, hidden=5, layers=2, bidirectional=True)
FLAGS = ((torch.backends.cudnn.rnn, "fp32_precision"), (torch.backends.cudnn.conv, "fp32_precision"),
         (torch.backends.cuda.matmul, "fp32_precision"))


# --- the dtype the LSTM really computed in ---------------------------------------------------------

@pytest.mark.parametrize(("precision", "dtype", "mixed", "ok"), [
    ("fp32", "float32", False, True),
    ("bf16", "bfloat16", False, True),
    ("fp16", "float16", True, True),
    ("bf16", "float32", True, True),  # an autocast loop whose cell state stays fp32 says so
    ("bf16", "float32", False, False),  # a kernel held in bf16 must output bf16
    ("bf16", "float16", True, False),  # cuDNN under bf16 autocast on a GPU
    ("fp16", "bfloat16", True, False),
    ("fp32", "bfloat16", True, False),
])
def test_checked_compute_dtype(precision, dtype, mixed, ok):
    if ok:
        assert checked_compute_dtype("torch.fused", precision, dtype, mixed) == dtype
    else:
        with pytest.raises(PrecisionMismatch, match=f"^torch.fused at {precision}: the LSTM computed in {dtype}, not "):
            checked_compute_dtype("torch.fused", precision, dtype, mixed)


@pytest.fixture
def fused_runs_bf16(monkeypatch):
    """torch.fused as where bf16 runs fused (a GPU), on any CPU: its availability check says yes."""
    monkeypatch.setattr(torch_kernels, "fused", replace(torch_kernels.fused, unavailable=lambda device, prec: None))


@pytest.fixture
def lstm_outputs_fp16(monkeypatch, fused_runs_bf16):
    """nn.LSTM returns fp16 whatever it was asked: what autocast's cuDNN wrapper does on a GPU under bf16. It
    computes in fp32 first, so that no CPU's oneDNN is asked for a bf16 LSTM it may not have."""
    forward = nn.LSTM.forward

    def fp16_forward(self, *args, **kwargs):
        with torch.autocast("cpu", enabled=False):
            out, state = forward(self, *args, **kwargs)
        return out.half(), state

    monkeypatch.setattr(nn.LSTM, "forward", fp16_forward)


@pytest.mark.parametrize("phase", ["inference", "train"])
def test_bf16_computed_in_fp16_is_an_error(lstm_outputs_fp16, phase):
    with pytest.raises(PrecisionMismatch) as caught:
        kernels.build("torch.fused", SHAPE, "cpu", "bf16", phase)
    assert str(caught.value).splitlines()[0] == "torch.fused at bf16: the LSTM computed in float16, not bfloat16"


def test_the_sweep_stores_the_mismatch_as_an_error_row(lstm_outputs_fp16, tmp_path):
    """Beside a point that computes in bf16 on any CPU (the recurrence alone, op by op), which is stored."""
    one_layer = LSTMShape(batch=2, timesteps=4, features=3, hidden=5)
    points = [contract.Point("torch.fused", SHAPE, "bf16"), contract.Point("torch.raw_noinput", one_layer, "bf16")]
    report = sweep.run("kernels", points, kernels.prepare, QUICK, device="cpu", root=tmp_path, progress=False)
    assert (report.measured, report.errors) == (1, 1)
    rows = {row["kernel"]: row for row in results.read_rows(report.path)}
    assert rows["torch.fused"]["status"] == "error"
    assert rows["torch.fused"]["error"] == ("PrecisionMismatch: torch.fused at bf16: the LSTM computed in float16, "
                                            "not bfloat16")
    assert rows["torch.raw_noinput"]["status"] == "ok" and rows["torch.raw_noinput"]["compute_dtype"] == "bfloat16"


def test_nn_lstm_rows_hold_the_compute_type_on_a_gpu_only():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert torch_kernels._holds_compute_type(cuda, "bf16") and torch_kernels._holds_compute_type(cuda, "fp16")
    assert not torch_kernels._holds_compute_type(cuda, "fp32")
    assert not torch_kernels._holds_compute_type(cpu, "bf16")


@pytest.fixture
def held_like_on_a_gpu(monkeypatch, fused_runs_bf16):
    """The nn.LSTM rows built as on a GPU (module and input in the 16-bit type, no autocast), here on the CPU,
    where PyTorch runs a bf16 module on oneDNN or, on a CPU without AVX-512, on ATen's loop: in bf16 either way."""
    monkeypatch.setattr(torch_kernels, "_holds_compute_type", lambda device, precision: precision != "fp32")


@pytest.mark.parametrize("phase", ["inference", "train"])
@pytest.mark.parametrize("name", ["torch.fused", "torch.native"])
def test_held_nn_lstm_computes_in_bf16(held_like_on_a_gpu, name, phase):
    weights = LSTMWeights.random(SHAPE)
    reference = kernels.build(name, SHAPE, "cpu", weights=weights).forward()
    built = kernels.build(name, SHAPE, "cpu", "bf16", phase, weights=weights)
    assert built.compute_dtype == "bfloat16"
    out = built.forward()
    np.testing.assert_allclose(out, reference, atol=5e-2, rtol=0)
    assert np.abs(out - reference).max() > 0, "the held bf16 module computed in fp32"
    if phase == "train":
        assert all(np.isfinite(g).all() for layer in built.grads() for d in layer for g in d.values())


def test_held_nn_lstm_must_output_its_own_type(held_like_on_a_gpu, monkeypatch):
    """Without autocast, even a float32 output is a mismatch: the row was built to compute in bf16."""
    forward = nn.LSTM.forward
    monkeypatch.setattr(nn.LSTM, "forward", lambda self, x: (forward(self, x)[0].float(), None))
    with pytest.raises(PrecisionMismatch, match="^torch.fused at bf16: the LSTM computed in float32, not bfloat16$"):
        kernels.build("torch.fused", SHAPE, "cpu", "bf16")


def test_the_amp_config_runs_nn_lstm_under_autocast_where_it_would_hold_the_type(held_like_on_a_gpu, monkeypatch):
    """Claim 3's AMP step on a GPU: fp32 weights and input under autocast (the casts inside the step), where a
    16-bit torch.fused row otherwise holds the type."""
    cast, real = [], torch_kernels._autocast
    monkeypatch.setattr(torch_kernels, "_autocast", lambda device, precision: cast.append(precision)
                        or real(device, precision))
    # nn.LSTM with the vendor library off: the same recipe, and ATen's loop runs bf16 on any CPU
    kernels.build("torch.native", SHAPE, "cpu", "bf16")
    held, cast[:] = set(cast), []
    assert held == {"fp32"}  # held in bf16: nothing to cast
    kernels.build("torch.native", SHAPE, "cpu", "bf16", config=contract.AUTOCAST)
    assert set(cast) == {"bf16"}  # fp32 weights and input, autocast to bf16 inside the step


def test_bf16_under_autocast_on_a_gpu_is_skipped_before_anything_runs():
    """Autocast's cuDNN RNN wrapper would compute it in fp16: a skipped row saying so, not a mislabelled one."""
    with pytest.raises(Skip, match="casts to fp16 whatever dtype it is given"):
        torch_kernels._module("torch.fused", SHAPE, torch.device("cuda"), "bf16", "inference",
                              LSTMWeights.random(SHAPE), contract.AUTOCAST, vendor=True)


def test_a_compile_that_fails_under_the_fp32_flags_skips_the_compiled_rows_before_any_trace(monkeypatch):
    """torch 2.9-2.10 failed to compile under the per-backend TF32 flags ("mix of legacy and new APIs"): a one-line
    compile finds it, and the compiled rows are skipped saying so, not timed out one cold compile at a time."""
    def refuses(fn):
        raise RuntimeError("PyTorch is checking whether allow_tf32 is enabled, but a mix of legacy and new APIs")

    monkeypatch.setattr(torch, "compile", refuses)
    torch_kernels._compile_refused.cache_clear()
    try:
        reason = torch_kernels._compile_refused("cpu")
    finally:
        torch_kernels._compile_refused.cache_clear()
    assert reason == ("torch.compile fails here under IEEE fp32 (RuntimeError: PyTorch is checking whether "
                      "allow_tf32 is enabled, but a mix of legacy and new APIs): no compiled row can run")
    monkeypatch.setattr(torch_kernels, "_compile_refused", lambda device: reason)
    monkeypatch.setattr(torch_kernels, "_autocast_unavailable", lambda device, precision: None)
    assert torch_kernels._compile_unavailable(torch.device("cuda"), "fp32") == reason
    assert torch_kernels._compile_unavailable(torch.device("cpu"), "fp32") is None  # no such flags on a CPU


# --- CUDA-graph capture ----------------------------------------------------------------------------

class FakeCuda:
    """torch.cuda's streams and graphs, recording what `_capture` does to them."""

    def __init__(self, monkeypatch, fail_in_run: bool = False, end_fails: bool = False,
                 profiler: bool = True) -> None:
        fake = self

        class Stream:
            def __init__(self, device=None) -> None:
                pass

            def wait_stream(self, other) -> None:
                pass

        self.events: list[str] = []
        self.default, self.capture_stream = Stream(), Stream()
        self.current = self.default
        self.capturing = False
        self.fail_in_run = fail_in_run

        class CUDAGraph:
            def __init__(self) -> None:
                self.end_calls = 0

            def capture_end(self) -> None:
                self.end_calls += 1
                fake.events.append("capture_end")
                if end_fails and self.end_calls == 1:  # like TORCH_CHECK before cudaStreamEndCapture
                    raise RuntimeError("Capture must end on the same stream it began on.")
                fake.capturing = False

        @contextmanager
        def graph(cuda_graph):
            """torch.cuda.graph: on the capture stream while capturing; a failed end leaves that stream current."""
            fake.events.append("capture_begin")
            fake.current, fake.capturing = fake.capture_stream, True
            try:
                yield
            finally:
                cuda_graph.capture_end()
                fake.current = fake.default

        @contextmanager
        def fake_profile(activities, **options):
            fake.events.append(f"profiler({','.join(sorted(a.name for a in activities))})")
            yield

        def set_stream(stream) -> None:
            fake.events.append("set_stream")
            fake.current = stream

        def current_stream(device=None):
            return fake.current

        monkeypatch.setattr(torch.cuda, "Stream", Stream)
        monkeypatch.setattr(torch.cuda, "stream", lambda stream: nullcontext())
        monkeypatch.setattr(torch.cuda, "current_stream", current_stream)
        monkeypatch.setattr(torch.cuda, "CUDAGraph", CUDAGraph)
        monkeypatch.setattr(torch.cuda, "graph", graph)
        monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: fake.capturing)
        monkeypatch.setattr(torch.cuda, "set_stream", set_stream)
        if profiler:  # else the real profiler stays, for the kernels a test also builds
            monkeypatch.setattr(torch_kernels, "profile", fake_profile)

    def run(self) -> torch.Tensor:
        self.events.append("run (capturing)" if self.capturing else "run")
        if self.capturing and self.fail_in_run:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing\nCUDA kernel errors ...")
        return torch.zeros(2)


@pytest.fixture
def fresh_profiler_init():
    """`_capture` initialises the profiler once per process: forget it around each test that fakes it."""
    torch_kernels._profiler_ready_for_graphs.cache_clear()
    yield
    torch_kernels._profiler_ready_for_graphs.cache_clear()


def test_profiler_is_initialised_once_before_the_first_capture(monkeypatch, fresh_profiler_init):
    cuda = FakeCuda(monkeypatch)
    graph, out = _capture("torch.raw", cuda.run, torch.device("cuda"))
    assert isinstance(graph, torch.cuda.CUDAGraph) and torch.equal(out, torch.zeros(2))
    _capture("torch.raw", cuda.run, torch.device("cuda"))
    capture = ["run", "run", "run", "capture_begin", "run (capturing)", "capture_end"]
    assert cuda.events == ["profiler(CPU,CUDA)", *capture, *capture]


@pytest.mark.parametrize("end_fails", [False, True], ids=["capture-ended", "capture-left-open"])
def test_a_failed_capture_is_a_clear_error_with_the_capture_ended(monkeypatch, fresh_profiler_init, end_fails):
    cuda = FakeCuda(monkeypatch, fail_in_run=True, end_fails=end_fails)
    with pytest.raises(GraphCaptureFailed) as caught:
        _capture("torch.raw_noinput", cuda.run, torch.device("cuda"))
    assert isinstance(caught.value, RuntimeError)
    assert str(caught.value) == ("torch.raw_noinput: capturing its CUDA graph failed (RuntimeError: CUDA error: "
                                 "operation not permitted when stream is capturing)")
    assert not cuda.capturing and cuda.current is cuda.default
    assert cuda.events[-1] == "set_stream"
    assert cuda.events.count("capture_end") == (2 if end_fails else 1)


def test_the_sweep_stores_a_failed_capture_and_goes_on(monkeypatch, tmp_path):
    cuda = FakeCuda(monkeypatch, fail_in_run=True, end_fails=True, profiler=False)
    monkeypatch.setattr(torch_kernels, "_profiler_ready_for_graphs", lambda: None)

    def prepare(point, device):
        if point.kernel == "torch.raw":  # what _assemble does for GPU inference
            _capture(point.kernel, cuda.run, torch.device("cuda"))
        return kernels.prepare(point, device)

    points = [contract.Point("torch.raw", SHAPE), contract.Point("torch.fused", SHAPE)]
    report = sweep.run("kernels", points, prepare, QUICK, device="cpu", root=tmp_path, progress=False)
    assert (report.measured, report.errors) == (1, 1)
    rows = {row["kernel"]: row for row in results.read_rows(report.path)}
    assert rows["torch.raw"]["error"].startswith("GraphCaptureFailed: torch.raw: capturing its CUDA graph failed")
    assert rows["torch.fused"]["status"] == "ok"


# --- IEEE fp32 -------------------------------------------------------------------------------------

@pytest.fixture
def tf32_flags():
    """The flags at "tf32", cuDNN's RNN default, then restored (torch's flag objects defeat monkeypatch)."""
    before = [getattr(owner, attr) for owner, attr in FLAGS]
    for owner, attr in FLAGS:
        setattr(owner, attr, "tf32")
    yield
    for (owner, attr), value in zip(FLAGS, before):
        setattr(owner, attr, value)


@pytest.mark.parametrize("device", [torch.device("cuda"), "cuda:0"])
def test_ieee_fp32_pins_the_gpu_flags_and_restores_them(tf32_flags, device):
    """Setting these flags needs no GPU, so the GPU path itself runs here."""
    with ieee_fp32(device):
        assert [getattr(owner, attr) for owner, attr in FLAGS] == ["ieee"] * 3
    assert [getattr(owner, attr) for owner, attr in FLAGS] == ["tf32"] * 3
    with pytest.raises(ValueError), ieee_fp32(device):
        raise ValueError("a failing step")
    assert [getattr(owner, attr) for owner, attr in FLAGS] == ["tf32"] * 3


def test_ieee_fp32_leaves_the_flags_alone_on_a_cpu(tf32_flags):
    with ieee_fp32(torch.device("cpu")):
        assert [getattr(owner, attr) for owner, attr in FLAGS] == ["tf32"] * 3


def test_every_torch_step_runs_under_ieee_fp32(tf32_flags):
    with _backend(torch.device("cuda"), vendor=None):
        assert [getattr(owner, attr) for owner, attr in FLAGS] == ["ieee"] * 3
    assert [getattr(owner, attr) for owner, attr in FLAGS] == ["tf32"] * 3
