"""Which recurrent kernel a framework will pick, and every reason the fused cuDNN kernel is not it.

Keras 3 falls back from cuDNN to its generic kernel without a warning when a layer breaks cuDNN's
criteria, so a ReLU LSTM on a GPU is quietly several times slower. `explain_cudnn` answers "which
kernel, and why" for a Keras LSTM/GRU layer, a Keras model (every recurrent layer, including both
directions of a `Bidirectional` and layers of nested models) or a torch `nn.LSTM`/`nn.GRU`/`nn.RNN`
(or a module containing them):

    >>> report = explain_cudnn(model)          # doctest: +SKIP
    >>> print(report)                          # one block per layer, every blocking reason
    >>> report.to_frame()                      # a DataFrame, one row per layer

It mirrors the frameworks' own decision code, read from their sources:

- Keras 3 on TensorFlow: `LSTM.inner_loop`/`GRU.inner_loop` (layers/rnn) tries `backend.lstm`
  unless `use_cudnn=False` or `recurrent_dropout` is set; `backend.tensorflow.rnn.lstm` goes on only
  when `cudnn_ok` (tanh/sigmoid compared *by identity*, no unroll, a bias, GRU `reset_after`, and
  `tf.config.list_logical_devices("GPU")` non-empty), then `_cudnn_lstm` asserts the mask is
  right-padded with no fully masked sequence. Keras does not look at the dtype.
- Keras 3 on torch: `backend.torch.rnn.lstm` refuses any mask, then needs the same `cudnn_ok`, CUDA
  tensors and cuDNN; it then calls `torch._VF.lstm`, where PyTorch's own rules below apply.
- Keras 3 on jax (3.14 and later): `backend.jax.rnn.lstm` refuses any mask, then needs the same `cudnn_ok`
  (its own tanh and sigmoid, by identity) and `jax.default_backend() == "gpu"`, and calls
  `jax.experimental.rnn.lstm`; jax has no cuDNN GRU (`cudnn_rules.keras_jax_reasons`).
- PyTorch: `use_cudnn` and `use_mkldnn` in aten/src/ATen/native/RNN.cpp: cuDNN for CUDA tensors of
  float16/32/64 (bfloat16 only with cuDNN >= 9.13 on compute capability >= 8.0) with
  `torch.backends.cudnn.enabled`; on the CPU, oneDNN for LSTMs without projections in float32,
  bfloat16 (AVX-512 CPUs) or float16 (AVX512-FP16/AMX CPUs, and only without autograd).

tests/test_criteria.py and tests/test_criteria_torch.py check the explanations against Keras's and PyTorch's
actual decisions. torch is imported where a torch module or Keras's torch backend is explained, so that the
explainer (and the watch) serve a Keras model on TensorFlow or jax where torch is not installed.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from lstmstudy.backends import keras_private
from lstmstudy.cudnn_rules import (FUSED_LAYERS, MASK_BLOCKS, NATIVE_ACTIVATIONS, Explanation, KerasRecurrent,
                                   Reason, explain_keras_layer, torch_cudnn_dtype_reason)

if TYPE_CHECKING:
    import torch
    from torch import nn

DEVICES = ("auto", "cpu", "cuda")


class Report(tuple):
    """The explanations of every recurrent layer found, in model order; index by position or layer name."""

    def __new__(cls, explanations: Iterable[Explanation]) -> Report:
        return super().__new__(cls, explanations)

    def __getitem__(self, key):
        if isinstance(key, str):
            for explanation in self:
                if explanation.layer == key:
                    return explanation
            raise KeyError(f"no recurrent layer named {key!r}; layers: {', '.join(e.layer for e in self)}")
        return super().__getitem__(key)

    @property
    def fused_eligible(self) -> bool:
        """True when every layer gets the fused cuDNN kernel here."""
        return all(e.fused_eligible for e in self)

    @property
    def eligible_ignoring_device(self) -> bool:
        """True when every layer would get cuDNN on a machine with a GPU."""
        return all(e.eligible_ignoring_device for e in self)

    def to_frame(self):
        """One row per layer: kernel, eligibility, the reasons (messages and codes) and notes."""
        import pandas as pd

        return pd.DataFrame([{
            "layer": e.layer, "framework": e.framework, "kernel": e.kernel, "fused_eligible": e.fused_eligible,
            "eligible_ignoring_device": e.eligible_ignoring_device,
            "reasons": "; ".join(r.message for r in e.reasons), "reason_codes": ", ".join(e.codes),
            "notes": "; ".join(n.message for n in e.notes),
        } for e in self])

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return self.to_frame().to_html(index=False)


def explain_cudnn(obj, inputs=None, mask=None, device: str = "auto") -> Report:
    """Explain, layer by layer, which kernel `obj` runs and why it is not cuDNN.

    `obj` is a Keras layer or model, or a torch module. With `inputs`, `obj` is called once on them
    (with `mask` where `obj` is itself a recurrent layer) and each layer is explained with the mask
    (Keras) or input (torch) it really receives. Without `inputs`, `mask` is taken as the mask every
    Keras recurrent layer receives (as a Masking layer's mask reaches every layer of a stack).

    `device` names the machine to explain for: 'auto' (this one), 'cpu' (one without a GPU) or
    'cuda' (one with a CUDA GPU and cuDNN, whether or not this machine has one).
    """
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    keras = sys.modules.get("keras")  # a Keras layer on the torch backend is also an nn.Module: check Keras first
    if keras is not None and isinstance(obj, keras.layers.Layer):
        explanations = _explain_keras(keras, obj, inputs, mask, device)
    elif _is_torch_module(obj):
        explanations = _explain_torch(obj, inputs, device)
    else:
        raise TypeError(f"explain_cudnn needs a Keras layer or model or a torch module, got {type(obj).__name__}")
    if not explanations:
        raise ValueError(f"no recurrent layer found in {type(obj).__name__}")
    return Report(explanations)


def recurrent_layers(obj) -> list[tuple[str, object]]:
    """Every recurrent layer in `obj`, in model order, with the name `explain_cudnn` gives it.

    Keras: LSTM, GRU, SimpleRNN and RNN layers, both directions of a `Bidirectional` ('bidirectional/forward_lstm')
    and the layers of nested models ('encoder/lstm'); torch: every `nn.LSTM`/`nn.GRU`/`nn.RNN` by its module
    path. Tools that watch layers at run time (`lstmstudy.watch`) name them the same way as this report.
    """
    keras = sys.modules.get("keras")  # a Keras layer on the torch backend is also an nn.Module: check Keras first
    if keras is not None and isinstance(obj, keras.layers.Layer):
        return list(_keras_recurrent_layers(keras, obj))
    if _is_torch_module(obj):
        from torch import nn

        return [(name or type(m).__name__.lower(), m) for name, m in obj.named_modules() if isinstance(m, nn.RNNBase)]
    raise TypeError(f"recurrent_layers needs a Keras layer or model or a torch module, got {type(obj).__name__}")


def _is_torch_module(obj) -> bool:
    """Whether `obj` is a torch module; without importing torch, which a module of its can only come from."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


# --- Keras ------------------------------------------------------------------------------------------


def _explain_keras(keras, obj, inputs, mask, device: str) -> list[Explanation]:
    backend = keras.backend.backend()
    layers = list(_keras_recurrent_layers(keras, obj))
    if inputs is not None:
        masks = _received_masks(keras, obj, [layer for _, layer in layers], inputs, mask)
    else:
        given = None if mask is None else np.asarray(keras.ops.convert_to_numpy(mask)).astype(bool)
        masks = {id(layer): given for _, layer in layers}
    return [_explain_keras_layer(keras, backend, path, layer, masks.get(id(layer)), device) for path, layer in layers]


def _keras_recurrent_layers(keras, obj, prefix: str = "", root: bool = True) -> Iterator[tuple[str, object]]:
    """Every recurrent layer in `obj`, with a path: 'bidirectional/forward_lstm', 'encoder/lstm', ..."""
    if isinstance(obj, keras.layers.Bidirectional):
        for direction in (obj.forward_layer, obj.backward_layer):
            yield f"{prefix}{obj.name}/{direction.name}", direction
    elif isinstance(obj, keras.layers.RNN):
        yield prefix + obj.name, obj
    else:
        inner = prefix if root else f"{prefix}{obj.name}/"
        for sub in obj._flatten_layers(include_self=False, recursive=False):
            yield from _keras_recurrent_layers(keras, sub, inner, root=False)


def _received_masks(keras, obj, layers: list[object], inputs, mask) -> dict[int, np.ndarray | None]:
    """Call `obj` on `inputs` and record the mask each recurrent layer's inner loop receives.

    This is Keras's own mask propagation (Masking, Embedding(mask_zero=True), ...), observed rather
    than re-derived: each layer's `inner_loop` is wrapped for the call and restored after.
    """
    received: dict[int, np.ndarray | None] = {}

    def spy(layer, inner_loop):
        def recording_inner_loop(sequences, initial_state, mask, training=False):
            first = mask[0] if keras.tree.is_nested(mask) else mask  # as inner_loop itself unpacks it
            received[id(layer)] = None if first is None else np.asarray(keras.ops.convert_to_numpy(first)).astype(bool)
            return inner_loop(sequences, initial_state, mask, training=training)
        return recording_inner_loop

    for layer in layers:  # set in the instance dict, around both Keras's and torch's attribute tracking
        vars(layer)["inner_loop"] = spy(layer, layer.inner_loop)
    try:
        direct = isinstance(obj, (keras.layers.RNN, keras.layers.Bidirectional)) and mask is not None
        obj(inputs, mask=mask) if direct else obj(inputs)
    finally:
        for layer in layers:
            vars(layer).pop("inner_loop", None)
    return received


def _explain_keras_layer(keras, backend: str, path: str, layer, mask: np.ndarray | None, device: str) -> Explanation:
    return explain_keras_layer(path, keras_settings(keras, backend, layer), backend, masked=mask is not None,
                               mask=_keras_mask_reasons(backend, mask), machine=_keras_device_reasons(backend, device),
                               torch_rules=lambda: _torch_cudnn_reasons(_torch_dtype(layer.compute_dtype), device))


def keras_settings(keras, backend: str, layer) -> KerasRecurrent:
    """What `cudnn_rules` reads from a live Keras layer; the activations judged by identity, as `backend`'s
    `cudnn_ok` does."""
    cell = layer.cell
    kind = next((kind for kind in FUSED_LAYERS if isinstance(layer, getattr(keras.layers, kind))), None)
    if kind is None:  # no cuDNN path whatever its settings
        return KerasRecurrent(type(layer).__name__, type(cell).__name__, unroll=layer.unroll)
    tanh_ok, sigmoid_ok = _accepted_activations(keras, backend)
    return KerasRecurrent(
        kind, type(cell).__name__, use_cudnn=layer.use_cudnn, recurrent_dropout=cell.recurrent_dropout,
        dropout=cell.dropout, activation=None if cell.activation in tanh_ok else _describe(keras, cell.activation),
        recurrent_activation=(None if cell.recurrent_activation in sigmoid_ok
                              else _describe(keras, cell.recurrent_activation)),
        unroll=layer.unroll, use_bias=cell.use_bias, reset_after=getattr(cell, "reset_after", True),
        implementation=getattr(cell, "implementation", 2), compute_dtype=layer.compute_dtype)


def _accepted_activations(keras, backend: str) -> tuple[tuple, tuple]:
    """The functions `cudnn_ok` accepts as tanh and sigmoid (Keras's, and its backend's `NATIVE_ACTIVATIONS`); it
    compares them with `in`, i.e. by identity."""
    native_tanh, native_sigmoid = (() if name is None else (_imported(name),) for name in NATIVE_ACTIVATIONS[backend])
    return ((keras.activations.tanh, keras.ops.tanh, *native_tanh),
            (keras.activations.sigmoid, keras.ops.sigmoid, *native_sigmoid))


def _imported(path: str) -> object:
    """The object at an import path: 'jax.numpy.tanh'."""
    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def _describe(keras, fn) -> str:
    if isinstance(fn, keras.layers.Layer):
        return f"a {type(fn).__name__} layer"
    name = getattr(fn, "__name__", None)
    if name is None:
        return f"a {type(fn).__name__} object"
    if name == "<lambda>":
        return "a lambda"
    module = getattr(fn, "__module__", None) or ""
    return repr(name) if module.startswith("keras") else f"{module.split('.')[0]}.{name}"


def _keras_mask_reasons(backend: str, mask: np.ndarray | None) -> list[Reason]:
    if mask is None:
        return []
    if backend in MASK_BLOCKS:
        return [MASK_BLOCKS[backend]]
    reasons = []
    mask2d = mask.reshape(mask.shape[0], -1)
    expected = np.arange(mask2d.shape[1]) < mask2d.sum(axis=1, keepdims=True)
    not_padded = np.flatnonzero((mask2d != expected).any(axis=1))
    if not_padded.size:
        i = int(not_padded[0])
        pattern = "".join("T" if v else "F" for v in mask2d[i])
        reasons.append(Reason("mask_not_right_padded",
                              f"the mask is not right-padded (sample {i}: {pattern}); cuDNN needs each sequence's "
                              "steps first and its padding last. Keras falls back in eager calls, but on a GPU "
                              "inside a tf.function (fit, predict) it traces cuDNN anyway and fails an assertion"))
    empty = np.flatnonzero(~mask2d.any(axis=1))
    if empty.size:
        reasons.append(Reason("mask_fully_masked", f"sample {int(empty[0])} is fully masked; cuDNN cannot run a "
                                                   "sequence of length 0, so Keras avoids it for the whole batch"))
    return reasons


def _keras_device_reasons(backend: str, device: str) -> list[Reason]:
    """Keras's machine check: TensorFlow sees a GPU (`_is_gpu_available`), jax's default backend is its GPU one, or
    torch has CUDA and cuDNN."""
    if device == "cuda":
        return []
    if device == "cpu":
        return [Reason("no_gpu", "explained for a machine without a GPU, where Keras never uses cuDNN", device=True)]
    if backend == "tensorflow":
        import tensorflow as tf

        if tf.config.list_logical_devices("GPU"):
            return []
        build = "" if tf.test.is_built_with_cuda() else "; this TensorFlow build has no CUDA"
        return [Reason("no_gpu", "no GPU: TensorFlow sees none (tf.config.list_logical_devices('GPU') is empty"
                                 f"{build})", device=True)]
    if backend == "jax":
        import jax

        found = jax.default_backend()
        return [] if found == "gpu" else [Reason("no_gpu", f"no GPU: Keras runs on jax, and jax.default_backend() is "
                                                           f"{found!r}", device=True)]
    import torch

    get_device = keras_private("keras.src.backend.torch.core", "get_device")

    if not torch.cuda.is_available():
        return [Reason("no_gpu", "no GPU: Keras runs on torch, and torch.cuda.is_available() is False", device=True)]
    if not torch.backends.cudnn.is_available():
        return [Reason("cudnn_unavailable", "this PyTorch build has no cuDNN", device=True)]
    if not str(get_device()).startswith("cuda"):
        return [Reason("not_on_gpu", f"Keras places tensors on {get_device()!r}, and cuDNN only runs CUDA tensors",
                       device=True)]
    return []


def _torch_dtype(name: str) -> torch.dtype:
    import torch

    return getattr(torch, name)


# --- PyTorch ----------------------------------------------------------------------------------------


def _explain_torch(module: nn.Module, inputs, device: str) -> list[Explanation]:
    rnns = recurrent_layers(module)
    seen = _received_inputs(module, [m for _, m in rnns], inputs) if inputs is not None else {}
    return [_explain_torch_rnn(path, rnn, seen.get(id(rnn)), device) for path, rnn in rnns]


def _received_inputs(module: nn.Module, rnns: list[nn.Module], inputs) -> dict[int, object]:
    """Call `module` on `inputs` (in the current grad mode) and record what each RNN receives."""
    from torch import nn

    received: dict[int, object] = {}
    hooks = [rnn.register_forward_pre_hook(lambda m, args: received.__setitem__(id(m), args[0])) for rnn in rnns]
    try:
        spread = isinstance(inputs, tuple) and not isinstance(inputs, nn.utils.rnn.PackedSequence)
        module(*inputs) if spread else module(inputs)
    finally:
        for hook in hooks:
            hook.remove()
    return received


def _explain_torch_rnn(path: str, rnn: nn.RNNBase, seen, device: str) -> Explanation:
    import torch
    from torch import nn

    packed = isinstance(seen, nn.utils.rnn.PackedSequence)
    data = seen.data if packed else seen
    param = next(rnn.parameters())
    dtype = data.dtype if data is not None else param.dtype
    where = (data.device if data is not None else param.device).type if device == "auto" else device
    numel = data.numel() if data is not None else 1
    reasons: list[Reason] = []
    if where != "cuda":
        reasons.append(_torch_no_gpu(device))
    else:
        if torch.version.hip is not None:
            reasons.append(Reason("rocm", "this is a ROCm build of PyTorch: its fused GPU kernel is MIOpen's",
                                  device=True))
        elif device == "auto" and not torch.backends.cudnn.is_available():
            reasons.append(Reason("cudnn_unavailable", "this PyTorch build has no cuDNN", device=True))
        reasons += _torch_cudnn_reasons(dtype, device)
        if numel == 0:
            reasons.append(Reason("empty_input", "the input is empty; cuDNN is not used for empty tensors"))
    if not reasons:
        return Explanation(path, "torch", "cudnn", True)
    if where == "cuda":
        kernel = "miopen" if _miopen_runs(rnn, dtype) else "aten-loop"
        return Explanation(path, "torch", kernel, False, tuple(reasons))
    cpu_reasons = _onednn_reasons(rnn, dtype, numel, seen.batch_sizes if packed else None)
    if cpu_reasons:
        return Explanation(path, "torch", "aten-loop", False, tuple(reasons), tuple(cpu_reasons))
    note = Reason("onednn", "on the CPU PyTorch runs oneDNN's fused LSTM (aten::mkldnn_rnn_layer)", device=True)
    return Explanation(path, "torch", "onednn", False, tuple(reasons), (note,))


def _torch_no_gpu(device: str) -> Reason:
    import torch

    if device == "cpu":
        return Reason("no_gpu", "explained for the CPU; cuDNN only runs CUDA tensors", device=True)
    if not torch.cuda.is_available():
        return Reason("no_gpu", "no GPU: torch.cuda.is_available() is False", device=True)
    return Reason("not_on_gpu", "the layer and its input are on the CPU; cuDNN only runs CUDA tensors "
                                "(move both with .to('cuda'))", device=True)


def _torch_cudnn_reasons(dtype: torch.dtype, device: str) -> list[Reason]:
    """PyTorch's `use_cudnn(input)` for a CUDA input: the cuDNN switch and the dtype.

    bfloat16 also needs cuDNN >= 9.13 and compute capability >= 8.0; that is checked on a real GPU
    (device='auto') and assumed for a hypothetical one (device='cuda').
    """
    import torch

    reasons = []
    if not torch.backends.cudnn.enabled:
        reasons.append(Reason("cudnn_disabled", "torch.backends.cudnn.enabled is False", device=True))
    if dtype == torch.bfloat16:
        if device == "auto" and torch.cuda.is_available() and not bf16_cudnn_supported():
            reasons.append(Reason("dtype", "dtype is bfloat16, which PyTorch runs with cuDNN only with cuDNN "
                                           ">= 9.13 on compute capability >= 8.0; this GPU or cuDNN is older",
                                  device=True))
    elif reason := torch_cudnn_dtype_reason(str(dtype).removeprefix("torch.")):
        reasons.append(reason)
    return reasons


def bf16_cudnn_supported() -> bool:
    """PyTorch's `supportsBFloat16RNNWithCuDNN`: cuDNN >= 9.13 and compute capability >= 8.0."""
    import torch

    version = torch.backends.cudnn.version() or 0
    return version >= 91300 and torch.cuda.get_device_capability()[0] >= 8


def _miopen_runs(rnn: nn.RNNBase, dtype: torch.dtype) -> bool:
    """ROCm builds: PyTorch's `use_miopen` (float32/float16, cuDNN switch on, no LSTM projections)."""
    import torch

    return (torch.version.hip is not None and torch.backends.cudnn.enabled
            and dtype in (torch.float32, torch.float16) and not getattr(rnn, "proj_size", 0))


def onednn_dtype_unsupported(dtype: torch.dtype) -> str | None:
    """Why this CPU's oneDNN has no LSTM in a 16-bit `dtype` (None: it has one), as PyTorch's `use_mkldnn` asks.

    bfloat16 needs AVX-512 (AVX512-BW and up) or an Arm CPU with BF16; float16 needs AVX512-FP16 or AMX-FP16.
    Most laptops, many cloud VMs and every AMD Zen 2/3 server have neither: there PyTorch runs ATen's loop.
    """
    import torch

    if dtype == torch.bfloat16 and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        return "bfloat16 needs an AVX-512 (or Arm BF16) CPU for oneDNN"
    if dtype == torch.float16 and not torch.ops.mkldnn._is_mkldnn_fp16_supported():
        return "float16 needs an AVX512-FP16 or AMX-FP16 CPU for oneDNN"
    return None


def _onednn_reasons(rnn: nn.RNNBase, dtype: torch.dtype, numel: int, batch_sizes) -> list[Reason]:
    """Why PyTorch's CPU LSTM is not oneDNN's (`use_mkldnn` and the checks around it); empty when it is."""
    import torch

    if rnn.mode != "LSTM":
        return [Reason("onednn_mode", f"PyTorch has a oneDNN CPU kernel for LSTM only, not {rnn.mode}")]
    reasons = []
    if not torch.backends.mkldnn.is_available():
        reasons.append(Reason("onednn_unavailable", "this PyTorch build has no oneDNN (mkldnn)", device=True))
    elif not torch.backends.mkldnn.enabled:
        reasons.append(Reason("onednn_disabled", "torch.backends.mkldnn.enabled is False", device=True))
    if dtype == torch.float16 and torch.is_grad_enabled():
        reasons.append(Reason("onednn_fp16_grad", "float16 gets oneDNN only without autograd (torch.no_grad() or "
                                                  "torch.inference_mode()), and grad mode is on"))
    elif dtype in (torch.bfloat16, torch.float16):
        if reason := onednn_dtype_unsupported(dtype):
            reasons.append(Reason("onednn_dtype", reason, device=True))
    elif dtype != torch.float32:
        reasons.append(Reason("onednn_dtype", f"dtype is {dtype}; oneDNN's LSTM takes float32, bfloat16 or float16"))
    if numel == 0:
        reasons.append(Reason("empty_input", "the input is empty"))
    if rnn.proj_size:
        reasons.append(Reason("onednn_proj_size", f"proj_size={rnn.proj_size}: oneDNN has no LSTM projections "
                                                  "(PyTorch warns once and uses its own kernel)"))
    if batch_sizes is not None and batch_sizes.unique().numel() > 1:
        reasons.append(Reason("onednn_packed", "the PackedSequence holds sequences of different lengths; oneDNN "
                                               "only runs packed batches whose sequences all have the same length"))
    return reasons
