"""Claim 2: a CPU trains an LSTM faster than a GPU at small batch sizes; the GPU wins only at large ones.

Seed (000, the blog post): "CPU on small batch sizes perform better than GPUs, which only achieve
superior performance as batch size increases dramatically", for the post's Keras LSTM autoencoder. The
post backs it with Max Woolf's CPU-vs-GPU benchmark of Keras's Bidirectional LSTM IMDb example: "His
results speak for themselves as to how using a GPU for this architecture won’t give you the performance
acceleration you are expecting" (the post gives no figure of Woolf's; his own are context, cited on the
page, not the seed).

Against it, a seed of its own: the Q&A (001) times one epoch of 612,235 samples with Keras's generic
(non-cuDNN) LSTM: "Intel i5-4690 CPU only ... 3755s", "GTX:950 & Intel i5-4690 ... 1417s", "RTX 2070 &
Intel i7-9700K ... 1012s": the GPU faster with the generic kernel, at a batch size the answer does not give.

Two training workloads on synthetic data of the seeds' shapes, each in Keras and in PyTorch:

- `autoencoder`: the blog's model, `LSTM(64, activation=ReLU(negative_slope=0.05), return_sequences)
  -> Dropout(0.2) -> LSTM(32) -> Dropout(0.2) -> Dense(features)`, MSE, Adam(1e-3). The post gives neither
  its timesteps nor its features: we assume 32 and 16. PyTorch's `nn.LSTM` cannot take a LeakyReLU cell
  activation, so the PyTorch twin uses the standard tanh cell (and therefore gets cuDNN on a GPU and
  oneDNN on a CPU, which the Keras model, with its ReLU, never gets).
- `bilstm_imdb`: Keras's `imdb_bidirectional_lstm.py` example that Woolf timed: `Embedding(20000, 128)
  -> Bidirectional(LSTM(64)) -> Dropout(0.5) -> Dense(1, sigmoid)`, binary cross-entropy, Adam, on
  sequences of 100 tokens (the example's `maxlen`).

What is timed is one training step (forward, backward, optimizer update): Keras's `train_on_batch`, a
PyTorch Adam step. The epoch time is then (dataset size / batch size) x the median step time: the per-step
cost extrapolated to an epoch of `dataset_size` sequences (25,000: IMDb's training set), not a timed
`fit`. The GPU/CPU comparison at one batch size does not depend on the dataset size at all (the number
of steps cancels), so neither does the crossover.

The verdict compares devices, not kernels: it decides on the models whose two rows ran one kernel family (the fused
vendor kernels, cuDNN on the GPU and oneDNN on the CPU, as PyTorch's `nn.LSTM` gets them; or one loop on both), read
off each row's kernel columns (`kernels_run`). A Keras row pair that ran cuDNN on the GPU and Keras's generic loop on
the CPU (Keras on its torch backend runs that loop in Python, one ATen op at a time) is shown beside it, its
framework, release and backend named from the rows (`frameworks.framework_words`), as what that framework's users
meet. Each GPU set is read against its own host's CPU set, never another machine's (`pairs`, `host_cpu`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from lstmstudy import contract, hardware
from lstmstudy.claims import Claim, Lease
from lstmstudy.frameworks import framework_words
from lstmstudy.observe import FUSED, GPU_FUSED
from lstmstudy.parameters import check_bool, check_choices, check_positive_ints
from lstmstudy.rules import (SIGN_RULE, Outcome, Possible, Verdict, combine, few_timings, holds_below, fewest_timings,
                             settle)
from lstmstudy.shapes import AUTOENCODER, BILSTM, LSTMShape
from lstmstudy.stats import row_median, row_ratio, row_round_medians, row_round_ratios

if TYPE_CHECKING:  # measuring imports torch; the analysis below runs without it
    from lstmstudy.sweep import SweepReport

NAME = "cpu_vs_gpu_batch"
NUMBER = "02"
STATEMENT = "A CPU trains an LSTM faster than a GPU at small batch sizes; the GPU wins only at large ones"
SEED_FIGURE = ('"CPU on small batch sizes perform better than GPUs, which only achieve superior performance as '
               'batch size increases dramatically" (seed 000, the blog post\'s Keras LSTM autoencoder). Against '
               'it, the Q&A (seed 001), Keras\'s generic LSTM, one epoch of 612,235 samples: "Intel i5-4690 CPU only: '
               '[...] 3755s", "GTX:950 & Intel i5-4690: [...] 1417s", "RTX 2070 & Intel i7-9700K: [...] 1012s" '
               '(batch size not given)')
RULE = ("per GPU set and the CPU set of its own host (never another machine's CPU), for each model measured on "
        "both: at each batch size the CPU or the GPU is faster when the bootstrap 95% interval of the GPU/CPU ratio of "
        "median step times excludes 1 (the two sets are timed in separate runs, so each side is resampled on its "
        "own), and the batch size is undecided when it includes 1; "
        f"{SIGN_RULE} (the GPU and CPU rows are timed in separate runs: the rank test decides them). A model reproduces the claim if the CPU is faster at the smallest common batch size and "
        "the GPU at the largest (the curves cross inside the grid), and does not if the GPU is faster at the "
        "smallest or the CPU at the largest (no crossover in the grid, whichever device is ahead); it is "
        "inconclusive if its undecided batch sizes could change that. Only models whose rows ran one kernel family "
        "on both devices, as their kernel columns record, decide: the fused vendor kernels (cuDNN on the GPU, "
        "oneDNN on the CPU, as PyTorch's nn.LSTM gets them) or the same loop on both. A model that ran different "
        "kernels on the two devices (Keras's cuDNN path on the GPU against its generic loop on the CPU) compares two "
        "kernels, not two devices: it is shown, with its framework and backend named, as what that framework's users "
        "meet, and not judged. The host's verdict: reproduced (not reproduced) if every deciding model is, partly if "
        "some are and some are not (partly means only this), inconclusive if an inconclusive model could change "
        "that; not measured where no model ran one kernel family on both devices, or where a CPU set has no GPU set "
        "of its host beside it")

#: The four timed models: kernel name -> (workload, framework).
KERNELS: dict[str, tuple[str, str]] = {
    "keras.autoencoder": ("autoencoder", "keras"),
    "torch.autoencoder": ("autoencoder", "torch"),
    "keras.bilstm_imdb": ("bilstm_imdb", "keras"),
    "torch.bilstm_imdb": ("bilstm_imdb", "torch"),
}
WORKLOADS = ("autoencoder", "bilstm_imdb")
FRAMEWORKS = ("keras", "torch")


def _num(value: float) -> str:
    """A measured figure for prose: three significant digits, never in exponent notation."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


