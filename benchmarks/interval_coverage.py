"""Do the study's 95% intervals hold across runs? (A benchmark script, not a test.)

Measures claim 1's default CPU grid twice, each run a separate `lstmstudy measure --claims 01` into its own
results folder (each spreading its rounds over its own worker processes, `timing.WORKER_PROCESSES`, unless
`--processes` says otherwise), computes every trigger's slowdown over its fused kernel with its 95% interval in
each run (`cudnn_fallback.slowdowns`), and reports how often one run's ratio falls inside the other run's
interval, and whether each claim's verdict (claim 1's, and those of `--claims`, measured in the same runs)
comes out the same in both. The intervals are re-run intervals (`lstmstudy.stats`): they promise that a second run
lands inside 95% of the time, so the figure to reach is 90% or more. An interval over the rounds of one process
misses what differs between processes and covers less (about 80% on a 2-core VM before worker processes; the
history in `results/interval_coverage/` keeps each figure with its label).

    .venv/bin/python benchmarks/interval_coverage.py [--checkout DIR] [--label TEXT] [--processes N] [--claims 01 04]

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
#: each claim's verdicts on the run, as the checkout under test decides them: outcome, interval and words
VERDICT = """
import json, sys
from lstmstudy import results
from lstmstudy.claims import lookup
claim = lookup([sys.argv[2]])[0]
verdicts = claim.judge(results.load(claim.name, root=sys.argv[1]))
print(json.dumps([[v.outcome.value, v.ours, v.low, v.high, v.ours_text] for v in verdicts]))
"""


def run(checkout: Path, *args: str, capture: bool = False) -> str:
    done = subprocess.run([sys.executable, *args], cwd=checkout, check=True, text=True,
                          stdout=subprocess.PIPE if capture else None)
    return done.stdout or ""


def measure_and_analyse(checkout: Path, root: Path, processes: int | None,
                        claims: list[str]) -> tuple[pd.DataFrame, dict[str, list]]:
    """One run: measure claim 1 (and `claims`) into `root`, then claim 1's slowdowns and each claim's verdicts."""
    more = ["--processes", str(processes)] if processes else []
    run(checkout, "-m", "lstmstudy.cli", "measure", "--claims", *claims, "--device", "cpu", "--results-dir",
        str(root), "--no-progress", *more)
    table = pd.read_csv(io.StringIO(run(checkout, "-c", ANALYSE, str(root), capture=True)))
    return table, {claim: json.loads(run(checkout, "-c", VERDICT, str(root), claim, capture=True)) for claim in claims}


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
    parser.add_argument("--processes", type=int, help="worker processes per run (default: the claim's plan)")
    parser.add_argument("--claims", nargs="+", default=["01"],
                        help="claims whose verdicts are compared between the runs (claim 1 is always measured)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="interval-coverage-"))
    print(f"result sets under {scratch}", flush=True)
    claims = ["01", *(c for c in args.claims if c != "01")]
    (first, verdicts_1), (second, verdicts_2) = (
        measure_and_analyse(args.checkout.resolve(), scratch / f"run{i}", args.processes, claims) for i in (1, 2))
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=args.checkout, capture_output=True,
                            text=True).stdout.strip()
    summary = {"label": args.label, "processes": args.processes or "the plan's", "checkout": str(args.checkout),
               "commit": commit, "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
               "hardware_id": str(first.hardware_id.iloc[0]), **coverage(first, second),
               "verdicts": {claim: [verdicts_1[claim], verdicts_2[claim]] for claim in claims},
               "same_outcome": {claim: [v[0] for v in verdicts_1[claim]] == [v[0] for v in verdicts_2[claim]]
                                for claim in claims}}
    print(json.dumps(summary, indent=2))
    out = REPO / "results" / "interval_coverage" / f"{summary['hardware_id']}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    history = json.loads(out.read_text()) if out.exists() else []
    out.write_text(json.dumps([*history, summary], indent=2) + "\n")
    print(f"appended to {out}")


if __name__ == "__main__":
    main()
