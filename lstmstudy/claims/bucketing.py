"""Claim 5: padding wastes work, and auto-generated greedy buckets train an LSTM 3.3x faster than no bucketing.

The page: `notebooks/05_bucketing.ipynb`.

Seed (002, slides "Performance Optimization of LSTM Training on GPU", Lin & Wu), verbatim: "Ideal
workload: 4 + 8 + 3 + 7 = 22 words", "Padded workload: 8 + 8 + 7 + 7 = 30 words ~ 36% more works",
"Bucketing workload: 8 + 8 + 4 + 4 = 24 words ~ ideal", "We trained 8-layer LSTM on PennTree Bank
dataset with one GTX750" and "3.3x faster with autogen bucketing compared to no bucketing" (the `$$`
math markup the slides put around the bucketed sum left out). The slides name neither the framework nor
the split of the Penn Treebank. Everything else in the rule is ours: reading "no bucketing" as the slides'
own worked example does ("Padded workload: 8 + 8 + 7 + 7 = 30": each batch padded to its own longest
sentence), the bands around 3.3x, the kernel that decides and the sizes the slides do not give (hidden
units, features, batch size). Padding every batch to the corpus maximum (one bucket for the whole corpus,
as a framework that unrolls one graph would) is shown beside it, as context.

The worked example (22 / 30 / 24) is arithmetic: `worked_example_table` checks it exactly, and it is not
a verdict (the ledger counts `verdicts` only).

What is measured. The real Penn Treebank sentence lengths (`lstmstudy.data.ptb_lengths`: the valid and
test splits, shipped with the package; the default corpus) or the synthetic PTB-like corpus
(`lstmstudy.data.ptb_like_lengths`: a stated log-normal, the only corpus of the result sets measured
before the real lengths were shipped) are cut into batches by every plan of `lstmstudy.data.PLANS`, and a
multi-layer LSTM is trained on them with three kernels:

- `torch.padded`: `nn.LSTM` on the padded batch; every padded step is computed, as an unrolled bucket
  graph computes them. This is the kernel the verdict uses.
- `torch.packed`: the same module on `pack_padded_sequence(...)`, which skips the padding whatever
  the plan: the framework's own answer to padding waste.
- `keras.masked`: `Masking -> LSTM x layers -> Dense` in Keras, one `tf.function` train step (or an
  eager step on the torch backend); the mask is right-padded.

A training step is forward + a masked mean-squared loss against the input + backward + one SGD update.

How an epoch is timed. By default every batch of an epoch is trained in one timed call
(`sample_batches="all"`), so an epoch time has no sampling error: its interval is the hierarchical
bootstrap over the interleaved rounds (`lstmstudy.stats`). The real corpus is small enough for that
(the valid split: 3,370 sentences, 106 batches of 32, the default on every device, so the page's arithmetic
and every verdict read one corpus). With
`sample_batches=k` a plan's batches, sorted by padded steps, are cut into k strata and the middle batch
of each is timed; the epoch estimate is `time x epoch batches / k`. Its limit, stated on the page too:
the interval then covers the timing noise only, not the error of the sample; `epoch_times` reports how
far the sample's padded work, scaled the same way, is from the epoch's (`sample_work_error`), and a
sampled setting never decides a verdict.

The statistics. `speedups`: each plan's epoch-time speed-up over both baselines (per-batch padding, the
slides' "no bucketing"; and padding to the corpus maximum, context), formed within rounds where two rows were
timed together (`stats.row_ratio`), beside the padded-work ratio and their quotient, `time / work`: 1
when time falls in proportion to the padded steps. `verdicts` decides the claim on the speed-up's
interval; `tracking` reads on the quotient's interval whether epoch time tracks padded work. No seed claims
that, so it is no verdict: it reads "tracks", "tracks in part", "does not track" or "undecided", never a
seed's outcome ("reproduced"), and the ledger, which holds verdicts only, never counts it.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import TYPE_CHECKING

import pandas as pd

from lstmstudy import contract, data
from lstmstudy.claims import Claim
from lstmstudy.errors import ParameterError
from lstmstudy.observe import what_ran
from lstmstudy.parameters import check_choices, check_positive_ints
from lstmstudy.rules import (ONE_BURST_WORDS, SIGN_RULE, Bands, Outcome, Verdict, few_timings, interval_label,
                             fewest_timings, one_burst_sets)
from lstmstudy.shapes import LSTMShape
from lstmstudy.stats import interleaved, row_ratio, row_round_medians, row_round_ratios, with_intervals

if TYPE_CHECKING:  # measuring imports torch; the analysis below runs without it
    from lstmstudy.sweep import SweepReport

NAME = "bucketing"
NUMBER = "05"
STATEMENT = "Auto-generated greedy buckets make LSTM training 3.3x faster than no bucketing"
SEED_FIGURE = ('"3.3x faster with autogen bucketing compared to no bucketing"; "We trained 8-layer LSTM on '
               'PennTree Bank dataset with one GTX750" (slides, seed 002)')
SEED_SPEEDUP = 3.3
#: the rule's bands are symmetric around the seed's 3.3x on a log scale (a speed-up is a ratio: 3.3 / 1.5 and
#: 3.3 x 1.5 are equally far from it); a factor of 1.5 either way allows for what the slides leave unstated
#: (one run, no interval, an unnamed framework, no widths or batch size), and partly is the next factor down
BAND_FACTOR = 1.5
_EDGES = (SEED_SPEEDUP / BAND_FACTOR**2, SEED_SPEEDUP / BAND_FACTOR, SEED_SPEEDUP * BAND_FACTOR)
RULE = (f"decided per hardware set on the 95% interval of auto buckets' speed-up over per-batch padding (the "
        f"slides' own 'no bucketing': their worked example pads each batch to its longest sentence, 8 + 8 + 7 + 7): "
        f"the ratio of whole-epoch training times with torch.padded (every padded step computed) on the real Penn "
        f"Treebank sentence lengths, formed within interleaved rounds. Reproduced if it lies within "
        f"{_EDGES[1]:.2f}x-{_EDGES[2]:.2f}x (the seed's 3.3x divided and multiplied by {BAND_FACTOR}: symmetric on a "
        f"log scale); exceeds the seed above {_EDGES[2]:.2f}x; partly within {_EDGES[0]:.2f}x-{_EDGES[1]:.2f}x; not "
        f"reproduced below {_EDGES[0]:.2f}x; inconclusive if it straddles an edge. The speed-up over padding to the "
        f"corpus maximum is shown beside it as context. A set without whole-epoch timings on the real lengths gets "
        f"no verdict: a sampled epoch's interval leaves out the sampling error. {SIGN_RULE[0].upper()}{SIGN_RULE[1:]}")
BANDS = Bands(_EDGES, (Outcome.NOT_REPRODUCED, Outcome.PARTLY, Outcome.REPRODUCED, Outcome.EXCEEDS))

#: the edges of time / work's regions (`tracking`), and what each region reads, below the first edge to above the
#: last: the words of a statistic of this study, as no seed claims that time tracks padded work (never "reproduced")
TRACKING_EDGES = (0.5, 0.8, 1.25)
TRACKING_READINGS = ("does not track (time falls far less than the padded work)",
                     "tracks in part (time falls less than the padded work)", "tracks",
                     "does not track (time falls faster than the padded work)")
#: what an interval across an edge reads, and a set with no interval to read
UNDECIDED, NO_READING = "undecided (its interval straddles an edge)", "no reading"
TRACKING_RULE = (f"read on the 95% interval of time / work: the verdict's speed-up over the padded-work ratio of the "
                 f"same two plans (exact for whole epochs), 1 when time falls in proportion to the padded steps. Time "
                 f"tracks padded work within {TRACKING_EDGES[1]:g}-{TRACKING_EDGES[2]:g}; tracks it in part within "
                 f"{TRACKING_EDGES[0]:g}-{TRACKING_EDGES[1]:g}; does not track it below {TRACKING_EDGES[0]:g} (costs "
                 f"that do not scale with the padding dominate) or at or above {TRACKING_EDGES[2]:g} (time falls "
                 f"faster than the work); undecided if the interval straddles an edge. A statistic of this study, not "
                 f"a seed's claim: never a verdict")

#: the slides' worked example, as they give it: real, padded and bucketed steps
WORKED_SLIDES = {"real": 22, "padded": 30, "bucketed": 24}

PLAN_NAMES: tuple[str, ...] = tuple(data.PLANS)
PER_BATCH = "pad_per_batch"  # the slides' "no bucketing": each batch padded to its own longest sentence
GLOBAL_MAX = "pad_to_global_max"  # context: one bucket for the whole corpus, as long as its longest sentence
AUTO = "auto_buckets"
#: the baselines, the one the verdict decides on first
BASELINES = (PER_BATCH, GLOBAL_MAX)
#: what each plan is, for the page
PLAN_NOTES = {
    PER_BATCH: "each batch of a shuffled order padded to its own longest sentence (the slides' 'no bucketing')",
    GLOBAL_MAX: "every batch padded to the corpus' longest sentence (one bucket: context)",
    "static_buckets": "user-given bucket boundaries, each batch padded to its boundary (MXNet's bucketing)",
    "mxnet_autogen": "MXNet's own boundaries: every length held by at least a batch of sentences",
    "sorted_batches": "sort by length, cut batches, shuffle their order (what a PyTorch user writes)",
    AUTO: "the slides' greedy auto buckets: longest first, neighbours in length batched together",
}
KERNELS = ("torch.padded", "torch.packed", "keras.masked")
HEADLINE = "torch.padded"
#: the seed's model depth; on a CPU the default is shallower to fit the time budget
SEED_LAYERS = 8
#: `sample_batches` for timing every batch of an epoch
WHOLE_EPOCH = "all"

#: what names a setting besides the model's shape (everything but the plan and what the plan determines)
SETTING_KEYS = ("batch_size", "corpus", "seed", "timed")
#: columns derived from a setting: what picks the setting a verdict decides on
_SETTING_FACTS = ("real_corpus", "whole_epoch", "sentences")


# --- the parameters ---------------------------------------------------------------------------------------

def check_boundaries(boundaries: object) -> tuple[int, ...]:
    """Static bucket boundaries as a notebook gives them: increasing positive integers (inf is appended)."""
    if (not isinstance(boundaries, (list, tuple)) or not boundaries
            or any(isinstance(b, bool) or not isinstance(b, int) or b <= 0 for b in boundaries)
            or any(a >= b for a, b in zip(boundaries, boundaries[1:]))):
        raise ParameterError(f"parameter 'static_boundaries' must be a non-empty list of increasing positive "
                             f"integers, got {boundaries!r}")
    return tuple(boundaries)


def check_pad_to(pad_to: object) -> str:
    if pad_to not in data.PAD_TO:
        raise ParameterError(f"parameter 'static_pad_to' must be one of {list(data.PAD_TO)}, got {pad_to!r}")
    return str(pad_to)


def check_corpus(corpus: object) -> int | str:
    """A real corpus' name (`data.PTB_CORPORA`) or a number of synthetic sentences."""
    try:
        return data.check_corpus(corpus)
    except ParameterError as exc:
        raise ParameterError(f"parameter 'corpus': {exc}") from None


