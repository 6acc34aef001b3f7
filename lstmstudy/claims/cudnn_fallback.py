"""Claim 1: an LSTM that breaks cuDNN's criteria silently falls back to a generic kernel 2-5x slower.

Seeds: Chollet (Deep Learning with Python, 2nd ed., quoted in the blog post 000): recurrent dropout
"forces the runtime to fall back to the regular TensorFlow implementation, which is generally two to
five times slower on GPU"; the Q&A (001): "15x gain over traditional(non Cuda) LSTM implementation!"
(CuDNNLSTM "69s" against LSTM "1012s" for one epoch on an RTX 2070), and "training a model with LSTM
took 10mins 30seconds. Simply switching the call from LSTM() to CuDNNLSTM() took less than a minute".

Each trigger is compared with the fused kernel of its own framework, on the same Keras backend, at the same
configuration: Keras triggers against `keras.cudnn_auto`, PyTorch's generic paths against `torch.fused`.

On a GPU the verdict is decided per seed case (`SEED_CASES`: the blog's ReLU layer and, where stored, the blog's
own model; Chollet's recurrent dropout; the Q&A's generic LSTM against the cuDNN one), once per Keras backend
measured, and every Keras figure names the Keras release and backend its rows ran on (`frameworks.framework_words`,
read off the rows, which record both): Keras on its torch backend falls back to a Python loop of single ops, on its jax
backend to an XLA-compiled loop, neither the TensorFlow graph loop the seeds timed. The pooled geometric mean over
three frameworks' triggers and every other trigger are context. On a CPU, Keras has no fused LSTM at all (cuDNN is
GPU-only), so the CPU form of the claim is PyTorch's oneDNN fused LSTM against the same module with oneDNN disabled
(`torch.native`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from lstmstudy import contract
from lstmstudy.claims import Claim, Lease
from lstmstudy.cudnn_rules import BY_KERNEL
from lstmstudy.frameworks import releases, rows_words
from lstmstudy.frameworks import row_words  # noqa: F401  (`findings` names a row through this claim)
from lstmstudy.parameters import check_bool, check_choices, check_positive_ints
from lstmstudy.rules import Bands, Outcome, Possible, Verdict, combine, settle, span
from lstmstudy.shapes import LSTMShape
from lstmstudy.stats import (
    SHAPE_KEYS,
    fixed_geomean_interval,
    geomean,
    geomean_interval,
    percentile_interval,
    ratios,
    row_replicates,
)

if TYPE_CHECKING:  # measuring imports torch; the analysis below runs without it
    import matplotlib.pyplot as plt

    from lstmstudy.sweep import SweepReport

NAME = "cudnn_fallback"
NUMBER = "01"
STATEMENT = ("Breaking cuDNN's criteria makes an LSTM train on a generic kernel that is 2-5x slower (15x in one "
             "report)")
SEED_FIGURE = ('"generally two to five times slower on GPU" (Chollet, quoted in seed 000); "15x gain over '
               'traditional(non Cuda) LSTM implementation!" (seed 001: RTX 2070, "1012s" with keras.layers.LSTM, '
               '"69s" with CuDNNLSTM)')
#: the seeds' two figures: Chollet's range and the Q&A's one epoch (1012 s over 69 s, 14.7x)
CHOLLET_BAND, QA_FIGURE = (2.0, 5.0), 15.0
#: what the seeds timed: "model training time", one training epoch; inference is shown beside, never deciding
DECIDING_PHASE = "train"
RULE = ("on a GPU set, decided per seed case, in training, the phase both seeds timed: the blog's ReLU layer "
        "(keras.relu over keras.cudnn_auto) and, where the set stores it, the blog's own model (its LeakyReLU(0.05) "
        "over tanh); Chollet's recurrent dropout (keras.recurrent_dropout over keras.cudnn_auto); the Q&A's generic "
        "LSTM against the cuDNN one (keras.generic, use_cudnn=False, over keras.cudnn_auto); each once per Keras "
        "backend measured, on the 95% interval of its geometric-mean slowdown over the grid's configurations (the "
        "blog's model has one; a bootstrap over configurations and each one's rounds and samples): reproduced if it "
        "lies within 2-15x, the span of the seeds' figures (Chollet's 2-5x, the Q&A's 15x), saying which figure it "
        "is near; exceeds the seeds above 15x; partly within 1.25-2x (a slowdown, smaller than the seeds'); not "
        "reproduced below 1.25x; inconclusive if it straddles one of these edges. The set is reproduced if every "
        "case it measured is reproduced or exceeds and at least one is reproduced, exceeds the seeds if all exceed, "
        "not reproduced if none reaches 1.25x, and partly otherwise (the seeds' slowdown in some cases, a smaller "
        "one or none in others: partly means only that the claim holds in part, in a case or in a set); a case "
        "still undecided makes the set inconclusive only where it changes that outcome, and a case the set did not "
        "measure is named and decides nothing. Inference, every other trigger and the "
        "geometric mean pooled over Keras's and PyTorch's triggers are shown beside, never deciding. On a CPU set, "
        "where Keras has no fused LSTM, the same bands decide the CPU analogue on the 95% interval of the "
        "geometric-mean slowdown, in training, of PyTorch's LSTM without oneDNN (torch.native) over oneDNN's fused "
        "one (torch.fused); inference and what the seeds' Keras triggers cost there are shown beside")
BANDS = Bands((1.25, CHOLLET_BAND[0], QA_FIGURE),
              (Outcome.NOT_REPRODUCED, Outcome.PARTLY, Outcome.REPRODUCED, Outcome.EXCEEDS))


def near_seed(low: float, high: float) -> str:
    """Which of the seeds' figures the interval [low, high] lies near, in words: the outcome alone cannot say
    whether a reproduction is Chollet's 2-5x or the Q&A's 15x."""
    marks = [(CHOLLET_BAND[0], "Chollet's 2x"), (CHOLLET_BAND[1], "Chollet's 5x"), (QA_FIGURE, "the Q&A's 15x")]
    crossed = [name for edge, name in marks if low < edge <= high]
    if crossed:
        return "across " + " and ".join(crossed)
    if high < CHOLLET_BAND[0]:
        return "below Chollet's 2-5x"
    if high <= CHOLLET_BAND[1]:
        return "within Chollet's 2-5x"
    return "above Chollet's 2-5x, below the Q&A's 15x" if high <= QA_FIGURE else "above the Q&A's 15x"


#: the fused kernel each framework's triggers are compared with
BASELINES = {"keras": "keras.cudnn_auto", "torch": "torch.fused"}
#: fallback kernel -> (the fused kernel it is compared with, what breaks the criteria): a view of
#: `cudnn_rules.TRIGGER_TABLE`, where a trigger is added
TRIGGERS: dict[str, tuple[str, str]] = {kernel: (BASELINES[kernel.split(".", 1)[0]], row.setting)
                                        for kernel, row in BY_KERNEL.items()}
#: compiled once per configuration (tens of seconds each on a small CPU): measured at the grid's first
#: batch and hidden size only, and left out of quick runs
COMPILED = {"torch.compiled"}
#: a CPU set's verdict: PyTorch's LSTM without oneDNN over oneDNN's fused one (the CPU analogue)
CPU_HEADLINE = ("torch.native",)
#: the triggers whose geometric mean, pooled over Keras's and PyTorch's triggers, decided a GPU set before the seeds'
#: cases did: context now, shown beside the verdict
POOLED = ("keras.recurrent_dropout", "keras.relu", "torch.native")
#: what a ratio pairs on: the configuration and the Keras backend (a jax row is never compared with a torch one)
RATIO_KEYS = [*SHAPE_KEYS, "backend"]


# --- the blog post's model ----------------------------------------------------------------------------

BLOG_KERNEL = "keras.blog_model"
#: The blog post's model: LSTM(64, activation=ReLU(negative_slope=0.05)) -> Dropout(0.2) -> LSTM(32) ->
#: Dropout(0.2) -> Dense(n_features), batch 1, Adam(1e-3), MSE. Its timesteps and features are not given;
#: we assume 32 and 16.
BLOG_SHAPE = LSTMShape(batch=1, timesteps=32, features=16, hidden=64, layers=2)
BLOG_ACTIVATIONS = ("leaky_relu", "tanh")


@dataclass(frozen=True)
class SeedCase:
    """One case a seed timed, as claim 1 measures it: a Keras kernel over its cuDNN baseline (`BLOG_KERNEL`: the
    blog's model with its LeakyReLU over the same model with tanh). `words` name it in a verdict, `short` in a part."""

    kernel: str
    words: str
    short: str


#: the seeds' own cases, in the order a verdict gives them: the blog's, Chollet's, the Q&A's
SEED_CASES = (
    SeedCase("keras.relu", f"the blog's ReLU layer ({TRIGGERS['keras.relu'][1]})", "ReLU"),
    SeedCase(BLOG_KERNEL, "the blog's own model (LeakyReLU(0.05) over tanh)", "blog model"),
    SeedCase("keras.recurrent_dropout",
             f"Chollet's recurrent dropout ({TRIGGERS['keras.recurrent_dropout'][1]})", "recurrent dropout"),
    SeedCase("keras.generic", f"the Q&A's generic LSTM against the cuDNN one ({TRIGGERS['keras.generic'][1]})",
             "generic LSTM"),
)
SEED_KERNELS = tuple(case.kernel for case in SEED_CASES)

#: Why recurrent dropout costs what it does on Keras 3, in the source of the Keras release the stored GPU rows ran
#: on (tests/test_claim_cudnn_fallback.py checks each line against the installed Keras): it keeps the layer off
#: cuDNN even in inference, and it switches the cell to implementation 1 whenever it is set
KERAS_SOURCE = ("3.15.1", "keras/src/layers/rnn/lstm.py")
RECURRENT_DROPOUT_LINES = ((136, "if self.recurrent_dropout != 0.0:"), (137, "self.implementation = 1"),
                           (534, "if not self.recurrent_dropout:"))


def recurrent_dropout_forces() -> str:
    """How Keras 3 switches the cell to implementation 1 whenever recurrent dropout is set, with its source lines:
    what a GPU verdict says beside recurrent dropout's figure (after the release, `KERAS_SOURCE`), and part of
    `recurrent_dropout_source`."""
    path = KERAS_SOURCE[1]
    (forced, test), (_, assign), _ = RECURRENT_DROPOUT_LINES
    return f"forces implementation=1 whenever it is set (`{test} {assign}`, {path} lines {forced}-{forced + 1})"


def recurrent_dropout_source() -> str:
    """The source lines behind recurrent dropout's cost on Keras 3, in words."""
    version, path = KERAS_SOURCE
    blocked, skip = RECURRENT_DROPOUT_LINES[2]
    return (f"Keras {version} skips cuDNN whenever recurrent_dropout is set, even in inference (`{skip}`, {path} "
            f"line {blocked}), and {recurrent_dropout_forces()}: each time step then runs four input and four "
            f"recurrent matmuls on sliced weights, one per gate, where implementation 2 runs one fused pair")


# --- what the rows ran on -------------------------------------------------------------------------------

BACKEND_NOTES = {
    "torch": "eager: where cuDNN is lost, a Python loop of single ops, not the TensorFlow graph loop the seeds timed",
    "jax": "XLA-compiled: where cuDNN is lost, a compiled loop, the closest this study has to the TensorFlow graph "
           "loop the seeds timed; cuDNN through jax.experimental.rnn",
    "tensorflow": "the seeds' own framework: where cuDNN is lost, TensorFlow's graph loop",
}


def _with_backend(results: pd.DataFrame) -> pd.DataFrame:
    """`results` with a `backend` column of strings ('' for torch rows and where none was recorded)."""
    backend = results["backend"] if "backend" in results.columns else pd.Series("", index=results.index)
    return results.assign(backend=backend.fillna("").astype(str))


def backend_note(rows: pd.DataFrame) -> str:
    """What the generic kernel is on the rows' Keras backend, with jax's release where it was recorded."""
    rows = _with_backend(rows)
    backend = rows.backend.iloc[0]
    note = BACKEND_NOTES.get(backend, "")
    if backend == "jax" and "versions" in rows.columns:
        jax = releases(rows["versions"], "jax")
        note = f"jax {jax}, {note}" if jax else note
    return note


def sets_backends(results: pd.DataFrame) -> str:
    """Per GPU set, what its Keras rows ran on, one sentence each (the page says it before any figure)."""
    if results.empty:
        return "No GPU set is stored."
    rows = _with_backend(results[results.kernel.str.startswith("keras.") & (results.status == "ok")])
    out = []
    for hardware_id in sorted(h for h in results.hardware_id.unique() if h.startswith("cuda-")):
        mine = rows[rows.hardware_id == hardware_id]
        groups = [f"{rows_words(part)} ({len(part)} rows)" for _, part in mine.groupby("backend", sort=True)]
        out.append(f"On {hardware_id} the Keras rows ran on {' and '.join(groups)}." if groups else
                   f"On {hardware_id} no Keras row was timed.")
    return " ".join(out) or "No GPU set is stored."


# --- the grid -------------------------------------------------------------------------------------------

def grid(*, kind: str, quick: bool, batches: Sequence[int], hiddens: Sequence[int], timesteps: int,
         features: int, phases: Sequence[str], blog_model: bool = True, compiled: bool = True,
         kernel_names: Sequence[str] | None = None) -> list[contract.Point]:
    """Every trigger and its fused baseline at every batch x hidden size and phase, then the blog's model;
    `compiled`: torch.compiled too, at the first batch and hidden size (each phase one Inductor compile).

    The same grid on every device kind (`kind` is part of the contract; the defaults differ by kind).
    """
    names = list(kernel_names or sorted({*TRIGGERS, *(base for base, _ in TRIGGERS.values())}))
    if quick:
        batches, hiddens, timesteps = batches[:1], hiddens[:1], min(timesteps, 8)
    if quick or not compiled:
        names = [n for n in names if n not in COMPILED]
    first = (batches[0], hiddens[0])
    points = [contract.Point(kernel, LSTMShape(batch=b, timesteps=timesteps, features=features, hidden=h), phase=phase)
              for phase in phases for b in batches for h in hiddens for kernel in names
              if kernel not in COMPILED or (b, h) == first]
    return points + (blog_points(phases) if blog_model else [])


def measure(points: list[contract.Point], *, device: str, min_time: float, quick: bool = False,
            **sweep_options) -> list[SweepReport]:
    """Measure the points not yet stored for this hardware (the blog model's among them)."""
    from lstmstudy import kernels, sweep, timing

    return [sweep.run(NAME, points, kernels.prepare, timing.plan(min_time, quick), device=device, **sweep_options)]


def check_parameters(parameters: dict) -> None:
    check_positive_ints(batches=parameters["batches"], hiddens=parameters["hiddens"],
                        timesteps=[parameters["timesteps"]], features=[parameters["features"]])
    check_choices("phases", parameters["phases"], contract.PHASES)
    check_bool(blog_model=parameters["blog_model"], compiled=parameters["compiled"])


# --- the slowdowns ----------------------------------------------------------------------------------------

def slowdowns(results: pd.DataFrame, triggers: Sequence[str] | None = None) -> pd.DataFrame:
    """Every trigger's median time over its fused baseline's at the same configuration and Keras backend, with
    bootstrap CIs; only `triggers` where given (the explainer quotes one, and each bootstrap is seeded, so a
    trigger's figures are the same either way)."""
    wanted = TRIGGERS if triggers is None else {k: TRIGGERS[k] for k in triggers}
    results = _with_backend(results)
    parts = [ratios(results, baseline, [k for k, (b, _) in wanted.items() if b == baseline], keys=RATIO_KEYS)
             for baseline in sorted({b for b, _ in wanted.values()})]
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not out.empty:
        out["trigger"] = out.kernel.map(lambda k: TRIGGERS[k][1])
    return out


def blog_slowdowns(results: pd.DataFrame) -> pd.DataFrame:
    """The blog model's step with its LeakyReLU over the same model with tanh, per set, phase and Keras backend,
    with the bootstrap replicates the verdict reads (the two rows are one comparison, paired where interleaved)."""
    columns = ["hardware_id", "phase", "backend", "kernel", "ratio", "ratio_lo", "ratio_hi", "replicates"]
    blog = _with_backend(results[(results.kernel == BLOG_KERNEL) & (results.status == "ok")]) \
        if not results.empty else results
    if blog.empty:
        return pd.DataFrame(columns=columns)
    blog = blog.assign(activation=blog.config.map(lambda c: json.loads(c).get("activation", "")))
    rows = []
    for (hardware_id, phase, backend), part in blog.groupby(["hardware_id", "phase", "backend"], sort=True):
        leaky, tanh = (part[part.activation == name] for name in BLOG_ACTIVATIONS)
        if leaky.empty or tanh.empty:
            continue
        ratio, boot = row_replicates(leaky.iloc[-1], tanh.iloc[-1])
        rows.append({"hardware_id": hardware_id, "phase": phase, "backend": backend, "kernel": BLOG_KERNEL,
                     "ratio": ratio, **dict(zip(("ratio_lo", "ratio_hi"), percentile_interval(boot))),
                     "replicates": boot})
    return pd.DataFrame(rows, columns=columns)


@dataclass(frozen=True)
class CaseResult:
    """One seed case on one set and Keras backend in one phase: its geometric-mean slowdown over the configurations
    measured, the 95% interval the rule reads, and what it ran on (`framework`)."""

    case: SeedCase
    backend: str
    framework: str
    figure: float
    low: float
    high: float
    configurations: int

    @property
    def possible(self) -> Possible:
        return BANDS.possible(self.low, self.high)

    @property
    def outcome(self) -> Outcome:
        return BANDS.decide(self.low, self.high)

    @property
    def part(self) -> tuple[str, float, float]:
        """The verdict's part: its name says the case and what it ran on, the Keras release and backend ('ReLU
        (Keras 3.15 on its torch backend)', `frameworks.framework_words`), as the landing table and figure show it."""
        return f"{self.case.short} ({self.framework})", self.low, self.high

    @property
    def figure_text(self) -> str:
        n = f", {self.configurations} configurations" if self.configurations > 1 else ""
        return f"{self.figure:.2f}x (95% interval {self.low:.2f}-{self.high:.2f}{n})"


def case_results(results: pd.DataFrame, table: pd.DataFrame, hardware_id: str, phase: str) -> list[CaseResult]:
    """Every seed case `hardware_id` measured in `phase`, per Keras backend, in `SEED_CASES`' order within each
    backend; `table` is `slowdowns(results)`."""
    mine = _with_backend(results[results.hardware_id == hardware_id])
    rows = {case.kernel: table[(table.hardware_id == hardware_id) & (table.phase == phase)
                               & (table.kernel == case.kernel)] if not table.empty else table
            for case in SEED_CASES if case.kernel != BLOG_KERNEL}
    blog = blog_slowdowns(mine)
    rows[BLOG_KERNEL] = blog[blog.phase == phase]
    out = []
    for backend in sorted({b for part in rows.values() if not part.empty for b in part.backend}):
        for case in SEED_CASES:
            part = rows[case.kernel]
            part = part[part.backend == backend] if not part.empty else part
            if part.empty:
                continue
            ran = mine[(mine.kernel == case.kernel) & (mine.backend == backend) & (mine.status == "ok")]
            low, high = geomean_interval(list(part.replicates))
            out.append(CaseResult(case, backend, rows_words(ran, "keras", backend), geomean(part.ratio), low, high,
                                  len(part)))
    return out


def seed_cases_decided(outcomes: Sequence[Outcome]) -> Outcome:
    """How the seed cases' decided outcomes make a set's: reproduced when every case is reproduced or exceeds and
    one is reproduced, exceeds when all exceed, not reproduced when all fail, partly otherwise."""
    found = set(outcomes)
    if found <= {Outcome.REPRODUCED, Outcome.EXCEEDS}:
        return Outcome.EXCEEDS if found == {Outcome.EXCEEDS} else Outcome.REPRODUCED
    return Outcome.NOT_REPRODUCED if found == {Outcome.NOT_REPRODUCED} else Outcome.PARTLY


def op_counts(results: pd.DataFrame, hardware_id: str, backend: str, kernel: str, phase: str = "inference") -> str:
    """The ATen ops one call of `kernel` ran on a set and backend, as its rows' profiler recorded them
    (`observed_detail`): '3,834' or a range over configurations '3,834-3,960'; '' where not recorded."""
    if "observed_detail" not in results.columns:
        return ""
    rows = _with_backend(results)
    rows = rows[(rows.hardware_id == hardware_id) & (rows.backend == backend) & (rows.kernel == kernel)
                & (rows.phase == phase) & (rows.status == "ok")]
    counts = sorted({json.loads(d)["aten_ops"] for d in rows.observed_detail if isinstance(d, str) and "aten_ops" in d})
    if not counts:
        return ""
    return f"{counts[0]:,}" if len(counts) == 1 else f"{counts[0]:,}-{counts[-1]:,}"


def recurrent_dropout_why(results: pd.DataFrame) -> str:
    """Why recurrent dropout costs what it does on Keras 3 (`recurrent_dropout_source`), with the ATen ops one
    inference call of it and of the ReLU layer ran on each GPU set where the profiler counted them."""
    counted = []
    rows = _with_backend(results) if not results.empty else results
    gpu = rows[rows.hardware_id.str.startswith("cuda-") & (rows.kernel == "keras.recurrent_dropout")] \
        if not rows.empty else rows
    for (hardware_id, backend), ran in (gpu.groupby(["hardware_id", "backend"]) if not gpu.empty else []):
        dropout, relu = (op_counts(rows, hardware_id, backend, k) for k in ("keras.recurrent_dropout", "keras.relu"))
        if dropout and relu:
            counted.append(f"on {hardware_id} ({rows_words(ran)}) one inference call with recurrent dropout ran "
                           f"{dropout} ATen ops against {relu} for the ReLU layer")
    return recurrent_dropout_source() + (f"; {'; '.join(counted)}" if counted else "")


def _geomean_text(part: pd.DataFrame) -> tuple[float, float, float, str]:
    """The geometric-mean slowdown of `part`'s configurations, its 95% interval, and the figure in words."""
    figure = geomean(part.ratio)
    low, high = geomean_interval(list(part.replicates))
    noise_low, noise_high = fixed_geomean_interval(list(part.replicates))
    return figure, low, high, (f"{figure:.2f}x (95% interval over configurations {low:.2f}-{high:.2f}; measurement "
                               f"noise alone {noise_low:.2f}-{noise_high:.2f}; geometric mean of {len(part)} "
                               f"configurations: {', '.join(sorted(part.kernel.unique()))} over the fused kernel)")


def _others_text(results: pd.DataFrame, table: pd.DataFrame, hardware_id: str) -> str:
    """Every trigger that is no seed case, per framework and backend, in training: context."""
    mine = table[(table.hardware_id == hardware_id) & (table.phase == DECIDING_PHASE)
                 & ~table.kernel.isin(SEED_KERNELS)] if not table.empty else table
    rows = _with_backend(results[results.hardware_id == hardware_id])
    groups = []
    for (framework, backend), part in (mine.groupby([mine.kernel.str.split(".").str[0], "backend"], sort=True)
                                       if not mine.empty else []):
        ran = rows[rows.kernel.isin(part.kernel) & (rows.backend == backend)]
        each = [f"{TRIGGERS[kernel][1]} {geomean(p.ratio):.2f}x ({kernel})" for kernel, p in part.groupby("kernel")]
        groups.append(f"{rows_words(ran, framework, backend)}: {', '.join(each)}")
    return "; ".join(groups)


def gpu_verdict(results: pd.DataFrame, table: pd.DataFrame, hardware_id: str) -> Verdict:
    """A GPU set's verdict: the seed cases in training decide, each a part (`RULE`); the rest is context."""
    deciding = case_results(results, table, hardware_id, DECIDING_PHASE)
    beside = case_results(results, table, hardware_id, "inference")
    measured = {(c.case.kernel, c.backend) for c in deciding}
    backends = sorted({c.backend for c in deciding})
    missing = [case.words for case in SEED_CASES
               if not any((case.kernel, backend) in measured for backend in backends)]
    context = []
    if beside:
        context.append("in inference: " + ", ".join(f"{c.case.short} {c.figure:.2f}x" + (
            f" ({c.backend})" if len(backends) > 1 else "") for c in beside))
    if others := _others_text(results, table, hardware_id):
        context.append(f"every other trigger in training: {others}")
    pooled = table[(table.hardware_id == hardware_id) & (table.phase == DECIDING_PHASE)
                   & table.kernel.isin(POOLED)] if not table.empty else table
    if not pooled.empty:
        figure, low, high, _ = _geomean_text(pooled)
        kernels = sorted(pooled.kernel.unique())
        named = f"{', '.join(kernels[:-1])} and {kernels[-1]}" if len(kernels) > 1 else kernels[0]
        context.append(f"the geometric mean pooled over {len(pooled)} configurations of {named} {figure:.2f}x (95% "
                       f"interval {low:.2f}-{high:.2f})")
    beside_text = f"; beside, not deciding: {'; '.join(context)}" if context else ""
    if not deciding:
        names = ", ".join(case.words for case in SEED_CASES)
        return Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None,
                       f"not measured in {DECIDING_PHASE}: none of the seeds' own cases ({names}){beside_text}",
                       Outcome.NOT_MEASURED, RULE)
    groups = []
    for backend in backends:
        cases = [c for c in deciding if c.backend == backend]
        ran = _with_backend(results[(results.hardware_id == hardware_id)
                                    & results.kernel.isin([c.case.kernel for c in cases])])
        ran = ran[ran.backend == backend]
        note = backend_note(ran)
        each = []
        for c in cases:
            why = (f" (Keras {KERAS_SOURCE[0]} {recurrent_dropout_forces()})"
                   if c.case.kernel == "keras.recurrent_dropout" else "")
            each.append(f"{c.case.words} {c.figure_text}: {c.outcome.value}, {near_seed(c.low, c.high)}{why}")
        groups.append(f"{cases[0].framework}{f' ({note})' if note else ''}, in training: {'; '.join(each)}")
    text = "; ".join(groups)
    if missing:
        text += f"; not measured on this set, deciding nothing: {', '.join(missing)}"
    outcome = settle(combine([c.possible for c in deciding], seed_cases_decided))
    return Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, text + beside_text, outcome, RULE,
                   parts=tuple(c.part for c in deciding))


