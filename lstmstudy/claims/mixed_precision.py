"""Claim 3: mixed precision (fp16/bf16) speeds an LSTM up only at large hidden sizes and many timesteps;
at small sizes the casts cost more than they save.

Seeds: the paper (003), single-layer LSTM inference on a TITAN V: "Tensorflow AMP does end up consistently
about 10-15% faster than cuDNN for the largest input sizes" (hidden 512-1024, long sequences), while "for
smaller input sizes, the forwarding times for AMP is greater than that of simply running cuDNN"; PyTorch AMP
shows "a 63% slowdown on average compared to the non-AMP PyTorch implementation", yet "Larger hidden sizes
show improvements of >40% when compared to DeepBench". Its largest sizes, where the gain was, are "a batch size of
256", "time steps greater than equal to 1000" and hidden "about 512 to 1024" (4.1, 4.4.2 and Figure 3): the
paper's sizes (`at_paper_sizes`), where a GPU's step can be bound by arithmetic rather than by each time step's
latency (`roofline_table` shows whether it is), and where part (ii) of the rule is decided on a GPU. Context, not
a seed: DeepBench (cited on the page) publishes LSTM training times on NVIDIA GPUs in fp32 and in mixed precision.
The page shows its speed-ups with this rule's thresholds (`published_rules`), and its times beside this study's rows
at its shapes (`published_rules.beside_deepbench`, the rows `deepbench_shapes` adds to a GPU grid): others'
measurements, never counted among this study's verdicts.

The speed-up of a 16-bit type is median(fp32 step time) / median(16-bit step time) of the same kernel at the same
shape and phase. PyTorch rows: `torch.autocast` on a CPU. On a GPU two kinds of 16-bit rows: the AMP step the paper
timed (`AMP_KERNEL`: fp32 weights and input under `torch.autocast` to fp16, the casts inside the timed step; "A few
casting operations are executed on the tensors on the GPU before launching the cudnn_rnn kernel"), and the module
and its input held in the 16-bit type, with no casts, as context and for bf16, which has no autocast row on a GPU:
autocast's cuDNN RNN path casts to fp16 whatever type it is given (so a "bf16" autocast row would have computed in
fp16). Keras rows: the `mixed_float16` / `mixed_bfloat16` dtype policies, casts included: `mixed_float16` is the
paper's TensorFlow AMP ("the Keras dtype policy"), run on the Keras backend the hardware set had (`keras_words`);
on a GPU it runs over the heatmap grid and at the paper's sizes beside torch autocast, where cuDNN runs both. Every
row stores the dtype its LSTM output really had (`compute_dtype`). The verdict reads the AMP step of nn.LSTM (cuDNN
on a GPU, oneDNN on a CPU) at the 16-bit type the hardware accelerates: fp16 on a GPU (tensor cores), bf16 on a CPU
(AVX512-BF16 / AMX through oneDNN, where the fingerprint lists those flags), where a 16-bit `torch.fused` already
runs under autocast. Every row's achieved FLOP/s stands beside its hardware set's roofline (`roofline_table`), so a
reader sees which rows are bound by latency rather than arithmetic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lstmstudy import contract, published
from lstmstudy.claims import Claim, Lease
from lstmstudy.frameworks import rows_words
from lstmstudy.observe import what_ran
from lstmstudy.parameters import check_bool, check_choices, check_positive_ints
from lstmstudy.results import config_text, without_exception
from lstmstudy.rules import (NO_DEVICE_TIME, PART_WORDS, SIGN_RULE, Outcome, Verdict, combine, few_timings,
                             holds_below, holds_from, interval_label, fewest_timings, settle)
from lstmstudy.shapes import LSTMShape
from lstmstudy.stats import (MIN_CALLS, interleaved, percentile_interval, row_replicates, row_round_medians,
                             row_round_ratios)

if TYPE_CHECKING:  # measuring imports torch; the analysis below runs without it
    from lstmstudy.roofline import Limit
    from lstmstudy.sweep import SweepReport

NAME = "mixed_precision"
NUMBER = "03"
STATEMENT = ("Mixed precision speeds an LSTM up only at large hidden sizes and many timesteps; "
             "at small sizes the casts cost more than they save")
SEED_FIGURE = ('"Tensorflow AMP does end up consistently about 10-15% faster than cuDNN for the largest input '
               'sizes" (hidden "about 512 to 1024", "time steps greater than equal to 1000", "a batch size of 256"); '
               '"for smaller input sizes, the forwarding times for AMP is greater than that of simply running cuDNN"; '
               'PyTorch AMP "a 63% slowdown on average" (seed 003, TITAN V, inference)')
#: the phase the rule decides on: the seed timed inference ("the forwarding times"); training is shown beside it
DECIDING_PHASE = "inference"
#: part (i): at the smallest shape the 16-bit step is slower ("the casts cost more"): speed-up below 1
SMALL_MAX = 1.0
#: part (ii): at the paper's sizes it is faster, by the seed's "about 10-15%"
LARGE_MIN = 1.10
#: the paper's sizes, where its AMP gain was (seed 003): hidden "about 512 to 1024" (4.4.2), "time steps greater than
#: equal to 1000" (4.1, Figure 3), "a batch size of 256" (its largest batch, Figures 1 and 2); a configuration is at
#: the paper's sizes when it reaches all three (`at_paper_sizes`)
PAPER_MIN_HIDDEN, PAPER_MIN_TIMESTEPS, PAPER_MIN_BATCH = 512, 1000, 256
PAPER_SIZES = f"hidden >= {PAPER_MIN_HIDDEN}, time steps >= {PAPER_MIN_TIMESTEPS}, batch >= {PAPER_MIN_BATCH}"
HEADLINE_KERNEL = "torch.fused"
#: the AMP step on a GPU: torch.fused rows with the `contract.AUTOCAST` config, named so in every table and figure
#: and paired with torch.fused's fp32 rows (`labelled`)
AMP_KERNEL = "torch.fused+autocast"
AMP_CONFIG = config_text(contract.AUTOCAST)
#: the kernel whose speed-ups carry the verdict, per device kind: the AMP step (on a CPU, torch.fused is it)
DECIDING_KERNEL = {"cpu": HEADLINE_KERNEL, "cuda": AMP_KERNEL}
#: the 16-bit type each device kind accelerates, which carries the verdict
HEADLINE_PRECISION = {"cpu": "bf16", "cuda": "fp16"}
#: Keras's LSTM with its defaults: at fp16 its `mixed_float16` policy, the paper's TensorFlow AMP
KERAS_KERNEL = "keras.cudnn_auto"
LOW_PRECISIONS = ("bf16", "fp16")
#: the interleaved rounds each group of points is timed in (`timing.plan`): 8, not the usual 5, so that a step at
#: the paper's sizes, which fills a round's burst with one call, gets 8 timings (a 95% interval: `fewest_timings`)
#: rather than 5; the sampling time per point is unchanged (min_time spread over more rounds)
ROUNDS = 8
RULE = (f"speed-up = fp32 time / 16-bit time of nn.LSTM's AMP step ({AMP_KERNEL} on a GPU: fp32 weights and input "
        f"under torch.autocast, the casts inside the step; {HEADLINE_KERNEL} on a CPU, which runs so) in "
        f"{DECIDING_PHASE} (the seed timed the forward pass), at the 16-bit type the hardware accelerates (fp16 on a "
        f"GPU, bf16 on a CPU), with a 95% interval over its rounds and samples. Part (i), at the smallest shape (the "
        f"configuration with the fewest FLOPs), holds if the interval lies below {SMALL_MAX:.2f} (the 16-bit step "
        f"slower: the casts cost more than they save), fails if it lies at or above. Part (ii) is decided at the "
        f"paper's sizes ({PAPER_SIZES}: seed 003's largest, where its AMP gain was), at the configuration there with "
        f"the most FLOPs: it holds if the interval lies at or above {LARGE_MIN:.2f}, fails if below; a GPU set "
        f"without such a configuration leaves part (ii) not measured at the paper's sizes, whatever its smaller "
        f"shapes show (there a GPU's step can be bound by each time step's latency rather than by the arithmetic that "
        f"16 bits speed up). On a CPU (an analogue, never a reproduction), whose default grid cannot reach the "
        f"paper's sizes in its budget, a set without such a configuration decides part (ii) at its grid's largest "
        f"configuration instead, named as smaller than the paper's sizes, with its share of the CPU's roofline shown "
        f"beside it. Reproduced if both parts hold, partly "
        f"if one holds and the other fails, not reproduced if neither holds, inconclusive if an undecided part "
        f"(interval across its threshold) could change the outcome, not measured if a part is. Training is reported "
        f"beside it and does not decide. {SIGN_RULE[0].upper()}{SIGN_RULE[1:]}")
#: the rule's two parts, decided on intervals
SMALL_PART, LARGE_PART = holds_below(SMALL_MAX), holds_from(LARGE_MIN)
#: a table's column of the speed-up in the GPU's own work (`speedups`' `device_ratio`), beside the wall-time one; a page
#: says "not recorded" where it is empty
DEVICE_SPEEDUP = "speed-up in device time"
#: the columns that pair a 16-bit row with its fp32 row
PAIR_KEYS = ["hardware_id", "kernel", "phase", "batch", "timesteps", "features", "hidden", "layers",
             "bidirectional", "config"]


def at_paper_sizes(hidden: int, timesteps: int, batch: int) -> bool:
    """Whether a configuration reaches the paper's sizes (`PAPER_MIN_HIDDEN` ...), where part (ii) is decided on a
    GPU."""
    return hidden >= PAPER_MIN_HIDDEN and timesteps >= PAPER_MIN_TIMESTEPS and batch >= PAPER_MIN_BATCH


def grid(*, kind: str, quick: bool, hiddens: Sequence[int], timesteps: Sequence[int], batches: Sequence[int],
         batch_sweep: Sequence[int], sweep_hidden: int, keras_cpu_hidden: int, keras_cpu_timesteps: int,
         features: int, precisions: Sequence[str], phases: Sequence[str], paper_hiddens: Sequence[int] = (),
         paper_timesteps: Sequence[int] = (), paper_batches: Sequence[int] = (),
         deepbench_shapes: bool = False) -> list[contract.Point]:
    """The points to measure on a device of `kind` ('cpu' or 'cuda'), fp32 always included.

    - `torch.fused` over hiddens x timesteps x batches (the heatmaps);
    - `torch.fused` at `sweep_hidden` and the longest sequence over `batch_sweep` (the batch facet);
    - `keras.cudnn_auto`: on a GPU over the heatmap grid, on a CPU (where it is the generic loop and costs
      more) at the one shape `keras_cpu_hidden` x `keras_cpu_timesteps` x the first batch;
    - the paper's block, `paper_hiddens` x `paper_timesteps` x `paper_batches`, inference only (the seed timed the
      forward pass): `torch.fused` and, on a GPU, `keras.cudnn_auto` (its `mixed_float16` policy beside autocast);
      the configurations among them at the paper's sizes (`at_paper_sizes`) decide part (ii) on a GPU, the smaller
      ones show the way there at the paper's batch. Empty lists leave the block out (a CPU's default: a CPU step at
      T=1000 B=256 H=1024 takes seconds a call);
    - `deepbench_shapes`: `torch.fused` training at DeepBench's 22 LSTM training shapes (input size = hidden
      size), fp32 and fp16, the rows `published_rules.beside_deepbench` puts beside the V100's published times.

    Each shape's precisions are measured back to back, so a drift in the machine's speed hits the fp32
    and the 16-bit time of a speed-up alike. `quick` keeps two hidden sizes (a smallest and a
    largest shape for the verdict), one short sequence, one batch, the first extra batch size, and no paper block.
    """
    if quick:
        hiddens, timesteps, batches = list(hiddens[:2]), [min(timesteps[0], 8)], list(batches[:1])
        batch_sweep, sweep_hidden = list(batch_sweep[:1]), hiddens[0]
        keras_cpu_hidden, keras_cpu_timesteps = hiddens[0], timesteps[0]
        paper_hiddens = paper_timesteps = paper_batches = ()
    precs = ["fp32", *[p for p in LOW_PRECISIONS if p in precisions]]
    heatmap = [LSTMShape(batch=b, timesteps=t, features=features, hidden=h)
               for b in batches for h in hiddens for t in timesteps]
    sweep = [LSTMShape(batch=b, timesteps=max(timesteps), features=features, hidden=sweep_hidden)
             for b in batch_sweep]
    paper = [LSTMShape(batch=b, timesteps=t, features=features, hidden=h)
             for b in paper_batches for h in paper_hiddens for t in paper_timesteps]
    if kind == "cuda":
        keras = heatmap
    else:
        keras = [LSTMShape(batch=batches[0], timesteps=keras_cpu_timesteps, features=features,
                           hidden=keras_cpu_hidden)]
    shapes = {phase: [*((HEADLINE_KERNEL, s) for s in heatmap + sweep), *((KERAS_KERNEL, s) for s in keras)]
              for phase in phases}
    if DECIDING_PHASE in shapes:  # the paper's block, each shape's torch and Keras rows together
        shapes[DECIDING_PHASE] += [(kernel, s) for s in paper
                                   for kernel in (HEADLINE_KERNEL, *((KERAS_KERNEL,) if kind == "cuda" else ()))]
    points, seen = [], set()
    for phase in phases:
        for kernel, shape in shapes[phase]:
            amp = kind == "cuda" and kernel == HEADLINE_KERNEL and "fp16" in precs  # beside each held fp16 row
            for precision, config in [*((p, {}) for p in precs), *([("fp16", contract.AUTOCAST)] if amp else [])]:
                point = contract.Point(kernel, shape, precision=precision, phase=phase, config=config)
                ident = (kernel, shape, precision, phase, config_text(config))  # `key` less its backend: no Keras
                if ident not in seen:
                    seen.add(ident)
                    points.append(point)
    if deepbench_shapes and not quick:
        points += [contract.Point(HEADLINE_KERNEL, LSTMShape(batch=b, timesteps=t, features=h, hidden=h),
                                  precision=precision, phase="train")
                   for h, b, t in published.deepbench_shapes() for precision in ("fp32", "fp16") if precision in precs]
    return points


def measure(points: list[contract.Point], *, device: str, min_time: float, quick: bool = False,
            **sweep_options) -> list[SweepReport]:
    """Measure the points not yet stored for this hardware, each group in `ROUNDS` interleaved rounds (a quick run:
    the quick plan's two).

    One untimed warm-up call is enough: building a kernel already runs its step once (`_first_call`),
    and the large CPU training steps take seconds each.
    """
    from lstmstudy import kernels, sweep, timing

    plan = timing.plan(min_time, quick, warmup=1, **({} if quick else {"rounds": ROUNDS}))
    return [sweep.run(NAME, points, kernels.prepare, plan, device=device, **sweep_options)]


def check_parameters(parameters: dict) -> None:
    check_positive_ints(**{k: parameters[k] for k in ("hiddens", "timesteps", "batches", "batch_sweep")},
                        **{k: [parameters[k]] for k in ("sweep_hidden", "keras_cpu_hidden", "keras_cpu_timesteps",
                                                        "features")})
    block = {k: parameters[k] for k in ("paper_hiddens", "paper_timesteps", "paper_batches")}
    if any(block.values()) or any(not isinstance(v, (list, tuple)) for v in block.values()):
        check_positive_ints(**block)  # the paper's block: every axis given, or every axis empty (no block)
    check_choices("precisions", parameters["precisions"], LOW_PRECISIONS)
    check_choices("phases", parameters["phases"], contract.PHASES)
    check_bool(deepbench_shapes=parameters["deepbench_shapes"])


# --- the GPU plan -----------------------------------------------------------------------------------------
# What a point of this claim takes on a GPU, planned (`Claim.seconds_per_point`, `Lease.seconds_per_point`, which
# lstmstudy.claims' GPU_ORDER and the lease's budget add up). The first lease (an H100, 2026-11-26) measured this
# claim's grid as it was then, 152 points of up to H=1024 T=150 B=128 (DeepBench's up to H=4096), at 0.5 s a point,
# its build, warm-up, 5 rounds of samples and the profiler's looks included. A point whose call is longer than a
# round's burst (min_time / ROUNDS = 12.5 ms) takes its share of `stats.MIN_CALLS` a round (3 calls), so it pays its
# calls on top: 1 in its build, 2 looks of the profiler (each planned at two calls: its trace of every time step's
# launches), 1 warm-up, 3 a round in ROUNDS rounds and up to 3 extra rounds while it is noisy, and 2 for its device
# time (a call that sizes the profiled pass, and the pass): 41 calls in the lease's one process.
# A call is planned at the longer of two times. Its arithmetic at half the GEMM rate of its type the H100 measured
# (results/roofline/cuda-h100-80gb-hbm3-2a1d35: fp32 54 TFLOP/s at n=16384, planned at 53; fp16 742): its fp32
# training at DeepBench's H=4096 T=25 reached 47 TFLOP/s at B=128 and 31 at B=32, so half is a fair plan for the
# recurrent GEMMs at the paper's B=256. And its time steps' latency floor: the H100's fp32 inference at T=128 took
# 31-35 us a time step at H=256-1024 and training 78 us, planned at 40 and 80. At the paper's largest shape, H=1024
# T=1000 B=256 (2.2 TFLOP a forward pass), an fp32 call is planned at 84 ms (its arithmetic, twice the 42 ms it
# takes at the full GEMM rate), a 16-bit one at 40 ms (its floor; its arithmetic 6 ms): 1.9 s and 1.2 s a point;
# at H=512 T=1000 B=256 (0.57 TFLOP) every call is at its floor, 40 ms: 1.2 s a point. So the default GPU grid,
# 208 points, is planned at 128 s (its 152 points before the paper's block, measured in 76 s at 5 rounds: 79 s at
# ROUNDS), and the lease's 32 points at 22 s (its 24 before: 12 s).
PLAN_BASE_S = 0.6  # the first lease's 0.5 s, and 0.1 s for the profiled pass of its device time
PLAN_GEMM_FLOPS = {"fp32": 53e12, "fp16": 742e12, "bf16": 742e12}
PLAN_GEMM_SHARE = 0.5
PLAN_STEP_FLOOR_S = {"inference": 40e-6, "train": 80e-6}
PLAN_CALLS = 1 + 2 * 2 + 1 + math.ceil(MIN_CALLS / ROUNDS) * (ROUNDS + 3) + 2
PLAN_BURST_S = 0.1 / ROUNDS


def planned_call_s(point: contract.Point) -> float:
    """The planned time of one call of `point` on the H100 (see above): its arithmetic at half the GEMM rate of its
    type, or its time steps' latency floor, whichever is longer."""
    arithmetic = point.shape.flops(point.phase) / (PLAN_GEMM_SHARE * PLAN_GEMM_FLOPS[point.precision])
    return max(arithmetic, point.shape.timesteps * PLAN_STEP_FLOOR_S[point.phase])


def planned_point_s(point: contract.Point) -> float:
    """The planned time of one point on a GPU: the measured 0.5 s, and its calls where a call fills a burst."""
    call = planned_call_s(point)
    return PLAN_BASE_S + (PLAN_CALLS * call if call > PLAN_BURST_S else 0.0)


def _mean_plan(points: Sequence[contract.Point]) -> float:
    return round(sum(map(planned_point_s, points)) / len(points), 3)


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
    """Every 16-bit `ok` row against the fp32 row of the same kernel, shape and phase (the AMP step's
    against torch.fused's: at fp32 they are one step).

    `ratio` = median fp32 time / median 16-bit time (above 1: the 16-bit step is faster), with a
    bootstrap 95% interval (`ratio_lo`, `ratio_hi`); `observed_kernel` is what ran at 16 bits,
    `fp32_kernel` what ran at fp32; `flops` the configuration's work, which orders shapes by size; `paper` whether it
    is at the paper's sizes (`at_paper_sizes`); `few_timings` the fewest timings of the two rows where that is too
    few for a 95% interval (`rules.fewest_timings`), `round_ratios` the ratio in each of their paired rounds (what
    the rule for few timings counts; empty where they were not timed in the same rounds), and `apart` each row's
    round medians, fp32's first, where they were timed apart (what it counts then; empty where they were paired).
    `device_ratio` is the same ratio in the GPU's own work per call (`_device_ratio`), which no rule reads.
    """
    columns = [*PAIR_KEYS, "precision", "ratio", "ratio_lo", "ratio_hi", "device_ratio", "replicates", "fp32_ms",
               "low_ms", "observed_kernel", "fp32_kernel", "flops", "paper", "few_timings", "round_ratios", "apart"]
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
                     "ratio_lo": lo, "ratio_hi": hi, "device_ratio": _device_ratio(ref, row), "replicates": boot,
                     "fp32_ms": ref["median_s"] * 1e3, "low_ms": row["median_s"] * 1e3,
                     "observed_kernel": what_ran(row["observed_kernel"], row["predicted_kernel"]),
                     "fp32_kernel": what_ran(ref["observed_kernel"], ref["predicted_kernel"]), "flops": _flops(row),
                     "paper": at_paper_sizes(int(row["hidden"]), int(row["timesteps"]), int(row["batch"])),
                     "few_timings": fewest_timings(ref.get("round_sizes"), row.get("round_sizes")),
                     "round_ratios": row_round_ratios(ref, row),
                     "apart": ((), ()) if interleaved(ref, row) else (row_round_medians(ref), row_round_medians(row))})
    return pd.DataFrame(rows, columns=columns)


