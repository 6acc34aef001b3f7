"""In-kernel profiling: how claim 4 (`lstmstudy.claims.frameworks_vs_baseline`) breaks a kernel's wall time
down into the time spent inside the LSTM op and the framework's overhead around it.

The points the claim marks for it (`prepare`'s `profiled` config) are not timed in rounds: each runs on its
own over a few profiled sessions (`observe.time_inside`), one sample per session, with each session's wall
time beside it. Every other point is the registry's plain step (`kernels.prepare`), timed in its group's
rounds, so one `prepare` serves the claim's whole grid.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from lstmstudy import contract, kernels
from lstmstudy.errors import Skip
from lstmstudy.observe import time_inside
from lstmstudy.timing import Measurement


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


def prepare(point: contract.Point, device: torch.device, *, profiled: Mapping[str, object],
            sessions: int = 5) -> contract.Prepared | contract.PointResult:
    """The protocol's `prepare` (`sweep.Prepare`): a point whose config is `profiled`, `measure`d over
    `sessions` profiled sessions on its own; any other, the registry's, timed in its group's rounds."""
    if dict(point.config) == dict(profiled):
        return measure(point, device, sessions=sessions)
    return kernels.prepare(point, device)
