"""Claim 3: mixed precision (fp16/bf16) speeds an LSTM up only at large hidden sizes and many timesteps;
at small sizes the casts cost more than they save.

Seeds: the paper (003), single-layer LSTM inference on a TITAN V: "Tensorflow AMP does end up consistently
about 10-15% faster than cuDNN for the largest input sizes" (hidden 512-1024, long sequences), while "for
smaller input sizes, the forwarding times for AMP is greater than that of simply running cuDNN"; PyTorch AMP
shows "a 63% slowdown on average compared to the non-AMP PyTorch implementation", yet "Larger hidden sizes
show improvements of >40% when compared to DeepBench". Context, not a seed: DeepBench (cited on the page)
publishes LSTM training times on NVIDIA GPUs in fp32 and in mixed precision. The page shows its speed-ups with this
rule's thresholds (`published_rules`), and its times beside this study's rows at its shapes
(`published_rules.beside_deepbench`, the rows `deepbench_shapes` adds to a GPU grid): others' measurements, never
counted among this study's verdicts.

The speed-up of a low precision is median(fp32 step time) / median(low-precision step time) of the same
kernel at the same shape and phase. PyTorch rows: `torch.autocast` on a CPU. On a GPU two kinds of 16-bit
rows: the AMP step the paper timed (`AMP_KERNEL`: fp32 weights and input under `torch.autocast` to fp16, the
casts inside the timed step; "A few casting operations are executed on the tensors on the GPU before
launching the cudnn_rnn kernel"), and the module and its input held in the 16-bit type, with no casts, as
context and for bf16, which has no autocast row on a GPU: autocast's cuDNN RNN path casts to fp16 whatever type
it is given (so a "bf16" autocast row would have computed in fp16). Keras rows: the `mixed_float16` /
`mixed_bfloat16` dtype policies, casts included. Every row stores the dtype its LSTM output really had
(`compute_dtype`). The verdict reads the AMP step of nn.LSTM (cuDNN on a GPU, oneDNN on a CPU) at the
precision the hardware accelerates: fp16 on a GPU (tensor cores), bf16 on a CPU (AVX512-BF16 / AMX through
oneDNN, where the fingerprint lists those flags), where a 16-bit `torch.fused` already runs under autocast.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from lstmstudy import contract, published
from lstmstudy.claims import Claim, Lease
from lstmstudy.observe import what_ran
from lstmstudy.parameters import check_bool, check_choices, check_positive_ints
from lstmstudy.results import config_text
from lstmstudy.rules import (PART_WORDS, Outcome, Verdict, combine, holds_below, holds_from, interval_label,
                             low_precision, low_precision_words, settle)
from lstmstudy.shapes import LSTMShape
from lstmstudy.stats import percentile_interval, row_replicates

if TYPE_CHECKING:  # measuring imports torch; the analysis below runs without it
    from lstmstudy.sweep import SweepReport

NAME = "mixed_precision"
NUMBER = "03"
STATEMENT = ("Mixed precision speeds an LSTM up only at large hidden sizes and many timesteps; "
             "at small sizes the casts cost more than they save")
SEED_FIGURE = ('"Tensorflow AMP does end up consistently about 10-15% faster than cuDNN for the largest input '
               'sizes" (hidden "about 512 to 1024"); "for smaller input sizes, the forwarding times for AMP is '
               'greater than that of simply running cuDNN"; PyTorch AMP "a 63% slowdown on average" (seed 003, '
               'TITAN V, inference)')
#: the phase the rule decides on: the seed timed inference ("the forwarding times"); training is shown beside it
DECIDING_PHASE = "inference"
#: part (i): at the smallest shape the low precision is slower ("the casts cost more"): speed-up below 1
SMALL_MAX = 1.0
#: part (ii): at the largest shape it is faster, by the seed's "about 10-15%"
LARGE_MIN = 1.10
HEADLINE_KERNEL = "torch.fused"
#: the AMP step on a GPU: torch.fused rows with the `contract.AUTOCAST` config, named so in every table and figure
#: and paired with torch.fused's fp32 rows (`labelled`)
AMP_KERNEL = "torch.fused+autocast"
AMP_CONFIG = config_text(contract.AUTOCAST)
#: the kernel whose speed-ups carry the verdict, per device kind: the AMP step (on a CPU, torch.fused is it)
DECIDING_KERNEL = {"cpu": HEADLINE_KERNEL, "cuda": AMP_KERNEL}
#: the precision each device kind accelerates, which carries the verdict
HEADLINE_PRECISION = {"cpu": "bf16", "cuda": "fp16"}
KERAS_KERNEL = "keras.cudnn_auto"
LOW_PRECISIONS = ("bf16", "fp16")
RULE = (f"speed-up = fp32 time / low-precision time of nn.LSTM's AMP step ({AMP_KERNEL} on a GPU: fp32 weights and "
        f"input under torch.autocast, the casts inside the step; {HEADLINE_KERNEL} on a CPU, which runs so) in "
        f"{DECIDING_PHASE} (the seed timed the forward pass), at the precision the hardware accelerates (fp16 on a "
        f"GPU, bf16 on a CPU), with a 95% interval over its rounds and samples; smallest / largest shape = the "
        f"configuration with the fewest / most FLOPs. Part (i) holds if the smallest shape's interval lies below "
        f"{SMALL_MAX:.2f} (the low precision slower: the casts cost more than they save), fails if it lies at or "
        f"above; part (ii) holds if the largest shape's interval lies at or above {LARGE_MIN:.2f}, fails if below. "
        f"Reproduced if both hold, partly if one holds and the other fails, not reproduced if neither holds, "
        f"inconclusive if an undecided part (interval across its threshold) could change the outcome. Training is "
        f"reported beside it and does not decide")
#: the rule's two parts, decided on intervals
SMALL_PART, LARGE_PART = holds_below(SMALL_MAX), holds_from(LARGE_MIN)
#: the columns that pair a low-precision row with its fp32 row
PAIR_KEYS = ["hardware_id", "kernel", "phase", "batch", "timesteps", "features", "hidden", "layers",
             "bidirectional", "config"]


def grid(*, kind: str, quick: bool, hiddens: Sequence[int], timesteps: Sequence[int], batches: Sequence[int],
         batch_sweep: Sequence[int], sweep_hidden: int, keras_cpu_hidden: int, keras_cpu_timesteps: int,
         features: int, precisions: Sequence[str], phases: Sequence[str],
         deepbench_shapes: bool = False) -> list[contract.Point]:
    """The points to measure on a device of `kind` ('cpu' or 'cuda'), fp32 always included.

    - `torch.fused` over hiddens x timesteps x batches (the heatmaps);
    - `torch.fused` at `sweep_hidden` and the longest sequence over `batch_sweep` (the batch facet);
    - `keras.cudnn_auto`: on a GPU over the heatmap grid, on a CPU (where it is the generic loop and costs
      more) at the one shape `keras_cpu_hidden` x `keras_cpu_timesteps` x the first batch;
    - `deepbench_shapes`: `torch.fused` training at DeepBench's 22 LSTM training shapes (input size = hidden
      size), fp32 and fp16, the rows `published_rules.beside_deepbench` puts beside the V100's published times.

    Each shape's precisions are measured back to back, so a drift in the machine's speed hits the fp32
    and the low-precision time of a speed-up alike. `quick` keeps two hidden sizes (a smallest and a
    largest shape for the verdict), one short sequence, one batch, and the first extra batch size.
    """
    if quick:
        hiddens, timesteps, batches = list(hiddens[:2]), [min(timesteps[0], 8)], list(batches[:1])
        batch_sweep, sweep_hidden = list(batch_sweep[:1]), hiddens[0]
        keras_cpu_hidden, keras_cpu_timesteps = hiddens[0], timesteps[0]
    precs = ["fp32", *[p for p in LOW_PRECISIONS if p in precisions]]
    shapes: list[tuple[str, LSTMShape]] = []
    for b in batches:
        for h in hiddens:
            for t in timesteps:
                shapes.append((HEADLINE_KERNEL, LSTMShape(batch=b, timesteps=t, features=features, hidden=h)))
    for b in batch_sweep:
        shapes.append((HEADLINE_KERNEL, LSTMShape(batch=b, timesteps=max(timesteps), features=features,
                                                  hidden=sweep_hidden)))
    if kind == "cuda":
        shapes += [(KERAS_KERNEL, s) for _, s in shapes[:len(batches) * len(hiddens) * len(timesteps)]]
    else:
        shapes.append((KERAS_KERNEL, LSTMShape(batch=batches[0], timesteps=keras_cpu_timesteps, features=features,
                                               hidden=keras_cpu_hidden)))
    points, seen = [], set()
    for phase in phases:
        for kernel, shape in shapes:
            amp = kind == "cuda" and kernel == HEADLINE_KERNEL and "fp16" in precs  # beside each held fp16 row
            for precision, config in [*((p, {}) for p in precs), *([("fp16", contract.AUTOCAST)] if amp else [])]:
                point = contract.Point(kernel, shape, precision=precision, phase=phase, config=config)
                if point.key() not in seen:
                    seen.add(point.key())
                    points.append(point)
    if deepbench_shapes and not quick:
        points += [contract.Point(HEADLINE_KERNEL, LSTMShape(batch=b, timesteps=t, features=h, hidden=h),
                                  precision=precision, phase="train")
                   for h, b, t in published.deepbench_shapes() for precision in ("fp32", "fp16") if precision in precs]
    return points


def measure(points: list[contract.Point], *, device: str, min_time: float, quick: bool = False,
            **sweep_options) -> list[SweepReport]:
    """Measure the points not yet stored for this hardware.

    One untimed warm-up call is enough: building a kernel already runs its step once (`_first_call`),
    and the large CPU training steps take seconds each.
    """
    from lstmstudy import kernels, sweep, timing

    return [sweep.run(NAME, points, kernels.prepare, timing.plan(min_time, quick, warmup=1), device=device,
                      **sweep_options)]


def check_parameters(parameters: dict) -> None:
    check_positive_ints(**{k: parameters[k] for k in ("hiddens", "timesteps", "batches", "batch_sweep")},
                        **{k: [parameters[k]] for k in ("sweep_hidden", "keras_cpu_hidden", "keras_cpu_timesteps",
                                                        "features")})
    check_choices("precisions", parameters["precisions"], LOW_PRECISIONS)
    check_choices("phases", parameters["phases"], contract.PHASES)
    check_bool(deepbench_shapes=parameters["deepbench_shapes"])


# --- speed-ups ------------------------------------------------------------------------------------------

def _flops(row: pd.Series) -> float:
    shape = LSTMShape(batch=int(row.batch), timesteps=int(row.timesteps), features=int(row.features),
                      hidden=int(row.hidden), layers=int(row.layers), bidirectional=bool(row.bidirectional))
    return shape.flops(str(row.phase))


def labelled(rows: pd.DataFrame) -> pd.DataFrame:
    """The stored rows with the AMP step's (torch.fused with the `contract.AUTOCAST` config) named `AMP_KERNEL`."""
    if rows.empty:
        return rows
    amp = (rows.kernel == HEADLINE_KERNEL) & (rows.config == AMP_CONFIG)
    return rows.assign(kernel=rows.kernel.where(~amp, AMP_KERNEL), config=rows.config.where(~amp, "{}"))


