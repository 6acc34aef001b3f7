"""Claim 5: padding wastes work, and auto-generated greedy buckets train an LSTM 3.3x faster than no bucketing.

Seed (002, slides "Performance optimization of LSTM training on GPU", Lin & Wu): sentences of lengths
4, 8, 3, 7 in batches of two cost 22 real steps, 30 padded ("~36% more works") and 24 bucketed; and
"3.3x faster with autogen bucketing compared to no bucketing" for an 8-layer LSTM on Penn Treebank on
one GTX 750 (MXNet, judging by the authors and the vocabulary: "bucketing", "autogen").

What is measured. A PTB-like corpus (`lstmstudy.data.ptb_like_lengths`: a stated log-normal, not PTB
itself) is cut into batches by the four plans of `lstmstudy.data` and a multi-layer LSTM is trained
on them with three kernels:

- `torch.padded`: `nn.LSTM` on the padded batch; every padded step is computed, as MXNet's unrolled
  bucket graphs computed them. This is the kernel the verdict uses.
- `torch.packed`: the same module on `pack_padded_sequence(...)`, which skips the padding whatever
  the plan: the framework's own answer to padding waste.
- `keras.masked`: `Masking -> LSTM x layers -> Dense` in Keras, one `tf.function` train step (or an
  eager step on the torch backend); the mask is right-padded.

A training step is forward + a masked mean-squared loss against the input + backward + one SGD
update. Measuring a whole epoch (1,315 batches of 32 for the full corpus) on a small CPU is too slow,
so each plan's epoch time is estimated from a stratified sample of its batches: the batches are
sorted by padded steps (then real steps), cut into `sample_batches` strata of equal count (+-1
batch), and the middle batch of each stratum is kept. One timed call trains on those batches once,
in the plan's order; the epoch estimate is `median(call) x epoch_batches / sample_batches`, i.e.
each sampled batch stands for the batches of its stratum (a midpoint rule over the distribution of
batch costs, with less variance than a random sample of the same size).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from functools import lru_cache, partial
from pathlib import Path

import numpy as np
import pandas as pd

from lstmstudy import data, sweep
from lstmstudy.claims import (
    Claim,
    Outcome,
    Verdict,
    band,
    bootstrap_ratio,
    timing_options,
)
from lstmstudy.errors import ParameterError, Skip
from lstmstudy.kernels import dtype_name
from lstmstudy.observe import NOTHING, observe, observe_batches, what_ran
from lstmstudy.parameters import check_choices, check_positive_ints
from lstmstudy.shapes import LSTMShape

NAME = "bucketing"
NUMBER = "05"
STATEMENT = "Auto-generated greedy buckets make LSTM training 3.3x faster than no bucketing"
SEED_FIGURE = "3.3x (autogen buckets vs no bucketing; 8-layer LSTM, Penn Treebank, one GTX 750)"
SEED_SPEEDUP = 3.3
RULE = ("reproduced if auto buckets' estimated epoch time with torch.padded (every padded step computed, as "
        "the slides' framework did) is at least 2.5x shorter than with every batch padded to the corpus "
        "maximum (the slides' 'no bucketing'); partly if 1.5x-2.5x; not reproduced below 1.5x")
REPRODUCED = (2.5, math.inf)
PARTLY = (1.5, 2.5)

WORKED_STATEMENT = "Lengths 4, 8, 3, 7 in batches of two: 22 real steps, 30 padded (~36% more), 24 bucketed"
WORKED_SEED = "22 / 30 / 24 steps"
WORKED_RULE = "reproduced if the computed real, padded and bucketed steps are exactly 22, 30 and 24"

PLAN_NAMES: tuple[str, ...] = tuple(data.PLANS)  # pad_to_global_max, pad_per_batch, static_buckets, auto_buckets
NO_BUCKETING = "pad_to_global_max"  # the slides' "no bucketing": one bucket, as long as the longest sentence
PER_BATCH = "pad_per_batch"  # the other baseline: a shuffled loader that pads each batch to its own maximum
AUTO = "auto_buckets"
BASELINES = (NO_BUCKETING, PER_BATCH)
KERNELS = ("torch.padded", "torch.packed", "keras.masked")
HEADLINE = "torch.padded"
#: the seed's model depth; on a CPU the default is shallower to fit the time budget
SEED_LAYERS = 8

#: the config keys that name a setting (everything but the plan and what the plan determines)
SETTING_KEYS = ("batch_size", "corpus", "seed", "sample_batches")


# --- the corpus and its plans -------------------------------------------------------------------------

def check_boundaries(boundaries: object) -> tuple[int, ...]:
    """Static bucket boundaries as a notebook gives them: increasing positive integers (inf is appended)."""
    if (not isinstance(boundaries, (list, tuple)) or not boundaries
            or any(isinstance(b, bool) or not isinstance(b, int) or b <= 0 for b in boundaries)
            or any(a >= b for a, b in zip(boundaries, boundaries[1:]))):
        raise ParameterError(f"parameter 'static_boundaries' must be a non-empty list of increasing positive "
                             f"integers, got {boundaries!r}")
    return tuple(boundaries)


def check_parameters(parameters: dict) -> None:
    check_choices("kernels", parameters["kernels"], KERNELS)
    check_positive_ints(**{k: [parameters[k]] for k in ("batch_size", "corpus_size", "sample_batches", "layers",
                                                         "hidden", "features")})
    check_boundaries(parameters["static_boundaries"])
    check_pad_to(parameters["static_pad_to"])


def check_pad_to(pad_to: object) -> str:
    if pad_to not in data.PAD_TO:
        raise ParameterError(f"parameter 'static_pad_to' must be one of {list(data.PAD_TO)}, got {pad_to!r}")
    return str(pad_to)


@lru_cache(maxsize=8)
def corpus(n: int, seed: int = 0) -> np.ndarray:
    """The PTB-like sentence lengths (the first `n` of the seeded draw; read-only)."""
    lengths = data.ptb_like_lengths(n, seed)
    lengths.flags.writeable = False
    return lengths


def make_plan(name: str, lengths: np.ndarray, batch_size: int, *, seed: int = 0,
              boundaries: Sequence[int] = (10, 20, 30, 40, 60), pad_to: str = "boundary") -> data.BatchPlan:
    """One of the four plans; the random ones (and the batch order of the bucketed ones) seeded.

    `pad_to_global_max` keeps the corpus order, which is already random (the lengths are i.i.d. draws).
    Static buckets end with an `inf` bucket so no sentence is dropped; `pad_to='boundary'` pads each
    batch to its bucket's boundary, as MXNet's `BucketSentenceIter` does (one unrolled graph per bucket).
    """
    if name == NO_BUCKETING:
        return data.pad_to_global_max(lengths, batch_size)
    if name == PER_BATCH:
        return data.pad_per_batch(lengths, batch_size, seed=seed)
    if name == "static_buckets":
        return data.static_buckets(lengths, batch_size, (*boundaries, math.inf), pad_to=pad_to, seed=seed)
    if name == AUTO:
        return data.auto_buckets(lengths, batch_size, seed=seed)
    raise ParameterError(f"unknown plan {name!r}; plans: {list(PLAN_NAMES)}")


@lru_cache(maxsize=64)
def _cached_plan(name: str, n: int, seed: int, batch_size: int, boundaries: tuple[int, ...],
                 pad_to: str) -> data.BatchPlan:
    return make_plan(name, corpus(n, seed), batch_size, seed=seed, boundaries=boundaries, pad_to=pad_to)


def plans(n: int, batch_size: int, *, seed: int = 0, boundaries: Sequence[int] = (10, 20, 30, 40, 60),
          pad_to: str = "boundary") -> dict[str, data.BatchPlan]:
    return {name: _cached_plan(name, n, seed, batch_size, tuple(boundaries), pad_to) for name in PLAN_NAMES}


def waste_table(plan_set: dict[str, data.BatchPlan], *, with_mxnet: bool = True) -> pd.DataFrame:
    """Per plan: batches, real and padded steps, the wasted fraction and the work over the ideal.

    With `with_mxnet`, one more row (not timed): static buckets at the boundaries MXNet generates
    when given none (every length held by at least a batch of sentences, padded to the boundary).
    """
    rows = [p.summary() for p in plan_set.values()]
    if with_mxnet and plan_set:
        any_plan = next(iter(plan_set.values()))
        lengths, batch_size = np.asarray(any_plan.lengths), max(len(b) for b in any_plan.batches)
        bounds = data.mxnet_autogen_boundaries(lengths, batch_size)
        mx = data.static_buckets(lengths, batch_size, bounds, pad_to="boundary")
        rows.append({**mx.summary(), "plan": f"mxnet_autogen ({len(bounds)} buckets, not timed)"})
    table = pd.DataFrame(rows)
    base = table.loc[table.plan == NO_BUCKETING, "padded_steps"]
    if not base.empty:
        table["work_vs_no_bucketing"] = table.padded_steps / float(base.iloc[0])
    return table


def timing_sample(plan: data.BatchPlan, k: int) -> data.BatchPlan:
    """The plan's `k` representative batches (see the module docstring) as a plan of their own.

    The result is a `BatchPlan` over just the sampled sequences (re-indexed 0..m-1) with the original
    batches' widths, in the original plan's order, ready for `data.torch_batches`/`data.keras_batches`.
    """
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise ParameterError(f"sample_batches must be a positive integer, got {k!r}")
    k = min(k, plan.n_batches)
    lengths = np.asarray(plan.lengths)
    padded = np.array([len(b) * w for b, w in zip(plan.batches, plan.widths)])
    real = np.array([int(lengths[list(b)].sum()) for b in plan.batches])
    order = np.lexsort((np.arange(plan.n_batches), real, padded))  # by padded, then real steps, then position
    chosen = sorted(int(stratum[len(stratum) // 2]) for stratum in np.array_split(order, k))
    sub_lengths, sub_batches, start = [], [], 0
    for index in chosen:
        batch = plan.batches[index]
        sub_lengths += [int(lengths[i]) for i in batch]
        sub_batches.append(tuple(range(start, start + len(batch))))
        start += len(batch)
    return data.BatchPlan(f"{plan.name} (sample of {k})", tuple(sub_lengths), tuple(sub_batches),
                          tuple(plan.widths[i] for i in chosen))


# --- the grid -------------------------------------------------------------------------------------------

def grid(*, kind: str, quick: bool, kernels: Sequence[str], batch_size: int, corpus_size: int, sample_batches: int,
         layers: int, hidden: int, features: int, static_boundaries: Sequence[int], static_pad_to: str,
         seed: int = 0) -> list[sweep.Point]:
    """Every plan x kernel, one training-phase point each; `quick` shrinks every size to a smoke run.

    The defaults differ by device kind only in `layers`: the seed's 8 on a GPU, 2 on a small CPU.
    """
    if quick:
        batch_size, corpus_size, sample_batches = min(batch_size, 8), min(corpus_size, 2000), min(sample_batches, 2)
        layers, hidden, features = 1, min(hidden, 32), min(features, 8)
    plan_set = plans(corpus_size, batch_size, seed=seed, boundaries=static_boundaries, pad_to=static_pad_to)
    longest = int(corpus(corpus_size, seed).max())
    shape = LSTMShape(batch=batch_size, timesteps=longest, features=features, hidden=hidden, layers=layers)
    points = []
    for name, plan in plan_set.items():
        sample = timing_sample(plan, sample_batches)
        config = {"plan": name, "batch_size": batch_size, "corpus": corpus_size, "seed": seed,
                  "sample_batches": sample.n_batches, "epoch_batches": plan.n_batches,
                  "sample_padded_steps": sample.padded_steps, "sample_real_steps": sample.real_steps,
                  "epoch_padded_steps": plan.padded_steps, "epoch_real_steps": plan.real_steps}
        if name == "static_buckets":
            config.update(boundaries=list(static_boundaries), pad_to=static_pad_to)
        points += [sweep.Point(kernel, shape, phase="train", config=config) for kernel in kernels]
    return points


def measure(points: list[sweep.Point], *, device: str, min_time: float, quick: bool = False,
            **sweep_options) -> list[sweep.SweepReport]:
    """Measure the points not yet stored for this hardware.

    One timed call trains on every sampled batch once, so it is already many steps: one warm-up call
    (which also runs the Keras step's first, optimising call) and at least 4 timed calls (3 when quick).
    """
    options = {**timing_options(min_time, quick), "warmup": 1, "min_samples": 3 if quick else 4}
    return [sweep.run(NAME, points, partial(measure_point, **options), device=device, **sweep_options)]


# --- the training steps ----------------------------------------------------------------------------------

def _sample_for(point: sweep.Point) -> data.BatchPlan:
    c = point.config
    plan = _cached_plan(str(c["plan"]), int(c["corpus"]), int(c["seed"]), int(c["batch_size"]),
                        tuple(c.get("boundaries", (10, 20, 30, 40, 60))), str(c.get("pad_to", "boundary")))
    return timing_sample(plan, int(c["sample_batches"]))


def _torch_steps(point: sweep.Point, device, sample: data.BatchPlan):
    """One training step per sampled batch (padded or packed), the device sync, what ran (observed; nothing
    predicted) and the dtype it computes in."""
    import torch
    from torch import nn

    from lstmstudy.timing import sync_for

    s = point.shape
    torch.manual_seed(0)
    lstm = nn.LSTM(s.features, s.hidden, s.layers, batch_first=True).to(device)
    head = nn.Linear(s.hidden, s.features).to(device)
    optimizer = torch.optim.SGD([*lstm.parameters(), *head.parameters()], lr=0.01)
    packed = point.kernel == "torch.packed"
    batches = data.torch_batches(sample.lengths, sample, s.features, device=device)
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

    return run, sync_for(device), observe_batches(run, device, len(batches), s.layers), "", \
        dtype_name(next(lstm.parameters()).dtype)


def _keras_model(keras, s: LSTMShape):
    layers = [keras.Input(shape=(None, s.features)), keras.layers.Masking(mask_value=0.0)]
    layers += [keras.layers.LSTM(s.hidden, return_sequences=True) for _ in range(s.layers)]
    layers.append(keras.layers.Dense(s.features))
    return keras.Sequential(layers)


def _keras_steps(point: sweep.Point, device, sample: data.BatchPlan):
    """Keras with masking: one traced `tf.function` for every width (TensorFlow: what it runs is predicted from
    the graph) or eager calls (torch: observed)."""
    from lstmstudy.backends import import_keras
    from lstmstudy.kernels.keras_kernels import graph_kernel, tf_device
    from lstmstudy.timing import sync_for, tf_sync

    keras = import_keras()
    s = point.shape
    keras.utils.set_random_seed(0)
    batches = data.keras_batches(sample.lengths, sample, s.features)
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        name = tf_device(device)
        with tf.device(name):
            model = _keras_model(keras, s)
            optimizer = keras.optimizers.SGD(learning_rate=0.01)
            optimizer.build(model.trainable_variables)
            tensors = [(tf.constant(x), tf.constant(m, dtype=tf.float32)) for x, m in batches]

        @tf.function(input_signature=[tf.TensorSpec((None, None, s.features), tf.float32),
                                      tf.TensorSpec((None, None), tf.float32)])
        def step(x, mask):
            with tf.device(name):
                with tf.GradientTape() as tape:
                    y = model(x, training=True)
                    loss = tf.reduce_sum(tf.reduce_mean(tf.square(y - x), -1) * mask) / tf.reduce_sum(mask)
                grads = tape.gradient(loss, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables))
                return loss

        kernel = graph_kernel(step.get_concrete_function().graph)
        if device.type == "cpu" and kernel == "cudnn":
            raise Skip("TensorFlow sees a GPU, so Keras traces its cuDNN kernel: the Keras step cannot be pinned "
                       "to the CPU here (hide the GPU with CUDA_VISIBLE_DEVICES='')")
        sync = tf_sync()

        def run():
            for x, mask in tensors:
                step(x, mask)
        return run, sync, NOTHING, kernel, keras.backend.standardize_dtype(model.compute_dtype)

    import torch

    with keras.device(str(device)):
        model = _keras_model(keras, s)
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

    sync = sync_for(device)
    return run, sync, observe([lambda: eager_step(*tensors[0])], device), "", \
        keras.backend.standardize_dtype(model.compute_dtype)


def measure_point(point: sweep.Point, device, **timing_kwargs) -> sweep.PointResult:
    """Train on the point's sampled batches once per timed call; FLOPs count the padded steps computed."""
    from lstmstudy.timing import measure as time_call

    if point.kernel not in KERNELS:
        raise ParameterError(f"unknown kernel {point.kernel!r} for claim {NAME}; kernels: {list(KERNELS)}")
    sample = _sample_for(point)
    if point.kernel.startswith("torch."):
        run, sync, seen, predicted, dtype = _torch_steps(point, device, sample)
    else:
        run, sync, seen, predicted, dtype = _keras_steps(point, device, sample)
    m = time_call(run, sync=sync, **timing_kwargs)
    steps = sample.real_steps if point.kernel == "torch.packed" else sample.padded_steps
    per_step = point.shape.flops("train") / (point.shape.batch * point.shape.timesteps)
    return sweep.PointResult(measurement=m, flops=per_step * steps, observed=seen, predicted_kernel=predicted,
                         compute_dtype=dtype)


# --- the analysis ----------------------------------------------------------------------------------------

def _with_config(results: pd.DataFrame) -> pd.DataFrame:
    ok = results[results.status == "ok"].copy() if not results.empty else results.copy()
    if ok.empty:
        return ok
    cfg = ok.config.map(json.loads)
    for key in ("plan", *SETTING_KEYS, "epoch_batches", "sample_padded_steps", "sample_real_steps",
                "epoch_padded_steps", "epoch_real_steps"):
        ok[key] = cfg.map(lambda c, key=key: c.get(key))
    ok["scale"] = ok.epoch_batches / ok.sample_batches
    return ok


def _setting_columns() -> list[str]:
    return ["hardware_id", "kernel", "layers", "hidden", "features", *SETTING_KEYS]


def epoch_times(results: pd.DataFrame) -> pd.DataFrame:
    """Estimated seconds per epoch for every stored plan and kernel (median, and the IQR, scaled)."""
    ok = _with_config(results)
    cols = [*_setting_columns(), "plan", "epoch_s", "epoch_p25_s", "epoch_p75_s", "ms_per_batch",
            "epoch_batches", "epoch_padded_steps", "epoch_real_steps", "waste_fraction", "observed_kernel"]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    ok["epoch_s"] = ok.median_s * ok.scale
    ok["epoch_p25_s"] = ok.p25_s * ok.scale
    ok["epoch_p75_s"] = ok.p75_s * ok.scale
    ok["ms_per_batch"] = ok.median_s / ok.sample_batches * 1e3
    ok["waste_fraction"] = 1 - ok.epoch_real_steps / ok.epoch_padded_steps
    ok["observed_kernel"] = [what_ran(o, p) for o, p in zip(ok.observed_kernel, ok.predicted_kernel)]
    order = {name: i for i, name in enumerate(PLAN_NAMES)}
    return ok[cols].sort_values(_setting_columns() + ["plan"], key=lambda c: c.map(order) if c.name == "plan" else c,
                                ).reset_index(drop=True)


def speedups(results: pd.DataFrame) -> pd.DataFrame:
    """Each plan's epoch-time speed-up over each baseline, per kernel and setting, with bootstrap CIs.

    `ratio` = baseline epoch time / plan epoch time (above 1: the plan is faster); `work_ratio` is the
    same ratio of padded steps, what the speed-up would be if time followed the padded work alone.
    """
    ok = _with_config(results)
    cols = [*_setting_columns(), "plan", "baseline", "ratio", "ratio_lo", "ratio_hi", "work_ratio"]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for key, group in ok.groupby(_setting_columns(), sort=True, dropna=False):
        by_plan = {row.plan: row for row in group.sort_values("created_at").itertuples()}
        for baseline in BASELINES:
            if baseline not in by_plan:
                continue
            base = by_plan[baseline]
            for plan, row in by_plan.items():
                if plan == baseline:
                    continue
                ratio, lo, hi = bootstrap_ratio(np.asarray(base.samples) * base.scale,
                                                np.asarray(row.samples) * row.scale)
                rows.append({**dict(zip(_setting_columns(), key)), "plan": plan, "baseline": baseline,
                             "ratio": ratio, "ratio_lo": lo, "ratio_hi": hi,
                             "work_ratio": base.epoch_padded_steps / row.epoch_padded_steps})
    return pd.DataFrame(rows, columns=cols)


def compact(table: pd.DataFrame) -> pd.DataFrame:
    """A table of `epoch_times` or `speedups` for the page: the setting's columns folded into one."""
    if table.empty:
        return table
    out = table.copy()
    out.insert(2, "setting", [f"{r.layers} layers x {r.hidden} units, {r.features} features, batch {r.batch_size}, "
                              f"{r.corpus:,} sentences, {r.sample_batches} batches timed"
                              for r in table.itertuples()])
    return out.drop(columns=["layers", "hidden", "features", *SETTING_KEYS])


def speedup_summary(table: pd.DataFrame) -> pd.DataFrame:
    """`speedups` for the page: one row per kernel and plan, one column per baseline ("3.1x (2.9-3.3)")."""
    if table.empty:
        return table
    t = compact(table)
    t["speed-up"] = [f"{r.ratio:.2f}x ({r.ratio_lo:.2f}-{r.ratio_hi:.2f})" for r in t.itertuples()]
    t["work"] = [f"{w:.2f}x" for w in t.work_ratio]
    wide = t.pivot_table(index=["hardware_id", "setting", "kernel", "plan"], columns="baseline",
                         values=["speed-up", "work"], aggfunc="first")
    wide.columns = [f"{what} over {baseline}" for what, baseline in wide.columns]
    order = {name: i for i, name in enumerate(PLAN_NAMES)}
    wide = wide.reset_index().sort_values(["hardware_id", "setting", "kernel", "plan"],
                                          key=lambda c: c.map(order) if c.name == "plan" else c
                                          ).reset_index(drop=True)
    columns = [f"{what} over {b}" for b in BASELINES for what in ("speed-up", "work")]
    return wide[["hardware_id", "setting", "kernel", "plan", *[c for c in columns if c in wide]]].fillna("-")


def _headline_setting(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the largest setting stored (most sentences, then layers, hidden, sampled batches)."""
    keys = ["corpus", "layers", "hidden", "sample_batches", "batch_size", "features"]
    best = table.sort_values(keys, ascending=False).iloc[0]
    return table[(table[keys] == best[keys]).all(axis=1)]


def largest_settings(table: pd.DataFrame) -> pd.DataFrame:
    """`epoch_times` or `speedups` rows of each hardware set's largest setting (what its verdict uses)."""
    if table.empty:
        return table
    return pd.concat([_headline_setting(part) for _, part in table.groupby("hardware_id", sort=True)],
                     ignore_index=True)


def verdicts(results: pd.DataFrame) -> list[Verdict]:
    """One verdict per hardware set: torch.padded, auto buckets over padding to the global maximum."""
    table = speedups(results)
    out = []
    for hardware_id in sorted(results.hardware_id.unique()) if not results.empty else []:
        mine = table[(table.hardware_id == hardware_id) & (table.kernel == HEADLINE)] if not table.empty else table
        auto = mine[mine.plan == AUTO]
        if auto.empty or NO_BUCKETING not in set(auto.baseline):
            out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, "not measured",
                               Outcome.NOT_MEASURED, RULE))
            continue
        auto = _headline_setting(auto)
        head = auto[auto.baseline == NO_BUCKETING].iloc[0]
        figure = float(head.ratio)
        text = (f"{figure:.2f}x (95% CI {head.ratio_lo:.2f}-{head.ratio_hi:.2f}) epoch-time speed-up of auto "
                f"buckets over padding to the global maximum ({HEADLINE}, {head.layers} layers, hidden "
                f"{head.hidden}, batch {head.batch_size}); padded work {head.work_ratio:.2f}x less")
        other = auto[auto.baseline == PER_BATCH]
        if not other.empty:
            o = other.iloc[0]
            text += f"; {o.ratio:.2f}x over per-batch padding (padded work {o.work_ratio:.2f}x less)"
        out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, figure, text, band(figure, REPRODUCED, PARTLY),
                           RULE))
    return out


