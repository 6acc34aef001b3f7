"""Claim 4 against DeepBench's method: the queued clock on a fake clock, settings held around a burst, the loop
baseline and its C++ harness (each failure one clear line), the protocol's rows, and the verdict's choice of the
queued rows (or its wait for them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from test_claim_frameworks_vs_baseline import GPU, claim_verdict, frame, rows

from lstmstudy import contract, kernels, native, results, timing
from lstmstudy.claims import frameworks_vs_baseline as claim
from lstmstudy.errors import Skip
from lstmstudy.kernels import loop_baseline, torch_kernels
from lstmstudy.kernels.built import Built, LSTMWeights
from lstmstudy.protocols import in_kernel
from lstmstudy.rules import Outcome
from lstmstudy.shapes import LSTMShape

ROOT = Path(__file__).resolve().parent.parent
SHAPE = LSTMShape(batch=2, timesteps=5, features=3, hidden=4)


class FakeClock:
    """A host clock that moves only when the fake work says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# --- the queued clock ---------------------------------------------------------------------------------------------

def test_a_queued_sample_is_its_calls_time_divided_by_its_calls():
    """DeepBench's arithmetic: 4 calls of 1 s queued, one sync of 0.5 s, divided by 4 is 1.125 s a call; one call a
    sample pays the sync each time, 1.5 s. A warm-up is one whole queue."""
    clock, called = FakeClock(), []

    def step() -> None:
        called.append(1)
        clock.advance(1.0)

    def sync() -> None:
        clock.advance(0.5)

    options = dict(sync=sync, warmup=1, min_samples=3, max_samples=3, min_time=0, max_time=100, clock=clock)
    queued = timing.measure(timing.Queued(step, 4), **options)
    assert queued.samples == (1.125,) * 3 and queued.calls == 4 and len(called) == 4 * (1 + 3)
    per_call = timing.measure(step, **options)
    assert per_call.samples == (1.5,) * 3 and per_call.calls == 1


def test_a_step_with_its_own_loop_queues_the_calls_itself():
    """The C++ harness queues N calls in one call of its own (`repeat`), as DeepBench's loop does."""
    clock, asked = FakeClock(), []

    class Loop:
        def __call__(self) -> None:
            self.repeat(1)

        def repeat(self, calls: int) -> None:
            asked.append(calls)
            clock.advance(0.25 * calls)

    m = timing.measure(timing.Queued(Loop(), 100), warmup=2, min_samples=2, max_samples=2, min_time=0, max_time=99,
                       clock=clock)
    assert asked == [100] * 4 and m.samples == (0.25, 0.25)


def test_settings_are_held_around_a_burst_not_switched_in_each_call():
    entered, calls = [], []

    @contextmanager
    def hold():
        entered.append(1)
        yield

    step = timing.HeldStep(lambda: calls.append(1), hold)
    timing.measure(step, warmup=2, min_samples=10, max_samples=10, min_time=0)
    assert len(entered) == 1 and len(calls) == 12
    timing.measure(timing.Queued(step, 5), warmup=1, min_samples=3, max_samples=3, min_time=0)
    assert len(entered) == 2 and len(calls) == 12 + 5 * 4
    step()  # called on its own, a step still sets its settings
    assert len(entered) == 3


def test_torch_fused_switches_its_flags_once_per_burst(monkeypatch):
    """The study's cuDNN/oneDNN switch and precision flags (`torch_kernels._backend`) leave the timed call: entered
    once around a burst of ten, where every call entered them before; what runs is unchanged."""
    entries = []
    backend = torch_kernels._backend

    @contextmanager
    def counted(*args, **kwargs):
        entries.append(1)
        with backend(*args, **kwargs):
            yield

    monkeypatch.setattr(torch_kernels, "_backend", counted)
    k = kernels.build("torch.fused", SHAPE)
    reference = k.forward()
    entries.clear()
    timing.measure(k.step, warmup=2, min_samples=10, max_samples=10, min_time=0)
    assert entries == [1] and isinstance(k.step, timing.HeldStep)
    np.testing.assert_array_equal(k.forward(), reference)


def test_the_queue_is_100_calls_fewer_for_a_long_step_never_fewer_than_2():
    assert timing.queue_length(50e-6) == 100 and timing.queue_length(1e-4) == 100
    assert timing.queue_length(1e-3) == 10 and timing.queue_length(2.5e-3) == 4
    assert timing.queue_length(0.2) == 2 and timing.queue_length(0.0) == 100
    with pytest.raises(ValueError, match="at least one call"):
        timing.Queued(lambda: None, 0)