def speedups(results: pd.DataFrame) -> pd.DataFrame:
    """Every low-precision `ok` row against the fp32 row of the same kernel, shape and phase (the AMP step's
    against torch.fused's: at fp32 they are one step).

    `ratio` = median fp32 time / median low-precision time (above 1: the low precision is faster), with a
    bootstrap 95% interval (`ratio_lo`, `ratio_hi`); `observed_kernel` is what ran at the low precision,
    `fp32_kernel` what ran at fp32; `flops` the configuration's work, which orders shapes by size.
    """
    columns = [*PAIR_KEYS, "precision", "ratio", "ratio_lo", "ratio_hi", "replicates", "fp32_ms", "low_ms",
               "observed_kernel", "fp32_kernel", "flops", "low_precision"]
    if results.empty:
        return pd.DataFrame(columns=columns)
    ok = labelled(results[results.status == "ok"])
    base = {tuple(r[k] for k in PAIR_KEYS): r for _, r in ok[ok.precision == "fp32"].iterrows()}
    rows = []
    for _, row in ok[ok.precision != "fp32"].iterrows():
        fp32_kernel = HEADLINE_KERNEL if row["kernel"] == AMP_KERNEL else row["kernel"]
        ref = base.get(tuple(fp32_kernel if k == "kernel" else row[k] for k in PAIR_KEYS))
        if ref is None:
            continue
        ratio, boot = row_replicates(ref, row)
        lo, hi = percentile_interval(boot)
        rows.append({**{k: row[k] for k in PAIR_KEYS}, "precision": row["precision"], "ratio": ratio,
                     "ratio_lo": lo, "ratio_hi": hi, "replicates": boot, "fp32_ms": ref["median_s"] * 1e3,
                     "low_ms": row["median_s"] * 1e3,
                     "observed_kernel": what_ran(row["observed_kernel"], row["predicted_kernel"]),
                     "fp32_kernel": what_ran(ref["observed_kernel"], ref["predicted_kernel"]), "flops": _flops(row),
                     "low_precision": low_precision(ref.get("round_sizes"), row.get("round_sizes"))})
    return pd.DataFrame(rows, columns=columns)