def worked_example_verdict(example: dict | None = None) -> Verdict:
    """The slides' arithmetic, an exact check on any hardware: 22 real, 30 padded, 24 bucketed steps."""
    ex = data.worked_example() if example is None else example
    ours = (ex["real"], ex["padded"], ex["bucketed"])
    outcome = Outcome.REPRODUCED if ours == (22, 30, 24) else Outcome.NOT_REPRODUCED
    text = (f"{ours[0]} / {ours[1]} / {ours[2]} steps (padding {ex['padded_overhead']:.0%} more than the ideal), "
            f"computed by lstmstudy.data")
    return Verdict(NAME, WORKED_STATEMENT, "arithmetic (any hardware)", WORKED_SEED, None, text, outcome, WORKED_RULE)


def worked_example_table(example: dict | None = None) -> pd.DataFrame:
    ex = data.worked_example() if example is None else example
    return pd.DataFrame([
        {"workload": "ideal (each sentence its own length)", "steps": ex["real"], "slides": 22},
        {"workload": "padded per batch, batches [4, 8] and [3, 7]", "steps": ex["padded"], "slides": 30},
        {"workload": "greedy buckets, batches [8, 7] and [4, 3]", "steps": ex["bucketed"], "slides": 24},
    ])


# --- which kernel runs ------------------------------------------------------------------------------------

