"""Figure helpers every claim notebook shares: medians with their interquartile spread, ratios with
their confidence intervals, one facet per hardware set, units on every axis."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FuncFormatter

sns.set_theme(context="notebook", style="whitegrid")


def _hardware_title(grid: sns.FacetGrid, prefix: str = "") -> None:
    grid.set_titles(col_template=prefix + "{col_name}", row_template="{row_name}")


def times(frame: pd.DataFrame, x: str, *, hue: str = "kernel", col: str | None = None, row: str | None = None,
          xlabel: str, ylabel: str = "median time per call (ms)", logx: bool = True, logy: bool = True,
          height: float = 3.2) -> list[sns.FacetGrid]:
    """Median time against `x`, one line per `hue`, the interquartile range as a band.

    One figure per hardware set (its id in every panel title), panels by `row` and `col`.
    """
    data = frame[frame.status == "ok"].assign(median_ms=lambda d: d.median_s * 1e3,
                                               p25_ms=lambda d: d.p25_s * 1e3, p75_ms=lambda d: d.p75_s * 1e3)

    def draw(data: pd.DataFrame, color: str, label: str, **_: object) -> None:
        data = data.sort_values(x)
        plt.plot(data[x], data.median_ms, marker="o", color=color, label=label)
        plt.fill_between(data[x], data.p25_ms, data.p75_ms, color=color, alpha=0.2, linewidth=0)

    grids = []
    for hardware_id, part in data.groupby("hardware_id", sort=True):
        grid = sns.FacetGrid(part, col=col, row=row, hue=hue, height=height, aspect=1.2, sharey=False,
                             margin_titles=False)
        grid.map_dataframe(draw)
        for ax in grid.axes.flat:
            ax.set_xscale("log", base=2) if logx else None
            ax.set_yscale("log") if logy else None
            ax.set_title(f"{hardware_id}\n{ax.get_title()}" if ax.get_title() else hardware_id, fontsize=9)
        grid.set_axis_labels(xlabel, ylabel)
        grid.add_legend()
        grids.append(grid)
    return grids


def ratio_bars(ratios: pd.DataFrame, x: str, *, hue: str | None = None, col: str = "hardware_id",
               xlabel: str, ylabel: str, seed_band: tuple[float, float] | None = None,
               seed_label: str = "seed's range", height: float = 3.6, order: Sequence | None = None) -> sns.FacetGrid:
    """Ratios (e.g. slowdown over the fused kernel) as bars with bootstrap CIs; 1 and the seed's band marked."""
    grid = sns.catplot(ratios, x=x, y="ratio", hue=hue, col=col, kind="bar", errorbar=None, height=height,
                       aspect=1.4, sharey=False, order=order, legend_out=True)
    for ax, (_, facet) in zip(grid.axes.flat, ratios.groupby(col, sort=True)):
        for container, (_, part) in zip(ax.containers, facet.groupby(hue, sort=True) if hue else [(None, facet)]):
            part = part.set_index(x).reindex([t.get_text() for t in ax.get_xticklabels()]).dropna(subset=["ratio"])
            centres = [bar.get_x() + bar.get_width() / 2 for bar in container if not np.isnan(bar.get_height())]
            if len(centres) == len(part):
                ax.errorbar(centres, part.ratio, yerr=[part.ratio - part.ratio_lo, part.ratio_hi - part.ratio],
                            fmt="none", color="black", capsize=3, linewidth=1)
        ax.axhline(1.0, color="black", linewidth=1)
        if seed_band:
            ax.axhspan(*seed_band, color="tab:orange", alpha=0.15, label=seed_label)
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
