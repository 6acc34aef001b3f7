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

from lstmstudy.results import without_exception
from lstmstudy.stats import NOISY_WORDS

NOISY_LABEL = f"noisy ({NOISY_WORDS})"

#: kernels the registry does not list (baselines built elsewhere, a kernel under a context), placed after its rows
EXTRA_KERNELS = ("cudnn.loop", "torch.fused+autocast", "torch.ddp", "torch.pipeline", "torch.single", "nvml.idle")
#: 33 distinct colours, more than there are kernels: tab20's ten dark shades first, its light ones, Dark2, Set1
_COLOURS = [c for c in (*plt.get_cmap("tab20").colors[0::2], *plt.get_cmap("tab20").colors[1::2],
                         *plt.get_cmap("Dark2").colors, *plt.get_cmap("Set1").colors)
            if max(c) - min(c) > 0.05]  # no grey: grey is a kernel the registry does not list


def kernel_colour(name: str) -> tuple[float, float, float]:
    """The one colour of a kernel in every figure of the book, keyed by its name in the registry
    (`lstmstudy.kernels.KERNELS`); a label that starts with a kernel's name ('keras.relu (torch)') takes that
    kernel's colour, and a name the registry lacks a fixed grey, so no figure repaints a kernel."""
    from lstmstudy.kernels import KERNELS

    names = [spec.name for spec in KERNELS] + [n for n in EXTRA_KERNELS if n not in {s.name for s in KERNELS}]
    kernel = max((n for n in names if str(name) == n or str(name).startswith(n + " ")), key=len, default=None)
    return _COLOURS[names.index(kernel) % len(_COLOURS)] if kernel else (0.5, 0.5, 0.5)


def kernel_palette(names: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    """`kernel_colour` for each name: the `palette=` of a seaborn figure whose hue is a kernel or a kernel's label."""
    return {str(name): kernel_colour(str(name)) for name in names}


def use_theme() -> None:
    """The book's look for every figure (seaborn's notebook context, white grid): set by the pages that plot
    (`notebook.check_common`, the summaries), never on import, as it changes matplotlib for the whole process."""
    sns.set_theme(context="notebook", style="whitegrid")


def hardware_label(hardware_id: str) -> str:
    """A hardware set as a figure names it: a CPU set says it is CPU only, so no reader takes it for a GPU's."""
    return f"{hardware_id} (CPU only)" if hardware_id.startswith("cpu-") else hardware_id


def _facet_value(name: str, value: object) -> str:
    """A facet's value as its title says it: a word stands alone ('train'), a number is named ('hidden 64')."""
    return str(value) if isinstance(value, str) else f"{name} {value:g}" if isinstance(value, float) else \
        f"{name} {value}"


def _kernel_styles(frame: pd.DataFrame, hue: str) -> tuple[dict[str, tuple], dict[str, str]]:
    """Each `hue` value's colour, that of the kernel its rows ran (`kernel_colour`: one colour per kernel in every
    figure), and its line style: solid, then dashed, dotted... for values of one kernel (a kernel under AMP)."""
    kernels = frame.groupby(hue, sort=True).kernel.first() if "kernel" in frame and hue != "kernel" else \
        pd.Series({value: value for value in sorted(frame[hue].unique())})
    styles, seen = {}, {}
    for value, kernel in kernels.items():
        styles[str(value)] = ("-", "--", ":", "-.")[seen.get(kernel, 0) % 4]
        seen[kernel] = seen.get(kernel, 0) + 1
    return {str(value): kernel_colour(str(kernel)) for value, kernel in kernels.items()}, styles


def times(frame: pd.DataFrame, x: str, *, hue: str = "kernel", col: str | None = None, row: str | None = None,
          xlabel: str, ylabel: str = "median time per call (ms)", logx: bool = True, logy: bool = True,
          height: float = 3.2) -> list[sns.FacetGrid]:
    """Median time against `x`, one line per `hue` in its kernel's colour (`_kernel_styles`), the interquartile range
    as a band; a red ring marks a noisy row (its interval stayed wider than the timing plan's bound after every round).

    One figure per hardware set (its id in every panel title), panels by `row` and `col`, titled by their values.
    """
    data = frame[frame.status == "ok"].assign(median_ms=lambda d: d.median_s * 1e3,
                                               p25_ms=lambda d: d.p25_s * 1e3, p75_ms=lambda d: d.p75_s * 1e3)
    data = data.assign(**{hue: data[hue].astype(str)})

    def draw(data: pd.DataFrame, color: str, label: str, **_: object) -> None:
        data = data.sort_values(x)
        plt.plot(data[x], data.median_ms, marker="o", color=color, label=label, linestyle=styles[label])
        plt.fill_between(data[x], data.p25_ms, data.p75_ms, color=color, alpha=0.2, linewidth=0)
        noisy = data[data.noisy.eq(True)] if "noisy" in data else data.iloc[:0]
        plt.scatter(noisy[x], noisy.median_ms, s=90, facecolors="none", edgecolors="red", linewidths=1.2,
                    label=NOISY_LABEL if len(noisy) else None, zorder=3)

    grids = []
    for hardware_id, part in data.groupby("hardware_id", sort=True):
        palette, styles = _kernel_styles(part, hue)
        grid = sns.FacetGrid(part, col=col, row=row, hue=hue, height=height, aspect=1.2, sharey=False,
                             margin_titles=False, palette=palette, hue_order=sorted(palette), legend_out=False)
        grid.map_dataframe(draw)
        label = hardware_label(str(hardware_id))
        names = [name for name in (row, col) if name]
        for key, ax in grid.axes_dict.items() if names else [((), grid.ax)]:
            facets = [_facet_value(name, value) for name, value in zip(names, key if len(names) == 2 else (key,))]
            ax.set_title("\n".join([label, ", ".join(facets)]) if facets else label, fontsize=9)
            if logx:
                ax.set_xscale("log", base=2)
                ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))  # 64, not 2^6
                ax.xaxis.set_minor_formatter(NullFormatter())
            if part[x].nunique() <= 10:  # ticks at the measured values
                ax.set_xticks(sorted(part[x].unique()))
            ax.set_yscale("log") if logy else None
        grid.set_axis_labels(xlabel, ylabel)
        noisy = [NOISY_LABEL] if "noisy" in part and part.noisy.eq(True).any() else []
        grid.add_legend(label_order=sorted(palette) + noisy, title="kernel" if hue == "label" else hue)
        sns.move_legend(grid, "upper center", bbox_to_anchor=(0.5, 0.0), ncol=2, frameon=False)  # below the panels
        grids.append(grid)
    return grids


