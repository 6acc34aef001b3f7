"""Energy windows: how claim 6 (`lstmstudy.claims.energy`) prepares and times a group of points, on an
NVIDIA GPU only, through the sweep's `Prepare` contract (`prepare_point`, timed in `window_rounds`).

A group is a shape and a phase: every kernel at every precision. A kernel's config gives `window_s`, and
`idle_s`, the idle window measured right before each of its windows. (The first H100 set was measured with one
idle point a group instead, an empty window once a round; the claim still reads those rows.)

1. the rounds' warm-up call of each kernel warms it up and times it (`timing.measure`); a short trial of
   a window's own loop, about `SIZING_TRIAL_SHARE` of it long by that median, then gives its wall time per
   step on the host (`nvml.host_step_s`), which sizes the window to N steps lasting at least `window_s`.
   Wall time, because a window lasts the steps' launches and syncs too, which the CUDA-event median
   leaves out: sized from that median, windows of sub-millisecond steps lasted 1.3-2x the plan;
2. then the rounds each run one window of every point of the group, in a shuffled order, as the other
   claims' timing rounds do, so that drift (temperature, clocks) hits every kernel alike. Each call is a
   pair: an empty window of `idle_s` seconds (`nvml.idle_window`), then at once the kernel's window of N
   synced, individually timed steps (`nvml.energy_window`: a window that comes out short runs again with a
   larger N, kept for the later windows), both in one `GpuMonitor`. Each window's energy above idle is then
   charged the idle power measured right before it, in the GPU's state of that moment: on the first H100
   set, whose idle power was measured once a round, idle power moved 123.6-147.0 W between the rounds of
   one group, more than a fallback's whole power above idle. A window the counter cannot measure is never
   stored as a number: the point becomes an `error` row with NVML's warning.
3. beside NVML, the host's CPU energy over the same two windows from RAPL (`lstmstudy.rapl`) where the node
   exposes it: a fallback's extra work can be the host's (Keras-on-torch's Python loop), which the GPU's
   board counter never sees. Where RAPL is absent or unreadable the row says why (`host_energy_missing`).

The row keeps every window in the results schema all claims share: its steps' times as one round of the
row's samples (`round_sizes` = N per window, `round_seed` shared by the group), and in `observed_detail` each window's joules and
monitor seconds (`window_energy_j`, `window_duration_s`), the idle window's before it (`window_idle_energy_j`,
`window_idle_duration_s`) and, with RAPL, the host's joules and seconds over both (`window_host_energy_j`,
`window_host_duration_s`, `window_host_idle_energy_j`, `window_host_idle_duration_s`, `host_energy_source`);
their total GPU joules as `energy_j`. Where there is no NVML, or the run is not on a CUDA device, every point
raises `Skip` with the reason (`unavailable`).
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
from lstmstudy.rapl import HostEnergy, HostReading, open_host_energy
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


@dataclass(frozen=True)
class Window:
    """One call of a kernel point in its group's rounds: the idle window right before (None where the point
    asks for none), the kernel's window and its steps, and the host's energy over each where RAPL reads it."""

    steps: Measurement
    work: GpuMeasurement
    idle: GpuMeasurement | None = None
    host_work: tuple[float, float] | None = None  # (joules, seconds) on the host's clock
    host_idle: tuple[float, float] | None = None


def kernel_detail(kept: Sequence[Window], host_note: str = "") -> dict[str, object]:
    """What a kernel row's `observed_detail` keeps of its windows (see the module), so the page can recompute
    everything: the host's numbers only where every window has them (`host_note`: their source), else why not
    (`host_note`: the reason)."""
    detail: dict[str, object] = {"energy_source": kept[0].work.energy_source,
                                 "window_energy_j": [w.work.energy_j for w in kept],
                                 "window_duration_s": [w.work.duration_s for w in kept]}
    if all(w.idle is not None for w in kept):
        detail.update(window_idle_energy_j=[w.idle.energy_j for w in kept],
                      window_idle_duration_s=[w.idle.duration_s for w in kept])
    if all(w.host_work is not None and (w.host_idle is not None or w.idle is None) for w in kept):
        detail.update(host_energy_source=host_note, window_host_energy_j=[w.host_work[0] for w in kept],
                      window_host_duration_s=[w.host_work[1] for w in kept])
        if all(w.host_idle is not None for w in kept):
            detail.update(window_host_idle_energy_j=[w.host_idle[0] for w in kept],
                          window_host_idle_duration_s=[w.host_idle[1] for w in kept])
    else:
        detail["host_energy_missing"] = host_note or "host energy is not measured"
    return detail


@dataclass
class KernelWindows:
    """A kernel point's step in its group's rounds: the first call (the rounds' warm-up) warms the kernel up
    and sizes its window from the host's wall time per step; every later call runs an idle window of `idle_s`
    (none when 0) and at once one energy window of `n` steps, and keeps both, with the host's energy over each
    where `host` reads RAPL (`host_note`: its source, or why not)."""

    k: Built
    sync: Sync | None
    window_s: float
    open_monitor: Callable[[], GpuMonitor]
    timing: dict
    idle_s: float = 0.0
    host: HostEnergy | None = None
    host_note: str = ""
    n: int = 0  # steps per window; 0 until the warm-up sizes it
    kept: list[Window] = field(default_factory=list)

    def __call__(self) -> None:
        if not self.n:
            median = time_call(self.k.step, sync=self.sync, **self.timing).median  # warms the kernel up
            trial = repetitions(median, SIZING_TRIAL_SHARE * self.window_s)
            self.n = repetitions(host_step_s(self.k.step, self.sync, trial), self.window_s)
            return
        with self.open_monitor() as monitor:
            before = self._host()
            idle = idle_window(monitor, self.idle_s) if self.idle_s else None
            between = self._host() if idle is not None else before
            steps, window = energy_window(self.k.step, self.sync, monitor, n=self.n, window_s=self.window_s)
            after = self._host()
        self.n = steps.n  # a short window grew N: the later windows start from there
        self.kept.append(Window(steps, window, idle, self._host_span(between, after),
                                self._host_span(before, between) if idle is not None else None))

    def _host(self) -> HostReading | None:
        """The host's RAPL counters now; None without them, or from the first read that fails (said in the row)."""
        if self.host is None:
            return None
        try:
            return self.host.read()
        except (OSError, ValueError) as err:
            self.host, self.host_note = None, f"host energy is not measured: RAPL stopped reading mid-run ({err})"
            return None

    def _host_span(self, start: HostReading | None, end: HostReading | None) -> tuple[float, float] | None:
        if self.host is None or start is None or end is None:
            return None
        return self.host.joules(start, end), end.t - start.t

    def result(self, rounds: Measurement) -> contract.PointResult:
        """The row: every window's steps as one round of samples, in the group's round seed, flagged `noisy`
        as the timing rounds flag a row (its time's interval over windows wider than `stats.NOISE_BOUND`)."""
        samples = tuple(t for w in self.kept for t in w.steps.samples)
        m = Measurement(samples=samples, warmup=rounds.warmup, threads=rounds.threads, sync=self.kept[0].steps.sync,
                        round_sizes=tuple(w.steps.n for w in self.kept), seed=rounds.seed)
        m = replace(m, noisy=m.rel_halfwidth() > Rounds().noise_bound)
        seen = self.k.observe()
        host_note = self.host.source if self.host is not None else self.host_note
        return contract.PointResult(measurement=m, flops=self.k.shape.flops(self.k.phase),
                                    energy_j=sum(w.work.energy_j for w in self.kept),
                                    observed=Observation(seen.kernel, {**seen.detail,
                                                                       **kernel_detail(self.kept, host_note)}),
                                    predicted_kernel=self.k.predicted_kernel, compute_dtype=self.k.compute_dtype)


def prepare_point(point: contract.Point, device: torch.device, *, timing: dict,
                  unavailable_reason: Callable[[torch.device], str | None] = unavailable,
                  monitor_factory: Callable[[torch.device, Sync | None], GpuMonitor] = _open_monitor,
                  host_energy: Callable[[], tuple[HostEnergy | None, str]] = open_host_energy
                  ) -> contract.Prepared:
    """The protocol's `prepare` (`sweep.Prepare`): the point's windows as the step its group's rounds call.

    `timing` is `timing.measure`'s options for the warm-up before a kernel's window is sized; each call opens
    its own monitor (`monitor_factory(device, sync)`), so nothing stays open when a point fails; `host_energy`
    opens the host's RAPL counters (`rapl.open_host_energy`), or says why there are none.
    """
    if reason := unavailable_reason(device):
        raise Skip(reason)
    k = kernels.check_fused(kernels.build(point.kernel, point.shape, device, point.precision, point.phase))
    sync = k.sync or sync_for(device)
    host, why_not = host_energy()
    steps = KernelWindows(k, sync, float(point.config["window_s"]), partial(monitor_factory, device, sync), timing,
                          idle_s=float(point.config["idle_s"]), host=host, host_note=why_not)
    return contract.Prepared(step=steps, sync=None, finish=steps.result)
