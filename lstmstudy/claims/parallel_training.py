"""Claim 7: on several GPUs, model parallelism (the layers as a pipeline) trains an LSTM faster than data
parallelism: 2.3x on 4 GPUs, 5.3x with bucketing.

The page: `notebooks/07_parallel_training.ipynb`.

Seed (002, slides "Performance Optimization of LSTM Training on GPU", Lin & Wu), verbatim: "Centralized
Parameter Storage" (their data parallel set-up), "DP gains some speedup on multi-GPU..." with its footnote
"Trained 8-layer LSTM with PennTree Bank dataset, with 1-4 GTX750 on single machine", "2.3x speedup with 4
GTX750 on single machine", "5.3x speedup with 4 GTX750 and bucketing on single machine", "Conclusion: MP is
better in training LSTM on multi GPU", "DP does not scale well on multi-GPU" with its footnote "Experiment
with no computation and only communication", and the table: Communication Cost High (DP) / Low (MP);
Workload Balance Balanced / "Requires insight of both ML and System"; Converge Speed Slower / Faster. The
slides give no hidden size, batch size, micro-batch count or baseline for the speed-ups; we read both as
over one GPU without bucketing.

What runs (`lstmstudy.parallel`). The same `StackedLSTM` (the seed's 8 layers by default) is trained three
ways on the same batches of real Penn Treebank sentence lengths (claim 5's plans: `pad_per_batch`,
the slides' "no bucketing" as their worked example pads, and `auto_buckets`): on one device; data parallel with
`DistributedDataParallel`; and pipelined with `torch.distributed.pipelining`'s GPipe schedule, one stage of
layers per device. On N >= 2 GPUs `lstmstudy measure --claims 07` launches `torchrun` with N NCCL processes
and times 1..N devices in interleaved rounds. On a CPU the same code runs on gloo with 2 processes as a
functional test (data parallel and the pipeline must match one device's losses and gradients); its rows
are stored `skipped`, "not measured (needs >= 2 GPUs)", never as a speed-up. On a one-GPU node the
one-device baseline is timed and the rest stored the same way. The page also prices the schemes on paper
(`lstmstudy.parallel.cost`), data parallel both by a ring all-reduce and by the slides' central parameter
store: those figures are modelled, never measured.

The rule (`RULE`) is ours, stated here before any data: per GPU set with at least 2 GPUs, at the most GPUs
it measured (N), without bucketing.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from lstmstudy import contract, data
from lstmstudy.claims import Claim
from lstmstudy.errors import ParameterError
from lstmstudy.parallel.batching import timed_plan
from lstmstudy.parameters import check_choices, check_positive_ints
from lstmstudy.rules import PART_WORDS, Outcome, Verdict, combine, holds_from, settle
from lstmstudy.shapes import LSTMShape
from lstmstudy.stats import row_ratio, with_intervals

if TYPE_CHECKING:
    from lstmstudy.sweep import SweepReport

NAME = "parallel_training"
NUMBER = "07"
STATEMENT = ("On several GPUs, model parallelism (the layers pipelined across GPUs) trains an 8-layer LSTM faster "
             "than data parallelism: 2.3x over one GPU on 4 GPUs, 5.3x with bucketing")
SEED_FIGURE = ('"2.3x speedup with 4 GTX750 on single machine"; "5.3x speedup with 4 GTX750 and bucketing on single '
               'machine"; "DP does not scale well on multi-GPU", footnoted "Experiment with no computation and only '
               'communication"; "Conclusion: MP is better in training LSTM on multi GPU" (slides, seed 002; their '
               'bold markup on the figures left out)')
SEED_MP_SPEEDUP, SEED_MP_BUCKETED, SEED_GPUS = 2.3, 5.3, 4
RULE = ("decided per GPU set with at least 2 GPUs, at the most GPUs it measured (N), without bucketing (each batch "
        "padded to its own longest sentence, as claim 5 reads the slides), on 95% intervals of tokens/s ratios "
        "formed within interleaved rounds. "
        "Part 1, model parallel beats data parallel: the pipeline's tokens/s over DDP's lies at or above 1.1. "
        "Part 2, only where N = 4 (the slides' count): the pipeline's tokens/s over one GPU's lies at or above "
        "1.6 (70% of the seed's 2.3x). Reproduced if every part holds, not reproduced if every part fails, partly "
        "otherwise; inconclusive if an undecided part could change that. The 5.3x with bucketing is reported "
        "beside it, not judged. A CPU set, or a set with one GPU, is not measured (needs >= 2 GPUs)")
MP_OVER_DP = holds_from(1.1)
MP_SPEEDUP = holds_from(1.6)

SCHEMES = {"single": "torch.single", "ddp": "torch.ddp", "pipeline": "torch.pipeline"}
KERNEL_SCHEME = {kernel: scheme for scheme, kernel in SCHEMES.items()}
#: the slides' "without bucketing", read as claim 5 reads it (their worked example pads each batch to its own
#: longest sentence), and their "with bucketing": claim 5's plans (`bucketing.PER_BATCH` and `bucketing.AUTO`,
#: named here so that this module imports without the measuring stack), so both claims time the same batches
NO_BUCKETING, BUCKETED = "pad_per_batch", "auto_buckets"
PLAN_NAMES = (NO_BUCKETING, BUCKETED)
ALL_DEVICES = "all"
NEEDS = "not measured (needs >= 2 GPUs)"


# --- the parameters ---------------------------------------------------------------------------------------

def visible_devices(kind: str) -> int:
    """GPUs torch sees on `cuda` (none where torch is not there: a page rendered from stored results shows the
    grid of a one-GPU node); CPU cores on `cpu` (gloo processes, one thread each)."""
    if kind != "cuda":
        return os.cpu_count() or 1
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()


def device_counts(devices: object, kind: str) -> list[int]:
    """The device counts to measure. `"all"`: on a GPU node 1, 2, 4, ... up to the GPUs visible (and 2 at
    least, so that a one-GPU node stores what it lacks); on a CPU 1 and 2 (the functional test). A list is a
    request, and more than is visible is an error."""
    visible = visible_devices(kind)
    if devices == ALL_DEVICES and kind == "cpu":
        return [1, 2]
    if devices == ALL_DEVICES:
        counts, k = [1], 2
        while k <= max(2, visible):
            counts.append(k)
            k *= 2
        return counts + ([visible] if visible > counts[-1] else [])
    check_positive_ints(devices=devices)
    wanted = sorted(set(devices))
    if wanted[-1] > visible and (kind == "cpu" or visible > 0):  # a machine without GPUs only plans a GPU grid
        what = "GPUs are" if kind == "cuda" else "CPU cores are"
        raise ParameterError(f"claim {NUMBER} asks for {wanted[-1]} devices but {visible} {what} visible here")
    return wanted


def check_parameters(parameters: dict) -> None:
    if parameters["devices"] != ALL_DEVICES:
        check_positive_ints(devices=parameters["devices"])
    check_positive_ints(**{k: [parameters[k]] for k in ("layers", "hidden", "features", "batch_size",
                                                         "micro_batches")})
    check_choices("plans", parameters["plans"], data.PLANS)
    data.check_corpus(parameters["corpus"])
    if parameters["sample_batches"] != "all":
        check_positive_ints(sample_batches=[parameters["sample_batches"]])
    if parameters["batch_size"] % parameters["micro_batches"]:
        raise ParameterError(f"parameter 'batch_size' ({parameters['batch_size']}) must split into "
                             f"'micro_batches' ({parameters['micro_batches']}) equal micro-batches")


def _check_counts(counts: Sequence[int], layers: int, batch_size: int) -> None:
    for k in counts:
        if k > layers or batch_size % k:
            raise ParameterError(f"{k} devices need at least {k} layers (one pipeline stage each) and a batch "
                                 f"that splits into {k} equal shards; got {layers} layers, batch {batch_size}")


def grid(*, kind: str, quick: bool, devices: object, layers: int, hidden: int, features: int, batch_size: int,
         micro_batches: int, plans: Sequence[str], corpus: str, sample_batches: int | str,
         seed: int = 0) -> list[contract.Point]:
    """Per device count and plan: one device's run for 1, DDP and the pipeline for more. `quick`: 2 layers of
    16 units, batches of 8 in 2 micro-batches, 2 sampled batches: a smoke run."""
    if quick:
        layers, hidden, features, batch_size, micro_batches = 2, min(hidden, 16), min(features, 8), 8, 2
        sample_batches = 2
    counts = device_counts(devices, kind)
    if quick:
        counts = [k for k in counts if k <= 2]
    _check_counts(counts, layers, batch_size)
    points = []
    for plan_name in plans:
        config = {"plan": plan_name, "corpus": corpus, "seed": seed, "batch_size": batch_size,
                  "sample_batches": sample_batches}
        timed = timed_plan(config)
        longest = max(timed.widths)
        shape = LSTMShape(batch=batch_size, timesteps=longest, features=features, hidden=hidden, layers=layers)
        config.update(sample_real_steps=timed.real_steps, sample_padded_steps=timed.padded_steps,
                      timed_batches=timed.n_batches, micro_batches=micro_batches)
        for k in counts:
            for scheme in (["single"] if k == 1 else ["ddp", "pipeline"]):
                points.append(contract.Point(SCHEMES[scheme], shape, phase="train",
                                             config={**config, "scheme": scheme, "devices": k}))
    return points


# --- measuring -------------------------------------------------------------------------------------------

def measure(points: list[contract.Point], *, device: str, min_time: float, quick: bool = False,
            **sweep_options: object) -> list[SweepReport]:
    """Every point through `sweep.run` with the torchrun launch (`lstmstudy.protocols.torchrun`): one run for
    every point this machine can run, the rest stored `skipped` with what they need. Each timed call trains on
    every timed batch once, so one warm-up round and a fixed number of rounds replace `min_time`."""
    from lstmstudy import sweep
    from lstmstudy.protocols import torchrun

    launch = torchrun.Launch(needs=NEEDS, visible=visible_devices, quick=quick,
                             seconds_per_point=CLAIM.seconds_per_point,
                             progress=bool(sweep_options.get("progress", True)))
    return [sweep.run(NAME, points, launch, device=device, **sweep_options)]


# --- the analysis ----------------------------------------------------------------------------------------

def _with_config(frame: pd.DataFrame, status: str = "ok") -> pd.DataFrame:
    rows = frame[frame.status == status].copy() if not frame.empty else frame.copy()
    if rows.empty:
        return rows
    cfg = rows.config.map(json.loads)
    for key in ("scheme", "devices", "plan", "micro_batches", "sample_real_steps", "timed_batches"):
        rows[key] = cfg.map(lambda c, key=key: c.get(key))
    return rows


def throughput(frame: pd.DataFrame) -> pd.DataFrame:
    """Per `ok` row: seconds per training step and real tokens per second, each with its 95% interval."""
    ok = _with_config(frame)
    cols = ["hardware_id", "scheme", "devices", "plan", "layers", "hidden", "batch", "step_ms", "step_lo_ms",
            "step_hi_ms", "tokens_per_s", "tokens_lo", "tokens_hi"]
    if ok.empty:
        return pd.DataFrame(columns=cols)
    ok["step_ms"] = ok.median_s / ok.timed_batches * 1e3
    ok = with_intervals(ok)
    ok["step_lo_ms"] = ok.ci_low_s / ok.timed_batches * 1e3
    ok["step_hi_ms"] = ok.ci_high_s / ok.timed_batches * 1e3
    ok["tokens_per_s"] = ok.sample_real_steps / ok.median_s
    ok["tokens_lo"] = ok.sample_real_steps / ok.ci_high_s
    ok["tokens_hi"] = ok.sample_real_steps / ok.ci_low_s
    return ok[cols].sort_values(["hardware_id", "plan", "devices", "scheme"]).reset_index(drop=True)


def _tokens_ratio(fast, slow) -> tuple[float, float, float]:
    """`fast`'s tokens/s over `slow`'s, with its interval (time ratio within rounds, times the tokens' ratio)."""
    scale = fast.sample_real_steps / slow.sample_real_steps
    return tuple(value * scale for value in row_ratio(slow, fast))


def speedups(frame: pd.DataFrame) -> pd.DataFrame:
    """Every scheme's tokens/s over one device's without bucketing (the slides' baseline), per GPU set."""
    ok = _with_config(frame)
    cols = ["hardware_id", "scheme", "devices", "plan", "speedup", "speedup_lo", "speedup_hi"]
    rows = []
    for hardware_id, part in ok.groupby("hardware_id", sort=True) if not ok.empty else []:
        base = part[(part.scheme == "single") & (part.plan == NO_BUCKETING)]
        if base.empty:
            continue
        base = base.sort_values("created_at").iloc[-1]
        for row in part.itertuples():
            ratio, lo, hi = _tokens_ratio(row, base)
            rows.append({"hardware_id": hardware_id, "scheme": row.scheme, "devices": row.devices, "plan": row.plan,
                         "speedup": ratio, "speedup_lo": lo, "speedup_hi": hi})
    return pd.DataFrame(rows, columns=cols).sort_values(["hardware_id", "plan", "devices", "scheme"]
                                                         ).reset_index(drop=True)


def functional_tests(frame: pd.DataFrame) -> pd.DataFrame:
    """What each set's runs said about correctness: the equivalence check of its stored rows, and why a row
    was not timed (its status and reason)."""
    if frame.empty:
        return pd.DataFrame(columns=["hardware_id", "status", "reason", "rows"])
    reasons = frame.error.where(frame.status != "ok", frame.observed_detail.map(
        lambda d: json.loads(d).get("check", "") if d else ""))
    table = frame.assign(reason=reasons).groupby(["hardware_id", "status", "reason"]).size().rename("rows")
    return table.reset_index()


def _row(ok: pd.DataFrame, scheme: str, devices: int, plan: str):
    found = ok[(ok.scheme == scheme) & (ok.devices == devices) & (ok.plan == plan)]
    return found.sort_values("created_at").iloc[-1] if not found.empty else None


def _interval(value: float, lo: float, hi: float) -> str:
    return f"{value:.2f}x (95% interval {lo:.2f}-{hi:.2f})"


def _verdict_for(hardware_id: str, frame: pd.DataFrame) -> Verdict:
    ok = _with_config(frame)
    multi = ok[ok.devices >= 2] if not ok.empty else ok
    if not hardware_id.startswith("cuda-") or multi.empty:
        reason = frame.error[frame.status == "skipped"]
        why = reason.iloc[-1] if not reason.empty else "no timing on 2 or more GPUs is stored"
        return Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, why if why.startswith(NEEDS[:-1])
                       else f"{NEEDS}: {why}", Outcome.NOT_MEASURED, RULE)
    n = int(multi.devices.max())
    ddp, pipe, single = (_row(ok, s, d, NO_BUCKETING) for s, d in (("ddp", n), ("pipeline", n), ("single", 1)))
    if ddp is None or pipe is None or single is None:
        return Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None,
                       f"not measured: DDP, pipeline and one-device timings without bucketing are needed at {n} GPUs",
                       Outcome.NOT_MEASURED, RULE)
    over_ddp = _tokens_ratio(pipe, ddp)
    over_one = _tokens_ratio(pipe, single)
    parts = [MP_OVER_DP.possible(over_ddp[1], over_ddp[2])]
    text = (f"at {n} GPUs without bucketing the pipeline trains {_interval(*over_ddp)} the tokens/s of DDP "
            f"(part 1 {PART_WORDS.get(settle(parts[0]), settle(parts[0]).value)}) and {_interval(*over_one)} one "
            f"GPU's")
    if n == SEED_GPUS:
        parts.append(MP_SPEEDUP.possible(over_one[1], over_one[2]))
        text += f" (part 2 {PART_WORDS.get(settle(parts[1]), settle(parts[1]).value)})"
    ddp_one = _tokens_ratio(ddp, single)
    text += f"; DDP {_interval(*ddp_one)} one GPU's"
    bucketed = _row(ok, "pipeline", n, BUCKETED)
    if bucketed is not None:
        text += f"; pipeline with auto buckets {_interval(*_tokens_ratio(bucketed, single))} (not judged)"
    outcome = settle(combine(parts))
    return Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, float(over_ddp[0]), text, outcome, RULE,
                   float(over_ddp[1]), float(over_ddp[2]))