def _device_ratio(fp32: pd.Series, low: pd.Series) -> float:
    """fp32 over 16-bit in the GPU's own work per call (`device_s`: summed kernel durations), where both rows have it:
    the speed-up of what 16 bits change, which a host-bound row's wall time hides. NaN on a CPU and for rows stored
    before device time was."""
    a, b = fp32.get("device_s", np.nan), low.get("device_s", np.nan)
    return float(a / b) if pd.notna(a) and pd.notna(b) and a > 0 and b > 0 else np.nan


def _kind(hardware_id: str) -> str:
    return "cuda" if hardware_id.startswith("cuda-") else "cpu"


def _shape_text(row: pd.Series) -> str:
    return f"H={row.hidden} T={row.timesteps} B={row.batch}"


#: the ends `extremes` names: the fewest FLOPs, the most, and the most at the paper's sizes
ENDS = ("smallest", "largest", "largest at the paper's sizes")


def extremes(results: pd.DataFrame) -> pd.DataFrame:
    """What the verdict reads: per hardware set and phase, the headline speed-up at the configuration with
    the fewest FLOPs ('smallest'), at the one with the most ('largest') and at the one with the most at the paper's
    sizes (where the set holds one), with bootstrap intervals, the same speed-up in device time (`device_ratio`, which
    decides nothing), and each end's fp32 step's achieved TFLOP/s."""
    table = speedups(results)
    columns = ["hardware_id", "precision", "phase", "end", "shape", "ratio", "ratio_lo", "ratio_hi", "device_ratio",
               "fp32_ms", "low_ms", "fp32_tflops", "observed_kernel", "few_timings", "replicates", "round_ratios",
               "apart", "flops", "hidden", "timesteps", "batch"]
    rows = []
    for hardware_id, part in table.groupby("hardware_id", sort=True):
        precision = HEADLINE_PRECISION[_kind(hardware_id)]
        mine = part[(part.kernel == DECIDING_KERNEL[_kind(hardware_id)]) & (part.precision == precision)]
        for phase, by_phase in mine.groupby("phase", sort=True):
            if len(by_phase) < 2 or by_phase.flops.min() == by_phase.flops.max():
                continue  # one shape: no small and large end to compare
            ordered = by_phase.sort_values(["flops", "hidden", "timesteps", "batch"], kind="stable")
            paper = ordered[ordered.paper.astype(bool)]
            ends = [("smallest", ordered.iloc[0]), ("largest", ordered.iloc[-1])]
            ends += [(ENDS[2], paper.iloc[-1])] if not paper.empty else []
            for end, row in ends:
                rows.append({"hardware_id": hardware_id, "precision": precision, "phase": phase, "end": end,
                             "shape": _shape_text(row), "fp32_tflops": row.flops / (row.fp32_ms / 1e3) / 1e12,
                             **{c: row[c] for c in columns if c in row.index and c not in ("precision", "phase")}})
    return pd.DataFrame(rows, columns=columns)


