"""The hardware limit an LSTM is judged against: this device's sustained GEMM throughput.

An LSTM is a chain of matrix products, so the best a kernel can hope for is the FLOP/s of a large
square matmul on the same device, precision and thread count. `measure` times one (2048 on a CPU, 1024
for its 16-bit types; 8192 on a GPU) per precision the device supports and stores the rows in
`results/roofline/<hardware_id>.csv`; `limits` reads back the best FLOP/s per precision and
`fraction` expresses any achieved FLOP/s as a share of it.

Rows go through the project's store (`sweep.run`, claim "roofline", kernel "gemm"), so an (N x N) @
(N x N) product is recorded as an `LSTMShape(batch=N, timesteps=1, features=N, hidden=N)` with
`config={"n": N}`: the LSTM columns are placeholders that keep the schema, and `n` is what counts.
On a GPU fp32 means IEEE fp32 (cuBLAS's default), matching the fp32 of the LSTM kernels.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from lstmstudy import hardware, kernels, results, sweep
from lstmstudy.kernels.torch_kernels import DTYPES
from lstmstudy.shapes import LSTMShape
from lstmstudy.sweep import Point
from lstmstudy.timing import Rounds

CLAIM = "roofline"
KERNEL = "gemm"
DEFAULT_SIZES = {"cpu": (2048,), "cuda": (8192,)}
QUICK_SIZES = {"cpu": (256,), "cuda": (1024,)}
#: 16-bit GEMMs on a CPU without native support (fp16 on most CPUs) run at 1-2 GFLOP/s: seconds per
#: 2048 product. They are measured at 1024, which is as large as an LSTM's gate GEMM gets on a CPU here.
CPU_16BIT_SIZES = (1024,)


def gemm_point(n: int, precision: str) -> Point:
    """The stored configuration of one n x n x n GEMM (see the module docstring for the field mapping)."""
    return Point(kernel=KERNEL, shape=LSTMShape(batch=n, timesteps=1, features=n, hidden=n),
                 precision=precision, config={"n": n})


def measure(device: str = "auto", sizes: Iterable[int] | None = None, quick: bool = False, *,
            precisions: Iterable[str] = tuple(DTYPES), **sweep_options) -> sweep.SweepReport:
    """Time square GEMMs at every precision on `device` and store them (what is stored is skipped).

    `quick` uses small matrices and short timing: enough to check the plumbing, not a real limit.
    """
    dev = hardware.resolve_device(device)
    def chosen(precision: str) -> tuple[int, ...]:
        if sizes is not None:
            return tuple(sizes)
        if quick:
            return QUICK_SIZES[dev.type]
        return CPU_16BIT_SIZES if dev.type == "cpu" and precision != "fp32" else DEFAULT_SIZES[dev.type]

    # a few samples suffice for one large product; a slow (emulated) precision must not take minutes
    plan = (Rounds(rounds=2, warmup=1, extra_rounds=0).with_min_time(0.05) if quick
            else Rounds(warmup=1).with_min_time(1.0))
    points = [gemm_point(n, precision) for precision in precisions for n in chosen(precision)]
    return sweep.run(CLAIM, points, kernels.prepare, plan, device=str(dev), **{"progress": False, **sweep_options})


def limits(hardware_id: str | None = None, root: Path | None = None) -> dict[str, float]:
    """The best GEMM FLOP/s stored per precision for a hardware set (default: this machine's default device)."""
    if hardware_id is None:
        hardware_id = hardware.fingerprint(hardware.resolve_device("auto")).hardware_id
    best: dict[str, float] = {}
    for row in results.read_rows(results.set_path(CLAIM, hardware_id, root)):
        if row["status"] == "ok" and row["kernel"] == KERNEL and row["achieved_flops"]:
            flops = float(row["achieved_flops"])
            best[row["precision"]] = max(flops, best.get(row["precision"], 0.0))
    return best


def fraction(achieved_flops: float, hardware_id: str | None = None, precision: str = "fp32",
             root: Path | None = None) -> float | None:
    """`achieved_flops` as a share of the stored GEMM limit (None when no limit is stored for it)."""
    limit = limits(hardware_id, root).get(precision)
    return achieved_flops / limit if limit else None
