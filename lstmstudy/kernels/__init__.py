"""The registry of LSTM kernels: every implementation the claims compare, built the same way.

In the spirit of pytorch's `benchmarks/fastrnns`, each kernel is one row (`KernelSpec`) whose factory,
given a shape, device, precision and phase, returns a `Built` record:

- `step()` runs one forward pass (`inference`) or one training step (`train`: forward, a mean-squared
  loss against a fixed target and the backward pass to every parameter's gradient; no optimizer
  update, so frameworks are compared on the same arithmetic);
- `sync` is what `timing.measure` must call inside each sample for this device and framework;
- `forward()` returns the output sequence as a NumPy array (float32), `grads()` the parameter
  gradients in the canonical layout below, both for the agreement tests;
- `compute_dtype` is the dtype the LSTM's output really had, checked against the precision asked for
  (`checked_compute_dtype`), so a row is never labelled with a precision it did not compute in.

Weights are shared through `LSTMWeights`, the canonical PyTorch layout (gate order i, f, g, o;
`w_ih` (4H, I), `w_hh` (4H, H), `b_ih` and `b_hh` (4H,)), so kernels that compute the standard LSTM
can be checked against each other before they are timed against each other.

    >>> from lstmstudy import kernels, timing
    >>> from lstmstudy.shapes import LSTMShape
    >>> k = kernels.build("torch.fused", LSTMShape(batch=1, timesteps=32, features=8, hidden=64), device="cpu")
    >>> m = timing.measure(k.step, sync=k.sync)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch

from lstmstudy.contract import PHASES, PRECISIONS, PointResult, Prepared
from lstmstudy.errors import Skip, UnknownKernel
from lstmstudy.hardware import resolve_device
from lstmstudy.observe import FUSED, NOTHING, Observation
from lstmstudy.shapes import LSTMShape
from lstmstudy.timing import Measurement, Sync

#: The dtype each precision computes in, by name (torch's and Keras's names agree).
DTYPE_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def dtype_name(dtype: object) -> str:
    """A torch dtype's plain name ('float32'), the one results store."""
    return str(dtype).removeprefix("torch.")


class PrecisionMismatch(RuntimeError):
    """The LSTM computed in another dtype than its precision promises: the sweep stores an error row."""


def checked_compute_dtype(name: str, precision: str, dtype: str, mixed: bool) -> str:
    """`dtype`, the dtype of the LSTM output a kernel's first call produced, once checked against `precision`.

    A kernel that computes in one type (`mixed=False`: its tensors held in it, or a Keras mixed policy,
    which casts everything to it) must output exactly that type. An autocast kernel (`mixed=True`) may
    also output float32 (a loop whose cell state stays fp32 while its matmuls run in 16 bits), but never
    the other 16-bit type: PyTorch's autocast wrapper for cuDNN RNNs casts to fp16 whatever dtype
    autocast was given, which would otherwise be stored as bf16.
    """
    wanted = DTYPE_NAMES[precision]
    if dtype != wanted and not (mixed and dtype == "float32"):
        raise PrecisionMismatch(f"{name} at {precision}: the LSTM computed in {dtype}, not {wanted}")
    return dtype


@dataclass
class LSTMWeights:
    """Weights of a (possibly multi-layer, bidirectional) LSTM in PyTorch's layout, as NumPy float32.

    `layers[layer][direction]` is a dict with keys `w_ih`, `w_hh`, `b_ih`, `b_hh`.
    """

    shape: LSTMShape
    layers: list[list[dict[str, np.ndarray]]]

    @classmethod
    def random(cls, shape: LSTMShape, seed: int = 0) -> LSTMWeights:
        """PyTorch's default initialisation, U(-1/sqrt(H), 1/sqrt(H)), from a fixed seed."""
        rng = np.random.default_rng(seed)
        bound = 1.0 / np.sqrt(shape.hidden)
        h4 = 4 * shape.hidden

        def u(*size: int) -> np.ndarray:
            return rng.uniform(-bound, bound, size=size).astype(np.float32)

        layers = [
            [{"w_ih": u(h4, shape.layer_input_size(layer)), "w_hh": u(h4, shape.hidden),
              "b_ih": u(h4), "b_hh": u(h4)} for _ in range(shape.directions)]
            for layer in range(shape.layers)
        ]
        return cls(shape=shape, layers=layers)