def check_sample_batches(sample_batches: object) -> None:
    if sample_batches != WHOLE_EPOCH:
        try:
            check_positive_ints(sample_batches=[sample_batches])
        except ParameterError:
            raise ParameterError(f"parameter 'sample_batches' must be {WHOLE_EPOCH!r} (time every batch of an "
                                 f"epoch) or a positive integer (a stratified sample), got {sample_batches!r}"
                                 ) from None


def check_parameters(parameters: dict) -> None:
    check_choices("kernels", parameters["kernels"], KERNELS)
    check_positive_ints(**{k: [parameters[k]] for k in ("batch_size", "layers", "hidden", "features")})
    check_corpus(parameters["corpus"])
    check_sample_batches(parameters["sample_batches"])
    check_boundaries(parameters["static_boundaries"])
    check_pad_to(parameters["static_pad_to"])


# --- the corpus and its plans -------------------------------------------------------------------------

def corpus_table(sources: Sequence[int | str]) -> pd.DataFrame:
    """Per corpus (`data.corpus`): sentences, tokens and the length's mean, standard deviation, minimum and
    maximum, so the synthetic draw can be read against the real lengths it stands in for."""
    rows = []
    for source in sources:
        lengths = data.corpus(source)
        rows.append({"corpus": data.corpus_label(source), "sentences": lengths.size, "tokens": int(lengths.sum()),
                     "mean": lengths.mean(), "sd": lengths.std(ddof=1), "min": int(lengths.min()),
                     "max": int(lengths.max())})
    return pd.DataFrame(rows)


