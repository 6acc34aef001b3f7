"""Does `timing.measure` agree with `torch.utils.benchmark`, on a quiet CPU and on a busy one? (A benchmark
script, not a test.)

Times one ~1 ms CPU matmul three ways, in interleaved rounds, with 0, then `--hogs` busy processes beside it:
our per-call median (`timing.measure`), torch's Timer one call a sample (`Timer.timeit(1)`, the estimator the
test suite compares with), and torch's `blocked_autorange`, which times blocks of calls and reports the median
of the blocks' means. When the scheduler pauses a block to run a hog, the pause is spread over every call of
that block; a single call is rarely paused, so the per-call medians stay at the unloaded speed.

    .venv/bin/python benchmarks/timer_vs_torch.py [--hogs 2] [--rounds 5]
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics

import torch
from torch.utils import benchmark

from lstmstudy import timing


def hog() -> None:
    while True:
        pass


def medians(rounds: int) -> dict[str, float]:
    """Each estimator's median over `rounds` interleaved rounds, in microseconds."""
    a = torch.randn(384, 384)
    work = lambda: torch.mm(a, a)  # noqa: E731
    timer = benchmark.Timer("work()", globals={"work": work}, num_threads=1)
    found: dict[str, list[float]] = {"timing.measure": [], "Timer.timeit(1)": [], "blocked_autorange": []}
    for _ in range(rounds):
        found["timing.measure"].append(timing.measure(work, warmup=5, min_time=0.3, max_time=0.3, threads=1).median)
        found["Timer.timeit(1)"].append(statistics.median(timer.timeit(1).raw_times[0] for _ in range(200)))
        found["blocked_autorange"].append(timer.blocked_autorange(min_run_time=0.3).median)
    return {name: statistics.median(values) * 1e6 for name, values in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=2, help="busy processes beside the timers in the second run")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for hogs in (0, args.hogs):
        workers = [multiprocessing.Process(target=hog, daemon=True) for _ in range(hogs)]
        for worker in workers:
            worker.start()
        try:
            found = medians(args.rounds)
        finally:
            for worker in workers:
                worker.terminate()
        ours = found["timing.measure"]
        print(f"{hogs} busy process(es): " + ", ".join(f"{name} {us:.0f} us ({us / ours:.2f}x ours)"
                                                      for name, us in found.items()))


if __name__ == "__main__":
    main()
