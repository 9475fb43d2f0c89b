"""Plots of a run's results: difficulty curves, heatmaps and a comparison of two runs, drawn
with matplotlib. Pure: polars frames of `points` rows in; matplotlib figures, PNG bytes or an
HTML page out. What is drawn is prepared by numerate.figures.prepare (shared with `numerate
view` and the Prefect artifacts): this module only draws it.

matplotlib is imported inside the functions and draws on its Agg canvas, never through pyplot's
global state: a library function must not open windows or keep figures alive.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import math
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import polars as pl

from numerate.figures.prepare import (
    check_points,
    choose_x,
    compare_points,
    curve_points,
    grid_parameters,
    heatmap,
    level_label,
    level_order,
    level_positions,
    pool,
)
from numerate.kernel.errors import ConfigError, for_terminal, printable, shorten
from numerate.kernel.files import check_suffix
from numerate.kernel.survival import SurvivalCurve

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure, FigureBase, SubFigure

__all__ = [
    "KINDS",
    "Kind",
    "OutputFormat",
    "Panel",
    "compose",
    "figure_png",
    "output_format",
    "panels",
    "render_run",
    "run_figure_png",
    "run_html",
]

Kind = Literal["curves", "heatmap", "budget", "all", "compare"]
KINDS: tuple[Kind, ...] = ("curves", "heatmap", "budget", "all", "compare")
"""curves, heatmap and budget (the token budget): one plot each; all: the three (the budget
when answers have token counts); compare: only the comparison of two runs."""

Budgets = Mapping[tuple[str, str], SurvivalCurve]
"""The token budget of each model and manifold (numerate.results.tokens.budget_curves)."""

DPI = 100
MAX_LABELLED_COLUMNS = 40
"""Heatmap columns (grid points) beyond which their labels would overlap: left out."""
MAX_ANNOTATED_CELLS = 400
"""Heatmap cells beyond which the accuracy is not written in each cell."""
MAX_LABEL_CHARS = 40
"""Characters of a tick's label (a grid value, a point's name) shown at most: a name of
10,000 characters squeezed the plot to nothing ("axes sizes collapsed to zero")."""


# ---------------------------------------------------------------------------- drawing


def _colors(points: pl.DataFrame) -> dict[str, str]:
    """One colour per model, the same in every panel."""
    return {model: f"C{i % 10}" for i, model in enumerate(sorted(set(points["model"])))}


def _series(rows: pl.DataFrame, position: Mapping[str, float]) -> tuple[list[float], ...]:
    """x, accuracy (NaN without a scored case), interval low and high, in x order."""
    found = rows.select("x", "accuracy", "ci_low", "ci_high").iter_rows()
    ordered = sorted(
        (position[x], math.nan if acc is None else acc, low, high) for x, acc, low, high in found
    )
    return tuple(list(column) for column in zip(*ordered, strict=True))


def _interval(acc: list[float], low: list[float], high: list[float]) -> list[list[float]]:
    """matplotlib's error bar lengths below and above each estimate."""
    below = [a - lo for a, lo in zip(acc, low, strict=True)]
    above = [h - a for a, h in zip(acc, high, strict=True)]
    return [below, above]


def _draw_chance(ax: Axes, rows: pl.DataFrame, position: Mapping[str, float]) -> None:
    if "chance" not in rows.columns:
        return
    floor = pool(rows, ["x"]).filter(pl.col("chance").is_not_null())
    at = sorted((position[x], chance) for x, chance in floor.select("x", "chance").iter_rows())
    style: dict[str, Any] = {"linestyle": "--", "color": "grey", "linewidth": 1, "label": "chance"}
    if len(at) == 1:  # one level: a line across
        ax.axhline(at[0][1], **style)
    elif at:
        xs, ys = zip(*at, strict=True)
        ax.plot(xs, ys, **style)