def waste_table(plan_set: dict[str, data.BatchPlan]) -> pd.DataFrame:
    """Per plan: what it is, its batches, real and padded steps, the padding's share, and the padded-work ratio
    of each baseline over it (the speed-up it would give if time followed padded work alone)."""
    table = pd.DataFrame([{**plan.summary(), "how": PLAN_NOTES.get(name, "")} for name, plan in plan_set.items()])
    for baseline in BASELINES:
        if baseline in plan_set:
            table[f"work_ratio_vs_{baseline}"] = plan_set[baseline].padded_steps / table.padded_steps
    return table


def waste_view(table: pd.DataFrame) -> pd.DataFrame:
    """`waste_table` as the page shows it: short readable columns, rounded, the padding share first after the plan;
    what each plan is goes in a list beside it (`plan_notes`), not in a column that would make every row tall."""
    out = pd.DataFrame({"plan": table.plan, "padding": [f"{w:.1%}" for w in table.waste_fraction],
                        "padded steps": [f"{n:,}" for n in table.padded_steps],
                        "real steps": [f"{n:,}" for n in table.real_steps], "batches": table.batches})
    for baseline in BASELINES:
        column = f"work_ratio_vs_{baseline}"
        if column in table:
            out[f"{baseline} / plan (work)"] = [f"{r:.2f}x" for r in table[column]]
    return out


