"""Time every registered LSTM kernel and print how far each is from the fused one and from the hardware.

A benchmark script, not a test: the `kernels` entry of `lstmstudy measure` (lstmstudy.claims.kernel_benchmark)
with its table printed. Shapes: the blog post's (batch 1, 32 timesteps, 8 features, hidden 64), a larger
one (batch 64, 100 timesteps, 128 features, hidden 256) and, on a GPU, a large one (batch 256, 100
timesteps, hidden 1024); fp32, inference and train. Rows are stored in `results/kernels/<hardware_id>.csv`
(resumable: what is stored is skipped unless `--rerun`), after the GEMM roofline if none is stored.

    .venv/bin/python benchmarks/kernels.py [--device auto|cpu|cuda] [--threads N] [--rerun] [--results DIR]
    .venv/bin/python benchmarks/kernels.py --quick   # tiny shape, short timing, temporary results root

Columns: median time, IQR/median (spread; large means noisy), the implementation the profiler saw,
`vs fused` (median / torch.fused's median at the same shape and phase), `of limit` (achieved FLOP/s as a
share of the hardware set's limit at the row's precision, never above 100%) and `limit` (what set it: the
best GEMM, or a stored row that beat it; `lstmstudy.roofline`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd
import torch

from lstmstudy import backends, hardware
from lstmstudy.claims.kernel_benchmark import CLAIM, table
from lstmstudy.errors import StudyError

backends.study_process()  # one of the study's own processes: quiet native logs, Keras on torch without TF


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
        for report in CLAIM.run(str(device), quick=args.quick, root=root, rerun=args.rerun):
            print(report)
        hardware_id = hardware.fingerprint(device).hardware_id
        todo = CLAIM.points(device.type, quick=args.quick)
    except StudyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with pd.option_context("display.width", 200, "display.max_colwidth", 70, "display.float_format", "{:.3g}".format):
        print(table(todo, hardware_id, root).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