def seeds_triggers_on_cpu(table: pd.DataFrame, hardware_id: str, results: pd.DataFrame | None = None) -> str:
    """What the seeds' own triggers (a ReLU, recurrent dropout) cost on a CPU set, in training, per Keras backend:
    Keras has no fused CPU kernel to fall back from, so what they cost there is the work they add, not a lost kernel;
    '' where the set did not time them. `results` (the rows) gives each backend's Keras release."""
    mine = table[(table.hardware_id == hardware_id) & (table.phase == DECIDING_PHASE)
                 & table.kernel.isin(POOLED) & table.kernel.str.startswith("keras.")]
    if mine.empty:
        return ""
    rows = _with_backend(results) if results is not None else None
    groups = []
    for backend, part in mine.groupby("backend", sort=True):
        each = [f"{TRIGGERS[kernel][1]} {geomean(p.ratio):.2f}x" for kernel, p in part.groupby("kernel")]
        ran = rows[(rows.hardware_id == hardware_id) & rows.kernel.isin(part.kernel) & (rows.backend == backend)] \
            if rows is not None else rows
        groups.append(f"{', '.join(each)} on {rows_words(ran, 'keras', backend)}")
    return (f"the seeds' own triggers cost {'; '.join(groups)} here (Keras has no fused LSTM on a CPU to fall back "
            f"from)")


