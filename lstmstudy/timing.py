"""Benchmark-style timing: warm-up, a device sync inside every sample, raw samples kept, robust statistics.

The mistake this study warns about is timing asynchronous GPU work without a sync: the clock then
measures how fast work is *queued*, not how fast it runs. `measure` therefore calls `sync` inside
every timed sample; `sync_for(device)` picks the right one.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch

Sync = Callable[[], object]


@dataclass(frozen=True)
class Measurement:
    """Raw per-call times in seconds and the statistics the book reports."""

    samples: tuple[float, ...]
    warmup: int
    threads: int
    sync: str

    @property
    def n(self) -> int:
        return len(self.samples)

    def quantile(self, q: float) -> float:
        """Linear-interpolated quantile of the samples (numpy's default method)."""
        ordered = sorted(self.samples)
        pos = q * (len(ordered) - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p25(self) -> float:
        return self.quantile(0.25)

    @property
    def p75(self) -> float:
        return self.quantile(0.75)

    @property
    def iqr(self) -> float:
        return self.p75 - self.p25

    @property
    def rel_iqr(self) -> float:
        """IQR / median: the spread torch.utils.benchmark warns about when it is large."""
        return self.iqr / self.median if self.median > 0 else math.inf

    def median_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        """Distribution-free confidence interval for the median from order statistics.

        The number of samples below the true median is Binomial(n, 1/2); the interval between the
        j-th and k-th order statistics covers the median with probability >= `confidence`.
        """
        ordered = sorted(self.samples)
        n = len(ordered)
        j, k = _order_statistic_bounds(n, confidence)
        return ordered[j], ordered[k]

    def summary(self) -> str:
        lo, hi = self.median_ci()
        return (f"median {self.median * 1e3:.4g} ms (95% CI {lo * 1e3:.4g}-{hi * 1e3:.4g}), "
                f"IQR/median {self.rel_iqr:.1%}, n={self.n}, {self.threads} thread(s), sync={self.sync}")


def _order_statistic_bounds(n: int, confidence: float) -> tuple[int, int]:
    """0-based indices (lo, hi) with P(X_(lo) <= median <= X_(hi)) >= confidence for n samples.

    With the L-th smallest and L-th largest sample as bounds, coverage is 1 - 2*P(B <= L-1) for
    B ~ Binomial(n, 1/2); we take the largest L that keeps coverage >= confidence.
    """
    alpha = 1.0 - confidence
    if n <= 200:  # exact binomial tail
        largest, cdf = 0, 0.0
        while True:
            cdf += math.comb(n, largest) / 2.0**n  # P(B <= largest)
            if 2 * cdf > alpha:
                break
            largest += 1
    else:  # normal approximation, accurate at this size
        z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
        largest = int(math.floor(n / 2 - z * math.sqrt(n) / 2))
    if largest < 1:  # too few samples for this confidence: the full range is the honest interval
        return 0, n - 1
    return largest - 1, n - largest


@dataclass(frozen=True)
class CudaSync:
    """`torch.cuda.synchronize(device)`, which `measure` also uses to time each sample with CUDA events."""

    device: torch.device

    def __call__(self) -> None:
        torch.cuda.synchronize(self.device)


def sync_for(device: torch.device | str) -> Sync | None:
    """The sync that makes a sample include all queued work on `device` (None on the CPU)."""
    dev = torch.device(device)
    return CudaSync(dev) if dev.type == "cuda" else None


def tf_sync() -> Sync:
    """A real TensorFlow device sync: waits for every op queued on every device to finish."""
    import tensorflow as tf

    return tf.test.experimental.sync_devices


@contextmanager
def torch_threads(threads: int | None):
    """Run a block with exactly `threads` intra-op threads, restoring the previous count after."""
    before = torch.get_num_threads()
    if threads is not None:
        if not isinstance(threads, int) or threads <= 0:
            raise ValueError(f"threads must be a positive integer, got {threads!r}")
        torch.set_num_threads(threads)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def measure(
    fn: Callable[[], object],
    *,
    sync: Sync | None = None,
    warmup: int = 3,
    min_time: float = 0.2,
    max_time: float = 5.0,
    min_samples: int = 7,
    max_samples: int = 2_000,
    target_rel_iqr: float = 0.05,
    threads: int | None = None,
) -> Measurement:
    """Time `fn()` call by call until the median is stable, and keep every sample.

    Runs `warmup` untimed calls, then samples until at least `min_samples` calls and `min_time`
    seconds are collected and IQR/median is at most `target_rel_iqr`, or until `max_time` seconds or
    `max_samples` calls. `sync` runs inside each sample, after `fn`; pass `sync_for(device)`.

    On a GPU (`sync_for("cuda")`) a sample is the time between two CUDA events recorded on the current
    stream around `fn`: the GPU's timeline from the first launch to the end of the last kernel, without
    the 5-20 us a host-side synchronize adds to every sample. The synchronize still runs in every sample,
    so no work spills into the next one.
    """
    if warmup < 0 or min_samples < 1 or max_samples < min_samples or min_time < 0 or max_time < min_time:
        raise ValueError("measure(): need warmup >= 0, 1 <= min_samples <= max_samples and 0 <= min_time <= max_time")
    clock = time.perf_counter
    events = isinstance(sync, CudaSync)
    if events:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        sync_name = "cuda-events"
    else:
        sync_name = (getattr(sync, "__qualname__", None) or getattr(getattr(sync, "func", None), "__qualname__", None)
                     or type(sync).__name__)
    with torch_threads(threads) as used_threads:
        for _ in range(warmup):
            fn()
        if sync is not None:
            sync()
        samples: list[float] = []
        append = samples.append
        next_check = min_samples
        start = clock()
        while True:
            t0 = clock()
            if events:
                begin.record()
            fn()
            if events:
                end.record()
            if sync is not None:
                sync()
            t1 = clock()
            append(begin.elapsed_time(end) * 1e-3 if events else t1 - t0)
            if len(samples) >= next_check:
                elapsed = t1 - start
                if len(samples) >= max_samples or elapsed >= max_time:
                    break
                if elapsed >= min_time and _rel_iqr(samples) <= target_rel_iqr:
                    break
                # check again after ~10% more samples: the check stays cheap next to the calls
                next_check = min(max_samples, len(samples) + max(1, len(samples) // 10))
    return Measurement(samples=tuple(samples), warmup=warmup, threads=used_threads,
                       sync=sync_name if sync is not None else "none")


def _rel_iqr(samples: list[float]) -> float:
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    med = statistics.median(samples)
    return (q3 - q1) / med if med > 0 else math.inf