def make_inputs(shape: LSTMShape, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A batch-first input (batch, timesteps, features) and a training target (batch, timesteps, H*dirs)."""
    rng = np.random.default_rng(seed + 1)
    x = rng.standard_normal((shape.batch, shape.timesteps, shape.features)).astype(np.float32)
    target = rng.standard_normal((shape.batch, shape.timesteps, shape.hidden * shape.directions)).astype(np.float32)
    return x, target


@dataclass
class Built:
    """A kernel ready to time: see the module docstring for the contract.

    `compute_dtype` ("float32", "bfloat16", "float16") is the dtype of the LSTM output sequence from the
    kernel's first call, i.e. the dtype its state was carried in: it equals the precision's dtype, except
    for autocast kernels whose cell state stays float32 (their matmuls still run in 16 bits), which say
    "float32" rather than claim a 16-bit computation they only partly did.
    """

    name: str
    shape: LSTMShape
    device: torch.device
    precision: str
    phase: str
    step: Callable[[], object]
    sync: Sync | None
    compute_dtype: str
    forward: Callable[[], np.ndarray] | None = None  # None for whole-model workloads, which are only timed
    grads: Callable[[], list[list[dict[str, np.ndarray]]]] | None = None
    #: what one step computes, when the shape's LSTM formula does not say it (models, plans, the GEMM)
    flops: float | None = None
    #: what really ran (`lstmstudy.observe`), profiled once when first asked; and what a traced graph predicts
    observe: Callable[[], Observation] = field(default=lambda: NOTHING)
    predicted_kernel: str = ""

    def observed_kernel(self) -> str:
        """The label of what really ran (`lstmstudy.observe`'s vocabulary)."""
        return self.observe().kernel


#: factory(shape, device, precision, phase, weights, config) -> Built; `config` is a point's extra parameters
Factory = Callable[..., Built]


@dataclass(frozen=True)
class KernelSpec:
    """One row of the registry."""

    name: str
    description: str
    factory: Factory
    #: True when the kernel computes the standard LSTM (sigmoid/tanh, biases): it must agree numerically.
    standard: bool = True
    #: Returns why the kernel cannot run on a device at a precision, or None when it can.
    unavailable: Callable[[torch.device, str], str | None] = field(default=lambda device, precision: None)
    #: the device kinds on which this kernel is a vendor-fused baseline: observed running anything else
    #: there, its row is an error, never a ratio
    fused_on: tuple[str, ...] = ()
    #: a whole model or the GEMM (`kernels.workloads`), not one LSTM layer: timed, never checked numerically
    workload: bool = False

    @property
    def framework(self) -> str:
        return self.name.split(".", 1)[0]


REGISTRY: dict[str, KernelSpec] = {}


def register(spec: KernelSpec) -> KernelSpec:
    if spec.name in REGISTRY:
        raise ValueError(f"kernel {spec.name!r} is registered twice")
    REGISTRY[spec.name] = spec
    return spec


def _load_all() -> None:
    """Import the framework modules, which register their kernels (Keras only when it is installed).

    Cheap after the first call (Python caches imports); called on every lookup, because importing one
    framework module directly (as the explainer does) must not hide the other's rows.
    """
    from lstmstudy.kernels import torch_kernels, workloads  # noqa: F401

    try:
        from lstmstudy.kernels import keras_kernels  # noqa: F401
    except ImportError:  # pragma: no cover - keras is a dependency; this keeps torch-only installs usable
        pass


def spec(name: str) -> KernelSpec:
    _load_all()
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownKernel(f"unknown kernel {name!r}; known kernels: {', '.join(sorted(REGISTRY))}") from None


def names(*, workloads: bool = False) -> list[str]:
    """The LSTM kernels (and, with `workloads`, the whole models and the GEMM too), sorted."""
    _load_all()
    return sorted(name for name, row in REGISTRY.items() if workloads or not row.workload)


def available(device: str | torch.device = "cpu", precision: str = "fp32") -> dict[str, str | None]:
    """Every kernel with the reason it cannot run on `device` at `precision` (None: it can)."""
    dev = device if isinstance(device, torch.device) else resolve_device(device)
    return {name: spec(name).unavailable(dev, precision) for name in names()}


def build(name: str, shape: LSTMShape, device: str | torch.device = "cpu", precision: str = "fp32",
          phase: str = "inference", weights: LSTMWeights | None = None, seed: int = 0,
          config: Mapping[str, object] | None = None) -> Built:
    """Build kernel `name` for `shape` on `device`; raises `Skip` with the reason where it cannot run.

    `config` holds a point's extra parameters (a workload's activation, vocabulary or batch plan).
    """
    row = spec(name)
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
    dev = device if isinstance(device, torch.device) else resolve_device(device)
    if reason := row.unavailable(dev, precision):
        raise Skip(f"{name} at {precision} on {dev.type}: {reason}")
    if weights is None and not row.workload:  # whole models keep their frameworks' own initialisation
        weights = LSTMWeights.random(shape, seed)
    return row.factory(shape, dev, precision, phase, weights, dict(config or {}))


class NotFused(RuntimeError):
    """A fused baseline was observed running another implementation: comparing against it would mislead."""


def check_fused(k: Built) -> Built:
    """`k` as built, once what it really ran is what a fused baseline must run on its device.

    Anything else is `NotFused` (an error row), except a 16-bit precision on a CPU: there it means the CPU has
    no fused LSTM at that precision, and the row is skipped with what ran."""
    if k.device.type not in spec(k.name).fused_on:
        return k
    expected, seen = FUSED[k.device.type], k.observed_kernel() or k.predicted_kernel
    if seen != expected and k.device.type == "cpu" and k.precision != "fp32":
        # oneDNN took no 16-bit LSTM here (fp16 training, say, or an ISA capped by ONEDNN_MAX_CPU_ISA):
        # the CPU cannot run this precision fused, which is a reason to skip, not a failure
        raise Skip(f"{k.name} at {k.precision}: this CPU's oneDNN ran {seen or 'nothing observable'}, not its fused "
                   f"LSTM, at {k.precision}: no fused baseline here")
    if seen != expected:
        raise NotFused(f"{k.name} at {k.precision} ran {seen or 'nothing observable'}, not {expected}: it is no "
                       f"fused baseline here")
    return k


def prepare(point, device: torch.device) -> Prepared:
    """Build `point.kernel` and check what it runs: the `prepare` of kernel sweeps (`sweep.run`), whose
    group then times the step in rounds; `finish` observes what ran, after the timing."""
    k = check_fused(build(point.kernel, point.shape, device, point.precision, point.phase, config=point.config))
    flops = k.flops if k.flops is not None else point.shape.flops(point.phase)

    def finish(m: Measurement) -> PointResult:
        return PointResult(measurement=m, flops=flops, observed=k.observe(), predicted_kernel=k.predicted_kernel,
                           compute_dtype=k.compute_dtype)

    return Prepared(step=k.step, sync=k.sync, finish=finish)