def cpu_verdict(results: pd.DataFrame, table: pd.DataFrame, hardware_id: str) -> Verdict:
    """A CPU set's verdict: the CPU analogue (`CPU_HEADLINE` in training), inference and the seeds' triggers beside."""
    mine = (table[(table.hardware_id == hardware_id) & table.kernel.isin(CPU_HEADLINE)] if not table.empty else table)
    deciding = mine[mine.phase == DECIDING_PHASE] if not mine.empty else mine
    if deciding.empty:
        return Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, f"not measured in {DECIDING_PHASE}",
                       Outcome.NOT_MEASURED, RULE)
    figure, low, high, text = _geomean_text(deciding)
    text = f"training: {text}, {near_seed(low, high)}"
    beside = mine[mine.phase != DECIDING_PHASE]
    if not beside.empty:
        text += f"; inference, beside it and not deciding: {_geomean_text(beside)[3]}"
    cpu = seeds_triggers_on_cpu(table, hardware_id, results)
    text = (f"CPU analogue, oneDNN's fused LSTM against the same module without it, standing in for cuDNN against the "
            f"generic kernel: {text}" + (f"; {cpu}" if cpu else ""))
    return Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, figure, text, BANDS.decide(low, high), RULE, low, high)


def verdicts(results: pd.DataFrame) -> list[Verdict]:
    """One verdict per hardware set: on a GPU the seeds' own cases decide, per Keras backend (`gpu_verdict`); on a
    CPU its analogue with oneDNN standing in for cuDNN (`cpu_verdict`), saying what the seeds' triggers cost there."""
    if results.empty:
        return []
    table = slowdowns(results)
    return [(gpu_verdict if hardware_id.startswith("cuda-") else cpu_verdict)(results, table, hardware_id)
            for hardware_id in sorted(results.hardware_id.unique())]