def _end_text(end: pd.Series) -> str:
    """'1.07x (95% interval 1.05-1.07) at H=64 T=16 B=32' for one end."""
    return (f"{end.ratio:.2f}x ({interval_label(end.few_timings)} {end.ratio_lo:.2f}-{end.ratio_hi:.2f}) at "
            f"{end['shape']}")


def _ends_text(part: pd.DataFrame, kind: str) -> str:
    """One phase's two ends as the rule reads them on `kind`: the smallest, and the largest at the paper's sizes, or
    where a set holds none there, the grid's largest (on a GPU as context, on a CPU as its analogue)."""
    ends = part.set_index("end")
    small = f"smallest {_end_text(ends.loc['smallest'])}"
    if ENDS[2] in ends.index:
        return f"{small}, at the paper's sizes {_end_text(ends.loc[ENDS[2]])}"
    if kind == "cuda":
        return f"{small}, largest {_end_text(ends.loc['largest'])} (not at the paper's sizes)"
    return f"{small}, largest {_end_text(ends.loc['largest'])}"


def _part(bands, end: pd.Series) -> tuple[frozenset[Outcome], str]:
    """What one part can still be, and its words: decided on the interval, or, where a row of few timings carries
    it, by the rule for few timings (its paired rounds, or its rounds timed apart), else undecided."""
    if pd.notna(end.few_timings):
        outcome, why = few_timings(bands, int(end.few_timings), list(end.round_ratios), end.apart)
        if outcome == Outcome.INCONCLUSIVE:
            return frozenset({Outcome.REPRODUCED, Outcome.NOT_REPRODUCED}), f"undecided ({why})"
        return frozenset({outcome}), f"{PART_WORDS[outcome]} ({why})"
    return bands.possible(end.ratio_lo, end.ratio_hi), PART_WORDS[bands.decide(end.ratio_lo, end.ratio_hi)]


