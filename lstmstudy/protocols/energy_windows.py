"""Energy windows: how claim 6 (`lstmstudy.claims.energy`) prepares and times a group of points, on an
NVIDIA GPU only, through the sweep's `Prepare` contract (`prepare_point`, timed in `window_rounds`).

A group is a shape and a phase: every kernel at every precision. A kernel's config gives `window_s`, and
`idle_s`, the length of the idle windows on either side of each of its windows. (The first H100 set was measured
with one idle point a group instead, an empty window once a round; the claim still reads those rows.) The points of
one run share a `RunState`.

0. when a group's first point is prepared, before any of its work, the GPU's baseline power is taken
   (`GpuMonitor.baseline_power_w`), and, once a run, the energy counter's period measured (`nvml.counter_period`:
   every later monitor of the run goes by it, and no window is shorter than ten periods);
1. the rounds' warm-up call of each kernel warms it up and times it (`timing.measure`); a short trial of
   a window's own loop, about `SIZING_TRIAL_SHARE` of it long by that median, then gives its wall time per
   step on the host (`nvml.host_step_s`), which sizes the window to N steps lasting at least `window_s`.
   Wall time, because a window lasts the steps' launches too, which the CUDA-event median leaves out: sized
   from that median, windows of sub-millisecond steps lasted 1.3-2x the plan;
2. then the rounds each run one window of every point of the group, in a shuffled order, as the other
   claims' timing rounds do, so that drift (temperature, clocks) hits every kernel alike. Each call is the
   kernel's window of N steps queued and synced once, at its end (`nvml.energy_window`: synced one by one,
   launch-bound steps left the GPU idle between them; a window that comes out short runs again with a larger N,
   kept for the later windows), between two idle windows of `idle_s` seconds (`nvml.idle_window`), each after a
   bounded wait for power to come back to the group's baseline (`GpuMonitor.settle`: on the first H100 set, an
   idle window right after a `keras.relu` window read 147 W, against 124 W settled). The idle window after one
   call is the one before the next where nothing ran between them, so every round starts and ends idle at the
   cost of one idle window a call, as before, and one more a group. Each window's energy above idle is charged
   the idle power measured right before it, in the GPU's state of that moment: on the first H100 set, whose idle
   power was measured once a round, idle power moved 123.6-147.0 W between the rounds of one group, more than a
   fallback's whole power above idle. A window the counter cannot measure is never stored as a number: the point
   becomes an `error` row with NVML's warning.
3. beside NVML, the host's CPU energy over the kernel's window and the idle window before it from RAPL
   (`lstmstudy.rapl`) where the node exposes it: a fallback's extra work can be the host's (Keras-on-torch's
   Python loop), which the GPU's board counter never sees. Where RAPL is absent or unreadable the row says why
   (`host_energy_missing`).

The row keeps every window in the results schema all claims share: its steps' times as one round of the row's
samples (each step the window's duration / N; `round_sizes` = N per window, `round_seed` shared by the group), and
in `observed_detail` each window's joules and monitor seconds (`window_energy_j`, `window_duration_s`); the idle
window's before it (`window_idle_energy_j`, `window_idle_duration_s`) with the wait for power to settle before that
(`window_idle_settle_s`, and `window_idle_settled`: whether it came back to the baseline), and the idle window's
after it alike (`window_idle_after_energy_j`, `window_idle_after_duration_s`, `window_idle_after_settle_s`,
`window_idle_after_settled`); the group's baseline power (`baseline_w`) and the counter's measured period
(`counter_period_s`, null where it was assumed); with RAPL, the host's joules and seconds over the kernel's window
and the idle window before it (`window_host_energy_j`, `window_host_duration_s`, `window_host_idle_energy_j`,
`window_host_idle_duration_s`, `host_energy_source`); their total GPU joules as `energy_j`. Where there is no NVML,
or the run is not on a CUDA device, every point raises `Skip` with the reason (`unavailable`).
"""

from __future__ import annotations

import math
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
    Settled,
    device_index,
    energy_window,
    host_step_s,
    idle_window,
    nvml_available,
    repetitions,
)
from lstmstudy.observe import Observation
from lstmstudy.rapl import HostEnergy, HostReading, open_host_energy
from lstmstudy.timing import Measurement, Rounds, Sync, sync_for
from lstmstudy.timing import measure as time_call

#: the host-timed trial that sizes a kernel's window lasts about this share of the window
SIZING_TRIAL_SHARE = 0.1
#: a stored window's `Measurement.sync`: its steps are queued and synced once, at the window's end
WINDOW_SYNC = "once per window"


def window_rounds(windows: int) -> Rounds:
    """The sweep's plan for a group of energy points: each point's step is called once to warm up, then
    once per round for `windows` rounds (one call per burst, no burst warm-up, no extra rounds), each
    call one energy window."""
    return Rounds(rounds=windows, warmup=1, burst_warmup=0, burst_s=0.0, burst_min_samples=1, burst_max_samples=1,
                  extra_rounds=0)


