"""Do the study's 95% intervals hold across runs? (A benchmark script, not a test.)

Measures claim 1's default CPU grid twice, each time in a fresh process (`lstmstudy measure --claims 01`
into its own results folder), computes every trigger's slowdown over its fused kernel with its 95%
interval in each run (`cudnn_fallback.slowdowns`), and reports how often one run's ratio falls inside the
other run's interval. An interval that only reflects one burst of samples misses the run-to-run drift of
a shared machine and covers far less than 95%; an interval over interleaved rounds should come near it.
(Even a perfect interval covers an independent second estimate less than 95% of the time, about 83%
when both estimates are equally precise: the figure is a check of honesty, not a target.)

    .venv/bin/python benchmarks/interval_coverage.py [--checkout DIR] [--label TEXT]

`--checkout` measures and analyses with another checkout of lstmstudy (e.g. a `git worktree` of an
older commit, for a before/after comparison). The summary is appended to
`results/interval_coverage/<hardware_id>.json`; the two runs' result sets stay in a temporary folder
(printed) for inspection.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent
KEYS = ["kernel", "phase", "batch", "hidden", "config"]

#: run inside the checkout under test: its own analysis of its own rows, printed as CSV
ANALYSE = """
import sys
from lstmstudy import results
from lstmstudy.claims import cudnn_fallback
table = cudnn_fallback.slowdowns(results.load("cudnn_fallback", root=sys.argv[1]))
table[{keys!r} + ["hardware_id", "ratio", "ratio_lo", "ratio_hi"]].to_csv(sys.stdout, index=False)
""".format(keys=KEYS)


def run(checkout: Path, *args: str, capture: bool = False) -> str:
    done = subprocess.run([sys.executable, *args], cwd=checkout, check=True, text=True,
                          stdout=subprocess.PIPE if capture else None)
    return done.stdout or ""


def measure_and_analyse(checkout: Path, root: Path) -> pd.DataFrame:
    run(checkout, "-m", "lstmstudy.cli", "measure", "--claims", "01", "--device", "cpu", "--results-dir", str(root))
    return pd.read_csv(io.StringIO(run(checkout, "-c", ANALYSE, str(root), capture=True)))


def coverage(first: pd.DataFrame, second: pd.DataFrame) -> dict:
    both = first.merge(second, on=KEYS, suffixes=("_1", "_2"))
    inside_2_in_1 = (both.ratio_2 >= both.ratio_lo_1) & (both.ratio_2 <= both.ratio_hi_1)
    inside_1_in_2 = (both.ratio_1 >= both.ratio_lo_2) & (both.ratio_1 <= both.ratio_hi_2)
    width = ((both.ratio_hi_1 - both.ratio_lo_1) / both.ratio_1).median()
    return {"ratios": int(len(both)), "second_inside_first": float(inside_2_in_1.mean()),
            "first_inside_second": float(inside_1_in_2.mean()),
            "median_relative_width_first": float(width),
            "median_relative_change": float((both.ratio_2 / both.ratio_1 - 1).abs().median())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=REPO, help="the lstmstudy checkout to measure with")
    parser.add_argument("--label", default="", help="what this run tests (e.g. the commit)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="interval-coverage-"))
    print(f"result sets under {scratch}", flush=True)
    runs = [measure_and_analyse(args.checkout.resolve(), scratch / f"run{i}") for i in (1, 2)]
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=args.checkout, capture_output=True,
                            text=True).stdout.strip()
    summary = {"label": args.label, "checkout": str(args.checkout), "commit": commit, "finished_at":
               datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "hardware_id": str(runs[0].hardware_id.iloc[0]), **coverage(*runs)}
    print(json.dumps(summary, indent=2))
    out = REPO / "results" / "interval_coverage" / f"{summary['hardware_id']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    history = json.loads(out.read_text()) if out.exists() else []
    out.write_text(json.dumps([*history, summary], indent=2) + "\n")
    print(f"appended to {out}")


if __name__ == "__main__":
    main()