def verdicts(results: pd.DataFrame) -> list[Verdict]:
    """One verdict per hardware set: parts (i) and (ii) of the rule on the inference speed-ups at the smallest shape
    and, on a GPU, the largest at the paper's sizes (on a CPU, the grid's largest: an analogue), with the training
    speed-ups beside them as a finding of their own."""
    ends = extremes(results)
    out = []
    for hardware_id in sorted(results.hardware_id.unique()) if not results.empty else []:
        kind = _kind(hardware_id)
        precision, kernel = HEADLINE_PRECISION[kind], DECIDING_KERNEL[kind]
        mine = ends[ends.hardware_id == hardware_id]
        deciding, training = mine[mine.phase == DECIDING_PHASE], mine[mine.phase == "train"]
        if deciding.empty:
            text = (f"not measured: no {precision} and fp32 pair of {kernel} {DECIDING_PHASE} at two or more "
                    f"shapes on this hardware")
            out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, text, Outcome.NOT_MEASURED, RULE))
            continue
        by_end = deciding.set_index("end")
        small, paper = by_end.loc["smallest"], ENDS[2] in by_end.index
        # part (ii) reads the paper's sizes; a CPU set without them, its grid's largest shape (an analogue); a GPU
        # set without them leaves it not measured
        large = by_end.loc[ENDS[2]] if paper else by_end.loc["largest"] if kind == "cpu" else None
        small_possible, small_words = _part(SMALL_PART, small)
        if large is None:  # a GPU set without a row at the paper's sizes: part (ii) is not measured, never "fails"
            largest = by_end.loc["largest"]
            large_possible = frozenset({Outcome.NOT_MEASURED})
            large_words = (f"part (ii) not measured at the paper's sizes ({PAPER_SIZES}): this set holds no {kernel} "
                           f"{precision} and fp32 pair there; its largest shape, {largest['shape']}, where the fp32 "
                           f"step ran at {largest.fp32_tflops:.3g} TFLOP/s, does not decide it")
        else:
            large_possible, large_words = _part(LARGE_PART, large)
            if kind == "cpu":
                where = ("at the paper's sizes (" if paper else
                         f"at the grid's largest shape ({large['shape']}, below the paper's sizes, {PAPER_SIZES}; ")
                large_words = (f"part (ii), a CPU analogue {where}its fp32 step ran at {large.fp32_tflops:.3g} "
                               f"TFLOP/s, its share of this CPU's roofline in the page's table), {large_words}")
            else:
                large_words = f"part (ii) {large_words}"
        outcome = settle(combine([small_possible, large_possible]))
        beside = (f"; training, beside it and not deciding: {_ends_text(training, kind)}" if not training.empty
                  else "; training not measured")
        head = "not measured at the paper's sizes: " if large is None else ""  # what the verdict says, first
        text = (f"{head}{DECIDING_PHASE}, {precision} over fp32 ({kernel}): {_ends_text(deciding, kind)}; part (i) "
                f"{small_words}, {large_words}{beside}")
        decided = [("part (i)", small)] + ([("part (ii)", large)] if large is not None else [])
        parts = tuple((name, end.ratio_lo, end.ratio_hi) for name, end in decided)
        few = [int(end.few_timings) for _, end in decided if pd.notna(end.few_timings)]
        figure = (None, None, None) if large is None else (large.ratio, large.ratio_lo, large.ratio_hi)
        out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, figure[0], text, outcome, RULE, figure[1],
                           figure[2], parts, fewest_timings=min(few) if few else None))
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