def test_interleaved_rounds_keep_each_steps_clock():
    work = lambda: sum(range(200))  # noqa: E731
    got = timing.interleave({"queued": (timing.Queued(work, 7), None), "per call": (work, None)},
                            timing.plan(0.01, quick=True), seed=1)
    assert got["queued"].calls == 7 and got["per call"].calls == 1
    assert got["queued"].round_sizes and got["queued"].seed == got["per call"].seed == 1


# --- the verdict decides on the queued rows -----------------------------------------------------------------------

def two_clocks(per_call_fused: float, queued_fused: float | None, **options) -> list[dict]:
    """Per call: torch.raw at 1 and torch.fused at `per_call_fused`; queued: cudnn.loop at 1 and torch.fused at
    `queued_fused` (none where None); Keras's modes per call."""
    out = rows({("torch.raw", "fp32"): 1.0, ("torch.fused", "fp32"): per_call_fused, ("keras.impl1", "fp32"): 4.0,
                ("keras.impl2", "fp32"): 3.0}, **options)
    if queued_fused is not None:
        out += rows({(claim.LOOP, "fp32"): 1.0, ("torch.fused", "fp32"): queued_fused}, config=claim.QUEUED_TEXT,
                    **options)
    return out


@pytest.mark.parametrize("kind", ["cuda", "cpu"])
def test_the_verdict_decides_on_the_queued_rows_over_the_per_call_ones(kind):
    hw = f"{'cuda' if kind == 'cuda' else 'cpu'}-both"
    verdict = claim_verdict(frame(two_clocks(3.0, 1.5, hardware_id=hw, kind=kind, backend="torch")), hw)
    assert verdict.outcome == Outcome.REPRODUCED and verdict.ours == pytest.approx(1.5)  # not 3.0, per call
    assert "cudnn.loop's time, both timed DeepBench's way" in verdict.ours_text


def test_a_cpu_set_of_per_call_rows_is_still_judged_on_them_and_says_why():
    verdict = claim_verdict(frame(two_clocks(3.0, None)))
    assert verdict.outcome == Outcome.NOT_REPRODUCED and verdict.ours == pytest.approx(3.0)
    assert "torch.raw's time, both timed one call a sample; no queued rows are stored" in verdict.ours_text


def test_a_gpu_set_without_the_loop_baseline_awaits_it_with_the_per_call_figures_as_context():
    hw = GPU["hardware_id"]
    verdict = claim_verdict(frame(two_clocks(3.0, None, backend="torch", **GPU)), hw)
    assert verdict.outcome == Outcome.NOT_MEASURED and verdict.ours is None and not verdict.counts
    assert verdict.ours_text.startswith("awaits the loop baseline") and "nothing is decided" in verdict.ours_text
    assert "Context, per call against torch.raw (a CUDA graph of cuDNN" in verdict.ours_text
    assert "torch.fused takes 3.00x" in verdict.ours_text
    # queued torch.fused without its baseline decides nothing either
    only_fused = [r for r in two_clocks(3.0, 1.5, backend="torch", **GPU) if r["kernel"] != claim.LOOP]
    assert claim_verdict(frame(only_fused), hw).ours_text.startswith("awaits the loop baseline")
    # Mode 1 against Mode 2 awaits its queued rows too, its per-call figures context; a CPU set decides on them
    both_sides_of_16 = [(64, b, 10) for b in (1, 16, 64)]
    (modes,) = [v for v in claim.verdicts(frame(two_clocks(3.0, None, backend="torch", shapes=both_sides_of_16, **GPU)))
                if v.rule == claim.IMPL_RULE]
    assert modes.outcome == Outcome.NOT_MEASURED and modes.ours is None and not modes.counts
    assert modes.ours_text.startswith("awaits queued rows of keras.impl1 and keras.impl2")
    assert "Context, per call (Keras on its torch backend), not deciding: batch <= 16: Mode 2 takes 0.75x" in \
        modes.ours_text
    (on_cpu,) = [v for v in claim.verdicts(frame(two_clocks(3.0, None, backend="torch", shapes=both_sides_of_16)))
                 if v.rule == claim.IMPL_RULE]
    assert on_cpu.outcome == Outcome.NOT_REPRODUCED and on_cpu.ours_text.endswith(
        "timed per call: a CPU runs each call to its end before the next starts, so a queue hides no launch cost)")


