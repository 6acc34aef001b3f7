"""Figure helpers every claim notebook shares: medians with their interquartile spread, ratios with
their confidence intervals, one facet per hardware set, units on every axis."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FixedLocator, FormatStrFormatter, FuncFormatter, MaxNLocator, NullFormatter

from lstmstudy.stats import NOISY_WORDS

NOISY_LABEL = f"noisy ({NOISY_WORDS})"


def use_theme() -> None:
    """The book's look for every figure (seaborn's notebook context, white grid): set by the pages that plot
    (`notebook.check_common`, the summaries), never on import, as it changes matplotlib for the whole process."""
    sns.set_theme(context="notebook", style="whitegrid")


def hardware_label(hardware_id: str) -> str:
    """A hardware set as a figure names it: a CPU set says it is CPU only, so no reader takes it for a GPU's."""
    return f"{hardware_id} (CPU only)" if hardware_id.startswith("cpu-") else hardware_id


def _hardware_title(grid: sns.FacetGrid, prefix: str = "") -> None:
    """Titles of a grid faceted by hardware set (`col`), each set named by `hardware_label`."""
    for ax, name in zip(grid.axes.flat, grid.col_names or [None] * len(grid.axes.flat)):
        if name is not None:
            ax.set_title(prefix + hardware_label(str(name)))


def times(frame: pd.DataFrame, x: str, *, hue: str = "kernel", col: str | None = None, row: str | None = None,
          xlabel: str, ylabel: str = "median time per call (ms)", logx: bool = True, logy: bool = True,
          height: float = 3.2) -> list[sns.FacetGrid]:
    """Median time against `x`, one line per `hue`, the interquartile range as a band; a red ring marks a
    noisy row (its interval stayed wider than the timing plan's bound after every round).

    One figure per hardware set (its id in every panel title), panels by `row` and `col`.
    """
    data = frame[frame.status == "ok"].assign(median_ms=lambda d: d.median_s * 1e3,
                                               p25_ms=lambda d: d.p25_s * 1e3, p75_ms=lambda d: d.p75_s * 1e3)

    def draw(data: pd.DataFrame, color: str, label: str, **_: object) -> None:
        data = data.sort_values(x)
        plt.plot(data[x], data.median_ms, marker="o", color=color, label=label)
        plt.fill_between(data[x], data.p25_ms, data.p75_ms, color=color, alpha=0.2, linewidth=0)
        noisy = data[data.noisy.eq(True)] if "noisy" in data else data.iloc[:0]
        plt.scatter(noisy[x], noisy.median_ms, s=90, facecolors="none", edgecolors="red", linewidths=1.2,
                    label=NOISY_LABEL if len(noisy) else None, zorder=3)

    grids = []
    for hardware_id, part in data.groupby("hardware_id", sort=True):
        grid = sns.FacetGrid(part, col=col, row=row, hue=hue, height=height, aspect=1.2, sharey=False,
                             margin_titles=False)
        grid.map_dataframe(draw)
        for ax in grid.axes.flat:
            ax.set_xscale("log", base=2) if logx else None
            ax.set_yscale("log") if logy else None
            label = hardware_label(hardware_id)
            ax.set_title(f"{label}\n{ax.get_title()}" if ax.get_title() else label, fontsize=9)
        grid.set_axis_labels(xlabel, ylabel)
        grid.add_legend()
        grids.append(grid)
    return grids