def plan_notes() -> str:
    """What each batching plan is, as a Markdown list for the page (`PLAN_NOTES`)."""
    return "\n".join(f"- `{name}`: {PLAN_NOTES[name]}" for name in PLAN_NAMES if name in PLAN_NOTES)


def grid(*, kind: str, quick: bool, kernels: Sequence[str], batch_size: int, corpus: int | str,
         sample_batches: int | str, layers: int, hidden: int, features: int, static_boundaries: Sequence[int],
         static_pad_to: str, seed: int = 0) -> list[contract.Point]:
    """Every plan x kernel, one training-phase point each; `quick` shrinks every size to a smoke run (a
    synthetic corpus to 2,000 sentences, a sample of 2 batches on either corpus)."""
    if quick:
        batch_size, layers, hidden, features = min(batch_size, 8), 1, min(hidden, 32), min(features, 8)
        corpus = corpus if isinstance(corpus, str) else min(corpus, 2000)
        sample_batches = 2 if sample_batches == WHOLE_EPOCH else min(sample_batches, 2)
    plan_set = data.plans(corpus, batch_size, seed=seed, boundaries=static_boundaries, pad_to=static_pad_to)
    longest = int(data.corpus(corpus, seed).max())
    shape = LSTMShape(batch=batch_size, timesteps=longest, features=features, hidden=hidden, layers=layers)
    points = []
    for name, plan in plan_set.items():
        sample = data.timing_sample(plan, plan.n_batches if sample_batches == WHOLE_EPOCH else sample_batches)
        config = {"plan": name, "batch_size": batch_size, "corpus": corpus, "seed": seed,
                  "sample_batches": sample.n_batches, "epoch_batches": plan.n_batches,
                  "sample_padded_steps": sample.padded_steps, "sample_real_steps": sample.real_steps,
                  "epoch_padded_steps": plan.padded_steps, "epoch_real_steps": plan.real_steps}
        if name == "static_buckets":
            config.update(boundaries=list(static_boundaries), pad_to=static_pad_to)
        points += [contract.Point(kernel, shape, phase="train", config=config) for kernel in kernels]
    return points


def measure(points: list[contract.Point], *, device: str, min_time: float, quick: bool = False,
            **sweep_options) -> list[SweepReport]:
    """Measure the points not yet stored for this hardware, one sweep per kernel, reported as one.

    One timed call trains on every timed batch once (a whole epoch by default), so it is already many
    steps: one warm-up call (which also runs the Keras step's first, optimising call) is enough.

    Every point shares one shape, so one sweep would make them one group, and a deadline stops a sweep only
    between groups (a group it interrupts is measured again from its start): on a GPU, 12 epochs of 8 layers,
    about 150 s. Every ratio here is two plans with one kernel (`speedups`), so a kernel's plans are what must
    share rounds: a sweep per kernel keeps each ratio paired and makes a group per kernel (about 70 s each on
    a GPU). A group per point (`Claim.slow`) would time the baseline and auto buckets in different rounds: the
    verdict's ratio unpaired, the drift between rounds in its interval instead of cancelled.
    """
    from lstmstudy import kernels, sweep, timing

    plan = timing.plan(min_time, quick, warmup=1)
    by_kernel: dict[str, list[contract.Point]] = {}
    for point in points:
        by_kernel.setdefault(point.kernel, []).append(point)
    # no point at all (a grid this claim has none of, on the GPU's first call) still gives its report of nothing
    reports = [sweep.run(NAME, mine, kernels.prepare, plan, device=device, **sweep_options)
               for mine in list(by_kernel.values()) or [[]]]
    return [_one_report(reports)]


def _one_report(reports: list[SweepReport]) -> SweepReport:
    """The kernels' sweeps as the claim's one report (its counts summed), as a single sweep would give it."""
    counts = {f.name: sum(getattr(r, f.name) for r in reports) for f in fields(reports[0])
              if isinstance(getattr(reports[0], f.name), int)}
    return replace(reports[0], **counts)


# --- the analysis ----------------------------------------------------------------------------------------

def _timed(sample_batches: int, epoch_batches: int) -> str:
    return "whole epochs" if sample_batches >= epoch_batches else f"{sample_batches} sampled batches per epoch"