# --- the grid -------------------------------------------------------------------------------------

def point(kernel: str, batch: int, *, timesteps: int, features: int, seq_len: int) -> contract.Point:
    """One training-step configuration of `kernel` at `batch`."""
    workload, _ = KERNELS[kernel]
    if workload == "autoencoder":
        shape = LSTMShape(batch=batch, timesteps=timesteps, features=features, hidden=AUTOENCODER["hidden"], layers=2)
        config = {"workload": workload, "hidden2": AUTOENCODER["hidden2"]}
    else:
        shape = LSTMShape(batch=batch, timesteps=seq_len, features=BILSTM["embed"], hidden=BILSTM["hidden"],
                          bidirectional=True)
        config = {"workload": workload, "vocab": BILSTM["vocab"]}
    return contract.Point(kernel, shape, phase="train", config=config)


def grid(*, kind: str, quick: bool, batches: Sequence[int], workloads: Sequence[str], frameworks: Sequence[str],
         timesteps: int, features: int, seq_len: int) -> list[contract.Point]:
    """Every chosen workload x framework at every batch size (quick: the first two, shorter sequences).

    The same grid on every device kind (`also_cpu`, a default of the GPU grid, is an option of `measure`).
    """
    if quick:
        batches, timesteps, seq_len = list(batches)[:2], min(timesteps, 8), min(seq_len, 16)
    return [point(kernel, b, timesteps=timesteps, features=features, seq_len=seq_len)
            for kernel, (workload, framework) in KERNELS.items()
            if workload in workloads and framework in frameworks for b in batches]


def measure(points: list[contract.Point], *, device: str, min_time: float, quick: bool = False, also_cpu: bool = True,
            **sweep_options) -> list[SweepReport]:
    """Time the training step of every point not yet stored for this hardware; with `also_cpu`, a GPU run
    measures this machine's CPU too, so that one run stores a CPU-GPU pair from one host."""
    from lstmstudy import kernels, sweep, timing

    plan = timing.plan(min_time, quick, **({} if quick else dict(warmup=2)))
    devices = [device]
    if also_cpu and hardware.resolve_device(device).type == "cuda":
        devices.append("cpu")
    return [sweep.run(NAME, points, kernels.prepare, plan, device=d, **sweep_options) for d in devices]


def check_parameters(parameters: dict) -> None:
    check_positive_ints(batches=parameters["batches"], timesteps=[parameters["timesteps"]],
                        features=[parameters["features"]], seq_len=[parameters["seq_len"]])
    check_choices("workloads", parameters["workloads"], WORKLOADS)
    check_choices("frameworks", parameters["frameworks"], FRAMEWORKS)
    check_bool(also_cpu=parameters["also_cpu"])


# --- what ran: the framework, its backend and the kernels -----------------------------------------

def _text(row: pd.Series, column: str) -> str:
    """A text field of a row ('' where missing or NaN)."""
    value = row.get(column, "")
    return "" if value is None or (isinstance(value, float) and value != value) else str(value)


#: the vendor's fused LSTM kernels, one kernel family on either device: what torch's `nn.LSTM` gets, cuDNN (or MIOpen)
#: on a GPU and oneDNN on a CPU. Every other label of `observe`'s vocabulary (a loop, generated code) is a family of
#: its own, so a model compares the devices only where it ran the fused kernels on both, or the same loop on both.
FUSED_KERNELS = frozenset({*GPU_FUSED, FUSED["cpu"]})
#: labels that say nothing of one kernel family (not observed, different kernels in different batches, no RNN)
_UNKNOWN = frozenset({"", "mixed", "none"})


