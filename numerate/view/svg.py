"""The viewer's charts as inline SVG, drawn from what numerate.figures.prepare prepares (the
same curves `numerate plot` draws with matplotlib): no JavaScript library, nothing fetched.
Pure: frames in, markup out. Every text is escaped, a control character as the pages write it
(numerate.view.app); every point links to its cases.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence

import polars as pl

from numerate.figures.prepare import level_label, level_order, level_positions
from numerate.kernel.errors import printable
from numerate.kernel.survival import SurvivalCurve

__all__ = ["PALETTE", "budget_svg", "curve_svg", "heat_color"]

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")  # fmt: skip
"""matplotlib's default colours: a model has the same colour here as in `numerate plot`."""

WIDTH, HEIGHT = 640, 260
LEFT, RIGHT, TOP, BOTTOM = 48, 16, 12, 44


def _text(value: str) -> str:
    """`value` escaped for markup, with a control character (a bidi control of a model's name)
    written as its escape."""
    return html.escape(printable(value))


def heat_color(accuracy: float | None) -> str:
    """A cell's background: light grey without a scored answer, else from pale (0) to deep
    blue (1)."""
    if accuracy is None:
        return "#e5e5e5"
    light, deep = (240, 244, 250), (8, 64, 129)
    mix = [round(a + (b - a) * accuracy) for a, b in zip(light, deep, strict=True)]
    return "#{:02x}{:02x}{:02x}".format(*mix)


def curve_svg(
    curve: pl.DataFrame,
    parameter: str,
    colors: dict[str, str],
    link: Callable[[str, str], str],
) -> str:
    """Accuracy against one grid parameter: a line per model with its 95% intervals, the
    chance floor dashed. `curve`: numerate.figures.prepare.curve_points rows (model, x, accuracy,
    ci_low, ci_high, chance); `link(model, x)` the address of that point's cases."""
    levels = sorted(set(curve["x"]), key=level_order)
    position, _numeric = level_positions(levels)
    low, high = min(position.values()), max(position.values())
    span = (high - low) or 1.0
    models = sorted(set(curve["model"]))
    dodge = 0.012 * (WIDTH - LEFT - RIGHT) if len(models) > 1 else 0.0

    def sx(level: str, index: int = 0) -> float:
        inner = WIDTH - LEFT - RIGHT - 2 * dodge * len(models)
        base = LEFT + dodge * len(models) + (position[level] - low) / span * inner
        return base + (index - (len(models) - 1) / 2) * dodge

    sy = _share_y
    parts = [_axes(levels, parameter, sx, sy)]
    parts.append(_chance(curve, levels, sx, sy))
    for index, model in enumerate(models):
        rows = _sorted(curve.filter(pl.col("model") == model))
        parts.append(_series(rows, model, colors[model], index, sx, sy, link))
    body = "".join(parts)
    return (
        f'<svg class="curve" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="accuracy by {_text(parameter)}">{body}</svg>'
    )


def _sorted(rows: pl.DataFrame) -> list[dict[str, object]]:
    return sorted(rows.iter_rows(named=True), key=lambda row: level_order(str(row["x"])))


def _share_y(value: float) -> float:
    """Where a share (0 to 1) is drawn: 1 at the top."""
    return TOP + (1.0 - value) * (HEIGHT - TOP - BOTTOM)


def _shares(sy: Callable[[float], float]) -> str:
    """The y axis of a share, 0 to 1: a grid line and its label each quarter."""
    return "".join(
        f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{sy(t):.1f}" y2="{sy(t):.1f}"/>'
        f'<text class="tick" x="{LEFT - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{t:g}</text>'
        for t in (0.0, 0.25, 0.5, 0.75, 1.0)
    )