def _whiskers(ax: plt.Axes, centres: Sequence[float], lo: Sequence[float], hi: Sequence[float]) -> None:
    """Whiskers from `lo` to `hi` at each bar's centre: the interval itself, wherever the bar's top lies (a
    time over rounds is the median of round medians, which need not sit inside the pooled quartiles or a
    percentile interval)."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    ax.errorbar(centres, (lo + hi) / 2, yerr=(hi - lo) / 2, fmt="none", color="black", capsize=3, linewidth=1)


def ratio_bars(ratios: pd.DataFrame, x: str, *, hue: str | None = None, col: str = "hardware_id",
               xlabel: str, ylabel: str, seed_band: tuple[float, float] | None = None,
               seed_label: str = "seed's range", seed_marks: Mapping[float, str] | None = None, height: float = 3.6,
               order: Sequence | None = None) -> sns.FacetGrid:
    """Ratios (e.g. slowdown over the fused kernel) as bars with bootstrap CIs; 1, the seed's band and any other
    seed figure (`seed_marks`, a dashed line each) marked."""
    grid = sns.catplot(ratios, x=x, y="ratio", hue=hue, col=col, kind="bar", errorbar=None, height=height,
                       aspect=1.4, sharey=False, order=order, legend_out=True)
    for ax, (_, facet) in zip(grid.axes.flat, ratios.groupby(col, sort=True)):
        for container, (_, part) in zip(ax.containers, facet.groupby(hue, sort=True) if hue else [(None, facet)]):
            part = part.set_index(x).reindex([t.get_text() for t in ax.get_xticklabels()]).dropna(subset=["ratio"])
            centres = [bar.get_x() + bar.get_width() / 2 for bar in container if not np.isnan(bar.get_height())]
            if len(centres) == len(part):
                _whiskers(ax, centres, part.ratio_lo, part.ratio_hi)
        ax.axhline(1.0, color="black", linewidth=1)
        if seed_band:
            ax.axhspan(*seed_band, color="tab:orange", alpha=0.15, label=seed_label)
        for value, label in (seed_marks or {}).items():
            ax.axhline(value, color="tab:orange", linestyle="--", linewidth=1, label=label)
        for label in ax.get_xticklabels():
            label.set(rotation=30, horizontalalignment="right")
    grid.set_axis_labels(xlabel, ylabel)
    _hardware_title(grid)
    return grid


def heatmap(pivot: pd.DataFrame, *, title: str, xlabel: str, ylabel: str, cbar_label: str,
            center: float = 1.0, ax: plt.Axes | None = None, log: bool = False) -> plt.Axes:
    """A diverging heatmap centred on `center` (1.0: no speed-up), annotated with the values.

    `log` colours ratios on a log scale symmetric about `center`, so that 2x and 0.5x are equally intense
    and one outlier does not wash out the rest; the annotations stay the ratios themselves.
    """
    ax = ax or plt.figure(figsize=(1.1 * pivot.shape[1] + 2, 0.6 * pivot.shape[0] + 1.5)).gca()
    if log:
        from matplotlib.colors import LogNorm

        values = pivot.to_numpy(dtype=float)
        values = values[np.isfinite(values) & (values > 0)]
        span = float(max(np.abs(np.log(values / center)).max() if values.size else 0.0, np.log(1.25)))
        norm = LogNorm(center / np.exp(span), center * np.exp(span))
        steps = ((0.01, 0.1, 1.0, 10.0, 100.0) if span > np.log(12) else
                 (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0) if span > np.log(2.5) else (0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0))
        ticks = [t * center for t in steps if norm.vmin <= t * center <= norm.vmax]
        sns.heatmap(pivot, annot=True, fmt=".2f", cmap="RdBu", norm=norm, ax=ax,
                    cbar_kws={"label": cbar_label, "ticks": ticks, "format": "%g"})
        ax.collections[0].colorbar.minorticks_off()
    else:
        sns.heatmap(pivot, annot=True, fmt=".2f", cmap="RdBu", center=center, ax=ax, cbar_kws={"label": cbar_label})
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    return ax


def curves(frame: pd.DataFrame, x: str, y: str, *, lo: str | None = None, hi: str | None = None, hue: str,
           col: str | None = None, row: str | None = None, xlabel: str, ylabel: str, hue_title: str | None = None,
           logx: bool = True, logy: bool = True, hline: float | None = None,
           height: float = 3.2) -> sns.FacetGrid | None:
    """`y` against `x`, one line per `hue` with the [`lo`, `hi`] band (e.g. a 95% interval) shaded.

    Unlike `times`, the hardware sets share the panels (pass `hue="hardware_id"`) so that their curves can be
    compared on one axis; panels by `row` and `col`; `hline` marks a reference (1.0 for a ratio).
    Returns None for an empty frame.
    """
    if frame.empty:
        return None

    def draw(data: pd.DataFrame, color: str, label: str, **_: object) -> None:
        data = data.sort_values(x)
        plt.plot(data[x], data[y], marker="o", color=color, label=label)
        if lo and hi:
            plt.fill_between(data[x], data[lo], data[hi], color=color, alpha=0.2, linewidth=0)

    grid = sns.FacetGrid(frame, col=col, row=row, hue=hue, height=height, aspect=1.3, sharey=False)
    grid.map_dataframe(draw)
    for ax in grid.axes.flat:
        if logx:
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))  # 64, not 2^6
        if frame[x].nunique() <= 10:  # ticks at the measured values
            ax.set_xticks(sorted(frame[x].unique()))
        ax.set_yscale("log") if logy else None
        if hline is not None:
            ax.axhline(hline, color="black", linewidth=1)
    if row and col:
        grid.set_titles(template="{row_name} | {col_name}")
    elif row or col:
        grid.set_titles(template="{row_name}" if row else "{col_name}")
    grid.set_axis_labels(xlabel, ylabel)
    grid.add_legend(title=hue_title or hue)
    return grid


# --- speed-ups over fp32 (claim 3's page) ------------------------------------------------------------------

def speedup_by_batch(table: pd.DataFrame) -> sns.FacetGrid | None:
    """Speed-up over fp32 (x) against batch size, one line per `series` (precision and phase) with the bootstrap
    95% interval shaded, a row per hardware set and a column per `shape`; None for an empty table.

    `table` has mixed precision's `by_batch` layout: hardware_id, shape, series, batch, ratio, ratio_lo, ratio_hi.
    """
    grid = curves(table, x="batch", y="ratio", lo="ratio_lo", hi="ratio_hi", hue="series", row="hardware_id",
                  col="shape", xlabel="batch size", ylabel="speed-up over fp32 (x)", hue_title="precision, phase",
                  hline=1.0)
    for ax in grid.axes.flat if grid is not None else []:
        lo, hi = ax.get_ylim()
        for ticks in ((0.5, 0.67, 0.8, 1, 1.25, 1.5, 2), (0.1, 0.2, 0.5, 1, 2, 5, 10), (0.01, 0.1, 1, 10, 100)):
            inside = [t for t in ticks if lo <= t <= hi]
            if ticks[0] <= lo and hi <= ticks[-1]:  # the finest set that spans the axis
                break
        ax.yaxis.set_major_locator(FixedLocator(inside))
        ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
    return grid


def speedup_heatmaps(table: pd.DataFrame, rows: pd.DataFrame, kernel: str,
                     precisions: Sequence[str]) -> list[plt.Figure]:
    """Speed-up over fp32 (x) of `kernel` as hidden size x timesteps heatmaps: one figure per hardware set and
    batch size with at least two cells, a row per low precision (in the order of `precisions`) and a column per
    phase. A precision and phase that did not run shows its reason instead of a map.

    `table` has mixed precision's `speedups` layout (one row per low-precision / fp32 pair); `rows` are the stored
    result rows it came from, which say what was attempted and why a cell did not run (`status`, `error`).
    """
    table = table[table.kernel == kernel]
    mine = rows[rows.kernel == kernel] if not rows.empty else rows
    figures = []
    for (hardware_id, batch), part in table.groupby(["hardware_id", "batch"], sort=True):
        if len(part[["hidden", "timesteps"]].drop_duplicates()) < 2:
            continue  # a batch size of the batch sweep: one cell, shown in the batch figure instead
        cells = mine[(mine.hardware_id == hardware_id) & (mine.batch == batch)]
        low = [p for p in precisions if p in set(cells.precision)]
        phases = sorted(cells.phase.unique())
        fig, axes = plt.subplots(len(low), len(phases), squeeze=False, figsize=(4.6 * len(phases), 3.4 * len(low)))
        for i, precision in enumerate(low):
            for j, phase in enumerate(phases):
                ax = axes[i][j]
                here = part[(part.precision == precision) & (part.phase == phase)]
                title = f"{hardware_label(hardware_id)}\n{kernel}, {precision} over fp32, {phase}, batch {batch}"
                if here.empty:
                    reasons = cells[(cells.precision == precision) & (cells.phase == phase)
                                    & (cells.status != "ok")].error.unique()
                    ax.text(0.5, 0.5, "not measured:\n" + _wrap(reasons[0] if len(reasons) else "no fp32 pair"),
                            ha="center", va="center", fontsize=8, transform=ax.transAxes)
                    ax.set(title=title, xticks=[], yticks=[])
                    ax.title.set_fontsize(9)
                    continue
                pivot = here.pivot_table(index="hidden", columns="timesteps", values="ratio")
                heatmap(pivot, title=title, xlabel="timesteps", ylabel="hidden size",
                        cbar_label="speed-up over fp32 (x)", ax=ax, log=True)
                ax.title.set_fontsize(9)
        fig.tight_layout()
        figures.append(fig)
    return figures


def _wrap(text: str, width: int = 48) -> str:
    return "\n".join(textwrap.wrap(str(text), width)[:6])


# --- energy (claim 6's page) ---------------------------------------------------------------------------------

def energy_bars(table: pd.DataFrame, kernel_order: Sequence[str], precision_order: Sequence[str], *,
                height: float = 3.2) -> list[sns.FacetGrid]:
    """GPU energy in J per 1,000 sequences per kernel (bars: total, the median over windows, with its 95%
    interval as whiskers; hatched: above idle), hue = precision; one figure per hardware set, panels by phase
    (rows) and shape (columns), linear axes from zero so the two parts compare. Kernels and precisions
    follow `kernel_order` and `precision_order` (others after, sorted).

    `table` has energy's `energy_table` layout (hardware_id, kernel, precision, phase, shape, j_per_1k_seq and
    its _lo/_hi, above_idle_j_per_1k_seq). Returns the FacetGrids (an empty list for an empty table).
    """
    grids = []
    order = [k for k in kernel_order if k in set(table.kernel)] + sorted(set(table.kernel) - set(kernel_order))
    for hardware_id, part in table.groupby("hardware_id", sort=True):
        hue_order = [p for p in precision_order if p in set(part.precision)]
        grid = sns.catplot(part, x="kernel", y="j_per_1k_seq", hue="precision", col="shape", row="phase",
                           kind="bar", order=order, hue_order=hue_order, errorbar=None, height=height,
                           aspect=1.3, sharey=False)
        for (phase, shape), ax in grid.axes_dict.items():
            facet = part[(part["phase"] == phase) & (part["shape"] == shape)]
            for container, precision in zip(list(ax.containers)[:len(hue_order)], hue_order):
                rows = facet[facet.precision == precision].drop_duplicates("kernel", keep="last").set_index("kernel")
                for bar, kernel in zip(container, order):
                    if kernel not in rows.index or not np.isfinite(bar.get_height()):
                        continue
                    row, centre = rows.loc[kernel], bar.get_x() + bar.get_width() / 2
                    _whiskers(ax, [centre], [row.j_per_1k_seq_lo], [row.j_per_1k_seq_hi])
                    if np.isfinite(row.above_idle_j_per_1k_seq):
                        ax.bar(centre, row.above_idle_j_per_1k_seq, width=bar.get_width(), fill=False,
                               hatch="///", edgecolor="black", linewidth=0.5)
            ax.set_ylim(bottom=0)
            ax.set_title(f"{hardware_id}\n{phase}, {shape}", fontsize=9)
            for label in ax.get_xticklabels():
                label.set(rotation=30, horizontalalignment="right")
        grid.set_axis_labels("kernel", "J per 1,000 sequences")
        grid.figure.suptitle("GPU energy per 1,000 sequences (linear scale). Bars: total; hatched: above idle",
                             y=1.02, fontsize=10)
        grids.append(grid)
    return grids


def _diagonal_band(ax: plt.Axes, line: np.ndarray, band: tuple[float, float], diagonal: str, wedge: str) -> list:
    """A ratio-against-ratio panel's reference: the dashed diagonal (y = x over `line`) and the shaded wedge of
    a rule's `band` of y / x; returns the two artists, for a legend."""
    return [ax.plot(line, line, color="black", linestyle="--", linewidth=1, label=diagonal)[0],
            ax.fill_between(line, band[0] * line, band[1] * line, color="tab:green", alpha=0.12, linewidth=0,
                            label=wedge)]