def blog_points(phases: Sequence[str]) -> list[contract.Point]:
    return [contract.Point(BLOG_KERNEL, BLOG_SHAPE, phase=phase, config={"activation": activation})
            for phase in phases for activation in BLOG_ACTIVATIONS]


def blog_table(results: pd.DataFrame) -> pd.DataFrame:
    """The blog model's step time with the LeakyReLU activation over the default tanh, per hardware, Keras backend
    and phase."""
    blog = results[(results.kernel == BLOG_KERNEL) & (results.status == "ok")].copy() if not results.empty else results
    if blog.empty:
        return pd.DataFrame(columns=["hardware_id", "backend", "phase", "tanh ms", "leaky_relu ms", "slowdown"])
    blog = _with_backend(blog)
    blog["activation"] = blog.config.map(lambda c: json.loads(c)["activation"])
    wide = blog.pivot_table(index=["hardware_id", "backend", "phase"], columns="activation", values="median_s") * 1e3
    wide = wide.rename(columns=lambda a: f"{a} ms")
    wide["slowdown"] = wide["leaky_relu ms"] / wide["tanh ms"]
    return wide.reset_index()


def blog_view(results: pd.DataFrame) -> pd.DataFrame:
    """`blog_table` as the page folds it: readable column names, the set's kind and Keras backend, three significant
    figures."""
    table = blog_table(results)
    out = pd.DataFrame({
        "hardware set": [f"{h} ({'GPU' if h.startswith('cuda-') else 'CPU only'})" for h in table.hardware_id],
        "Keras backend": table.backend, "phase": table.phase,
        "LeakyReLU (ms)": table["leaky_relu ms"], "tanh (ms)": table["tanh ms"],
        "LeakyReLU / tanh (x)": table.slowdown})
    return out.map(lambda v: float(f"{v:.3g}") if isinstance(v, float) else v)