def verdicts(frame: pd.DataFrame) -> list[Verdict]:
    """One verdict per hardware set (see `RULE`): CPU sets and one-GPU sets are not measured."""
    if frame.empty:
        return []
    return [_verdict_for(h, frame[frame.hardware_id == h]) for h in sorted(frame.hardware_id.unique())]


_COMMON = dict(devices=ALL_DEVICES, plans=list(PLAN_NAMES), corpus="ptb-valid", layers=8)
CLAIM = Claim(
    says=(
        "Training an 8-layer LSTM on 1-4 GPUs, model parallelism (layers pipelined across GPUs) beats "
        "data parallelism: 2.3x on 4 GPUs, 5.3x with bucketing."),
    number=NUMBER, name=NAME, statement=STATEMENT, seed_figure=SEED_FIGURE, rule=RULE,
    source="slides (seed 002); real Penn Treebank sentence lengths",
    citations=("lin-wu-lstm-slides", "marcus-ptb", "mikolov-rnnlm"),
    # a CPU only runs the functional test: a sample of 4 batches of a narrow model; a GPU whole epochs of the
    # valid split (52 full batches of 64) at the width of a PTB language model
    defaults={"cpu": dict(hidden=64, features=32, batch_size=32, micro_batches=4, sample_batches=4, **_COMMON),
              "cuda": dict(hidden=512, features=256, batch_size=64, micro_batches=8, sample_batches="all", **_COMMON)},
    grid=grid, measure=measure, verdicts=verdicts, check=check_parameters,
    # one torchrun start (about 10 s) spread over the points; on a one-GPU node only the 2 one-device points run
    seconds_per_point={"cpu": 5.0, "cuda": 5.0},
)


