"""GPU energy and power over named windows of work, read from NVML (the library behind nvidia-smi).

Modelled on ml-energy/Zeus: `begin_window(key)` ... `end_window(key)` returns a `GpuMeasurement`.
Energy comes from the GPU's own energy counter (Volta and newer) where there is one, else from
integrating the power that a background thread samples. The counter updates only once a period, so a window
shorter than that reports `energy_j=None` and a warning instead of a zero or a guess: repeat the work until the
window is long enough (the energy claim asks for `WINDOW_PERIODS` periods at least). A `GpuMonitor` measures the
period when it opens (`counter_period`: ~100 ms was assumed and never measured on Hopper), and goes by
`ASSUMED_COUNTER_PERIOD_S` only where it cannot.

For windows that start from idle, a monitor also reads the power now (`power_w`), a baseline before any work
(`baseline_power_w`) and waits, bounded, until power is back near it (`settle`): an idle window measured right
after heavy work measures a GPU still cooling down (147 W after a `keras.relu` window, against 124 W settled).
"""

from __future__ import annotations

import logging
import math
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

import pynvml

from lstmstudy.errors import DeviceUnavailable, ParameterError, StudyError
from lstmstudy.timing import Queued

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

ASSUMED_COUNTER_PERIOD_S = 0.1
"""NVML's energy counter period where it cannot be measured (no counter, or it did not change while probed):
~100 ms, as Zeus assumes; a monitor measures it where it can (`counter_period`)."""
WINDOW_PERIODS = 10
"""The shortest window whose energy the study stores, in counter periods: the counter can be up to one period
stale at each end of a window, so over ten periods a window's energy is off by at most about a tenth, at random
from one window to the next, which the interval over repeated windows then carries."""
MIN_ENERGY_WINDOW_S = WINDOW_PERIODS * ASSUMED_COUNTER_PERIOD_S
"""The shortest stored window at the assumed period; a monitor's own is `GpuMonitor.min_window_s`."""
PERIOD_CHANGES = 5
"""The period is the median gap between this many successive changes of the counter."""
PERIOD_POLL_S = 0.001
"""How often the period probe reads the counter: the probe's resolution."""
PERIOD_PROBE_MAX_S = 2.0
"""The longest the period probe polls (five gaps of 100 ms take about 0.6 s)."""
BASELINE_S = 0.5
"""How long the baseline power is sampled (its median is the baseline)."""
SETTLE_TOLERANCE = 0.05
"""Power within this fraction above the baseline counts as settled (about 6 W at the H100's 124 W idle)."""
SETTLE_MAX_S = 2.0
"""The longest `settle` waits: twice the second over which Ampere and newer average the power NVML reports; past
it the idle window runs anyway, and its record says it did not settle."""
SETTLE_POLL_S = 0.05
"""How often `settle` and `baseline_power_w` read the power."""

Sync = Callable[[], object]


class NvmlError(StudyError):
    """An NVML query failed; the message says which query and NVML's reason."""


class NvmlUnavailable(NvmlError, DeviceUnavailable):
    """No NVML here: no library, no driver, no GPU at that index, or the GPU was lost."""


class NvmlNotSupported(NvmlError):
    """This GPU does not support a query (the energy counter before Volta, for example)."""


class NvmlPermission(NvmlError):
    """NVML refused a query for lack of permission."""


_UNAVAILABLE_CODES = frozenset({
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, pynvml.NVML_ERROR_DRIVER_NOT_LOADED, pynvml.NVML_ERROR_UNINITIALIZED,
    pynvml.NVML_ERROR_GPU_IS_LOST, pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
})


def _unavailable(reason: str) -> NvmlUnavailable:
    return NvmlUnavailable(f"NVML is not available here: {reason}; energy is not measured on this machine")


