"""Each claim's own rule applied to GPU measurements published by others (`lstmstudy.published`).

Published evidence is a kind of its own: measured by others, on their GPUs and software, by their method. Its
verdicts carry `hardware_id` `published:<source>/<card>` (`claims.PUBLISHED_PREFIX`), so `Verdict.evidence` is
"published" and neither `Verdict.counts` nor the ledger's counts ever add them to this study's reproductions.

Published evidence is judged only where it measured the mechanism the claim names; where the data fit the rule,
the rule's own bands decide on the published figure ("point only"): no source repeats its measurement the
`MIN_REPEATS` times a 95% interval needs (DeepBench and the issue threads publish one figure, Woolf's runs have
three epochs after the first, whose range is shown and called a range). Where the rule cannot decide (one batch
size, no framework on the same GPU, a model the claim did not name, a precision path without the casts or the
16-bit math the claim is about), the verdict is `CONTEXT` and its text says in one line what the data measured and
what they lack.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from lstmstudy import published
from lstmstudy.claims import cpu_vs_gpu_batch as c02
from lstmstudy.claims import cudnn_fallback as c01
from lstmstudy.claims import frameworks_vs_baseline as c04
from lstmstudy.claims import mixed_precision as c03
from lstmstudy.claims import parallel_training as c07
from lstmstudy.rules import PUBLISHED_PREFIX, Outcome, Verdict
from lstmstudy.shapes import LSTMShape
from lstmstudy.stats import geomean, with_intervals

POINT_ONLY = "point only: the source publishes one figure, no repeat to form an interval from"
#: the fewest repeats of a measurement that can form a 95% interval: a bootstrap over fewer returns little more than
#: their extreme values
MIN_REPEATS = 5
#: DeepBench's phases as the study's: its forward call stands for inference, its total for a training step
DEEPBENCH_PHASES = {"inference": "forward_ms", "train": "total_ms"}
_PHASE_WORDS = {"inference": "inference (DeepBench's forward call)", "train": "training (the sheet's total)"}
#: the low precision of each DeepBench card that has one, and what it is
DEEPBENCH_LOW = {"V100": ("fp16_mixed", "FP16 inputs, mixed math on Tensor Cores"),
                 "P100": ("pseudo_fp16", "pseudo-FP16: 16-bit inputs, 32-bit math, no Tensor Cores")}
#: claim 3's mechanisms (casts that cost at small sizes, 16-bit math that pays at large ones) each card's sheet lacks
_DEEPBENCH_LACKS = {
    "V100": ("16-bit inputs on Tensor Cores with no cast anywhere",
             "the casts whose small-size cost part (i) is about, and the rule is never decided on part (ii) alone"),
    "P100": ("16-bit inputs with 32-bit math", "the casts of part (i) or the 16-bit math that would pay in part (ii)"),
}


def hardware_id(source: str, what: str) -> str:
    """The `hardware_id` of a published verdict: `published:deepbench/V100`."""
    return f"{PUBLISHED_PREFIX}{source}/{what}"


def sources_of(hardware: str) -> list[str]:
    """The source keys of a published verdict's `hardware_id` (`deepbench`; a ratio across two logs names both,
    joined by '+')."""
    return hardware.removeprefix(PUBLISHED_PREFIX).split("/", 1)[0].split("+")


# --- DeepBench --------------------------------------------------------------------------------------------

def deepbench_speedups() -> pd.DataFrame:
    """Per card with a low precision, shape and phase: fp32 time / low-precision time (DeepBench's training
    sheets; the forward call as inference, the total as a training step), with the shape's FLOPs (input size =
    hidden size, as DeepBench's problems have it)."""
    table = published.load("deepbench_lstm")
    rows = []
    for card, (low, meaning) in DEEPBENCH_LOW.items():
        mine = table[(table.card == card) & (table.phase == "train")]
        pairs = mine[mine.precision == "fp32"].merge(mine[mine.precision == low], on=["hidden", "batch", "timesteps"],
                                                     suffixes=("_fp32", "_low"))
        for r in pairs.to_dict("records"):
            shape = LSTMShape(batch=r["batch"], timesteps=r["timesteps"], features=r["hidden"], hidden=r["hidden"])
            for phase, column in DEEPBENCH_PHASES.items():
                fp32, other = r[f"{column}_fp32"], r[f"{column}_low"]
                if not (np.isnan(fp32) or np.isnan(other)):  # the P100's pseudo-FP16 sheet has no total
                    rows.append({"card": card, "gpu": r["gpu_fp32"], "precision": low, "meaning": meaning,
                                 "phase": phase, "hidden": r["hidden"], "batch": r["batch"],
                                 "timesteps": r["timesteps"], "fp32_ms": fp32, "low_ms": other,
                                 "speedup": fp32 / other, "flops": shape.flops(phase)})
    return pd.DataFrame(rows)