def _draw_curve(
    ax: Axes, rows: pl.DataFrame, x_name: str | None, colors: Mapping[str, str]
) -> None:
    """One manifold's accuracy against x: a line per model with its intervals, dodged sideways
    so that they do not hide each other; the chance floor dashed."""
    levels = sorted(set(rows["x"]), key=level_order)
    position, numeric = level_positions(levels)
    ordered = sorted(position.values())
    spacing = min((b - a for a, b in itertools.pairwise(ordered)), default=1.0)
    models = [model for model in colors if model in set(rows["model"])]
    for rank, model in enumerate(models):
        xs, acc, low, high = _series(rows.filter(pl.col("model") == model), position)
        shift = (rank - (len(models) - 1) / 2) * spacing * 0.04
        ax.errorbar(
            [x + shift for x in xs],
            acc,
            yerr=_interval(acc, low, high),
            marker="o",
            markersize=4,
            capsize=3,
            linewidth=1.2,
            color=colors[model],
            label=_drawn(model),
        )
    _draw_chance(ax, rows, position)
    if not numeric or len(levels) <= 12:
        shown = [shorten(_drawn(level_label(level)), MAX_LABEL_CHARS) for level in levels]
        ax.set_xticks([position[level] for level in levels], labels=shown)
    if not numeric or len(levels) == 1:
        ax.set_xlim(min(ordered) - 0.5 * spacing, max(ordered) + 0.5 * spacing)
    ax.set_xlabel(_drawn(x_name) if x_name else "(no grid: all points)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)


def draw_curves(
    target: FigureBase,
    rows: pl.DataFrame,
    xs: Mapping[str, str | None],
    colors: Mapping[str, str],
) -> None:
    """Difficulty curves (rows from `curve_points`): one panel per manifold, three to a row,
    one legend below them."""
    manifolds = sorted(xs)
    axes = _manifold_axes(target, manifolds)
    for ax, manifold in zip(axes, manifolds, strict=True):
        _draw_curve(ax, rows.filter(pl.col("manifold") == manifold), xs[manifold], colors)
    _one_legend(target, axes)


def _manifold_axes(target: FigureBase, manifolds: Sequence[str]) -> list[Axes]:
    """One panel per manifold, three to a row, each titled; the grid's spare cells hidden."""
    columns = min(3, len(manifolds))
    grid = target.subplots(math.ceil(len(manifolds) / columns), columns, squeeze=False).ravel()
    for ax in grid[len(manifolds) :]:
        ax.set_visible(False)
    for ax, manifold in zip(grid, manifolds, strict=False):
        ax.set_title(_drawn(manifold))
    return list(grid[: len(manifolds)])


def _one_legend(target: FigureBase, axes: Sequence[Axes]) -> None:
    """One legend below the panels, each model once (none when nothing is labelled)."""
    legend: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    if legend:
        target.legend(list(legend.values()), list(legend), loc="outside lower center",
                      ncols=min(len(legend), 6))  # fmt: skip


def draw_budgets(target: FigureBase, budgets: Budgets, colors: Mapping[str, str]) -> None:
    """The token budget (Kaplan-Meier curves with their 95% bands): one panel per manifold,
    a step curve per model, its median marked."""
    manifolds = sorted({manifold for _, manifold in budgets})
    axes = _manifold_axes(target, manifolds)
    for ax, manifold in zip(axes, manifolds, strict=True):
        for (model, shown), curve in sorted(budgets.items()):
            if shown != manifold or not curve.times:
                continue
            color = colors.get(model, "#1f77b4")
            times = [0.0, *curve.times]
            ax.step(times, [1.0, *curve.survival], where="post", color=color, label=_drawn(model))
            ax.fill_between(times, [1.0, *curve.low], [1.0, *curve.high], step="post",
                            color=color, alpha=0.15, linewidth=0)  # fmt: skip
            if curve.median is not None:
                ax.axvline(curve.median, color=color, linestyle=":", linewidth=1)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("completion tokens")
        ax.set_ylabel("share still without an answer")
        ax.grid(alpha=0.3)
    _one_legend(target, axes)


def _heatmap_matrix(
    rows: pl.DataFrame, models: list[str], grid: list[str]
) -> tuple[Any, list[str]]:
    """Accuracy per (model, grid point) as numerate.figures.prepare.heatmap gives it, masked where a
    point has no scored case; the point keys in grid order."""
    import numpy as np

    prepared = heatmap(rows, grid)
    matrix = np.full((len(models), len(prepared.keys)), np.nan)
    for row, model in enumerate(models):
        for column, key in enumerate(prepared.keys):
            value = prepared.accuracy(model, key)
            if value is not None:
                matrix[row, column] = value
    return np.ma.masked_invalid(matrix), prepared.keys


def _draw_heatmap(ax: Axes, rows: pl.DataFrame, grid: list[str]) -> Any:
    import matplotlib

    models = sorted(set(rows["model"]))
    matrix, keys = _heatmap_matrix(rows, models, grid)
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="lightgrey")
    image = ax.imshow(matrix, vmin=0, vmax=1, cmap=cmap, aspect="auto", interpolation="nearest")
    ax.set_yticks(range(len(models)), labels=[_drawn(model) for model in models])
    if len(keys) <= MAX_LABELLED_COLUMNS:
        shown = [shorten(_drawn(key), MAX_LABEL_CHARS) for key in keys]
        ax.set_xticks(range(len(keys)), labels=shown, rotation=45, ha="right", fontsize=8)
    else:
        ax.set_xticks([])
        ax.set_xlabel(f"{len(keys)} grid points (too many to label)")
    if matrix.size <= MAX_ANNOTATED_CELLS:
        for row, column in zip(*(~matrix.mask).nonzero(), strict=True):
            value = float(matrix[row, column])
            ax.text(
                column,
                row,
                f"{value:.2f}",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if value < 0.5 else "black",
            )
    return image


