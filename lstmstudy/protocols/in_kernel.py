"""Claim 4's protocol (`lstmstudy.claims.frameworks_vs_baseline`): each row timed per call or DeepBench's way, the
loop baseline built, and the time inside the kernels recorded beside the wall time.

- The points the claim marks `profiled` are not timed in rounds: each runs on its own over a few profiled
  sessions (`observe.time_inside`), one sample per session, with each session's wall time beside it: the breakdown
  of a kernel's wall time into the time inside the LSTM op and the framework's overhead around it.
- Every other point is built (the registry's kernel, `kernels.prepare`, or the loop baseline,
  `kernels.loop_baseline`) and timed in its group's rounds: one call a sample, or, where its config is the claim's
  `queued` one, DeepBench's clock (`timing.Queued`: N calls between two syncs, divided by N; N = `QUEUE_CALLS`,
  fewer where that many take over `QUEUE_S`, at least `QUEUE_FEWEST`: `timing.queue_length`, the constants in
  `lstmstudy.frameworks`). After the rounds, one profiled pass of the same number of calls records the time inside
  the kernels per call (`device_time`: on a GPU every kernel the calls ran, cuDNN's and cuBLAS's; on a CPU oneDNN's
  LSTM op) in the row's `observed_detail` (`in_kernel_ms`, with the profiled pass's own wall time,
  `profiled_wall_ms`), with the clock that timed the row (`clock`, `calls_per_sample`). A CPU Keras row records
  none: TensorFlow's ops are not torch's profiler's to see. On a GPU the same pass gives the row its device time
  (`contract.PointResult.device`), so the sweep profiles it no second time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

import torch

from lstmstudy import contract, kernels, timing
from lstmstudy.errors import Skip
from lstmstudy.sweep import is_fatal_cuda_error
from lstmstudy.observe import CPU_LSTM_OPS, FUSED, DeviceTime, Observation, gpu_work, profiled_events, time_inside
from lstmstudy.timing import Measurement

#: a row's `observed_detail` keys this protocol writes
CLOCK, CALLS, IN_KERNEL_MS, PROFILED_WALL_MS = "clock", "calls_per_sample", "in_kernel_ms", "profiled_wall_ms"
PER_CALL, QUEUED = "per call", "queued"


class ImpossibleShare(RuntimeError):
    """The profiler put more time inside the kernel than the session's wall time: the row is an error."""


def measure(point: contract.Point, device: torch.device, *, sessions: int = 5) -> contract.PointResult:
    """Time spent inside the LSTM kernel per call, one sample per profiled session (`observe.time_inside`),
    each session's wall time beside it; a session whose in-kernel time exceeds its wall time is an error."""
    k = kernels.check_fused(kernels.build(point.kernel, point.shape, device, point.precision, point.phase))
    try:
        samples, seen = time_inside(k.step, k.sync, device, sessions=sessions)
    except LookupError as exc:
        raise Skip(f"{point.kernel}: {exc}") from None
    shares = [inside / wall for inside, wall in zip(samples, seen.detail["profiled_wall_s"])]
    if max(shares) > 1:
        raise ImpossibleShare(f"{point.kernel}: the profiler saw {max(shares):.0%} of a session's wall time inside "
                              f"the kernel; a share above 100% is a measuring error, not a result")
    measurement = Measurement(samples=tuple(samples), warmup=3, threads=torch.get_num_threads(), sync="profiler")
    return contract.PointResult(measurement=measurement, flops=point.shape.flops(point.phase), observed=seen,
                                compute_dtype=k.compute_dtype)


_profiler_warm: set[str] = set()