def deepbench_range(speedups: pd.DataFrame, card: str, phase: str) -> str:
    """'1.12-4.69x': the lowest and highest speed-up of one card over DeepBench's shapes in one phase, the one
    estimator the verdict's text and the published page (`deepbench_glue`) both print."""
    part = speedups[(speedups.card == card) & (speedups.phase == phase)].speedup
    return f"{part.min():.2f}-{part.max():.2f}x"


def deepbench_glue(speedups: pd.DataFrame) -> dict[str, str]:
    """What the published page glues: each card's `deepbench_range` per phase it has, by key
    (`published_v100_inference_range`), so the page prints the ledger's figures and computes none of its own."""
    pairs = speedups[["card", "phase"]].drop_duplicates().itertuples(index=False)
    return {f"published_{card.lower()}_{phase}_range": deepbench_range(speedups, card, phase) for card, phase in pairs}


def _context(measured: str, lacks: str) -> str:
    """Why a published figure is context for claim 3, in one line: what it measured, which mechanism it lacks."""
    return f"context only: it measured {measured}, not {lacks}"


_GNMT_CONTEXT = _context("mixed precision, casts included, on one large model at one size",
                         "the small sizes where the claim puts the casts' cost")
_P100_THREAD_CONTEXT = _context("FP16 inputs that cuDNN computed in FP32 math (the thread says so), no Tensor Cores",
                                "the casts of part (i) or the 16-bit math of part (ii)")


def _mixed_precision() -> list[Verdict]:
    """DeepBench's cards with a low precision as context for claim 3 (its sheets take 16-bit inputs, so they time no
    casts): the inference speed-ups (its forward call) at the shapes with the fewest and the most FLOPs and over
    every shape, the training totals, where a sheet has them, beside them."""
    table, out = deepbench_speedups(), []
    for card, part in table.groupby("card", sort=False):
        ends = {}
        for phase, by_phase in part.groupby("phase"):
            ordered = by_phase.sort_values("flops", kind="stable")
            ends[phase] = (ordered.iloc[0], ordered.iloc[-1])
        s_row, l_row = ends[c03.DECIDING_PHASE]
        beside = ""
        if "train" in ends:
            small_t, large_t = ends["train"]
            beside = (f"; {_PHASE_WORDS['train']}, beside it: {small_t.speedup:.2f}x and {large_t.speedup:.2f}x, "
                      f"range {deepbench_range(table, card, 'train')}")
        text = (f"{_PHASE_WORDS[c03.DECIDING_PHASE]}, {part.precision.iloc[0]} ({part.meaning.iloc[0]}) over fp32, "
                f"{part.gpu.iloc[0]}: {s_row.speedup:.2f}x at the smallest shape (H={s_row.hidden} T={s_row.timesteps} "
                f"B={s_row.batch}), {l_row.speedup:.2f}x at the largest (H={l_row.hidden} T={l_row.timesteps} "
                f"B={l_row.batch}); range over its {(part.phase == c03.DECIDING_PHASE).sum()} shapes "
                f"{deepbench_range(table, card, c03.DECIDING_PHASE)}{beside}; {POINT_ONLY}; training sheets, cuDNN "
                f"alone; {_context(*_DEEPBENCH_LACKS[card])}")
        out.append(Verdict(c03.NAME, c03.STATEMENT, hardware_id("deepbench", card), c03.SEED_FIGURE, l_row.speedup,
                           text, Outcome.CONTEXT, c03.RULE))
    return out + _gnmt_amp() + [_p100_thread()]


