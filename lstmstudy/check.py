"""`lstmstudy env --check`: the smoke check to run before spending GPU time on a sweep.

In under a minute it shows what the sweep will run on (GPU, driver, CUDA, cuDNN, the TF32 settings, the
Keras backend), the node (its runtime, host CPU and what names its set) and the GPU's clocks and slowdowns now, which
kernel `nn.LSTM` really runs at each precision and in which dtype, whether the raw cuDNN baseline's CUDA graph runs,
whether the profiler sees the GPU's kernels (each row's device time) and whether NVML's energy counter advances,
and its period. A line that would spoil some rows is a failure shown for what it costs; only one that would spoil the
whole sweep (cuDNN unusable: `nn.LSTM` in fp32 not running it) stops measuring, and the command exits non-zero then:
on a short GPU lease a check that vetoes measuring for one claim's 16-bit rows would cost every claim.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch

from lstmstudy import hardware, kernels
from lstmstudy.backends import chosen_note, keras_backend
from lstmstudy.errors import StudyError
from lstmstudy.kernels.criteria import bf16_cudnn_supported
from lstmstudy.observe import FUSED, device_time, what_ran
from lstmstudy.shapes import LSTMShape
from lstmstudy.timing import sync_for

SHAPE = LSTMShape(batch=4, timesteps=8, features=16, hidden=32)
EXPECTED_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@dataclass(frozen=True)
class Check:
    name: str
    value: str
    ok: bool | None = None  # None: information only
    blocking: bool = False  # failed, it stops measuring (else it costs some rows, which say why)

    def line(self) -> str:
        mark = {True: "ok  ", False: "FAIL", None: "    "}[self.ok]
        return f"{mark} {self.name:<28} {self.value}"


def _kernel(name: str, device: torch.device, precision: str, expected: str | None, phase: str = "train") -> Check:
    """Build a kernel, run it once and report what the profiler saw it run, and in which dtype."""
    label = f"{name} {precision} {phase}"
    try:
        built = kernels.build(name, SHAPE, device, precision, phase)
        seen, dtype = built.observed_kernel() or built.predicted_kernel, built.compute_dtype
        shown = what_ran(built.observed_kernel(), built.predicted_kernel)
    except StudyError as exc:  # a Skip: this precision cannot run here
        return Check(label, f"skipped: {exc}", None)
    except Exception as exc:  # noqa: BLE001 - any failure here would fail the sweep too
        return Check(label, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", False)
    ok = (expected is None or seen == expected) and dtype == EXPECTED_DTYPE[precision]
    return Check(label, f"ran {shown}, computed in {dtype or '?'}", ok)


def _energy(device: torch.device) -> Check:
    """Does NVML's energy counter advance over half a second of matrix products?"""
    try:
        from lstmstudy import nvml

        index = nvml.device_index(device)
        a = torch.randn(2048, 2048, device=device)
        with nvml.GpuMonitor(index, sync=sync_for(device)) as monitor, monitor.window("check") as holder:
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                a @ a
                torch.cuda.synchronize(device)
        result = holder.result
    except Exception as exc:  # noqa: BLE001 - no NVML, no permission: claim 6 would be all skipped rows
        return Check("NVML energy counter", f"{type(exc).__name__}: {exc}", False)
    ok = result is not None and result.energy_j is not None and result.energy_j > 0
    text = (f"{result.energy_j:.1f} J in {result.duration_s:.2f} s ({result.energy_source}), "
            f"mean {result.mean_power_w:.0f} W" if ok else (result.warning if result else "no window"))
    return Check("NVML energy counter", text, ok)


def _device_time(device: torch.device) -> Check:
    """Does the profiler see the GPU's kernels? Without it no row records its device time beside its wall time."""
    name = "device time (profiler)"
    try:
        built = kernels.build("torch.fused", SHAPE, device, "fp32", "inference")
        work = device_time(built.step, built.sync, device)
    except Exception as exc:  # noqa: BLE001 - the rows would store no device time, and say so
        return Check(name, f"{type(exc).__name__}: {exc}", False)
    if work is None:
        return Check(name, "the profiler saw no GPU kernel: the rows will store no device time", False)
    return Check(name, f"torch.fused: {work.seconds * 1e6:.1f} us of GPU work in {work.kernels:g} kernels a call", True)


def _state_words(state: dict) -> str:
    """The GPU's state (`hardware.gpu_state`) in a line."""
    if not state:
        return "unknown (no NVML)"
    slowdowns = ", ".join(state.get("slowdowns") or []) or "none"
    return (f"SM {state.get('sm_mhz')} MHz, memory {state.get('memory_mhz')} MHz, {state.get('temperature_c')} C, "
            f"{state.get('power_w')} W; clock slowdowns: {slowdowns}")


