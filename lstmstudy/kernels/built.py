"""What a kernel's recipe takes and returns, shared by the framework modules and the registry (`lstmstudy.kernels`).

A `Recipe` pairs a factory with the check of where it can run. Given a kernel's name, a shape, device, precision
and phase, the factory returns a `Built` record:

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

Torch is only named in annotations here: the registry imports this module, and must import without torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from lstmstudy.observe import NOTHING, Observation
from lstmstudy.shapes import LSTMShape

if TYPE_CHECKING:
    import torch

    from lstmstudy.timing import Sync

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


def _always_available(device: torch.device, precision: str) -> str | None:
    """A recipe that runs wherever its framework does (its factory may still raise `Skip`)."""
    return None


@dataclass(frozen=True)
class Recipe:
    """How one family of kernels is built, and where it cannot run: what a registry row names.

    `build(name, shape, device, precision, phase, weights, config, **options) -> Built` builds the row `name`;
    `config` holds a point's extra parameters, `options` the row's own (a Keras row's `keras.layers.LSTM`
    arguments). `unavailable(device, precision)` says why the family cannot run there, or None when it can.
    """

    build: Callable[..., Built]
    unavailable: Callable[[torch.device, str], str | None] = _always_available
