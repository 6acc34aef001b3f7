"""Claim 1: an LSTM that breaks cuDNN's criteria silently falls back to a generic kernel 2-5x slower.

Seeds: Chollet (Deep Learning with Python, 2nd ed., quoted in the blog post 000): recurrent dropout
"forces the runtime to fall back to the regular TensorFlow implementation, which is generally two to
five times slower on GPU"; the Q&A (001): CuDNNLSTM vs LSTM on an RTX 2070, 69 s vs 1012 s per epoch
(15x), and "10 mins 30 seconds" vs "less than a minute".

Each trigger is compared with the fused kernel of its own framework at the same configuration:
Keras triggers against `keras.cudnn_auto`, PyTorch's generic paths against `torch.fused`. On a CPU,
Keras has no fused LSTM at all (cuDNN is GPU-only), so the CPU form of the claim is PyTorch's oneDNN
fused LSTM against the same module with oneDNN disabled (`torch.native`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial

import numpy as np
import pandas as pd

from lstmstudy import kernels, sweep
from lstmstudy.claims import (
    Claim,
    Outcome,
    Verdict,
    band,
    geomean,
    ratios,
    timing_options,
)
from lstmstudy.observe import NOTHING, observe, predicted
from lstmstudy.parameters import check_bool, check_choices, check_positive_ints
from lstmstudy.shapes import LSTMShape

NAME = "cudnn_fallback"
NUMBER = "01"
STATEMENT = "Breaking cuDNN's criteria makes an LSTM fall back to a generic kernel that is 2-5x slower"
SEED_FIGURE = "2-5x (Chollet); 15x (CuDNNLSTM vs LSTM, RTX 2070)"
SEED_BAND = (2.0, 5.0)
RULE = ("reproduced if the geometric-mean slowdown of the fallback over the fused kernel is at least 2x "
        "(within or above the 2-5x range); partly if it is between 1.25x and 2x; not reproduced below 1.25x")
REPRODUCED = (2.0, float("inf"))
PARTLY = (1.25, 2.0)

#: fallback kernel -> (the fused kernel it is compared with, what breaks the criteria)
TRIGGERS: dict[str, tuple[str, str]] = {
    "keras.relu": ("keras.cudnn_auto", "activation='relu'"),
    "keras.recurrent_dropout": ("keras.cudnn_auto", "recurrent_dropout=0.2"),
    "keras.unroll": ("keras.cudnn_auto", "unroll=True"),
    "keras.no_bias": ("keras.cudnn_auto", "use_bias=False"),
    "keras.generic": ("keras.cudnn_auto", "use_cudnn=False"),
    "torch.native": ("torch.fused", "vendor kernel disabled (cuDNN on GPU, oneDNN on CPU)"),
    "torch.cell_loop": ("torch.fused", "a Python loop over nn.LSTMCell"),
    "torch.custom_activation": ("torch.fused", "LeakyReLU(0.05) cell activation, Python loop"),
    "torch.compiled": ("torch.fused", "LeakyReLU(0.05) cell under torch.compile"),
}
#: compiled once per configuration (tens of seconds each on a small CPU): measured at the grid's first
#: batch and hidden size only, and left out of quick runs
COMPILED = {"torch.compiled"}
#: the comparison that carries the verdict, per device kind
HEADLINE = {"cuda": ("keras.recurrent_dropout", "keras.relu", "torch.native"), "cpu": ("torch.native",)}


def grid(*, kind: str, quick: bool, batches: Sequence[int], hiddens: Sequence[int], timesteps: int,
         features: int, phases: Sequence[str], blog_model: bool = True,
         kernel_names: Sequence[str] | None = None) -> list[sweep.Point]:
    """Every trigger and its fused baseline at every batch x hidden size and phase, then the blog's model.

    The same grid on every device kind (`kind` is part of the contract; the defaults differ by kind).
    """
    names = list(kernel_names or sorted({*TRIGGERS, *(base for base, _ in TRIGGERS.values())}))
    if quick:
        batches, hiddens, timesteps = batches[:1], hiddens[:1], min(timesteps, 8)
        names = [n for n in names if n not in COMPILED]
    first = (batches[0], hiddens[0])
    points = [sweep.Point(kernel, LSTMShape(batch=b, timesteps=timesteps, features=features, hidden=h), phase=phase)
              for phase in phases for b in batches for h in hiddens for kernel in names
              if kernel not in COMPILED or (b, h) == first]
    return points + (blog_points(phases) if blog_model else [])


def measure(points: list[sweep.Point], *, device: str, min_time: float, quick: bool = False,
            **sweep_options) -> list[sweep.SweepReport]:
    """Measure the points not yet stored for this hardware (the blog model's among them)."""
    return [sweep.run(NAME, points, partial(measure_point, **timing_options(min_time, quick)), device=device,
                      **sweep_options)]


def check_parameters(parameters: dict) -> None:
    check_positive_ints(batches=parameters["batches"], hiddens=parameters["hiddens"],
                        timesteps=[parameters["timesteps"]], features=[parameters["features"]])
    check_choices("phases", parameters["phases"], sweep.PHASES)
    check_bool(blog_model=parameters["blog_model"])


def slowdowns(results: pd.DataFrame) -> pd.DataFrame:
    """Every trigger's median time over its fused baseline's, with bootstrap CIs."""
    parts = [ratios(results, baseline, [k for k, (b, _) in TRIGGERS.items() if b == baseline])
             for baseline in sorted({b for b, _ in TRIGGERS.values()})]
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not out.empty:
        out["trigger"] = out.kernel.map(lambda k: TRIGGERS[k][1])
    return out


def verdicts(results: pd.DataFrame) -> list[Verdict]:
    """One verdict per hardware set, from the headline comparison of its device kind."""
    table = slowdowns(results)
    out = []
    for hardware_id in sorted(results.hardware_id.unique()) if not results.empty else []:
        kind = "cuda" if hardware_id.startswith("cuda-") else "cpu"
        mine = (table[(table.hardware_id == hardware_id) & table.kernel.isin(HEADLINE[kind])]
                if not table.empty else table)
        if mine.empty:
            out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, "not measured",
                               Outcome.NOT_MEASURED, RULE))
            continue
        figure = geomean(mine.ratio)
        what = ", ".join(sorted(mine.kernel.unique()))
        text = f"{figure:.2f}x (geometric mean of {len(mine)} configurations: {what} over the fused kernel)"
        out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, figure, text, band(figure, REPRODUCED, PARTLY),
                           RULE))
    return out