def _kind(hardware_id: str) -> str:
    return "cuda" if hardware_id.startswith("cuda-") else "cpu"


def _shape_text(row: pd.Series) -> str:
    return f"H={row.hidden} T={row.timesteps} B={row.batch}"


def extremes(results: pd.DataFrame) -> pd.DataFrame:
    """What the verdict reads: per hardware set and phase, the headline speed-up at the configuration with
    the fewest FLOPs ('smallest') and at the one with the most ('largest'), with bootstrap intervals."""
    table = speedups(results)
    columns = ["hardware_id", "precision", "phase", "end", "shape", "ratio", "ratio_lo", "ratio_hi",
               "replicates", "fp32_ms", "low_ms", "observed_kernel", "low_precision"]
    rows = []
    for hardware_id, part in table.groupby("hardware_id", sort=True):
        precision = HEADLINE_PRECISION[_kind(hardware_id)]
        mine = part[(part.kernel == DECIDING_KERNEL[_kind(hardware_id)]) & (part.precision == precision)]
        for phase, by_phase in mine.groupby("phase", sort=True):
            if len(by_phase) < 2 or by_phase.flops.min() == by_phase.flops.max():
                continue  # one shape: no small and large end to compare
            ordered = by_phase.sort_values(["flops", "hidden", "timesteps", "batch"], kind="stable")
            for end, row in (("smallest", ordered.iloc[0]), ("largest", ordered.iloc[-1])):
                rows.append({"hardware_id": hardware_id, "precision": precision, "phase": phase, "end": end,
                             "shape": _shape_text(row), **{c: row[c] for c in columns[5:]}})
    return pd.DataFrame(rows, columns=columns)