#: the blog model's two activations as the page names them
BLOG_WORDS = {"leaky_relu": "LeakyReLU", "tanh": "tanh"}


def blog_steps(results: pd.DataFrame) -> pd.DataFrame:
    """The blog's own model, one row per hardware set, phase and activation: its median step time and interquartile
    range (ms), whether the set is a GPU's, and what ran it (`framework`: 'Keras 3.15 on its torch backend'), GPU sets
    first. The page leads with it: it is the model the reader's own LSTM most resembles."""
    columns = ["hardware_id", "gpu", "framework", "phase", "activation", "ms", "p25_ms", "p75_ms"]
    blog = results[(results.kernel == BLOG_KERNEL) & (results.status == "ok")] if not results.empty else results
    if blog.empty:
        return pd.DataFrame(columns=columns)
    blog = _with_backend(blog)
    out = pd.DataFrame({
        "hardware_id": blog.hardware_id, "gpu": blog.hardware_id.str.startswith("cuda-"),
        "framework": [rows_words(blog.loc[[i]]) for i in blog.index], "phase": blog.phase,
        "activation": blog.config.map(lambda c: BLOG_WORDS[json.loads(c)["activation"]]),
        "ms": blog.median_s * 1e3, "p25_ms": blog.p25_s * 1e3, "p75_ms": blog.p75_s * 1e3})
    return out.sort_values(["gpu", "hardware_id", "phase", "activation"], ascending=[False, True, False, True],
                           ignore_index=True)[columns]