def _with_config(results: pd.DataFrame) -> pd.DataFrame:
    """The `ok` rows with their plan and setting read from `config` (old rows, of the synthetic corpus, too)."""
    ok = results[results.status == "ok"].copy() if not results.empty else results.copy()
    if ok.empty:
        return ok
    cfg = ok.config.map(json.loads)
    for key in ("plan", "batch_size", "seed", "sample_batches", "epoch_batches", "sample_padded_steps",
                "sample_real_steps", "epoch_padded_steps", "epoch_real_steps"):
        ok[key] = cfg.map(lambda c, key=key: c.get(key))
    ok["real_corpus"] = cfg.map(lambda c: isinstance(c["corpus"], str))
    ok["sentences"] = cfg.map(lambda c: len(data.corpus(c["corpus"], c["seed"])))
    ok["corpus"] = cfg.map(lambda c: data.corpus_label(c["corpus"]))
    ok["whole_epoch"] = ok.sample_batches >= ok.epoch_batches
    ok["timed"] = [_timed(s, e) for s, e in zip(ok.sample_batches, ok.epoch_batches)]
    ok["scale"] = ok.epoch_batches / ok.sample_batches
    return ok


def _setting_columns() -> list[str]:
    return ["hardware_id", "kernel", "layers", "hidden", "features", *SETTING_KEYS, *_SETTING_FACTS]


def _plan_order(column: pd.Series) -> pd.Series:
    return column.map({name: i for i, name in enumerate(PLAN_NAMES)}) if column.name == "plan" else column


def epoch_times(results: pd.DataFrame) -> pd.DataFrame:
    """Seconds per epoch for every stored plan and kernel: the median over rounds and its 95% interval,
    scaled from the sample where only a sample was timed; `sample_work_error` is how far the sample's padded
    work, scaled the same way, lies from the epoch's (0 for whole epochs)."""
    ok = _with_config(results)
    cols = [*_setting_columns(), "plan", "epoch_s", "epoch_lo_s", "epoch_hi_s", "ms_per_batch", "epoch_batches",
            "epoch_padded_steps", "epoch_real_steps", "waste_fraction", "sample_work_error", "observed_kernel"]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    ok["epoch_s"] = ok.median_s * ok.scale
    ok = with_intervals(ok)
    ok["epoch_lo_s"] = ok.ci_low_s * ok.scale
    ok["epoch_hi_s"] = ok.ci_high_s * ok.scale
    ok["ms_per_batch"] = ok.median_s / ok.sample_batches * 1e3
    ok["waste_fraction"] = 1 - ok.epoch_real_steps / ok.epoch_padded_steps
    ok["sample_work_error"] = ok.sample_padded_steps * ok.scale / ok.epoch_padded_steps - 1
    ok["observed_kernel"] = [what_ran(o, p) for o, p in zip(ok.observed_kernel, ok.predicted_kernel)]
    return ok[cols].sort_values([*_setting_columns(), "plan"], key=_plan_order).reset_index(drop=True)


def speedups(results: pd.DataFrame) -> pd.DataFrame:
    """Each plan's epoch-time speed-up over each baseline, per kernel and setting, with 95% intervals.

    `ratio` = baseline epoch time / plan epoch time (above 1: the plan is faster), paired within rounds
    where the two rows were timed together (`paired`); `work_ratio` is the same ratio of padded steps, the
    speed-up if time followed padded work alone; `tracking` = ratio / work_ratio, with the ratio's interval
    (the work ratio is exact), is 1 when it does.
    """
    ok = _with_config(results)
    cols = [*_setting_columns(), "plan", "baseline", "ratio", "ratio_lo", "ratio_hi", "work_ratio", "tracking",
            "tracking_lo", "tracking_hi", "paired", "fewest_timings", "round_ratios", "round_medians"]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for key, group in ok.groupby(_setting_columns(), sort=True, dropna=False):
        by_plan = {row.plan: row for row in group.sort_values("created_at").itertuples()}  # the newest row wins
        for baseline in BASELINES:
            if baseline not in by_plan:
                continue
            base = by_plan[baseline]
            for plan, row in by_plan.items():
                if plan == baseline:
                    continue
                ratio, lo, hi = (value * base.scale / row.scale for value in row_ratio(base, row))
                work = base.epoch_padded_steps / row.epoch_padded_steps
                rows.append({**dict(zip(_setting_columns(), key)), "plan": plan, "baseline": baseline,
                             "ratio": ratio, "ratio_lo": lo, "ratio_hi": hi, "work_ratio": work,
                             "tracking": ratio / work, "tracking_lo": lo / work, "tracking_hi": hi / work,
                             "paired": interleaved(base, row),
                             "fewest_timings": fewest_timings(getattr(base, "round_sizes", None),
                                                              getattr(row, "round_sizes", None)),
                             "round_ratios": row_round_ratios(base, row) * base.scale / row.scale,
                             "round_medians": (row_round_medians(base) * base.scale, row_round_medians(row) * row.scale)})
    return pd.DataFrame(rows, columns=cols).sort_values([*_setting_columns(), "baseline", "plan"], key=_plan_order,
                                                        ).reset_index(drop=True)