def draw_heatmaps(target: FigureBase, points: pl.DataFrame) -> None:
    """Accuracy of each model (rows) at each grid point (columns), one panel per manifold, one
    colour scale; grey: no scored case."""
    grids = grid_parameters(points)
    sizes = [points.filter(pl.col("manifold") == m)["model"].n_unique() + 2.5 for m in grids]
    axes = target.subplots(len(grids), 1, squeeze=False, height_ratios=sizes)
    images = []
    for ax, (manifold, grid) in zip(axes[:, 0], grids.items(), strict=True):
        images.append(_draw_heatmap(ax, points.filter(pl.col("manifold") == manifold), grid))
        ax.set_title(_drawn(manifold))
    target.colorbar(images[0], ax=list(axes[:, 0]), label="accuracy", shrink=0.8)


def _draw_pair(ax: Axes, y: float, row: Mapping[str, Any]) -> None:
    """One (model, manifold) of a comparison: base hollow above, new filled below, an arrow
    from base to new, the change at the right edge."""
    for suffix, shift, face in (("", 0.15, "white"), ("_new", -0.15, "C0")):
        acc = row[f"accuracy{suffix}"]
        value = math.nan if acc is None else acc
        errors = _interval([value], [row[f"ci_low{suffix}"]], [row[f"ci_high{suffix}"]])
        ax.errorbar(
            [value],
            [y + shift],
            xerr=errors,
            fmt="o",
            color="C0",
            markerfacecolor=face,
            capsize=3,
            markersize=5,
        )
    before, after = row["accuracy"], row["accuracy_new"]
    if before is None or after is None:
        return
    change = after - before
    color = "tab:green" if change > 0 else "tab:red" if change < 0 else "grey"
    arrow = {"arrowstyle": "->", "color": color}
    ax.annotate("", xy=(after, y), xytext=(before, y), arrowprops=arrow)
    ax.text(
        1.02,
        y,
        f"{change:+.3f}",
        transform=ax.get_yaxis_transform(),
        va="center",
        color=color,
        fontsize=8,
    )


def draw_comparison(target: FigureBase, rows: pl.DataFrame, labels: tuple[str, str]) -> None:
    """Two runs per (model, manifold), rows from `compare_points`: see `_draw_pair`."""
    ax = target.subplots()
    ys = list(range(rows.height - 1, -1, -1))  # the first row on top
    for y, row in zip(ys, rows.iter_rows(named=True), strict=True):
        _draw_pair(ax, y, row)
    pairs = rows.select("manifold", "model").iter_rows()
    names = [f"{model} · {manifold}" for manifold, model in pairs]
    ax.set_yticks(ys, labels=[_drawn(name) for name in names])
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.7, rows.height - 0.3)
    ax.set_xlabel("accuracy (95% interval)")
    ax.grid(axis="x", alpha=0.3)
    ax.plot([], [], "o", color="C0", markerfacecolor="white", label=_drawn(f"base: {labels[0]}"))
    ax.plot([], [], "o", color="C0", label=_drawn(f"new: {labels[1]}"))
    target.legend(loc="outside lower center", ncols=2)


