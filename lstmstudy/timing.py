"""Benchmark-style timing: warm-up, a device sync inside every sample, raw samples kept, robust statistics.

The mistake this study warns about is timing asynchronous GPU work without a sync: the clock then
measures how fast work is *queued*, not how fast it runs. `measure` therefore calls `sync` inside
every timed sample; `sync_for(device)` picks the right one.

`measure` times one step in one burst. `interleave` times the steps a claim compares in rounds: every
round runs a short burst of each step, in an order shuffled from a recorded seed, so that a slow
moment of a shared machine hits every step alike and shows up as a difference between rounds.

Two wrappers say how a step is timed. `Queued(step, calls)` is DeepBench's clock (`rnn_bench.cu`: 100 forward
calls between two synchronisations, the time divided by 100): a sample queues `calls` calls and syncs once, so the
host's launch cost of one call overlaps the device's work on the one before, and the sample is the time per call.
`HeldStep(call, hold)` is a step with settings (cuDNN's switch, the fp32 precision flags, inference mode) that
`measure` enters once around a burst, warm-up and samples, rather than in every timed call; called on its own it
enters them itself, so it computes the same wherever it is called.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable, Hashable, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace

import torch

from lstmstudy import stats
# DeepBench's queue (`Queued`, `queue_length`): its constants live torch-free in `frameworks`, which claim 4's rule
# and verdicts state without torch
from lstmstudy.frameworks import QUEUE_CALLS, QUEUE_FEWEST, QUEUE_S

Sync = Callable[[], object]
#: the `Measurement.sync` names of samples not read off the host clock: the GPU's CUDA events (`measure`), and the
#: profiler's kernel times (claim 4's profiled rows, `protocols.in_kernel`)
OWN_CLOCKS = ("cuda-events", "profiler")


@dataclass(frozen=True)
class Measurement:
    """Raw per-call times in seconds and the statistics the book reports.

    From `interleave`, `samples` hold every round's samples in round order, `round_sizes` how many each
    round took, `seed` the seed that shuffled the rounds (shared by the steps timed together) and
    `noisy` whether the interval stayed wider than the plan's bound. From `measure`: one round. `calls`: how
    many calls each sample queued between two syncs (1: one call a sample; more: `Queued`, a sample is their time
    divided by `calls`).
    """

    samples: tuple[float, ...]
    warmup: int
    threads: int
    sync: str
    round_sizes: tuple[int, ...] = ()
    seed: int | None = None
    noisy: bool | None = None
    calls: int = 1

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def timer(self) -> str:
        """What clock made the samples, as a row stores it: CUDA events, the profiler (`OWN_CLOCKS`), or the host
        clock and the sync it waited on (`host-clock`, `host-clock+sync_devices`), with DeepBench's queue where a
        sample queued several calls."""
        clock = (self.sync if self.sync in OWN_CLOCKS
                 else "host-clock" + ("" if self.sync == "none" else f"+{self.sync}"))
        return clock + (f", {self.calls} queued calls a sample" if self.calls > 1 else "")

    @property
    def rounds(self) -> list:
        return stats.rounds_of(self.samples, self.round_sizes)

    def quantile(self, q: float) -> float:
        """Linear-interpolated quantile of the samples (numpy's default method)."""
        ordered = sorted(self.samples)
        pos = q * (len(ordered) - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    @property
    def median(self) -> float:
        """The median of the samples; over several rounds, the median of the round medians."""
        return stats.center(self.rounds) if len(self.round_sizes) > 1 else statistics.median(self.samples)

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
        """A confidence interval for `median`: over several rounds, the hierarchical bootstrap of
        `stats.bootstrap_median`, which includes the drift between rounds.

        Within one burst it is distribution-free, from order statistics: the number of samples below
        the true median is Binomial(n, 1/2); the interval between the j-th and k-th order statistics
        covers the median with probability >= `confidence`.
        """
        if len(self.round_sizes) > 1:
            _, lo, hi = stats.bootstrap_median(self.rounds, confidence=confidence)
            return lo, hi
        ordered = sorted(self.samples)
        n = len(ordered)
        j, k = _order_statistic_bounds(n, confidence)
        return ordered[j], ordered[k]

    def rel_halfwidth(self, confidence: float = 0.95) -> float:
        """Half the width of the interval over the median: how sure the time is, as a fraction."""
        lo, hi = self.median_ci(confidence)
        return (hi - lo) / 2 / self.median if self.median > 0 else math.inf

    def summary(self) -> str:
        lo, hi = self.median_ci()
        rounds = f", {len(self.round_sizes)} rounds" if len(self.round_sizes) > 1 else ""
        return (f"median {self.median * 1e3:.4g} ms (95% interval {lo * 1e3:.4g}-{hi * 1e3:.4g}), "
                f"IQR/median {self.rel_iqr:.1%}, n={self.n}{rounds}, {self.threads} thread(s), sync={self.sync}")


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
class HeldStep:
    """A step whose settings are held around a burst, not switched in every call: `call()` runs the work alone,
    `hold()` returns the context it needs (a kernel's library switch and precision flags). `measure` enters `hold()`
    once around its warm-up and samples; called directly, the step enters it around the one call."""

    call: Callable[[], object]
    hold: Callable[[], AbstractContextManager]

    def __call__(self) -> object:
        with self.hold():
            return self.call()


def queue_length(one_call_s: float, *, most: int = QUEUE_CALLS, budget_s: float = QUEUE_S,
                 fewest: int = QUEUE_FEWEST) -> int:
    """How many calls a queued sample takes: `most` (DeepBench's 100) where that many take at most `budget_s`,
    else as many as fit in it, at least `fewest`."""
    if not one_call_s > 0:
        return most
    return max(fewest, min(most, math.floor(budget_s / one_call_s + 1e-9)))  # 0.01 // 1e-4 is 99.0


@dataclass(frozen=True)
class Queued:
    """DeepBench's clock for `step`: a sample runs `calls` calls with no sync between them, then one sync, and is
    their time divided by `calls`. A step with its own loop (`repeat(n)`: the C++ harness queues n calls itself,
    as DeepBench's loop does) runs it; otherwise `step` is called `calls` times, inside its held settings once."""

    step: Callable[[], object]
    calls: int

    def __post_init__(self) -> None:
        if not isinstance(self.calls, int) or self.calls < 1:
            raise ValueError(f"a queued sample needs at least one call, got {self.calls!r}")

    def __call__(self) -> None:
        call, hold = _parts(self.step)
        with hold():
            _run(call, self.calls)


def _parts(fn: Callable[[], object]) -> tuple[Callable[[], object], Callable[[], AbstractContextManager]]:
    """A step's work and the settings held around it (none for a plain callable)."""
    return (fn.call, fn.hold) if isinstance(fn, HeldStep) else (fn, nullcontext)


def _run(call: Callable[[], object], calls: int) -> None:
    """`calls` calls of `call`, by its own loop where it has one (`repeat`)."""
    if calls > 1 and callable(repeat := getattr(call, "repeat", None)):
        repeat(calls)
        return
    for _ in range(calls):
        call()


def one_call_s(step: Callable[[], object], sync: Sync | None, *, calls: int = 3,
               clock: Callable[[], float] = time.perf_counter) -> float:
    """The fastest of `calls` synced calls of `step` (after one untimed call): what sizes a queued sample."""
    sync = sync or (lambda: None)
    step()
    sync()
    best = math.inf
    for _ in range(calls):
        t0 = clock()
        step()
        sync()
        best = min(best, clock() - t0)
    return best


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
    clock: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Time `fn()` call by call until the median is stable, and keep every sample.

    Runs `warmup` untimed calls, then samples until at least `min_samples` calls and `min_time`
    seconds are collected and IQR/median is at most `target_rel_iqr`, or until `max_time` seconds or
    `max_samples` calls. `sync` runs inside each sample, after `fn`; pass `sync_for(device)`.

    On a GPU (`sync_for("cuda")`) a sample is the time between two CUDA events recorded on the current
    stream around `fn`: the GPU's timeline from the first launch to the end of the last kernel, without
    the 5-20 us a host-side synchronize adds to every sample. The synchronize still runs in every sample,
    so no work spills into the next one.

    `fn` may be `Queued` (DeepBench's clock): a sample is then its `calls` calls, queued with no sync between them,
    divided by `calls`, and a warm-up call is one such queue. A `HeldStep` (or the step a `Queued` wraps) has its
    settings entered once around the warm-up and the samples, not in each call. `clock` is the host clock (a test
    may pass a fake one).
    """
    if warmup < 0 or min_samples < 1 or max_samples < min_samples or min_time < 0 or max_time < min_time:
        raise ValueError("measure(): need warmup >= 0, 1 <= min_samples <= max_samples and 0 <= min_time <= max_time")
    calls = fn.calls if isinstance(fn, Queued) else 1
    work, hold = _parts(fn.step if isinstance(fn, Queued) else fn)
    body = (lambda: _run(work, calls)) if calls > 1 else work
    events = isinstance(sync, CudaSync)
    if events:
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        sync_name = "cuda-events"
    else:
        sync_name = (getattr(sync, "__qualname__", None) or getattr(getattr(sync, "func", None), "__qualname__", None)
                     or type(sync).__name__)
    with torch_threads(threads) as used_threads, hold():
        for _ in range(warmup):
            body()
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
            body()
            if events:
                end.record()
            if sync is not None:
                sync()
            t1 = clock()
            append((begin.elapsed_time(end) * 1e-3 if events else t1 - t0) / calls)
            if len(samples) >= next_check:
                elapsed = t1 - start
                if len(samples) >= max_samples or elapsed >= max_time:
                    break
                if elapsed >= min_time and _rel_iqr(samples) <= target_rel_iqr:
                    break
                # check again after ~10% more samples: the check stays cheap next to the calls
                next_check = min(max_samples, len(samples) + max(1, len(samples) // 10))
    return Measurement(samples=tuple(samples), warmup=warmup, threads=used_threads,
                       sync=sync_name if sync is not None else "none", calls=calls)


def _rel_iqr(samples: list[float]) -> float:
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    med = statistics.median(samples)
    return (q3 - q1) / med if med > 0 else math.inf


@dataclass(frozen=True)
class Rounds:
    """How `interleave` times a group of compared steps.

    Each step gets `warmup` untimed calls, then `rounds` rounds run one burst of every step in a
    shuffled order: `burst_warmup` untimed calls (the previous burst ran another step, which may have
    evicted this one's caches), then samples for at least `burst_s` seconds and `burst_min_samples`
    calls, at most `burst_max_samples`. A step whose last warm-up call took `burst_s` or more gets one
    call per burst (or its share of `min_calls`) and no warm-up call before it: its own length dwarfs what a
    cold cache costs, and a group of second-long steps would otherwise take minutes. While a step's 95%
    interval is wider than `noise_bound` of its median (half width), up to `extra_rounds` more rounds of the
    whole group follow; a step still that noisy after them is flagged `noisy`.

    `min_calls`: the fewest timed calls a step gets over all its rounds (and all `processes`): each burst takes at
    least its share, `min_calls / rounds`, so a step that fills a burst with one call (a whole epoch, a compile)
    still gets enough timings for its interval; a queued sample counts its calls.

    `processes`: how many worker processes the sweep spreads the rounds over (`sweep`, pyperf's method), one after
    another, each a fresh interpreter timing `each()`'s rounds: the noise a row's interval carries then includes what
    differs between processes (memory layout, the start-up's state, the moment), which one process cannot show.
    """

    rounds: int = 5
    warmup: int = 3
    burst_warmup: int = 1
    burst_s: float = 0.02
    burst_min_samples: int = 2
    burst_max_samples: int = 100
    extra_rounds: int = 3
    noise_bound: float = stats.NOISE_BOUND
    min_calls: int = 1
    processes: int = 1

    def __post_init__(self) -> None:
        if (self.rounds < 1 or self.processes < 1 or self.min_calls < 1 or self.warmup < 0 or self.burst_warmup < 0
                or self.burst_s < 0 or not 1 <= self.burst_min_samples <= self.burst_max_samples
                or self.extra_rounds < 0 or not self.noise_bound > 0):
            raise ValueError(f"invalid timing plan: {self}")

    def each(self) -> Rounds:
        """What one of the `processes` times: its share of the rounds and extra rounds, at least 2 rounds (a process's
        own drift between rounds must show)."""
        if self.processes == 1:
            return self
        return replace(self, rounds=max(2, math.ceil(self.rounds / self.processes)),
                       extra_rounds=math.ceil(self.extra_rounds / self.processes),
                       min_calls=math.ceil(self.min_calls / self.processes), processes=1)

    def samples_per_burst(self, calls_per_sample: int = 1, *, alone: bool = False) -> int:
        """The fewest samples a burst takes: `burst_min_samples` (one for a step that fills a burst `alone`), more
        where `rounds` bursts would not reach `min_calls` calls (a queued sample holds `calls_per_sample`), within
        `burst_max_samples`."""
        share = math.ceil(self.min_calls / self.rounds / calls_per_sample)
        return min(self.burst_max_samples, max(1 if alone else self.burst_min_samples, share))

    def with_min_time(self, min_time: float) -> Rounds:
        """This plan with `min_time` seconds of sampling per step spread over its rounds."""
        return replace(self, burst_s=min_time / self.rounds)


#: how many worker processes a claim's rounds are spread over (`Rounds.processes`), unless a quick run or a plan
#: says otherwise: 3 gives each process 2 of the rounds, and the interval the spread between processes
WORKER_PROCESSES = 3


def plan(min_time: float, quick: bool, **changes: object) -> Rounds:
    """How a claim's sweep times each group of compared points: `min_time` seconds of samples per point spread
    over 5 interleaved rounds, shared among `WORKER_PROCESSES` processes (2 each), at least `stats.MIN_CALLS` timed
    calls a point, and up to 3 more rounds while a point is noisy (`stats.NOISE_BOUND`). A quick run only checks the
    plumbing: 2 short rounds in one process. `changes` adapt the plan to a claim's steps (fewer warm-up calls where
    one step takes a second)."""
    if quick:
        return replace(Rounds(rounds=2, warmup=1, burst_s=0.005, burst_min_samples=1, extra_rounds=0), **changes)
    return replace(Rounds(processes=WORKER_PROCESSES, min_calls=stats.MIN_CALLS), **changes).with_min_time(min_time)


def interleave(steps: Mapping[Hashable, tuple[Callable[[], object], Sync | None]], plan: Rounds = Rounds(), *,
               seed: int | None = None, threads: int | None = None) -> dict[Hashable, Measurement | Exception]:
    """Time every step of `steps` (name -> (step, sync)) in interleaved rounds (see `Rounds`).

    Returns, per name, its `Measurement` (every round's samples, the seed, the noise flag), or the
    exception its step raised: a step that fails leaves the rounds and the others go on. `seed`
    (drawn at random when None) shuffles each round's order and is stored with every measurement.
    """
    seed = random.SystemRandom().randrange(2**32) if seed is None else seed
    order = random.Random(seed)
    burst = dict(warmup=plan.burst_warmup, min_time=plan.burst_s, max_time=max(plan.burst_s, 1e-9),
                 max_samples=plan.burst_max_samples, target_rel_iqr=math.inf)
    bursts: dict[Hashable, dict] = {}
    failed: dict[Hashable, Exception] = {}
    samples: dict[Hashable, list[float]] = {name: [] for name in steps}
    sizes: dict[Hashable, list[int]] = {name: [] for name in steps}
    sync_names: dict[Hashable, str] = {}
    calls = {name: step.calls if isinstance(step, Queued) else 1 for name, (step, _) in steps.items()}

    def run(name: Hashable, **options: object) -> Measurement | None:
        fn, sync = steps[name]
        try:
            return measure(fn, sync=sync, **options)
        except Exception as exc:  # noqa: BLE001 - one failing step must not end the others' rounds
            failed[name] = exc
            return None

    def noisy(name: Hashable) -> bool:
        done = Measurement(tuple(samples[name]), 0, 0, "", tuple(sizes[name]))
        return done.rel_halfwidth() > plan.noise_bound

    with torch_threads(threads) as used_threads:
        for name in steps:  # warm-up; its last call's time picks the step's bursts, and is not kept
            if warm := run(name, warmup=max(plan.warmup - 1, 0), min_time=0, max_time=0, min_samples=1,
                           max_samples=1):
                # a queued sample lasts its calls' time: what decides whether it fills a burst alone (then no
                # burst warm-up, and only the burst's share of `min_calls`)
                alone = warm.samples[0] * warm.calls >= plan.burst_s
                bursts[name] = dict(burst, min_samples=plan.samples_per_burst(warm.calls, alone=alone),
                                    **(dict(warmup=0) if alone else {}))
        done = 0
        while live := [name for name in steps if name not in failed]:
            if done >= plan.rounds and (done >= plan.rounds + plan.extra_rounds or not any(map(noisy, live))):
                break
            order.shuffle(live)
            for name in live:
                if (m := run(name, **bursts[name])) is not None:
                    samples[name].extend(m.samples)
                    sizes[name].append(m.n)
                    sync_names[name] = m.sync
            done += 1
    return {name: failed[name] if name in failed else
            Measurement(samples=tuple(samples[name]), warmup=plan.warmup, threads=used_threads,
                        sync=sync_names[name], round_sizes=tuple(sizes[name]), seed=seed, noisy=noisy(name),
                        calls=calls[name])
            for name in steps}
