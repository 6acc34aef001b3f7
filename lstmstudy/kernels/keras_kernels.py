"""Keras 3 LSTM kernels: one recipe, `stacked`, parameterised by the keyword arguments of `keras.layers.LSTM`.

The registry's Keras rows (`lstmstudy.kernels.KERNELS`) differ only in those arguments, their `options`, which
is the point of the study: each argument that breaks cuDNN's criteria (see `lstmstudy.kernels.criteria`) sends
Keras to its generic kernel without a word. Keras 3 does not warn.

- TensorFlow backend (the default): the step is a `tf.function`, traced once here, so every timed
  call runs the same graph. On a machine where TensorFlow sees no GPU, `keras.cudnn_auto` traces the
  generic `tf.while_loop` kernel; the graph's op types give `predicted_kernel` (a prediction: the torch
  profiler cannot see what TensorFlow placed where).
- Torch backend (`KERAS_BACKEND=torch`): plain eager calls on torch tensors, as Keras runs them; what
  ran is observed by the profiler (`lstmstudy.observe`).
- Jax backend (`KERAS_BACKEND=jax`): the step is `jax.jit` of the model's `stateless_call` (and its gradient),
  compiled once here, as Keras's own jax trainer compiles its steps: the generic kernel is a `lax.scan` loop XLA
  compiles, the closest counterpart to TensorFlow's graph loop, and on a GPU `keras.cudnn_auto` runs cuDNN through
  `jax.experimental.rnn`. What it will run is predicted from the lowered program (`hlo_kernel`); the torch
  profiler cannot see jax, so nothing is observed. The sync waits for the step's own outputs (`JaxSync`).

Weights come in through `LSTMWeights` (PyTorch layout): Keras's `kernel` (I, 4H) is `w_ih.T`, its
`recurrent_kernel` (H, 4H) is `w_hh.T` and its single `bias` is `b_ih + b_hh`; the gate order
(i, f, c, o) is PyTorch's (i, f, g, o). Mixed precision uses Keras's per-layer dtype policies, which
compute in the policy's dtype: the model's output must have it (`Built.compute_dtype`).
Keras itself is imported on first use: TensorFlow takes seconds to import, and the registry should not;
on the torch backend this module never imports TensorFlow (only `tf_sync` and the TensorFlow runner do).
Without Keras installed this module still imports, and `unavailable` says so, so the torch rows stay usable.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, partial

import numpy as np
import torch

from lstmstudy.backends import ieee_fp32, import_keras, isa_cap, keras_backend
from lstmstudy.errors import Skip
from lstmstudy.kernels.built import Built, LSTMWeights, Recipe, checked_compute_dtype, make_inputs
from lstmstudy.observe import NOTHING, Observation, classify_graph, observe
from lstmstudy.shapes import LSTMShape
from lstmstudy.timing import Sync, sync_for, tf_sync

#: Keras dtype policy per precision: mixed policies keep float32 weights and compute in 16 bits.
POLICIES = {"fp32": "float32", "fp16": "mixed_float16", "bf16": "mixed_bfloat16"}


def unavailable(device: torch.device, precision: str) -> str | None:
    """Why the Keras kernels cannot run on `device` with the installed backend, or None."""
    name = keras_backend()
    if not name:
        return "keras is not installed"
    if device.type not in ("cpu", "cuda"):
        return f"Keras kernels run on 'cpu' or 'cuda', not {device.type!r}"
    if name not in ("tensorflow", "torch", "jax"):
        return f"Keras backend {name!r} is not supported here; set KERAS_BACKEND to tensorflow, torch or jax"
    if device.type == "cpu":
        return tensorflow_refuses(precision) if name == "tensorflow" and precision != "fp32" and isa_cap() else None
    if name == "torch":
        return None if torch.cuda.is_available() else "Keras runs on torch, and torch sees no GPU"
    if name == "jax":
        gpus = jax_gpus()
        index = device.index or 0
        return None if index < len(gpus) else (f"Keras runs on jax, and jax sees {len(gpus)} GPU(s), so it has no "
                                               f"GPU {index} (is jax's CUDA plugin installed?)")
    import tensorflow as tf

    if not tf.test.is_built_with_cuda():
        return "this TensorFlow build has no CUDA support"
    gpus = tf.config.list_physical_devices("GPU")
    index = device.index or 0
    if index >= len(gpus):
        return f"TensorFlow sees {len(gpus)} GPU(s), so it has no GPU {index} (are its CUDA libraries installed?)"
    return None


#: a child's 16-bit Keras LSTM on TensorFlow's CPU: one forward and one gradient, with the policy in argv[1]
_PROBE = """
import sys
import numpy as np
import keras
import tensorflow as tf
layer = keras.layers.LSTM(4, dtype=sys.argv[1])
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(tf.cast(layer(tf.constant(np.ones((2, 3, 3), "float32"))), "float32"))
tape.gradient(loss, layer.trainable_variables)
"""


@cache
def tensorflow_refuses(precision: str) -> str | None:
    """Why TensorFlow cannot run a `precision` LSTM on this CPU with oneDNN capped (`backends.isa_cap`), or None.

    TensorFlow's own CPU check ignores the cap: on a CPU with AVX-512 it still asks the capped oneDNN for 16-bit
    kernels, which oneDNN refuses, and the process dies (an abort or a segfault, not an exception). A child
    process tries a tiny one first (a few seconds, once per process); a CPU that really lacks the instructions
    never gets here, since only the cap makes the two views differ."""
    done = subprocess.run([sys.executable, "-c", _PROBE, POLICIES[precision]], capture_output=True, text=True,
                          timeout=300)
    if done.returncode >= 0:  # it ran, or failed with an exception: the build in this process will say which
        return None
    try:
        died = signal.Signals(-done.returncode).name
    except ValueError:
        died = f"signal {-done.returncode}"
    return (f"TensorFlow died ({died}) running a {precision} LSTM with {isa_cap()}: its own CPU check ignores "
            f"the cap and asks oneDNN for {precision} kernels the cap removed")


@dataclass
class _Runner:
    """The backend-specific half of a kernel: the timed step, its sync, an inference call, and what ran
    (observed, on torch) or what the traced graph predicts (TensorFlow)."""

    step: Callable[[], object]
    sync: Sync | None
    infer: Callable[[], object]
    observe: Callable[[], Observation] = field(default=lambda: NOTHING)
    predicted_kernel: str = ""


def _build(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str, weights: LSTMWeights,
           config: Mapping[str, object], **layer_kwargs: object) -> Built:
    """Build `shape.layers` stacked `keras.layers.LSTM(**layer_kwargs)` layers loaded with `weights`."""
    if weights.shape != shape:
        raise ValueError(f"weights are for {weights.shape}, not {shape}")
    keras = import_keras()
    on_tensorflow = keras_backend() == "tensorflow"
    with keras.device(device_name(device)):
        model = _stack(keras, shape, POLICIES[precision], layer_kwargs)
        cells = _cells(keras, model)
        _load(cells, weights)
    variables = [v for layer in cells for cell in layer for v in _cell_variables(cell)]
    x, target = make_inputs(shape)
    if on_tensorflow:
        runner = _tensorflow_runner(model, variables, x, target, device, phase)
    elif keras_backend() == "jax":
        runner = _jax_runner(model, variables, x, target, device, phase, precision)
    else:
        runner = _torch_runner(keras, model, variables, x, target, device, phase)

    def output():
        return runner.step() if phase == "inference" else runner.infer()

    def grads() -> list[list[dict[str, np.ndarray]]]:
        return _canonical_grads(cells, [_numpy(keras, g) for g in runner.step()])

    compute_dtype = checked_compute_dtype(name, precision, keras.backend.standardize_dtype(output().dtype), mixed=False)
    return Built(name=name, shape=shape, device=device, precision=precision, phase=phase, step=runner.step,
                 sync=runner.sync, forward=lambda: _numpy(keras, output()), compute_dtype=compute_dtype,
                 grads=grads if phase == "train" else None, observe=runner.observe,
                 predicted_kernel=runner.predicted_kernel)


def _stack(keras, shape: LSTMShape, dtype: str, layer_kwargs: dict[str, object]):
    """A Sequential of LSTM layers (each wrapped in Bidirectional when asked), output like nn.LSTM's."""
    layers = [keras.Input(shape=(shape.timesteps, shape.features), batch_size=shape.batch)]
    for _ in range(shape.layers):
        lstm = keras.layers.LSTM(shape.hidden, return_sequences=True, dtype=dtype, **layer_kwargs)
        if shape.bidirectional:
            wrapper = keras.layers.Bidirectional(lstm, merge_mode="concat", dtype=dtype)
            # Bidirectional rebuilds both directions from get_config(), which drops `implementation`
            for direction in (wrapper.forward_layer, wrapper.backward_layer):
                direction.cell.implementation = lstm.cell.implementation
            lstm = wrapper
        layers.append(lstm)
    return keras.Sequential(layers)