def _whiskers(ax: plt.Axes, centres: Sequence[float], lo: Sequence[float], hi: Sequence[float]) -> None:
    """Whiskers from `lo` to `hi` at each bar's centre: the interval itself, wherever the bar's top lies (a
    time over rounds is the median of round medians, which need not sit inside the pooled quartiles or a
    percentile interval)."""
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    ax.errorbar(centres, (lo + hi) / 2, yerr=(hi - lo) / 2, fmt="none", color="black", capsize=3, linewidth=1)


#: columns whose values are kernels or kernel labels ('keras.relu on torch'): coloured by `kernel_colour`
KERNEL_COLUMNS = ("kernel", "label")
#: hatches that tell a bar's hue apart where its colour is its kernel's
_HATCHES = ("", "//", "..", "xx", "\\\\", "oo")


def ratio_bars(ratios: pd.DataFrame, x: str, *, hue: str | None = None, col: str = "hardware_id",
               xlabel: str, ylabel: str, seed_band: tuple[float, float] | None = None,
               seed_label: str = "seed's range", seed_marks: Mapping[float, str] | None = None, height: float = 0.25,
               order: Sequence | None = None, col_wrap: int = 3) -> plt.Figure:
    """Ratios (e.g. slowdown over the fused kernel) as horizontal bars with their intervals as whiskers (`ratio_lo`,
    `ratio_hi`); 1, the seed's band and any other seed figure (`seed_marks`, a dashed line each) marked.

    One panel per `col` (a hardware set, GPU sets first), holding only the `x` categories it measured (`xlabel` names them, `ylabel`
    the ratio), the panels wrapping to rows of `col_wrap` in a figure 10 in wide; `height`: inches per bar. A bar
    whose `x` or `hue` is a kernel (`KERNEL_COLUMNS`) takes the kernel's colour (`kernel_colour`); where the kernels
    are on `x`, the hue levels are told apart by hatching."""
    panels = sorted(ratios[col].unique(), key=lambda name: (not str(name).startswith("cuda-"), str(name)))
    hues = sorted(ratios[hue].unique()) if hue else [None]
    columns = min(col_wrap, len(panels))
    rows = -(-len(panels) // columns)
    categories = {name: [c for c in (order if order is not None else sorted(ratios[x].unique()))
                         if c in set(ratios.loc[ratios[col] == name, x])] for name in panels}
    lines = max(textwrap.fill(str(n), 24).count("\n") + 1 for c in categories.values() for n in c)
    per_bar = max(height, 0.24 * lines / len(hues))  # a wrapped label needs its lines' height beside its bars
    tallest = max(len(c) for c in categories.values()) * len(hues) * per_bar + 0.9
    fig, axes = plt.subplots(rows, columns, figsize=(10, tallest * rows + 0.6), squeeze=False)
    kernels_on = "x" if x in KERNEL_COLUMNS else "hue" if hue in KERNEL_COLUMNS else None
    step = 0.8 / len(hues)
    handles: dict[str, object] = {}
    for ax, name in zip(axes.flat, panels):
        facet = ratios[ratios[col] == name]
        names = categories[name]
        for i, level in enumerate(hues):
            part = (facet[facet[hue] == level] if hue else facet).set_index(x).reindex(names)
            y = np.arange(len(names)) + (i - (len(hues) - 1) / 2) * step
            colours = [kernel_colour(n) for n in names] if kernels_on == "x" else \
                kernel_colour(level) if kernels_on == "hue" else f"C{i}"
            hatch = _HATCHES[i % len(_HATCHES)] if kernels_on == "x" and hue else ""
            bars = ax.barh(y, part.ratio, height=step, color=colours, edgecolor="white", hatch=hatch)
            ax.errorbar(part.ratio, y, xerr=[part.ratio - part.ratio_lo, part.ratio_hi - part.ratio], fmt="none",
                        color="black", capsize=2, linewidth=0.8)
            if hue:
                handles[str(level)] = (plt.Rectangle((0, 0), 1, 1, facecolor="0.6", edgecolor="white", hatch=hatch)
                                       if kernels_on == "x" else bars[0])
        ax.axvline(1.0, color="black", linewidth=1)
        if seed_band:
            handles[seed_label] = ax.axvspan(*seed_band, color="tab:orange", alpha=0.15)
        for value, label in (seed_marks or {}).items():
            handles[label] = ax.axvline(value, color="tab:orange", linestyle="--", linewidth=1)
        ax.set_yticks(range(len(names)), [textwrap.fill(str(n), 24) for n in names], fontsize=11)
        ax.tick_params(axis="x", labelsize=11)
        ax.invert_yaxis()
        ax.set_xlabel(ylabel, fontsize=11)
        ax.set_title(hardware_label(str(name)), fontsize=12)
    for ax in axes.flat[:: columns]:
        ax.set_ylabel(xlabel, fontsize=11)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    if handles:
        fig.legend(list(handles.values()), list(handles), title=hue, fontsize=11, title_fontsize=11,
                   ncol=min(len(handles), 5), loc="lower center")
    fig.tight_layout(rect=(0, 0.7 / fig.get_figheight() if handles else 0, 1, 1))
    return fig


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
           height: float = 3.2, palette: Mapping[str, object] | None = None, dashed: str | None = None,
           col_wrap: int | None = None, title: str | None = None,
           legend_below: bool = False) -> sns.FacetGrid | None:
    """`y` against `x`, one line per `hue` with the [`lo`, `hi`] band (e.g. a 95% interval) shaded.

    Unlike `times`, the hardware sets share the panels (pass `hue="hardware_id"`) so that their curves can be
    compared on one axis; panels by `row` and `col` (`col_wrap` panels a row, without `row`); `hline` marks a
    reference (1.0 for a ratio). `palette` colours the hue's values (`kernel_palette` where they are kernels);
    `dashed` names a boolean column whose lines are dashed (a kernel's 16-bit rows beside its fp32 ones, in its
    colour); `title` heads the figure (e.g. the hardware set); `legend_below` puts the legend under the panels,
    one entry a line, for long names. Returns None for an empty frame.
    """
    if frame.empty:
        return None

    def draw(data: pd.DataFrame, color: str, label: str, **_: object) -> None:
        data = data.sort_values(x)
        style = "--" if dashed and bool(data[dashed].iloc[0]) else "-"
        plt.plot(data[x], data[y], marker="o", color=color, label=label, linestyle=style)
        if lo and hi:
            plt.fill_between(data[x], data[lo], data[hi], color=color, alpha=0.2, linewidth=0)

    grid = sns.FacetGrid(frame, col=col, row=row, hue=hue, height=height, aspect=1.3, sharey=False,
                         palette=dict(palette) if palette else None, col_wrap=None if row else col_wrap)
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
    if legend_below:  # under the panels, not beside them: long names would squeeze the panels
        named = {}
        for ax in grid.axes.flat:
            handles, labels = ax.get_legend_handles_labels()
            named.update(zip(labels, handles))
        named = dict(sorted(named.items()))
        grid.figure.legend(list(named.values()), list(named), title=hue_title or hue, loc="upper center",
                           bbox_to_anchor=(0.5, 0.0), ncol=1, frameon=False)
    else:
        grid.add_legend(title=hue_title or hue)
    for ax in grid.axes.flat:
        ax.title.set_fontsize(10)
    if title:
        grid.figure.suptitle(title, fontsize=11, y=1.0, va="bottom")
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