# --- the criteria table -----------------------------------------------------------------------------

def criteria_table(device: str = "cuda") -> pd.DataFrame:
    """For each Keras trigger and each PyTorch setting: the kernel the explainer says it gets on
    `device` ('cuda': a machine with a GPU, whether or not this one has one) and every reason."""
    import keras
    from torch import nn

    from lstmstudy.kernels.criteria import explain_cudnn
    from lstmstudy.kernels.keras_kernels import layer_kwargs

    rows = []
    for name in ["keras.cudnn_auto", *(k for k in TRIGGERS if k.startswith("keras."))]:
        layer = keras.layers.LSTM(8, **layer_kwargs(name))
        layer.build((1, 4, 4))
        rows.append((name, explain_cudnn(layer, device=device)[0]))
    left_padded = np.array([[False, True, True, True]])
    rows.append(("keras.cudnn_auto + left-padded mask",
                 explain_cudnn(keras.layers.LSTM(8), mask=left_padded, device=device)[0]))
    torch_settings = {"nn.LSTM": nn.LSTM(4, 8, batch_first=True),
                      "nn.LSTM(proj_size=4)": nn.LSTM(4, 8, batch_first=True, proj_size=4)}
    for name, module in torch_settings.items():
        rows.append((name, explain_cudnn(module, device=device)[0]))
    return pd.DataFrame([{"configuration": name, "kernel": e.kernel, "fused": e.fused_eligible,
                          "why not the fused kernel": "; ".join(r.message for r in e.reasons) or "-"}
                         for name, e in rows])


# --- the blog post's model ----------------------------------------------------------------------------

BLOG_KERNEL = "keras.blog_model"
#: The blog post's model: LSTM(64, activation=ReLU(negative_slope=0.05)) -> Dropout(0.2) -> LSTM(32) ->
#: Dropout(0.2) -> Dense(n_features), batch 1, Adam(1e-3), MSE. Its timesteps and features are not given;
#: we assume 32 and 16.
BLOG_SHAPE = LSTMShape(batch=1, timesteps=32, features=16, hidden=64, layers=2)
BLOG_ACTIVATIONS = ("leaky_relu", "tanh")


def blog_points(phases: Sequence[str]) -> list[sweep.Point]:
    return [sweep.Point(BLOG_KERNEL, BLOG_SHAPE, phase=phase, config={"activation": activation})
            for phase in phases for activation in BLOG_ACTIVATIONS]