def _translate(err: Exception, doing: str) -> NvmlError:
    """The one place where NVML error codes become typed study errors."""
    code = getattr(err, "value", None)
    if code in _UNAVAILABLE_CODES:
        return _unavailable(f"{err} (while {doing})")
    if code == pynvml.NVML_ERROR_NOT_SUPPORTED:
        return NvmlNotSupported(f"this GPU does not support {doing} ({err})")
    if code == pynvml.NVML_ERROR_NO_PERMISSION:
        return NvmlPermission(f"NVML refused {doing}: {err}; run as a user allowed to query the GPU")
    return NvmlError(f"NVML failed {doing}: {err} (code {code})")


def _call(doing: str, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except pynvml.NVMLError as err:
        raise _translate(err, doing) from err


def _open_device(index: int) -> Any:
    """Initialise NVML and return GPU `index`'s handle; NVML is shut down again if that fails."""
    _call("initialising NVML", pynvml.nvmlInit)
    try:
        count = _call("counting GPUs", pynvml.nvmlDeviceGetCount)
        if not 0 <= index < count:  # NVML itself would only say "Invalid Argument"
            raise _unavailable(f"there is no GPU {index} ({count} GPU(s) visible)")
        return _call(f"opening GPU {index}", pynvml.nvmlDeviceGetHandleByIndex, index)
    except BaseException:
        pynvml.nvmlShutdown()
        raise


def nvml_available(index: int = 0) -> str | None:
    """Why GPU `index`'s energy cannot be measured here, or None when it can (lets notebooks skip cells)."""
    try:
        _open_device(index)
    except NvmlError as err:
        return str(err)
    pynvml.nvmlShutdown()
    return None


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_index(uuid: str, fallback: int) -> int:
    """NVML's index of the GPU with this UUID (CUDA_VISIBLE_DEVICES renumbers CUDA's devices); `fallback`
    (torch's index) where NVML or the UUID query is missing."""
    try:
        _call("initialising NVML", pynvml.nvmlInit)
    except NvmlError:
        return fallback
    try:
        for i in range(_call("counting GPUs", pynvml.nvmlDeviceGetCount)):
            found = _text(_call("reading a GPU's UUID", pynvml.nvmlDeviceGetUUID,
                                _call(f"opening GPU {i}", pynvml.nvmlDeviceGetHandleByIndex, i)))
            if found.removeprefix("GPU-") == uuid.removeprefix("GPU-"):
                return i
    except NvmlError:
        pass
    finally:
        pynvml.nvmlShutdown()
    return fallback


def device_index(device: torch.device) -> int:
    """NVML's index of a torch CUDA device (`nvml_index`, by its UUID: CUDA_VISIBLE_DEVICES renumbers CUDA's
    devices, not NVML's)."""
    import torch

    return nvml_index(str(torch.cuda.get_device_properties(device).uuid), device.index or 0)


def device_facts(index: int) -> dict[str, object]:
    """What the fingerprint records of GPU `index` beyond torch's view: driver, SM clocks, power limit,
    persistence mode and whether the energy counter exists. A query this GPU refuses is left out."""
    queries: dict[str, Callable[[Any], object]] = {
        "sm_clock_mhz": lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "sm_clock_max_mhz": lambda h: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM),
        "power_limit_w": lambda h: pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
        "persistence_mode": lambda h: pynvml.nvmlDeviceGetPersistenceMode(h) == pynvml.NVML_FEATURE_ENABLED,
        "energy_counter": lambda h: pynvml.nvmlDeviceGetTotalEnergyConsumption(h) is not None,
    }
    handle = _open_device(index)
    try:
        facts: dict[str, object] = {"driver": _text(_call("reading the driver version",
                                                           pynvml.nvmlSystemGetDriverVersion))}
        for name, query in queries.items():
            try:
                facts[name] = _call(f"reading {name}", query, handle)
            except NvmlError:  # not supported, or not permitted: the fact is unknown, not an error
                facts[name] = None
        return facts
    finally:
        pynvml.nvmlShutdown()


