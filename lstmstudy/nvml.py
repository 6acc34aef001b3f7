"""GPU energy and power over named windows of work, read from NVML (the library behind nvidia-smi).

Modelled on ml-energy/Zeus: `begin_window(key)` ... `end_window(key)` returns a `GpuMeasurement`.
Energy comes from the GPU's own energy counter (Volta and newer) where there is one, else from
integrating the power that a background thread samples. The counter updates only about every
100 ms, so a shorter window reports `energy_j=None` and a warning instead of a zero or a guess:
repeat the work until the window is long enough (the energy claim asks for `MIN_ENERGY_WINDOW_S`,
ten counter periods, at least).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import pynvml

from lstmstudy.errors import DeviceUnavailable, ParameterError, StudyError
from lstmstudy.timing import Measurement
from lstmstudy.timing import measure as time_call

log = logging.getLogger(__name__)

ENERGY_COUNTER_PERIOD_S = 0.1
"""How often NVML's energy counter updates; energy over a shorter window is not measurable."""
MIN_ENERGY_WINDOW_S = 10 * ENERGY_COUNTER_PERIOD_S
"""The shortest window whose energy the study stores: the counter can be up to one period stale at each
end of a window, so over ten periods a window's energy is off by at most about a tenth, at random from
one window to the next, which the interval over repeated windows then carries."""

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
    """

    def __init__(self, index: int = 0, *, sync: Sync | None = None, sample_interval_s: float = 0.02,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if isinstance(index, bool) or not isinstance(index, int):
            raise ParameterError(f"GPU index must be an integer, got {index!r}")
        if not sample_interval_s > 0:
            raise ParameterError(f"sample_interval_s must be positive, got {sample_interval_s!r}")
        self.index = index
        self._sync = sync
        self._interval = sample_interval_s
        self._clock = clock
        self._handle = _open_device(index)
        try:
            _call("reading the energy counter", pynvml.nvmlDeviceGetTotalEnergyConsumption, self._handle)
            self.energy_source = "counter"
        except NvmlNotSupported:
            self.energy_source = "sampled_power"
            log.info("GPU %d has no energy counter; energy is integrated from sampled power", index)
        except BaseException:
            pynvml.nvmlShutdown()
            raise
        self._lock = threading.Lock()  # guards _open; every NVML read for a window happens under it
        self._open: dict[str, _OpenWindow] = {}
        self._closed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_loop, name=f"nvml-sampler-{index}", daemon=True)
        self._thread.start()

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

    def _read_energy(self) -> int | None:
        if self.energy_source != "counter":
            return None
        return _call("reading the energy counter", pynvml.nvmlDeviceGetTotalEnergyConsumption, self._handle)

    def _sample(self, t: float) -> _Sample:
        power_mw = _call("reading power", pynvml.nvmlDeviceGetPowerUsage, self._handle)
        util = _call("reading utilisation", pynvml.nvmlDeviceGetUtilizationRates, self._handle).gpu
        memory = _call("reading memory", pynvml.nvmlDeviceGetMemoryInfo, self._handle).used
        return _Sample(t, power_mw / 1e3, float(util), int(memory))

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
        if duration < ENERGY_COUNTER_PERIOD_S:
            warning = (f"window {key!r} was {duration * 1e3:.1f} ms, shorter than the "
                       f"~{ENERGY_COUNTER_PERIOD_S * 1e3:.0f} ms energy counter period; "
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


def _window_steps(step: Callable[[], object], sync: Sync | None, n: int) -> Measurement:
    """N synced, individually timed steps: the loop inside an energy window."""
    return time_call(step, sync=sync, warmup=0, min_time=0.0, max_time=float("inf"), min_samples=n, max_samples=n)


def host_step_s(step: Callable[[], object], sync: Sync | None, n: int) -> float:
    """Wall time per step on the host over N steps run as a window runs them: the launch, the sync and the
    timing around each step included, which a device-timed (CUDA event) median leaves out."""
    start = time.perf_counter()
    _window_steps(step, sync, n)
    return (time.perf_counter() - start) / n


def energy_window(step: Callable[[], object], sync: Sync | None, monitor: GpuMonitor, *, n: int, window_s: float,
                  key: str = "energy") -> tuple[Measurement, GpuMeasurement]:
    """Run `step` N times (each timed and synced) inside one monitor window lasting at least `window_s`.

    A window that comes out shorter (the steps ran faster than sized) runs again with N scaled
    up to fill `window_s` (plus `SIZING_MARGIN`); one whose energy the counter did not measure runs again
    with N doubled. After MAX_ATTEMPTS the window still unmeasured or short raises RuntimeError saying why,
    so no number is stored for a window shorter than asked. The returned `Measurement` holds the N step
    times of the window that counted.
    """
    for _ in range(MAX_ATTEMPTS):
        with monitor.window(key) as holder:
            m = _window_steps(step, sync, n)
        result = holder.result
        if result.energy_j is not None and result.duration_s >= window_s:
            return m, result
        if result.energy_j is None:
            n *= 2
        else:
            n = max(n + 1, math.ceil(n * SIZING_MARGIN * window_s / max(result.duration_s, 1e-9)))
    if result.energy_j is None:
        raise RuntimeError(result.warning or f"window {key!r} energy was not measured")
    raise RuntimeError(f"window {key!r} lasted {result.duration_s:.3f} s after {MAX_ATTEMPTS} attempts, "
                       f"shorter than the {window_s:g} s asked; its energy is not stored")


def idle_window(monitor: GpuMonitor, seconds: float) -> GpuMeasurement:
    """Idle power over an empty window of `seconds`, doubled until the energy counter measures it."""
    for _ in range(MAX_ATTEMPTS):
        gm = idle_power(monitor, seconds)
        if gm.energy_j is not None:
            return gm
        seconds *= 2
    raise RuntimeError(gm.warning or "the idle window's energy was not measured")

