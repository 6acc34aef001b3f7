"""What does `lstmstudy.watch` cost a training step? (A benchmark script, not a test.)

Watching a layer costs something once, in its first forward (the Keras cell spy or the torch profiler, the
explanation, the warning); after that the layer is unwatched, so a step should cost the same as without
the watch. This times the steps after the first, watched against unwatched, interleaved in the same rounds
(`timing.interleave`), for the blog post's Keras model (`train_on_batch`) and for a torch `nn.LSTM`
(forward, loss, backward), and reports each ratio with its 95% interval (`stats.bootstrap_ratio`, paired).
It also reports the one-time cost: the first call of a watched model against the first call of a fresh
unwatched one. Run: `.venv/bin/python benchmarks/watch_overhead.py`.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable

import numpy as np
import torch

from lstmstudy import backends, stats, timing
from lstmstudy.terminal import quiet_native_stderr
from lstmstudy.watch import FallbackWarning, watching

backends.study_process()  # one of the study's own processes: quiet native logs, Keras on torch without TF

PLAN = timing.Rounds(rounds=15, burst_s=0.1, burst_max_samples=200)


def keras_steps() -> tuple[Callable[[], object], Callable[[], object]]:
    """The blog post's model: one train_on_batch per step, batch 1, 32 steps of 16 features."""
    with quiet_native_stderr():
        import keras

    def blog_model():
        model = keras.Sequential([
            keras.Input(shape=(32, 16), batch_size=1),
            keras.layers.LSTM(64, activation=keras.layers.ReLU(negative_slope=0.05), return_sequences=True),
            keras.layers.Dropout(0.2),
            keras.layers.LSTM(32),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(16),
        ])
        model.compile(loss="mean_squared_error", optimizer="adam")
        return model

    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((1, 32, 16), dtype="float32"), rng.standard_normal((1, 16), dtype="float32")
    return _first_and_steps(blog_model, lambda model: model.train_on_batch(x, y), "keras (blog model, train_on_batch)")


def torch_steps() -> tuple[Callable[[], object], Callable[[], object]]:
    """An nn.LSTM training step (forward, mean-squared loss, backward) with cuDNN switched off, so it warns."""
    x = torch.randn(32, 1, 16)

    def lstm():
        torch.manual_seed(0)
        return torch.nn.LSTM(16, 64)

    def step(module):
        module.zero_grad(set_to_none=True)
        module(x)[0].square().mean().backward()

    return _first_and_steps(lstm, step, "torch (nn.LSTM(16, 64), forward + backward)")


def _first_and_steps(build, step, label: str):
    """Build a watched and an unwatched model, time each one's first call, and return the two steps."""
    plain, watched = build(), build()
    start = time.perf_counter()
    step(plain)
    first_plain = time.perf_counter() - start
    start = time.perf_counter()
    with watching(watched) as watch:
        step(watched)
    first_watched = time.perf_counter() - start
    print(f"{label}: first call {first_plain * 1e3:.1f} ms unwatched, {first_watched * 1e3:.1f} ms watched "
          f"({len(watch.findings)} FallbackWarning(s))")
    return lambda: step(plain), lambda: step(watched), label


def report(plain, watched, label: str) -> None:
    timed = timing.interleave({"unwatched": (plain, None), "watched": (watched, None)}, PLAN, seed=0)
    ratio, low, high = stats.bootstrap_ratio(timed["watched"].rounds, timed["unwatched"].rounds, paired=True)
    print(f"{label}: step after the first, median {timed['unwatched'].median * 1e3:.3f} ms unwatched, "
          f"{timed['watched'].median * 1e3:.3f} ms watched; watched/unwatched {ratio:.3f} "
          f"(95% CI {low:.3f}-{high:.3f}, {timed['watched'].n} and {timed['unwatched'].n} samples)")


def main() -> None:
    warnings.simplefilter("ignore", FallbackWarning)  # the warnings are not what is measured here
    torch.backends.cudnn.enabled = False
    print(f"torch threads: {torch.get_num_threads()}")
    for steps in (keras_steps, torch_steps):
        report(*steps())


if __name__ == "__main__":
    main()
