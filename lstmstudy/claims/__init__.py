"""What every claim module shares: verdicts decided by a rule stated before the data, and ratios with
confidence intervals computed from the raw samples.

A claim module (`lstmstudy.claims.cudnn_fallback`, ...) holds the seed's figures, the grid it measures,
and `verdicts(frame) -> list[Verdict]`: one verdict per hardware set, computed from stored results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import Enum

import numpy as np
import pandas as pd

SHAPE_KEYS = ["hardware_id", "phase", "precision", "batch", "timesteps", "features", "hidden", "layers",
              "bidirectional", "config"]


class Outcome(str, Enum):
    REPRODUCED = "reproduced"
    PARTLY = "partly"
    NOT_REPRODUCED = "not reproduced"
    NOT_MEASURED = "not measured on this hardware"


@dataclass(frozen=True)
class Verdict:
    """One claim on one hardware set: the seed's figure, ours, and the outcome of the stated rule."""

    claim: str
    statement: str
    hardware_id: str
    seed_figure: str
    ours: float | None
    ours_text: str
    outcome: Outcome
    rule: str

    def as_dict(self) -> dict:
        return {**asdict(self), "outcome": self.outcome.value}


def frame(verdicts: Sequence[Verdict]) -> pd.DataFrame:
    return pd.DataFrame([v.as_dict() for v in verdicts])


def band(value: float | None, reproduced: tuple[float, float], partly: tuple[float, float]) -> Outcome:
    """Outcome of a figure against half-open bands [lo, hi): `reproduced` first, then `partly`."""
    if value is None or not np.isfinite(value):
        return Outcome.NOT_MEASURED
    if reproduced[0] <= value < reproduced[1]:
        return Outcome.REPRODUCED
    if partly[0] <= value < partly[1]:
        return Outcome.PARTLY
    return Outcome.NOT_REPRODUCED


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


def timing_options(min_time: float, quick: bool) -> dict[str, float]:
    """`timing.measure` options for a claim sweep: a quick run only checks the plumbing, so it samples briefly."""
    if quick:
        return dict(min_time=0.02, max_time=0.2, min_samples=3)
    return dict(min_time=min_time, max_time=max(1.0, 5 * min_time))


def geomean(values: Sequence[float]) -> float:
    """The geometric mean: the right average of ratios (a 2x slowdown and a 2x speed-up cancel)."""
    arr = np.asarray(values, dtype=float)
    return float(np.exp(np.log(arr).mean())) if arr.size else float("nan")