def kernels_run(row: pd.Series) -> tuple[str, ...]:
    """The LSTM kernels a row ran, in `observe`'s vocabulary: per recurrent layer where its prediction names each
    (`predicted_kernel`, comma-separated, as Keras's rows record), else its observation (`observed_kernel`). An
    observation of a kernel the prediction does not name wins: what ran, not what was expected."""
    predicted = tuple(k for k in _text(row, "predicted_kernel").split(",") if k)
    observed = _text(row, "observed_kernel")
    if observed == "mixed" or (observed and predicted and _family(observed) not in map(_family, predicted)):
        return (observed,)
    return predicted or ((observed,) if observed else ())


def _family(kernel: str) -> str:
    return "fused" if kernel in FUSED_KERNELS else kernel


def same_family(gpu: Sequence[str], cpu: Sequence[str]) -> bool:
    """Whether a model's GPU row and CPU row ran the same kernel family (`kernels_run` of each): layer by layer where
    both name their layers, else as sets; never where either side's kernel is unknown."""
    if not gpu or not cpu or _UNKNOWN.intersection([*gpu, *cpu]):
        return False
    g, c = tuple(map(_family, gpu)), tuple(map(_family, cpu))
    return g == c if len(g) == len(c) else set(g) == set(c)


def kernel_words(kernels: Sequence[str]) -> str:
    """'python-op-loop + cudnn' (each kernel once, in layer order); 'not recorded' for none."""
    return " + ".join(dict.fromkeys(kernels)) or "not recorded"


def _aten_ops(row: pd.Series) -> int | None:
    try:
        ops = json.loads(_text(row, "observed_detail")).get("aten_ops")
    except (AttributeError, ValueError):
        return None
    return int(ops) if ops else None


# --- epoch times and the comparison ---------------------------------------------------------------

def _ok(results: pd.DataFrame) -> pd.DataFrame:
    if results.empty:
        return results
    ok = results[(results.status == "ok") & results.kernel.isin(KERNELS)].copy()
    ok["workload"] = ok.kernel.map(lambda k: KERNELS[k][0])
    ok["framework"] = ok.kernel.map(lambda k: KERNELS[k][1])
    missing = pd.Series(None, index=ok.index, dtype=object)
    ok["framework_label"] = [framework_words(framework, backend, versions) for framework, backend, versions
                             in zip(ok.framework, ok.get("backend", missing), ok.get("versions", missing))]
    return ok


EPOCH_COLUMNS = ["hardware_id", "device_kind", "workload", "framework", "framework_label", "kernel", "batch",
                 "timesteps", "steps", "step_ms", "epoch_s", "epoch_lo_s", "epoch_hi_s", "samples_per_s"]


def epoch_times(results: pd.DataFrame, dataset_size: int) -> pd.DataFrame:
    """Per hardware set, model and batch: epoch time = (dataset_size / batch) x median step time, with the
    step time's bootstrap 95% re-run interval scaled the same way. `framework_label` names what ran the row
    (`frameworks.framework_words`)."""
    ok = _ok(results)
    rows = []
    for _, row in ok.iterrows():
        steps = dataset_size / int(row.batch)
        median, lo, hi = row_median(row)
        rows.append({"hardware_id": row.hardware_id, "device_kind": row.device_kind, "workload": row.workload,
                     "framework": row.framework, "framework_label": row.framework_label, "kernel": row.kernel,
                     "batch": int(row.batch), "timesteps": int(row.timesteps), "steps": steps,
                     "step_ms": median * 1e3, "epoch_s": median * steps, "epoch_lo_s": lo * steps,
                     "epoch_hi_s": hi * steps, "samples_per_s": int(row.batch) / median})
    return pd.DataFrame(rows, columns=EPOCH_COLUMNS).sort_values(["hardware_id", "kernel", "batch"], ignore_index=True)


def pairs(results: pd.DataFrame, *, same_host: bool = True) -> list[tuple[str, str]]:
    """The (CPU set, GPU set) pairs whose rows share a host (one machine's CPU against its own GPU: what the
    verdict compares); with `same_host=False`, every other pair too, which is only context: a small VM's CPU
    against another machine's GPU says nothing about either machine."""
    if results.empty:
        return []
    kinds = results.groupby("hardware_id").device_kind.first()
    hosts = results[results.host != ""].groupby("hardware_id").host.agg(set) if "host" in results else {}
    cpus = sorted(kinds[kinds == "cpu"].index)
    gpus = sorted(kinds[kinds == "cuda"].index)
    return [(c, g) for c in cpus for g in gpus
            if not same_host or hosts.get(c, set()) & hosts.get(g, set())]


