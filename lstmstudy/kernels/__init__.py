"""The registry of LSTM kernels: every implementation the claims compare, built the same way.

In the spirit of pytorch's `benchmarks/fastrnns/runner.py`, everything timed is one row of one table, `KERNELS`.
A row (`KernelSpec`) names the `Recipe` that builds it, `"<module>.<attribute>"` in this package, and the
options it passes: the Keras rows differ only in their `keras.layers.LSTM` arguments, which the table shows (a
trigger's argument is read from `cudnn_rules.TRIGGER_TABLE`, the triggers' one home).
What a recipe returns, a `Built` kernel ready to time and to check, is described in `lstmstudy.kernels.built`.

The recipes are imported only when a row is built or asked where it can run: this module imports without torch,
TensorFlow or Keras, so the table can be read where none is installed; without Keras, its rows say so.

    >>> from lstmstudy import kernels, timing
    >>> from lstmstudy.shapes import LSTMShape
    >>> k = kernels.build("torch.fused", LSTMShape(batch=1, timesteps=32, features=8, hidden=64), device="cpu")
    >>> m = timing.measure(k.step, sync=k.sync)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lstmstudy.contract import PHASES, PRECISIONS, PointResult, Prepared
from lstmstudy.cudnn_rules import BY_KERNEL
from lstmstudy.errors import Skip, UnknownKernel
from lstmstudy.hardware import resolve_device
from lstmstudy.kernels.built import Built, LSTMWeights, Recipe
from lstmstudy.observe import FUSED
from lstmstudy.shapes import LSTMShape

if TYPE_CHECKING:
    import torch

    from lstmstudy.timing import Measurement


@dataclass(frozen=True)
class KernelSpec:
    """One row of the registry: a kernel's name, what it is, and the recipe (with options) that builds it."""

    name: str
    description: str
    #: the `Recipe` that builds it, as "<module>.<attribute>" in this package (`torch_kernels.fused`)
    recipe: str
    #: True when the kernel computes the standard LSTM (sigmoid/tanh, biases): it must agree numerically.
    standard: bool = True
    #: the device kinds on which this kernel is a vendor-fused baseline: observed running anything else
    #: there, its row is an error, never a ratio
    fused_on: tuple[str, ...] = ()
    #: a whole model or the GEMM (`kernels.workloads`), not one LSTM layer: timed, never checked numerically
    workload: bool = False
    #: keyword arguments of the recipe's `build`: a Keras row's `keras.layers.LSTM` arguments
    options: Mapping[str, object] = field(default_factory=dict)

    @property
    def framework(self) -> str:
        return self.name.split(".", 1)[0]

    def unavailable(self, device: torch.device, precision: str) -> str | None:
        """Why the kernel cannot run on `device` at `precision`, or None when it can."""
        return resolve(self.recipe).unavailable(device, precision)


