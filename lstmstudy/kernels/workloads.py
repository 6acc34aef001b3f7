"""Everything timed that is not one LSTM layer, in the registry like the kernels: whole models and the GEMM.

- `keras.blog_model`: the blog post's autoencoder as its user runs it (`train_on_batch`, `predict_on_batch`);
- `keras.autoencoder`, `torch.autoencoder`, `keras.bilstm_imdb`, `torch.bilstm_imdb`: the blog's autoencoder
  and Keras's IMDb Bidirectional LSTM, each in Keras and PyTorch, one training step (forward, backward,
  optimizer update);
- `torch.padded`, `torch.packed`, `keras.masked`: one pass of training steps over the sampled batches of a
  padding or bucketing plan (`data.sample_for`);
- `gemm`: an n x n x n matrix product, the roofline every LSTM is judged against.

Each recipe follows the registry's contract (`built.Recipe`), `build(name, shape, device, precision, phase,
weights, config)`; `config` carries what a shape cannot say (the activation, the vocabulary, the plan), and `weights` is
unused: these models keep their frameworks' seeded initialisation, since they are timed, not checked
against the reference LSTM. `Built.flops` counts what a step computes (the LSTM layers only, for models).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache, partial

import numpy as np
import torch
from torch import nn

from lstmstudy import data
from lstmstudy.backends import import_keras, keras_backend
from lstmstudy.errors import Skip
from lstmstudy.kernels.built import Built, LSTMWeights, Recipe, dtype_name
from lstmstudy.kernels.criteria import explain_cudnn
from lstmstudy.kernels.torch_kernels import DTYPES
from lstmstudy.observe import (
    NO_LSTM,
    NOTHING,
    Observation,
    observe,
    observe_batches,
)
from lstmstudy.shapes import AUTOENCODER, BILSTM, LSTMShape
from lstmstudy.timing import Sync, sync_for, tf_sync

#: Adam's learning rate in both whole models (`shapes.AUTOENCODER`, `shapes.BILSTM`)
LEARNING_RATE = 1e-3


def _built(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str, *,
           step: Callable[[], object], sync: Sync | None, compute_dtype: str, flops: float | None,
           observe_once: Callable[[], Observation] = lambda: NOTHING, predicted_kernel: str = "") -> Built:
    return Built(name=name, shape=shape, device=device, precision=precision, phase=phase, step=step, sync=sync,
                 compute_dtype=compute_dtype, flops=flops, observe=cache(observe_once),
                 predicted_kernel=predicted_kernel)


def _fp32_only(name: str, precision: str) -> None:
    if precision != "fp32":
        raise Skip(f"{name} is a whole model trained in fp32, as its source trains it; not {precision}")


def _keras_predictions(model) -> str:
    """The explainer's answer for every recurrent layer of `model`, in `lstmstudy.observe`'s vocabulary."""
    return ",".join(e.kernel for e in explain_cudnn(model, device="auto"))


def _keras_model_row(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str,
                     make_model: Callable[[], object], x: np.ndarray, y: np.ndarray, flops: float | None) -> Built:
    """A compiled Keras model timed as its user runs it: `train_on_batch`, or `predict_on_batch`."""
    from lstmstudy.kernels.keras_kernels import (  # Keras is optional: imported when used
        device_name,
        unavailable,
    )

    _fp32_only(name, precision)
    if reason := unavailable(device, precision):
        raise Skip(f"{name} on {device.type}: {reason}")
    keras = import_keras()
    on_tensorflow, on_jax = keras_backend() == "tensorflow", keras_backend() == "jax"
    with keras.device(device_name(device)):
        model = make_model()

    def step():
        with keras.device(device_name(device)):
            return model.train_on_batch(x, y) if phase == "train" else model.predict_on_batch(x)

    # on jax both calls return numpy values, so a step waits for its own work (no torch sync can see jax's), and
    # neither the torch profiler nor the explainer sees what jax runs: nothing observed, nothing predicted
    return _built(name, shape, device, precision, phase,
                  step=step, sync=tf_sync() if on_tensorflow else None if on_jax else sync_for(device),
                  compute_dtype=keras.backend.standardize_dtype(model.compute_dtype), flops=flops,
                  observe_once=(lambda: NOTHING) if on_tensorflow or on_jax else partial(observe, [step], device),
                  predicted_kernel="" if on_jax else _keras_predictions(model))


# --- the blog post's autoencoder and Keras's IMDb BiLSTM ------------------------------------------------

def blog_autoencoder(*, batch: int, timesteps: int, features: int, activation: str = "leaky_relu",
                     hidden: int = 64, hidden2: int = 32, use_cudnn: bool | str = "auto"):
    """The blog post's model, compiled as the post compiles it.

    `activation`: "leaky_relu" (the post's ReLU(negative_slope=0.05), which loses cuDNN) or "tanh" (Keras's
    default). `use_cudnn=False` keeps a CPU measurement on the CPU on a machine that also has a GPU.
    """
    keras = import_keras()
    act = keras.layers.ReLU(negative_slope=0.05) if activation == "leaky_relu" else "tanh"
    model = keras.Sequential([
        keras.Input(shape=(timesteps, features), batch_size=batch),
        keras.layers.LSTM(hidden, activation=act, return_sequences=True, use_cudnn=use_cudnn),
        keras.layers.Dropout(AUTOENCODER["dropout"]),
        keras.layers.LSTM(hidden2, use_cudnn=use_cudnn),
        keras.layers.Dropout(AUTOENCODER["dropout"]),
        keras.layers.Dense(features),
    ])
    model.compile(loss="mean_squared_error", optimizer=keras.optimizers.Adam(learning_rate=LEARNING_RATE))
    return model


def _bilstm_imdb(shape: LSTMShape, vocab: int, use_cudnn: bool | str):
    keras = import_keras()
    model = keras.Sequential([
        keras.Input(shape=(shape.timesteps,), batch_size=shape.batch, dtype="int32"),
        keras.layers.Embedding(vocab, shape.features),
        keras.layers.Bidirectional(keras.layers.LSTM(shape.hidden, use_cudnn=use_cudnn)),
        keras.layers.Dropout(BILSTM["dropout"]),
        keras.layers.Dense(1, activation="sigmoid"),
    ])
    model.compile(loss="binary_crossentropy", optimizer=keras.optimizers.Adam(learning_rate=LEARNING_RATE))
    return model


def _workload_data(shape: LSTMShape, config: Mapping[str, object], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic batch of the workload's shapes: noise for the autoencoder, random tokens and labels for IMDb."""
    rng = np.random.default_rng(seed)
    if config["workload"] == "autoencoder":
        x = rng.standard_normal((shape.batch, shape.timesteps, shape.features)).astype("float32")
        y = rng.standard_normal((shape.batch, shape.features)).astype("float32")
    else:
        x = rng.integers(0, int(config["vocab"]), size=(shape.batch, shape.timesteps)).astype("int32")
        y = rng.integers(0, 2, size=(shape.batch, 1)).astype("float32")
    return x, y