# ---------------------------------------------------------------------------- composing


@dataclass(frozen=True)
class Panel:
    """One plot of a figure: drawn into a (sub)figure of its own size."""

    title: str
    """Shown above the panel."""
    width: float
    """Inches."""
    height: float
    """Inches."""
    draw: Callable[[FigureBase], None]
    """Draws the panel into the (sub)figure it is given."""


def _curves_panel(points: pl.DataFrame, x: str | None) -> Panel:
    xs = choose_x(points, x)
    rows = curve_points(points, xs)
    columns, lines = min(3, len(xs)), math.ceil(len(xs) / 3)
    colors = _colors(points)
    return Panel(
        "Accuracy by difficulty (other grid parameters pooled; 95% Wilson intervals)",
        4.6 * columns + 0.6,
        3.6 * lines + 1.2,
        lambda target: draw_curves(target, rows, xs, colors),
    )


def _heatmap_panel(points: pl.DataFrame) -> Panel:
    widest = max(points.group_by("manifold").agg(pl.col("point_key").n_unique())["point_key"])
    labelled = widest <= MAX_LABELLED_COLUMNS
    models = points.group_by("manifold").agg(pl.col("model").n_unique())["model"]
    height = sum(0.32 * count + (2.2 if labelled else 1.2) for count in models)
    return Panel(
        "Accuracy per grid point",
        min(max(0.55 * widest + 3.5, 7.0), 22.0),
        height + 0.6,
        lambda target: draw_heatmaps(target, points),
    )


def _comparison_panel(base: pl.DataFrame, new: pl.DataFrame, labels: tuple[str, str]) -> Panel:
    rows, only_base, only_new = compare_points(base, new)
    left_out = (
        f"; left out: {only_base} point(s) only in base, {only_new} only in new"
        if only_base or only_new
        else ""
    )
    return Panel(
        f"Against the base run (grid points of both pooled{left_out})",
        8.5,
        0.5 * rows.height + 1.8,
        lambda target: draw_comparison(target, rows, labels),
    )


def _budget_panel(budgets: Budgets, colors: Mapping[str, str]) -> Panel:
    manifolds = len({manifold for _, manifold in budgets})
    return Panel(
        "Token budget: cases still without an answer\n(truncated answers censored; dotted: "
        "the median)",  # on one line, wider than a panel of one manifold: cut at both ends
        4.6 * min(3, manifolds) + 0.6,
        3.6 * math.ceil(manifolds / 3) + 1.2,
        lambda target: draw_budgets(target, budgets, colors),
    )


def panels(
    points: pl.DataFrame,
    *,
    kind: Kind = "all",
    x: str | None = None,
    against: pl.DataFrame | None = None,
    labels: tuple[str, str] = ("base", "new"),
    budgets: Budgets | None = None,
) -> list[Panel]:
    """The panels of a run's figure: the comparison first when `against` is given, then the
    curves and heatmaps that `kind` asks for.

    Args:
        points: the run's `points` rows (POINT_COLUMNS; chance to draw the floor).
        kind: curves, heatmap, all (both) or compare (only the comparison: needs `against`).
        x: the parameter of the curves (default: per manifold, see `choose_x`).
        against: another run's rows to compare with: the base, `points` being the new.
        labels: names of the base and the new run.
        budgets: the run's token budgets (for kind budget, and all when there are some).
    """
    check_points(points, labels[1])
    if kind not in KINDS:
        raise ConfigError(f"kind {kind!r}: choose {', '.join(KINDS)}")
    found: list[Panel] = []
    if against is not None:
        check_points(against, labels[0])
        found.append(_comparison_panel(against, points, labels))
    elif kind == "compare":
        raise ConfigError("kind compare needs a second run to compare against")
    if kind in ("curves", "all"):
        found.append(_curves_panel(points, x))
    elif x is not None:
        choose_x(points, x)  # a wrong --x is an error whatever is drawn
    if kind in ("heatmap", "all"):
        found.append(_heatmap_panel(points))
    drawn = {key: curve for key, curve in (budgets or {}).items() if curve.times}
    if kind == "budget" and not drawn:
        raise ConfigError(f"run {labels[1]} has no answer with a token count: no token budget")
    if kind in ("budget", "all") and drawn:
        found.append(_budget_panel(drawn, _colors(points)))
    return found