def _ends_text(part: pd.DataFrame) -> str:
    """'1.07x (95% interval 1.05-1.07) at H=64 T=16 B=32, 2.06x (...) at H=1024 T=128 B=32' for one phase's two ends."""
    ends = part.set_index("end")
    return ", ".join(f"{ends.ratio[end]:.2f}x ({interval_label(ends.low_precision[end])} {ends.ratio_lo[end]:.2f}-"
                     f"{ends.ratio_hi[end]:.2f}) at {ends['shape'][end]}" for end in ("smallest", "largest"))


def verdicts(results: pd.DataFrame) -> list[Verdict]:
    """One verdict per hardware set: parts (i) and (ii) of the rule on the inference speed-ups at the two ends,
    with the training speed-ups beside them as a finding of their own."""
    ends = extremes(results)
    out = []
    for hardware_id in sorted(results.hardware_id.unique()) if not results.empty else []:
        precision = HEADLINE_PRECISION[_kind(hardware_id)]
        mine = ends[ends.hardware_id == hardware_id]
        deciding, training = mine[mine.phase == DECIDING_PHASE], mine[mine.phase == "train"]
        kernel = DECIDING_KERNEL[_kind(hardware_id)]
        if deciding.empty:
            text = (f"not measured: no {precision} and fp32 pair of {kernel} {DECIDING_PHASE} at two or more "
                    f"shapes on this hardware")
            out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, text, Outcome.NOT_MEASURED, RULE))
            continue
        small, large = (deciding[deciding.end == end].iloc[0] for end in ("smallest", "largest"))
        possible, words = [], []
        for bands, end in ((SMALL_PART, small), (LARGE_PART, large)):
            if pd.notna(end.low_precision):  # a part resting on a low-precision row could go either way
                possible.append(frozenset({Outcome.REPRODUCED, Outcome.NOT_REPRODUCED}))
                words.append(f"undecided ({low_precision_words(int(end.low_precision))})")
            else:
                possible.append(bands.possible(end.ratio_lo, end.ratio_hi))
                words.append(PART_WORDS[bands.decide(end.ratio_lo, end.ratio_hi)])
        outcome = settle(combine(possible))
        beside = (f"; training, beside it and not deciding: {_ends_text(training)}" if not training.empty
                  else "; training not measured")
        text = (f"{DECIDING_PHASE}, {precision} over fp32 ({kernel}): {_ends_text(deciding)}; part (i) "
                f"{words[0]}, part (ii) {words[1]}{beside}")
        parts = (("part (i)", small.ratio_lo, small.ratio_hi), ("part (ii)", large.ratio_lo, large.ratio_hi))
        few = [int(end.low_precision) for end in (small, large) if pd.notna(end.low_precision)]
        out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, large.ratio, text, outcome, RULE,
                           large.ratio_lo, large.ratio_hi, parts, low_precision=min(few) if few else None))
    return out