def workload_flops(shape: LSTMShape, config: Mapping[str, object]) -> float:
    """Training FLOPs of the LSTM layers (3x forward), the autoencoder's second, narrower layer included."""
    if config.get("workload") == "autoencoder":
        first = LSTMShape(batch=shape.batch, timesteps=shape.timesteps, features=shape.features, hidden=shape.hidden)
        second = LSTMShape(batch=shape.batch, timesteps=shape.timesteps, features=shape.hidden,
                           hidden=int(config["hidden2"]))
        return first.flops("train") + second.flops("train")
    return shape.flops("train")


def _blog(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str, weights: LSTMWeights,
          config: Mapping[str, object]) -> Built:
    """`keras.blog_model`: the post's model at `shape` (layers=2), `config["activation"]`."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((shape.batch, shape.timesteps, shape.features)).astype("float32")
    y = rng.standard_normal((shape.batch, shape.features)).astype("float32")
    make = partial(blog_autoencoder, batch=shape.batch, timesteps=shape.timesteps, features=shape.features,
                   activation=str(config["activation"]), hidden=shape.hidden)
    return _keras_model_row(name, shape, device, precision, phase, make, x, y, flops=None)


def _keras_workload(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str,
                    weights: LSTMWeights, config: Mapping[str, object]) -> Built:
    """`keras.autoencoder` and `keras.bilstm_imdb`: one `train_on_batch`. On a CPU no layer may pick cuDNN
    (`use_cudnn=False`), which keeps TensorFlow from placing a traced cuDNN op on a GPU it also sees."""
    use_cudnn = False if device.type == "cpu" else "auto"
    if config["workload"] == "autoencoder":
        make = partial(blog_autoencoder, batch=shape.batch, timesteps=shape.timesteps, features=shape.features,
                       hidden=shape.hidden, hidden2=int(config["hidden2"]), use_cudnn=use_cudnn)
    else:
        make = partial(_bilstm_imdb, shape, int(config["vocab"]), use_cudnn)
    x, y = _workload_data(shape, config)
    return _keras_model_row(name, shape, device, precision, "train", make, x, y, flops=workload_flops(shape, config))


class TorchAutoencoder(nn.Module):
    """The blog's autoencoder with PyTorch's standard (tanh) LSTM cell: nn.LSTM takes no other activation."""

    def __init__(self, features: int, hidden: int, hidden2: int, dropout: float) -> None:
        super().__init__()
        self.lstm1 = nn.LSTM(features, hidden, batch_first=True)
        self.lstm2 = nn.LSTM(hidden, hidden2, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(hidden2, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq, _ = self.lstm1(x)
        _, (h, _) = self.lstm2(self.dropout(seq))
        return self.dense(self.dropout(h[-1]))


class TorchBiLSTM(nn.Module):
    """Keras's IMDb example in PyTorch: the last states of both directions, concatenated, to one logit."""

    def __init__(self, vocab: int, embed: int, hidden: int, dropout: float) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(2 * hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.lstm(self.embedding(x))
        return self.dense(self.dropout(torch.cat([h[0], h[1]], dim=1)))  # a logit; the loss applies the sigmoid


def _torch_workload(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str,
                    weights: LSTMWeights, config: Mapping[str, object]) -> Built:
    """`torch.autoencoder` and `torch.bilstm_imdb`: one Adam training step."""
    _fp32_only(name, precision)
    torch.manual_seed(0)
    x_np, y_np = _workload_data(shape, config)
    if config["workload"] == "autoencoder":
        model = TorchAutoencoder(shape.features, shape.hidden, int(config["hidden2"]), AUTOENCODER["dropout"])
        loss_fn, x = nn.MSELoss(), torch.as_tensor(x_np, device=device)
    else:
        model = TorchBiLSTM(int(config["vocab"]), shape.features, shape.hidden, BILSTM["dropout"])
        loss_fn, x = nn.BCEWithLogitsLoss(), torch.as_tensor(x_np.astype("int64"), device=device)
    model = model.to(device).train()
    y = torch.as_tensor(y_np, device=device)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()

    return _built(name, shape, device, precision, "train", step=step, sync=sync_for(device),
                  compute_dtype=dtype_name(next(model.parameters()).dtype), flops=workload_flops(shape, config),
                  observe_once=partial(observe, [step], device))


# --- training on the batches of a padding or bucketing plan ----------------------------------------------

def _plan_flops(name: str, shape: LSTMShape, sample: data.BatchPlan) -> float:
    """FLOPs of one pass: the padded steps computed (the real ones only, for a packed batch)."""
    steps = sample.real_steps if name == "torch.packed" else sample.padded_steps
    return shape.flops("train") / (shape.batch * shape.timesteps) * steps


def _torch_plan(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str,
                weights: LSTMWeights, config: Mapping[str, object], *, packed: bool) -> Built:
    """`torch.padded` (every padded step computed) and `torch.packed` (`pack_padded_sequence`): one pass of
    SGD steps over the sampled batches, a masked mean-squared loss against the input."""
    _fp32_only(name, precision)
    sample = data.sample_for(dict(config))
    torch.manual_seed(0)
    lstm = nn.LSTM(shape.features, shape.hidden, shape.layers, batch_first=True).to(device)
    head = nn.Linear(shape.hidden, shape.features).to(device)
    optimizer = torch.optim.SGD([*lstm.parameters(), *head.parameters()], lr=0.01)
    batches = data.torch_batches(sample.lengths, sample, shape.features, device=device)
    masks = [(torch.arange(x.shape[1])[None, :] < lens[:, None]).to(device=device, dtype=x.dtype)
             for x, lens in batches]

    def step(x, lens, mask):
        optimizer.zero_grad(set_to_none=True)
        if packed:
            seq = data.pack_batch(x, lens)
            out, _ = lstm(seq)
            loss = torch.mean(torch.square(head(out.data) - seq.data))
        else:
            out, _ = lstm(x)
            loss = (torch.square(head(out) - x).mean(-1) * mask).sum() / mask.sum()
        loss.backward()
        optimizer.step()

    def run():
        for (x, lens), mask in zip(batches, masks):
            step(x, lens, mask)

    return _built(name, shape, device, precision, "train", step=run, sync=sync_for(device),
                  compute_dtype=dtype_name(next(lstm.parameters()).dtype), flops=_plan_flops(name, shape, sample),
                  observe_once=partial(observe_batches, run, device, len(batches), shape.layers))


def _masked_model(keras, shape: LSTMShape):
    layers = [keras.Input(shape=(None, shape.features)), keras.layers.Masking(mask_value=0.0)]
    layers += [keras.layers.LSTM(shape.hidden, return_sequences=True) for _ in range(shape.layers)]
    layers.append(keras.layers.Dense(shape.features))
    return keras.Sequential(layers)


def _keras_masked(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str,
                  weights: LSTMWeights, config: Mapping[str, object]) -> Built:
    """`keras.masked`: Masking -> LSTM x layers -> Dense, one pass of SGD steps over the sampled batches.

    TensorFlow: one traced `tf.function` for every width, what it runs predicted from the graph; torch:
    eager calls, what ran observed.
    """
    from lstmstudy.kernels.keras_kernels import graph_kernel, tf_device, unavailable

    _fp32_only(name, precision)
    if reason := unavailable(device, precision):
        raise Skip(f"{name} on {device.type}: {reason}")
    if keras_backend() == "jax":
        raise Skip(f"{name} runs on Keras's tensorflow or torch backend, not yet on jax")
    keras = import_keras()
    sample = data.sample_for(dict(config))
    keras.utils.set_random_seed(0)
    batches = data.keras_batches(sample.lengths, sample, shape.features)
    flops = _plan_flops(name, shape, sample)
    if keras_backend() == "tensorflow":
        import tensorflow as tf

        name = tf_device(device)
        with tf.device(name):
            model = _masked_model(keras, shape)
            optimizer = keras.optimizers.SGD(learning_rate=0.01)
            optimizer.build(model.trainable_variables)
            tensors = [(tf.constant(x), tf.constant(m, dtype=tf.float32)) for x, m in batches]

        @tf.function(input_signature=[tf.TensorSpec((None, None, shape.features), tf.float32),
                                      tf.TensorSpec((None, None), tf.float32)])
        def graph_step(x, mask):
            with tf.device(name):
                with tf.GradientTape() as tape:
                    y = model(x, training=True)
                    loss = tf.reduce_sum(tf.reduce_mean(tf.square(y - x), -1) * mask) / tf.reduce_sum(mask)
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

        kernel = graph_kernel(graph_step.get_concrete_function().graph)
        if device.type == "cpu" and kernel == "cudnn":
            raise Skip("TensorFlow sees a GPU, so Keras traces its cuDNN kernel: the Keras step cannot be pinned "
                       "to the CPU here (hide the GPU with CUDA_VISIBLE_DEVICES='')")

        def tf_run():
            for x, mask in tensors:
                graph_step(x, mask)

        return _built(name, shape, device, precision, "train", step=tf_run, sync=tf_sync(),
                      compute_dtype=keras.backend.standardize_dtype(model.compute_dtype), flops=flops,
                      predicted_kernel=kernel)

    with keras.device(str(device)):
        model = _masked_model(keras, shape)
        optimizer = keras.optimizers.SGD(learning_rate=0.01)
        optimizer.build(model.trainable_variables)
    tensors = [(torch.as_tensor(x, device=device), torch.as_tensor(m, device=device, dtype=torch.float32))
               for x, m in batches]

    def eager_step(x, mask):
        with keras.device(str(device)):
            y = model(x, training=True)
            loss = (torch.square(y - x).mean(-1) * mask).sum() / mask.sum()
            params = [v.value for v in model.trainable_variables]
            grads = torch.autograd.grad(loss, params)
            optimizer.apply(list(grads), model.trainable_variables)

    def run():
        for x, mask in tensors:
            eager_step(x, mask)

    return _built(name, shape, device, precision, "train", step=run, sync=sync_for(device),
                  compute_dtype=keras.backend.standardize_dtype(model.compute_dtype), flops=flops,
                  observe_once=partial(observe, [lambda: eager_step(*tensors[0])], device))


# --- the roofline's GEMM ------------------------------------------------------------------------------------

def _gemm(name: str, shape: LSTMShape, device: torch.device, precision: str, phase: str, weights: LSTMWeights,
          config: Mapping[str, object]) -> Built:
    """`gemm`: c = a @ b for n x n matrices (`config["n"]`); a precision the device cannot multiply in skips."""
    n = int(config["n"])
    dtype = DTYPES[precision]
    if device.type == "cuda" and precision == "bf16" and not torch.cuda.is_bf16_supported():
        raise Skip(f"{torch.cuda.get_device_name(device)} has no bf16 support")
    generator = torch.Generator(device=device).manual_seed(0)
    a, b = (torch.randn(n, n, device=device, generator=generator).to(dtype) for _ in range(2))
    c = torch.empty(n, n, device=device, dtype=dtype)
    try:
        torch.mm(a, b, out=c)
    except RuntimeError as exc:  # e.g. a build without a kernel for this dtype on this device
        raise Skip(f"no {precision} matmul on {device.type}: {str(exc).splitlines()[0]}") from exc
    return _built(name, shape, device, precision, phase, step=lambda: torch.mm(a, b, out=c),
                  sync=sync_for(device), compute_dtype=dtype_name(dtype), flops=2.0 * n**3,
                  observe_once=lambda: NO_LSTM)


# --- the recipes the registry (`lstmstudy.kernels.KERNELS`) names -------------------------------------------

keras_blog_model = Recipe(_blog)
keras_model = Recipe(_keras_workload)
torch_model = Recipe(_torch_workload)
torch_plan_padded = Recipe(partial(_torch_plan, packed=False))
torch_plan_packed = Recipe(partial(_torch_plan, packed=True))
keras_masked = Recipe(_keras_masked)
gemm = Recipe(_gemm)
