"""NVML energy windows against a fake `pynvml` and a fake clock, so every branch runs without a GPU and nothing
waits on the wall clock: the counter's period measured, the wait for power to settle, one sync per window of
queued steps; one real-GPU test."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import pynvml
import pytest
import torch

from lstmstudy import nvml as nvml_mod
from lstmstudy.errors import DeviceUnavailable, ParameterError, StudyError
from lstmstudy.nvml import (
    ASSUMED_COUNTER_PERIOD_S,
    GpuMeasurement,
    GpuMonitor,
    NvmlError,
    NvmlNotSupported,
    NvmlPermission,
    NvmlUnavailable,
    idle_power,
    nvml_available,
    per_item,
)

SLOW_SAMPLER = 60.0  # the background sampler never fires: windows hold just their begin and end samples


class FakeNVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return f"fake NVML error {self.value}"


class FakeNvml:
    """Stands in for the pynvml module: readings the test sets, calls logged in order, injected failures."""

    NVMLError = FakeNVMLError

    def __init__(self) -> None:
        self.log: list[str] = []
        self.fail: dict[str, int] = {}  # logged call name -> NVML_ERROR_* code it raises
        self.gpus = 1
        self.energy_mj = 1_000_000
        self.power_mw = 100_000
        self.util = 40
        self.memory = 2**30

    def _call(self, name: str) -> None:
        self.log.append(name)
        if name in self.fail:
            raise FakeNVMLError(self.fail[name])

    def nvmlInit(self) -> None:
        self._call("init")

    def nvmlShutdown(self) -> None:
        self._call("shutdown")

    def nvmlDeviceGetCount(self) -> int:
        self._call("count")
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        self._call("handle")
        return f"gpu{index}"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: str) -> int:
        self._call("energy")
        return self.energy_mj

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:
        self._call("power")
        return self.power_mw

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> SimpleNamespace:
        self._call("util")
        return SimpleNamespace(gpu=self.util, memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> SimpleNamespace:
        self._call("memory")
        return SimpleNamespace(used=self.memory, free=0, total=self.memory)

    # what the fingerprint reads
    NVML_CLOCK_SM = 1
    NVML_FEATURE_ENABLED = 1
    uuids = ("GPU-aaaa", "GPU-bbbb")

    def nvmlDeviceGetUUID(self, handle: str) -> bytes:
        self._call("uuid")
        return self.uuids[int(handle[3:])].encode()

    def nvmlSystemGetDriverVersion(self) -> str:
        self._call("driver")
        return "580.159.04"

    def nvmlDeviceGetClockInfo(self, handle: str, clock: int) -> int:
        self._call("clock")
        return 1980

    def nvmlDeviceGetMaxClockInfo(self, handle: str, clock: int) -> int:
        self._call("max_clock")
        return 1980

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: str) -> int:
        self._call("power_limit")
        return 700_000

    def nvmlDeviceGetPersistenceMode(self, handle: str) -> int:
        self._call("persistence")
        return 1


for _name, _code in vars(pynvml).items():  # the real error codes
    if _name.startswith("NVML_ERROR_"):
        setattr(FakeNvml, _name, _code)


class Clock:
    """A clock the test moves by hand, or by sleeping on it; each read is logged, to check it comes after the
    sync."""

    def __init__(self, log: list[str]) -> None:
        self.t = 0.0
        self.log = log

    def __call__(self) -> float:
        self.log.append("clock")
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    fake = FakeNvml()
    monkeypatch.setattr(nvml_mod, "pynvml", fake)
    return fake


@pytest.fixture
def clock(fake: FakeNvml) -> Clock:
    return Clock(fake.log)


def monitor(fake: FakeNvml, clock: Clock, **kwargs) -> GpuMonitor:
    """A monitor on the fake clock that goes by the assumed counter period, unless told otherwise."""
    kwargs.setdefault("counter_period_s", ASSUMED_COUNTER_PERIOD_S)
    return GpuMonitor(clock=clock, sleep=clock.sleep, sample_interval_s=SLOW_SAMPLER, **kwargs)


def test_counter_energy(fake, clock):
    with monitor(fake, clock) as mon:
        assert mon.energy_source == "counter"
        mon.begin_window("fwd")
        fake.energy_mj += 50_000
        fake.power_mw, fake.util, fake.memory = 300_000, 80, 3 * 2**30
        clock.t = 0.5
        m = mon.end_window("fwd")
    assert m == GpuMeasurement(key="fwd", duration_s=0.5, energy_j=50.0, energy_source="counter",
                               mean_power_w=200.0, peak_power_w=300.0, mean_util_pct=60.0,
                               peak_memory_bytes=3 * 2**30, n_samples=2, warning="")
    assert fake.log[-1] == "shutdown"


def test_sampled_power_fallback_when_counter_not_supported(fake, clock):
    fake.fail["energy"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    with monitor(fake, clock) as mon:
        assert mon.energy_source == "sampled_power"
        mon.begin_window("fwd")  # 100 W at t=0
        fake.power_mw = 300_000
        clock.t = 0.5  # 300 W at t=0.5
        m = mon.end_window("fwd")
    assert m.energy_source == "sampled_power"
    assert m.energy_j == pytest.approx((100 + 300) / 2 * 0.5)
    assert m.warning == ""


@pytest.mark.parametrize("unsupported", [False, True], ids=["counter", "sampled_power"])
def test_short_window_reports_no_energy_and_says_why(fake, clock, unsupported, caplog):
    if unsupported:
        fake.fail["energy"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    with monitor(fake, clock) as mon:
        mon.begin_window("step")
        fake.energy_mj += 3_000
        clock.t = 0.05
        with caplog.at_level(logging.WARNING, logger="lstmstudy.nvml"):
            m = mon.end_window("step")
    assert m.energy_j is None
    assert m.energy_per(10) is None
    assert "50.0 ms" in m.warning and f"~{ASSUMED_COUNTER_PERIOD_S * 1e3:.0f} ms" in m.warning
    assert "repeat the work" in m.warning
    assert m.warning in caplog.text


def test_unchanged_counter_reports_no_energy(fake, clock):
    with monitor(fake, clock) as mon:
        mon.begin_window("fwd")
        clock.t = 0.3
        m = mon.end_window("fwd")
    assert m.energy_j is None
    assert "did not increase" in m.warning and "300.0 ms" in m.warning


def test_sync_runs_before_the_clock_and_counters_at_begin_and_end(fake, clock):
    def sync() -> None:
        fake.log.append("sync")

    with monitor(fake, clock, sync=sync) as mon:
        fake.log.clear()
        mon.begin_window("fwd")
        assert fake.log[:3] == ["sync", "clock", "energy"]
        fake.log.clear()
        clock.t = 0.2
        mon.end_window("fwd")
        assert fake.log[:3] == ["sync", "energy", "clock"]


def test_overlapping_windows_and_bad_keys(fake, clock):
    with monitor(fake, clock) as mon:
        mon.begin_window("epoch")
        fake.energy_mj += 10_000
        clock.t = 1.0
        mon.begin_window("batch")
        with pytest.raises(ParameterError, match="'batch' is already open"):
            mon.begin_window("batch")
        fake.energy_mj += 5_000
        clock.t = 2.0
        assert mon.end_window("batch").energy_j == pytest.approx(5.0)
        assert mon.end_window("epoch").energy_j == pytest.approx(15.0)
        with pytest.raises(ParameterError, match="no open window 'epoch'; open windows: none"):
            mon.end_window("epoch")


def test_window_context_manager_fills_result_and_closes_on_error(fake, clock):
    with monitor(fake, clock) as mon:
        with mon.window("fwd") as w:
            assert w.result is None
            fake.energy_mj += 2_000
            clock.t = 0.2
        assert w.result is not None and w.result.energy_j == pytest.approx(2.0)
        with pytest.raises(RuntimeError), mon.window("boom"):
            raise RuntimeError("work failed")
        mon.begin_window("boom")  # the failed block's window was closed, so the key is free again


@pytest.mark.parametrize("code", ["NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_DRIVER_NOT_LOADED",
                                  "NVML_ERROR_UNINITIALIZED"])
def test_unavailable_when_nvml_cannot_start(fake, code):
    fake.fail["init"] = getattr(pynvml, code)
    with pytest.raises(NvmlUnavailable, match="NVML is not available here: .*energy is not measured") as info:
        GpuMonitor()
    assert isinstance(info.value, DeviceUnavailable) and isinstance(info.value, StudyError)
    assert nvml_available() == str(info.value)


def test_unavailable_for_a_gpu_index_that_does_not_exist(fake):
    with pytest.raises(NvmlUnavailable, match=r"there is no GPU 3 \(1 GPU\(s\) visible\)"):
        GpuMonitor(3)
    assert fake.log[-1] == "shutdown"  # NVML was initialised, so it is shut down again
    assert "no GPU 3" in nvml_available(3)


def test_nvml_available_when_it_is(fake):
    assert nvml_available() is None
    assert fake.log == ["init", "count", "handle", "shutdown"]


@pytest.mark.parametrize(("code", "error"), [
    ("NVML_ERROR_NO_PERMISSION", NvmlPermission),
    ("NVML_ERROR_NOT_SUPPORTED", NvmlNotSupported),
    ("NVML_ERROR_GPU_IS_LOST", NvmlUnavailable),
    ("NVML_ERROR_UNKNOWN", NvmlError),
])
def test_error_codes_map_to_typed_errors(fake, code, error):
    fake.fail["handle"] = getattr(pynvml, code)
    with pytest.raises(error, match="opening GPU 0") as info:
        GpuMonitor()
    assert type(info.value) is error
    assert fake.log[-1] == "shutdown"


def test_permission_error_reading_the_counter_or_power(fake, clock):
    fake.fail["energy"] = pynvml.NVML_ERROR_NO_PERMISSION
    with pytest.raises(NvmlPermission, match="NVML refused reading the energy counter"):
        monitor(fake, clock)
    assert fake.log[-1] == "shutdown"
    del fake.fail["energy"]
    with monitor(fake, clock) as mon:
        fake.fail["power"] = pynvml.NVML_ERROR_NO_PERMISSION
        with pytest.raises(NvmlPermission, match="reading power"):
            mon.begin_window("fwd")
        del fake.fail["power"]
        mon.begin_window("fwd")  # the failed begin left no window behind


def test_background_sampler_failure_is_raised_when_the_window_ends(fake):
    with GpuMonitor(sample_interval_s=0.002, counter_period_s=ASSUMED_COUNTER_PERIOD_S) as mon:
        mon.begin_window("fwd")
        fake.fail["power"] = pynvml.NVML_ERROR_GPU_IS_LOST
        deadline = time.monotonic() + 5
        while fake.log.count("power") < 3 and time.monotonic() < deadline:  # wait for a failed sample
            time.sleep(0.005)
        del fake.fail["power"]
        with pytest.raises(NvmlUnavailable, match="GPU is lost|fake NVML error 15"):
            mon.end_window("fwd")


def test_idle_power_with_the_real_sampler(fake):
    fake.fail["energy"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    fake.power_mw = 30_000
    with GpuMonitor(sample_interval_s=0.01) as mon:
        m = idle_power(mon, seconds=0.15)
    assert m.key == "idle" and m.duration_s >= 0.15 and m.warning == ""
    assert m.n_samples > 2  # begin, end and the background samples between them
    assert m.mean_power_w == pytest.approx(30.0) and m.peak_power_w == pytest.approx(30.0)
    assert m.energy_j == pytest.approx(30.0 * m.duration_s)
    assert m.mean_util_pct == 40.0 and m.peak_memory_bytes == 2**30


def test_per_item_arithmetic():
    assert per_item(50.0, 1000) == pytest.approx((0.05, 20.0))
    assert per_item(None, 1000) == (None, None)
    m = GpuMeasurement("fwd", 1.0, 50.0, "counter", 50.0, 60.0, 90.0, 1, 50)
    assert m.energy_per(1000) == pytest.approx(0.05)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ParameterError, match="items must be a positive integer"):
            per_item(50.0, bad)
    with pytest.raises(ParameterError, match="energy_j must be positive"):
        per_item(0.0, 10)


def test_bad_arguments_and_closed_monitor(fake, clock, caplog):
    with pytest.raises(ParameterError, match="GPU index"):
        GpuMonitor("0")
    with pytest.raises(ParameterError, match="sample_interval_s"):
        GpuMonitor(sample_interval_s=0)
    mon = monitor(fake, clock)
    mon.begin_window("left-open")
    with caplog.at_level(logging.WARNING, logger="lstmstudy.nvml"):
        mon.close()
    assert "left-open" in caplog.text
    mon.close()  # closing twice is harmless
    assert fake.log.count("shutdown") == 1
    with pytest.raises(ParameterError, match="closed"):
        mon.begin_window("fwd")


def test_no_driver_here_is_reported_not_crashed():
    reason = nvml_available()
    if reason is None:
        pytest.skip("NVML works on this machine (a GPU and driver are present)")
    assert "NVML is not available here" in reason
    with pytest.raises(NvmlUnavailable, match="energy is not measured on this machine"):
        GpuMonitor()


@pytest.mark.gpu
def test_real_gpu_energy():
    reason = nvml_available(torch.cuda.current_device())
    if reason is not None:
        pytest.skip(reason)
    x = torch.randn(2048, 2048, device="cuda")
    with GpuMonitor(torch.cuda.current_device(), sync=torch.cuda.synchronize) as mon:
        idle = idle_power(mon, seconds=0.3)
        with mon.window("matmul") as w:
            stop = time.perf_counter() + 0.5
            while time.perf_counter() < stop:
                x @ x
                torch.cuda.synchronize()
    m = w.result
    assert m is not None and m.warning == "" and m.energy_j is not None and m.energy_j > 0
    assert m.duration_s >= 0.5 and m.n_samples > 3
    assert m.peak_power_w >= m.mean_power_w > 0 and m.peak_memory_bytes > 0
    assert idle.mean_power_w > 0


def test_device_facts_for_the_fingerprint(fake):
    assert nvml_mod.device_facts(0) == {"driver": "580.159.04", "sm_clock_mhz": 1980, "sm_clock_max_mhz": 1980,
                                        "power_limit_w": 700.0, "persistence_mode": True, "energy_counter": True}
    assert fake.log[-1] == "shutdown"


def test_a_fact_this_gpu_refuses_is_unknown_not_an_error(fake):
    fake.fail["persistence"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    fake.fail["power_limit"] = pynvml.NVML_ERROR_NO_PERMISSION
    facts = nvml_mod.device_facts(0)
    assert facts["persistence_mode"] is None and facts["power_limit_w"] is None and facts["sm_clock_mhz"] == 1980


def test_nvml_index_matches_the_uuid_whatever_cuda_calls_it(fake):
    fake.gpus = 2
    assert nvml_mod.nvml_index("GPU-bbbb", fallback=0) == 1
    assert nvml_mod.nvml_index("bbbb", fallback=0) == 1  # torch's UUIDs come without the prefix
    assert nvml_mod.nvml_index("GPU-cccc", fallback=0) == 0
    fake.fail["init"] = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    assert nvml_mod.nvml_index("GPU-bbbb", fallback=3) == 3



# --- the counter's period, measured ---------------------------------------------------------------

def stepping_counter(fake: FakeNvml, clock: Clock, period_s: float, step_mj: int = 7_000) -> None:
    """The fake's energy counter moves by `step_mj` once every `period_s` of the fake clock, as NVML's does."""
    def energy(handle: str) -> int:
        fake.log.append("energy")
        return fake.energy_mj + step_mj * int(clock.t / period_s + 1e-9)

    fake.nvmlDeviceGetTotalEnergyConsumption = energy


@pytest.mark.parametrize("period_s", [0.025, 0.1])
def test_a_monitor_measures_the_counter_period_when_it_opens(fake, clock, period_s):
    stepping_counter(fake, clock, period_s)
    with monitor(fake, clock, counter_period_s=None) as mon:
        assert mon.counter_period_s == pytest.approx(period_s, abs=nvml_mod.PERIOD_POLL_S)
        assert mon.period_s == mon.counter_period_s
        assert mon.min_window_s == pytest.approx(nvml_mod.WINDOW_PERIODS * mon.counter_period_s)
    # the probe stopped after the changes it needed, well within its bound
    assert clock.t <= (nvml_mod.PERIOD_CHANGES + 2) * period_s < nvml_mod.PERIOD_PROBE_MAX_S
    assert nvml_mod.counter_period(0, clock=clock, sleep=clock.sleep) == pytest.approx(period_s,
                                                                                       abs=nvml_mod.PERIOD_POLL_S)


def test_a_counter_that_does_not_move_leaves_the_period_assumed(fake, clock, caplog):
    with caplog.at_level(logging.WARNING, logger="lstmstudy.nvml"), monitor(fake, clock, counter_period_s=None) as mon:
        assert mon.counter_period_s is None and mon.period_s == ASSUMED_COUNTER_PERIOD_S
        assert mon.min_window_s == pytest.approx(nvml_mod.MIN_ENERGY_WINDOW_S)
    assert nvml_mod.PERIOD_PROBE_MAX_S <= clock.t < nvml_mod.PERIOD_PROBE_MAX_S + 0.01  # bounded
    assert "changed less than twice" in caplog.text


def test_without_a_counter_there_is_no_period_to_measure(fake, clock):
    fake.fail["energy"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    with monitor(fake, clock, counter_period_s=None) as mon:
        assert mon.counter_period_s is None and mon.period_s == ASSUMED_COUNTER_PERIOD_S
    assert clock.t == 0.0  # no probe
    with pytest.raises(NvmlNotSupported, match="energy counter"):
        nvml_mod.counter_period(0, clock=clock, sleep=clock.sleep)
    assert fake.log[-1] == "shutdown"


def test_the_smoke_check_line_says_the_period_or_why_it_is_assumed(fake, monkeypatch):
    fake.fail["energy"] = pynvml.NVML_ERROR_NOT_SUPPORTED  # fails before any probing on the wall clock
    line = nvml_mod.counter_period_line(0)
    assert line.startswith("not measured (this GPU does not support reading the energy counter")
    assert line.endswith("energy windows assume ~100 ms")
    monkeypatch.setattr(nvml_mod, "counter_period", lambda index: 0.025)
    assert nvml_mod.counter_period_line(0) == "25.0 ms (median of 5 updates); energy windows last at least 0.25 s here"
    monkeypatch.setattr(nvml_mod, "counter_period", lambda index: None)
    line = nvml_mod.counter_period_line(0)
    assert line.startswith("the counter changed less than twice") and line.endswith("energy windows assume ~100 ms")


def test_the_short_window_warning_uses_the_measured_period(fake, clock):
    with monitor(fake, clock, counter_period_s=0.025) as mon:
        mon.begin_window("fwd")
        fake.energy_mj += 3_000
        clock.t = 0.05  # two measured periods, half the assumed one
        assert mon.end_window("fwd").energy_j == pytest.approx(3.0)
        mon.begin_window("step")
        clock.t += 0.02
        assert "shorter than the ~25 ms energy counter period" in mon.end_window("step").warning


# --- waiting for power to settle ------------------------------------------------------------------

def power_until(fake: FakeNvml, clock: Clock, busy_w: float, idle_w: float, cool_s: float) -> None:
    """The fake's power reads `busy_w` until `cool_s` on the fake clock, `idle_w` after."""
    def power(handle: str) -> int:
        fake.log.append("power")
        return round(1000 * (busy_w if clock.t < cool_s else idle_w))

    fake.nvmlDeviceGetPowerUsage = power