# --- the model on paper ------------------------------------------------------------------------------------

#: the measured data parallel scheme, as the page names it
DDP = "data parallel (DDP)"


def cost_model(parameters: dict, timesteps: int):
    """The cost model's `Model` for a grid's sizes (`lstmstudy.parallel.cost`) at `timesteps` per batch."""
    from lstmstudy.parallel import cost

    return cost.Model(layers=parameters["layers"], hidden=parameters["hidden"], features=parameters["features"],
                      batch=parameters["batch_size"], timesteps=timesteps)


def model_timesteps(parameters: dict) -> int:
    """The padded width the cost model gives every batch: the mean width of the grid's batches without bucketing
    (each padded to its own longest sentence), rounded."""
    plan = data.plans(parameters["corpus"], parameters["batch_size"])[NO_BUCKETING]
    return round(sum(plan.widths) / len(plan.widths))


def measured_scaling(frame: pd.DataFrame) -> pd.DataFrame:
    """`speedups` in `scaling_lines`' layout: one panel per GPU set and plan."""
    table = speedups(frame)
    if table.empty:
        return table.assign(panel=[])
    names = {"single": "one device", "ddp": DDP, "pipeline": "pipeline"}
    return table.assign(panel=table.hardware_id + ", " + table.plan, scheme=table.scheme.map(names))


def model_beside_measured(predicted: pd.DataFrame, measured: pd.DataFrame, panel: str) -> pd.DataFrame:
    """Each measured speed-up without bucketing (`measured_scaling`) beside the modelled one of `panel`
    (`cost.table`): DDP beside the ring all-reduce, since DDP all-reduces and keeps no parameter store."""
    from lstmstudy.parallel import cost

    model = predicted[predicted.panel == panel].replace({"scheme": {cost.RING: DDP}})
    ours = measured[measured.plan == NO_BUCKETING][["hardware_id", "scheme", "devices", "speedup"]]
    return ours.merge(model[["scheme", "devices", "speedup"]].rename(columns={"speedup": "modelled speedup"}),
                      on=["scheme", "devices"], how="left")
