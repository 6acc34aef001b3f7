"""NVML energy windows against a fake `pynvml`, so every branch runs without a GPU; one real-GPU test."""

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
    ENERGY_COUNTER_PERIOD_S,
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
    """A clock the test moves by hand; each read is logged, to check it comes after the sync."""

    def __init__(self, log: list[str]) -> None:
        self.t = 0.0
        self.log = log

    def __call__(self) -> float:
        self.log.append("clock")
        return self.t


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeNvml:
    fake = FakeNvml()
    monkeypatch.setattr(nvml_mod, "pynvml", fake)
    return fake


@pytest.fixture
def clock(fake: FakeNvml) -> Clock:
    return Clock(fake.log)


def monitor(fake: FakeNvml, clock: Clock, **kwargs) -> GpuMonitor:
    return GpuMonitor(clock=clock, sample_interval_s=SLOW_SAMPLER, **kwargs)


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
    assert "50.0 ms" in m.warning and f"~{ENERGY_COUNTER_PERIOD_S * 1e3:.0f} ms" in m.warning
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
    with GpuMonitor(sample_interval_s=0.002) as mon:
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



# --- windows of repeated work (the energy claim's) --------------------------------------------------

def test_the_shortest_stored_window_is_ten_counter_periods():
    assert nvml_mod.MIN_ENERGY_WINDOW_S == pytest.approx(10 * ENERGY_COUNTER_PERIOD_S)


def test_repetitions_fill_the_window_with_a_margin():
    assert nvml_mod.repetitions(0.01, 1.0) == 110  # 100 steps fill the second, plus 10%
    assert nvml_mod.repetitions(2.0, 1.0) == nvml_mod.MIN_REPETITIONS
    assert nvml_mod.repetitions(0.0, 1.0) == nvml_mod.MIN_REPETITIONS


def test_host_step_time_includes_the_sync():
    # the step itself is instant: its time on the host is the 2 ms sync after it, as a window's would be
    assert nvml_mod.host_step_s(lambda: None, lambda: time.sleep(0.002), n=5) >= 0.002


def test_an_energy_window_grows_until_it_lasts_what_was_asked(fake, clock):
    def step() -> None:  # each step: 0.3 s of the monitor's clock and 30 J on the counter
        clock.t += 0.3
        fake.energy_mj += 30_000

    with monitor(fake, clock) as mon:
        m, window = nvml_mod.energy_window(step, None, mon, n=3, window_s=1.0)
    # 3 steps made 0.9 s: too short, so N grows to fill 1 s with the margin (4 steps, 1.2 s)
    assert m.n == 4 and window.duration_s == pytest.approx(1.2) and window.energy_j == pytest.approx(120.0)


def test_an_energy_window_still_short_raises_rather_than_store_it(fake, clock, monkeypatch):
    def step() -> None:
        clock.t += 0.2
        fake.energy_mj += 20_000

    monkeypatch.setattr(nvml_mod, "MAX_ATTEMPTS", 1)  # no second attempt to grow N
    with monitor(fake, clock) as mon, pytest.raises(RuntimeError, match=r"lasted 0\.600 s .* shorter than the 1 s"):
        nvml_mod.energy_window(step, None, mon, n=3, window_s=1.0)