def _gnmt_amp() -> list[Verdict]:
    """GNMT's mixed precision over FP32/TF32 on one GPU: the casts and the 16-bit math on a whole 8-layer LSTM
    model at one size, so the rule's small end, where the claim puts the casts' cost, is not there; context."""
    table = published.gnmt_training()
    out = []
    for row in table[table.gpus == 1].itertuples():
        text = (f"GNMT v2 training, {row.framework} ({row.container}), {row.gpu}, 1 GPU, 128 sequences: mixed "
                f"precision {row.mixed_tok_s:,} against {row.baseline} {row.baseline_tok_s:,} tokens/s, printed "
                f"speed-up {row.speedup_printed:g}x; {POINT_ONLY}; {_GNMT_CONTEXT}")
        out.append(Verdict(c03.NAME, c03.STATEMENT, hardware_id(row.source, f"{row.gpu} {row.baseline}"),
                           c03.SEED_FIGURE, float(row.speedup_printed), text, Outcome.CONTEXT, c03.RULE))
    return out


def p100_thread() -> pd.DataFrame:
    """pytorch/pytorch#1539: one cuDNN LSTM's forward + backward seconds on a P100 in FP32 and FP16, per cuDNN
    version and batch size, and FP32 / FP16 (below 1: FP16 is slower)."""
    figures = pd.DataFrame(published.cited()["pytorch-1539"]["figures"])
    figures["fp32_s"] = figures.fp32_fwd_s + figures.fp32_bwd_s
    figures["fp16_s"] = figures.fp16_fwd_s + figures.fp16_bwd_s
    figures["speedup"] = figures.fp32_s / figures.fp16_s
    return figures[["gpu", "cudnn", "batch_size", "fp32_s", "fp16_s", "speedup"]]


def _p100_thread() -> Verdict:
    """pytorch/pytorch#1539 as context for claim 3: FP16 inputs that cuDNN computed in FP32, on a GPU without Tensor
    Cores, so neither the casts nor the 16-bit math the claim is about."""
    table = p100_thread()
    text = (f"FP32 / FP16 time of one cuDNN LSTM's forward and backward in PyTorch, P100, batch 32-128, cuDNN 6.0: "
            f"{table.speedup.min():.2f}-{table.speedup.max():.2f}x, FP16 slower at every batch size; {POINT_ONLY}; "
            f"{_P100_THREAD_CONTEXT}")
    return Verdict(c03.NAME, c03.STATEMENT, hardware_id("pytorch-1539", "P100"), c03.SEED_FIGURE,
                   geomean(table.speedup), text, Outcome.CONTEXT, c03.RULE)


#: our precision -> DeepBench's V100 sheet beside it
_V100_PRECISION = {"fp32": "fp32", "fp16": "fp16_mixed"}