def reason_words(error: object, precision: object = "") -> str:
    """Why a configuration did not run, in plain words for a reader: the library's exception text (kept in the
    stored rows and their CSV) is never shown. oneDNN's "could not create a primitive descriptor" means it has no LSTM
    primitive of that type for this CPU; any other reason keeps its words, less a quoted exception."""
    text = "" if error is None or error != error else str(error)
    if "primitive descriptor" in text:
        return (f"no {precision} LSTM kernel on this CPU: oneDNN has no {precision} LSTM primitive for it"
                if precision else "no LSTM kernel of this type on this CPU: oneDNN has no primitive for it")
    text = without_exception(text)
    text = re.sub(r"^\S+ at \w+( on \w+)?: ", "", text).strip()  # the kernel and type: the panel's title says them
    return text or "it did not run (no reason recorded)"


def attempted(results: pd.DataFrame) -> pd.DataFrame:
    """The stored rows as the figures read them (`labelled`), each reason a row did not run in plain words
    (`reason_words`) in `error`: a heatmap panel without data says why in words."""
    rows = labelled(results)
    if rows.empty:
        return rows
    plain = [reason_words(e, p) if s != "ok" else e for e, p, s in zip(rows.error, rows.precision, rows.status)]
    return rows.assign(error=plain)