def keras_mask_rows() -> list[dict]:
    """Which kernel a Keras LSTM gets on a GPU with a right-padded, a left-padded or no mask (this backend)."""
    import keras

    from lstmstudy.kernels.criteria import explain_cudnn

    right = np.array([[True, True, False, False], [True, True, True, True]])
    left = np.array([[False, False, True, True], [True, True, True, True]])
    rows = []
    for name, mask in (("right-padded mask", right), ("left-padded mask", left), ("no mask", None)):
        e = explain_cudnn(keras.layers.LSTM(8), mask=mask, device="cuda")[0]
        rows.append({"configuration": f"keras.layers.LSTM, {name}, on a GPU", "framework": e.framework,
                     "kernel": e.kernel, "fused": e.fused_eligible,
                     "why not the fused kernel": "; ".join(r.message for r in e.reasons) or "-"})
    return rows


_CHILD = ("import json; from lstmstudy.claims.bucketing import keras_mask_rows; "
          "print('JSON' + json.dumps(keras_mask_rows()))")


def _keras_rows(backend: str) -> list[dict]:
    """`keras_mask_rows` under `backend`: here if it is this process's Keras backend, else in a child process."""
    import keras

    if keras.backend.backend() == backend:
        return keras_mask_rows()
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, timeout=300,
                          cwd=str(Path(__file__).resolve().parents[2]))
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("JSON")), None)
    if done.returncode or line is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [{"configuration": f"keras.layers.LSTM on the {backend} backend", "framework": f"keras/{backend}",
                 "kernel": "?", "fused": None, "why not the fused kernel": f"could not explain: {tail}"}]
    return json.loads(line[4:])