def energy_vs_time(ratios: pd.DataFrame, precision_order: Sequence[str], *, band: tuple[float, float],
                   height: float = 3.6) -> sns.FacetGrid | None:
    """Energy above idle per sequence, fallback over fused (y), against time per step, fallback over fused (x),
    log-log, one panel per hardware set; whiskers: each ratio's 95% interval over windows. On the dashed
    diagonal the fallback costs energy exactly in proportion to its time; the shaded wedge is the rule's
    proportional band (energy ratio between `band[0]` and `band[1]` times the time ratio).

    `ratios` has energy's `energy_ratios` layout (hardware_id, kernel, precision, time_ratio and
    above_idle_ratio with their _lo/_hi); markers follow `precision_order`. None when no ratio is finite.
    """
    data = ratios[np.isfinite(ratios.above_idle_ratio.astype(float))] if not ratios.empty else ratios
    if data.empty:
        return None
    grid = sns.relplot(data, x="time_ratio", y="above_idle_ratio", hue="kernel", style="precision",
                       col="hardware_id", style_order=[p for p in precision_order if p in set(data.precision)],
                       kind="scatter", s=70, height=height, aspect=1.2, zorder=3,
                       facet_kws={"sharex": False, "sharey": False})
    for hardware_id, ax in grid.axes_dict.items():
        part = data[data.hardware_id == hardware_id].astype({c: float for c in (
            "time_ratio", "time_ratio_lo", "time_ratio_hi", "above_idle_ratio", "above_idle_ratio_lo",
            "above_idle_ratio_hi")})
        ax.errorbar(part.time_ratio, part.above_idle_ratio, fmt="none", ecolor="grey", elinewidth=0.8, zorder=2,
                    xerr=[(part.time_ratio - part.time_ratio_lo).clip(lower=0),
                          (part.time_ratio_hi - part.time_ratio).clip(lower=0)],
                    yerr=[(part.above_idle_ratio - part.above_idle_ratio_lo).clip(lower=0),
                          (part.above_idle_ratio_hi - part.above_idle_ratio).clip(lower=0)])
        ax.set_xscale("log")
        ax.set_yscale("log")
        lo = min(ax.get_xlim()[0], ax.get_ylim()[0], 0.8)
        hi = max(ax.get_xlim()[1], ax.get_ylim()[1], 2.5)
        _diagonal_band(ax, np.geomspace(lo, hi, 50), band, "energy = time", "proportional band")
        ax.set(xlim=(lo, hi), ylim=(lo, hi))
        ax.set_title(f"{hardware_id}\n(log-log; diagonal: energy = time)", fontsize=9)
    grid.set_axis_labels("time per step, fallback / fused (x)", "energy above idle per sequence,\nfallback / fused (x)")
    return grid


