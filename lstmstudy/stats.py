"""The statistics behind every figure and verdict: times and ratios with intervals from the raw samples,
and the geometric mean that averages ratios.

A row's samples come in rounds (`timing.interleave`): short bursts of the kernels a claim compares, in a
shuffled order, repeated; and the rounds of a set measured in several worker processes (`sweep`) come from
each of them (`process_rounds`: how many rounds each process timed). Its time is the median over rounds of the
round medians, and its interval a bootstrap over processes, over rounds within each and over samples within
each round, so that drift between rounds (a neighbour's load, a clock change) and between processes (another
memory layout, another start) widens the interval instead of hiding in it. Two rows timed in the same rounds
give their ratio round by round, so drift that slows both cancels.

Every interval is a **re-run interval**: where a second run on the same machine is expected to land 95% of the
time, not only where the true value lies. A second run's estimate has its own noise besides the first's, so the
interval is formed from differences of two independent replicates (`_rerun`): about sqrt(2) times the width of a
95% confidence interval. `benchmarks/interval_coverage.py` checks that a second run lands inside.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

#: a timed row is noisy while its re-run interval's half width exceeds this fraction of its time (`timing.Rounds`
#: plans more rounds for it, then flags it): +-14% is a 95% confidence interval of about +-10%
NOISE_BOUND = 0.14
NOISY_WORDS = f"95% re-run interval wider than +-{NOISE_BOUND:.0%}"
#: the fewest timed calls a measured row gets (`timing.plan`): with 5 rounds, 4 a burst. Fewer left a fifth of the
#: first H100 set's rows with 5-8 timings, too few for an interval that a second run falls inside
MIN_CALLS = 20

#: what identifies one configuration across kernels (a ratio pairs rows that agree on all of these)
SHAPE_KEYS = ["hardware_id", "phase", "precision", "batch", "timesteps", "features", "hidden", "layers",
              "bidirectional", "config"]


def rounds_of(samples: Sequence[float], round_sizes: Sequence[int] = ()) -> list[np.ndarray]:
    """A row's samples split into its rounds (stored in round order; a row from before rounds is one round)."""
    values = np.asarray(samples, dtype=float)
    if not len(round_sizes):
        return [values] if values.size else []
    if sum(round_sizes) != values.size:
        raise ValueError(f"round sizes {list(round_sizes)} do not add up to {values.size} samples")
    return np.split(values, np.cumsum(round_sizes)[:-1])


def center(rounds: Sequence[np.ndarray]) -> float:
    """The median over rounds of each round's median: a time that one disturbed round cannot move far.
    With one round it is the median of the samples."""
    return float(np.median([np.median(r) for r in rounds]))