def compose(parts: Sequence[Panel], title: str) -> Figure:
    """The panels stacked in one figure, each in a subfigure under its own title."""
    from matplotlib.figure import Figure

    heights = [panel.height for panel in parts]
    figure = Figure(
        figsize=(max(panel.width for panel in parts), sum(heights) + 0.5),
        dpi=DPI,
        layout="constrained",
    )
    subfigures = figure.subfigures(len(parts), 1, squeeze=False, height_ratios=heights)
    for subfigure, panel in zip(subfigures.ravel(), parts, strict=True):
        cast("SubFigure", subfigure).suptitle(shown_title(panel.title), fontsize=11)
        panel.draw(subfigure)
    # a run id or model a database was made to hold: no glyph is missing (a warning each)
    figure.suptitle(shown_title(title), fontsize=14, fontweight="bold")  # two run ids
    return figure


def _drawn(text: str) -> str:
    """A name or value as a figure draws it: a control character (an escape sequence of a
    grid value or a model name a database was made to hold) as its escape, `\\x1b`; its line
    breaks kept."""
    return printable(text, keep="\n")


def shown_title(title: str) -> str:
    """A figure's title as drawn: each of its lines bounded and with no character a font has
    no glyph for (a run id or model a database was made to hold), its line breaks kept."""
    return "\n".join(for_terminal(line, 500) for line in title.split("\n"))


_DRAWING = threading.Lock()
"""Held while a figure is drawn (`figure_png`)."""