def _cells(keras, model) -> list[list[object]]:
    """The LSTM cells as `[layer][direction]`, the layout of `LSTMWeights.layers`."""
    return [[layer.forward_layer.cell, layer.backward_layer.cell]
            if isinstance(layer, keras.layers.Bidirectional) else [layer.cell]
            for layer in model.layers]


def _cell_variables(cell) -> list[object]:
    return [cell.kernel, cell.recurrent_kernel] + ([cell.bias] if cell.use_bias else [])


def _load(cells: list[list[object]], weights: LSTMWeights) -> None:
    """Copy PyTorch-layout weights into the cells (a cell without a bias ignores the biases)."""
    for layer_cells, layer_weights in zip(cells, weights.layers, strict=True):
        for cell, w in zip(layer_cells, layer_weights, strict=True):
            cell.kernel.assign(w["w_ih"].T)
            cell.recurrent_kernel.assign(w["w_hh"].T)
            if cell.use_bias:
                cell.bias.assign(w["b_ih"] + w["b_hh"])


def _canonical_grads(cells: list[list[object]], flat: list[np.ndarray]) -> list[list[dict[str, np.ndarray]]]:
    """Map gradients (in `_cell_variables` order) back to PyTorch's layout.

    Keras has one bias where PyTorch has two that are always summed, so both PyTorch bias gradients
    equal the Keras bias gradient. A cell without a bias has no bias gradients.
    """
    grads = iter(flat)
    out = []
    for layer_cells in cells:
        row = []
        for cell in layer_cells:
            g = {"w_ih": next(grads).T, "w_hh": next(grads).T}
            if cell.use_bias:
                g["b_ih"] = next(grads)
                g["b_hh"] = g["b_ih"].copy()
            row.append(g)
        out.append(row)
    return out


