"""The hardware limit an LSTM is judged against: the best throughput ever observed on a hardware set.

An LSTM is a chain of matrix products, so the natural ceiling is the FLOP/s of a square matmul on the same
device, precision and thread count (all the threads torch uses: the thread count is part of the hardware
id). `measure` times a ladder of sizes per precision (256 to 4096 on a CPU, 1024 to 16384 on a GPU) and
stores the rows in `results/roofline/<hardware_id>.csv`.

A peak is an upper bound, so it is estimated best-of, not by a median: a sample is never faster than the
hardware allows, only slower when something disturbs it (another process, a frequency dip, a cache
eviction), so the fastest sample over every size and round is the closest estimate of what the device can
do (`timeit`'s advice for the same reason). Each sample times whole products with a device sync.

The design choice: a measured GEMM is still not a proof of the peak (one library's GEMM can be slower than
another library's LSTM on the same cores), so `limits` never lets a stored row beat its limit. The limit at a
precision is the larger of the best GEMM and the best FLOP/s of any stored row of that hardware set at that
precision, in any claim's results, each row judged by its fastest sample too. `Limit.by` says which one set
it, so a page can state it, and `Limit.share` of a stored row's achieved (median) FLOP/s is at most 100% by
construction: it refuses a figure above the limit rather than print a share of more than the whole.

Rows go through the project's store (`sweep.run`, claim "roofline", kernel "gemm"), so an (N x N) @
(N x N) product is recorded as an `LSTMShape(batch=N, timesteps=1, features=N, hidden=N)` with
`config={"n": N}`: the LSTM columns are placeholders that keep the schema, and `n` is what counts.
On a GPU fp32 means IEEE fp32 (cuBLAS's default), matching the fp32 of the LSTM kernels.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lstmstudy import hardware, kernels, results
from lstmstudy.contract import Point
from lstmstudy.kernels.built import DTYPE_NAMES
from lstmstudy.shapes import LSTMShape

if TYPE_CHECKING:  # measuring imports torch; reading the limits (`limits`) runs without it, as a page renders
    from lstmstudy import sweep

CLAIM = "roofline"
KERNEL = "gemm"
SIZES = {"cpu": (256, 512, 1024, 2048, 4096), "cuda": (1024, 2048, 4096, 8192, 16384)}
#: 16-bit GEMMs on a CPU without native support (fp16, and bf16 before AVX-512 BF16) run at about 1 GFLOP/s:
#: a 1024 product takes 2-3 s. They stop at 512, which is as large as an LSTM's gate GEMM gets on a CPU here;
#: where 16-bit is native and 512 falls short of the peak, the limit is set by the LSTM rows above it.
CPU_16BIT_SIZES = (256, 512)
QUICK_SIZES = {"cpu": (128,), "cuda": (1024,)}
#: five attempts per size, no extra rounds for noise: a best-of needs attempts, not a tight median (`timing.Rounds`'
#: fields, and the seconds of samples `Rounds.with_min_time` spreads over them)
PLAN = dict(rounds=5, warmup=1, extra_rounds=0, min_time=1.0)
QUICK_PLAN = dict(rounds=2, warmup=1, extra_rounds=0, min_time=0.05)


def gemm_point(n: int, precision: str) -> Point:
    """The stored configuration of one n x n x n GEMM (see the module docstring for the field mapping)."""
    return Point(kernel=KERNEL, shape=LSTMShape(batch=n, timesteps=1, features=n, hidden=n),
                 precision=precision, config={"n": n})


def measure(device: str = "auto", sizes: Iterable[int] | None = None, quick: bool = False, *,
            precisions: Iterable[str] = tuple(DTYPE_NAMES), **sweep_options) -> sweep.SweepReport:
    """Time square GEMMs at every size and precision on `device` and store them (what is stored is skipped).

    `quick` uses one small size and short timing: enough to check the plumbing, not a real peak.
    """
    from lstmstudy import sweep
    from lstmstudy.timing import Rounds

    dev = hardware.resolve_device(device)

    def chosen(precision: str) -> tuple[int, ...]:
        if sizes is not None:
            return tuple(sizes)
        if quick:
            return QUICK_SIZES[dev.type]
        return CPU_16BIT_SIZES if dev.type == "cpu" and precision != "fp32" else SIZES[dev.type]

    points = [gemm_point(n, precision) for precision in precisions for n in chosen(precision)]
    plan = dict(QUICK_PLAN if quick else PLAN)
    plan = Rounds(**{k: v for k, v in plan.items() if k != "min_time"}).with_min_time(plan["min_time"])
    return sweep.run(CLAIM, points, kernels.prepare, plan, device=str(dev),
                     **{"progress": False, **sweep_options})


@dataclass(frozen=True)
class Limit:
    """The FLOP/s shares are taken of at one precision: `flops`, set `by` the best GEMM (`gemm_flops`) or by a
    stored row that beat it (see the module docstring)."""

    flops: float
    gemm_flops: float
    by: str

    @property
    def gemm_bound(self) -> bool:
        return self.flops == self.gemm_flops

    def describe(self) -> str:
        """What bounds the share, in a table cell: the GEMM, or the row above it and by how much."""
        if self.gemm_bound:
            return f"{self.by}: {self.flops / 1e9:.4g} GFLOP/s"
        return f"{self.by}: {self.flops / 1e9:.4g} GFLOP/s > GEMM {self.gemm_flops / 1e9:.4g}"

    def share(self, achieved_flops: float) -> float:
        """`achieved_flops` as a share of the limit; a figure above it is not a stored row of the set, and
        a share above 100% would be a limit that is not one, so it is refused."""
        if achieved_flops > self.flops:
            raise ValueError(f"{achieved_flops:.4g} FLOP/s exceeds the limit {self.describe()}: "
                             "store the row first, so that it bounds the limit")
        return achieved_flops / self.flops


def best_flops(row: Mapping[str, str]) -> float | None:
    """A stored row's FLOP/s in its fastest sample (its median where no samples are stored); None without a
    FLOP count."""
    if row["status"] != "ok" or not row["flops"] or not float(row["flops"]):
        return None
    samples = json.loads(row["samples_s"]) if row["samples_s"] else []
    fastest = min(samples) if samples else float(row["median_s"] or "nan")
    return float(row["flops"]) / fastest if fastest > 0 else None


def _stored_rows(hardware_id: str, root: Path | None) -> Iterator[dict[str, str]]:
    """Every row of every claim's result set for `hardware_id` (the roofline's among them)."""
    for path in sorted(Path(root or results.default_root()).glob(f"*/{hardware_id}.csv")):
        yield from results.read_rows(path)


def _label(row: Mapping[str, str]) -> str:
    if row["claim"] == CLAIM:
        return f"GEMM n={json.loads(row['config'])['n']}"
    return (f"{row['claim']} {row['kernel']} {row['phase']} "
            f"b{row['batch']} t{row['timesteps']} f{row['features']} h{row['hidden']}")


def limits(hardware_id: str | None = None, root: Path | None = None) -> dict[str, Limit]:
    """The `Limit` per precision of a hardware set (default: this machine's default device); a precision
    with no GEMM stored has none."""
    if hardware_id is None:
        hardware_id = hardware.fingerprint(hardware.resolve_device("auto")).hardware_id
    gemm: dict[str, tuple[float, str]] = {}
    other: dict[str, tuple[float, str]] = {}
    for row in _stored_rows(hardware_id, root):
        if (flops := best_flops(row)) is None:
            continue
        best = gemm if row["claim"] == CLAIM and row["kernel"] == KERNEL else other
        if flops > best.get(row["precision"], (0.0, ""))[0]:
            best[row["precision"]] = (flops, _label(row))
    out = {}
    for precision, (gemm_flops, label) in gemm.items():
        flops, by = max((gemm_flops, label), other.get(precision, (0.0, "")), key=lambda pair: pair[0])
        out[precision] = Limit(flops=flops, gemm_flops=gemm_flops, by=by)
    return out
