"""What a GPU row says of how it was timed, checked without a GPU: the device time beside the wall time, the clock,
the GPU's state at each group's ends, the node's identity, the host's launch calibration and enough calls a row.
NVML and the profiler are faked where a GPU would answer; the real GPU's side is in tests/test_gpu_timing.py."""

from __future__ import annotations

import dataclasses
import json
import time
from types import SimpleNamespace

import pytest
import torch
from torch.autograd import DeviceType

from lstmstudy import contract, hardware, nvml, observe, results, stats, sweep, timing
from lstmstudy.errors import SpeedChanged
from lstmstudy.observe import DeviceTime, Observation
from lstmstudy.shapes import LSTMShape

CUDA = torch.device("cuda", 0)  # a device object only: nothing here runs on it


def points(n: int = 2) -> list[contract.Point]:
    return [contract.Point("torch.fake", LSTMShape(batch=b, timesteps=4, features=2, hidden=8))
            for b in range(1, n + 1)]


def record(name: str, us: float, kind: DeviceType = DeviceType.CUDA, annotation: bool = False) -> SimpleNamespace:
    """One of the profiler's raw records."""
    return SimpleNamespace(name=lambda: name, device_type=lambda: kind, duration_ns=lambda: us * 1e3,
                           is_user_annotation=lambda: annotation)


def profiled_pass(records: list) -> SimpleNamespace:
    """What `torch.profiler.profile` leaves after a pass, as far as the raw records go."""
    return SimpleNamespace(profiler=SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: records)))


def test_device_time_sums_the_gpu_work_of_a_profiled_pass_per_call(monkeypatch):
    """Three calls, each two kernels (30 us) and a copy (5 us): 35 us and two kernels a call; the host's ops and a
    `record_function` range over the kernels (an optimizer's step) are not device time."""
    seen = {}

    def profile(calls, device):
        seen["calls"] = len(calls) - 1  # the sync closes the pass
        kernels = [record("RNN_blockPersist_fp_LSTM", 20.0), record("elemWiseRNNcell", 10.0),
                   record("Memcpy HtoD", 5.0)]
        spans = [record("Optimizer.step#Adam.step", 50.0, annotation=True)]
        return profiled_pass([record("aten::lstm", 900.0, DeviceType.CPU)] + (kernels + spans) * seen["calls"])

    monkeypatch.setattr(observe, "_profile", profile)
    got = observe.device_time(lambda: None, lambda: None, CUDA, most=3)
    assert seen["calls"] == 3 and got == DeviceTime(pytest.approx(35e-6), 2.0)
    monkeypatch.setattr(observe, "_profile", lambda calls, device: profiled_pass([]))
    assert observe.device_time(lambda: None, lambda: None, CUDA) is None  # nothing seen on the GPU: unknown, not 0
    assert observe.device_time(lambda: None, None, torch.device("cpu")) is None


@pytest.fixture
def fake_gpu(monkeypatch) -> dict:
    """The sweep's view of a GPU machine, faked: its device, fingerprint, calibrations and NVML's state (each a list
    the test may fill, read in turn)."""
    fake = {"host_s": 5e-6, "states": []}
    monkeypatch.setattr(hardware, "resolve_device", lambda request: CUDA)
    monkeypatch.setattr(hardware, "fingerprint", lambda device: hardware.Fingerprint(
        device_kind="cuda", cpu_model="x", cpu_flags=[], physical_cores=1, threads=1, ram_gb=1.0, gpu_name="H200",
        host="abc123"))
    monkeypatch.setattr(hardware, "calibrate", lambda device: 1e-3)
    monkeypatch.setattr(hardware, "calibrate_host", lambda device: fake["host_s"])
    monkeypatch.setattr(hardware, "gpu_state", lambda device: fake["states"].pop(0) if fake["states"] else {})
    return fake