def test_settle_returns_once_power_is_back_near_the_baseline(fake, clock):
    power_until(fake, clock, busy_w=180.0, idle_w=126.0, cool_s=0.7)
    with monitor(fake, clock) as mon:
        settled = mon.settle(baseline_w=124.0)  # 126 W is within 5% of 124 W
    assert settled.settled and settled.power_w == pytest.approx(126.0)
    assert 0.7 <= settled.seconds < 0.7 + nvml_mod.SETTLE_POLL_S + 1e-9


def test_settle_gives_up_at_its_bound_and_says_so(fake, clock):
    power_until(fake, clock, busy_w=147.0, idle_w=124.0, cool_s=60.0)  # cools down long after the bound
    with monitor(fake, clock) as mon:
        settled = mon.settle(baseline_w=124.0)
    assert not settled.settled and settled.power_w == pytest.approx(147.0)
    assert nvml_mod.SETTLE_MAX_S <= settled.seconds < nvml_mod.SETTLE_MAX_S + nvml_mod.SETTLE_POLL_S + 1e-9
    with monitor(fake, clock) as mon:
        assert mon.settle(baseline_w=124.0, most_s=0.0).seconds == 0.0  # one reading, no wait


def test_the_baseline_is_the_median_power_over_its_span(fake, clock):
    power_until(fake, clock, busy_w=300.0, idle_w=120.0, cool_s=0.1)  # a short spike at the start
    with monitor(fake, clock) as mon:
        assert mon.baseline_power_w() == pytest.approx(120.0)
    assert clock.t == pytest.approx(nvml_mod.BASELINE_S, abs=nvml_mod.SETTLE_POLL_S)