def beside_deepbench(results: pd.DataFrame, kernel: str, phase: str) -> pd.DataFrame:
    """This study's GPU rows of `kernel` in `phase` at DeepBench's shapes (input size = hidden size) beside the
    V100's published time of the same shape and precision: the training total for `train`, the forward call for
    `inference`. Empty until a GPU set holds such rows. The methods differ (DeepBench skips the input GEMM and
    queues 100 calls; we time whole calls in rounds), and so do the GPUs: the ratio is context, not a verdict."""
    columns = ["hardware_id", "precision", "hidden", "batch", "timesteps", "ours_ms", "ours_lo_ms", "ours_hi_ms",
               "v100_ms", "ours_over_v100"]
    table = published.load("deepbench_lstm")
    v100 = table[(table.card == "V100")].set_index(["precision", "hidden", "batch", "timesteps"])
    column = DEEPBENCH_PHASES[phase]
    rows = []
    if not results.empty:
        ok = results[(results.status == "ok") & results.hardware_id.str.startswith("cuda-") & (results.kernel == kernel)
                     & (results.phase == phase) & (results.features == results.hidden)]
        for r in with_intervals(ok).itertuples():
            key = (_V100_PRECISION.get(r.precision, ""), r.hidden, r.batch, r.timesteps)
            if key in v100.index:
                theirs = float(v100.loc[key, column])
                rows.append({"hardware_id": r.hardware_id, "precision": r.precision, "hidden": r.hidden,
                             "batch": r.batch, "timesteps": r.timesteps, "ours_ms": r.median_s * 1e3,
                             "ours_lo_ms": r.ci_low_s * 1e3, "ours_hi_ms": r.ci_high_s * 1e3, "v100_ms": theirs,
                             "ours_over_v100": r.median_s * 1e3 / theirs})
    return pd.DataFrame(rows, columns=columns)


def baseline_beside_paper() -> pd.DataFrame:
    """DeepBench's raw cuDNN forward time on the V100 at the shapes claim 4's GPU grid shares with DeepBench
    (input size = hidden size): the kind of baseline the paper's Table 2 compares frameworks against."""
    table = published.load("deepbench_lstm")
    v100 = table[(table.card == "V100") & (table.precision == "fp32")]
    grid = c04.CLAIM.parameters("cuda")
    mine = v100[v100.hidden.isin(grid["hiddens"]) & v100.batch.isin(grid["batches"])
                & v100.timesteps.isin(grid["timesteps"])]
    return mine[["gpu", "cuda", "cudnn", "hidden", "batch", "timesteps", "forward_ms"]].reset_index(drop=True)


def _frameworks_vs_baseline() -> list[Verdict]:
    rows = baseline_beside_paper()
    shown = "; ".join(f"H={r.hidden} B={r.batch} T={r.timesteps}: {r.forward_ms:.3f} ms" for r in rows.itertuples())
    text = (f"DeepBench's raw cuDNN forward on the {rows.gpu.iloc[0]} (CUDA {rows.cuda.iloc[0]}, cuDNN "
            f"{rows.cudnn.iloc[0]}) at the shapes claim 4's GPU grid shares with it: {shown}. The paper's baseline "
            f"ran on a TITAN V; no PyTorch or TensorFlow figure was published on this V100, so no ratio and no "
            f"verdict: the baseline alone, {POINT_ONLY}")
    return [Verdict(c04.NAME, c04.STATEMENT, hardware_id("deepbench", "V100"), c04.SEED_FIGURE, None, text,
                    Outcome.CONTEXT, c04.RULE)]


# --- Max Woolf's IMDb BiLSTM logs -------------------------------------------------------------------------

def woolf_runs() -> pd.DataFrame:
    """One row per run of Woolf's logs: its epochs after the first (epoch 0 holds the start-up) as the samples
    of the run's median epoch time."""
    table = published.load("woolf_imdb_bilstm")
    table = table[table.epoch > 0]
    keys = ["source", "run", "device", "device_kind", "backend", "lstm_kernel", "tensorflow_build", "vcpus", "batch"]
    out = (table.groupby(keys, dropna=False, sort=False).epoch_s.agg(list).rename("epochs_s").reset_index())
    out["median_s"] = out.epochs_s.map(np.median)
    return out


def _ratio(slow: list[float], fast: list[float]) -> tuple[float, float, float]:
    """Median epoch time over median epoch time, and the lowest and highest ratio of one run's epoch to the other's:
    the range of the pairwise ratios, since a run's few epochs form no 95% interval (`MIN_REPEATS`)."""
    slow_s, fast_s = np.asarray(slow, dtype=float), np.asarray(fast, dtype=float)
    return (float(np.median(slow_s) / np.median(fast_s)), float(slow_s.min() / fast_s.max()),
            float(slow_s.max() / fast_s.min()))