def test_a_gpu_groups_rows_carry_device_time_timer_and_gpu_state(results_root, monkeypatch, fake_gpu):
    """The sweep's path on a GPU with its GPU faked: the profiled pass after the rounds gives each row its device
    time and kernels, NVML the GPU's state at the group's start and end; `load` then flags the host-bound row."""
    calm = {"sm_mhz": 1980, "slowdowns": []}
    fake_gpu["states"] = [calm, {"sm_mhz": 1755, "slowdowns": ["sw_power_cap"]}, calm, calm]  # two groups' ends
    work = {1: DeviceTime(0.9e-3, 3.0), 2: DeviceTime(0.1e-3, 260.0)}  # batch 2: launch-bound
    monkeypatch.setattr(sweep, "device_time", lambda step, sync, device: work[step.batch])

    def prepare(point, device):
        def step():
            pass
        step.batch = point.shape.batch
        return contract.Prepared(step=step, sync=lambda: None, finish=lambda m: contract.PointResult(
            measurement=timing.Measurement((1e-3,) * 4, 0, 1, "cuda-events", (2, 2), 7), observed=Observation("cudnn")))

    sweep.run("demo", points(), prepare, timing.Rounds(rounds=2, warmup=0, burst_s=0.0), device="cuda",
              progress=False)
    frame = results.load("demo").set_index("batch")
    assert frame.device_s.to_dict() == {1: pytest.approx(0.9e-3), 2: pytest.approx(0.1e-3)}
    assert frame.kernels_per_call[2] == 260.0 and frame.timer[1] == "cuda-events"
    assert frame.host_bound.to_dict() == {1: False, 2: True}
    assert frame.gpu_state[1] == {"start": {"sm_mhz": 1980, "slowdowns": []},
                                  "end": {"sm_mhz": 1755, "slowdowns": ["sw_power_cap"]}}
    assert frame.throttled.tolist() == [True, False]
    stored = results.fingerprints("demo")["cuda-h200-abc123"][0]
    assert (stored["calibration_s"], stored["host_calibration_s"]) == (1e-3, 5e-6)


def test_a_set_whose_host_launched_slower_is_refused(results_root, fake_gpu):
    """The GEMM ran at the same speed, the host's launches 2x slower (another node's CPU or sandbox): most GPU rows
    time the launches, so resuming would pair rows of two speeds."""
    outcome = contract.PointResult(measurement=timing.Measurement((1e-3,), 0, 1, "cuda-events"),
                                   device=DeviceTime(1e-3, 1.0))
    sweep.run("demo", points(1), lambda p, d: outcome, device="cuda", progress=False)
    fake_gpu["host_s"] = 1.1e-5
    with pytest.raises(SpeedChanged, match="host's launch calibration in 0.011 ms"):
        sweep.run("demo", points(2), lambda p, d: outcome, device="cuda", progress=False)


def test_the_host_tag_of_a_gpu_machine_is_its_gpus_identity(monkeypatch):
    """Two lent nodes given one LSTMSTUDY_HOST stay two sets: the tag hashes the GPUs' UUIDs where NVML reads them."""
    monkeypatch.setenv("LSTMSTUDY_HOST", "lease-node")
    monkeypatch.setattr(hardware, "gpu_uuids", lambda: ["GPU-aaaa"])
    first = hardware.host_tag()
    monkeypatch.setattr(hardware, "gpu_uuids", lambda: ["GPU-bbbb"])
    assert hardware.host_tag() != first
    monkeypatch.setattr(hardware, "gpu_uuids", lambda: [])
    named = hardware.host_tag()
    monkeypatch.setenv("LSTMSTUDY_HOST", "another-node")
    assert hardware.host_tag() != named  # without NVML, the name given


@pytest.mark.parametrize("release, version, runtime", [
    ("6.18.44-fc-v236-gpu", "Linux version 6.18.44-fc-v236-gpu", "firecracker"),
    ("4.4.0", "Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016", "gvisor"),
])
def test_the_runtime_is_read_off_the_kernel(monkeypatch, release, version, runtime):
    monkeypatch.setattr(hardware.platform, "release", lambda: release)
    monkeypatch.setattr(hardware, "_read", lambda path: version)
    assert hardware.runtime() == runtime


def test_the_host_calibration_times_launches_and_overrides_are_recorded():
    assert 0 < hardware.calibrate_host(torch.device("cpu"), tries=2) < 1e-2
    assert {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "NVIDIA_TF32_OVERRIDE"} <= set(hardware.ENVIRONMENT)