# --- tables -----------------------------------------------------------------------------------------------

def observed_table(results: pd.DataFrame) -> pd.DataFrame:
    """Which kernel actually ran, per hardware set, kernel and phase (rows) and precision (columns).

    Each cell lists the `observed_kernel` values of the `ok` rows (with how many configurations each), or
    'skipped' / 'error' when no configuration ran at that precision.
    """
    if results.empty:
        return pd.DataFrame(columns=["hardware_id", "kernel", "phase", "fp32", "bf16", "fp16"])

    def cell(part: pd.DataFrame) -> str:
        ok = part[part.status == "ok"]
        if ok.empty:
            return "/".join(sorted(part.status.unique()))
        counts = pd.Series([what_ran(o, p) for o, p in zip(ok.observed_kernel, ok.predicted_kernel)]).value_counts()
        text = ", ".join(f"{name} ({n})" for name, n in sorted(counts.items()))
        return text + (f"; {len(part) - len(ok)} not ok" if len(part) > len(ok) else "")

    table = (labelled(results).groupby(["hardware_id", "kernel", "phase", "precision"])
             .apply(cell, include_groups=False)
             .rename("observed").reset_index()
             .pivot(index=["hardware_id", "kernel", "phase"], columns="precision", values="observed"))
    order = [p for p in ("fp32", "bf16", "fp16") if p in table.columns]
    return table[order].fillna("not requested").reset_index().rename_axis(columns=None)


def skipped_table(results: pd.DataFrame) -> pd.DataFrame:
    """Every configuration that did not run (`skipped` or `error`), with its reason."""
    columns = ["hardware_id", "kernel", "precision", "phase", "hidden", "timesteps", "batch", "status", "reason"]
    if results.empty:
        return pd.DataFrame(columns=columns)
    bad = labelled(results[results.status != "ok"]).rename(columns={"error": "reason"})
    return bad[columns].sort_values(columns[:7]).reset_index(drop=True)