#: the reasons NVML gives for holding a GPU's clocks down that slow a measurement (power cap, thermal, the board's
#: brake), by the name a row stores; the others (idle, an application clock, sync boost) are not a slowdown
SLOWDOWNS = {
    "sw_power_cap": pynvml.nvmlClocksEventReasonSwPowerCap,
    "hw_slowdown": pynvml.nvmlClocksEventReasonHwSlowdown,
    "sw_thermal": pynvml.nvmlClocksEventReasonSwThermalSlowdown,
    "hw_thermal": pynvml.nvmlClocksEventReasonHwThermalSlowdown,
    "hw_power_brake": pynvml.nvmlClocksEventReasonHwPowerBrakeSlowdown,
}


#: the driver's running counts of nanoseconds the GPU was held below its clocks, by cause: what a group's start and
#: end states tell apart when the GPU was slowed while it worked, which the slowdowns read at either idle end miss
VIOLATIONS = {"power_violation_ns": pynvml.NVML_PERF_POLICY_POWER,
              "thermal_violation_ns": pynvml.NVML_PERF_POLICY_THERMAL}


def gpu_state(index: int) -> dict[str, object]:
    """GPU `index`'s state at this moment, as each group of rows stores it at its start and end (the study leaves
    clocks alone, so it records them): SM and memory clocks (MHz), temperature (C), power (W), the slowdowns NVML
    names now (`SLOWDOWNS`) and the running counts of time slowed (`VIOLATIONS`). A query this GPU refuses reads
    None."""
    queries: dict[str, Callable[[Any], object]] = {
        "sm_mhz": lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
        "memory_mhz": lambda h: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM),
        "temperature_c": lambda h: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
        "power_w": lambda h: pynvml.nvmlDeviceGetPowerUsage(h) / 1000.0,
        "slowdowns": lambda h: [name for name, bit in SLOWDOWNS.items()
                                if pynvml.nvmlDeviceGetCurrentClocksEventReasons(h) & bit],
        **{name: (lambda h, policy=policy: pynvml.nvmlDeviceGetViolationStatus(h, policy).violationTime)
           for name, policy in VIOLATIONS.items()},
    }
    handle = _open_device(index)
    try:
        state: dict[str, object] = {}
        for name, query in queries.items():
            try:
                state[name] = _call(f"reading {name}", query, handle)
            except NvmlError:  # not supported, or not permitted: unknown, not an error
                state[name] = None
        return state
    finally:
        pynvml.nvmlShutdown()


def gpu_uuids() -> list[str]:
    """The UUIDs of every GPU NVML sees, whatever CUDA_VISIBLE_DEVICES hides: what names the machine they are in."""
    _call("initialising NVML", pynvml.nvmlInit)
    try:
        return [_text(_call("reading a GPU's UUID", pynvml.nvmlDeviceGetUUID,
                            _call(f"opening GPU {i}", pynvml.nvmlDeviceGetHandleByIndex, i)))
                for i in range(_call("counting GPUs", pynvml.nvmlDeviceGetCount))]
    finally:
        pynvml.nvmlShutdown()


def _probe_period(read: Callable[[], int], clock: Callable[[], float],
                  sleep: Callable[[float], object]) -> float | None:
    """The median gap between successive changes of the energy counter (`read`), over `PERIOD_CHANGES` gaps
    polled every `PERIOD_POLL_S` for at most `PERIOD_PROBE_MAX_S`; None where it changed less than twice."""
    start, last, changed_at = clock(), read(), []
    while len(changed_at) <= PERIOD_CHANGES and clock() - start < PERIOD_PROBE_MAX_S:
        sleep(PERIOD_POLL_S)
        if (value := read()) != last:
            changed_at.append(clock())  # the first change only marks where a period starts
            last = value
    gaps = [b - a for a, b in zip(changed_at, changed_at[1:])]
    return statistics.median(gaps) if gaps else None