def describe_setting(row) -> str:
    """A setting in words: the corpus, the model, the batch size and how an epoch was timed."""
    layers = f"{row.layers} layer{'s' if row.layers != 1 else ''}"
    return f"{row.corpus}; {layers} x {row.hidden} units, {row.features} features, batch {row.batch_size}; {row.timed}"


def compact(table: pd.DataFrame) -> pd.DataFrame:
    """A table of `epoch_times` or `speedups` for the page: the setting's columns folded into one."""
    if table.empty:
        return table
    out = table.copy()
    out.insert(2, "setting", [describe_setting(r) for r in table.itertuples()])
    return out.drop(columns=["layers", "hidden", "features", *SETTING_KEYS, *_SETTING_FACTS])


def epoch_view(table: pd.DataFrame) -> pd.DataFrame:
    """`compact(epoch_times)` for the page: seconds per epoch with its 95% interval as one rounded cell, the
    padding share, the sample's work error only where a sample was timed, and the kernel that ran."""
    if table.empty:
        return table
    t = compact(table)
    return pd.DataFrame({
        "hardware": t.hardware_id, "setting": t.setting, "kernel": t.kernel, "plan": t.plan,
        "s per epoch (95% interval)": [f"{r.epoch_s:.3g} ({r.epoch_lo_s:.3g}-{r.epoch_hi_s:.3g})"
                                       for r in t.itertuples()],
        "ms per batch": [f"{v:.3g}" for v in t.ms_per_batch], "padding": [f"{w:.1%}" for w in t.waste_fraction],
        "sample's work error": [f"{e:+.1%}" if e else "none: whole epoch" for e in t.sample_work_error],
        "kernel that ran": t.observed_kernel.fillna("not recorded")})


def tracking_view(table: pd.DataFrame) -> pd.DataFrame:
    """`tracking` for the page: the reading first, time / work and its 95% interval as one rounded cell."""
    return pd.DataFrame({
        "hardware": table.hardware, "reading": table.reading,
        "time / work (95% interval)": ["-" if pd.isna(low) else _interval_text(value, low, high)
                                       for value, low, high in zip(table["time / work"], table.low, table.high)],
        "rests on": table["rests on"]})


def _interval_text(value: float, lo: float, hi: float) -> str:
    return f"{value:.2f} ({lo:.2f}-{hi:.2f})"


def speedup_summary(table: pd.DataFrame) -> pd.DataFrame:
    """`speedups` for the page: one row per setting, kernel and plan; per baseline the speed-up ("3.1x
    (2.9-3.3)"), the padded-work ratio and time / work, each with its interval."""
    if table.empty:
        return table
    t = compact(table)
    t["speed-up"] = [_interval_text(r.ratio, r.ratio_lo, r.ratio_hi) + "x" for r in t.itertuples()]
    t["work"] = [f"{w:.2f}x" for w in t.work_ratio]
    t["time / work"] = [_interval_text(r.tracking, r.tracking_lo, r.tracking_hi) for r in t.itertuples()]
    what = ("speed-up", "work", "time / work")
    wide = t.pivot_table(index=["hardware_id", "setting", "kernel", "plan"], columns="baseline", values=list(what),
                         aggfunc="first")
    wide.columns = [f"{w} over {baseline}" for w, baseline in wide.columns]
    wide = wide.reset_index().sort_values(["hardware_id", "setting", "kernel", "plan"], key=_plan_order
                                          ).reset_index(drop=True)
    columns = [f"{w} over {b}" for b in BASELINES for w in what]
    return wide[["hardware_id", "setting", "kernel", "plan", *[c for c in columns if c in wide]]].fillna("-")


def _largest(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the setting a hardware set is judged on: whole epochs of the real corpus before a sample or
    the synthetic corpus, then the most sentences, layers and hidden units."""
    keys = [*_SETTING_FACTS, "layers", "hidden", "features", "batch_size", "corpus", "timed", "seed"]
    best = table.sort_values(keys, ascending=False).iloc[0]
    return table[(table[keys] == best[keys]).all(axis=1)]


def largest_settings(table: pd.DataFrame) -> pd.DataFrame:
    """`epoch_times` or `speedups` rows of each hardware set's headline setting (what its verdict uses, if it
    has one; else its largest stored setting)."""
    if table.empty:
        return table
    return pd.concat([_largest(part) for _, part in table.groupby("hardware_id", sort=True)], ignore_index=True)


def _headline_rows(table: pd.DataFrame, hardware_id: str) -> pd.DataFrame:
    """The hardware set's `speedups` rows of auto buckets with the headline kernel, in its headline setting."""
    mine = table[(table.hardware_id == hardware_id) & (table.kernel == HEADLINE) & (table.plan == AUTO)]
    return _largest(mine) if not mine.empty else mine


