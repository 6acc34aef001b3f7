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
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from lstmstudy import contract, hardware
from lstmstudy.claims import Claim, Lease
from lstmstudy.parameters import check_bool, check_choices, check_positive_ints
from lstmstudy.rules import Outcome, Possible, Verdict, combine, crossover, settle
from lstmstudy.shapes import AUTOENCODER, BILSTM, LSTMShape
from lstmstudy.stats import row_median, row_ratio

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
RULE = ("per pair of a CPU set and a GPU set of the same host, for each workload and framework measured on "
        "both: at each batch size the CPU or the GPU is faster when the bootstrap 95% interval of the GPU/CPU "
        "ratio of median step times excludes 1 (the two sets are timed in separate runs, so each side is "
        "resampled on its own), and the batch size is undecided when it includes 1. Reproduced if the CPU is "
        "faster at the smallest common batch size and the GPU at the largest; partly if the CPU is faster at both "
        "ends; not reproduced if the GPU is faster at the smallest batch size, whatever the largest shows (no "
        "crossover: the GPU is ahead from the start), or if neither end holds; inconclusive if "
        "the undecided batch sizes could change the outcome. The pair combines its models: reproduced (not "
        "reproduced) if every one is, partly if some are and some are not, inconclusive if an inconclusive model "
        "could change that. A CPU set alone is not measured: the claim needs a GPU set beside it")

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


def _label(kernel: str) -> str:
    workload, framework = KERNELS[kernel]
    return f"{framework} {workload}"


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


# --- epoch times and the comparison ---------------------------------------------------------------

def _ok(results: pd.DataFrame) -> pd.DataFrame:
    if results.empty:
        return results
    ok = results[(results.status == "ok") & results.kernel.isin(KERNELS)].copy()
    ok["workload"] = ok.kernel.map(lambda k: KERNELS[k][0])
    ok["framework"] = ok.kernel.map(lambda k: KERNELS[k][1])
    return ok


EPOCH_COLUMNS = ["hardware_id", "device_kind", "workload", "framework", "kernel", "batch", "timesteps",
                 "steps", "step_ms", "epoch_s", "epoch_lo_s", "epoch_hi_s", "samples_per_s"]


def epoch_times(results: pd.DataFrame, dataset_size: int) -> pd.DataFrame:
    """Per hardware set, model and batch: epoch time = (dataset_size / batch) x median step time, with the
    step time's bootstrap 95% re-run interval scaled the same way."""
    ok = _ok(results)
    rows = []
    for _, row in ok.iterrows():
        steps = dataset_size / int(row.batch)
        median, lo, hi = row_median(row)
        rows.append({"hardware_id": row.hardware_id, "device_kind": row.device_kind, "workload": row.workload,
                     "framework": row.framework, "kernel": row.kernel, "batch": int(row.batch),
                     "timesteps": int(row.timesteps), "steps": steps, "step_ms": median * 1e3,
                     "epoch_s": median * steps, "epoch_lo_s": lo * steps, "epoch_hi_s": hi * steps,
                     "samples_per_s": int(row.batch) / median})
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


COMPARE_COLUMNS = ["cpu", "gpu", "pair", "same_host", "workload", "framework", "kernel", "batch", "ratio",
                   "ratio_lo", "ratio_hi", "faster"]


def comparisons(results: pd.DataFrame) -> pd.DataFrame:
    """For every pair, model and batch size measured on both sides: the GPU/CPU ratio of median step times
    (= of epoch times) with its bootstrap 95% interval, and which side is faster ('tie' if it includes 1).
    A pair of two hosts is kept as context (`same_host` False, labelled so); verdicts use only same-host pairs."""
    ok = _ok(results)
    rows = []
    local = set(pairs(results))
    for cpu, gpu in pairs(results, same_host=False):
        same = (cpu, gpu) in local
        # a Keras row pairs only with a row of the same Keras backend: TensorFlow and torch are two frameworks
        c = ok[ok.hardware_id == cpu].set_index(["kernel", "batch", "backend"])
        g = ok[ok.hardware_id == gpu].set_index(["kernel", "batch", "backend"])
        for key in sorted(set(c.index) & set(g.index)):
            ratio, lo, hi = row_ratio(g.loc[[key]].iloc[-1], c.loc[[key]].iloc[-1])
            faster = "gpu" if hi < 1 else "cpu" if lo > 1 else "tie"
            label = f"{gpu} vs {cpu}" + ("" if same else " (two hosts: context)")
            rows.append({"cpu": cpu, "gpu": gpu, "pair": label, "same_host": same, "workload": KERNELS[key[0]][0],
                         "framework": KERNELS[key[0]][1], "kernel": key[0], "batch": int(key[1]), "ratio": ratio,
                         "ratio_lo": lo, "ratio_hi": hi, "faster": faster})
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)