def with_inside(data: pd.DataFrame, inside: dict[tuple[str, str], float]) -> pd.DataFrame:
    """Each (kernel, config) row's time inside its kernels, `inside[...]` x its median, in its observed_detail."""
    data = data.copy()
    data["observed_detail"] = [json.dumps({"in_kernel_ms": inside[(k, c)] * m * 1e3})
                               if (k, c) in inside else "" for k, c, m in zip(data.kernel, data.config, data.median_s)]
    return data


def test_the_ratio_inside_the_kernels_and_the_host_side_part_of_the_gap_are_given():
    """torch.fused 1.5x the loop baseline in wall time; inside the kernels it spends 0.66 of its time and the loop
    all of its: 0.99x, so the gap (0.5 of the baseline's time) is host-side but for the loop's 0.01."""
    hw = GPU["hardware_id"]
    data = with_inside(frame(two_clocks(3.0, 1.5, backend="torch", **GPU)),
                       {("torch.fused", claim.QUEUED_TEXT): 0.66, (claim.LOOP, claim.QUEUED_TEXT): 1.0})
    verdict = claim_verdict(data, hw)
    assert "inside the kernels (the profiler, 8 configurations) 0.99x against 1.50x in wall time" in verdict.ours_text
    assert "all of the wall-time gap is host-side" in verdict.ours_text
    table = claim.host_side(data)
    row = table[table.pair == "torch.fused over cudnn.loop"].iloc[0]
    assert row["in-kernel ratio"] == pytest.approx(0.99) and row["wall ratio"] == pytest.approx(1.5)
    assert row["host-side share of the gap"] == pytest.approx(1 + 0.01 / 0.5)  # above 100%: no slower inside
    assert claim.host_side_text(data)["cuda"].startswith(f"on {hw}, torch.fused over cudnn.loop (queued): 0.99x")


def test_the_gaps_share_is_said_without_a_rounded_100_percent():
    assert claim.share_words(1.0, 0.5) == "50% of the wall-time gap is host-side"
    assert claim.share_words(1.0, 0.004) == "99.6% of the wall-time gap is host-side"
    assert claim.share_words(1.0, 1.2).startswith("none of the wall-time gap is host-side")
    assert claim.share_words(0.0, 0.0) == "no wall-time gap to split"


def test_the_stored_h100_set_awaits_the_loop_baseline_with_time_inside_the_kernels_beside_wall_time():
    """Its rows are per call only, with the profiler's rows at two shapes: no verdict on DeepBench's method, and
    the per-call gap shown where it lives (torch.fused/torch.raw 1.02x inside the kernels, 3.95x in wall time)."""
    data = results.load(claim.NAME)
    hw = next((h for h in sorted(set(data.hardware_id)) if h.startswith("cuda-h100")), None)
    if hw is None:
        pytest.skip("no H100 set stored")
    verdict = claim_verdict(data, hw)
    assert verdict.outcome == Outcome.NOT_MEASURED and verdict.ours_text.startswith("awaits the loop baseline")
    assert "torch.fused takes 2.84x" in verdict.ours_text
    assert "1.02x inside the kernels against 3.95x in wall time at hidden 128, batch 1, 25 timesteps" in \
        verdict.ours_text


# --- the loop baseline --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [SHAPE, LSTMShape(batch=2, timesteps=4, features=3, hidden=5, layers=2,
                                                    bidirectional=True)])
def test_the_cpu_loop_baseline_calls_onednns_op_and_agrees_with_nn_lstm(shape):
    weights = LSTMWeights.random(shape)
    k = loop_baseline.build(shape, "cpu", weights=weights)
    fused = kernels.build("torch.fused", shape, weights=weights)
    np.testing.assert_allclose(k.forward(), fused.forward(), atol=1e-5, rtol=0)
    seen = k.observe()
    assert seen.kernel == "onednn" and seen.detail["loop"] == loop_baseline.ATEN_ONEDNN
    with pytest.raises(Skip, match="fp32 only"):
        loop_baseline.build(shape, "cpu", precision="bf16")
    with pytest.raises(Skip, match="forward pass alone"):
        loop_baseline.build(shape, "cpu", phase="train")


def fake_built(out: np.ndarray, loop: str) -> Built:
    return Built(name=loop_baseline.NAME, shape=SHAPE, device=torch.device("cuda"), precision="fp32",
                 phase="inference", step=lambda: None, sync=None, compute_dtype="float32", forward=lambda: out)