def counter_period(index: int = 0, *, clock: Callable[[], float] = time.perf_counter,
                   sleep: Callable[[float], object] = time.sleep) -> float | None:
    """GPU `index`'s energy counter period in seconds, measured (`_probe_period`); None where the counter did not
    change often enough to tell. Raises `NvmlNotSupported` where the GPU has no counter, `NvmlUnavailable`
    without NVML."""
    handle = _open_device(index)
    try:
        return _probe_period(partial(_call, "reading the energy counter", pynvml.nvmlDeviceGetTotalEnergyConsumption,
                                     handle), clock, sleep)
    finally:
        pynvml.nvmlShutdown()


def counter_period_line(index: int = 0) -> str:
    """The smoke check's line on GPU `index`'s energy counter period: measured, or why the windows assume it."""
    assumed = f"energy windows assume ~{ASSUMED_COUNTER_PERIOD_S * 1e3:.0f} ms"
    try:
        period = counter_period(index)
    except NvmlError as err:
        return f"not measured ({err}); {assumed}"
    if period is None:
        return f"the counter changed less than twice in {PERIOD_PROBE_MAX_S:g} s; {assumed}"
    return (f"{period * 1e3:.1f} ms (median of {PERIOD_CHANGES} updates); energy windows last at least "
            f"{WINDOW_PERIODS * period:.2g} s here")


class PerItem(NamedTuple):
    """Energy efficiency stated both ways: joules per item and items per joule."""

    joules_per_item: float | None
    items_per_joule: float | None


def per_item(energy_j: float | None, items: int) -> PerItem:
    """J per item and items per J for `items` processed with `energy_j`; both None when energy is unmeasured."""
    if isinstance(items, bool) or not isinstance(items, int) or items <= 0:
        raise ParameterError(f"items must be a positive integer, got {items!r}")
    if energy_j is None:
        return PerItem(None, None)
    if not energy_j > 0:
        raise ParameterError(f"energy_j must be positive (None when unmeasured), got {energy_j!r}")
    return PerItem(energy_j / items, items / energy_j)


@dataclass(frozen=True)
class GpuMeasurement:
    """What one window measured; `energy_j` is None, and `warning` says why, when it could not be measured."""

    key: str
    duration_s: float
    energy_j: float | None
    energy_source: str  # "counter" or "sampled_power"
    mean_power_w: float  # plain mean of the samples
    peak_power_w: float
    mean_util_pct: float
    peak_memory_bytes: int
    n_samples: int
    warning: str = ""

    def energy_per(self, count: int) -> float | None:
        """Joules per item (per sequence, say) for `count` items processed in this window."""
        return per_item(self.energy_j, count).joules_per_item


@dataclass
class WindowResult:
    """Yielded by `GpuMonitor.window`; `result` is filled in when the block exits."""

    key: str
    result: GpuMeasurement | None = None


class Settled(NamedTuple):
    """What `GpuMonitor.settle` waited: its seconds, whether power came back near the baseline, the last reading."""

    seconds: float
    settled: bool
    power_w: float


class _Sample(NamedTuple):
    t: float
    power_w: float
    util_pct: float
    memory_bytes: int


@dataclass
class _OpenWindow:
    start: float
    energy_mj: int | None
    samples: list[_Sample]
    error: NvmlError | None = None  # first failure of the background sampler, raised at the end