def blog_sentence(results: pd.DataFrame) -> str:
    """The blog model's step times on every stored set in one sentence, GPU sets first: what a reader whose Keras
    LSTM got slower on a GPU meets, with the Keras release and backend each side ran on, since Keras on a GPU and on
    a CPU need not have run on the same backend (then the sentence compares what each user meets, not two devices)."""
    steps = blog_steps(results)
    if steps.empty:
        return "The blog's own model was not timed on any stored set."
    leaky = steps[steps.activation == "LeakyReLU"]
    clauses = []
    for hardware_id, part in steps[steps.gpu].groupby("hardware_id", sort=True):
        train = part[part.phase == DECIDING_PHASE].set_index("activation").ms
        if {"LeakyReLU", "tanh"} <= set(train.index):
            clauses.append(f"on the GPU {hardware_id} ({part.framework.iloc[0]}) one training step of the blog's own "
                           f"model at batch 1 took {train['LeakyReLU']:.3g} ms, "
                           f"{train['LeakyReLU'] / train['tanh']:.3g}x the {train['tanh']:.3g} ms of its tanh twin, "
                           f"which keeps cuDNN")
    cpus = leaky[~leaky.gpu]
    if not cpus.empty:
        frameworks = " and ".join(sorted(set(cpus.framework)))
        count = cpus.hardware_id.nunique()
        clauses.append(f"on the {count} CPU-only set{'s' if count > 1 else ''} ({frameworks}, where no Keras LSTM has "
                       f"a fused kernel to lose) it took {span(cpus[cpus.phase == DECIDING_PHASE].ms)} ms")
    inference = leaky[leaky.phase == "inference"]
    if inference.gpu.any() and (~inference.gpu).any():
        clauses.append(f"a prediction took {span(inference[inference.gpu].ms)} ms on the GPU against "
                       f"{span(inference[~inference.gpu].ms)} ms on the CPUs")
    sentence = "; ".join(clauses)
    sentence = sentence[0].upper() + sentence[1:] + " (median step times)"
    on_gpu = set(leaky[leaky.gpu].framework)
    if on_gpu and not cpus.empty and on_gpu != set(cpus.framework):
        sentence += (": the GPU and the CPUs ran Keras on different backends, so this is what a user of each meets, "
                     "not a comparison of two devices")
    return sentence + "."