def test_on_a_gpu_the_harness_gives_way_to_atens_op_and_the_row_says_why(monkeypatch):
    """Where the harness cannot run (or gives another output than nn.LSTM's), ATen's cuDNN op from Python runs the
    same loop, with the reason; ATen's op itself disagreeing is an error, never a baseline."""
    reference = np.zeros((2, 5, 4), dtype=np.float32)
    reasons = []
    monkeypatch.setattr(loop_baseline, "_reference", lambda *a: reference)

    def aten(shape, device, weights, *, why):
        reasons.append(why)
        return fake_built(reference, loop_baseline.ATEN_CUDNN)

    monkeypatch.setattr(loop_baseline, "_aten_cudnn", aten)

    def missing(*a):
        raise native.HarnessUnavailable("no cuDNN headers in /x/include (cudnn.h): the loop harness cannot be built")

    monkeypatch.setattr(loop_baseline, "_harness", missing)
    loop_baseline.build(SHAPE, torch.device("cuda"))
    assert reasons[-1].startswith("no cuDNN headers")
    monkeypatch.setattr(loop_baseline, "_harness", lambda *a: fake_built(reference + 0.5, loop_baseline.HARNESS))
    loop_baseline.build(SHAPE, torch.device("cuda"))
    assert "differs from nn.LSTM's by 0.5" in reasons[-1] and "\n" not in reasons[-1]
    monkeypatch.setattr(loop_baseline, "_aten_cudnn", lambda *a, **k: fake_built(reference + 1, "aten"))
    with pytest.raises(loop_baseline.Disagrees, match="differs from nn.LSTM's by 1"):
        loop_baseline.build(SHAPE, torch.device("cuda"))


def test_the_protocol_times_a_queued_row_and_records_its_clock_and_time_inside_the_kernels():
    shape = LSTMShape(batch=1, timesteps=4, features=8, hidden=8)
    for kernel in ("torch.fused", claim.LOOP):
        point = contract.Point(kernel, shape, config=claim.QUEUED)
        got = in_kernel.prepare(point, torch.device("cpu"), profiled=claim.IN_KERNEL, queued=claim.QUEUED,
                                loop=claim.LOOP)
        assert isinstance(got.step, timing.Queued) and 2 <= got.step.calls <= 100
        m = timing.measure(got.step, sync=got.sync, warmup=1, min_samples=3, max_samples=3, min_time=0)
        detail = got.finish(m).observed.detail
        assert detail["clock"] == "queued" and detail["calls_per_sample"] == got.step.calls
        assert detail["in_kernel_ms"] > 0 and detail["in_kernel_calls"] == got.step.calls
    assert detail["loop"] == loop_baseline.ATEN_ONEDNN
    plain = in_kernel.prepare(contract.Point("torch.fused", shape), torch.device("cpu"), profiled=claim.IN_KERNEL,
                              queued=claim.QUEUED)
    assert not isinstance(plain.step, timing.Queued)
    m = timing.measure(plain.step, warmup=1, min_samples=3, max_samples=3, min_time=0)
    assert plain.finish(m).observed.detail["clock"] == "per call"


# --- the C++ harness: every failure in one line -------------------------------------------------------------------

def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text, text
    return text


def test_without_cudnn_the_harness_says_so_in_one_line(monkeypatch, tmp_path):
    monkeypatch.delenv(native.CUDNN_ENV, raising=False)
    monkeypatch.setattr(native.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(native.HarnessUnavailable) as caught:
        native.cudnn_root()
    assert "nvidia-cudnn-cu13 is not installed" in one_line(caught.value)
    monkeypatch.setenv(native.CUDNN_ENV, str(tmp_path))
    with pytest.raises(native.HarnessUnavailable, match="no cuDNN headers") as caught:
        native.build()
    one_line(caught.value)
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "cudnn.h").write_text("")
    with pytest.raises(native.HarnessUnavailable, match="no cuDNN library") as caught:
        native.cudnn_root()
    one_line(caught.value)


def test_a_library_that_cannot_be_loaded_says_so_in_one_line(tmp_path):
    fake = tmp_path / "liblstm_loop.so"
    fake.write_text("not a shared library\n")
    with pytest.raises(native.HarnessUnavailable, match="cannot be loaded") as caught:
        native.open_library(fake)
    one_line(caught.value)


def test_a_failed_build_is_not_tried_again_inside_a_measurement(monkeypatch, tmp_path):
    monkeypatch.setenv(native.BUILD_ENV, str(tmp_path))
    monkeypatch.setattr(native, "cudnn_root", lambda: tmp_path)
    tries = []

    def failing(*args):
        tries.append(1)
        raise native.HarnessUnavailable("building the loop harness: cmake's build failed (lstm_loop.cpp:1: error: x)")

    monkeypatch.setattr(native, "_compile", failing)
    for _ in range(2):
        with pytest.raises(native.HarnessUnavailable, match="cmake's build failed"):
            native.build()
    assert tries == [1]  # the second found the first's failure
    with pytest.raises(native.HarnessUnavailable):
        native.build(retry=True)  # what gpu-node.sh's build step asks: a fresh try
    assert tries == [1, 1]