def host_cpu(results: pd.DataFrame, gpu: str) -> str | None:
    """The CPU set of a GPU set's own host (the first, where more than one is stored), or None."""
    return next((c for c, g in pairs(results) if g == gpu), None)


#: a GPU/CPU ratio's two sides, as the rule for few timings decides them: below 1 the GPU is faster
SIDES = holds_below(1.0)
_SIDE = {Outcome.REPRODUCED: "gpu", Outcome.NOT_REPRODUCED: "cpu"}

COMPARE_COLUMNS = ["cpu", "gpu", "pair", "same_host", "workload", "framework", "framework_label", "kernel", "batch",
                   "gpu_kernel", "cpu_kernel", "same_kernels", "cpu_aten_ops", "ratio", "ratio_lo", "ratio_hi",
                   "fewest", "faster", "few_words"]


def comparisons(results: pd.DataFrame) -> pd.DataFrame:
    """For every pair, model and batch size measured on both sides: the GPU/CPU ratio of median step times
    (= of epoch times) with its bootstrap 95% interval, and which side is faster ('tie' if it includes 1); the
    kernels each side ran and whether they are of one family (`same_kernels`: a comparison of the devices, not of
    two kernels). A batch size resting on a row of few timings (`fewest`) is decided by the rule for few timings
    (`rules.few_timings`, why in `few_words`). A pair of two hosts is kept as context (`same_host` False, labelled
    so); verdicts use only same-host pairs."""
    ok = _ok(results)
    rows = []
    local = set(pairs(results))
    for cpu, gpu in pairs(results, same_host=False):
        same = (cpu, gpu) in local
        # a Keras row pairs only with a row of the same Keras backend: TensorFlow and torch are two frameworks
        c = ok[ok.hardware_id == cpu].set_index(["kernel", "batch", "backend"])
        g = ok[ok.hardware_id == gpu].set_index(["kernel", "batch", "backend"])
        for key in sorted(set(c.index) & set(g.index)):
            grow, crow = g.loc[[key]].iloc[-1], c.loc[[key]].iloc[-1]
            ratio, lo, hi = row_ratio(grow, crow)
            fewest = fewest_timings(grow.round_sizes, crow.round_sizes)
            if fewest is None:
                faster, why = "gpu" if hi < 1 else "cpu" if lo > 1 else "tie", ""
            else:
                decided, why = few_timings(SIDES, fewest, list(row_round_ratios(grow, crow)),
                                           (row_round_medians(grow), row_round_medians(crow)))
                faster = _SIDE.get(decided, "tie")
            on_gpu, on_cpu = kernels_run(grow), kernels_run(crow)
            label = f"{gpu} vs {cpu}" + ("" if same else " (two hosts: context)")
            rows.append({"cpu": cpu, "gpu": gpu, "pair": label, "same_host": same, "workload": KERNELS[key[0]][0],
                         "framework": KERNELS[key[0]][1], "framework_label": grow.framework_label, "kernel": key[0],
                         "batch": int(key[1]), "gpu_kernel": kernel_words(on_gpu), "cpu_kernel": kernel_words(on_cpu),
                         "same_kernels": same_family(on_gpu, on_cpu), "cpu_aten_ops": _aten_ops(crow),
                         "ratio": ratio, "ratio_lo": lo, "ratio_hi": hi, "fewest": fewest, "faster": faster,
                         "few_words": why})
    out = pd.DataFrame(rows, columns=COMPARE_COLUMNS)
    for column in ("fewest", "cpu_aten_ops"):
        out[column] = out[column].astype("Int64")
    return out


def _decided(faster: Sequence[str]) -> Outcome:
    """The rule for one model once every batch size is decided ('cpu' or 'gpu' faster): the claim holds only where
    the curves cross inside the grid as it says (the CPU faster at the smallest batch, the GPU at the largest).
    A device ahead at both ends is no crossover, whichever device it is."""
    return Outcome.REPRODUCED if faster[0] == "cpu" and faster[-1] == "gpu" else Outcome.NOT_REPRODUCED


def _possible(faster: Sequence[str]) -> Possible:
    """What the rule can still say of one model (`faster` by batch size): every way the ties could go."""
    options = [("cpu", "gpu") if side == "tie" else (side,) for side in faster]
    return frozenset(_decided(choice) for choice in itertools.product(*options))


CROSSOVER_COLUMNS = ["cpu", "gpu", "pair", "workload", "framework", "framework_label", "kernel", "gpu_kernel",
                     "cpu_kernel", "same_kernels", "compares", "smallest", "largest", "ratio_smallest", "ratio_largest",
                     "crossover", "cpu_clearly_up_to", "gpu_clearly_from", "undecided", "few_timings", "fewest",
                     "possible", "outcome", "cpu_aten_ops_smallest", "parts", "point_possible", "ties_possible"]

#: what a model's rows compare (`crossovers.compares`): the rule decides on the first only
DEVICES, USERS = "the devices (one kernel family on both)", "what its users meet (two kernels, not judged)"