def blog_figure(results: pd.DataFrame) -> plt.Figure | None:
    """The blog model's median step time per hardware set (a bar per phase and activation, the interquartile range as
    whiskers, log scale), each set named as a GPU or as CPU only with its Keras backend; None where it was not timed.
    One panel, sized to be read at a page's width."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullFormatter

    from lstmstudy.plots import kernel_colour

    steps = blog_steps(results)
    if steps.empty:
        return None
    sets = list(dict.fromkeys(steps.hardware_id))
    series = [(phase, activation) for phase in ("train", "inference") for activation in ("LeakyReLU", "tanh")]
    # the book's kernel colours: LeakyReLU is the blog model's own kernel, tanh keeps cuDNN's; inference is hatched
    colours = {activation: kernel_colour(kernel) for activation, kernel in (("LeakyReLU", BLOG_KERNEL),
                                                                            ("tanh", "keras.cudnn_auto"))}
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.8 * len(sets)))
    height = 0.8 / len(series)
    for i, key in enumerate(series):
        part = steps[(steps.phase == key[0]) & (steps.activation == key[1])].set_index("hardware_id").reindex(sets)
        y = [s + (i - (len(series) - 1) / 2) * height for s in range(len(sets))]
        ax.barh(y, part.ms, height=height, color=colours[key[1]], hatch="//" if key[0] == "inference" else "",
                edgecolor="white", label=f"{key[0]}, {key[1]}")
        ax.errorbar(part.ms, y, xerr=[part.ms - part.p25_ms, part.p75_ms - part.ms], fmt="none", color="black",
                    capsize=2, linewidth=0.8)
    first = steps.drop_duplicates("hardware_id").set_index("hardware_id")
    ax.set_yticks(range(len(sets)), [f"{h}\n({'GPU' if first.gpu[h] else 'CPU only'}; {first.framework[h]})"
                                     for h in sets], fontsize=10)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator([0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]))
    ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="x", labelsize=10)
    ax.set_xlabel("median step time at batch 1 (ms, log scale); whiskers: interquartile range", fontsize=10)
    ax.set_title("The blog post's model with LeakyReLU and with tanh, per hardware set", fontsize=11)
    fig.legend(*ax.get_legend_handles_labels(), title="phase, activation", fontsize=10, title_fontsize=10, ncol=2,
               loc="lower center")
    fig.tight_layout(rect=(0, 0.8 / fig.get_figheight(), 1, 1))
    return fig


def label(kernel: str, backend: str) -> str:
    """A kernel as figures name it: with its Keras backend where it has one ('keras.relu on torch')."""
    return f"{kernel} on {backend}" if backend else kernel


def labelled(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` (rows or slowdowns) with a `label` column (`label`): a figure's lines and bars per kernel and backend."""
    frame = _with_backend(frame)
    return frame.assign(label=[label(k, b) for k, b in zip(frame.kernel, frame.backend)])


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """One slowdown per hardware set, fallback kernel, Keras backend and phase: the geometric mean over the grid,
    with the interval over configurations and samples the verdict uses (`stats.geomean_interval`); `label` names the
    kernel with its Keras backend ('keras.relu on torch')."""
    if table.empty:
        return table
    table = _with_backend(table)
    rows = []
    for (hardware_id, kernel, backend, phase), part in table.groupby(["hardware_id", "kernel", "backend", "phase"]):
        low, high = geomean_interval(list(part.replicates))
        rows.append({"hardware_id": hardware_id, "kernel": kernel, "backend": backend,
                     "label": label(kernel, backend), "phase": phase,
                     "ratio": geomean(part.ratio), "ratio_lo": low, "ratio_hi": high})
    return pd.DataFrame(rows)


