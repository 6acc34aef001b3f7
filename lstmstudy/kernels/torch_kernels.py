"""PyTorch's LSTM kernels, from the vendor-fused op down to a Python loop: the recipes of the registry's torch rows.

Seven recipes, one per row of `lstmstudy.kernels.KERNELS` and named after it, all built from the same
`LSTMWeights` so the standard ones can be checked against each other before they are timed against each other:

- `torch.fused`: `nn.LSTM`, which dispatches to cuDNN on a GPU and to oneDNN on a CPU;
- `torch.native`: the same module with the vendor library switched off, i.e. ATen's generic C++ loop;
- `torch.cell_loop`: a Python loop over `nn.LSTMCell`, the op-by-op path any custom cell takes;
- `torch.custom_activation`: the blog post's cell, LeakyReLU(0.05) instead of tanh, which no fused
  kernel implements (`standard=False`);
- `torch.compiled`: that custom loop under `torch.compile`: can a compiler win back the fused speed?
- `torch.raw`: the fused op called directly (no module, weights pre-flattened and pre-cast) and, for
  GPU inference, replayed from a CUDA graph: the DeepBench-style floor of what the library can do;
- `torch.raw_noinput`: only the recurrence, as DeepBench times it with `CUDNN_SKIP_INPUT`.

Every step runs under the same numerics (`_backend`, `_autocast`): fp16/bf16 through `torch.autocast`
(the raw rows instead hold weights and inputs in the compute type, as DeepBench does, and so do the
nn.LSTM rows on a GPU, see `_holds_compute_type`, unless the point's config is `contract.AUTOCAST`), and on a
GPU fp32 pinned to IEEE fp32 (`backends.ieee_fp32`), because PyTorch lets cuDNN's RNN use TF32 by default
(`torch.backends.cudnn.rnn.fp32_precision == "tf32"`) while cuBLAS matmuls default to IEEE: left alone,
"fp32" fused-vs-generic would compare TF32 with FP32. Each build reads the dtype its LSTM output really
has (`Built.compute_dtype`) and refuses a mismatch with the precision asked for
(`built.checked_compute_dtype`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext, suppress
from functools import cache, partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.amp.autocast_mode import is_autocast_available
from torch.profiler import ProfilerActivity, profile

from lstmstudy.backends import ieee_fp32, torch_flag
from lstmstudy.contract import AUTOCAST
from lstmstudy.errors import Skip
from lstmstudy.kernels.built import (
    DTYPE_NAMES,
    Built,
    LSTMWeights,
    Recipe,
    checked_compute_dtype,
    dtype_name,
    make_inputs,
)
from lstmstudy.observe import observe
from lstmstudy.shapes import LSTMShape
from lstmstudy.timing import HeldStep, sync_for

DTYPES = {precision: getattr(torch, name) for precision, name in DTYPE_NAMES.items()}
#: Canonical weight names (`LSTMWeights`) and the matching attribute names of `nn.LSTMCell`.
CELL_NAMES = {"w_ih": "weight_ih", "w_hh": "weight_hh", "b_ih": "bias_ih", "b_hh": "bias_hh"}
#: The blog post's `activation=ReLU(negative_slope=0.05)`.
LEAKY_SLOPE = 0.05

Canonical = list[list[dict[str, Tensor]]]  # [layer][direction]{w_ih, w_hh, b_ih, b_hh}
CellFn = Callable[[Tensor, tuple[Tensor, Tensor]], tuple[Tensor, Tensor]]


# --- availability ---------------------------------------------------------------------------------

def _dtype_unavailable(device: torch.device, precision: str) -> str | None:
    """Why the hardware cannot compute in `precision` (None: it can)."""
    if device.type == "cuda" and precision == "bf16" and not torch.cuda.is_bf16_supported():
        return f"{torch.cuda.get_device_name(device)} has no bf16 support"
    return None


def _vendor_unavailable(device: torch.device, precision: str) -> str | None:
    """Why the vendor library cannot run an LSTM at `precision` here, or None: cuDNN's bf16 RNN needs cuDNN 9.13
    and sm80; oneDNN's 16-bit LSTMs need AVX-512 (bf16) or AVX512-FP16/AMX (fp16). A fused row is then skipped
    with this reason rather than timed on the generic loop PyTorch falls back to."""
    from lstmstudy.kernels.criteria import bf16_cudnn_supported, onednn_dtype_unsupported

    if device.type == "cuda" and precision == "bf16" and not bf16_cudnn_supported():
        return (f"cuDNN {torch.backends.cudnn.version()} on {torch.cuda.get_device_name(device)} has no bf16 RNN "
                f"(PyTorch needs cuDNN >= 9.13 and compute capability >= 8.0): the fused kernel cannot run")
    if device.type == "cpu" and precision != "fp32" and (reason := onednn_dtype_unsupported(DTYPES[precision])):
        return f"this CPU has no fused {precision} LSTM: {reason}"
    return None


def _autocast_unavailable(device: torch.device, precision: str) -> str | None:
    """Why `torch.autocast` cannot run `precision` on this device, found by asking it (None: it can)."""
    if precision == "fp32":
        return None
    if reason := _dtype_unavailable(device, precision):
        return reason
    if not is_autocast_available(device.type):
        return f"torch {torch.__version__} has no autocast for {device.type}"
    dtype = DTYPES[precision]
    with torch.autocast(device.type, dtype=dtype):  # autocast warns and disables itself when it refuses
        active = torch.is_autocast_enabled(device.type) and torch.get_autocast_dtype(device.type) == dtype
    return None if active else f"torch {torch.__version__} refuses autocast to {precision} on {device.type}"


def _compile_unavailable(device: torch.device, precision: str) -> str | None:
    if not torch._dynamo.is_dynamo_supported():
        return f"torch.compile is not supported on this Python/platform (torch {torch.__version__})"
    refused = _compile_refused(str(device)) if device.type == "cuda" else None  # only a GPU sets the flags
    return refused or _autocast_unavailable(device, precision)


@cache
def _compile_refused(device: str) -> str | None:
    """Why torch.compile fails under the IEEE-fp32 flags every step runs with (`backends.ieee_fp32`), found by
    compiling a one-line function on `device`, a few seconds, before a row pays for an LSTM's trace (a minute); None
    where it compiles. Inductor read the legacy TF32 getters, which raise under the new per-backend flags: "mix of
    legacy and new APIs" on torch 2.9-2.10 (pytorch issues 166387, 179445). Only a GPU sets those flags."""
    try:
        with ieee_fp32(device):
            # a matmul, as the LSTM cell's: the failures came from Inductor's matmul lowering
            torch.compile(lambda x: torch.sigmoid(x @ x))(torch.ones(4, 4, device=device))
    except Exception as exc:  # noqa: BLE001 - whatever it is, every compiled row would fail with it
        return f"torch.compile fails here under IEEE fp32 ({_first_line(exc)}): no compiled row can run"
    return None