def crossovers(results: pd.DataFrame) -> pd.DataFrame:
    """Per pair and model: the smallest batch at which the GPU's epoch time beats the CPU's (`crossover`), its
    uncertainty (the largest batch where the CPU is clearly faster and the smallest where the GPU is, with the
    batch sizes between whose interval includes 1), the kernels each side ran and what the rows therefore compare
    (`compares`: the devices, or two kernels as a user of that framework meets them), and the rule's outcome
    (`outcome`; the verdict counts it only where the rows compare the devices). `few_timings`: the batch sizes that
    rest on a row of few timings, and how the rule for few timings decided each."""
    table = comparisons(results)
    rows = []
    for (cpu, gpu, kernel, _), part in table.groupby(["cpu", "gpu", "kernel", "framework_label"], sort=True):
        part = part.sort_values("batch")
        gpu_wins = part[part.ratio < 1].batch
        cpu_clear = part[part.faster == "cpu"].batch
        gpu_clear = part[part.faster == "gpu"].batch
        possible = _possible(list(part.faster))
        few = part[part.fewest.notna()]
        # what the rule could say were each few-timing batch size undecided, and were it on the side its point
        # estimate shows: where the two differ, the outcome rests on those rows (`Verdict.fewest_timings`)
        point = [("gpu" if r.ratio < 1 else "cpu") if pd.notna(r.fewest) else r.faster for r in part.itertuples()]
        ties = ["tie" if pd.notna(r.fewest) else r.faster for r in part.itertuples()]
        same = bool(part.same_kernels.all())
        ends = (part.iloc[0], part.iloc[-1])
        rows.append({"cpu": cpu, "gpu": gpu, "pair": part.pair.iloc[0], "workload": KERNELS[kernel][0],
                     "framework": KERNELS[kernel][1], "framework_label": part.framework_label.iloc[0],
                     "kernel": kernel, "gpu_kernel": " / ".join(dict.fromkeys(part.gpu_kernel)),
                     "cpu_kernel": " / ".join(dict.fromkeys(part.cpu_kernel)), "same_kernels": same,
                     "compares": DEVICES if same else USERS, "smallest": int(part.batch.iloc[0]),
                     "largest": int(part.batch.iloc[-1]), "ratio_smallest": float(part.ratio.iloc[0]),
                     "ratio_largest": float(part.ratio.iloc[-1]),
                     "crossover": int(gpu_wins.iloc[0]) if len(gpu_wins) else None,
                     "cpu_clearly_up_to": int(cpu_clear.max()) if len(cpu_clear) else None,
                     "gpu_clearly_from": int(gpu_clear.min()) if len(gpu_clear) else None,
                     "undecided": [int(b) for b in part[part.faster == "tie"].batch],
                     "few_timings": {int(r.batch): r.few_words for r in few.itertuples()},
                     "fewest": int(few.fewest.min()) if len(few) else None,
                     "possible": possible, "outcome": settle(possible).value,
                     "cpu_aten_ops_smallest": ends[0].cpu_aten_ops,
                     "parts": tuple((f"{ends[0].framework} {ends[0].workload} at batch {int(e.batch)}"
                                     + (f" ({int(e.fewest)} timings: a spread)" if pd.notna(e.fewest) else "")
                                     + ", GPU/CPU", float(e.ratio_lo), float(e.ratio_hi)) for e in ends),
                     "point_possible": _possible(point), "ties_possible": _possible(ties)})
    out = pd.DataFrame(rows, columns=CROSSOVER_COLUMNS)
    for column in ("crossover", "cpu_clearly_up_to", "gpu_clearly_from", "fewest", "cpu_aten_ops_smallest"):
        out[column] = out[column].astype("Int64")
    return out


def _crossover_words(row: pd.Series) -> str:
    """Where a model's curves cross, in a table's words: 'batch 8', 'GPU ahead from batch 1', 'none in the grid'."""
    if pd.isna(row.crossover):
        return "none in the grid (the GPU never faster)"
    return f"GPU ahead from batch {row.smallest}" if int(row.crossover) == row.smallest else f"batch {row.crossover}"


def _batches(values: object) -> str:
    """Batch sizes as a cell says them: '8, 64', or a dash for none (never a Python list or <NA>)."""
    if isinstance(values, (list, tuple)):
        return ", ".join(map(str, values)) or "–"
    return "–" if pd.isna(values) else str(int(values))