def unavailable(device: torch.device) -> str | None:
    """Why energy cannot be measured for a run on `device` (None: it can)."""
    reason = nvml_available(device_index(device) if device.type == "cuda" else 0)
    if reason:
        return reason
    if device.type != "cuda":
        return (f"energy is read from an NVIDIA GPU's NVML counters and this run is on {device.type}; "
                "run with device='cuda' to measure it")
    return None


def _open_monitor(device: torch.device, sync: Sync | None, counter_period_s: float | None) -> GpuMonitor:
    return GpuMonitor(device_index(device), sync=sync, counter_period_s=counter_period_s)


#: opens a monitor that goes by the given counter period (None: it measures the period)
OpenMonitor = Callable[[float | None], GpuMonitor]


@dataclass(frozen=True)
class Idle:
    """An idle window, the wait for power to settle before it, and the host's (joules, seconds) over it with RAPL."""

    window: GpuMeasurement
    settled: Settled
    host: tuple[float, float] | None = None


@dataclass
class RunState:
    """What the points of one run share (claim 6's `measure` makes one a run): the counter's period, measured by
    the run's first monitor; the baseline power of the group being measured, taken when its first point is
    prepared, before any of its work; and the idle window that ended the last call, which opens the next one
    where nothing ran since."""

    counter_period_s: float | None = None  # as measured; None where it was not, and the monitors assume it
    period_s: float | None = None  # what the run's monitors go by; None until the first one opens
    baseline_w: float = math.nan
    new_group: bool = True  # work ran since the baseline was taken: the next point prepared starts a group
    last_idle: Idle | None = None

    def start_group(self, open_monitor: OpenMonitor) -> None:
        """At a point's preparation: where work ran since the last baseline, this point starts a new group, whose
        baseline power is taken now (and, the first time, the counter's period measured)."""
        if not self.new_group:
            return
        with open_monitor(self.period_s) as monitor:
            if self.period_s is None:
                self.counter_period_s, self.period_s = monitor.counter_period_s, monitor.period_s
            self.baseline_w = monitor.baseline_power_w()
        self.new_group = False

    def work(self) -> None:
        """Work is about to run: the last idle window opens no later call, and the next point prepared starts a
        new group."""
        self.last_idle, self.new_group = None, True


@dataclass(frozen=True)
class Window:
    """One call of a kernel point in its group's rounds: its N steps and the kernel's window, the idle windows
    right before and right after it (None where the point asks for none), and the host's energy over the kernel's
    window where RAPL reads it."""

    n: int
    work: GpuMeasurement
    idle: Idle | None = None
    after: Idle | None = None
    host_work: tuple[float, float] | None = None  # (joules, seconds) on the host's clock


def _idle_detail(prefix: str, idles: Sequence[Idle]) -> dict[str, list]:
    """One idle window a window of work as `observed_detail` keeps them: joules, seconds and the wait before."""
    return {f"{prefix}_energy_j": [i.window.energy_j for i in idles],
            f"{prefix}_duration_s": [i.window.duration_s for i in idles],
            f"{prefix}_settle_s": [i.settled.seconds for i in idles],
            f"{prefix}_settled": [i.settled.settled for i in idles]}


def kernel_detail(kept: Sequence[Window], host_note: str = "") -> dict[str, object]:
    """What a kernel row's `observed_detail` keeps of its windows (see the module), so the page can recompute
    everything: the host's numbers only where every window has them (`host_note`: their source), else why not
    (`host_note`: the reason)."""
    detail: dict[str, object] = {"energy_source": kept[0].work.energy_source,
                                 "window_energy_j": [w.work.energy_j for w in kept],
                                 "window_duration_s": [w.work.duration_s for w in kept]}
    idled = all(w.idle is not None for w in kept)
    if idled:
        detail.update(_idle_detail("window_idle", [w.idle for w in kept]))
        detail.update(_idle_detail("window_idle_after", [w.after for w in kept]))
    if all(w.host_work is not None and (w.idle is None or w.idle.host is not None) for w in kept):
        detail.update(host_energy_source=host_note, window_host_energy_j=[w.host_work[0] for w in kept],
                      window_host_duration_s=[w.host_work[1] for w in kept])
        if idled:
            detail.update(window_host_idle_energy_j=[w.idle.host[0] for w in kept],
                          window_host_idle_duration_s=[w.idle.host[1] for w in kept])
    else:
        detail["host_energy_missing"] = host_note or "host energy is not measured"
    return detail


