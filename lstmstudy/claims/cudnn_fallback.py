"""Claim 1: an LSTM that breaks cuDNN's criteria silently falls back to a generic kernel 2-5x slower.

Seeds: Chollet (Deep Learning with Python, 2nd ed., quoted in the blog post 000): recurrent dropout
"forces the runtime to fall back to the regular TensorFlow implementation, which is generally two to
five times slower on GPU"; the Q&A (001): "15x gain over traditional(non Cuda) LSTM implementation!"
(CuDNNLSTM "69s" against LSTM "1012s" for one epoch on an RTX 2070), and "training a model with LSTM
took 10mins 30seconds. Simply switching the call from LSTM() to CuDNNLSTM() took less than a minute".

Each trigger is compared with the fused kernel of its own framework at the same configuration:
Keras triggers against `keras.cudnn_auto`, PyTorch's generic paths against `torch.fused`. On a CPU,
Keras has no fused LSTM at all (cuDNN is GPU-only), so the CPU form of the claim is PyTorch's oneDNN
fused LSTM against the same module with oneDNN disabled (`torch.native`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from lstmstudy import contract
from lstmstudy.claims import Claim, Lease
from lstmstudy.cudnn_rules import BY_KERNEL
from lstmstudy.parameters import check_bool, check_choices, check_positive_ints
from lstmstudy.rules import Bands, Outcome, Verdict
from lstmstudy.shapes import LSTMShape
from lstmstudy.stats import fixed_geomean_interval, geomean, geomean_interval, ratios

if TYPE_CHECKING:  # measuring imports torch; the analysis below runs without it
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
RULE = ("decided on the 95% interval of the geometric-mean slowdown of the fallback over the fused kernel in "
        "training, the phase both seeds timed (a bootstrap over the grid's configurations and each one's rounds and "
        "samples: the seeds speak of LSTMs in general, not of one shape, so the spread between shapes belongs in the "
        "interval; the measurement noise alone and inference are shown beside it): reproduced if it lies within "
        "2-15x, the span of the seeds' figures (Chollet's 2-5x, the Q&A's 15x), saying which figure it is near; "
        "exceeds the seeds if it lies above 15x; partly if within 1.25-2x; not reproduced if below 1.25x; "
        "inconclusive if it straddles one of these edges")
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
#: the comparison that carries the verdict, per device kind
HEADLINE = {"cuda": ("keras.recurrent_dropout", "keras.relu", "torch.native"), "cpu": ("torch.native",)}


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


def slowdowns(results: pd.DataFrame, triggers: Sequence[str] | None = None) -> pd.DataFrame:
    """Every trigger's median time over its fused baseline's, with bootstrap CIs; only `triggers` where given (the
    explainer quotes one, and each bootstrap is seeded, so a trigger's figures are the same either way)."""
    wanted = TRIGGERS if triggers is None else {k: TRIGGERS[k] for k in triggers}
    parts = [ratios(results, baseline, [k for k, (b, _) in wanted.items() if b == baseline])
             for baseline in sorted({b for b, _ in wanted.values()})]
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if not out.empty:
        out["trigger"] = out.kernel.map(lambda k: TRIGGERS[k][1])
    return out


def _geomean_text(part: pd.DataFrame) -> tuple[float, float, float, str]:
    """The geometric-mean slowdown of `part`'s configurations, its 95% interval, and the figure in words."""
    figure = geomean(part.ratio)
    low, high = geomean_interval(list(part.replicates))
    noise_low, noise_high = fixed_geomean_interval(list(part.replicates))
    return figure, low, high, (f"{figure:.2f}x (95% interval over configurations {low:.2f}-{high:.2f}; measurement "
                               f"noise alone {noise_low:.2f}-{noise_high:.2f}; geometric mean of {len(part)} "
                               f"configurations: {', '.join(sorted(part.kernel.unique()))} over the fused kernel)")


def seeds_triggers_on_cpu(table: pd.DataFrame, hardware_id: str) -> str:
    """What the seeds' own triggers (a ReLU, recurrent dropout) cost on a CPU set, in training: Keras has no fused
    CPU kernel to fall back from, so what they cost there is the work they add, not a lost kernel; '' where the set
    did not time them."""
    mine = table[(table.hardware_id == hardware_id) & (table.phase == DECIDING_PHASE)
                 & table.kernel.isin(HEADLINE["cuda"]) & table.kernel.str.startswith("keras.")]
    if mine.empty:
        return ""
    parts = [f"{TRIGGERS[kernel][1]} {geomean(part.ratio):.2f}x" for kernel, part in mine.groupby("kernel")]
    return (f"the seeds' own triggers cost {', '.join(parts)} here (Keras has no fused LSTM on a CPU to fall back "
            f"from)")


def verdicts(results: pd.DataFrame) -> list[Verdict]:
    """One verdict per hardware set, from the headline comparison of its device kind in training (`DECIDING_PHASE`),
    with inference beside it. On a CPU it stands in for cuDNN with oneDNN, and says what the seeds' own triggers
    cost there."""
    table = slowdowns(results)
    out = []
    for hardware_id in sorted(results.hardware_id.unique()) if not results.empty else []:
        kind = "cuda" if hardware_id.startswith("cuda-") else "cpu"
        mine = (table[(table.hardware_id == hardware_id) & table.kernel.isin(HEADLINE[kind])]
                if not table.empty else table)
        deciding = mine[mine.phase == DECIDING_PHASE] if not mine.empty else mine
        if deciding.empty:
            out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, None, f"not measured in {DECIDING_PHASE}",
                               Outcome.NOT_MEASURED, RULE))
            continue
        figure, low, high, text = _geomean_text(deciding)
        text = f"training: {text}, {near_seed(low, high)}"
        beside = mine[mine.phase != DECIDING_PHASE]
        if not beside.empty:
            text += f"; inference, beside it and not deciding: {_geomean_text(beside)[3]}"
        if kind == "cpu":
            cpu = seeds_triggers_on_cpu(table, hardware_id)
            text = (f"CPU analogue, oneDNN's fused LSTM against the same module without it, standing in for cuDNN "
                    f"against the generic kernel: {text}" + (f"; {cpu}" if cpu else ""))
        out.append(Verdict(NAME, STATEMENT, hardware_id, SEED_FIGURE, figure, text, BANDS.decide(low, high), RULE,
                           low, high))
    return out