def _decided(faster: Sequence[str]) -> Outcome:
    """The rule for one model on one pair once every batch size is decided ('cpu' or 'gpu' faster)."""
    holds = {True: Outcome.REPRODUCED, False: Outcome.NOT_REPRODUCED}
    return crossover(holds[faster[0] == "cpu"], holds[faster[-1] == "gpu"])


def _possible(faster: Sequence[str]) -> Possible:
    """What the rule can still say of one model (`faster` by batch size): every way the ties could go."""
    options = [("cpu", "gpu") if side == "tie" else (side,) for side in faster]
    return frozenset(_decided(choice) for choice in itertools.product(*options))


CROSSOVER_COLUMNS = ["cpu", "gpu", "pair", "workload", "framework", "kernel", "smallest", "largest",
                     "ratio_smallest", "ratio_largest", "crossover", "cpu_clearly_up_to", "gpu_clearly_from",
                     "undecided", "possible", "outcome"]


def crossovers(results: pd.DataFrame) -> pd.DataFrame:
    """Per pair and model: the smallest batch at which the GPU's epoch time beats the CPU's (`crossover`), its
    uncertainty (the largest batch where the CPU is clearly faster and the smallest where the GPU is, with the
    batch sizes between whose interval includes 1), and the rule's outcome."""
    table = comparisons(results)
    rows = []
    for (cpu, gpu, kernel), part in table.groupby(["cpu", "gpu", "kernel"], sort=True):
        part = part.sort_values("batch")
        gpu_wins = part[part.ratio < 1].batch
        cpu_clear = part[part.faster == "cpu"].batch
        gpu_clear = part[part.faster == "gpu"].batch
        possible = _possible(list(part.faster))
        rows.append({"cpu": cpu, "gpu": gpu, "pair": part.pair.iloc[0], "workload": KERNELS[kernel][0],
                     "framework": KERNELS[kernel][1], "kernel": kernel, "smallest": int(part.batch.iloc[0]),
                     "largest": int(part.batch.iloc[-1]), "ratio_smallest": float(part.ratio.iloc[0]),
                     "ratio_largest": float(part.ratio.iloc[-1]),
                     "crossover": int(gpu_wins.iloc[0]) if len(gpu_wins) else None,
                     "cpu_clearly_up_to": int(cpu_clear.max()) if len(cpu_clear) else None,
                     "gpu_clearly_from": int(gpu_clear.min()) if len(gpu_clear) else None,
                     "undecided": [int(b) for b in part[part.faster == "tie"].batch],
                     "possible": possible, "outcome": settle(possible).value})
    out = pd.DataFrame(rows, columns=CROSSOVER_COLUMNS)
    for column in ("crossover", "cpu_clearly_up_to", "gpu_clearly_from"):
        out[column] = out[column].astype("Int64")
    return out


def _crossover_text(row: pd.Series) -> str:
    head = (f"{row.framework} {row.workload}: GPU/CPU {_num(row.ratio_smallest)}x at batch {row.smallest}, "
            f"{_num(row.ratio_largest)}x at {row.largest}")
    if pd.isna(row.crossover):
        return head + "; no crossover in the grid"
    if int(row.crossover) == row.smallest:
        return head + "; GPU ahead from the smallest batch"
    cpu = ("the CPU clearly faster at no batch size" if pd.isna(row.cpu_clearly_up_to)
           else f"the CPU clearly faster up to batch {int(row.cpu_clearly_up_to)}")
    gpu = ("the GPU clearly faster at no batch size" if pd.isna(row.gpu_clearly_from)
           else f"the GPU clearly faster from batch {int(row.gpu_clearly_from)}")
    return head + f"; crossover at batch {int(row.crossover)} ({cpu}, {gpu})"