def single_shapes(results: pd.DataFrame, kernel: str = KERAS_KERNEL) -> pd.DataFrame:
    """The speed-ups of `kernel` as a table (on a CPU, Keras is measured at one shape only)."""
    table = speedups(results)
    table = table[table.kernel == kernel]
    return (table[["hardware_id", "kernel", "phase", "precision", "hidden", "timesteps", "batch", "fp32_ms",
                   "low_ms", "ratio", "ratio_lo", "ratio_hi", "observed_kernel"]]
            .rename(columns={"ratio": "speed-up", "ratio_lo": "95% low", "ratio_hi": "95% high",
                             "fp32_ms": "fp32 ms", "low_ms": "low-precision ms"})
            .sort_values(["hardware_id", "phase", "precision", "hidden", "timesteps", "batch"])
            .reset_index(drop=True))


def by_batch(results: pd.DataFrame) -> pd.DataFrame:
    """`torch.fused` speed-ups (and, on a GPU, the AMP step's) against batch size, per hardware set at the hidden
    size and sequence length with the most batch sizes measured (the batch sweep); `series` names precision and
    phase (and 'autocast' for the AMP step), `shape` the hidden size and sequence length."""
    table = speedups(results)
    table = table[table.kernel.isin([HEADLINE_KERNEL, AMP_KERNEL])]
    parts = []
    for _, part in table.groupby("hardware_id", sort=True):
        counts = part.groupby(["hidden", "timesteps"]).batch.nunique()
        if counts.empty or counts.max() < 2:
            continue
        hidden, steps = counts.idxmax()
        parts.append(part[(part.hidden == hidden) & (part.timesteps == steps)])
    out = pd.concat(parts, ignore_index=True) if parts else table.iloc[0:0]
    out = out.assign(series=out.kernel.map({AMP_KERNEL: "autocast "}).fillna("") + out.precision + " " + out.phase,
                     shape="H=" + out.hidden.astype(str) + " T=" + out.timesteps.astype(str))
    return out.astype({"batch": int}).sort_values(["hardware_id", "series", "batch"]).reset_index(drop=True)


_COMMON = dict(timesteps=[16, 128], batches=[32], batch_sweep=[1, 8, 128], sweep_hidden=256, keras_cpu_hidden=256,
               keras_cpu_timesteps=16, features=32, precisions=list(LOW_PRECISIONS), phases=list(contract.PHASES))
CLAIM = Claim(
    says=(
        "Mixed precision helps an LSTM only at large hidden sizes and long sequences, and hurts at small "
        "ones."),
    figure_words="fp16 speed-up {}",
    number=NUMBER, name=NAME, statement=STATEMENT, seed_figure=SEED_FIGURE, rule=RULE,
    source="paper (seed 003)",
    citations=("mahorker-lstm-kernels",),
    # a GPU gets Keras over the whole heatmap grid, and DeepBench's training shapes (up to hidden 4096, batch 128)
    defaults={"cpu": dict(hiddens=[64, 256, 1024], deepbench_shapes=False, **_COMMON),
              "cuda": dict(hiddens=[64, 256, 1024], deepbench_shapes=True, **_COMMON)},
    grid=grid, measure=measure, verdicts=verdicts, check=check_parameters,
    seconds_per_point={"cpu": 1.4, "cuda": 0.5},
    # the verdict reads the AMP step's inference, fp16 over fp32, at the grid's smallest and largest shapes: the
    # heatmap's corners, with two batches of the sweep for the by-batch figure, every precision of torch.fused there
    # timed in the same rounds (24 points: the AMP step's rows are torch.fused's too); training, Keras and
    # DeepBench's shapes are context, measured after the lease's five claims
    lease=Lease(overrides={"hiddens": [64, 1024], "timesteps": [16, 128], "batches": [32], "batch_sweep": [1, 128],
                           "phases": ["inference"], "deepbench_shapes": False},
                kernels=frozenset({HEADLINE_KERNEL})),
)