def _numpy(keras, tensor) -> np.ndarray:
    return np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(tensor, "float32")))


def tf_device(device: torch.device) -> str:
    """TensorFlow's name for a torch device (`/CPU:0`, `/GPU:N`)."""
    return "/CPU:0" if device.type == "cpu" else f"/GPU:{device.index or 0}"


def device_name(device: torch.device) -> str:
    """The name `keras.device` takes for a torch device on the backend in use: TensorFlow's, jax's ('cpu:0',
    'gpu:N'), or torch's own."""
    if keras_backend() == "jax":
        return "cpu:0" if device.type == "cpu" else f"gpu:{device.index or 0}"
    return tf_device(device) if keras_backend() == "tensorflow" else str(device)


def _tensorflow_runner(model, variables: list[object], x: np.ndarray, target: np.ndarray,
                       device: torch.device, phase: str) -> _Runner:
    """A `tf.function` step, traced here; what it will run is predicted from the traced graph (TensorFlow's
    placement decides the rest, which the torch profiler cannot see: nothing is observed)."""
    import tensorflow as tf

    name = tf_device(device)
    with tf.device(name):
        x_t, target_t = tf.constant(x), tf.constant(target)

    def infer():
        with tf.device(name):
            return model(x_t, training=False)

    def train():
        with tf.device(name):
            with tf.GradientTape() as tape:
                y = tf.cast(model(x_t, training=True), tf.float32)
                loss = tf.reduce_mean(tf.square(y - target_t))
            return tape.gradient(loss, variables)  # returned, so the gradients cannot be pruned

    step = tf.function(infer if phase == "inference" else train)
    kernel = graph_kernel(step.get_concrete_function().graph)
    if device.type == "cpu" and kernel == "cudnn":
        raise Skip("TensorFlow sees a GPU, so Keras traces its cuDNN kernel and TensorFlow places it on the "
                   "GPU: this kernel cannot be pinned to the CPU here (hide the GPU with CUDA_VISIBLE_DEVICES='')")
    return _Runner(step=step, sync=tf_sync(), infer=infer, predicted_kernel=kernel)


def graph_kernel(graph) -> str:
    """Which LSTM kernel a traced TensorFlow graph will run, as `lstmstudy.observe.classify_graph` reads its ops.

    Looks at every op, including those inside function bodies (while-loop bodies, gradients).
    """
    graph_def = graph.as_graph_def()
    ops = {node.op for node in graph_def.node}
    ops.update(node.op for function in graph_def.library.function for node in function.node_def)
    return classify_graph(ops)


def _torch_runner(keras, model, variables: list[object], x: np.ndarray, target: np.ndarray,
                  device: torch.device, phase: str) -> _Runner:
    """Eager calls on torch tensors, the way Keras runs on its torch backend; what ran is profiled.

    Under `ieee_fp32`, like the torch kernels: Keras's cuDNN path would otherwise run fp32 as TF32
    while its generic path's matmuls run IEEE fp32.
    """
    x_t = torch.as_tensor(x, device=device)
    target_t = torch.as_tensor(target, device=device)
    params = [v.value for v in variables]

    def infer():
        with torch.no_grad(), keras.device(str(device)), ieee_fp32(device):
            return model(x_t, training=False)

    def train():
        with keras.device(str(device)), ieee_fp32(device):
            loss = torch.mean(torch.square(model(x_t, training=True).float() - target_t))
            return torch.autograd.grad(loss, params)

    step = infer if phase == "inference" else train
    sync = sync_for(device)
    return _Runner(step=step, sync=sync, infer=infer, observe=cache(partial(observe, [step], device)))