def mask_criteria() -> pd.DataFrame:
    """Which kernel a masked Keras LSTM and a padded or packed PyTorch LSTM get, on a GPU and on a CPU.

    Keras rows are explained for a machine with a GPU on both Keras backends (the other backend's in a
    child process, so this process's Keras keeps its own); PyTorch rows for a GPU and for a CPU.
    """
    import torch
    from torch import nn

    from lstmstudy.kernels.criteria import explain_cudnn

    rows = _keras_rows("tensorflow") + _keras_rows("torch")
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 8, batch_first=True)
    x = torch.randn(2, 4, 4)
    packed = data.pack_batch(x, torch.tensor([4, 2]))
    for device in ("cuda", "cpu"):
        for name, inputs in (("padded batch", x), ("pack_padded_sequence, lengths 4 and 2", packed)):
            e = explain_cudnn(lstm, inputs=inputs, device=device)[0]
            where = "on a GPU" if device == "cuda" else "on a CPU"
            notes = [r.message for r in (*e.reasons, *e.notes) if not (device == "cpu" and r.code == "no_gpu")]
            rows.append({"configuration": f"nn.LSTM, {name}, {where}", "framework": e.framework, "kernel": e.kernel,
                         "fused": e.fused_eligible if device == "cuda" else e.kernel == "onednn",
                         "why not the fused kernel": "; ".join(notes) or "-"})
    return pd.DataFrame(rows)