def _few_repeats(epochs: Iterable[int]) -> str:
    """The words for a ratio of Woolf's runs, given how many epochs each run has: a point, since its epochs are too
    few to form a 95% interval (the range beside it is named as the pairwise ratios' where it is printed)."""
    counts = " or ".join(str(n) for n in sorted(set(epochs)))
    return f"point only: {counts} epochs per run, too few (under {MIN_REPEATS}) to form a 95% interval"


def woolf_fallback() -> pd.DataFrame:
    """The K80's generic-LSTM epochs (July 2017) over its CuDNNLSTM epochs (November 2017): a fallback
    ratio that mixes the kernel with a change of TensorFlow version between the two runs."""
    runs = woolf_runs()
    gpu = runs[(runs.device_kind == "gpu") & (runs.backend == "tensorflow")]
    generic = gpu[gpu.lstm_kernel == "generic"].iloc[0]
    cudnn = gpu[(gpu.lstm_kernel == "cudnn") & (gpu.device == generic.device)].iloc[0]
    ratio, low, high = _ratio(generic.epochs_s, cudnn.epochs_s)
    return pd.DataFrame([{"device": generic.device, "generic_source": generic.source, "generic_s": generic.median_s,
                          "cudnn_source": cudnn.source, "cudnn_s": cudnn.median_s, "slowdown": ratio,
                          "pairwise_min": low, "pairwise_max": high, "generic_epochs_s": generic.epochs_s,
                          "cudnn_epochs_s": cudnn.epochs_s}])


def _seconds(epochs: Sequence[float]) -> str:
    """A run's epoch times as the text prints them: with three epochs, the points themselves say more than a range."""
    return ", ".join(f"{s:.1f}" for s in epochs) + " s"


def _fallback() -> list[Verdict]:
    """Woolf's K80 fallback ratio judged on its point (`_few_repeats`), then the issue threads'."""
    row = woolf_fallback().iloc[0]
    text = (f"{row.slowdown:.2f}x (median epoch, Keras's generic LSTM {row.generic_s:.1f} s over CuDNNLSTM "
            f"{row.cudnn_s:.1f} s, {row['device']}, IMDb BiLSTM at batch 32; epochs 1-3 of each run: generic "
            f"{_seconds(row.generic_epochs_s)}, CuDNNLSTM {_seconds(row.cudnn_epochs_s)}; their pairwise ratios range "
            f"{row.pairwise_min:.2f}-{row.pairwise_max:.2f}x). The two runs used two TensorFlow versions (July and "
            f"November 2017): the ratio mixes the kernel with the version, whose CPU epochs also fell from about "
            f"130-160 s to about 80 s; {_few_repeats(map(len, (row.generic_epochs_s, row.cudnn_epochs_s)))}")
    out = [Verdict(c01.NAME, c01.STATEMENT, hardware_id("woolf-2017-07+woolf-2017-11", "K80"), c01.SEED_FIGURE,
                   row.slowdown, text, c01.BANDS.decide(row.slowdown, row.slowdown), c01.RULE)]
    return out + [_thread_fallback(key, slowdown, gpu, said)
                  for key, slowdown, gpu, said in _THREAD_FALLBACKS]


def _figure(key: str, printed: str) -> float:
    """A figure quoted from a cited source, found by the words the source printed (`cited.json`)."""
    return float(next(f["value"] for f in published.cited()[key]["figures"] if f["printed"] == printed))


#: issue threads that time one Keras LSTM both ways: (key, slowdown as printed, GPU, what they timed)
_THREAD_FALLBACKS = (
    ("tf-38236", "~25 times longer", "RTX 2080", "recurrent_dropout=0.1 against 0.0, one model.fit, TensorFlow 2.1"),
    ("keras-8135", "factor of 7.8", "GTX 1080Ti", "Keras's generic LSTM against CuDNNLSTM at batch 300, one epoch, "
                                                  "TensorFlow 1.5 nightly"),
)