def jax_gpus() -> list[object]:
    """The GPUs jax sees (none where its CUDA plugin is missing)."""
    import jax

    try:
        return jax.devices("gpu")
    except RuntimeError:  # no GPU backend
        return []


def jax_device(device: torch.device):
    """The jax device of a torch device."""
    import jax

    return jax.devices("cpu")[0] if device.type == "cpu" else jax_gpus()[device.index or 0]


class JaxSync:
    """Waits for the last step's outputs (`last`): jax dispatches asynchronously, on streams of its own, so neither
    a torch synchronize nor CUDA events on torch's stream would time it."""

    def __init__(self) -> None:
        self.last: object = None

    def __call__(self) -> None:
        import jax

        jax.block_until_ready(self.last)


def hlo_kernel(text: str) -> str:
    """Which LSTM kernel a lowered jax program runs, in `lstmstudy.observe`'s vocabulary: cuDNN's RNN (a custom
    call of `jax.experimental.rnn`), a compiled loop (`lax.scan` lowers to a while loop), or the steps unrolled."""
    if re.search(r"custom_call[^\n]*cudnn", text, flags=re.IGNORECASE):
        return "cudnn"
    return "framework-loop" if re.search(r"\bwhile\b", text) else "unrolled"


def _jax_runner(model, variables: list[object], x: np.ndarray, target: np.ndarray, device: torch.device,
                phase: str, precision: str = "fp32") -> _Runner:
    """A `jax.jit` step over the model's `stateless_call`, compiled here; what it runs is predicted from the lowered
    program. A training step returns the gradients of `variables` and keeps the state it moved on (the dropout
    seeds), so every call draws fresh masks as the torch backend's calls do."""
    import jax
    import jax.numpy as jnp

    where = jax_device(device)
    x_j, target_j = jax.device_put(x, where), jax.device_put(target, where)
    trainable = [jax.device_put(v.value, where) for v in model.trainable_variables]
    state = {"others": [jax.device_put(v.value, where) for v in model.non_trainable_variables]}
    wanted = [next(i for i, v in enumerate(model.trainable_variables) if v is w) for w in variables]

    def forward(params, others, inputs):
        return model.stateless_call(params, others, inputs, training=False)[0]

    def loss(params, others, inputs, goal):
        y, others = model.stateless_call(params, others, inputs, training=True)
        return jnp.mean(jnp.square(y.astype("float32") - goal)), others

    def gradients(params, others, inputs, goal):
        grads, others = jax.grad(loss, has_aux=True)(params, others, inputs, goal)
        return [grads[i] for i in wanted], others

    infer_fn, train_fn = jax.jit(forward), jax.jit(gradients)
    sync = JaxSync()

    def infer():
        sync.last = infer_fn(trainable, state["others"], x_j)
        return sync.last

    def train():
        grads, state["others"] = train_fn(trainable, state["others"], x_j, target_j)
        sync.last = grads
        return grads

    args = (trainable, state["others"], x_j) + (() if phase == "inference" else (target_j,))
    try:
        kernel = hlo_kernel((infer_fn if phase == "inference" else train_fn).lower(*args).as_text())
        (infer if phase == "inference" else train)()  # compiled here, not in the first timed call
    except Exception as exc:
        if device.type == "cpu" and jax_gpus():  # Keras took cuDNN's path, which runs on jax's GPU only
            raise Skip(f"jax sees a GPU, so Keras takes jax.experimental.rnn's cuDNN LSTM, which cannot run on the "
                       f"CPU ({type(exc).__name__}): hide the GPU with JAX_PLATFORMS=cpu") from exc
        if device.type == "cuda" and precision != "fp32":  # its lowering takes float32 and float64 only
            raise Skip(f"Keras on jax takes jax.experimental.rnn's cuDNN LSTM, which failed to compile at {precision}: "
                       f"{type(exc).__name__}: {exc}") from exc
        raise
    if device.type == "cpu" and kernel == "cudnn":
        raise Skip("jax sees a GPU, so Keras takes jax.experimental.rnn's cuDNN LSTM, which cannot run on the CPU: "
                   "hide the GPU with JAX_PLATFORMS=cpu")
    return _Runner(step=infer if phase == "inference" else train, sync=sync, infer=infer, predicted_kernel=kernel)


#: every Keras LSTM row: `shape.layers` stacked `keras.layers.LSTM(**options)`, the row's options
stacked = Recipe(_build, unavailable=unavailable)