def s_per_window(frame: pd.DataFrame, *, band: tuple[float, float], part_series: str,
                 height: float = 2.6) -> list[plt.Figure]:
    """Claim 6's stability figure: how far S moves between windows. Top: S in each window (x: the window, which is
    the round; y: S, log scale), a thin line per configuration (dotted where the verdict does not decide on it) and,
    thick and black, the part's geometric mean in each window (`part_series`: what the rule for few timings
    counts), with the rule's proportional `band` shaded. Below: the idle power charged to each of the fallback's
    windows (W), the drift that measuring idle right before each window takes out. One figure per hardware set,
    one column per phase; `frame` has energy's `stability` layout. An empty list for an empty frame."""
    figures = []
    for hardware_id, part in frame.groupby("hardware_id", sort=True):
        phases = list(dict.fromkeys([p for p in ("inference", "train") if p in set(part.phase)]
                                    + sorted(set(part.phase))))
        fig, axes = plt.subplots(2, len(phases), figsize=(5.4 * len(phases), 2.2 * height), squeeze=False,
                                 sharex="col", gridspec_kw={"height_ratios": [2, 1]})
        labels: dict[str, object] = {}
        for col, phase in enumerate(phases):
            mine, top, bottom = part[part.phase == phase], axes[0, col], axes[1, col]
            labels.setdefault("proportional band", top.axhspan(*band, color="tab:green", alpha=0.12, linewidth=0))
            for series, rows in mine.groupby("series", sort=True):
                rows = rows.sort_values("window")
                if series == part_series:
                    labels[series] = top.plot(rows.window, rows.S, color="black", linewidth=2.5, marker="D",
                                              zorder=3)[0]
                    continue
                line = top.plot(rows.window, rows.S, marker="o", linewidth=1, alpha=0.85,
                                linestyle="-" if rows.deciding.all() else ":")[0]
                labels.setdefault(series, line)
                bottom.plot(rows.window, rows.idle_w, marker="o", linewidth=1, color=line.get_color())
            top.set_yscale("log")
            top.set_title(f"{hardware_label(str(hardware_id))}: {'training' if phase == 'train' else phase}",
                          fontsize=9)
            top.set_ylabel("S in the window (x):\npower above idle,\nfallback / fused", fontsize=9)
            bottom.set_ylabel("idle power charged\nto the window (W)", fontsize=9)
            bottom.set_xlabel("window (= round) number")
            bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
        fig.suptitle("S in each window: how far it moves between windows (log scale)", fontsize=10)
        fig.tight_layout()
        fig.legend(list(labels.values()), list(labels), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=1,
                   fontsize=8, frameon=False)
        figures.append(fig)
    return figures


