"""Energy windows: how claim 6 (`lstmstudy.claims.energy`) prepares and times a group of points, on an
NVIDIA GPU only, through the sweep's `Prepare` contract (`prepare_point`, timed in `window_rounds`).

A group is a shape and a phase: every kernel at every precision, and an idle point (the point whose config
gives `idle_s`; a kernel's gives `window_s`).

1. the rounds' warm-up call of each kernel warms it up and times it (`timing.measure`); a short trial of
   a window's own loop, about `SIZING_TRIAL_SHARE` of it long by that median, then gives its wall time per
   step on the host (`nvml.host_step_s`), which sizes the window to N steps lasting at least `window_s`.
   Wall time, because a window lasts the steps' launches and syncs too, which the CUDA-event median
   leaves out: sized from that median, windows of sub-millisecond steps lasted 1.3-2x the plan;
2. then the rounds each run one window of every point of the group, in a shuffled order, as the other
   claims' timing rounds do, so that drift (temperature, clocks) hits every kernel and the idle baseline
   alike. A kernel's window is N synced, individually timed steps inside a `GpuMonitor` window
   (`nvml.energy_window`: a window that comes out short runs again with a larger N, kept for the later
   windows); the idle point's is an empty window of `idle_s` seconds (`nvml.idle_window`). A window the
   counter cannot measure is never stored as a number: the point becomes an `error` row with NVML's warning.

The row keeps every window in the results schema all claims share: its steps' times as one round of the
row's samples (`round_sizes` = N per window, `round_seed` shared by the group; an idle row has one sample
per window, the window's length), each window's joules and monitor seconds in `observed_detail`
(`window_energy_j`, `window_duration_s`), and their total joules as `energy_j`. Where there is no NVML, or
the run is not on a CUDA device, every point raises `Skip` with the reason (`unavailable`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import torch

from lstmstudy import contract, kernels
from lstmstudy.errors import Skip
from lstmstudy.kernels.built import Built
from lstmstudy.nvml import (
    GpuMeasurement,
    GpuMonitor,
    energy_window,
    host_step_s,
    idle_window,
    nvml_available,
    nvml_index,
    repetitions,
)
from lstmstudy.observe import Observation
from lstmstudy.timing import Measurement, Rounds, Sync, sync_for
from lstmstudy.timing import measure as time_call

#: the host-timed trial that sizes a kernel's window lasts about this share of the window
SIZING_TRIAL_SHARE = 0.1


def window_rounds(windows: int) -> Rounds:
    """The sweep's plan for a group of energy points: each point's step is called once to warm up, then
    once per round for `windows` rounds (one call per burst, no burst warm-up, no extra rounds), each
    call one energy window."""
    return Rounds(rounds=windows, warmup=1, burst_warmup=0, burst_s=0.0, burst_min_samples=1, burst_max_samples=1,
                  extra_rounds=0)


def unavailable(device: torch.device) -> str | None:
    """Why energy cannot be measured for a run on `device` (None: it can)."""
    reason = nvml_available(_nvml_index(device) if device.type == "cuda" else 0)
    if reason:
        return reason
    if device.type != "cuda":
        return (f"energy is read from an NVIDIA GPU's NVML counters and this run is on {device.type}; "
                "run with device='cuda' to measure it")
    return None


def _nvml_index(device: torch.device) -> int:
    """NVML's index of a torch CUDA device (matched by UUID: CUDA_VISIBLE_DEVICES renumbers)."""
    return nvml_index(str(torch.cuda.get_device_properties(device).uuid), device.index or 0)


def _open_monitor(device: torch.device, sync: Sync | None) -> GpuMonitor:
    return GpuMonitor(_nvml_index(device), sync=sync)


def _window_detail(windows: Sequence[GpuMeasurement]) -> dict[str, object]:
    """What a row's `observed_detail` keeps of its windows, so the page can recompute everything."""
    return {"energy_source": windows[0].energy_source, "window_energy_j": [w.energy_j for w in windows],
            "window_duration_s": [w.duration_s for w in windows]}