def _counter_period(device: torch.device) -> str:
    """NVML's energy counter period on this GPU, as the energy windows will use it (`nvml.counter_period_line`)."""
    try:
        from lstmstudy import nvml
    except ImportError:
        return "not measured: nvidia-ml-py is not installed"
    return nvml.counter_period_line(nvml.device_index(device))


def checks(device: torch.device) -> Iterator[Check]:
    """Every line of the smoke check, computed as it is printed."""
    fp = hardware.fingerprint(device)
    yield Check("result set", fp.hardware_id)
    yield Check("torch", f"{torch.__version__} (CUDA {torch.version.cuda or 'none'})")
    if device.type == "cuda":
        yield Check("GPU", f"{fp.gpu_name}, {fp.gpu_memory_gb} GiB, compute capability {fp.compute_capability}")
        yield Check("driver", fp.driver or "unknown (no NVML)", bool(fp.driver) or None)
        clocks = f"SM {fp.sm_clock_mhz} of {fp.sm_clock_max_mhz} MHz now" if fp.sm_clock_max_mhz else "unknown"
        yield Check("clocks, power", f"{clocks}; power limit {fp.power_limit_w} W; persistence {fp.persistence_mode}")
        yield Check("cuDNN", fp.cudnn or "not available", bool(fp.cudnn) and torch.backends.cudnn.is_available())
        yield Check("TF32 (outside our steps)", f"cudnn.rnn {torch.backends.cudnn.rnn.fp32_precision}, "
                    f"cuda.matmul {torch.backends.cuda.matmul.fp32_precision}; every sweep runs IEEE fp32")
        named = "its GPUs' UUIDs" if hardware.gpu_uuids() else "LSTMSTUDY_HOST or the hostname (NVML cannot say)"
        yield Check("node", f"runtime {fp.runtime or 'unknown'}; host CPU {fp.cpu_model}; set named after {named}")
        yield Check("GPU state now", _state_words(hardware.gpu_state(device)))
    else:
        yield Check("CPU", f"{fp.cpu_model}, {fp.threads} threads, flags {' '.join(fp.cpu_flags) or 'none'}")
    for precision in ("fp32", "fp16", "bf16"):
        found = _kernel("torch.fused", device, precision, FUSED[device.type])
        yield replace(found, blocking=precision == "fp32")  # the fused kernel itself: every claim's baseline
    if device.type == "cuda":  # claim 4's baseline captures a CUDA graph of cuDNN, under the profiler
        yield _kernel("torch.raw", device, "fp32", "cudnn", phase="inference")
    backend = keras_backend()
    # without Keras every Keras row of the sweep would be an error row
    yield Check("Keras backend", (backend or "Keras is not installed (carry the wheelhouse)")
                + (f" ({chosen_note()})" if chosen_note() else ""), bool(backend))
    if backend and device.type == "cuda":
        # Keras 3.15.1's torch backend swallows any error of cuDNN's LSTM and runs its loop instead (`except
        # Exception: pass`): probed here, a cuDNN failure shows before the sweep, not as its rows. At 16 bits a
        # miss is shown, not a failure: it costs claims 3 and 4 their fused Keras rows, not the rest of the sweep
        for precision in ("fp32", "fp16", "bf16"):
            bf16_unsupported = precision == "bf16" and not bf16_cudnn_supported()
            found = _kernel("keras.cudnn_auto", device, precision, None if bf16_unsupported else "cudnn")
            if precision != "fp32" and found.ok is False:
                found = replace(found, value=f"{found.value} (not cuDNN: Keras's rows at {precision} will say so)",
                                ok=None)
            yield found
    elif backend:
        yield _kernel("keras.cudnn_auto", device, "fp32", None)
    if device.type == "cuda":
        yield _device_time(device)
        yield _energy(device)
        yield Check("energy counter period", _counter_period(device))


def run(device: str) -> int:
    """Print every check; 1 when one that stops measuring failed, else 0 (other failures are shown)."""
    dev = hardware.resolve_device(device)
    failed, blocking = 0, 0
    for check in checks(dev):
        print(check.line(), flush=True)
        failed += check.ok is False
        blocking += check.ok is False and check.blocking
    if blocking:
        print(f"{blocking} check(s) failed that spoil every claim: fix them before measuring")
    elif failed:
        print(f"ready to measure; {failed} check(s) failed: the rows they name will say why")
    else:
        print("ready to measure")
    return 1 if blocking else 0