# --- padding and bucketing (claim 5's page) ------------------------------------------------------------------

def length_histogram(corpora: dict[str, np.ndarray], boundaries: Sequence[int], *, title: str) -> plt.Axes:
    """Sentence lengths (tokens) of each corpus (label -> lengths) as a step histogram of shares, one bin per
    length, so corpora of different sizes compare; the static bucket boundaries dashed."""
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for (label, lengths), color in zip(corpora.items(), ("tab:blue", "tab:red", "tab:green")):
        sns.histplot(x=np.asarray(lengths), binwidth=1, stat="percent", element="step", fill=False, ax=ax,
                     color=color, label=f"{label} ({len(lengths):,})")
    for b in boundaries:
        ax.axvline(b + 0.5, color="tab:orange", linestyle="--", linewidth=1)
    ax.set(xlabel="sentence length (tokens)", ylabel="sentences (% of the corpus)", title=title)
    ax.legend(fontsize=8)
    return ax


def waste_bars(table: pd.DataFrame, *, title: str) -> plt.Axes:
    """Timesteps computed per epoch by each batching plan (millions), a horizontal bar split into real steps and
    padding, each labelled with its padding fraction.

    `table` has bucketing's `waste_table` layout (plan, real_steps, padded_steps, waste_fraction).
    """
    t = table.set_index("plan")
    fig, ax = plt.subplots(figsize=(7, 0.55 * len(t) + 1.4))
    real = t.real_steps / 1e6
    pad = (t.padded_steps - t.real_steps) / 1e6
    ax.barh(t.index, real, color="tab:blue", label="real steps")
    ax.barh(t.index, pad, left=real, color="tab:red", alpha=0.6, label="padding")
    for y, (p, w) in enumerate(zip(t.padded_steps / 1e6, t.waste_fraction)):
        ax.text(p, y, f"  {w:.0%} padding", va="center", fontsize=9)
    ax.invert_yaxis()
    ax.set(xlabel="timesteps computed per epoch (millions of sentence-steps)", ylabel="", title=title)
    ax.set_xlim(0, float((t.padded_steps / 1e6).max()) * 1.3)
    ax.legend(loc="lower right")
    return ax


