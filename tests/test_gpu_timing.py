"""The GPU side of the timing, on a real GPU: what the sweep's rows rest on. The lease's check runs this module
(`scripts/gpu-node.sh check`), so a node whose timing cannot be trusted says so before it measures; the faked side of
the same paths is tests/test_timing_provenance.py. Together well under 30 s on an H200."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lstmstudy import kernels, nvml, observe, timing
from lstmstudy.backends import ieee_fp32
from lstmstudy.kernels.built import LSTMWeights, make_inputs
from lstmstudy.shapes import LSTMShape

pytestmark = pytest.mark.gpu
CUDA = torch.device("cuda", 0)
#: a shape of the study's grids (claim 4's DeepBench block: H=512, T=25, B=32)
STUDY_SHAPE = LSTMShape(batch=32, timesteps=25, features=512, hidden=512)
#: IEEE fp32 over 25 steps of H=512 stays within this of fp64 (relative to the output's largest value); TF32, whose
#: products keep 10 bits of mantissa, misses it by an order of magnitude
FP32_BOUND = 1e-4


def fp64_reference(shape: LSTMShape, weights: LSTMWeights, x: np.ndarray) -> np.ndarray:
    """nn.LSTM in float64 on the GPU with `weights`: what fp32 is held against."""
    lstm = torch.nn.LSTM(shape.features, shape.hidden, batch_first=True).double().to(CUDA)
    with torch.no_grad():
        for key, value in weights.layers[0][0].items():
            getattr(lstm, key.replace("w_", "weight_").replace("b_", "bias_") + "_l0").copy_(torch.from_numpy(value))
        return lstm(torch.from_numpy(x).double().to(CUDA))[0].cpu().numpy()


def test_fp32_rows_compute_in_ieee_fp32_at_a_study_shape():
    """The sweep holds IEEE fp32 (no TF32) for every fp32 row: cuDNN's fused LSTM at a study shape then agrees with
    fp64 to `FP32_BOUND` of its output's scale."""
    weights = LSTMWeights.random(STUDY_SHAPE)
    x, _ = make_inputs(STUDY_SHAPE)
    with ieee_fp32(CUDA):
        got = kernels.build("torch.fused", STUDY_SHAPE, CUDA, "fp32", "inference", weights=weights).forward()
    expected = fp64_reference(STUDY_SHAPE, weights, x)
    error = np.max(np.abs(got - expected)) / np.max(np.abs(expected))
    assert error < FP32_BOUND, f"fp32 is {error:.2e} from fp64, over {FP32_BOUND:g}: TF32 or a lower precision ran"


def test_a_launch_bound_step_reads_host_bound_and_a_compute_bound_one_does_not():
    """200 one-element additions: the GPU works a few microseconds of each call's time, the rest is launches; one
    4096^3 GEMM: its kernel is nearly all of it. Device time and the CUDA events agree where the GPU is busy."""
    tiny, big = torch.zeros(1, device=CUDA), torch.randn(4096, 4096, device=CUDA)
    sync = timing.sync_for(CUDA)

    def launches():
        for _ in range(200):
            tiny.add_(1)

    def gemm():
        big @ big

    for step, bound in ((launches, True), (gemm, False)):
        wall = timing.measure(step, sync=sync, warmup=2, min_samples=20, max_samples=20, min_time=0, max_time=60)
        work = observe.device_time(step, sync, CUDA)
        assert work is not None and work.kernels >= 1
        assert (wall.median > observe.HOST_BOUND * work.seconds) is bound, (step.__name__, wall.summary(), work)
    assert work.seconds == pytest.approx(wall.median, rel=0.25)  # the GEMM: events and kernels time the same work


def test_the_energy_counter_period_is_measured_on_this_gpu():
    """NVML's energy counter updates every so often (about 100 ms was assumed); the windows use what is measured."""
    if reason := nvml.nvml_available(0):
        pytest.skip(reason)
    period = nvml.counter_period(0)
    assert period is not None and 1e-3 <= period <= 1.0, period


def test_cuda_sync_is_needed_and_used():
    """Needed: without a sync the host clock times how fast a step is queued, so a step of 20 big matmuls (tens
    of ms of GPU work, launched in well under a millisecond) reads many times shorter than it runs. Used:
    `sync_for("cuda")` makes `measure` time the work itself, with CUDA events."""
    a = torch.randn(4096, 4096, device="cuda")

    def step():
        for _ in range(20):
            a @ a

    step()  # cuBLAS's handle and workspace, outside both measurements
    torch.cuda.synchronize()
    # 3 samples queue 60 matmuls, far below the launch queue's depth: no launch waits for the GPU
    unsynced = timing.measure(step, warmup=0, min_samples=3, max_samples=3, min_time=0, max_time=60)
    torch.cuda.synchronize()
    synced = timing.measure(step, sync=timing.sync_for("cuda"), warmup=1, min_samples=3, max_samples=3,
                            min_time=0, max_time=60)
    assert unsynced.sync == "none" and synced.sync == "cuda-events"
    assert unsynced.median * 10 < synced.median, (unsynced.summary(), synced.summary())
    assert timing.sync_for("cpu") is None