def _decisive(table: pd.DataFrame, hardware_id: str) -> tuple[pd.Series | None, pd.DataFrame]:
    """The row a verdict decides on (auto buckets over per-batch padding, whole epochs of the real corpus) or None,
    and the headline rows either way."""
    rows = _headline_rows(table, hardware_id)
    head = rows[rows.baseline == PER_BATCH]
    if head.empty or not (head.real_corpus.iloc[0] and head.whole_epoch.iloc[0]):
        return None, rows
    return head.iloc[0], rows


def _undecided_text(rows: pd.DataFrame) -> str:
    """What a set without a decisive row holds instead, so the ledger says why it has no verdict."""
    head = rows[rows.baseline == PER_BATCH] if not rows.empty else rows
    if head.empty:
        return f"not measured: no {HEADLINE} timing of auto buckets and of per-batch padding"
    h = head.iloc[0]
    return (f"no verdict: no whole-epoch timing on the real Penn Treebank lengths. Context only: "
            f"{h.ratio:.2f}x (timing-noise interval {h.ratio_lo:.2f}-{h.ratio_hi:.2f}; the sampling error is not "
            f"in it) on {describe_setting(h)}")


def verdicts(results: pd.DataFrame) -> list[Verdict]:
    """One verdict per hardware set (the ledger's): torch.padded, auto buckets over per-batch padding, whole
    epochs of the real corpus (see `RULE`); the speed-up over padding to the corpus maximum beside it."""
    table = speedups(results)
    out = []
    for hardware_id in sorted(results.hardware_id.unique()) if not results.empty else []:
        head, rows = _decisive(table, hardware_id)
        if head is None:
            out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, _undecided_text(rows),
                               Outcome.NOT_MEASURED, RULE))
            continue
        tracking = _interval_text(head.tracking, head.tracking_lo, head.tracking_hi)
        few = head.fewest_timings  # a handful of timings gives a rough range, not a 95% interval: it is not called one
        text = (f"{head.ratio:.2f}x ({interval_label(few)} {head.ratio_lo:.2f}-{head.ratio_hi:.2f}) epoch-time "
                f"speed-up of auto buckets over per-batch padding ({HEADLINE}; {describe_setting(head)}); padded work "
                f"{head.work_ratio:.2f}x less, time / work {tracking}")
        other = rows[rows.baseline == GLOBAL_MAX]
        if not other.empty:
            o = other.iloc[0]
            text += (f"; context, not deciding: {o.ratio:.2f}x (95% interval {o.ratio_lo:.2f}-{o.ratio_hi:.2f}) over "
                     f"padding to the corpus maximum (padded work {o.work_ratio:.2f}x less)")
        outcome = BANDS.decide(head.ratio_lo, head.ratio_hi)
        if pd.notna(few):  # one configuration decides: its few timings decide only where its rounds agree
            outcome, why = few_timings(BANDS, int(few), list(head.round_ratios), head.round_medians)
            text = f"{text}; {why}"
        out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, float(head.ratio), text, outcome, RULE,
                           float(head.ratio_lo), float(head.ratio_hi),
                           fewest_timings=None if pd.isna(few) else int(few)))
    return out


def tracking_reading(low: float, high: float) -> str:
    """What an interval of time / work reads (`TRACKING_READINGS`), or `UNDECIDED` where it straddles an edge."""
    first, last = bisect.bisect_right(TRACKING_EDGES, low), bisect.bisect_right(TRACKING_EDGES, high)
    return TRACKING_READINGS[first] if first == last else UNDECIDED


TRACKING_COLUMNS = ["hardware", "time / work", "low", "high", "reading", "rests on"]


def tracking(results: pd.DataFrame) -> pd.DataFrame:
    """Per hardware set, whether epoch time tracks padded work (`TRACKING_RULE`), read on the verdict's rows: time /
    work with its 95% interval, what it reads, and what it rests on. No reading where the verdict has no row, nor on
    a set timed in one burst per row, whose interval holds no run-to-run drift (as `Claim.judge` leaves a verdict)."""
    table = speedups(results)
    bursts = one_burst_sets(results)
    rows = []
    for hardware_id in sorted(results.hardware_id.unique()) if not results.empty else []:
        head, found = _decisive(table, hardware_id)
        if head is None:
            rows.append({"hardware": hardware_id, "reading": NO_READING, "rests on": _undecided_text(found)})
            continue
        rests = (f"{head.ratio:.2f}x faster for {head.work_ratio:.2f}x less padded work ({HEADLINE}, auto buckets over "
                 f"per-batch padding; {describe_setting(head)})")
        reading = tracking_reading(head.tracking_lo, head.tracking_hi)
        if hardware_id in bursts:
            reading, rests = NO_READING, f"{rests}; {ONE_BURST_WORDS}"
        rows.append({"hardware": hardware_id, "time / work": head.tracking, "low": head.tracking_lo,
                     "high": head.tracking_hi, "reading": reading, "rests on": rests})
    return pd.DataFrame(rows, columns=TRACKING_COLUMNS)