def _axes(
    levels: list[str],
    parameter: str,
    sx: Callable[..., float],
    sy: Callable[[float], float],
) -> str:
    out = [_shares(sy)]
    shown = levels if len(levels) <= 16 else levels[:: max(1, len(levels) // 12)]
    for level in shown:
        out.append(
            f'<text class="tick" x="{sx(level):.1f}" y="{HEIGHT - BOTTOM + 16}" '
            f'text-anchor="middle">{_text(level_label(level))}</text>'
        )
    out.append(
        f'<text class="label" x="{(LEFT + WIDTH - RIGHT) / 2:.1f}" y="{HEIGHT - 6}" '
        f'text-anchor="middle">{_text(parameter)}</text>'
    )
    return "".join(out)


def _chance(
    curve: pl.DataFrame, levels: list[str], sx: Callable[..., float], sy: Callable[[float], float]
) -> str:
    if "chance" not in curve.columns:
        return ""
    floor = curve.filter(pl.col("chance").is_not_null()).group_by("x").agg(pl.col("chance").mean())
    at = {str(x): float(c) for x, c in floor.iter_rows()}
    points = " ".join(f"{sx(level):.1f},{sy(at[level]):.1f}" for level in levels if level in at)
    if not points:
        return ""
    return f'<polyline class="chance" points="{points}"><title>chance</title></polyline>'


def _series(
    rows: list[dict[str, object]],
    model: str,
    color: str,
    index: int,
    sx: Callable[..., float],
    sy: Callable[[float], float],
    link: Callable[[str, str], str],
) -> str:
    shown = [row for row in rows if row["accuracy"] is not None]
    line = " ".join(
        f"{sx(str(row['x']), index):.1f},{sy(float(row['accuracy'])):.1f}"  # type: ignore[arg-type]
        for row in shown
    )
    out = [f'<polyline class="series" stroke="{color}" points="{line}"/>']
    for row in shown:
        x, level = sx(str(row["x"]), index), str(row["x"])
        acc, lo, hi = (float(row[c]) for c in ("accuracy", "ci_low", "ci_high"))  # type: ignore[arg-type]
        tip = (
            f"{model}, {level_label(level)}: {acc:.3f} [{lo:.3f}, {hi:.3f}], "
            f"{row['n_scored']} scored"
        )
        out.append(
            f'<a href="{_text(link(model, level))}" class="point">'
            f'<line stroke="{color}" x1="{x:.1f}" x2="{x:.1f}" y1="{sy(lo):.1f}" '
            f'y2="{sy(hi):.1f}"/>'
            f'<circle fill="{color}" cx="{x:.1f}" cy="{sy(acc):.1f}" r="4.5">'
            f"<title>{_text(tip)}</title></circle></a>"
        )
    return "".join(out)


MAX_STEPS = 400
"""The most steps a budget curve draws (a long run's thousands of token counts, thinned)."""


def budget_svg(curves: dict[str, SurvivalCurve], colors: dict[str, str], title: str) -> str:
    """The token budget: per model, the share of cases still without an answer as completion
    tokens grow (a Kaplan-Meier step curve, numerate.kernel.survival); hovering a curve says
    its answers, truncated answers and median."""
    drawn = {model: curve for model, curve in curves.items() if curve.times}
    most = max((max(curve.times) for curve in drawn.values()), default=1.0) or 1.0

    def sx(tokens: float) -> float:
        return LEFT + tokens / most * (WIDTH - LEFT - RIGHT)

    sy = _share_y
    out = [_shares(sy)]
    for share in (0.0, 0.25, 0.5, 0.75, 1.0):
        out.append(
            f'<text class="tick" x="{sx(share * most):.1f}" y="{HEIGHT - BOTTOM + 16}" '
            f'text-anchor="middle">{share * most:,.{0 if most >= 8 else 1}f}</text>'
        )
    out.append(
        f'<text class="label" x="{(LEFT + WIDTH - RIGHT) / 2:.1f}" y="{HEIGHT - 6}" '
        'text-anchor="middle">completion tokens</text>'
    )
    for model, curve in sorted(drawn.items()):
        keep: Sequence[int] = range(len(curve.times))
        if len(curve.times) > MAX_STEPS:
            stride = len(curve.times) / MAX_STEPS
            keep = sorted({int(i * stride) for i in range(MAX_STEPS)} | {len(curve.times) - 1})
        steps, level = [f"{sx(0):.1f},{sy(1.0):.1f}"], 1.0
        for i in keep:
            x = sx(curve.times[i])
            steps += [f"{x:.1f},{sy(level):.1f}", f"{x:.1f},{sy(curve.survival[i]):.1f}"]
            level = curve.survival[i]
        median = "none" if curve.median is None else f"{curve.median:,.0f} tokens"
        tip = f"{model}: {curve.n:,} answers, {curve.censored:,} truncated, median {median}"
        out.append(
            f'<polyline class="series" stroke="{colors.get(model, PALETTE[0])}" '
            f'points="{" ".join(steps)}"><title>{_text(tip)}</title></polyline>'
        )
    return (
        f'<svg class="budget" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="{_text(title)}">{"".join(out)}</svg>'
    )