# --- numerics: the contexts every step runs in ----------------------------------------------------

@contextmanager
def _backend(device: torch.device, vendor: bool | None) -> Iterator[None]:
    """The vendor RNN library on/off (None: untouched) and, on a GPU, IEEE fp32 for cuDNN and cuBLAS.

    Active for the whole step, backward pass included, so it is what actually ran, not only what was built.
    """
    with ExitStack() as stack:
        if vendor is not None:
            library = torch.backends.cudnn if device.type == "cuda" else torch.backends.mkldnn
            stack.enter_context(torch_flag(library, "enabled", vendor))
        stack.enter_context(ieee_fp32(device))
        yield


def _autocast(device: torch.device, precision: str):
    """Autocast around the forward pass only (PyTorch advises against autocasting the backward)."""
    return nullcontext() if precision == "fp32" else torch.autocast(device.type, dtype=DTYPES[precision])


def _holds_compute_type(device: torch.device, precision: str) -> bool:
    """Whether nn.LSTM is built in the 16-bit type itself rather than run under autocast: on a GPU.

    There autocast's wrapper for cuDNN RNNs (ATen's AutocastRNN.cpp) casts to fp16 whatever dtype
    autocast was given, so "bf16" would silently run cuDNN in fp16. On a CPU autocast hands oneDNN a
    real bf16 LSTM, so the CPU rows keep the weights in fp32 and autocast, as mixed precision does.
    """
    return device.type == "cuda" and precision != "fp32"


# --- the shared loops -----------------------------------------------------------------------------