def _setting_titles(grid: sns.FacetGrid, table: pd.DataFrame) -> None:
    """Panel titles of a claim-5 figure faceted by hardware set: the set (`hardware_label`) and its setting."""
    for ax, (hardware_id, facet) in zip(grid.axes.flat, table.groupby("hardware_id", sort=True)):
        ax.set_title(f"{hardware_label(str(hardware_id))}\n{_wrap(facet.setting.iloc[0], 70)}", fontsize=9)


def epoch_bars(table: pd.DataFrame, plan_order: Sequence[str]) -> sns.FacetGrid:
    """Time per epoch (s) per batching plan (in `plan_order`) and kernel: bars at the median over rounds,
    whiskers its 95% interval, one panel per hardware set titled with its setting.

    `table` has bucketing's `compact(epoch_times)` layout (hardware_id, setting, kernel, plan, epoch_s,
    epoch_lo_s, epoch_hi_s), one setting per hardware set (its `largest_settings`).
    """
    order = [plan for plan in plan_order if plan in set(table.plan)]  # result sets from before a plan existed
    grid = sns.catplot(table, x="plan", y="epoch_s", hue="kernel", col="hardware_id", kind="bar", errorbar=None,
                       order=order, hue_order=sorted(table.kernel.unique()), height=3.8, aspect=1.5, sharey=False)
    for ax, (_, facet) in zip(grid.axes.flat, table.groupby("hardware_id", sort=True)):
        for container, (_, part) in zip(ax.containers, facet.groupby("kernel", sort=True)):
            centres = [bar.get_x() + bar.get_width() / 2 for bar in container if not np.isnan(bar.get_height())]
            part = part.set_index("plan").loc[[order[round(centre)] for centre in centres]]  # dodged near its tick
            _whiskers(ax, centres, part.epoch_lo_s, part.epoch_hi_s)
        for label in ax.get_xticklabels():
            label.set(rotation=20, horizontalalignment="right")
    grid.set_axis_labels("batching plan", "time per epoch (s)")
    _setting_titles(grid, table)
    return grid