# --- windows of repeated work (the energy claim's) --------------------------------------------------

def test_the_shortest_stored_window_is_ten_counter_periods():
    assert nvml_mod.MIN_ENERGY_WINDOW_S == pytest.approx(nvml_mod.WINDOW_PERIODS * ASSUMED_COUNTER_PERIOD_S)
    assert nvml_mod.WINDOW_PERIODS == 10


def test_repetitions_fill_the_window_with_a_margin():
    assert nvml_mod.repetitions(0.01, 1.0) == 110  # 100 steps fill the second, plus 10%
    assert nvml_mod.repetitions(2.0, 1.0) == nvml_mod.MIN_REPETITIONS
    assert nvml_mod.repetitions(0.0, 1.0) == nvml_mod.MIN_REPETITIONS


def test_host_step_time_queues_the_steps_and_syncs_once():
    log: list[str] = []
    per_step = nvml_mod.host_step_s(lambda: (log.append("step"), time.sleep(0.001)), lambda: log.append("sync"), n=5)
    assert log == ["sync"] + ["step"] * 5 + ["sync"]  # the sync before only clears earlier work
    assert per_step >= 0.001


def test_an_energy_window_grows_until_it_lasts_what_was_asked(fake, clock):
    def step() -> None:  # each step: 0.3 s of the monitor's clock and 30 J on the counter
        clock.t += 0.3
        fake.energy_mj += 30_000

    with monitor(fake, clock) as mon:
        n, window = nvml_mod.energy_window(step, mon, n=3, window_s=1.0)
    # 3 steps made 0.9 s: too short, so N grows to fill 1 s with the margin (4 steps, 1.2 s)
    assert n == 4 and window.duration_s == pytest.approx(1.2) and window.energy_j == pytest.approx(120.0)