class FakeNvmlState:
    """pynvml's answers for one GPU's state; a query the GPU refuses raises NVML's NOT_SUPPORTED."""

    def __init__(self, reasons: int) -> None:
        self.reasons = reasons

    def nvmlDeviceGetClockInfo(self, handle, clock):
        return {nvml.pynvml.NVML_CLOCK_SM: 1980, nvml.pynvml.NVML_CLOCK_MEM: 3201}[clock]

    def nvmlDeviceGetTemperature(self, handle, sensor):
        raise nvml.pynvml.NVMLError(nvml.pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetPowerUsage(self, handle):
        return 312_500

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.reasons

    def nvmlDeviceGetViolationStatus(self, handle, policy):
        held = {nvml.pynvml.NVML_PERF_POLICY_POWER: 5_000}
        return SimpleNamespace(referenceTime=0, violationTime=held.get(policy, 0))


def test_the_gpu_state_names_clocks_power_and_slowdowns(monkeypatch):
    fake = FakeNvmlState(nvml.pynvml.nvmlClocksEventReasonGpuIdle | nvml.pynvml.nvmlClocksEventReasonHwThermalSlowdown)
    for name in ("nvmlDeviceGetClockInfo", "nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage",
                 "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetViolationStatus"):
        monkeypatch.setattr(nvml.pynvml, name, getattr(fake, name))
    monkeypatch.setattr(nvml, "_open_device", lambda index: "handle")
    monkeypatch.setattr(nvml.pynvml, "nvmlShutdown", lambda: None)
    state = nvml.gpu_state(0)
    assert state == {"sm_mhz": 1980, "memory_mhz": 3201, "temperature_c": None, "power_w": 312.5,
                     "slowdowns": ["hw_thermal"],  # idle is no slowdown
                     "power_violation_ns": 5_000, "thermal_violation_ns": 0}
    assert json.loads(json.dumps(state)) == state  # stored as JSON in the row


def test_a_plan_gives_every_row_twenty_calls_and_a_quick_run_does_not():
    """A step that fills a burst alone (an epoch) gets 4 calls in each of 5 rounds; a queued sample of 10 calls needs 1;
    each of 3 worker processes its third."""
    plan = timing.plan(0.1, quick=False)
    assert plan.min_calls == stats.MIN_CALLS == 20
    whole = dataclasses.replace(plan, processes=1)
    assert whole.samples_per_burst(alone=True) == 4 and whole.samples_per_burst(10, alone=True) == 1
    assert plan.each().min_calls == 7 and plan.each().samples_per_burst(alone=True) == 4  # 2 rounds of 4: 8 >= 7
    assert timing.plan(0.1, quick=True).samples_per_burst(alone=True) == 1


def test_interleave_reaches_the_fewest_calls_for_a_step_that_fills_a_burst_alone():
    def slow():
        time.sleep(0.012)  # longer than a burst, however idle the machine

    plan = timing.Rounds(rounds=5, warmup=1, burst_s=0.01, extra_rounds=0, min_calls=20)
    got = timing.interleave({"slow": (slow, None)}, plan, seed=1)["slow"]
    assert got.n >= 20 and got.round_sizes == (4,) * 5


def test_a_rows_timer_says_which_clock_made_it():
    assert timing.Measurement((1.0,), 0, 1, "cuda-events").timer == "cuda-events"
    assert timing.Measurement((1.0,), 0, 1, "none").timer == "host-clock"
    assert timing.Measurement((1.0,), 0, 1, "sync_devices", calls=100).timer == (
        "host-clock+sync_devices, 100 queued calls a sample")


def test_a_profiler_that_fails_costs_a_row_its_device_time_not_its_timing(results_root, monkeypatch, fake_gpu):
    def broken(step, sync, device):
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    monkeypatch.setattr(sweep, "device_time", broken)
    outcome = contract.Prepared(step=lambda: None, sync=lambda: None,
                                finish=lambda m: contract.PointResult(measurement=m))
    sweep.run("demo", points(1), lambda p, d: outcome, timing.Rounds(rounds=2, warmup=0, burst_s=0.0), device="cuda",
              progress=False)
    row = results.load("demo").iloc[0]
    assert row.status == "ok" and row.device_s != row.device_s and row.host_bound is None  # NaN: not recorded


def test_a_step_that_times_itself_gets_no_profiled_call_more(results_root, monkeypatch, fake_gpu):
    """An energy window is a step without a sync: one more call of it would be one more whole window."""
    monkeypatch.setattr(sweep, "device_time", lambda step, sync, device: pytest.fail("profiled an energy window"))
    window = contract.Prepared(step=lambda: None, sync=None, finish=lambda m: contract.PointResult(measurement=m))
    sweep.run("demo", points(1), lambda p, d: window, timing.Rounds(rounds=2, warmup=0, burst_s=0.0), device="cuda",
              progress=False)
    assert results.load("demo").status.tolist() == ["ok"]


def test_a_profiler_that_fails_in_claim_4s_pass_leaves_the_row_timed(monkeypatch):
    from lstmstudy.claims import frameworks_vs_baseline as claim
    from lstmstudy.protocols import in_kernel

    def broken(*args, **options):
        raise RuntimeError("CUPTI_ERROR_NOT_INITIALIZED")

    monkeypatch.setattr(in_kernel, "device_time", broken)
    shape = LSTMShape(batch=1, timesteps=4, features=8, hidden=8)
    got = in_kernel.prepare(contract.Point("torch.fused", shape), torch.device("cpu"), profiled=claim.IN_KERNEL,
                            queued=claim.QUEUED)
    result = got.finish(timing.measure(got.step, warmup=1, min_samples=3, max_samples=3, min_time=0))
    assert result.measurement.n == 3 and "the profiler failed" in result.observed.detail["in_kernel_note"]