def speedup_bars(table: pd.DataFrame, baseline: str, plan_order: Sequence[str], *, seed_speedup: float | None = None,
                 band: tuple[float, float] | None = None) -> sns.FacetGrid:
    """Each batching plan's epoch-time speed-up over `baseline` (x) per kernel, with bootstrap 95% intervals, one
    panel per hardware set titled with its setting; diamonds mark the padded-work ratio, dashed the seed's
    `seed_speedup` and shaded the rule's `band` for reproduced, where given (over the baseline the rule names).
    Plans follow `plan_order` (the baseline left out).

    `table` has bucketing's `compact(speedups)` layout (hardware_id, setting, kernel, plan, ratio, ratio_lo,
    ratio_hi, work_ratio), the rows over `baseline` of one setting per hardware set (its `largest_settings`).
    """
    part = table.sort_values(["hardware_id", "kernel"])  # ratio_bars pairs bars and hues sorted
    grid = ratio_bars(part, x="plan", hue="kernel", xlabel="batching plan", ylabel=f"speed-up over {baseline} (x)",
                      order=[p for p in plan_order if p != baseline], seed_band=band,
                      seed_label=f"rule: reproduced within {band[0]}-{band[1]}x" if band else "", height=3.8)
    for ax, (_, facet) in zip(grid.axes.flat, part.groupby("hardware_id", sort=True)):
        work = facet.groupby("plan").work_ratio.first()
        ticks = [(x, t.get_text()) for x, t in zip(ax.get_xticks(), ax.get_xticklabels()) if t.get_text() in work]
        ax.scatter([x for x, _ in ticks], [work[name] for _, name in ticks], marker="D", s=30, color="black",
                   zorder=5, label="padded-work ratio")
        if seed_speedup is not None:
            ax.axhline(seed_speedup, color="tab:orange", linestyle="--", linewidth=1.5, label=f"seed: {seed_speedup}x")
        handles = [h for h in (*ax.get_lines(), *ax.collections, *ax.patches)
                   if not h.get_label().startswith("_") and h.get_label() not in set(part.kernel)]
        ax.legend(handles=handles, loc="upper left", fontsize=8, framealpha=0.9)
    _setting_titles(grid, part)
    return grid


def time_vs_work(table: pd.DataFrame, *, band: tuple[float, float]) -> sns.FacetGrid:
    """Does time follow padded work? Each plan's epoch-time speed-up (y, with its 95% interval) against its
    padded-work ratio (x), both over the same baseline, one marker per plan and colour per kernel, one panel per
    hardware set: on the diagonal, time falls exactly as the padded work does; the shaded wedge is the rule's
    `band` of time / work for "time follows padded work".

    `table` has bucketing's `compact(speedups)` layout (hardware_id, setting, kernel, plan, ratio, ratio_lo,
    ratio_hi, work_ratio), one setting per hardware set.
    """
    grid = sns.relplot(table, x="work_ratio", y="ratio", hue="kernel", style="plan", col="hardware_id", s=70,
                       height=3.8, aspect=1.2, facet_kws={"sharex": False, "sharey": False})
    for ax, (_, facet) in zip(grid.axes.flat, table.groupby("hardware_id", sort=True)):
        ax.errorbar(facet.work_ratio, facet.ratio, yerr=(facet.ratio - facet.ratio_lo, facet.ratio_hi - facet.ratio),
                    fmt="none", color="grey", linewidth=1, zorder=1)
        top = float(max(facet.work_ratio.max(), facet.ratio_hi.max())) * 1.1
        handles = _diagonal_band(ax, np.array([0.0, top]), band, "time = padded work",
                                 f"rule: time follows work ({band[0]}-{band[1]})")
        ax.legend(handles=handles, loc="upper left", fontsize=8, framealpha=0.9)
        ax.set(xlim=(0, top), ylim=(0, top))
    grid.set_axis_labels("padded-work ratio, baseline / plan (x)", "epoch-time speed-up, baseline / plan (x)")
    _setting_titles(grid, table)
    return grid


def scaling_lines(table: pd.DataFrame, *, seed_points: dict[str, tuple[int, float]] | None = None) -> sns.FacetGrid:
    """Speed-up over one device (y) against the devices (x), one line per scheme, one panel per setting or
    hardware set (`panel`); a row with `speedup_lo`/`speedup_hi` gets its 95% interval as whiskers. The dashed
    diagonal is linear scaling; `seed_points` (label -> (devices, speed-up)) mark the seed's figures.

    `table` has columns panel, scheme, devices, speedup (`parallel.cost.table`, or claim 7's measured `speedups`).
    """
    one, many = table[table.devices == 1], table[table.devices > 1]
    lines = pd.concat([many, *(one.assign(scheme=s) for s in many.scheme.unique())])  # each line starts at one device
    grid = sns.relplot(lines, x="devices", y="speedup", hue="scheme", style="scheme", col="panel", kind="line",
                       markers=True, dashes=False, height=3.4, aspect=1.1, col_wrap=min(3, table.panel.nunique()),
                       facet_kws={"sharey": False, "sharex": False})
    for ax, (_, facet) in zip(grid.axes.flat, table.groupby("panel", sort=False)):
        top = int(facet.devices.max())
        ax.plot([1, top], [1, top], color="grey", linestyle="--", linewidth=1, label="linear scaling")
        if {"speedup_lo", "speedup_hi"} <= set(facet):  # measured rows: their 95% intervals
            ax.errorbar(facet.devices, facet.speedup, yerr=(facet.speedup - facet.speedup_lo,
                                                            facet.speedup_hi - facet.speedup),
                        fmt="none", color="black", linewidth=1)
        for label, (devices, value) in (seed_points or {}).items():
            ax.scatter([devices], [value], marker="*", s=120, color="tab:red", zorder=5, label=label)
        ax.set_xticks(sorted(facet.devices.unique()))
        ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    for ax in grid.axes.flat:
        ax.set_title(textwrap.fill(ax.get_title().removeprefix("panel = "), 40), fontsize=10)
    grid.set_axis_labels("devices", "speed-up over one device (x)")
    return grid