@dataclass
class KernelWindows:
    """A kernel point's step in its group's rounds: the first call (the rounds' warm-up) warms the kernel up
    and sizes its window from the host's wall time per step; every later call runs one energy window of `n`
    steps between two idle windows of `idle_s` (none when 0), the first of them the last call's where nothing ran
    since, and keeps them, with the host's energy where `host` reads RAPL (`host_note`: its source, or why not)."""

    k: Built
    sync: Sync | None
    window_s: float
    open_monitor: OpenMonitor
    timing: dict
    state: RunState
    idle_s: float = 0.0
    host: HostEnergy | None = None
    host_note: str = ""
    n: int = 0  # steps per window; 0 until the warm-up sizes it
    kept: list[Window] = field(default_factory=list)

    def __call__(self) -> None:
        if not self.n:
            self.state.work()
            median = time_call(self.k.step, sync=self.sync, **self.timing).median  # warms the kernel up
            trial = repetitions(median, SIZING_TRIAL_SHARE * self.window_s)
            self.n = repetitions(host_step_s(self.k.step, self.sync, trial), self.window_s)
            return
        with self.open_monitor(self.state.period_s) as monitor:
            before = (self._last_idle() or self._idle(monitor)) if self.idle_s else None
            self.state.work()
            start = self._host()
            # a window that came out short grew N: the later windows start from there
            self.n, work = energy_window(self.k.step, monitor, n=self.n, window_s=self.window_s)
            end = self._host()
            after = self._idle(monitor) if self.idle_s else None
        self.state.last_idle = after
        self.kept.append(Window(self.n, work, before, after, self._host_span(start, end)))

    def _last_idle(self) -> Idle | None:
        """The idle window that ended the last call, where nothing ran since and it has the host's numbers this
        point keeps."""
        last = self.state.last_idle
        return last if last is not None and (self.host is None or last.host is not None) else None

    def _idle(self, monitor: GpuMonitor) -> Idle:
        """An idle window of `idle_s`, after waiting (bounded) for power to come back to the group's baseline."""
        settled = monitor.settle(self.state.baseline_w)
        start = self._host()
        window = idle_window(monitor, self.idle_s)
        return Idle(window, settled, self._host_span(start, self._host()))

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
        """The row: every window's steps as one round of samples (each the window's duration / N), in the group's
        round seed, flagged `noisy` as the timing rounds flag a row (its time's interval over windows wider than
        `stats.NOISE_BOUND`)."""
        samples = tuple(w.work.duration_s / w.n for w in self.kept for _ in range(w.n))
        m = Measurement(samples=samples, warmup=rounds.warmup, threads=rounds.threads, sync=WINDOW_SYNC,
                        round_sizes=tuple(w.n for w in self.kept), seed=rounds.seed)
        m = replace(m, noisy=m.rel_halfwidth() > Rounds().noise_bound)
        seen = self.k.observe()
        host_note = self.host.source if self.host is not None else self.host_note
        detail = {**seen.detail, **kernel_detail(self.kept, host_note), "baseline_w": self.state.baseline_w,
                  "counter_period_s": self.state.counter_period_s}
        return contract.PointResult(measurement=m, flops=self.k.shape.flops(self.k.phase),
                                    energy_j=sum(w.work.energy_j for w in self.kept),
                                    observed=Observation(seen.kernel, detail),
                                    predicted_kernel=self.k.predicted_kernel, compute_dtype=self.k.compute_dtype)


def prepare_point(point: contract.Point, device: torch.device, *, timing: dict, state: RunState,
                  unavailable_reason: Callable[[torch.device], str | None] = unavailable,
                  monitor_factory: Callable[[torch.device, Sync | None, float | None], GpuMonitor] = _open_monitor,
                  host_energy: Callable[[], tuple[HostEnergy | None, str]] = open_host_energy
                  ) -> contract.Prepared:
    """The protocol's `prepare` (`sweep.Prepare`): the point's windows as the step its group's rounds call.

    `timing` is `timing.measure`'s options for the warm-up before a kernel's window is sized; `state` is what the
    run's points share (the group's baseline is taken here, before the point's kernel is built); each call opens
    its own monitor (`monitor_factory(device, sync, counter_period_s)`), so nothing stays open when a point fails;
    `host_energy` opens the host's RAPL counters (`rapl.open_host_energy`), or says why there are none.
    """
    if reason := unavailable_reason(device):
        raise Skip(reason)
    state.start_group(partial(monitor_factory, device, sync_for(device)))
    k = kernels.check_fused(kernels.build(point.kernel, point.shape, device, point.precision, point.phase))
    sync = k.sync or sync_for(device)
    host, why_not = host_energy()
    steps = KernelWindows(k, sync, float(point.config["window_s"]), partial(monitor_factory, device, sync), timing,
                          state, idle_s=float(point.config["idle_s"]), host=host, host_note=why_not)
    return contract.Prepared(step=steps, sync=None, finish=steps.result)