def test_windows_last_ten_measured_periods_at_least(fake, clock, monkeypatch):
    def step() -> None:
        clock.t += 0.3
        fake.energy_mj += 30_000

    asked = []

    def idle(mon: GpuMonitor, seconds: float) -> GpuMeasurement:
        asked.append(seconds)
        return GpuMeasurement("idle", seconds, 100.0 * seconds, "counter", 100.0, 100.0, 0.0, 0, 2)

    monkeypatch.setattr(nvml_mod, "idle_power", idle)
    with monitor(fake, clock, counter_period_s=0.2) as mon:  # a slow counter: 2 s at least, whatever was asked
        n, window = nvml_mod.energy_window(step, mon, n=3, window_s=1.0)
        nvml_mod.idle_window(mon, 1.0)
    assert window.duration_s >= 2.0 and n == 8  # 3 steps made 0.9 s, so N grew to fill 2 s with the margin
    assert asked == [2.0]


@pytest.mark.parametrize("n", [5, 50])
def test_one_sync_per_window_whatever_its_steps(fake, clock, n):
    def step() -> None:
        fake.log.append("step")
        clock.t += 1.0 / n
        fake.energy_mj += 1_000

    with monitor(fake, clock, sync=lambda: fake.log.append("sync")) as mon:
        fake.log.clear()
        assert nvml_mod.energy_window(step, mon, n=n, window_s=1.0)[0] == n
    work = [e for e in fake.log if e in ("step", "sync")]
    # the window's opening sync, its n steps queued with none between them, and the one sync that ends it
    assert work == ["sync"] + ["step"] * n + ["sync"]


def test_an_energy_window_still_short_raises_rather_than_store_it(fake, clock, monkeypatch):
    def step() -> None:
        clock.t += 0.2
        fake.energy_mj += 20_000

    monkeypatch.setattr(nvml_mod, "MAX_ATTEMPTS", 1)  # no second attempt to grow N
    with monitor(fake, clock) as mon, pytest.raises(RuntimeError, match=r"lasted 0\.600 s .* shorter than the 1 s"):
        nvml_mod.energy_window(step, mon, n=3, window_s=1.0)