# --- the blog post's model ----------------------------------------------------------------------------

BLOG_KERNEL = "keras.blog_model"
#: The blog post's model: LSTM(64, activation=ReLU(negative_slope=0.05)) -> Dropout(0.2) -> LSTM(32) ->
#: Dropout(0.2) -> Dense(n_features), batch 1, Adam(1e-3), MSE. Its timesteps and features are not given;
#: we assume 32 and 16.
BLOG_SHAPE = LSTMShape(batch=1, timesteps=32, features=16, hidden=64, layers=2)
BLOG_ACTIVATIONS = ("leaky_relu", "tanh")


def blog_points(phases: Sequence[str]) -> list[contract.Point]:
    return [contract.Point(BLOG_KERNEL, BLOG_SHAPE, phase=phase, config={"activation": activation})
            for phase in phases for activation in BLOG_ACTIVATIONS]


def blog_table(results: pd.DataFrame) -> pd.DataFrame:
    """The blog model's step time with the LeakyReLU activation over the default tanh, per hardware and phase."""
    blog = results[(results.kernel == BLOG_KERNEL) & (results.status == "ok")].copy()
    if blog.empty:
        return pd.DataFrame(columns=["hardware_id", "phase", "tanh ms", "leaky_relu ms", "slowdown"])
    blog["activation"] = blog.config.map(lambda c: json.loads(c)["activation"])
    wide = blog.pivot_table(index=["hardware_id", "phase"], columns="activation", values="median_s") * 1e3
    wide = wide.rename(columns=lambda a: f"{a} ms")
    wide["slowdown"] = wide["leaky_relu ms"] / wide["tanh ms"]
    return wide.reset_index()


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """One slowdown per hardware set, fallback kernel and phase: the geometric mean over the grid, with the
    interval over configurations and samples the verdict uses (`stats.geomean_interval`)."""
    if table.empty:
        return table
    rows = []
    for (hardware_id, kernel, phase), part in table.groupby(["hardware_id", "kernel", "phase"]):
        low, high = geomean_interval(list(part.replicates))
        rows.append({"hardware_id": hardware_id, "kernel": kernel, "phase": phase, "ratio": geomean(part.ratio),
                     "ratio_lo": low, "ratio_hi": high})
    return pd.DataFrame(rows)


CLAIM = Claim(
    says=(
        "An LSTM that breaks cuDNN's criteria (a ReLU activation, recurrent dropout; the Q&A adds "
        "masking) silently falls back to a generic kernel 2-5x slower, 15x in one report. The study also "
        "tests the other requirements of the Keras `LSTM` documentation {cite:p}`keras-lstm-api` "
        "(`unroll`, no bias, a mask whose inputs are not \"strictly right-padded\"), which the sources do "
        "not list."),
    bands=BANDS,
    figure_words="slowdown {}",
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
    seconds_per_point={"cpu": 1.9, "cuda": 0.5}, slow=frozenset(COMPILED),
    # the verdict reads the headline triggers over their fused kernels at every configuration (40 points); the
    # other triggers, the blog's model and the compiles are context, measured after the lease's five claims
    lease=Lease(overrides={"blog_model": False, "compiled": False},
                kernels=frozenset({*HEADLINE["cuda"], *(TRIGGERS[k][0] for k in HEADLINE["cuda"])})),
)