def _cell_update(gates: Tensor, c: Tensor, activation: Callable[[Tensor], Tensor]) -> tuple[Tensor, Tensor]:
    """The LSTM state update from pre-activation gates (order i, f, g, o), with a chosen activation."""
    i, f, g, o = gates.chunk(4, dim=1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * activation(g)
    return torch.sigmoid(o) * activation(c), c


def _leaky(x: Tensor) -> Tensor:
    return F.leaky_relu(x, LEAKY_SLOPE)


def _scan(cell: CellFn, seq: Tensor, hidden: int, reverse: bool = False) -> Tensor:
    """Run `cell` over a batch-first sequence from a zero state and return every h (batch, time, hidden).

    `reverse` reads the sequence back to front and returns the outputs in the original order: the
    backward direction of a bidirectional LSTM, as `nn.LSTM` defines it.
    """
    h = c = seq.new_zeros(seq.shape[0], hidden)
    steps = seq.unbind(1)
    outputs = []
    for x_t in reversed(steps) if reverse else steps:
        h, c = cell(x_t, (h, c))
        outputs.append(h)
    if reverse:
        outputs.reverse()
    return torch.stack(outputs, dim=1)


def _concat(outputs: Sequence[Tensor]) -> Tensor:
    return outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=-1)


class LeakyLSTMCell(nn.LSTMCell):
    """`nn.LSTMCell`'s parameters with LeakyReLU(0.05) where the standard cell has tanh.

    This is what the blog post's Keras `LSTM(activation=ReLU(negative_slope=0.05))` computes; no
    vendor kernel implements it, so it can only run op by op (or compiled).
    """

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        h, c = state
        gates = F.linear(x, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh, self.bias_hh)
        return _cell_update(gates, c, _leaky)


class CellStack(nn.Module):
    """A multi-layer, optionally bidirectional LSTM as a Python loop over cells (nn.LSTM's conventions).

    Layer l+1 reads the concatenated directions of layer l; direction 1 reads the reversed sequence.
    """

    def __init__(self, shape: LSTMShape, cell: type[nn.LSTMCell]) -> None:
        super().__init__()
        self.hidden = shape.hidden
        self.cells = nn.ModuleList(
            nn.ModuleList(cell(shape.layer_input_size(layer), shape.hidden) for _ in range(shape.directions))
            for layer in range(shape.layers)
        )

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.cells:
            x = _concat([_scan(cell, x, self.hidden, reverse=d == 1) for d, cell in enumerate(layer)])
        return x

    def canonical(self) -> Canonical:
        return [[{key: getattr(cell, name) for key, name in CELL_NAMES.items()} for cell in layer]
                for layer in self.cells]


def _lstm_canonical(module: nn.LSTM) -> Canonical:
    """nn.LSTM's parameters in the canonical layout (`all_weights` is ordered w_ih, w_hh, b_ih, b_hh)."""
    dirs = 2 if module.bidirectional else 1
    return [[dict(zip(CELL_NAMES, module.all_weights[layer * dirs + d])) for d in range(dirs)]
            for layer in range(module.num_layers)]


def _load(params: Canonical, weights: LSTMWeights) -> Canonical:
    """Copy the shared weights into a kernel's own parameters (casting to their dtype); return them."""
    with torch.no_grad():
        for layer, layer_weights in zip(params, weights.layers):
            for tensors, arrays in zip(layer, layer_weights):
                for key, tensor in tensors.items():
                    tensor.copy_(torch.from_numpy(arrays[key]))
    return params


def _flat(params: Canonical) -> list[Tensor]:
    return [t for layer in params for tensors in layer for t in tensors.values()]


def _regroup(flat: Sequence[Tensor], like: Canonical) -> list[list[dict[str, np.ndarray]]]:
    """Flat gradients back into the canonical layout, as float32 NumPy."""
    it = iter(flat)
    return [[{key: next(it).detach().float().cpu().numpy() for key in tensors} for tensors in layer]
            for layer in like]


# --- assembling a Built ---------------------------------------------------------------------------

class GraphCaptureFailed(RuntimeError):
    """A kernel's forward pass could not be recorded in a CUDA graph; the capture was ended, the process goes on."""


@cache
def _profiler_ready_for_graphs() -> None:
    """Start the profiler once, with CUDA activity, before this process captures its first CUDA graph.

    `observed_kernel` profiles graph replays, and CUPTI must be initialised before a capture for that
    to work: this is what `torch.profiler._utils._init_for_cuda_graphs` does, with public names.
    """
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], acc_events=True):
        pass


