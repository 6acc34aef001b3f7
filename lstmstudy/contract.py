"""What a claim, the sweep and the kernels agree on: a point to measure, and what measuring it returns.

Its own module, free of torch, TensorFlow, Keras and pynvml at import, because both houses use it: a claim's
grid is a list of `Point`s, built and keyed (`Point.key`) where only the stored results are read, and the
measuring side prepares each point (`Prepared`) and returns a `PointResult`, whose timing (`Measurement`)
and observation (`lstmstudy.observe`) stay with the modules that make them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lstmstudy import results
from lstmstudy.backends import backend_for
from lstmstudy.observe import NOTHING, DeviceTime, Observation
from lstmstudy.shapes import LSTMShape

if TYPE_CHECKING:
    from lstmstudy.timing import Measurement, Sync

PRECISIONS = ("fp32", "fp16", "bf16")
PHASES = ("inference", "train")
#: a point's `config` asking `torch.fused` (nn.LSTM) to run as automatic mixed precision does: fp32 weights and
#: input under torch.autocast, the casts inside the timed step. On a CPU a 16-bit torch.fused always runs so; on a
#: GPU it otherwise holds weights and input in the 16-bit type (`torch_kernels._holds_compute_type`)
AUTOCAST: Mapping[str, object] = {"amp": "autocast"}


@dataclass(frozen=True)
class Point:
    """One configuration of a sweep: a kernel at a shape, precision and phase, plus free-form extras."""

    kernel: str
    shape: LSTMShape
    precision: str = "fp32"
    phase: str = "inference"
    config: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.phase not in PHASES:
            raise ValueError(f"phase must be one of {PHASES}, got {self.phase!r}")

    def key_fields(self) -> dict[str, object]:
        shape = self.shape.as_dict()
        return {"kernel": self.kernel, "backend": backend_for(self.kernel), "precision": self.precision,
                "phase": self.phase,
                **{k: shape[k] for k in ("batch", "timesteps", "features", "hidden", "layers", "bidirectional")},
                "config": results.config_text(self.config)}

    def key(self) -> tuple[str, ...]:
        return results.row_key(self.key_fields())


@dataclass(frozen=True)
class PointResult:
    """What measuring a point produced: the timing, and what ran (`rules.Outcome` is a verdict's outcome)."""

    measurement: Measurement
    flops: float | None = None
    energy_j: float | None = None
    #: what really ran (`lstmstudy.observe`), and what the explainer or a traced graph said would run
    observed: Observation = NOTHING
    predicted_kernel: str = ""
    #: the dtype the LSTM really computed in ("float32", "bfloat16", ...), read off its output; "" if unknown
    compute_dtype: str = ""
    #: on a GPU, the device's own work per call (`observe.device_time`), beside the measurement's wall time; None
    #: on a CPU or where the profiler saw no kernel
    device: DeviceTime | None = None


@dataclass(frozen=True)
class Prepared:
    """A point built and checked, ready for its rounds: the step to time, its sync, and how to turn its
    measurement into the point's result (observing what ran comes after the timing)."""

    step: Callable[[], object]
    sync: Sync | None
    finish: Callable[[Measurement], PointResult]