def crossover_view(crossings: pd.DataFrame, *, full: bool = False) -> pd.DataFrame:
    """`crossovers` as a page shows it, the outcome first: per pair and model, what its rows compare, the GPU/CPU
    ratio at the two ends of the grid and where the curves cross; a model whose two devices ran different kernels
    reads 'not judged' (the rule never counts it). Same-host pairs only, the pair named where there are several,
    unless `full`, which adds the pairs of two hosts (context), the kernels each side ran and the uncertainty of each
    crossover."""
    table = crossings if full else crossings[~crossings.pair.str.contains("two hosts")]
    out = pd.DataFrame({
        "outcome": [o if same else "not judged (two kernels)" for o, same in zip(table.outcome, table.same_kernels)],
        "pair (GPU vs CPU)": table.pair,
        "model": [f"{label}, {workload}" for label, workload in zip(table.framework_label, table.workload)],
        "GPU/CPU at the smallest batch": [f"{_num(r)}x at {b}" for r, b in zip(table.ratio_smallest, table.smallest)],
        "at the largest": [f"{_num(r)}x at {b}" for r, b in zip(table.ratio_largest, table.largest)],
        "crossover": [_crossover_words(row) for _, row in table.iterrows()]})
    if full:
        out = out.assign(**{
            "kernels (GPU; CPU)": [f"{g}; {c}" for g, c in zip(table.gpu_kernel, table.cpu_kernel)],
            "CPU clearly faster up to": table.cpu_clearly_up_to.map(_batches),
            "GPU clearly faster from": table.gpu_clearly_from.map(_batches),
            "undecided batches": table.undecided.map(_batches),
            "fewest timings": table.fewest.map(_batches)})
    elif table.pair.nunique() == 1:
        out = out.drop(columns="pair (GPU vs CPU)")
    return out.reset_index(drop=True)


def _few_text(row: pd.Series) -> str:
    """The batch sizes of a model that rest on rows of few timings, and what the rule for few timings made of them."""
    if not row.few_timings:
        return ""
    undecided = [b for b in row.few_timings if b in row.undecided]
    decided = [b for b in row.few_timings if b not in row.undecided]
    words = []
    if decided:
        words.append(f"decided by the rule for few timings at batch {', '.join(map(str, decided))}")
    if undecided:
        words.append(f"undecided at batch {', '.join(map(str, undecided))} (rows of as few as {row.fewest} timings: "
                     f"no 95% interval, and no paired rounds that settle it by the rule for few timings)")
    return "; " + "; ".join(words)


def _crossover_text(row: pd.Series) -> str:
    head = (f"{row.framework} {row.workload} ({row.gpu_kernel} on the GPU, {row.cpu_kernel} on the CPU"
            + (f", {row.cpu_aten_ops_smallest:,} ATen ops a CPU step at batch {row.smallest}"
               if row.framework == "keras" and pd.notna(row.cpu_aten_ops_smallest) else "")
            + f"): GPU/CPU {_num(row.ratio_smallest)}x at batch {row.smallest}, {_num(row.ratio_largest)}x at "
              f"{row.largest}")
    few = _few_text(row)
    if pd.isna(row.crossover):
        return head + "; no crossover in the grid (the GPU never faster)" + few
    if int(row.crossover) == row.smallest:
        point = " by its point estimate" if row.smallest in row.undecided else ""
        return head + f"; GPU ahead from the smallest batch{point}" + few
    cpu = ("the CPU clearly faster at no batch size" if pd.isna(row.cpu_clearly_up_to)
           else f"the CPU clearly faster up to batch {int(row.cpu_clearly_up_to)}")
    gpu = ("the GPU clearly faster at no batch size" if pd.isna(row.gpu_clearly_from)
           else f"the GPU clearly faster from batch {int(row.gpu_clearly_from)}")
    return head + f"; crossover at batch {int(row.crossover)} ({cpu}, {gpu})" + few


def _users_text(models: pd.DataFrame) -> str:
    """The models whose two rows ran different kernels, per framework: what its users meet, not a device comparison."""
    return "; ".join(
        f"not a device comparison, what a user of {label} meets (the two devices ran different kernels; not "
        f"judged): " + "; ".join(_crossover_text(row) for _, row in part.iterrows())
        for label, part in models.groupby("framework_label", sort=False))


#: The model whose crossover is the verdict's number (the blog's own, then its PyTorch twin), then the others.
HEADLINE_ORDER = ("keras.autoencoder", "torch.autoencoder", "keras.bilstm_imdb", "torch.bilstm_imdb")


def verdicts(results: pd.DataFrame) -> list[Verdict]:
    """One verdict per (CPU set, GPU set) pair of one host, decided on the models whose rows ran one kernel family
    on both devices; the others are shown as what their framework's users meet. A set without a partner is not
    measured, and so is a pair where no model compares the devices."""
    if results.empty:
        return []
    table = crossovers(results)
    out = []
    for cpu, gpu in pairs(results):  # same host only
        mine = table[(table.cpu == cpu) & (table.gpu == gpu)]
        hardware_id = f"{gpu} vs {cpu}"
        if mine.empty:
            out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None,
                               "no model measured on both sets", Outcome.NOT_MEASURED, RULE))
            continue
        mine = mine.assign(order=mine.kernel.map(HEADLINE_ORDER.index)).sort_values("order", kind="stable")
        deciding, users = mine[mine.same_kernels], mine[~mine.same_kernels]
        shown = _users_text(users)
        if deciding.empty:
            text = ("no model ran one kernel family on both devices, so the devices were not compared"
                    + (f"; {shown}" if shown else ""))
            out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, text, Outcome.NOT_MEASURED, RULE))
            continue
        outcome = settle(combine(list(deciding.possible)))
        rests = settle(combine(list(deciding.point_possible))) != settle(combine(list(deciding.ties_possible)))
        head = deciding.crossover.iloc[0]
        text = ((f"{shown}; " if shown else "") + "the devices compared (one kernel family on both; judged): "
                + "; ".join(_crossover_text(row) for _, row in deciding.iterrows()))
        out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None if pd.isna(head) else float(head), text,
                           outcome, RULE, parts=tuple(p for ps in deciding.parts for p in ps),
                           fewest_timings=int(deciding.fewest.min()) if rests else None))
    paired = {h for p in pairs(results) for h in p}
    for hardware_id, kind in results.groupby("hardware_id").device_kind.first().sort_index().items():
        if hardware_id in paired:
            continue
        missing = "GPU" if kind == "cpu" else "CPU"
        text = (f"{kind.upper() if kind == 'cpu' else 'GPU'} curve only: no {missing} set of the same host stored "
                f"to compare with (one set's curve alone cannot decide the claim)")
        out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, text, Outcome.NOT_MEASURED, RULE))
    return out