def _root_cause(exc: BaseException) -> BaseException:
    """The first exception of a chain: what went wrong during capture, not ending the spoilt capture."""
    while (inner := exc.__cause__ or exc.__context__) is not None:
        exc = inner
    return exc


def _abandon_capture(graph: torch.cuda.CUDAGraph, stream: torch.cuda.Stream) -> None:
    """After a failed capture: end it if it is still open, and make `stream` current again.

    `torch.cuda.graph` leaves its capture stream current when ending the capture raises, and a capture
    left open would make every later CUDA call of this process fail.
    """
    if torch.cuda.is_current_stream_capturing():
        with suppress(RuntimeError):
            graph.capture_end()
    torch.cuda.set_stream(stream)


def _capture(name: str, run: Callable[[], Tensor], device: torch.device) -> tuple[torch.cuda.CUDAGraph, Tensor]:
    """Record `run` in a CUDA graph (after warming it up on a side stream, as capture requires).

    A failed capture raises `GraphCaptureFailed` (an error row in a sweep), never leaves it open.
    """
    _profiler_ready_for_graphs()
    current = torch.cuda.current_stream(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(current)
    with torch.cuda.stream(side):
        for _ in range(3):
            run()
    current.wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            out = run()
    except Exception as exc:
        _abandon_capture(graph, current)
        raise GraphCaptureFailed(f"{name}: capturing its CUDA graph failed ({_first_line(_root_cause(exc))})") from exc
    return graph, out


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def _first_call(name: str, precision: str, call: Callable[[], Tensor]) -> Tensor:
    """Run the kernel once at build time and return its output; "the library has no such primitive" is a Skip."""
    try:
        return call()
    except RuntimeError as exc:
        if "could not create a primitive" in str(exc):  # oneDNN, e.g. no fp16 LSTM training on this CPU
            raise Skip(f"{name} at {precision}: oneDNN cannot run it here ({_first_line(exc)})") from exc
        raise


def _assemble(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str, *,
              run: Callable[[], Tensor], grad_inputs: Sequence[Tensor],
              to_canonical: Callable[[Sequence[Tensor]], list[list[dict[str, np.ndarray]]]],
              vendor: bool | None = None, autocast: bool = True, graph: bool = False) -> Built:
    """Wrap a kernel's `run()` (one forward pass, returning the output sequence) into a `Built`.

    Inference: `run` under `torch.inference_mode()`. Train: `run`, an MSE loss in fp32 against the
    fixed target of `make_inputs`, and `torch.autograd.grad` to `grad_inputs` (no optimizer).
    `graph` replays inference from a CUDA graph on a GPU. `grads()` exists for train builds only
    (cuDNN keeps no state for a backward pass of an inference forward). `autocast=False` means the
    kernel holds its tensors in the compute type, so its output must be in it (`checked_compute_dtype`).
    """
    target = torch.from_numpy(make_inputs(shape)[1]).to(device)
    backend = partial(_backend, device, vendor)
    cast = partial(_autocast, device, precision if autocast else "fp32")

    @contextmanager
    def inferring() -> Iterator[None]:
        with torch.inference_mode(), backend():
            yield

    def cast_run() -> Tensor:
        # autocast stays inside the call: its cache of cast weights lives as long as the autocast block, so holding
        # it over a burst would stop re-casting the weights each call, which mixed precision does (what runs)
        with cast():
            return run()

    def grads() -> tuple[Tensor, tuple[Tensor, ...]]:
        with cast():
            out = run()
        return out, torch.autograd.grad(F.mse_loss(out.float(), target), grad_inputs)

    # the library switch and the precision flags (`_backend`) and inference mode are held around a burst of calls
    # (`timing.HeldStep`), not switched inside each timed call; called on its own, a step still sets them
    infer = HeldStep(cast_run, inferring)
    train = HeldStep(grads, backend)  # the output (for its dtype) and the gradients
    step: Callable[[], object] = infer if phase == "inference" else HeldStep(lambda: grads()[1], backend)
    forward_out, observed = infer, [step]
    if graph and phase == "inference" and device.type == "cuda":
        cuda_graph, static_out = _capture(name, infer, device)

        def replayed() -> Tensor:
            cuda_graph.replay()
            return static_out

        step, observed, forward_out = cuda_graph.replay, [infer, cuda_graph.replay], replayed

    out = _first_call(name, precision, forward_out if phase == "inference" else lambda: train()[0])
    return Built(
        name=name, shape=shape, device=device, precision=precision, phase=phase, step=step,
        sync=sync_for(device),
        forward=lambda: forward_out().float().cpu().numpy(),
        compute_dtype=checked_compute_dtype(name, precision, dtype_name(out.dtype), mixed=autocast),
        grads=(lambda: to_canonical(train()[1])) if phase == "train" else None,
        observe=cache(partial(observe, observed, device)),
    )


def _input(shape: LSTMShape, device: torch.device, dtype: torch.dtype = torch.float32) -> Tensor:
    return torch.from_numpy(make_inputs(shape)[0]).to(device=device, dtype=dtype)


# --- the factories --------------------------------------------------------------------------------

def _module(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str, weights: LSTMWeights,
            config: Mapping[str, object], *, vendor: bool) -> Built:
    """`torch.fused` (vendor=True) and `torch.native` (vendor=False): nn.LSTM, library on or off; with the
    `contract.AUTOCAST` config, under autocast with fp32 weights and input on a GPU too."""
    autocast = dict(config) == dict(AUTOCAST)
    if autocast and device.type == "cuda" and precision == "bf16":
        raise Skip(f"{name} at bf16 under autocast on a GPU: autocast's cuDNN RNN wrapper casts to fp16 whatever "
                   f"dtype it is given, so the row would compute in fp16 (without the config, bf16 is held in bf16)")
    held = _holds_compute_type(device, precision) and not autocast
    dtype = DTYPES[precision] if held else torch.float32
    module = nn.LSTM(shape.features, shape.hidden, num_layers=shape.layers, bidirectional=shape.bidirectional,
                     batch_first=True, device=device, dtype=dtype)
    params = _load(_lstm_canonical(module), weights)
    module.flatten_parameters()
    module.train(phase == "train")  # eval for inference: cuDNN then keeps no training workspace
    x = _input(shape, device, dtype)
    return _assemble(name, shape, device, precision, phase, run=lambda: module(x)[0],
                     grad_inputs=_flat(params), to_canonical=partial(_regroup, like=params), vendor=vendor,
                     autocast=not held)


def _loop(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str, weights: LSTMWeights,
          config: Mapping[str, object], *, cell: type[nn.LSTMCell], compiled: bool = False) -> Built:
    """`torch.cell_loop`, `torch.custom_activation` and `torch.compiled`: a CellStack of `cell`.

    Compiling resets torch.compile's caches first (as torchbench does between models): every build
    shares `CellStack.forward`'s code, and past dynamo's recompile limit (8) a new shape would run
    eagerly without error. An earlier `torch.compiled` build then recompiles on its next call.
    """
    stack = CellStack(shape, cell).to(device)
    params = _load(stack.canonical(), weights)
    if compiled:
        torch.compiler.reset()
    model = torch.compile(stack) if compiled else stack
    x = _input(shape, device)
    try:  # compilation happens in this first call, inside _assemble, so timing excludes it
        return _assemble(name, shape, device, precision, phase, run=lambda: model(x),
                         grad_inputs=_flat(params), to_canonical=partial(_regroup, like=params))
    except Exception as exc:
        if not compiled or isinstance(exc, Skip):
            raise
        raise Skip(f"{name}: torch.compile failed here ({_first_line(exc)})") from exc


def _raw_weights(shape: LSTMShape, device: torch.device, precision: str, weights: LSTMWeights) -> Canonical:
    """The weights as plain tensors in the compute type, laid out (on a GPU) in cuDNN's flat buffer.

    nn.LSTM is used only for its `flatten_parameters`, PyTorch's own check-and-flatten into one
    contiguous buffer; the raw steps never call the module.
    """
    module = nn.LSTM(shape.features, shape.hidden, num_layers=shape.layers, bidirectional=shape.bidirectional,
                     batch_first=True, device=device, dtype=DTYPES[precision])
    params = _load(_lstm_canonical(module), weights)
    module.flatten_parameters()
    return params


def _raw(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str, weights: LSTMWeights,
         config: Mapping[str, object]) -> Built:
    """`torch.raw`: `torch._VF.lstm` on pre-flattened, pre-cast weights (no module, no autocast).

    Weights and input are held in the compute type, as DeepBench does, so no per-call cast is timed.
    GPU inference replays a CUDA graph, which also removes the CPU's launch overhead.
    """
    dtype = DTYPES[precision]
    params = _raw_weights(shape, device, precision, weights)
    flat = _flat(params)
    x = _input(shape, device, dtype)
    zeros = x.new_zeros(shape.layers * shape.directions, shape.batch, shape.hidden)
    training = phase == "train"

    def run() -> Tensor:
        return torch._VF.lstm(x, (zeros, zeros), flat, True, shape.layers, 0.0, training,
                              shape.bidirectional, True)[0]

    return _assemble(name, shape, device, precision, phase, run=run, grad_inputs=flat,
                     to_canonical=partial(_regroup, like=params), vendor=True, autocast=False, graph=True)


def _raw_noinput(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str,
                 weights: LSTMWeights, config: Mapping[str, object]) -> Built:
    """`torch.raw_noinput`: the recurrence alone, like DeepBench's `CUDNN_SKIP_INPUT` runs.

    PyTorch exposes no skip-input mode, so the honest simplest equivalent is used: the input
    projection x @ W_ih^T + b_ih + b_hh of every timestep is computed once, outside the step, and the
    step runs only the recurrence: per timestep one GEMM h @ W_hh^T added to the precomputed gates,
    then the pointwise update (`addmm` and elementwise ops; on a GPU inference is replayed from a
    CUDA graph, so kernel-launch overhead is not timed). It is therefore the serial part every LSTM
    kernel must pay, not a call into cuDNN. Only one layer: deeper layers' inputs exist only inside
    the step (cuDNN's skip-input mode likewise applies to the first layer). The train step returns the
    gradients of W_hh and of the precomputed gates; `grads()` turns the latter into the W_ih and bias
    gradients outside the step, so the result compares with every other kernel.
    """
    if shape.layers != 1:
        raise Skip(f"{name} times the first layer's recurrence only; got layers={shape.layers}")
    dtype = DTYPES[precision]
    params = _raw_weights(shape, device, precision, weights)[0]
    x = _input(shape, device)
    with torch.no_grad(), ieee_fp32(device):  # like the steps
        gates_x = [(F.linear(x, p["w_ih"].float(), p["b_ih"].float() + p["b_hh"].float())).to(dtype)
                   .requires_grad_(phase == "train") for p in params]
    w_hh = [p["w_hh"] for p in params]

    def recurrence(w: Tensor) -> CellFn:
        w_t = w.t()
        return lambda gx_t, state: _cell_update(torch.addmm(gx_t, state[0], w_t), state[1], torch.tanh)

    def run() -> Tensor:
        return _concat([_scan(recurrence(w), gx, shape.hidden, reverse=d == 1)
                        for d, (w, gx) in enumerate(zip(w_hh, gates_x))])

    def to_canonical(grads: Sequence[Tensor]) -> list[list[dict[str, np.ndarray]]]:
        d_hh, d_gates = grads[:len(w_hh)], grads[len(w_hh):]
        out = []
        for dw, dg in zip(d_hh, d_gates):
            dg = dg.float()
            bias = dg.sum(dim=(0, 1)).cpu().numpy()
            out.append({"w_ih": torch.einsum("btg,bti->gi", dg, x).cpu().numpy(),
                        "w_hh": dw.float().cpu().numpy(), "b_ih": bias, "b_hh": bias.copy()})
        return [out]

    return _assemble(name, shape, device, precision, phase, run=run,
                     grad_inputs=[*w_hh, *gates_x], to_canonical=to_canonical, autocast=False, graph=True)


# --- the recipes the registry (`lstmstudy.kernels.KERNELS`) names ---------------------------------

fused = Recipe(partial(_module, vendor=True),
               unavailable=lambda d, p: _vendor_unavailable(d, p) or _autocast_unavailable(d, p))
native = Recipe(partial(_module, vendor=False), unavailable=_autocast_unavailable)
cell_loop = Recipe(partial(_loop, cell=nn.LSTMCell), unavailable=_autocast_unavailable)
custom_activation = Recipe(partial(_loop, cell=LeakyLSTMCell), unavailable=_autocast_unavailable)
compiled = Recipe(partial(_loop, cell=LeakyLSTMCell, compiled=True), unavailable=_compile_unavailable)
raw = Recipe(_raw, unavailable=lambda d, p: _vendor_unavailable(d, p) or _dtype_unavailable(d, p))
raw_noinput = Recipe(_raw_noinput, unavailable=_dtype_unavailable)