def blog_autoencoder(*, batch: int, timesteps: int, features: int, activation: str = "leaky_relu",
                     hidden: int = 64, hidden2: int = 32, use_cudnn: bool | str = "auto"):
    """The blog post's model, compiled as the post compiles it (also claim 2's Keras autoencoder).

    LSTM(hidden, activation, return_sequences) -> Dropout(0.2) -> LSTM(hidden2) -> Dropout(0.2) ->
    Dense(features), MSE, Adam(1e-3). `activation`: "leaky_relu" (the post's ReLU(negative_slope=0.05),
    which loses cuDNN) or "tanh" (Keras's default). `use_cudnn=False` keeps a CPU measurement on the CPU
    on a machine that also has a GPU.
    """
    from lstmstudy.backends import import_keras

    keras = import_keras()
    act = keras.layers.ReLU(negative_slope=0.05) if activation == "leaky_relu" else "tanh"
    model = keras.Sequential([
        keras.Input(shape=(timesteps, features), batch_size=batch),
        keras.layers.LSTM(hidden, activation=act, return_sequences=True, use_cudnn=use_cudnn),
        keras.layers.Dropout(0.2),
        keras.layers.LSTM(hidden2, use_cudnn=use_cudnn),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(features),
    ])
    model.compile(loss="mean_squared_error", optimizer=keras.optimizers.Adam(learning_rate=0.001))
    return model


def _measure_blog(point: sweep.Point, device, **timing_kwargs) -> sweep.PointResult:
    """One `train_on_batch` (what `fit` does per step) or `predict_on_batch`, as the blog's user runs it."""
    import keras

    from lstmstudy.kernels.criteria import explain_cudnn
    from lstmstudy.kernels.keras_kernels import tf_device
    from lstmstudy.timing import measure as time_call
    from lstmstudy.timing import sync_for, tf_sync

    rng = np.random.default_rng(0)
    s = BLOG_SHAPE
    x = rng.standard_normal((s.batch, s.timesteps, s.features)).astype("float32")
    y = rng.standard_normal((s.batch, s.features)).astype("float32")
    tf_backend = keras.backend.backend() == "tensorflow"
    with keras.device(tf_device(device) if tf_backend else str(device)):
        model = blog_autoencoder(batch=s.batch, timesteps=s.timesteps, features=s.features,
                                 activation=str(point.config["activation"]))
        step = (lambda: model.train_on_batch(x, y)) if point.phase == "train" else (lambda: model.predict_on_batch(x))
        m = time_call(step, sync=tf_sync() if tf_backend else sync_for(device), **timing_kwargs)
    backend = keras.backend.backend()
    return sweep.PointResult(measurement=m, observed=NOTHING if tf_backend else observe([step], device),
                         predicted_kernel=",".join(predicted(e.kernel, backend)
                                                   for e in explain_cudnn(model, device="auto")),
                         compute_dtype=keras.backend.standardize_dtype(model.compute_dtype))


def measure_point(point: sweep.Point, device, **timing_kwargs) -> sweep.PointResult:
    if point.kernel == BLOG_KERNEL:
        return _measure_blog(point, device, **timing_kwargs)
    return kernels.measure_point(point, device, **timing_kwargs)


def blog_table(results: pd.DataFrame) -> pd.DataFrame:
    """The blog model's step time with the LeakyReLU activation over the default tanh, per hardware and phase."""
    blog = results[(results.kernel == BLOG_KERNEL) & (results.status == "ok")].copy()
    if blog.empty:
        return pd.DataFrame(columns=["hardware_id", "phase", "tanh ms", "leaky_relu ms", "slowdown"])
    blog["activation"] = blog.config.map(lambda c: json.loads(c)["activation"])
    wide = blog.pivot_table(index=["hardware_id", "phase"], columns="activation", values="median_s") * 1e3
    wide = wide.rename(columns=lambda a: f"{a} ms")
    wide["slowdown"] = wide["leaky_relu ms"] / wide["tanh ms"]
    return wide.reset_index()


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """One slowdown per hardware set, fallback kernel and phase: geometric means over the grid of the
    ratios and of their bootstrap interval bounds."""
    if table.empty:
        return table
    return (table.groupby(["hardware_id", "kernel", "phase"])[["ratio", "ratio_lo", "ratio_hi"]]
            .agg(geomean).reset_index())


CLAIM = Claim(
    number=NUMBER, name=NAME, statement=STATEMENT, seed_figure=SEED_FIGURE, rule=RULE,
    defaults={
        "cpu": dict(batches=[1, 32], hiddens=[64, 256], timesteps=32, features=32, phases=list(sweep.PHASES),
                    blog_model=True),
        # 86 points, as on the CPU; a GPU makes the larger hidden size cheap
        "cuda": dict(batches=[1, 64], hiddens=[64, 512], timesteps=32, features=32, phases=list(sweep.PHASES),
                     blog_model=True),
    },
    grid=grid, measure=measure, verdicts=verdicts, check=check_parameters,
    seconds_per_point={"cpu": 1.9, "cuda": 1.5}, slow=frozenset(COMPILED),
)