# --- the mechanism: the latency floor ------------------------------------------------------------

FLOOR_COLUMNS = ["hardware_id", "device_kind", "workload", "batch", "timesteps", "lstm_kernel", "step_ms",
                 "aten_ops", "gpu_kernels", "ops_per_timestep", "us_per_op", "us_per_timestep"]


def latency_floor(results: pd.DataFrame) -> pd.DataFrame:
    """At each set's smallest batch, for the PyTorch models: the step time against the work items it issues
    (GPU kernels on a GPU, dispatched aten ops on a CPU), per timestep and as microseconds per item."""
    ok = _ok(results)
    ok = ok[ok.framework == "torch"] if not ok.empty else ok
    rows = []
    for (hardware_id, kernel), part in ok.groupby(["hardware_id", "kernel"], sort=True):
        row = part.sort_values("batch").iloc[0]
        try:
            ops = json.loads(row.observed_detail)
        except (TypeError, ValueError):
            continue
        on_gpu = row.device_kind == "cuda"
        items = ops.get("gpu_kernels") if on_gpu else ops.get("aten_ops")
        if not items:
            continue
        step_s = float(row.median_s)
        rows.append({"hardware_id": hardware_id, "device_kind": row.device_kind, "workload": row.workload,
                     "batch": int(row.batch), "timesteps": int(row.timesteps), "lstm_kernel": row.observed_kernel,
                     "step_ms": step_s * 1e3, "aten_ops": ops.get("aten_ops"), "gpu_kernels": ops.get("gpu_kernels"),
                     "ops_per_timestep": items / int(row.timesteps), "us_per_op": step_s / items * 1e6,
                     "us_per_timestep": step_s / int(row.timesteps) * 1e6})
    return pd.DataFrame(rows, columns=FLOOR_COLUMNS)


def floor_text(floor: pd.DataFrame, hardware_id: str) -> str:
    """The latency floor of one set's PyTorch models, in words; 'not measured' where it has none."""
    part = floor[floor.hardware_id == hardware_id]
    if part.empty:
        return "not measured"
    return "; ".join(
        f"{r.workload} ({r.lstm_kernel} LSTM), {_num(r.step_ms)} ms per step at batch {r.batch}: "
        f"{(r.gpu_kernels if r.device_kind == 'cuda' else r.aten_ops):.0f} "
        f"{'GPU kernels' if r.device_kind == 'cuda' else 'aten ops'} per step, {_num(r.ops_per_timestep)} per "
        f"timestep, {_num(r.us_per_op)} us each" for r in part.itertuples())


def pair_floor_text(results: pd.DataFrame) -> str:
    """Each GPU set's latency floor beside its own host's CPU's (never another machine's CPU), for the page's prose."""
    floor = latency_floor(results)
    kinds = results.groupby("hardware_id").device_kind.first() if not results.empty else pd.Series(dtype=object)
    texts = []
    for gpu in sorted(kinds[kinds == "cuda"].index):
        cpu = host_cpu(results, gpu)
        own = (f"its own host's CPU, {cpu}: {floor_text(floor, cpu)}" if cpu else
               "no CPU set of its own host is stored to set beside it")
        texts.append(f"on {gpu}: {floor_text(floor, gpu)}; on {own}")
    return ". ".join(texts) or "no GPU set is stored"


def _lone_cpus(results: pd.DataFrame) -> list[str]:
    """The CPU sets with no GPU set of their host (the CPU analogue's sets), by name."""
    if results.empty:
        return []
    paired = {c for c, _ in pairs(results)}
    kinds = results.groupby("hardware_id").device_kind.first()
    return [h for h in sorted(kinds[kinds == "cpu"].index) if h not in paired]