# --- figures -------------------------------------------------------------------------------------------

def length_histogram(lengths: np.ndarray, boundaries: Sequence[int], *, title: str):
    """The corpus' sentence lengths, with the static bucket boundaries marked."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(7, 3.2))
    sns.histplot(x=np.asarray(lengths), binwidth=1, ax=ax, color="tab:blue")
    for b in boundaries:
        ax.axvline(b + 0.5, color="tab:orange", linestyle="--", linewidth=1)
    ax.set(xlabel="sentence length (tokens)", ylabel="sentences", title=title)
    return ax


def waste_plot(table: pd.DataFrame, *, title: str):
    """Padded steps per plan, split into real work and padding (millions of timesteps)."""
    import matplotlib.pyplot as plt

    t = table.set_index("plan")
    fig, ax = plt.subplots(figsize=(7, 0.55 * len(t) + 1.4))
    real = t.real_steps / 1e6
    pad = (t.padded_steps - t.real_steps) / 1e6
    ax.barh(t.index, real, color="tab:blue", label="real steps")
    ax.barh(t.index, pad, left=real, color="tab:red", alpha=0.6, label="padding")
    for y, (p, w) in enumerate(zip(t.padded_steps / 1e6, t.waste_fraction)):
        ax.text(p, y, f"  {w:.0%} padding", va="center", fontsize=9)
    ax.invert_yaxis()
    ax.set(xlabel="timesteps computed per epoch (millions of sentence-steps)", ylabel="", title=title)
    ax.set_xlim(0, float((t.padded_steps / 1e6).max()) * 1.3)
    ax.legend(loc="lower right")
    return ax


def epoch_plot(table: pd.DataFrame):
    """Estimated epoch time per plan and kernel (median; whiskers: the IQR), one panel per hardware set
    (its largest setting)."""
    import seaborn as sns

    table = largest_settings(table)
    grid = sns.catplot(table, x="plan", y="epoch_s", hue="kernel", col="hardware_id", kind="bar", errorbar=None,
                       order=list(PLAN_NAMES), hue_order=sorted(table.kernel.unique()), height=3.6, aspect=1.4,
                       sharey=False)
    for ax, (_, facet) in zip(grid.axes.flat, table.groupby("hardware_id", sort=True)):
        for container, (_, part) in zip(ax.containers, facet.groupby("kernel", sort=True)):
            part = part.set_index("plan").reindex(list(PLAN_NAMES))
            centres = [bar.get_x() + bar.get_width() / 2 for bar in container]
            ax.errorbar(centres, part.epoch_s, yerr=[part.epoch_s - part.epoch_p25_s, part.epoch_p75_s - part.epoch_s],
                        fmt="none", color="black", capsize=3, linewidth=1)
        for label in ax.get_xticklabels():
            label.set(rotation=20, horizontalalignment="right")
    grid.set_axis_labels("batching plan", "estimated time per epoch (s)")
    grid.set_titles(col_template="{col_name}")
    return grid


def speedup_plot(table: pd.DataFrame, baseline: str = NO_BUCKETING):
    """Each plan's epoch-time speed-up over `baseline`, per kernel (each hardware set's largest setting),
    with the seed's 3.3x and the rule's bar."""
    from lstmstudy import plots

    part = largest_settings(table[table.baseline == baseline]).sort_values(["hardware_id", "kernel"])  # hue: sorted
    grid = plots.ratio_bars(part, x="plan", hue="kernel", xlabel="batching plan",
                            ylabel=f"speed-up over {baseline} (x)", order=[p for p in PLAN_NAMES if p != baseline])
    for ax, (_, facet) in zip(grid.axes.flat, part.groupby("hardware_id", sort=True)):
        work = facet.groupby("plan").work_ratio.first()
        ticks = [(x, t.get_text()) for x, t in zip(ax.get_xticks(), ax.get_xticklabels()) if t.get_text() in work]
        ax.scatter([x for x, _ in ticks], [work[name] for _, name in ticks], marker="D", s=30, color="black",
                   zorder=5, label="padded-work ratio")
        ax.axhline(SEED_SPEEDUP, color="tab:orange", linestyle="--", linewidth=1.5, label=f"seed: {SEED_SPEEDUP}x")
        ax.axhline(REPRODUCED[0], color="tab:green", linestyle=":", linewidth=1.5,
                   label=f"rule: reproduced from {REPRODUCED[0]}x")
        handles = [h for h in (*ax.get_lines(), *ax.collections) if not h.get_label().startswith("_")]
        ax.legend(handles=handles, loc="upper left", fontsize=8, framealpha=0.9)
    return grid


#: the plan parameters are the same on every device kind; only the depth differs
_COMMON = dict(kernels=list(KERNELS), batch_size=32, corpus_size=42068, sample_batches=6, hidden=128, features=32,
               static_boundaries=[10, 20, 30, 40, 60], static_pad_to="boundary")
CLAIM = Claim(
    number=NUMBER, name=NAME, statement=STATEMENT, seed_figure=SEED_FIGURE, rule=RULE,
    defaults={"cpu": dict(layers=2, **_COMMON), "cuda": dict(layers=SEED_LAYERS, **_COMMON)},
    grid=grid, measure=measure, verdicts=verdicts, check=check_parameters,
    # keras.masked (Keras's masked generic loop, 8 layers on a GPU) costs most: it comes last
    seconds_per_point={"cpu": 5.6, "cuda": 8.0}, slow=frozenset({"keras.masked"}),
)