def _speedup_panel(ax: plt.Axes, here: pd.DataFrame, reasons: Sequence[str], title: str,
                   cbar_label: str = "speed-up over fp32 (x)") -> None:
    """One hidden size x timesteps map of speed-ups over fp32 (`speedup_heatmaps`), or, where nothing ran, why in
    words (`reasons`: the rows' own plain words; an exception's quoted text is cut off, never drawn)."""
    if here.empty:
        reason = next((str(r) for r in reasons if str(r).strip()), "no fp32 row to pair it with")
        reason = without_exception(reason)
        ax.text(0.5, 0.5, "not measured:\n" + _wrap(reason, 36), ha="center", va="center", fontsize=10,
                transform=ax.transAxes)
        ax.set(title=title, xticks=[], yticks=[])
    else:
        pivot = here.pivot_table(index="hidden", columns="timesteps", values="ratio")
        heatmap(pivot, title=title, xlabel="timesteps", ylabel="hidden size", cbar_label=cbar_label, ax=ax, log=True)
    ax.title.set_fontsize(10)


def speedup_heatmaps(table: pd.DataFrame, rows: pd.DataFrame, kernel: str,
                     precisions: Sequence[str]) -> list[plt.Figure]:
    """Speed-up over fp32 (x) of `kernel` as hidden size x timesteps heatmaps: one figure per hardware set and
    batch size with at least two cells, a row per 16-bit type (in the order of `precisions`) and a column per
    phase. A precision and phase that did not run says why in words instead of a map.

    `table` has mixed precision's `speedups` layout (one row per 16-bit / fp32 pair); `rows` are the stored
    result rows it came from, which say what was attempted and why a cell did not run (`status`, `error`: pass
    them in plain words, `mixed_precision.attempted`).
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
                here = part[(part.precision == precision) & (part.phase == phase)]
                reasons = cells[(cells.precision == precision) & (cells.phase == phase) & (cells.status != "ok")].error
                title = f"{hardware_label(hardware_id)}\n{kernel}, {precision} over fp32, {phase}, batch {batch}"
                _speedup_panel(axes[i][j], here, list(reasons.unique()), title)
        fig.tight_layout()
        figures.append(fig)
    return figures


def speedup_overview(table: pd.DataFrame, rows: pd.DataFrame, *, title: str = "",
                     per_row: int = 2) -> plt.Figure | None:
    """The speed-ups a verdict reads, every hardware set in one figure: a hidden size x timesteps map per set and
    batch size with at least two cells (the kernel, 16-bit type and phase in `table`, e.g.
    `mixed_precision.deciding`), GPU sets first, `per_row` panels a row under `title`; a set whose `rows` hold no pair
    says why in words. None where there is nothing to show."""
    panels = []
    sets = sorted(set(rows.hardware_id) | set(table.hardware_id), key=lambda h: (not str(h).startswith("cuda-"), h))
    for hardware_id in sets if len(rows) or len(table) else []:
        part = table[table.hardware_id == hardware_id]
        batches = [b for b, at in part.groupby("batch", sort=True)
                   if len(at[["hidden", "timesteps"]].drop_duplicates()) >= 2]
        for batch in batches or [None]:
            here = part[part.batch == batch] if batch is not None else part.iloc[0:0]
            mine = rows[rows.hardware_id == hardware_id]
            what = (here if len(here) else mine).iloc[0] if len(here) or len(mine) else None
            words = f"{what.kernel}, {what.precision}" if what is not None else ""
            name = f"{hardware_label(hardware_id)}\n{words}" + (f", batch {batch}" if batch is not None else "")
            panels.append((here, list(mine[mine.status != "ok"].error.unique()), name))
    if not panels:
        return None
    columns = min(per_row, len(panels))
    lines = -(-len(panels) // columns)
    fig, axes = plt.subplots(lines, columns, squeeze=False, figsize=(4.1 * columns, 3.3 * lines + 0.4))
    for ax, (here, reasons, name) in zip(axes.flat, panels):
        _speedup_panel(ax, here, reasons, name, cbar_label="speed-up (x)")
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


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
            for container, shade in zip(list(ax.containers)[:len(hue_order)], (1.0, 0.55, 0.3)):
                for bar, kernel in zip(container, order):  # one colour per kernel, as in every figure of the book
                    bar.set(facecolor=kernel_colour(kernel), alpha=shade)
            ax.set_ylim(bottom=0)
            ax.set_title(f"{hardware_label(str(hardware_id))}\n{phase}, {shape}", fontsize=10)
            for label in ax.get_xticklabels():
                label.set(rotation=30, horizontalalignment="right")
        grid.set_axis_labels("kernel", "J per 1,000 sequences")
        if grid.legend is not None:  # the bars take their kernel's colour: precisions are told apart by shade
            grid.legend.remove()
        if len(hue_order) > 1:
            from matplotlib.patches import Patch

            grid.figure.legend([Patch(color="grey", alpha=a) for a in (1.0, 0.55, 0.3)[:len(hue_order)]], hue_order,
                               title="precision (shade)", loc="upper left", bbox_to_anchor=(1.0, 0.9))
        grid.figure.suptitle(f"GPU energy per 1,000 sequences (linear scale, {', '.join(hue_order)}).\nBars: total; "
                             f"hatched: above idle", y=1.06, fontsize=11)
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
                       palette=kernel_palette(sorted(set(data.kernel))), col="hardware_id",
                       col_wrap=min(3, data.hardware_id.nunique()),
                       style_order=[p for p in precision_order if p in set(data.precision)],
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
        ax.set_title(f"{hardware_id}\n(log-log; diagonal: energy = time)", fontsize=10)
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
        fig, axes = plt.subplots(2, len(phases), figsize=(min(10.0, 5.0 * len(phases)), 2.2 * height), squeeze=False,
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
                                color=kernel_colour(str(series).split(",")[0]),
                                linestyle="-" if rows.deciding.all() else ":")[0]
                labels.setdefault(series, line)
                bottom.plot(rows.window, rows.idle_w, marker="o", linewidth=1, color=line.get_color())
            top.set_yscale("log")
            top.set_title(f"{hardware_label(str(hardware_id))}: {'training' if phase == 'train' else phase}",
                          fontsize=10)
            top.set_ylabel("S in the window (x):\npower above idle,\nfallback / fused", fontsize=10)
            bottom.set_ylabel("idle power charged\nto the window (W)", fontsize=10)
            bottom.set_xlabel("window (= round) number")
            bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
        fig.suptitle("S in each window: how far it moves between windows (log scale)", fontsize=10)
        fig.tight_layout()
        fig.legend(list(labels.values()), list(labels), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=1,
                   fontsize=10, frameon=False)
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
    ax.legend(fontsize=10)
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


def _setting_titles(axes: Mapping[str, plt.Axes], table: pd.DataFrame) -> None:
    """Panel titles of a claim-5 figure, one panel per hardware set: the set (`hardware_label`) and its setting."""
    for hardware_id, ax in axes.items():
        setting = table.loc[table.hardware_id == hardware_id, "setting"].iloc[0]
        ax.set_title(f"{hardware_label(str(hardware_id))}\n{_wrap(setting, 40)}", fontsize=10)


def _set_panels(table: pd.DataFrame, *, height: float = 3.9) -> tuple[plt.Figure, dict[str, plt.Axes]]:
    """A claim-5 figure's panels: one per hardware set (sorted), in rows of at most three, 10 in wide so that its
    10-pt text stays readable at the page's width; each titled with its set and setting (`_setting_titles`)."""
    sets = sorted(table.hardware_id.unique())
    cols = min(3, len(sets))
    rows = -(-len(sets) // cols)
    fig, grid = plt.subplots(rows, cols, figsize=(10, height * rows), squeeze=False)
    for ax in grid.flat[len(sets):]:
        ax.remove()
    axes = dict(zip(sets, grid.flat))
    _setting_titles(axes, table)
    return fig, axes


def _kernel_bars(ax: plt.Axes, facet: pd.DataFrame, x_order: Sequence[str], value: str, lo: str, hi: str) -> None:
    """Bars of `value` per plan (in `x_order`), dodged by kernel in its book colour (`kernel_colour`), each bar's
    whisker (`lo`-`hi`) drawn at that bar's own centre from the same row, so no whisker can land on another
    kernel's bar (as when a panel lacks a kernel another panel has)."""
    kernels = sorted(facet.kernel.unique())
    width = 0.8 / len(kernels)
    for i, kernel in enumerate(kernels):
        rows = facet[facet.kernel == kernel].drop_duplicates("plan").set_index("plan")
        xs = [x for x, plan in enumerate(x_order) if plan in rows.index]
        part = rows.loc[[x_order[x] for x in xs]]
        centres = np.asarray(xs, dtype=float) + (i - (len(kernels) - 1) / 2) * width
        ax.bar(centres, part[value].astype(float), width=width, color=kernel_colour(kernel), label=kernel)
        _whiskers(ax, centres, part[lo], part[hi])
    ax.set_xticks(range(len(x_order)), x_order, rotation=30, ha="right", fontsize=10)


def _set_legend(fig: plt.Figure, axes: Mapping[str, plt.Axes], table: pd.DataFrame) -> None:
    """One legend for a claim-5 figure, under its panels: every kernel in its colour, then each other mark once."""
    from matplotlib.patches import Patch

    handles = {k: Patch(color=kernel_colour(k)) for k in sorted(table.kernel.unique())}
    for ax in axes.values():
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in handles and not label.startswith("_"):
                handles[label] = handle
    fig.tight_layout()
    fig.legend(list(handles.values()), list(handles), loc="upper center", bbox_to_anchor=(0.5, 0.0),
               ncol=min(3, len(handles)), fontsize=10, frameon=False)


def epoch_bars(table: pd.DataFrame, plan_order: Sequence[str]) -> plt.Figure:
    """Time per epoch (s) per batching plan (in `plan_order`) and kernel: bars at the median over rounds,
    whiskers its 95% interval, one panel per hardware set titled with its setting.

    `table` has bucketing's `compact(epoch_times)` layout (hardware_id, setting, kernel, plan, epoch_s,
    epoch_lo_s, epoch_hi_s), one setting per hardware set (its `largest_settings`).
    """
    order = [plan for plan in plan_order if plan in set(table.plan)]  # result sets from before a plan existed
    fig, axes = _set_panels(table)
    for hardware_id, ax in axes.items():
        _kernel_bars(ax, table[table.hardware_id == hardware_id], order, "epoch_s", "epoch_lo_s", "epoch_hi_s")
        ax.set_ylabel("time per epoch (s)", fontsize=10)
    _set_legend(fig, axes, table)
    return fig


def speedup_bars(table: pd.DataFrame, baseline: str, plan_order: Sequence[str], *, seed_speedup: float | None = None,
                 band: tuple[float, float] | None = None) -> plt.Figure:
    """Each batching plan's epoch-time speed-up over `baseline` per kernel (bars, in the kernel's book colour), with
    its bootstrap 95% interval as the bar's whisker, one panel per hardware set titled with its setting; diamonds
    mark the padded-work ratio, dashed the seed's `seed_speedup` and shaded the rule's `band` for reproduced, where
    given (over the baseline the rule names). Plans follow `plan_order` (the baseline left out).

    `table` has bucketing's `compact(speedups)` layout (hardware_id, setting, kernel, plan, ratio, ratio_lo,
    ratio_hi, work_ratio), the rows over `baseline` of one setting per hardware set (its `largest_settings`).
    """
    order = [p for p in plan_order if p != baseline and p in set(table.plan)]
    fig, axes = _set_panels(table)
    for hardware_id, ax in axes.items():
        facet = table[table.hardware_id == hardware_id]
        if band:
            ax.axhspan(*band, color="tab:orange", alpha=0.15,
                       label=f"rule: reproduced within {band[0]:.3g}-{band[1]:.3g}x")
        _kernel_bars(ax, facet, order, "ratio", "ratio_lo", "ratio_hi")
        work = facet.groupby("plan").work_ratio.first()
        xs = [x for x, plan in enumerate(order) if plan in work.index]
        ax.scatter(xs, [work[order[x]] for x in xs], marker="D", s=30, color="black", zorder=5,
                   label="padded-work ratio (arithmetic, not timed)")
        ax.axhline(1.0, color="black", linewidth=1)
        if seed_speedup is not None:
            ax.axhline(seed_speedup, color="tab:orange", linestyle="--", linewidth=1.5,
                       label=f"seed: {seed_speedup:.3g}x")
        ax.set_ylabel(f"speed-up over\n{baseline} (x)", fontsize=10)
    _set_legend(fig, axes, table)
    return fig


def time_vs_work(table: pd.DataFrame, *, band: tuple[float, float]) -> plt.Figure:
    """Does time follow padded work? Each plan's epoch-time speed-up (y, with its 95% interval) against its
    padded-work ratio (x), both over the same baseline, one marker per plan and the kernel's book colour, one panel
    per hardware set: on the diagonal, time falls exactly as the padded work does; the shaded wedge is the rule's
    `band` of time / work for "time follows padded work".

    `table` has bucketing's `compact(speedups)` layout (hardware_id, setting, kernel, plan, ratio, ratio_lo,
    ratio_hi, work_ratio), one setting per hardware set.
    """
    plans = list(dict.fromkeys(table.plan))
    markers = dict(zip(plans, "oXsPD^v<>"))
    fig, axes = _set_panels(table)
    for hardware_id, ax in axes.items():
        facet = table[table.hardware_id == hardware_id]
        ax.errorbar(facet.work_ratio, facet.ratio, yerr=(facet.ratio - facet.ratio_lo, facet.ratio_hi - facet.ratio),
                    fmt="none", color="grey", linewidth=1, zorder=1)
        for (kernel, plan), rows in facet.groupby(["kernel", "plan"], sort=False):
            ax.scatter(rows.work_ratio, rows.ratio, color=kernel_colour(kernel), marker=markers[plan], s=45, zorder=3)
        top = float(max(facet.work_ratio.max(), facet.ratio_hi.max())) * 1.1
        _diagonal_band(ax, np.array([0.0, top]), band, "time = padded work",
                       f"rule: time follows work ({band[0]:.3g}-{band[1]:.3g})")
        ax.set(xlim=(0, top), ylim=(0, top))
        ax.set_xlabel("padded-work ratio,\nbaseline / plan (x)", fontsize=10)
        ax.set_ylabel("epoch-time speed-up,\nbaseline / plan (x)", fontsize=10)
    for plan in plans:  # the plans' markers, once, for the legend
        next(iter(axes.values())).scatter([], [], marker=markers[plan], color="grey", label=plan)
    _set_legend(fig, axes, table)
    return fig


def scaling_lines(table: pd.DataFrame, *, seed_points: dict[str, tuple[int, float]] | None = None) -> sns.FacetGrid:
    """Speed-up over one device (y) against the devices (x), one line per scheme, one panel per setting or
    hardware set (`panel`); a row with `speedup_lo`/`speedup_hi` gets its 95% interval as whiskers. The dashed
    diagonal is linear scaling; `seed_points` (label -> (devices, speed-up)) mark the seed's figures.

    `table` has columns panel, scheme, devices, speedup (`parallel.cost.table`, or claim 7's measured `speedups`).
    """
    one, many = table[table.devices == 1], table[table.devices > 1]
    lines = pd.concat([many, *(one.assign(scheme=s) for s in many.scheme.unique())])  # each line starts at one device
    grid = sns.relplot(lines, x="devices", y="speedup", hue="scheme", style="scheme", col="panel", kind="line",
                       markers=True, dashes=False, height=3.0, aspect=1.05, col_wrap=min(3, table.panel.nunique()),
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
    for ax in grid.axes.flat:
        ax.set_title(textwrap.fill(ax.get_title().removeprefix("panel = "), 34), fontsize=10)
    grid.set_axis_labels("devices", "speed-up over one device (x)")
    handles = dict(zip(*reversed(grid.axes.flat[0].get_legend_handles_labels())))  # every mark once, under the panels
    if grid.legend is not None:
        grid.legend.remove()
    grid.figure.tight_layout()
    grid.figure.legend(list(handles.values()), list(handles), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=2,
                       fontsize=10, frameon=False)
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


def verdict_chart(rows: pd.DataFrame, labels: Mapping[str, str], bands: Mapping[str, tuple[float, float]],
                  empty: Mapping[str, str] | None = None) -> plt.Figure:
    """Each claim's figures on one log axis, a row per claim (`labels`: claim number -> row label): one mark per
    set and kind of evidence (`rows`: the ledger's rows with a figure), its interval as a whisker, and the region its
    rule calls reproduced (`bands`) shaded. A rule deciding on parts shows each part's interval, marked at its
    middle. A claim without marks says why (`empty`) in its row. Sized to be read at a laptop's page width: text
    of 11 pt on an 8-inch figure."""
    empty = empty or {}
    fig, ax = plt.subplots(figsize=(8, 0.75 * len(labels) + 1.6))
    order = {number: i for i, number in enumerate(reversed(list(labels)))}
    for number, (low, high) in bands.items():
        if number in order:
            ax.fill_between([low, min(high, 1e3)], order[number] - 0.4, order[number] + 0.4, color="tab:orange",
                            alpha=0.2, linewidth=0)
    for evidence, (offset, marker, face) in _EVIDENCE_MARKS.items():
        mine = rows[rows["evidence"] == evidence]
        for number, sets in mine.groupby("claim"):
            for k, row in enumerate(sets.itertuples()):
                y = order[number] + offset + 0.05 * (k - (len(sets) - 1) / 2)
                marks = [(lo, hi, (lo * hi) ** 0.5) for _, lo, hi in row.parts] or [(row.low, row.high, row.ours)]
                for lo, hi, x in marks:
                    if lo is not None and not pd.isna(lo):
                        ax.plot([lo, hi], [y, y], color="black", linewidth=1)
                    ax.plot([x], [y], marker=marker, markerfacecolor=face, color="black", linestyle="none",
                            markersize=7)
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    for number, why in empty.items():
        ax.text(0.02, order[number], f"no figure: {why}", va="center", ha="left", fontsize=10, color="dimgrey",
                transform=ax.get_yaxis_transform(), wrap=True)
    ax.set_yticks(range(len(labels)), ["\n".join(textwrap.fill(line, 26) for line in labels[n].split("\n"))
                                       for n in reversed(list(labels))], fontsize=11)
    ax.tick_params(axis="x", labelsize=11)
    ax.set_ylim(-0.6, len(labels) - 0.4)
    ax.set_xlabel("each claim's figure (a ratio; log scale)", fontsize=11)
    handles = [plt.Line2D([], [], marker=m, markerfacecolor=f, color="black", linestyle="none", label=e)
               for e, (_, m, f) in _EVIDENCE_MARKS.items()]
    handles.append(plt.Rectangle((0, 0), 1, 1, color="tab:orange", alpha=0.2, label="reproduced (6: holds)"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.4, -0.16), ncol=4, frameon=False, fontsize=10)
    gpus = sorted({h.split(" vs ")[0] for h in rows.loc[rows["evidence"] == "GPU", "hardware"]})
    ax.set_title("GPU: " + (", ".join(gpus) if gpus else "none stored")
                 + f"; CPU analogues: {rows.loc[rows['evidence'] == 'CPU analogue', 'hardware'].nunique()} sets",
                 fontsize=11, loc="left")
    fig.tight_layout()
    return fig