#: the triggers a lease times with their fused kernels: the seeds' Keras cases (the blog's model is a grid option the
#: lease leaves off), which the verdict reads; PyTorch's own loop, which only the pooled context reads, comes with the
#: default grid after the lease's five claims (a `stats.MIN_CALLS` lease cannot pay for it first)
LEASE_TRIGGERS = frozenset(SEED_KERNELS) - {BLOG_KERNEL}

CLAIM = Claim(
    says=(
        "An LSTM that breaks cuDNN's criteria (a ReLU activation, recurrent dropout; the Q&A adds "
        "masking) silently falls back to a generic kernel 2-5x slower, 15x in one report. The study also "
        "tests the other requirements of the Keras `LSTM` documentation {cite:p}`keras-lstm-api` "
        "(`unroll`, no bias, a mask whose inputs are not \"strictly right-padded\"), which the sources do "
        "not list."),
    bands=BANDS,
    figure_words="slowdown {}",
    advice=("**Does your LSTM keep cuDNN's fused kernel?** A ReLU activation, recurrent dropout, `unroll` or a mask "
            "silently send a Keras LSTM to a generic kernel; `lstmstudy explain model.keras` says which, without a GPU. "
            "What the generic kernel costs depends on the Keras backend (on torch, measured here, a Python loop; on "
            "TensorFlow, a graph loop)."),
    number=NUMBER, name=NAME, statement=STATEMENT, seed_figure=SEED_FIGURE, rule=RULE,
    source="blog post (seed 000), quoting Chollet; Q&A (seed 001)",
    citations=("blogpost-lstm-gpu", "chollet-dlwp2", "so-cudnnlstm"),
    defaults={
        # 84 points: torch.compiled left out, as Inductor's two compiles took 50 s of the claim's 170 on 2 cores
        "cpu": dict(batches=[1, 32], hiddens=[64, 256], timesteps=32, features=32, phases=list(contract.PHASES),
                    blog_model=True, compiled=False),
        # 86 points; a GPU makes the larger hidden size cheap
        "cuda": dict(batches=[1, 64], hiddens=[64, 512], timesteps=32, features=32, phases=list(contract.PHASES),
                     blog_model=True, compiled=True),
    },
    grid=grid, measure=measure, verdicts=verdicts, check=check_parameters,
    analogue=("PyTorch's oneDNN fused LSTM against the same module without it stands in for cuDNN against the "
              "generic kernel, a trigger no seed names. The seeds' own triggers lose no kernel on a CPU, since Keras "
              "has no fused LSTM there: each CPU verdict below gives what they cost instead, the work they add"),
    # a GPU: 0.5 s a point on the first lease, plus 0.28 s for the calls its rows of under `stats.MIN_CALLS` lacked
    # and 0.1 s for the profiled pass of each row's device time
    seconds_per_point={"cpu": 1.9, "cuda": 0.9}, slow=frozenset(COMPILED),
    # the verdict reads the seeds' Keras cases over their cuDNN kernel at every configuration (32 points); the other
    # triggers, PyTorch's own loop, the blog's model and the compiles are context, measured after the lease's five
    # claims
    lease=Lease(overrides={"blog_model": False, "compiled": False},
                kernels=frozenset({*LEASE_TRIGGERS, *(TRIGGERS[k][0] for k in LEASE_TRIGGERS)})),
)