def _thread_fallback(key: str, printed: str, gpu: str, said: str) -> Verdict:
    slowdown = _figure(key, printed)
    text = f"{slowdown:g}x (printed \"{printed}\"; {said}, {gpu}); {POINT_ONLY}"
    return Verdict(c01.NAME, c01.STATEMENT, hardware_id(key, gpu), c01.SEED_FIGURE, slowdown, text,
                   c01.BANDS.decide(slowdown, slowdown), c01.RULE)


def woolf_cpu_vs_gpu() -> pd.DataFrame:
    """Each GPU run of Woolf's TensorFlow logs against each CPU run of the same month: GPU / CPU median epoch
    time at batch 32 (above 1: the CPU is faster, on this point), with the range of the epochs' pairwise ratios."""
    runs = woolf_runs()
    runs = runs[runs.backend == "tensorflow"]
    rows = []
    for source, part in runs.groupby("source", sort=False):
        cpus = part[part.device_kind == "cpu"]
        for gpu in part[part.device_kind == "gpu"].itertuples():
            for cpu in cpus.itertuples():
                ratio, low, high = _ratio(gpu.epochs_s, cpu.epochs_s)
                faster = "CPU" if ratio > 1 else "GPU" if ratio < 1 else "neither"
                build = f" ({cpu.tensorflow_build} TensorFlow)" if isinstance(cpu.tensorflow_build, str) else ""
                rows.append({"source": source, "gpu": gpu.device, "lstm_kernel": gpu.lstm_kernel,
                             "cpu": f"{cpu.device}{build}", "batch": gpu.batch, "gpu_s": gpu.median_s,
                             "cpu_s": cpu.median_s, "gpu_over_cpu": ratio, "pairwise_min": low,
                             "pairwise_max": high, "faster": faster, "epochs": (len(gpu.epochs_s), len(cpu.epochs_s))})
    return pd.DataFrame(rows)


def _cpu_vs_gpu() -> list[Verdict]:
    table, out = woolf_cpu_vs_gpu(), []
    for (source, gpu, kernel), part in table.groupby(["source", "gpu", "lstm_kernel"], sort=False):
        sides = sorted(part.faster.unique())
        side = f"the {sides[0]} is faster against every CPU run" if len(sides) == 1 else "mixed: " + ", ".join(sides)
        repeats = _few_repeats(n for pair in part.epochs for n in pair)
        text = (f"{gpu} ({'CuDNNLSTM' if kernel == 'cudnn' else 'Keras generic LSTM'}) over {len(part)} CPU runs, "
                f"median epoch GPU/CPU {part.gpu_over_cpu.min():.2f}-{part.gpu_over_cpu.max():.2f} (their epochs' "
                f"pairwise ratios range {part.pairwise_min.min():.2f}-{part.pairwise_max.max():.2f}) at batch 32: "
                f"{side}; {repeats}. The logs have one batch size, so they cannot test the crossover the claim states")
        out.append(Verdict(c02.NAME, c02.STATEMENT, hardware_id(source, f"{gpu.removeprefix('NVIDIA ')} {kernel}"),
                           c02.SEED_FIGURE, geomean(part.gpu_over_cpu), text, Outcome.CONTEXT,
                           c02.RULE))
    return out + [_titan_thread()]


def titan_thread() -> pd.DataFrame:
    """keras-team/keras#8885's seconds per epoch of the IMDb BiLSTM, Keras 2.1.2's generic LSTM, per backend and
    host: each GPU's over the host CPU's (above 1: the CPU is faster)."""
    figures = pd.DataFrame(published.cited()["keras-8885"]["figures"])
    rows = []
    for (backend, host), part in figures.groupby(["backend", "host_cpu"], sort=False):
        cpu = part[part.device == "CPU"].value.iloc[0]
        for gpu in part[part.device != "CPU"].itertuples():
            rows.append({"backend": backend, "host": host, "gpu": gpu.device, "gpu_s": gpu.value, "cpu_s": cpu,
                         "gpu_over_cpu": gpu.value / cpu})
    return pd.DataFrame(rows)