def tracking_texts(table: pd.DataFrame) -> dict[str, str]:
    """`tracking` in the page's prose, per device kind ('cpu', 'cuda'): a sentence per stored set of that kind."""
    def sentence(row: pd.Series) -> str:
        figure = f"time / work {_interval_text(row['time / work'], row.low, row.high)}, " if pd.notna(row.low) else ""
        return f"On {row.hardware}: {figure}{row['rests on']}: {row.reading}."

    out = {}
    for kind, missing in (("cpu", "No CPU result set is stored."), ("cuda", "No GPU result set is stored.")):
        out[kind] = " ".join(sentence(r) for _, r in table.iterrows() if r.hardware.startswith(f"{kind}-")) or missing
    return out


# --- the worked example: a check, not a verdict ----------------------------------------------------------

def worked_example_table(example: dict | None = None) -> pd.DataFrame:
    """The slides' arithmetic, computed by `lstmstudy.data`, beside the slides' numbers."""
    ex = data.worked_example() if example is None else example
    rows = [("ideal (each sentence its own length)", "real"),
            ("padded per batch, batches [4, 8] and [3, 7]", "padded"),
            ("greedy buckets, batches [8, 7] and [4, 3]", "bucketed")]
    return pd.DataFrame([{"workload": text, "steps": ex[key], "slides": WORKED_SLIDES[key],
                          "matches": ex[key] == WORKED_SLIDES[key]} for text, key in rows])


def worked_example_matches(example: dict | None = None) -> bool:
    """Whether the computed real, padded and bucketed steps are exactly the slides' 22, 30 and 24."""
    return bool(worked_example_table(example).matches.all())


#: the plan parameters are the same on every device kind; the depth, the width, the corpus and the kernels differ
_COMMON = dict(batch_size=32, sample_batches=WHOLE_EPOCH, features=32, static_boundaries=list(data.BOUNDARIES),
               static_pad_to="boundary", corpus="ptb-valid")
#: Keras on a GPU node runs on its torch backend, which refuses a mask on its cuDNN path: a masked LSTM is then
#: Keras's step-by-step Python loop (1.3 ms per step and layer, forward and backward, on a 2-core CPU;
#: launch-bound on a GPU too), about 1.5 minutes per 8-layer epoch of the valid split, a quarter of an hour per
#: point's rounds
TORCH_KERNELS = [k for k in KERNELS if k.startswith("torch.")]
CLAIM = Claim(
    says=(
        "Padding wastes work, and automatically generated buckets win it back: 3.3x over no bucketing."),
    bands=BANDS,
    figure_words="speed-up {}",
    advice=("**Does padding cost you time?** Bucketing sequences by length, rather than padding each batch to its "
            "longest, cuts the padded work; whether it cuts the time is what was measured."),
    number=NUMBER, name=NAME, statement=STATEMENT, seed_figure=SEED_FIGURE, rule=RULE,
    source="slides (seed 002); real Penn Treebank sentence lengths",
    citations=("lin-wu-lstm-slides", "marcus-ptb", "mikolov-rnnlm"),
    # A small CPU trains whole epochs of the valid split (106 batches) with one layer of 64 units and torch.padded,
    # the kernel the verdict reads: each epoch takes 0.5-1.1 s on 2 cores, so every point gets its 5-8 interleaved
    # rounds within a minute, for `make book` to fit 10 (2 layers of 128 units with all three kernels took 14
    # minutes; torch.packed runs ATen's loop on a CPU, over twice the padded time, and keras.masked more).
    # A GPU trains the seed's 8 layers with both torch steps. Both read the valid split, the corpus of the page's
    # arithmetic. The others are the notebook's `grid` parameter's to ask for (`kernels`).
    defaults={"cpu": dict(kernels=[HEADLINE], layers=1, hidden=64, **_COMMON),
              "cuda": dict(kernels=TORCH_KERNELS, layers=SEED_LAYERS, hidden=128, **_COMMON)},
    grid=grid, measure=measure, verdicts=verdicts, check=check_parameters,
    # keras.masked (Keras's masked generic loop) costs most: it comes last. A GPU: 16 s a point on the first lease, at
    # 5-8 calls an epoch-long row; `stats.MIN_CALLS` adds 19 s a point (the missing calls times each row's median)
    seconds_per_point={"cpu": 8.0, "cuda": 36.0}, slow=frozenset({"keras.masked"}),
)