def device_time(step: Callable[[], object], sync: Callable[[], object] | None, device: torch.device,
                calls: int) -> tuple[dict, DeviceTime | None]:
    """One profiled pass of `calls` calls of `step` and a sync: milliseconds per call inside the kernels (on a GPU
    the summed duration of every GPU kernel, `observe.gpu_work`, which the row's device time also is; on a CPU the
    self time of oneDNN's LSTM op), and the pass's own wall time per call (the profiler slows what it records). Where
    the profiler saw no kernel, why, instead.

    The first pass in a process, on each device, is a warm-up and is not used: starting CUPTI takes a while."""
    from torch.autograd import DeviceType

    finish = sync or (lambda: None)
    if device.type not in _profiler_warm:
        profiled_events([step, finish], device)
        _profiler_warm.add(device.type)
    t0 = time.perf_counter()
    events = profiled_events([step] * calls + [finish], device)
    wall = (time.perf_counter() - t0) / calls
    work = gpu_work([(e.name, e.time_range.elapsed_us()) for e in events
                     if e.device_type == DeviceType.CUDA and not e.is_user_annotation],  # a range, not work
                    calls) if device.type == "cuda" else None
    inside_s = work.seconds if work else sum(e.self_cpu_time_total for e in events if e.device_type == DeviceType.CPU
                                             and e.name in CPU_LSTM_OPS) * 1e-6 / calls
    if not inside_s:
        what = "no GPU kernel" if device.type == "cuda" else "no " + ", ".join(CPU_LSTM_OPS)
        return {"in_kernel_note": f"the profiler recorded {what}"}, None
    return {IN_KERNEL_MS: round(inside_s * 1e3, 6), "in_kernel_calls": calls,
            PROFILED_WALL_MS: round(wall * 1e3, 6)}, work


def _records_device_time(point: contract.Point, device: torch.device) -> bool:
    """Every GPU row; on a CPU the rows whose LSTM is oneDNN's op, in torch's profiler's sight (not TensorFlow's)."""
    return device.type == "cuda" or not point.kernel.startswith("keras.")


def _built(point: contract.Point, device: torch.device, loop: str) -> contract.Prepared:
    """The point's kernel, built and checked as a registry kernel is (`kernels.prepare`), or the loop baseline."""
    if point.kernel != loop:
        return kernels.prepare(point, device)
    from lstmstudy.kernels import loop_baseline

    k = loop_baseline.build(point.shape, device, point.precision, point.phase)
    if (seen := k.observed_kernel()) != FUSED[device.type]:  # as `kernels.check_fused` holds a fused baseline
        raise kernels.NotFused(f"{point.kernel} ran {seen or 'nothing observable'}, not {FUSED[device.type]}: it is "
                               f"no fused baseline here")
    flops = point.shape.flops(point.phase)

    def finish(m: Measurement) -> contract.PointResult:
        return contract.PointResult(measurement=m, flops=flops, observed=k.observe(), compute_dtype=k.compute_dtype)

    return contract.Prepared(step=k.step, sync=k.sync, finish=finish)


def prepare(point: contract.Point, device: torch.device, *, profiled: Mapping[str, object],
            queued: Mapping[str, object] | None = None, loop: str = "cudnn.loop",
            sessions: int = 5) -> contract.Prepared | contract.PointResult:
    """The protocol's `prepare` (`sweep.Prepare`): a point whose config is `profiled`, `measure`d over `sessions`
    profiled sessions on its own; any other built (`loop` names the loop baseline) and timed in its group's rounds,
    one call a sample or, where its config is `queued`, DeepBench's clock; its row then records the clock and the
    time inside its kernels (see the module docstring)."""
    if dict(point.config) == dict(profiled):
        return measure(point, device, sessions=sessions)
    is_queued = queued is not None and dict(point.config) == dict(queued)
    # the kernel itself is its per-call twin's: the clock is how it is timed, not what it runs
    kernel_config = {k: v for k, v in point.config.items() if not (is_queued and k in queued)}
    got = _built(replace(point, config=kernel_config), device, loop)
    calls = timing.queue_length(timing.one_call_s(got.step, got.sync, calls=2)) if is_queued else 1
    records = _records_device_time(point, device)

    def finish(m: Measurement) -> contract.PointResult:
        result = got.finish(m)
        detail = {**result.observed.detail, CLOCK: QUEUED if is_queued else PER_CALL, CALLS: m.calls}
        work = None
        if records:  # sized like a queued sample: a 0.1 ms call alone is too short for the profiler's clock
            try:
                inside, work = device_time(got.step, got.sync, device,
                                           calls if is_queued else timing.queue_length(m.median))
            except RuntimeError as exc:  # the profiler's failure costs the row its time inside, not its timing
                if is_fatal_cuda_error(exc):
                    raise
                inside = {"in_kernel_note": f"the profiler failed: {exc}"}
            detail.update(inside)
        return replace(result, observed=Observation(result.observed.kernel, detail), device=work)

    return contract.Prepared(step=timing.Queued(got.step, calls) if is_queued else got.step, sync=got.sync,
                             finish=finish)