def _titan_thread() -> Verdict:
    tf = titan_thread()
    tf = tf[tf.backend.str.startswith("Tensorflow")]
    text = (f"Keras's generic LSTM on TensorFlow 1.5, IMDb BiLSTM, seconds per epoch: GPU/CPU "
            f"{tf.gpu_over_cpu.min():.2f}-{tf.gpu_over_cpu.max():.2f} over a TITAN V and a TITAN Xp on two Xeon hosts: "
            f"the CPU is faster on every pair at the example's one batch size, so the crossover cannot be tested "
            f"(on CNTK both GPUs are faster); {POINT_ONLY}")
    return Verdict(c02.NAME, c02.STATEMENT, hardware_id("keras-8885", "TITAN V and TITAN Xp generic"),
                   c02.SEED_FIGURE, geomean(tf.gpu_over_cpu), text, Outcome.CONTEXT, c02.RULE)


# --- NVIDIA's GNMT: data parallel over 1-8 GPUs -----------------------------------------------------------

def _parallel() -> list[Verdict]:
    """GNMT's throughput over GPUs, each GPU with its own 128 sequences (data parallel): the data-parallel half
    of claim 7. No published source trains an LSTM model-parallel on the same GPUs: no ratio, no verdict."""
    table = published.gnmt_training()
    out = []
    for (source, gpu), part in table.groupby(["source", "gpu"], sort=False):
        most = part[part.gpus == part.gpus.max()].iloc[0]
        scaled = ", ".join(f"{r.gpus} GPUs {r.scaling_baseline_printed:g}x / {r.scaling_mixed_printed:g}x"
                           for r in part[part.gpus > 1].itertuples())
        text = (f"GNMT v2 (8-layer LSTM) data-parallel training, {most.framework}, {gpu}: throughput over one GPU, "
                f"{most.baseline} / mixed precision, as printed ({most.scaling} scaling in the README's words, 128 "
                f"sequences per GPU): {scaled}. No published model-parallel (pipelined) figure on the same GPUs, so "
                f"the claim's comparison cannot be formed; {POINT_ONLY}")
        out.append(Verdict(c07.NAME, c07.STATEMENT, hardware_id(source, gpu), c07.SEED_FIGURE, None, text,
                           Outcome.CONTEXT, c07.RULE))
    return out


# --- every claim --------------------------------------------------------------------------------------------

#: claim number -> its published verdicts and context (claims 5 and 6: no published data bears on them)
RULES: dict[str, Callable[[], list[Verdict]]] = {
    "01": _fallback, "02": _cpu_vs_gpu, "03": _mixed_precision, "04": _frameworks_vs_baseline, "07": _parallel,
}


def verdicts(number: str) -> list[Verdict]:
    """The published verdicts and context of one claim (none where no published data bears on it)."""
    return RULES[number]() if number in RULES else []


def table(number: str, found: Sequence[Verdict] | None = None) -> pd.DataFrame:
    """A claim's published verdicts as its page shows them: source, GPU, figure, interval, outcome (`found`: the
    claim's `verdicts(number)`, where the caller has them already)."""
    found = verdicts(number) if found is None else found
    return pd.DataFrame([{"source": " and ".join(sources_of(v.hardware_id)),
                          "published on": v.hardware_id.split("/", 1)[1], "what it shows": v.ours_text,
                          "95% interval": f"{v.low:.3g}-{v.high:.3g}" if v.low is not None else "none (point only)",
                          "verdict": v.outcome.value} for v in found],
                        columns=["source", "published on", "what it shows", "95% interval", "verdict"])
