"""The kernel benchmark (`kernels`): every registered LSTM kernel at the blog's shape and larger ones,
beside this device's hardware limit (`lstmstudy.roofline`). Measured like a claim (`lstmstudy measure
--claims kernels`), judged by none: it answers "how far is each kernel from the fused one, and from the
hardware?".

`benchmarks/kernels.py` prints its table; the rows live in `results/kernels/<hardware_id>.csv` and the
GEMM peak the limit starts from in `results/roofline/<hardware_id>.csv`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from lstmstudy import contract, results
from lstmstudy.claims import Claim
from lstmstudy.parameters import check_choices
from lstmstudy.shapes import LSTMShape

NAME = "kernels"
STATEMENT = "Every LSTM kernel timed at the same shapes, against the fused kernel and the hardware limit"
REFERENCE = "torch.fused"
#: the registry kernels that compile (tens of seconds each): measured after every other point
COMPILED = frozenset({"torch.compiled"})
QUICK_SHAPE = [1, 4, 4, 8]


def _shape(spec: Sequence[int]) -> LSTMShape:
    b, t, f, h = spec
    return LSTMShape(batch=b, timesteps=t, features=f, hidden=h)


def grid(*, kind: str, quick: bool, shapes: Sequence[Sequence[int]], phases: Sequence[str],
         kernel_names: Sequence[str] | None = None) -> list[contract.Point]:
    """Every kernel (all registered ones by default) at every shape and phase, fp32; `quick`: one tiny shape."""
    from lstmstudy import kernels

    names = list(kernel_names or kernels.names())
    if quick:  # a smoke run: compiling takes tens of seconds
        names = [n for n in names if n not in COMPILED]
    chosen = [QUICK_SHAPE] if quick else list(shapes)
    return [contract.Point(name, _shape(s), "fp32", phase) for s in chosen for phase in phases for name in names]


def measure(points: list, *, device: str, min_time: float, quick: bool = False, **sweep_options) -> list:
    """The GEMM peak first (unless stored), then every kernel point not yet stored, in one process: the benchmark
    decides no verdict, and worker processes would triple its longest sweep (compiles included)."""
    from lstmstudy import kernels, roofline, sweep, timing

    plan = timing.plan(min_time, quick, processes=1, **({} if quick else dict(warmup=5)))
    return [roofline.measure(device, quick=quick, **sweep_options),
            sweep.run(NAME, points, kernels.prepare, plan, device=device, **sweep_options)]


def verdicts(frame: pd.DataFrame) -> list:
    """The benchmark states no claim: it has no verdict."""
    return []


def table(points: list, hardware_id: str, root: Path | None = None) -> pd.DataFrame:
    """The stored rows of these points on this hardware, with the ratios the study reports.

    `vs fused`: median / torch.fused's median at the same shape and phase; `of limit`: achieved FLOP/s as
    a share of the hardware set's limit at the row's precision (`roofline.Limit`, never above 100%), and
    `limit`: what set that limit, the best GEMM or a stored row that beat it.
    """
    from lstmstudy import roofline

    frame = results.load(NAME, root)
    wanted = {p.key() for p in points}
    mine = [row["hardware_id"] == hardware_id and results.row_key(row) in wanted for row in frame.to_dict("records")]
    frame = frame[pd.Series(mine, index=frame.index, dtype=bool)].copy()
    frame["shape"] = [f"b{r.batch} t{r.timesteps} f{r.features} h{r.hidden}" for r in frame.itertuples()]
    reference = frame[frame["kernel"] == REFERENCE].set_index(["shape", "phase"])["median_s"]
    limits = roofline.limits(hardware_id, root)
    frame["median ms"] = frame["median_s"] * 1e3
    frame["IQR/median"] = (frame["p75_s"] - frame["p25_s"]) / frame["median_s"]
    frame["vs fused"] = [row.median_s / reference.get((row.shape, row.phase), float("nan"))
                         for row in frame.itertuples()]
    frame["of limit"] = [limits[p].share(flops) if p in limits else float("nan")
                         for p, flops in zip(frame["precision"], frame["achieved_flops"])]
    frame["limit"] = [limits[p].describe() if p in limits else "no GEMM stored" for p in frame["precision"]]
    frame["observed"] = [obs if status == "ok" else f"{status}: {err[:60]}"
                         for obs, status, err in zip(frame["observed_kernel"], frame["status"], frame["error"])]
    columns = ["shape", "phase", "kernel", "median ms", "IQR/median", "vs fused", "of limit", "limit", "observed"]
    return frame.sort_values(["shape", "phase", "median_s"])[columns].reset_index(drop=True)


def check_parameters(parameters: dict) -> None:
    from lstmstudy.claims.energy import check_shapes

    check_shapes(parameters["shapes"])
    check_choices("phases", parameters["phases"], ("inference", "train"))


#: the blog post's shape (batch 1, 32 steps, 8 features, hidden 64) and a larger one; on a GPU a third,
#: large enough for the fused kernel to approach the hardware limit
_SHAPES = [[1, 32, 8, 64], [64, 100, 128, 256]]
CLAIM = Claim(
    number="", name=NAME, statement=STATEMENT, seed_figure="", rule="",
    defaults={"cpu": dict(shapes=_SHAPES, phases=["inference", "train"]),
              "cuda": dict(shapes=[*_SHAPES, [256, 100, 1024, 1024]], phases=["inference", "train"])},
    grid=grid, measure=measure, verdicts=verdicts, check=check_parameters,
    # a GPU: 1.0 s a point, plus a profiled pass of each row's device time and `stats.MIN_CALLS` calls a row
    seconds_per_point={"cpu": 3.0, "cuda": 1.2}, slow=COMPILED, min_time=0.3,
)