#: The model whose crossover is the verdict's number (the blog's own), then the others in this order.
HEADLINE_ORDER = ("keras.autoencoder", "keras.bilstm_imdb", "torch.autoencoder", "torch.bilstm_imdb")


def verdicts(results: pd.DataFrame) -> list[Verdict]:
    """One verdict per (CPU set, GPU set) pair; a set without a partner is not measured."""
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
        outcome = settle(combine(list(mine.possible)))
        mine = mine.set_index("kernel").loc[[k for k in HEADLINE_ORDER if k in set(mine.kernel)]].reset_index()
        head = mine.crossover.iloc[0]
        ours = None if pd.isna(head) else float(head)
        text = "; ".join(_crossover_text(row) for _, row in mine.iterrows())
        out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, ours, text, outcome, RULE))
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


def floor_text(floor: pd.DataFrame, kind: str) -> str:
    """One sentence on the latency floor of the first set of a device kind, for the page's prose."""
    part = floor[floor.device_kind == kind]
    if part.empty:
        return "not measured"
    what = "GPU kernels" if kind == "cuda" else "aten ops"
    first = part.hardware_id.iloc[0]
    return f"{first}: " + "; ".join(
        f"{r.workload} ({r.lstm_kernel} LSTM), {_num(r.step_ms)} ms per step at batch {r.batch}: "
        f"{(r.gpu_kernels if kind == 'cuda' else r.aten_ops):.0f} {what} per step, {_num(r.ops_per_timestep)} per "
        f"timestep, {_num(r.us_per_op)} us each" for r in part.itertuples() if r.hardware_id == first)


def cpu_curve_text(epochs: pd.DataFrame) -> str:
    """How the first CPU set's epoch time falls from the smallest to the largest batch, per model."""
    cpu = epochs[epochs.device_kind == "cpu"]
    if cpu.empty:
        return "not measured"
    first = cpu[cpu.hardware_id == cpu.hardware_id.iloc[0]]
    parts = []
    for kernel, part in first.groupby("kernel", sort=True):
        part = part.sort_values("batch")
        a, b = part.iloc[0], part.iloc[-1]
        parts.append(f"{_label(kernel)}: {_num(a.epoch_s)} s at batch {a.batch}, "
                     f"{_num(b.epoch_s)} s at batch {b.batch}")
    return f"on {first.hardware_id.iloc[0]}, an epoch takes " + "; ".join(parts)


def glue_extras(prefix: str, results: pd.DataFrame, dataset_size: int) -> None:
    """Glue the CPU curve and the latency floors into the prose (`{prefix}_cpu_curve`, `{prefix}_{kind}_floor`)."""
    from myst_nb import glue

    glue(f"{prefix}_cpu_curve", cpu_curve_text(epoch_times(results, dataset_size)), display=False)
    floor = latency_floor(results)
    for kind in ("cpu", "cuda"):
        glue(f"{prefix}_{kind}_floor", floor_text(floor, kind), display=False)


def epoch_table(results: pd.DataFrame, dataset_size: int) -> pd.DataFrame:
    """Epoch time in seconds, one row per hardware set and model, one column per batch size."""
    epochs = epoch_times(results, dataset_size)
    if epochs.empty:
        return pd.DataFrame(columns=["hardware_id", "framework", "workload"])
    wide = epochs.pivot_table(index=["hardware_id", "framework", "workload"], columns="batch", values="epoch_s")
    wide = wide.rename(columns=lambda b: f"batch {b} (s)").round(3).reset_index()
    wide.columns.name = None
    return wide


_COMMON = dict(workloads=list(WORKLOADS), frameworks=list(FRAMEWORKS), timesteps=32, features=16, seq_len=100)
CLAIM = Claim(
    says=(
        "At small batch sizes a CPU trains an LSTM faster than a GPU; the GPU wins only as the batch "
        "grows."),
    figure_words="GPU ahead from batch {}",
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
    # a GPU run measures every point twice (GPU, then the host's CPU)
    seconds_per_point={"cpu": 3.5, "cuda": 4.0},
    # the crossover is decided at the smallest and the largest batch both devices ran (`_decided`); one between
    # them: 12 points on the GPU, 12 on its host's CPU (`also_cpu`)
    lease=Lease(overrides={"batches": [1, 64, 4096]}),
)
