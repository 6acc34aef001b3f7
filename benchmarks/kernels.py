"""Time every registered LSTM kernel and print how far each is from the fused one and from the hardware.

A benchmark script, not a test. Shapes: the blog post's (batch 1, 32 timesteps, 8 features, hidden 64)
and a larger one (batch 64, 100 timesteps, 128 features, hidden 256), fp32, inference and train.
Rows are stored through `sweep.run` in `results/kernels/<hardware_id>.csv` (resumable: what is stored
is skipped unless `--rerun`), after the GEMM roofline of `lstmstudy.roofline` if none is stored.

    .venv/bin/python benchmarks/kernels.py [--device auto|cpu|cuda] [--threads N] [--rerun] [--results DIR]
    .venv/bin/python benchmarks/kernels.py --quick   # tiny shape, short timing, temporary results root

Columns: median time, IQR/median (spread; large means noisy), the implementation the profiler saw,
`vs fused` (median / torch.fused's median at the same shape and phase) and `of GEMM` (achieved FLOP/s
as a share of this device's measured fp32 GEMM throughput).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd
import torch

from lstmstudy import hardware, kernels, results, roofline, sweep
from lstmstudy.errors import StudyError
from lstmstudy.shapes import LSTMShape

SHAPES = (LSTMShape(batch=1, timesteps=32, features=8, hidden=64),
          LSTMShape(batch=64, timesteps=100, features=128, hidden=256))
QUICK_SHAPES = (LSTMShape(batch=1, timesteps=4, features=4, hidden=8),)
TIMING = dict(warmup=5, min_time=0.3, max_time=2.0)
QUICK_TIMING = dict(warmup=1, min_time=0.01, max_time=0.1, min_samples=5)
REFERENCE = "torch.fused"


def points(shapes: tuple[LSTMShape, ...]) -> list[sweep.Point]:
    return [sweep.Point(name, shape, "fp32", phase)
            for shape in shapes for phase in kernels.PHASES for name in kernels.names()]


def table(todo: list[sweep.Point], hardware_id: str, root: Path | None) -> pd.DataFrame:
    """The stored rows of these points on this hardware, with the ratios the study reports."""
    frame = results.load("kernels", root)
    wanted = {p.key() for p in todo}
    mine = [row["hardware_id"] == hardware_id and results.row_key(row) in wanted for row in frame.to_dict("records")]
    frame = frame[pd.Series(mine, index=frame.index, dtype=bool)].copy()
    frame["shape"] = [f"b{r.batch} t{r.timesteps} f{r.features} h{r.hidden}" for r in frame.itertuples()]
    reference = frame[frame["kernel"] == REFERENCE].set_index(["shape", "phase"])["median_s"]
    limit = roofline.limits(hardware_id, root).get("fp32")
    frame["median ms"] = frame["median_s"] * 1e3
    frame["IQR/median"] = (frame["p75_s"] - frame["p25_s"]) / frame["median_s"]
    frame["vs fused"] = [row.median_s / reference.get((row.shape, row.phase), float("nan"))
                         for row in frame.itertuples()]
    frame["of GEMM"] = frame["achieved_flops"] / limit if limit else float("nan")
    frame["observed"] = [obs if status == "ok" else f"{status}: {err[:60]}"
                         for obs, status, err in zip(frame["observed_kernel"], frame["status"], frame["error"])]
    columns = ["shape", "phase", "kernel", "median ms", "IQR/median", "vs fused", "of GEMM", "observed"]
    return frame.sort_values(["shape", "phase", "median_s"])[columns].reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    parser.add_argument("--quick", action="store_true", help="tiny shape and short timing, for a smoke test")
    parser.add_argument("--rerun", action="store_true", help="measure again what is already stored")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch intra-op threads (default: torch's choice); part of the hardware id")
    parser.add_argument("--results", type=Path, default=None,
                        help="results root (default: $LSTMSTUDY_RESULTS or results/; --quick: a temporary folder)")
    args = parser.parse_args(argv)
    root = args.results
    if root is None and args.quick:  # a smoke run must not pollute results/
        root = Path(tempfile.mkdtemp(prefix="lstmstudy-quick-"))
    if args.threads is not None:  # before the fingerprint, which records the thread count
        torch.set_num_threads(args.threads)
    try:
        device = hardware.resolve_device(args.device)
        hardware_id = hardware.fingerprint(device).hardware_id
        if args.rerun or "fp32" not in roofline.limits(hardware_id, root):
            print(roofline.measure(str(device), quick=args.quick, root=root, rerun=args.rerun))
        todo = points(QUICK_SHAPES if args.quick else SHAPES)
        measure_point = kernels.measurer(**(QUICK_TIMING if args.quick else TIMING))
        print(sweep.run("kernels", todo, measure_point, device=str(device), root=root, rerun=args.rerun))
    except StudyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with pd.option_context("display.width", 200, "display.max_colwidth", 70, "display.float_format", "{:.3g}".format):
        print(table(todo, hardware_id, root).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