def _draws(processes: Sequence[int], n_rounds: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """Which rounds each bootstrap replicate draws, shape (n_boot, slots), -1 in a slot left empty.

    One process (`processes` empty or of one entry): the rounds with replacement. Several (`processes` gives each
    one's number of rounds, in round order): the processes with replacement, then each drawn process's own rounds
    with replacement, as many as it timed (a process with fewer rounds leaves slots empty)."""
    if len(processes) <= 1:
        return rng.integers(0, n_rounds, (n_boot, n_rounds))
    sizes = np.asarray(processes, dtype=int)
    if sizes.sum() != n_rounds:
        raise ValueError(f"process rounds {list(processes)} do not add up to {n_rounds} rounds")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    chosen = rng.integers(0, sizes.size, (n_boot, sizes.size))
    drawn = (rng.random((n_boot, sizes.size, sizes.max())) * sizes[chosen][..., None]).astype(int)
    picks = starts[chosen][..., None] + drawn
    picks[np.arange(sizes.max()) >= sizes[chosen][..., None]] = -1
    return picks.reshape(n_boot, -1)


def _few_processes(boot: np.ndarray, estimate: float, processes: Sequence[int]) -> np.ndarray:
    """Replicates drawn over K processes spread (log scale) sqrt(K / (K - 1)) times as far from `estimate`: drawing
    K of K values with replacement shrinks their variance by (K - 1) / K, which at 3 processes is a third too
    little (the bootstrap's usual rescaling; it widens the rounds' share too, which errs on the safe side)."""
    if len(processes) <= 1:
        return boot
    return estimate * (boot / estimate) ** np.sqrt(len(processes) / (len(processes) - 1))


def _resampled_round_medians(rounds: Sequence[np.ndarray], picks: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For each drawn round (`picks`, shape (boot, slots)), the median of its samples resampled with replacement;
    NaN in an empty slot (-1)."""
    out = np.full(picks.shape, np.nan)
    for index, values in enumerate(rounds):
        where = picks == index
        if count := int(where.sum()):
            out[where] = np.median(values[rng.integers(0, values.size, (count, values.size))], axis=1)
    return out


def _interval(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    lo, hi = np.percentile(boot, [tail, 100 - tail])
    return float(lo), float(hi)


def _rerun(estimate: float, boot: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Replicates of a second run's estimate: `estimate` moved by the difference of two independent bootstrap
    replicates (on a log scale, where every replicate is positive: times and ratios, whose noise multiplies), so
    that the spread carries the noise of both runs. Their percentile interval is the re-run interval."""
    other = boot[rng.permutation(boot.size)]
    if np.all(boot > 0):
        return estimate * np.exp(np.log(boot) - np.log(other))
    return estimate + (boot - other)


def bootstrap_median(rounds: Sequence[np.ndarray], *, processes: Sequence[int] = (), n_boot: int = 1000,
                     seed: int = 0, confidence: float = 0.95) -> tuple[float, float, float]:
    """`center(rounds)` and its hierarchical percentile-bootstrap re-run interval.

    Each replicate draws the processes with replacement (`processes`: rounds per process; one process when
    empty), the rounds of each drawn process, then each drawn round's samples: the interval includes the drift
    between processes and between rounds, not only the scatter within one burst.
    """
    rng = np.random.default_rng(seed)
    estimate = center(rounds)
    return (estimate, *_interval(_rerun(estimate, _center_replicates(rounds, processes, n_boot, rng), rng),
                                 confidence))


def _center_replicates(rounds: Sequence[np.ndarray], processes: Sequence[int], n_boot: int,
                       rng: np.random.Generator) -> np.ndarray:
    """`n_boot` hierarchical bootstrap replicates of `center(rounds)` (`_draws`, then samples within each round)."""
    boot = np.nanmedian(_resampled_round_medians(rounds, _draws(processes, len(rounds), n_boot, rng), rng), axis=1)
    return _few_processes(boot, center(rounds), processes)


def ratio_replicates(numerator: Sequence[np.ndarray], denominator: Sequence[np.ndarray], *, paired: bool = False,
                     processes: tuple[Sequence[int], Sequence[int]] = ((), ()), n_boot: int = 1000,
                     seed: int = 0) -> tuple[float, np.ndarray]:
    """The ratio of two rows' times, numerator over denominator, and bootstrap replicates of a re-run of it.

    `paired`: the two were timed in the same rounds (interleaved), so the ratio is formed within each
    round (round medians) and summarised by its median over rounds, and a replicate draws the same rounds
    for both: drift that slows both cancels. Unpaired, it is `center(numerator) / center(denominator)`
    and each side is resampled on its own. `processes`: each side's rounds per process (`bootstrap_median`).
    """
    rng = np.random.default_rng(seed)
    ratio = point_ratio(numerator, denominator, paired=paired)
    if paired:
        if len(numerator) != len(denominator) or list(processes[0]) != list(processes[1]):
            raise ValueError(f"paired rows need the same rounds, got {len(numerator)} and {len(denominator)}")
        picks = _draws(processes[0], len(numerator), n_boot, rng)
        boot = np.nanmedian(_resampled_round_medians(numerator, picks, rng)
                            / _resampled_round_medians(denominator, picks, rng), axis=1)
        boot = _few_processes(boot, ratio, processes[0])
    else:
        boot = (_center_replicates(numerator, processes[0], n_boot, rng)
                / _center_replicates(denominator, processes[1], n_boot, rng))
    return ratio, _rerun(ratio, boot, rng)


def point_ratio(numerator: Sequence[np.ndarray], denominator: Sequence[np.ndarray], *, paired: bool = False) -> float:
    """The ratio `ratio_replicates` reports, without its replicates: paired, the median of the per-round ratios;
    unpaired, the ratio of the two times."""
    if paired:
        return float(np.median([np.median(a) / np.median(b) for a, b in zip(numerator, denominator)]))
    return center(numerator) / center(denominator)


def bootstrap_ratio(numerator: Sequence[np.ndarray], denominator: Sequence[np.ndarray], *, paired: bool = False,
                    processes: tuple[Sequence[int], Sequence[int]] = ((), ()), n_boot: int = 1000, seed: int = 0,
                    confidence: float = 0.95) -> tuple[float, float, float]:
    """`ratio_replicates`' ratio and its percentile (re-run) interval."""
    ratio, boot = ratio_replicates(numerator, denominator, paired=paired, processes=processes, n_boot=n_boot,
                                   seed=seed)
    return (ratio, *_interval(boot, confidence))


def geomean_interval(replicates: Sequence[np.ndarray], *, seed: int = 0,
                     confidence: float = 0.95) -> tuple[float, float]:
    """An interval for the geometric mean of ratios over a grid's configurations that covers both sources
    of doubt: each replicate draws the configurations with replacement and, for each drawn one, one of its
    own bootstrap replicates (`ratio_replicates`, all of one length). A claim decides on this interval."""
    logs = np.log(np.stack([np.asarray(r, dtype=float) for r in replicates]))  # (configurations, replicates)
    n_configs, n_boot = logs.shape
    picks = np.random.default_rng(seed).integers(0, n_configs, (n_boot, n_configs))
    return _interval(np.exp(logs[picks, np.arange(n_boot)[:, None]].mean(axis=1)), confidence)


def percentile_interval(replicates: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates, formed as every interval in this module is."""
    return _interval(np.asarray(replicates, dtype=float), confidence)


def fixed_geomean_interval(replicates: Sequence[np.ndarray], confidence: float = 0.95) -> tuple[float, float]:
    """An interval for the geometric mean of ratios at configurations fixed by design (the smallest and the
    largest shape, say: not a sample of a grid): replicate k is the geometric mean of every ratio's k-th
    replicate, so only the rounds and samples are resampled."""
    logs = np.log(np.stack([np.asarray(r, dtype=float) for r in replicates]))
    return _interval(np.exp(logs.mean(axis=0)), confidence)


def row_rounds(row) -> list[np.ndarray]:
    """The rounds of a loaded result row (`results.load`: `samples` and `round_sizes`)."""
    return rounds_of(_field(row, "samples"), _field(row, "round_sizes"))


def row_processes(row) -> list[int]:
    """How many of a loaded row's rounds each worker process timed (`results.load`: `process_rounds`); empty for
    a row of one process."""
    return list(_field(row, "process_rounds"))


def row_median(row, **options) -> tuple[float, float, float]:
    """`bootstrap_median` of a loaded row: its time and re-run interval, over its processes and rounds."""
    return bootstrap_median(row_rounds(row), processes=row_processes(row), **options)


def with_intervals(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with `ci_low_s`/`ci_high_s` formed again from their samples (`row_median`): a stored row keeps the
    interval its process saw as it measured, which holds neither its other processes nor a re-run's noise."""
    out = rows.copy()
    for index, row in out.iterrows():
        if row.get("status") == "ok" and len(row_rounds(row)):
            _, out.at[index, "ci_low_s"], out.at[index, "ci_high_s"] = row_median(row)
    return out


def interleaved(a, b) -> bool:
    """True when two loaded rows were timed in the same interleaved rounds (same round seeds, one per process,
    and the same rounds in each process)."""
    seed_a, seed_b = _field(a, "round_seed", ""), _field(b, "round_seed", "")
    return (str(seed_a) not in ("", "<NA>") and str(seed_a) == str(seed_b)
            and len(_field(a, "round_sizes")) == len(_field(b, "round_sizes"))
            and row_processes(a) == row_processes(b))


def row_ratio(numerator, denominator, **options) -> tuple[float, float, float]:
    """`bootstrap_ratio` of two loaded rows, paired when they were interleaved."""
    return bootstrap_ratio(row_rounds(numerator), row_rounds(denominator),
                           paired=interleaved(numerator, denominator),
                           processes=(row_processes(numerator), row_processes(denominator)), **options)


def row_point_ratio(numerator, denominator) -> float:
    """`point_ratio` of two loaded rows, paired when they were interleaved: a ratio's figure where no interval is
    wanted, from the estimator every interval of it uses."""
    return point_ratio(row_rounds(numerator), row_rounds(denominator), paired=interleaved(numerator, denominator))


def row_round_ratios(numerator, denominator) -> np.ndarray:
    """Two interleaved rows' ratio in each of their rounds (round median over round median), what the rule for rows
    of few timings counts (`rules.sign_rule`); empty where the two were not timed in the same rounds."""
    if not interleaved(numerator, denominator):
        return np.array([])
    return np.array([np.median(a) / np.median(b) for a, b in zip(row_rounds(numerator), row_rounds(denominator))])


def row_round_medians(row) -> np.ndarray:
    """A loaded row's median in each of its rounds: what the rule for few timings compares between rows timed apart
    (`rules.rank_rule`)."""
    return np.array([np.median(r) for r in row_rounds(row)])


def row_replicates(numerator, denominator, **options) -> tuple[float, np.ndarray]:
    """`ratio_replicates` of two loaded rows, paired when they were interleaved."""
    return ratio_replicates(row_rounds(numerator), row_rounds(denominator),
                            paired=interleaved(numerator, denominator),
                            processes=(row_processes(numerator), row_processes(denominator)), **options)


def _field(row, name: str, default: object = ()):
    """A field of a row given as a Series, a dict or a namedtuple; `default` for a frame without the column."""
    value = row.get(name, default) if isinstance(row, (pd.Series, dict)) else getattr(row, name, default)
    return default if value is None or (isinstance(value, float) and np.isnan(value)) else value


def ratios(results: pd.DataFrame, baseline: str, kernels: Sequence[str] | None = None,
           keys: Sequence[str] = SHAPE_KEYS) -> pd.DataFrame:
    """Each kernel's median time over `baseline`'s at the same configuration, with a bootstrap CI and its
    replicates (`row_replicates`): `paired` when the two were timed in the same rounds, `noisy` when either
    row is.

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
        ratio, boot = row_replicates(row, ref)
        lo, hi = _interval(boot, 0.95)
        rows.append({**{k: row[k] for k in keys}, "kernel": row["kernel"], "baseline": baseline,
                     "ratio": ratio, "ratio_lo": lo, "ratio_hi": hi, "replicates": boot,
                     "paired": interleaved(row, ref),
                     "noisy": bool(_field(row, "noisy", False) is True or _field(ref, "noisy", False) is True),
                     "median_s": row["median_s"], "baseline_median_s": ref["median_s"]})
    return pd.DataFrame(rows, columns=[*keys, "kernel", "baseline", "ratio", "ratio_lo", "ratio_hi", "replicates",
                                       "paired", "noisy", "median_s", "baseline_median_s"])


def geomean(values: Sequence[float]) -> float:
    """The geometric mean: the right average of ratios (a 2x slowdown and a 2x speed-up cancel)."""
    arr = np.asarray(values, dtype=float)
    return float(np.exp(np.log(arr).mean())) if arr.size else float("nan")


# --- repeated windows: one value per round (claim 6's energy windows) ----------------------------------------

def one_per_round(values: Sequence[float]) -> list[np.ndarray]:
    """Values measured once per round (the joules of one energy window, say), each as a round of one sample,
    so that `bootstrap_median` and `ratio_replicates` resample the windows themselves."""
    return [np.array([v], dtype=float) for v in values]


def window_median(values: np.ndarray, min_windows: int) -> tuple[float, float, float]:
    """The median over a row's measurement windows (one per round) and its bootstrap interval; NaN where a
    window has no finite value, and no interval (NaN) from fewer than `min_windows` windows: one window
    bootstraps to a point."""
    if not np.all(np.isfinite(values)):
        return float("nan"), float("nan"), float("nan")
    if len(values) < min_windows:
        return float(np.median(values)), float("nan"), float("nan")
    return bootstrap_median(one_per_round(values))


def window_ratio(numerator: np.ndarray, denominator: np.ndarray, paired: bool,
                 min_windows: int) -> tuple[float, float, float, np.ndarray | None]:
    """A ratio of two rows' per-window values (median over windows), its interval and bootstrap replicates;
    NaN where a window's value is missing or not positive (power that did not rise above idle), no interval
    from fewer than `min_windows` windows."""
    if not (np.all(np.isfinite(numerator)) and np.all(np.isfinite(denominator))
            and np.all(numerator > 0) and np.all(denominator > 0)):
        return float("nan"), float("nan"), float("nan"), None
    if min(len(numerator), len(denominator)) < min_windows:
        return float(np.median(numerator) / np.median(denominator)), float("nan"), float("nan"), None
    ratio, boot = ratio_replicates(one_per_round(numerator), one_per_round(denominator), paired=paired)
    return (ratio, *percentile_interval(boot), boot)
