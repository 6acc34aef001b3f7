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
from collections.abc import Sequence

import numpy as np
import pandas as pd

from lstmstudy import data, kernels, sweep
from lstmstudy.claims import Bands, Claim, Outcome, Verdict, timing_plan
from lstmstudy.errors import ParameterError
from lstmstudy.observe import what_ran
from lstmstudy.parameters import check_choices, check_positive_ints
from lstmstudy.shapes import LSTMShape
from lstmstudy.stats import row_ratio

NAME = "bucketing"
NUMBER = "05"
STATEMENT = "Auto-generated greedy buckets make LSTM training 3.3x faster than no bucketing"
SEED_FIGURE = "3.3x (autogen buckets vs no bucketing; 8-layer LSTM, Penn Treebank, one GTX 750)"
SEED_SPEEDUP = 3.3
RULE = ("decided on the 95% interval of the speed-up of auto buckets' estimated epoch time with torch.padded "
        "(every padded step computed, as the slides' framework did) over every batch padded to the corpus "
        "maximum (the slides' 'no bucketing'): reproduced if it lies at or above 2.5x; partly if within "
        "1.5x-2.5x; not reproduced if below 1.5x; inconclusive if it straddles 1.5x or 2.5x")
BANDS = Bands((1.5, 2.5), (Outcome.NOT_REPRODUCED, Outcome.PARTLY, Outcome.REPRODUCED))

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
    plan_set = data.plans(corpus_size, batch_size, seed=seed, boundaries=static_boundaries, pad_to=static_pad_to)
    longest = int(data.corpus(corpus_size, seed).max())
    shape = LSTMShape(batch=batch_size, timesteps=longest, features=features, hidden=hidden, layers=layers)
    points = []
    for name, plan in plan_set.items():
        sample = data.timing_sample(plan, sample_batches)
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
    (which also runs the Keras step's first, optimising call) is enough.
    """
    plan = timing_plan(min_time, quick, warmup=1)
    return [sweep.run(NAME, points, kernels.prepare, plan, device=device, **sweep_options)]


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
                ratio, lo, hi = (value * base.scale / row.scale for value in row_ratio(base, row))
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
        low, high = float(head.ratio_lo), float(head.ratio_hi)
        out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, figure, text, BANDS.decide(low, high), RULE,
                           low, high))
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