def cpu_floor_text(results: pd.DataFrame) -> str:
    """The latency floor of each CPU set without a GPU of its host, microseconds per aten op by model."""
    floor = latency_floor(results)
    texts = [f"{h}: " + ", ".join(f"{r.workload} {_num(r.us_per_op)} us per op"
                                  for r in floor[floor.hardware_id == h].itertuples())
             for h in _lone_cpus(results) if (floor.hardware_id == h).any()]
    return "; ".join(texts) or "no such CPU set is stored"


def cpu_curve_text(epochs: pd.DataFrame, hardware_id: str | None = None) -> str:
    """How one CPU set's epoch time falls from the smallest to the largest batch, per model (`hardware_id`, else
    the first CPU set)."""
    cpu = epochs[epochs.device_kind == "cpu"]
    if cpu.empty:
        return "not measured"
    chosen = hardware_id or cpu.hardware_id.iloc[0]
    first = cpu[cpu.hardware_id == chosen]
    parts = []
    for _, part in first.groupby(["kernel", "framework_label"], sort=True):
        part = part.sort_values("batch")
        a, b = part.iloc[0], part.iloc[-1]
        parts.append(f"{a.workload} in {a.framework_label}: {_num(a.epoch_s)} s at batch {a.batch}, "
                     f"{_num(b.epoch_s)} s at batch {b.batch}")
    return f"on {chosen}, an epoch takes " + "; ".join(parts)


def glue_extras(prefix: str, results: pd.DataFrame, dataset_size: int) -> None:
    """Glue into the prose: a CPU set's curve (`{prefix}_cpu_curve`: the first set without a GPU of its host), each
    GPU set's latency floor beside its own host's CPU's (`{prefix}_floor`), the other CPU sets' (`{prefix}_cpu_floor`)."""
    from myst_nb import glue

    lone = _lone_cpus(results)
    glue(f"{prefix}_cpu_curve", cpu_curve_text(epoch_times(results, dataset_size), lone[0] if lone else None),
         display=False)
    glue(f"{prefix}_floor", pair_floor_text(results), display=False)
    glue(f"{prefix}_cpu_floor", cpu_floor_text(results), display=False)


def epoch_table(results: pd.DataFrame, dataset_size: int) -> pd.DataFrame:
    """Epoch time in seconds, one row per hardware set and model (what ran it named: `framework_label`), one column
    per batch size."""
    epochs = epoch_times(results, dataset_size)
    if epochs.empty:
        return pd.DataFrame(columns=["hardware_id", "framework_label", "workload"])
    wide = epochs.pivot_table(index=["hardware_id", "framework_label", "workload"], columns="batch", values="epoch_s")
    wide = wide.rename(columns=lambda b: f"batch {b} (s)").round(3).reset_index()
    wide.columns.name = None
    return wide


_COMMON = dict(workloads=list(WORKLOADS), frameworks=list(FRAMEWORKS), timesteps=32, features=16, seq_len=100)
CLAIM = Claim(
    says=(
        "At small batch sizes a CPU trains an LSTM faster than a GPU; the GPU wins only as the batch "
        "grows."),
    figure_words="GPU ahead from batch {}", unit="", part_unit="x", part_words="GPU time over CPU time",
    advice="**Is your batch small?** Time the CPU too: where the GPU pulls ahead depends on the batch.",
    number=NUMBER, name=NAME, statement=STATEMENT, seed_figure=SEED_FIGURE, rule=RULE,
    source="blog post (seed 000), citing Woolf's benchmark; Q&A (seed 001)",
    citations=("blogpost-lstm-gpu", "woolf-cloud-cpus", "so-cudnnlstm"),
    defaults={
        # batch 4096 left out on a CPU alone: seconds per step on a 2-core machine
        "cpu": dict(batches=[1, 8, 64, 512], also_cpu=False, **_COMMON),
        # the GPU host's own CPU is measured at the same batch sizes (`also_cpu`): one host, one pair
        "cuda": dict(batches=[1, 8, 64, 512, 4096], also_cpu=True, **_COMMON),
    },
    grid=grid, measure=measure, verdicts=verdicts, check=check_parameters, measure_options=("also_cpu",),
    # a GPU run measures every point twice (GPU, then the host's CPU): 4.0 s a point on the first lease, plus 3.8 s
    # for the calls its rows of under `stats.MIN_CALLS` lacked (3.6 s of them the host CPU's), plus a profiled pass
    seconds_per_point={"cpu": 3.5, "cuda": 8.0},
    # the crossover is decided at the smallest and the largest batch both devices ran (`_decided`); one between
    # them; PyTorch's models only: on a GPU node Keras runs on torch, whose cuDNN path on the GPU against its Python
    # loop on the CPU compares two kernels, which the rule shows and does not judge (Keras's rows come with the default
    # grid). 6 points on the GPU, 6 on its host's CPU (`also_cpu`). 7.8 s a point: the first lease's 4.0 s, plus the
    # calls its torch rows at these batches lacked of `stats.MIN_CALLS` (3.7 s, nearly all the host CPU's at 4096)
    lease=Lease(overrides={"batches": [1, 64, 4096], "frameworks": ["torch"]}, seconds_per_point=7.8),
)
