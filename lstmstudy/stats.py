"""The statistics behind every figure and verdict: ratios of medians with bootstrap intervals from the raw
samples, and the geometric mean that averages ratios."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

#: what identifies one configuration across kernels (a ratio pairs rows that agree on all of these)
SHAPE_KEYS = ["hardware_id", "phase", "precision", "batch", "timesteps", "features", "hidden", "layers",
              "bidirectional", "config"]


def bootstrap_ratio(numerator: Sequence[float], denominator: Sequence[float], *, n_boot: int = 2000,
                    seed: int = 0, confidence: float = 0.95) -> tuple[float, float, float]:
    """Ratio of medians and a percentile-bootstrap confidence interval, resampling each sample set."""
    a = np.asarray(numerator, dtype=float)
    b = np.asarray(denominator, dtype=float)
    rng = np.random.default_rng(seed)
    boot_a = np.median(rng.choice(a, size=(n_boot, a.size)), axis=1)
    boot_b = np.median(rng.choice(b, size=(n_boot, b.size)), axis=1)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(boot_a / boot_b, [tail, 100 - tail])
    return float(np.median(a) / np.median(b)), float(lo), float(hi)


def bootstrap_median(samples: Sequence[float], *, n_boot: int = 2000, seed: int = 0,
                     confidence: float = 0.95) -> tuple[float, float, float]:
    """The median of `samples` and a percentile-bootstrap confidence interval for it."""
    a = np.asarray(samples, dtype=float)
    rng = np.random.default_rng(seed)
    boot = np.median(rng.choice(a, size=(n_boot, a.size)), axis=1)
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(boot, [tail, 100 - tail])
    return float(np.median(a)), float(lo), float(hi)


def ratios(results: pd.DataFrame, baseline: str, kernels: Sequence[str] | None = None,
           keys: Sequence[str] = SHAPE_KEYS) -> pd.DataFrame:
    """Each kernel's median time over `baseline`'s at the same configuration, with a bootstrap CI.

    Only `ok` rows are compared; a ratio above 1 means the kernel is slower than the baseline.
    """
    ok = results[results.status == "ok"]
    base = ok[ok.kernel == baseline].set_index(list(keys))
    others = ok[ok.kernel != baseline] if kernels is None else ok[ok.kernel.isin(kernels)]
    rows = []
    for _, row in others.iterrows():
        key = tuple(row[k] for k in keys)
        if key not in base.index:
            continue
        ref = base.loc[[key]].iloc[-1]
        ratio, lo, hi = bootstrap_ratio(row["samples"], ref["samples"])
        rows.append({**{k: row[k] for k in keys}, "kernel": row["kernel"], "baseline": baseline,
                     "ratio": ratio, "ratio_lo": lo, "ratio_hi": hi,
                     "median_s": row["median_s"], "baseline_median_s": ref["median_s"]})
    return pd.DataFrame(rows, columns=[*keys, "kernel", "baseline", "ratio", "ratio_lo", "ratio_hi",
                                       "median_s", "baseline_median_s"])


def geomean(values: Sequence[float]) -> float:
    """The geometric mean: the right average of ratios (a 2x slowdown and a 2x speed-up cancel)."""
    arr = np.asarray(values, dtype=float)
    return float(np.exp(np.log(arr).mean())) if arr.size else float("nan")