def deciding(results: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What the verdict reads, for the page's deciding figure: the speed-ups (`speedups`) and the attempted rows
    (`attempted`) of each set's deciding kernel (`DECIDING_KERNEL`: the AMP step) at its 16-bit type
    (`HEADLINE_PRECISION`), in the deciding phase; a set without a pair keeps its rows there, which say why it has
    none."""
    table, rows = speedups(results), attempted(results)
    if rows.empty:
        return table, rows

    def mine(frame: pd.DataFrame) -> pd.Series:
        kinds = frame.hardware_id.map(_kind)
        return ((frame.kernel == kinds.map(DECIDING_KERNEL)) & (frame.phase == DECIDING_PHASE)
                & (frame.precision == kinds.map(HEADLINE_PRECISION)))

    return table[mine(table)], rows[mine(rows)]


def skipped_table(results: pd.DataFrame) -> pd.DataFrame:
    """What did not run (`skipped` or `error`): one row per hardware set, kernel, precision, phase and reason (in
    plain words: `reason_words`), with how many configurations."""
    columns = ["hardware_id", "kernel", "precision", "phase", "status", "reason", "configurations"]
    if results.empty or (results.status == "ok").all():
        return pd.DataFrame(columns=columns)
    bad = labelled(results[results.status != "ok"])
    bad = bad.assign(reason=[reason_words(e, p) for e, p in zip(bad.error, bad.precision)])
    return (bad.groupby(columns[:-1], sort=True).size().rename("configurations").reset_index()[columns])


def single_shapes(results: pd.DataFrame, kernel: str = KERAS_KERNEL) -> pd.DataFrame:
    """The speed-ups of `kernel` as a table, each beside its speed-up in device time (on a CPU, Keras is measured at
    one shape only)."""
    table = speedups(results)
    table = table[table.kernel == kernel]
    return (table[["hardware_id", "kernel", "phase", "precision", "hidden", "timesteps", "batch", "fp32_ms",
                   "low_ms", "ratio", "ratio_lo", "ratio_hi", "device_ratio", "observed_kernel"]]
            .rename(columns={"ratio": "speed-up", "ratio_lo": "95% low", "ratio_hi": "95% high",
                             "device_ratio": DEVICE_SPEEDUP, "fp32_ms": "fp32 ms", "low_ms": "16-bit ms"})
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


def _speedup_cell(row: pd.Series) -> str:
    """'1.23x (95% interval 1.10-1.30); in device time 1.31x' for a table cell, or '...; device time not recorded'."""
    device = (f"in device time {row.device_ratio:.2f}x" if pd.notna(row.device_ratio) else NO_DEVICE_TIME)
    return f"{row.ratio:.2f}x ({interval_label(row.few_timings)} {row.ratio_lo:.2f}-{row.ratio_hi:.2f}); {device}"


#: the columns of `paper_table`: the AMP step, Keras's mixed_float16 policy, and the module held in fp16
PAPER_SERIES = {AMP_KERNEL: "torch autocast fp16 (the AMP step)", KERAS_KERNEL: "Keras mixed_float16",
                HEADLINE_KERNEL: "torch.fused held in fp16, no casts"}


def paper_table(results: pd.DataFrame) -> pd.DataFrame:
    """The GPU sets' inference speed-ups, fp16 over fp32, in the paper's block (batch >= the paper's 256): torch's
    autocast beside Keras's `mixed_float16` policy (the paper's TensorFlow AMP, on the set's Keras backend:
    `keras_words`) and the module held in fp16, a column each, with their intervals and their speed-ups in device
    time; `paper` marks the rows at the paper's sizes, where part (ii) is decided."""
    table = speedups(results)
    columns = ["hardware_id", "hidden", "timesteps", "batch", "paper", *PAPER_SERIES.values()]
    if table.empty:
        return pd.DataFrame(columns=columns)
    mine = table[table.hardware_id.str.startswith("cuda-") & (table.phase == DECIDING_PHASE)
                 & (table.precision == "fp16") & (table.batch >= PAPER_MIN_BATCH) & table.kernel.isin(PAPER_SERIES)]
    if mine.empty:
        return pd.DataFrame(columns=columns)
    cells = mine.assign(cell=mine.apply(_speedup_cell, axis=1), series=mine.kernel.map(PAPER_SERIES))
    out = (cells.pivot_table(index=["hardware_id", "hidden", "timesteps", "batch", "paper"], columns="series",
                             values="cell", aggfunc="first").reset_index().rename_axis(columns=None))
    for column in PAPER_SERIES.values():
        if column not in out.columns:
            out[column] = None
    return out[columns].sort_values(["hardware_id", "batch", "hidden", "timesteps"]).reset_index(drop=True)


def keras_words(results: pd.DataFrame) -> dict[str, str]:
    """Per hardware set with Keras rows, what ran them (`frameworks.framework_words`, from the rows' backend and
    versions): 'Keras 3.15 on its torch backend', each backend a set's rows hold, newest last."""
    out: dict[str, str] = {}
    if results.empty:
        return out
    keras = results[results.kernel == KERAS_KERNEL]
    backend = keras["backend"] if "backend" in keras.columns else pd.Series("", index=keras.index)
    keras = keras.assign(backend=backend.fillna("").astype(str))
    if "created_at" in keras.columns:
        keras = keras.sort_values("created_at", kind="stable")
    for hardware_id, part in keras.groupby("hardware_id", sort=True):
        out[hardware_id] = " and ".join(rows_words(part[part.backend == b]) for b in dict.fromkeys(part.backend))
    return out


#: `roofline_table`'s columns: a row's speed-up in wall time and in device time, its fp32 and 16-bit steps, each with
#: its achieved TFLOP/s, the roofline's at its type and the share
ROOFLINE_COLUMNS = ["hardware_id", "kernel", "phase", "precision", "hidden", "timesteps", "batch", "speed-up",
                    DEVICE_SPEEDUP, "fp32 ms", "fp32 TFLOP/s", "fp32 roofline TFLOP/s", "fp32 share %", "16-bit ms",
                    "16-bit TFLOP/s", "16-bit roofline TFLOP/s", "16-bit share %", "roofline set by"]


def roofline_limits(hardware_ids: Sequence[str], root: Path | None = None) -> dict[str, dict[str, Limit]]:
    """Each hardware set's roofline per precision (`roofline.limits`: its best GEMM, or a stored row above it)."""
    from lstmstudy import roofline

    return {h: roofline.limits(h, root) for h in hardware_ids}


def roofline_table(results: pd.DataFrame, root: Path | None = None,
                   limits: dict[str, dict[str, Limit]] | None = None) -> pd.DataFrame:
    """Every speed-up row (`speedups`) with the achieved TFLOP/s of its fp32 and of its 16-bit step (the
    configuration's FLOPs over the row's median time) beside its hardware set's roofline at that type
    (`roofline.limits`, from results/roofline/ under `root`) and the share of it: a step far below its roofline waits
    on something other than arithmetic (each time step's latency, launches, casts), which 16 bits do not speed up.
    A set or type without a stored roofline leaves its cells empty. `limits`: the sets' limits, where the caller has
    them (`roofline_limits`)."""
    table = speedups(results)
    if table.empty:
        return pd.DataFrame(columns=ROOFLINE_COLUMNS)
    limits = roofline_limits(sorted(table.hardware_id.unique()), root) if limits is None else limits
    rows = []
    for r in table.itertuples(index=False):
        mine = limits.get(r.hardware_id, {})
        row = {"hardware_id": r.hardware_id, "kernel": r.kernel, "phase": r.phase, "precision": r.precision,
               "hidden": r.hidden, "timesteps": r.timesteps, "batch": r.batch, "speed-up": r.ratio,
               DEVICE_SPEEDUP: r.device_ratio,
               "roofline set by": "; ".join(f"{p}: {mine[p].by}" for p in ("fp32", r.precision) if p in mine)
               or "no roofline stored"}
        for label, precision, ms in (("fp32", "fp32", r.fp32_ms), ("16-bit", r.precision, r.low_ms)):
            achieved = r.flops / (ms / 1e3)
            limit = mine.get(precision)
            row.update({f"{label} ms": ms, f"{label} TFLOP/s": achieved / 1e12,
                        f"{label} roofline TFLOP/s": limit.flops / 1e12 if limit else np.nan,
                        f"{label} share %": 100 * limit.share(achieved) if limit else np.nan})
        rows.append(row)
    return (pd.DataFrame(rows, columns=ROOFLINE_COLUMNS)
            .sort_values(["hardware_id", "phase", "kernel", "precision", "batch", "hidden", "timesteps"])
            .reset_index(drop=True))


_COMMON = dict(timesteps=[16, 128], batches=[32], batch_sweep=[1, 8, 128], sweep_hidden=256, keras_cpu_hidden=256,
               keras_cpu_timesteps=16, features=32, precisions=list(LOW_PRECISIONS), phases=list(contract.PHASES))
#: the default grids: a GPU adds Keras over the whole heatmap grid, DeepBench's training shapes (up to hidden 4096,
#: batch 128) and the paper's block at its batch of 256, hidden 64 to 1024 and 128 or 1000 time steps (its corners
#: at H >= 512, T = 1000 decide part (ii)); a CPU has no paper block: an fp32 call at H=1024 T=1000 B=256 (2.2
#: TFLOP) takes 5-16 s at the stored CPU sets' rooflines, minutes a point
DEFAULTS = {"cpu": dict(hiddens=[64, 256, 1024], deepbench_shapes=False, paper_hiddens=[], paper_timesteps=[],
                        paper_batches=[], **_COMMON),
            "cuda": dict(hiddens=[64, 256, 1024], deepbench_shapes=True, paper_hiddens=[64, 256, 512, 1024],
                         paper_timesteps=[128, 1000], paper_batches=[256], **_COMMON)}
#: the lease: the verdict reads the AMP step's inference, fp16 over fp32, at the grid's smallest shape and at the
#: paper's sizes: the heatmap's corners, two batches of the sweep for the by-batch figure and the paper's two shapes
#: at H >= 512, every precision of torch.fused there timed in the same rounds (32 points: the AMP step's rows are
#: torch.fused's too); training, Keras (its mixed_float16 at the paper's sizes among them) and DeepBench's shapes are
#: context, measured after the lease's five claims
LEASE = Lease(overrides={"hiddens": [64, 1024], "timesteps": [16, 128], "batches": [32], "batch_sweep": [1, 128],
                         "phases": ["inference"], "deepbench_shapes": False, "paper_hiddens": [512, 1024],
                         "paper_timesteps": [1000], "paper_batches": [256]},
              kernels=frozenset({HEADLINE_KERNEL}))
_CUDA_POINTS = grid(kind="cuda", quick=False, **DEFAULTS["cuda"])
_LEASE_POINTS = [p for p in grid(kind="cuda", quick=False, **{**DEFAULTS["cuda"], **LEASE.overrides})
                 if p.kernel in LEASE.kernels]
CLAIM = Claim(
    says=(
        "Mixed precision helps an LSTM only at large hidden sizes and long sequences, and hurts at small "
        "ones."),
    figure_words="16-bit (GPU fp16, CPU bf16) speed-up {}",
    advice="**Does mixed precision pay at your sizes?** The paper found it only for large layers and long sequences.",
    number=NUMBER, name=NAME, statement=STATEMENT, seed_figure=SEED_FIGURE, rule=RULE,
    source="paper (seed 003)",
    citations=("mahorker-lstm-kernels",),
    defaults=DEFAULTS,
    grid=grid, measure=measure, verdicts=verdicts, check=check_parameters,
    # a GPU's planned seconds a point, averaged over its grid (`planned_point_s`: the H100's measured 0.5 s, and the
    # calls of the steps longer than a burst, the paper's block's at T=1000 above all)
    seconds_per_point={"cpu": 1.4, "cuda": _mean_plan(_CUDA_POINTS)},
    lease=Lease(overrides=LEASE.overrides, kernels=LEASE.kernels, seconds_per_point=_mean_plan(_LEASE_POINTS)),
)
