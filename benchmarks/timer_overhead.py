"""How much does `timing.measure` add to each sample? (A benchmark script, not a test.)

Times a no-op: each sample's median is then the timer's own overhead (two clock reads, the call and
the bookkeeping). Also reports the wall time per loop iteration, which adds the sample storage and
the amortised stopping checks. Run: `.venv/bin/python benchmarks/timer_overhead.py`.
"""

from __future__ import annotations

import time

from lstmstudy import timing


def noop() -> None:
    return None


def main() -> None:
    per_sample = timing.measure(noop, warmup=1000, min_time=1.0, max_time=1.0, max_samples=10**7, target_rel_iqr=0)
    start = time.perf_counter()
    run = timing.measure(noop, warmup=0, min_samples=200_000, max_samples=200_000, min_time=0, max_time=60)
    per_iteration = (time.perf_counter() - start) / run.n
    print(f"timing.measure overhead per sample (median over {per_sample.n} no-op samples): "
          f"{per_sample.median * 1e9:.0f} ns (IQR {per_sample.p25 * 1e9:.0f}-{per_sample.p75 * 1e9:.0f} ns)")
    print(f"wall time per loop iteration including bookkeeping: {per_iteration * 1e9:.0f} ns")


if __name__ == "__main__":
    main()