@dataclass
class KernelWindows:
    """A kernel point's step in its group's rounds: the first call (the rounds' warm-up) warms the kernel up
    and sizes its window from the host's wall time per step; every later call runs one energy window of
    `n` steps and keeps it."""

    k: Built
    sync: Sync | None
    window_s: float
    open_monitor: Callable[[], GpuMonitor]
    timing: dict
    n: int = 0  # steps per window; 0 until the warm-up sizes it
    kept: list[tuple[Measurement, GpuMeasurement]] = field(default_factory=list)

    def __call__(self) -> None:
        if not self.n:
            median = time_call(self.k.step, sync=self.sync, **self.timing).median  # warms the kernel up
            trial = repetitions(median, SIZING_TRIAL_SHARE * self.window_s)
            self.n = repetitions(host_step_s(self.k.step, self.sync, trial), self.window_s)
            return
        with self.open_monitor() as monitor:
            steps, window = energy_window(self.k.step, self.sync, monitor, n=self.n, window_s=self.window_s)
        self.n = steps.n  # a short window grew N: the later windows start from there
        self.kept.append((steps, window))

    def result(self, rounds: Measurement) -> contract.PointResult:
        """The row: every window's steps as one round of samples, in the group's round seed, flagged `noisy`
        as the timing rounds flag a row (its time's interval over windows wider than `stats.NOISE_BOUND`)."""
        samples = tuple(t for steps, _ in self.kept for t in steps.samples)
        m = Measurement(samples=samples, warmup=rounds.warmup, threads=rounds.threads, sync=self.kept[0][0].sync,
                        round_sizes=tuple(steps.n for steps, _ in self.kept), seed=rounds.seed)
        m = replace(m, noisy=m.rel_halfwidth() > Rounds().noise_bound)
        windows = [window for _, window in self.kept]
        seen = self.k.observe()
        return contract.PointResult(measurement=m, flops=self.k.shape.flops(self.k.phase),
                                    energy_j=sum(w.energy_j for w in windows),
                                    observed=Observation(seen.kernel, {**seen.detail, **_window_detail(windows)}),
                                    predicted_kernel=self.k.predicted_kernel, compute_dtype=self.k.compute_dtype)


@dataclass
class IdleWindows:
    """The idle point's step in its group's rounds: nothing on the warm-up call, then one empty window of
    `seconds` per round."""

    seconds: float
    open_monitor: Callable[[], GpuMonitor]
    warmed: bool = False
    kept: list[GpuMeasurement] = field(default_factory=list)

    def __call__(self) -> None:
        if not self.warmed:
            self.warmed = True
            return
        with self.open_monitor() as monitor:
            self.kept.append(idle_window(monitor, self.seconds))

    def result(self, rounds: Measurement) -> contract.PointResult:
        """The row: each window's length as one round of one sample, in the group's round seed."""
        m = Measurement(samples=tuple(w.duration_s for w in self.kept), warmup=0, threads=rounds.threads,
                        sync="none", round_sizes=(1,) * len(self.kept), seed=rounds.seed)
        return contract.PointResult(measurement=m, energy_j=sum(w.energy_j for w in self.kept),
                                    observed=Observation("none", _window_detail(self.kept)))


def prepare_point(point: contract.Point, device: torch.device, *, timing: dict,
                  unavailable_reason: Callable[[torch.device], str | None] = unavailable,
                  monitor_factory: Callable[[torch.device, Sync | None], GpuMonitor] = _open_monitor
                  ) -> contract.Prepared:
    """The protocol's `prepare` (`sweep.Prepare`): the point's windows as the step its group's rounds call.

    `timing` is `timing.measure`'s options for the warm-up before a kernel's window is sized; each window opens
    its own monitor (`monitor_factory(device, sync)`), so nothing stays open when a point fails.
    """
    if reason := unavailable_reason(device):
        raise Skip(reason)
    if "idle_s" in point.config:
        windows = IdleWindows(float(point.config["idle_s"]), partial(monitor_factory, device, sync_for(device)))
        return contract.Prepared(step=windows, sync=None, finish=windows.result)
    k = kernels.check_fused(kernels.build(point.kernel, point.shape, device, point.precision, point.phase))
    sync = k.sync or sync_for(device)
    steps = KernelWindows(k, sync, float(point.config["window_s"]), partial(monitor_factory, device, sync), timing)
    return contract.Prepared(step=steps, sync=None, finish=steps.result)