def published_speedups(table: pd.DataFrame, *, bands: tuple[float, float]) -> sns.FacetGrid:
    """Published fp32 / low-precision time against a shape's FLOPs (`published_rules.deepbench_speedups`), one
    panel per card, one line per phase; dotted lines at the rule's `bands` (slower below the first, faster
    from the second). Titles name the source and the GPU: never this study's hardware."""
    data = table.assign(panel=lambda d: "DeepBench (published): " + d.gpu + ", " + d.precision)
    grid = sns.relplot(data, x="flops", y="speedup", hue="phase", style="timesteps", col="panel", kind="scatter",
                       s=60, height=3.4, aspect=1.2, facet_kws={"sharey": False})
    for ax in grid.axes.flat:
        ax.set_xscale("log")
        ax.axhline(1.0, color="grey", linewidth=1)
        for value in bands:
            ax.axhline(value, color="tab:red", linestyle=":", linewidth=1)
        ax.set_title(textwrap.fill(ax.get_title().removeprefix("panel = "), 44), fontsize=10)
    grid.set_axis_labels("FLOPs of one call", "fp32 time / low-precision time (x)")
    return grid


#: the landing figure's mark per kind of evidence: (vertical offset in its claim's row, marker, face colour)
_EVIDENCE_MARKS = {"GPU": (0.25, "o", "black"), "CPU analogue": (0.0, "s", "none"), "published": (-0.25, "^", "grey")}


def verdict_chart(rows: pd.DataFrame, labels: Mapping[str, str],
                  bands: Mapping[str, tuple[float, float]]) -> plt.Figure:
    """Each claim's figures on one log axis, a row per claim (`labels`: claim number -> row label): one mark per
    set and kind of evidence (`rows`: the ledger's rows with a figure), its 95% interval as a whisker, and the
    region its rule calls reproduced (`bands`) shaded. A rule deciding on parts shows each part's interval,
    marked at its middle (named on the GPU's marks)."""
    fig, ax = plt.subplots(figsize=(9, 0.9 * len(labels) + 1.2))
    order = {number: i for i, number in enumerate(reversed(list(labels)))}
    for number, (low, high) in bands.items():
        ax.fill_between([low, min(high, 1e3)], order[number] - 0.42, order[number] + 0.42, color="tab:orange",
                        alpha=0.2, linewidth=0)
    for evidence, (offset, marker, face) in _EVIDENCE_MARKS.items():
        mine = rows[rows["evidence"] == evidence]
        for number, sets in mine.groupby("claim"):
            for k, row in enumerate(sets.itertuples()):
                y = order[number] + offset + 0.06 * (k - (len(sets) - 1) / 2)
                marks = [(name, lo, hi, (lo * hi) ** 0.5) for name, lo, hi in row.parts] or \
                    [("", row.low, row.high, row.ours)]
                for name, lo, hi, x in marks:
                    if lo is not None and not pd.isna(lo):
                        ax.plot([lo, hi], [y, y], color="black", linewidth=1)
                    ax.plot([x], [y], marker=marker, markerfacecolor=face, color="black", linestyle="none")
                    if name and len(row.parts) > 1 and evidence == "GPU":  # the other kinds' parts lie beside
                        ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 3), fontsize=7)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(labels)), [labels[n] for n in reversed(list(labels))])
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.set_xlabel("each claim's figure (a ratio, log scale); shaded: what its rule calls reproduced (6: holds)",
                  loc="left")
    handles = [plt.Line2D([], [], marker=m, markerfacecolor=f, color="black", linestyle="none", label=e)
               for e, (_, m, f) in _EVIDENCE_MARKS.items()]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, frameon=False)
    gpus = sorted({h for h in rows.loc[rows["evidence"] == "GPU", "hardware"]})
    ax.set_title("GPU: " + (", ".join(hardware_label(h) for h in gpus) if gpus else "none stored")
                 + f"; CPU analogues: {rows.loc[rows['evidence'] == 'CPU analogue', 'hardware'].nunique()} sets")
    fig.tight_layout()
    return fig