def test_the_build_command_fails_in_one_line_with_status_1(tmp_path):
    env = {**os.environ, native.CUDNN_ENV: str(tmp_path), native.BUILD_ENV: str(tmp_path / "build")}
    done = subprocess.run([sys.executable, "-m", "lstmstudy.native", "build"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("cudnn.loop: no cuDNN headers") and "ATen's cuDNN op" in done.stderr


def _headers() -> tuple[Path, Path] | None:
    """cuDNN 9 headers (pip's nvidia-cudnn-cu13, else the copy TensorFlow's wheel carries) and CUDA's, where both
    are on this machine."""
    import importlib.util

    candidates = []
    for package, sub in (("nvidia.cudnn", "include"), ("tensorflow", "include/external/cuda_cudnn/include")):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        for location in (spec.submodule_search_locations or []) if spec else []:
            candidates.append(Path(location) / sub)
    cudnn = next((c for c in candidates if (c / "cudnn.h").is_file() and (c / "cudnn_adv.h").is_file()), None)
    cuda = next((Path(p) for p in ("/usr/local/cuda/include",) if (Path(p) / "cuda_runtime.h").is_file()), None)
    return (cudnn, cuda) if cudnn and cuda else None


STUB = """#include <stddef.h>
size_t cudnnGetVersion(void) { return 0; }
const char *cudnnGetErrorString(int status) { (void)status; return "CUDNN_STATUS_NOT_INITIALIZED (a stub: no GPU)"; }
"""
USED = ("cudnnCreate cudnnCreateDropoutDescriptor cudnnCreateRNNDataDescriptor cudnnCreateRNNDescriptor "
        "cudnnCreateTensorDescriptor cudnnDestroy cudnnDestroyDropoutDescriptor cudnnDestroyRNNDataDescriptor "
        "cudnnDestroyRNNDescriptor cudnnDestroyTensorDescriptor cudnnGetRNNTempSpaceSizes cudnnGetRNNWeightParams "
        "cudnnGetRNNWeightSpaceSize cudnnGetTensorNdDescriptor cudnnRNNForward cudnnSetDropoutDescriptor "
        "cudnnSetRNNDataDescriptor cudnnSetRNNDescriptor_v8 cudnnSetTensorNdDescriptor").split()


@pytest.mark.skipif(_headers() is None or not (shutil.which("cmake") or shutil.which("nvcc"))
                    or not shutil.which("gcc"), reason="no cuDNN 9 and CUDA headers, CMake or nvcc, or gcc here")
def test_the_harness_compiles_against_cudnn_9_and_without_a_gpu_fails_to_start_in_one_line(monkeypatch, tmp_path):
    """The real sources built with the real tools against cuDNN 9's headers, linked with a stub libcudnn.so.9 whose
    every call fails as a machine without a GPU would: the build succeeds and the harness's start says why, in one
    line, as does its bench executable."""
    cudnn_headers, _ = _headers()
    root = tmp_path / "cudnn"
    (root / "lib").mkdir(parents=True)
    (root / "include").symlink_to(cudnn_headers)
    stub = tmp_path / "stub.c"
    stub.write_text(STUB + "".join(f"int {name}() {{ return 1001; }}\n" for name in USED))
    subprocess.run(["gcc", "-shared", "-fPIC", str(stub), "-Wl,-soname,libcudnn.so.9", "-o",
                    str(root / "lib" / "libcudnn.so.9")], check=True, timeout=120)
    monkeypatch.setenv(native.CUDNN_ENV, str(root))
    monkeypatch.setenv(native.BUILD_ENV, str(tmp_path / "build"))
    library = native.build()
    assert library.is_file() and (library.parent / native.BENCH).is_file()
    lib = native.open_library(library)
    with pytest.raises(native.HarnessUnavailable) as caught:
        native.Harness(lib, input_size=4, hidden=4, layers=1, bidirectional=False, batch=2, timesteps=3)
    assert one_line(caught.value).startswith("the loop harness could not start: cudnnCreate(&l.handle): ")
    with pytest.raises(native.HarnessUnavailable, match="lstm_loop_bench failed") as caught:
        native.bench(4, 2, 3)
    one_line(caught.value)