#: Everything timed, one row each: its first line says what builds it, the description what it is (claim pages
#: quote it).
KERNELS: tuple[KernelSpec, ...] = (
    # one LSTM (a stack of layers, possibly bidirectional) in PyTorch: `torch_kernels`
    KernelSpec("torch.fused", recipe="torch_kernels.fused", fused_on=("cuda", "cpu"),
               description="nn.LSTM: cuDNN on a GPU, oneDNN on a CPU (the vendor-fused kernel)"),
    KernelSpec("torch.native", recipe="torch_kernels.native",
               description="nn.LSTM with cuDNN/oneDNN disabled: ATen's generic C++ loop"),
    KernelSpec("torch.cell_loop", recipe="torch_kernels.cell_loop",
               description="Python loop over nn.LSTMCell per layer and direction (op by op)"),
    KernelSpec("torch.custom_activation", recipe="torch_kernels.custom_activation", standard=False,
               description="Python loop over an LSTM cell with LeakyReLU(0.05) instead of tanh"),
    KernelSpec("torch.compiled", recipe="torch_kernels.compiled", standard=False,
               description="the LeakyReLU cell loop under torch.compile (Inductor)"),
    KernelSpec("torch.raw", recipe="torch_kernels.raw", fused_on=("cuda", "cpu"),
               description="torch._VF.lstm on pre-flattened, pre-cast weights; CUDA graph for GPU inference"),
    KernelSpec("torch.raw_noinput", recipe="torch_kernels.raw_noinput",
               description="the recurrence only (input GEMM precomputed), like DeepBench's CUDNN_SKIP_INPUT"),
    # the same in Keras, keras.layers.LSTM(**options): `keras_kernels`
    KernelSpec("keras.cudnn_auto", recipe="keras_kernels.stacked", fused_on=("cuda",),
               description="keras.layers.LSTM with its defaults (use_cudnn='auto'): cuDNN where the backend sees a "
                           "GPU, else generic"),
    KernelSpec("keras.generic", recipe="keras_kernels.stacked", options=BY_KERNEL["keras.generic"].option,
               description="use_cudnn=False: Keras's generic kernel (implementation 2: one fused matmul per step) "
                           "even on a GPU"),
    KernelSpec("keras.relu", recipe="keras_kernels.stacked", options=BY_KERNEL["keras.relu"].option, standard=False,
               description="activation='relu': not the standard LSTM, and not cuDNN-eligible, so Keras silently "
                           "runs the generic kernel"),
    KernelSpec("keras.recurrent_dropout", recipe="keras_kernels.stacked",
               options={**BY_KERNEL["keras.recurrent_dropout"].option, "seed": 0},
               description="recurrent_dropout=0.2: blocks cuDNN even in inference, where it computes the standard "
                           "LSTM; its train step draws a fresh dropout mask on h(t-1) per gate and call, so its "
                           "gradients are not the reference's"),
    KernelSpec("keras.unroll", recipe="keras_kernels.stacked", options=BY_KERNEL["keras.unroll"].option,
               description="unroll=True: the time loop unrolled into the graph (no while loop), which cuDNN cannot "
                           "run"),
    KernelSpec("keras.no_bias", recipe="keras_kernels.stacked", options=BY_KERNEL["keras.no_bias"].option,
               standard=False,
               description="use_bias=False: blocks cuDNN; computes the LSTM without biases, so it matches the "
                           "reference only when the biases are zero (it ignores LSTMWeights' biases and has no bias "
                           "gradients)"),
    KernelSpec("keras.impl1", recipe="keras_kernels.stacked", options={"implementation": 1, "use_cudnn": False},
               description="the paper's TF mode 1: implementation=1 (four smaller matmuls per step), generic kernel "
                           "(use_cudnn=False)"),
    KernelSpec("keras.impl2", recipe="keras_kernels.stacked", options={"implementation": 2, "use_cudnn": False},
               description="the paper's TF mode 2: implementation=2 (one fused matmul per step), generic kernel "
                           "(use_cudnn=False); the same configuration as keras.generic, named for the paper"),
    # whole models, padding plans and the GEMM: `workloads`, timed, never checked against the reference LSTM
    KernelSpec("keras.blog_model", recipe="workloads.keras_blog_model", standard=False, workload=True,
               description="the blog post's Keras autoencoder, train_on_batch / predict_on_batch"),
    KernelSpec("keras.autoencoder", recipe="workloads.keras_model", standard=False, workload=True,
               description="the blog's autoencoder in Keras (ReLU(0.05) first layer), train_on_batch"),
    KernelSpec("keras.bilstm_imdb", recipe="workloads.keras_model", standard=False, workload=True,
               description="Keras's IMDb Bidirectional LSTM, train_on_batch"),
    KernelSpec("torch.autoencoder", recipe="workloads.torch_model", standard=False, workload=True,
               description="the blog's autoencoder in PyTorch (tanh cells), one Adam step"),
    KernelSpec("torch.bilstm_imdb", recipe="workloads.torch_model", standard=False, workload=True,
               description="Keras's IMDb Bidirectional LSTM in PyTorch, one Adam step"),
    KernelSpec("torch.padded", recipe="workloads.torch_plan_padded", standard=False, workload=True,
               description="nn.LSTM trained on a plan's padded batches (every padded step computed)"),
    KernelSpec("torch.packed", recipe="workloads.torch_plan_packed", standard=False, workload=True,
               description="nn.LSTM trained on a plan's batches packed (pack_padded_sequence)"),
    KernelSpec("keras.masked", recipe="workloads.keras_masked", standard=False, workload=True,
               description="Masking + Keras LSTMs trained on a plan's padded batches"),
    KernelSpec("gemm", recipe="workloads.gemm", standard=False, workload=True,
               description="an n x n x n matrix product: the roofline (config n)"),
)
REGISTRY: dict[str, KernelSpec] = {k.name: k for k in KERNELS}


def resolve(recipe: str) -> Recipe:
    """The `Recipe` a row names ("torch_kernels.fused"), imported on first use: the framework modules import torch,
    which reading the table must not need. Looked up on every call, so a test may replace a module's recipe."""
    from lstmstudy.kernels import keras_kernels, torch_kernels, workloads

    module, attribute = recipe.split(".")
    modules = {"keras_kernels": keras_kernels, "torch_kernels": torch_kernels, "workloads": workloads}
    return getattr(modules[module], attribute)


def spec(name: str) -> KernelSpec:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownKernel(f"unknown kernel {name!r}; known kernels: {', '.join(sorted(REGISTRY))}") from None


def names(*, workloads: bool = False) -> list[str]:
    """The LSTM kernels (and, with `workloads`, the whole models and the GEMM too), sorted."""
    return sorted(name for name, row in REGISTRY.items() if workloads or not row.workload)


def _device(device: str | torch.device) -> torch.device:
    import torch

    return device if isinstance(device, torch.device) else resolve_device(device)


def available(device: str | torch.device = "cpu", precision: str = "fp32") -> dict[str, str | None]:
    """Every kernel with the reason it cannot run on `device` at `precision` (None: it can)."""
    dev = _device(device)
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
    dev = _device(device)
    recipe = resolve(row.recipe)
    if reason := recipe.unavailable(dev, precision):
        raise Skip(f"{name} at {precision} on {dev.type}: {reason}")
    if weights is None and not row.workload:  # whole models keep their frameworks' own initialisation
        weights = LSTMWeights.random(shape, seed)
    return recipe.build(name, shape, dev, precision, phase, weights, dict(config or {}), **row.options)


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