class GpuMonitor:
    """Energy, power, utilisation and memory of one GPU over named windows, which may overlap.

    Pass `sync=torch.cuda.synchronize`: a window then starts after earlier queued work and ends after
    its own, instead of measuring how fast work was queued. Use it as a context manager, or `close()`.
    `counter_period_s` is the energy counter's period where known already (it is measured on opening otherwise,
    which takes up to `PERIOD_PROBE_MAX_S`); `clock` and `sleep` are the host's (a test may pass fake ones).
    """

    def __init__(self, index: int = 0, *, sync: Sync | None = None, sample_interval_s: float = 0.02,
                 counter_period_s: float | None = None, clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], object] = time.sleep) -> None:
        if isinstance(index, bool) or not isinstance(index, int):
            raise ParameterError(f"GPU index must be an integer, got {index!r}")
        if not sample_interval_s > 0:
            raise ParameterError(f"sample_interval_s must be positive, got {sample_interval_s!r}")
        self.index = index
        self._sync = sync
        self._interval = sample_interval_s
        self._clock = clock
        self._sleep = sleep
        self._handle = _open_device(index)
        try:
            self.energy_source = self._energy_source()
            if counter_period_s is None and self.energy_source == "counter":
                counter_period_s = _probe_period(self._read_energy, clock, sleep)
                if counter_period_s is None:
                    log.warning("GPU %d's energy counter changed less than twice in %g s; its period is assumed to "
                                "be %g s", index, PERIOD_PROBE_MAX_S, ASSUMED_COUNTER_PERIOD_S)
        except BaseException:
            pynvml.nvmlShutdown()
            raise
        #: the counter's period as measured (or given); None where it was not (no counter, or it did not change)
        self.counter_period_s = counter_period_s
        self._lock = threading.Lock()  # guards _open; every NVML read for a window happens under it
        self._open: dict[str, _OpenWindow] = {}
        self._closed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_loop, name=f"nvml-sampler-{index}", daemon=True)
        self._thread.start()

    @property
    def period_s(self) -> float:
        """The counter period this monitor goes by: measured (or given), else `ASSUMED_COUNTER_PERIOD_S`."""
        return self.counter_period_s or ASSUMED_COUNTER_PERIOD_S

    @property
    def min_window_s(self) -> float:
        """The shortest window whose energy this monitor measures to about a tenth: `WINDOW_PERIODS` periods."""
        return WINDOW_PERIODS * self.period_s

    def power_w(self) -> float:
        """The GPU's power draw now (W), as NVML reports it (on Ampere and newer, its mean over the last second)."""
        return _call("reading power", pynvml.nvmlDeviceGetPowerUsage, self._handle) / 1e3

    def baseline_power_w(self, seconds: float = BASELINE_S) -> float:
        """The median power over `seconds` of no work: the level `settle` waits for."""
        start, readings = self._clock(), [self.power_w()]
        while self._clock() - start < seconds:
            self._sleep(SETTLE_POLL_S)
            readings.append(self.power_w())
        return statistics.median(readings)

    def settle(self, baseline_w: float, most_s: float = SETTLE_MAX_S) -> Settled:
        """Wait until power is back within `SETTLE_TOLERANCE` above `baseline_w`, for at most `most_s`: an idle
        window measured while the GPU still cools down from earlier work reads idle power too high, and so the
        energy above idle of the window charged with it too low."""
        start = self._clock()
        while True:
            power, waited = self.power_w(), self._clock() - start
            settled = power <= baseline_w * (1 + SETTLE_TOLERANCE)
            if settled or waited >= most_s:
                return Settled(waited, settled, power)
            self._sleep(SETTLE_POLL_S)

    def begin_window(self, key: str) -> None:
        """Open window `key`, after a device sync so that earlier queued work is not counted in it."""
        self._check_usable()
        if key in self._open:
            raise ParameterError(f"window {key!r} is already open")
        if self._sync is not None:
            self._sync()
        with self._lock:
            start = self._clock()
            energy = self._read_energy()
            self._open[key] = _OpenWindow(start, energy, [self._sample(start)])

    def end_window(self, key: str) -> GpuMeasurement:
        """Close window `key`, after a device sync so that all of its queued work is counted."""
        self._check_usable()
        if key not in self._open:
            raise ParameterError(f"no open window {key!r}; open windows: {sorted(self._open) or 'none'}")
        if self._sync is not None:
            self._sync()
        with self._lock:
            window = self._open.pop(key)
            energy = self._read_energy()
            end = self._clock()
            window.samples.append(self._sample(end))
        if window.error is not None:
            raise window.error
        return self._measurement(key, window, end - window.start, energy)

    @contextmanager
    def window(self, key: str) -> Iterator[WindowResult]:
        """`with monitor.window("fwd") as w: ...`, then read `w.result`; the window closes even on error."""
        holder = WindowResult(key)
        self.begin_window(key)
        try:
            yield holder
        finally:
            holder.result = self.end_window(key)

    def close(self) -> None:
        """Stop the sampler and shut NVML down; windows still open are discarded with a warning."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._thread.join()
        if self._open:
            log.warning("GpuMonitor closed with windows still open, discarded: %s", sorted(self._open))
            self._open.clear()
        _call("shutting NVML down", pynvml.nvmlShutdown)

    def __enter__(self) -> GpuMonitor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_usable(self) -> None:
        if self._closed:
            raise ParameterError("this GpuMonitor is closed; create a new one")

    def _energy_source(self) -> str:
        """Where energy comes from: the GPU's energy counter ("counter"), else its sampled power."""
        try:
            _call("reading the energy counter", pynvml.nvmlDeviceGetTotalEnergyConsumption, self._handle)
        except NvmlNotSupported:
            log.info("GPU %d has no energy counter; energy is integrated from sampled power", self.index)
            return "sampled_power"
        return "counter"

    def _read_energy(self) -> int | None:
        if self.energy_source != "counter":
            return None
        return _call("reading the energy counter", pynvml.nvmlDeviceGetTotalEnergyConsumption, self._handle)

    def _sample(self, t: float) -> _Sample:
        power = self.power_w()
        util = _call("reading utilisation", pynvml.nvmlDeviceGetUtilizationRates, self._handle).gpu
        memory = _call("reading memory", pynvml.nvmlDeviceGetMemoryInfo, self._handle).used
        return _Sample(t, power, float(util), int(memory))

    def _sample_loop(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                if not self._open:
                    continue
                try:
                    sample = self._sample(self._clock())
                except NvmlError as err:
                    for window in self._open.values():
                        window.error = window.error or err
                    continue
                for window in self._open.values():
                    window.samples.append(sample)

    def _measurement(self, key: str, window: _OpenWindow, duration: float,
                     energy_end: int | None) -> GpuMeasurement:
        samples = window.samples
        energy_j, warning = None, ""
        if duration < self.period_s:
            warning = (f"window {key!r} was {duration * 1e3:.1f} ms, shorter than the "
                       f"~{self.period_s * 1e3:.0f} ms energy counter period; "
                       "lengthen it (e.g. repeat the work) to measure energy")
        elif window.energy_mj is None or energy_end is None:
            energy_j = sum((a.power_w + b.power_w) / 2 * (b.t - a.t) for a, b in zip(samples, samples[1:]))
        elif energy_end <= window.energy_mj:
            warning = (f"the energy counter did not increase over window {key!r} ({duration * 1e3:.1f} ms); "
                       "lengthen it (e.g. repeat the work) to measure energy")
        else:
            energy_j = (energy_end - window.energy_mj) / 1e3
        if warning:
            log.warning(warning)
        powers = [s.power_w for s in samples]
        return GpuMeasurement(
            key=key, duration_s=duration, energy_j=energy_j, energy_source=self.energy_source,
            mean_power_w=sum(powers) / len(powers), peak_power_w=max(powers),
            mean_util_pct=sum(s.util_pct for s in samples) / len(samples),
            peak_memory_bytes=max(s.memory_bytes for s in samples), n_samples=len(samples), warning=warning,
        )


def idle_power(monitor: GpuMonitor, seconds: float = 1.0) -> GpuMeasurement:
    """Measure a window with no work in it: the baseline to subtract before charging energy to a model.

    The idle power is `mean_power_w`, or more exactly `energy_j / duration_s` where energy was measured.
    """
    with monitor.window("idle") as holder:
        time.sleep(seconds)
    assert holder.result is not None  # set by window() on exit
    return holder.result


# --- windows of repeated work, as the energy claim uses them ---------------------------------------

MAX_ATTEMPTS = 5
MIN_REPETITIONS = 3
#: a window is sized this much longer than asked, so that one whose steps run a little faster than sized
#: still lasts `window_s` instead of running again
SIZING_MARGIN = 1.1


def repetitions(step_s: float, window_s: float) -> int:
    """How many steps of `step_s` fill a window of `window_s`, with `SIZING_MARGIN` (at least MIN_REPETITIONS)."""
    if not step_s > 0:
        return MIN_REPETITIONS
    return max(MIN_REPETITIONS, math.ceil(SIZING_MARGIN * window_s / step_s))


def _window_steps(step: Callable[[], object], n: int) -> None:
    """N steps queued with no sync between them (`timing.Queued`): the loop inside an energy window, whose
    closing sync is its only one."""
    Queued(step, n)()


def host_step_s(step: Callable[[], object], sync: Sync | None, n: int) -> float:
    """Wall time per step on the host over N steps run as a window runs them, queued and synced once at the end:
    what sizes a window, since a device-timed median leaves out the launches a launch-bound step is made of."""
    if sync is not None:
        sync()  # earlier queued work is not this trial's
    start = time.perf_counter()
    _window_steps(step, n)
    if sync is not None:
        sync()
    return (time.perf_counter() - start) / n


def energy_window(step: Callable[[], object], monitor: GpuMonitor, *, n: int, window_s: float,
                  key: str = "energy") -> tuple[int, GpuMeasurement]:
    """Run `step` N times inside one monitor window lasting at least `window_s` (and `monitor.min_window_s`).

    The steps are queued with no sync between them; the monitor's sync closing the window is the only one. Synced
    one by one, launch-bound steps left the GPU idle while the host launched each and waited for it, so such a
    window measured mostly an idle GPU. Each step's time is then the window's duration / N.

    A window that comes out shorter (the steps ran faster than sized) runs again with N scaled
    up to fill `window_s` (plus `SIZING_MARGIN`); one whose energy the counter did not measure runs again
    with N doubled. After MAX_ATTEMPTS the window still unmeasured or short raises RuntimeError saying why,
    so no number is stored for a window shorter than asked. Returns N and the window that counted.
    """
    window_s = max(window_s, monitor.min_window_s)
    for _ in range(MAX_ATTEMPTS):
        with monitor.window(key) as holder:
            _window_steps(step, n)
        result = holder.result
        if result.energy_j is not None and result.duration_s >= window_s:
            return n, result
        if result.energy_j is None:
            n *= 2
        else:
            n = max(n + 1, math.ceil(n * SIZING_MARGIN * window_s / max(result.duration_s, 1e-9)))
    if result.energy_j is None:
        raise RuntimeError(result.warning or f"window {key!r} energy was not measured")
    raise RuntimeError(f"window {key!r} lasted {result.duration_s:.3f} s after {MAX_ATTEMPTS} attempts, "
                       f"shorter than the {window_s:g} s asked; its energy is not stored")


def idle_window(monitor: GpuMonitor, seconds: float) -> GpuMeasurement:
    """Idle power over an empty window of `seconds` (at least `monitor.min_window_s`), doubled until the energy
    counter measures it."""
    seconds = max(seconds, monitor.min_window_s)
    for _ in range(MAX_ATTEMPTS):
        gm = idle_power(monitor, seconds)
        if gm.energy_j is not None:
            return gm
        seconds *= 2
    raise RuntimeError(gm.warning or "the idle window's energy was not measured")