def figure_png(figure: Figure) -> bytes:
    """The figure as PNG bytes, drawn on the Agg canvas. A character its font has no glyph
    for (a grid value in Chinese, an emoji, a model name a database was made to hold) is
    drawn as the font's box, without matplotlib's warning of each (two lines on standard
    error with numerate's source line, a control character of the text among them). One
    figure at a time: `catch_warnings` swaps the process's filters, and two threads (the
    viewer's pages) entering and leaving it out of turn could restore each other's away."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buffer = io.BytesIO()
    with _DRAWING, warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"Glyph \d+ .* missing from", UserWarning)
        FigureCanvasAgg(figure).print_png(buffer)
    return buffer.getvalue()


def _title(run_id: str, against_id: str | None) -> str:
    return f"numerate run {run_id}" + (f" against {against_id}" if against_id else "")


def run_figure_png(
    points: pl.DataFrame,
    run_id: str,
    *,
    kind: Kind = "all",
    x: str | None = None,
    against: pl.DataFrame | None = None,
    against_id: str | None = None,
    budgets: Budgets | None = None,
) -> bytes:
    """A run's plots (see `panels`) in one PNG, titled with the run id.

    Args:
        points: the run's `points` rows (POINT_COLUMNS; chance to draw the floor).
        run_id: the run's id, for the title.
        kind, x, against, budgets: as in `panels`.
        against_id: the id of the run `against` holds.
    """
    labels = (against_id or "base", run_id)
    parts = panels(points, kind=kind, x=x, against=against, labels=labels, budgets=budgets)
    with _text_as_given():
        return figure_png(compose(parts, _title(run_id, against_id)))


def _panel_png(panel: Panel) -> bytes:
    from matplotlib.figure import Figure

    with _text_as_given():
        figure = Figure(figsize=(panel.width, panel.height), dpi=DPI, layout="constrained")
        panel.draw(figure)
        return figure_png(figure)


def _text_as_given() -> AbstractContextManager[Any]:
    """matplotlib reads a text between two `$` as a formula and fails on one it cannot parse:
    a grid value `$\\frac{a$` ended `numerate plot` and a run's plot in a traceback. What
    numerate draws is names and values, drawn as they are written."""
    import matplotlib

    return matplotlib.rc_context({"text.parse_math": False})


def _estimate(acc: float | None, low: float, high: float) -> str:
    return "–" if acc is None else f"{acc:.3f} [{low:.3f}, {high:.3f}]"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _summary_table(points: pl.DataFrame) -> str:
    """Per model and manifold: scored answers, the mean accuracy over points and its 95%
    interval; pass@k and maj@k when the run has several samples per case."""
    pooled = pool(points.sort("model", "manifold"), ["model", "manifold"])
    several = "pass_at_k" in pooled.columns and pooled["pass_at_k"].drop_nulls().len() > 0
    extra = [c for c in ("pass_at_k", "maj_at_k") if several and c in pooled.columns]
    rows = [
        (
            r["model"],
            r["manifold"],
            r["n_scored"],
            _estimate(r["accuracy"], r["ci_low"], r["ci_high"]),
            *("-" if r[c] is None else f"{r[c]:.3f}" for c in extra),
        )
        for r in pooled.iter_rows(named=True)
    ]
    headers = ("model", "manifold", "scored", "accuracy [95% interval]")
    return _table((*headers, *(c.replace("_at_", "@") for c in extra)), rows)


def _comparison_table(base: pl.DataFrame, new: pl.DataFrame, labels: tuple[str, str]) -> str:
    compared, _, _ = compare_points(base, new)
    rows = []
    for r in compared.sort("model", "manifold").iter_rows(named=True):
        before, after = r["accuracy"], r["accuracy_new"]
        change = "–" if before is None or after is None else f"{after - before:+.3f}"
        rows.append(
            (
                r["model"],
                r["manifold"],
                _estimate(before, r["ci_low"], r["ci_high"]),
                _estimate(after, r["ci_low_new"], r["ci_high_new"]),
                change,
            )
        )
    return _table(("model", "manifold", labels[0], labels[1], "change"), rows)


PAGE_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0}"
    "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}"
    "th{background:#f3f3f3}img{max-width:100%;height:auto}"
)


def run_html(
    points: pl.DataFrame,
    run_id: str,
    *,
    kind: Kind = "all",
    x: str | None = None,
    against: pl.DataFrame | None = None,
    against_id: str | None = None,
    budgets: Budgets | None = None,
) -> str:
    """A self-contained HTML page of a run's plots: its title and run id, a table per model and
    manifold (of both runs with `against`), then each panel as an embedded PNG. Arguments as
    in `run_figure_png`."""
    labels = (against_id or "base", run_id)
    parts = panels(points, kind=kind, x=x, against=against, labels=labels, budgets=budgets)
    title = html.escape(_title(run_id, against_id))
    tables = ["<h2>Per model and manifold (grid points pooled)</h2>", _summary_table(points)]
    if against is not None:
        compared = _comparison_table(against, points, labels)
        tables[:0] = ["<h2>Against the base run (grid points of both pooled)</h2>", compared]
    images = "".join(
        f'<h2>{html.escape(panel.title)}</h2><img alt="{html.escape(panel.title)}" '
        f'src="data:image/png;base64,{base64.b64encode(_panel_png(panel)).decode()}">'
        for panel in parts
    )
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{PAGE_STYLE}</style></head><body><h1>{title}</h1>"
        f"<p>run id: <code>{html.escape(run_id)}</code></p>{''.join(tables)}{images}"
        "</body></html>\n"
    )


OutputFormat = Literal["png", "html"]


def output_format(path: str | Path) -> OutputFormat:
    """What a file name asks for, by its suffix: .png or .html (.htm); ConfigError naming any
    other suffix."""
    return "png" if check_suffix("--out", path, (".png", ".html", ".htm")) == ".png" else "html"


def render_run(
    points: pl.DataFrame,
    run_id: str,
    fmt: OutputFormat,
    *,
    kind: Kind = "all",
    x: str | None = None,
    against: pl.DataFrame | None = None,
    against_id: str | None = None,
    budgets: Budgets | None = None,
) -> bytes | str:
    """A run's plots as PNG bytes or an HTML page (see `run_figure_png` and `run_html`)."""
    options: dict[str, Any] = {"kind": kind, "x": x, "against": against,
                               "against_id": against_id, "budgets": budgets}  # fmt: skip
    if fmt == "html":
        return run_html(points, run_id, **options)
    return run_figure_png(points, run_id, **options)
