"""What numerate's figures show, prepared once for every place that draws them: `numerate
plot` (numerate.figures.plots, matplotlib), `numerate view` (numerate.view, SVG in a
browser) and the Prefect artifacts. Pure: polars frames of `points` rows in, frames and plain
values out; no drawing, no I/O.

A frame holds one row per (model, manifold, grid point): model, manifold, point_key, params
(the point's parameters as JSON), n_scored, correct, and chance when the floor should be drawn.

Where points are pooled (a curve averages over the grid parameters it does not show; a
comparison over a model's points on a manifold), the figure is the mean of the points'
accuracies, each point weighing the same whatever its count, with the interval of that mean
(numerate.kernel.design.point_mean, as in every summary numerate stores).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from numerate.kernel.design import Estimate, as_stored, binomial, point_mean
from numerate.kernel.errors import ConfigError

__all__ = [
    "ALL_POINTS",
    "POINT_COLUMNS",
    "Heatmap",
    "check_points",
    "choose_x",
    "compare_points",
    "curve_points",
    "grid_parameters",
    "heatmap",
    "level_label",
    "level_order",
    "level_positions",
    "pool",
]

POINT_COLUMNS = ("model", "manifold", "point_key", "params", "n_scored", "correct")
"""The columns every figure reads from a frame of `points` rows."""

ALL_POINTS = json.dumps("all")
"""The one x level of a manifold without a grid parameter: all of its points pooled."""


def check_points(points: pl.DataFrame, what: str = "points") -> None:
    """ValueError when a column the plots read is missing; ConfigError when there is no row."""
    missing = [c for c in POINT_COLUMNS if c not in points.columns]
    if missing:
        raise ValueError(f"{what} frame lacks column(s) {', '.join(missing)}")
    if points.is_empty():
        raise ConfigError(f"no grid points to plot in {what}")


def _params(value: Any) -> dict[str, Any]:
    loaded = json.loads(value) if isinstance(value, str) else value
    return dict(loaded) if isinstance(loaded, dict) else {}


def _encode(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _order(encoded: str) -> tuple[int, float, str]:
    """Sort key of an encoded parameter value: numbers by value, then the rest by text."""
    value = json.loads(encoded)
    return (0, float(value), "") if _is_number(value) else (1, 0.0, _show(value))


def grid_parameters(points: pl.DataFrame) -> dict[str, list[str]]:
    """Per manifold, its grid parameters: those its point keys name or its points vary (never
    `count`, the cases per point), most distinct values first, ties by name. A manifold run
    without a grid has none."""
    values: dict[str, dict[str, set[str]]] = {}
    named: dict[str, set[str]] = {}
    rows = points.select("manifold", "point_key", "params").unique(maintain_order=True)
    for manifold, key, params in rows.iter_rows():
        seen = values.setdefault(manifold, {})
        for name, value in _params(params).items():
            seen.setdefault(name, set()).add(_encode(value))
        named.setdefault(manifold, set()).update(part.split("=", 1)[0] for part in key.split(","))
    grids = {}
    for manifold, seen in sorted(values.items()):
        counts = {p: len(v) for p, v in seen.items() if p != "count"}
        grid = [p for p, count in counts.items() if count > 1 or p in named[manifold]]
        grids[manifold] = sorted(grid, key=lambda p: (-counts[p], p))
    return grids


def choose_x(points: pl.DataFrame, x: str | None = None) -> dict[str, str | None]:
    """The parameter each manifold's curve runs along: `x` where the manifold has it (the others
    are left out), else its grid parameter with most distinct values (None: no grid).

    Args:
        points: the rows to plot.
        x: a grid parameter; ConfigError naming it and the valid ones when no manifold has it.
    """
    grids = grid_parameters(points)
    if x is None:
        return {manifold: (grid[0] if grid else None) for manifold, grid in grids.items()}
    chosen: dict[str, str | None] = {m: x for m, grid in grids.items() if x in grid}
    if not chosen:
        valid = "; ".join(f"{m}: {', '.join(g) or '(no grid)'}" for m, g in grids.items())
        raise ConfigError(f"--x {x!r} is not a grid parameter of any manifold plotted ({valid})")
    return chosen


def _point_estimate(row: Mapping[str, Any]) -> Estimate:
    se = row.get("se")
    if se is None or row.get("accuracy") is None:  # a frame from elsewhere: binomial points
        return binomial(int(row["correct"]), int(row["n_scored"]))
    return as_stored(row["accuracy"], se, int(row["n_scored"]), row.get("samples"))


def pool(points: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """Points pooled per group: n_scored and correct summed; accuracy the mean of the points'
    accuracies with its 95% interval (numerate.kernel.design.point_mean: equal point weights,
    the case as the unit); chance, pass@k and maj@k, where the frame has them, means over the
    points with a scored answer. Groups keep their first appearance's order."""
    scored = pl.col("n_scored") > 0
    means = [c for c in ("chance", "pass_at_k", "maj_at_k") if c in points.columns]
    pooled = (
        points.with_row_index("row")
        .group_by(list(by), maintain_order=True)
        .agg(
            pl.col("n_scored").sum(),
            pl.col("correct").sum(),
            pl.col("row"),
            *[pl.col(c).filter(scored).mean() for c in means],
        )
    )
    rows = list(points.iter_rows(named=True))
    estimates = [point_mean([_point_estimate(rows[i]) for i in group]) for group in pooled["row"]]
    return pooled.drop("row").with_columns(
        accuracy=pl.Series([e.value for e in estimates], dtype=pl.Float64),
        ci_low=pl.Series([e.low for e in estimates], dtype=pl.Float64),
        ci_high=pl.Series([e.high for e in estimates], dtype=pl.Float64),
    )


def curve_points(points: pl.DataFrame, xs: Mapping[str, str | None]) -> pl.DataFrame:
    """The points of the manifolds in `xs` pooled per (manifold, model, x): x is the value of
    the manifold's parameter `xs[manifold]` as JSON (ALL_POINTS when None)."""
    rows = points.filter(pl.col("manifold").is_in(list(xs)))
    levels = [
        _encode(_params(params).get(name)) if (name := xs[manifold]) else ALL_POINTS
        for manifold, params in zip(rows["manifold"], rows["params"], strict=True)
    ]
    return pool(rows.with_columns(x=pl.Series(levels, dtype=pl.String)), ["manifold", "model", "x"])


def compare_points(base: pl.DataFrame, new: pl.DataFrame) -> tuple[pl.DataFrame, int, int]:
    """Two runs per (manifold, model), pooled over the grid points both have: the columns of
    `pool` for base, the same with suffix `_new` for new; then how many points only base and
    only new have (left out, so that both figures cover the same grid points)."""
    keys = ["model", "manifold", "point_key"]
    common = base.select(keys).unique().join(new.select(keys).unique(), on=keys, how="inner")
    if common.is_empty():
        raise ConfigError("the two runs share no grid point of the same model and manifold")
    sides = [
        pool(side.join(common, on=keys, how="semi"), ["manifold", "model"]) for side in (base, new)
    ]
    joined = sides[0].join(sides[1], on=["manifold", "model"], suffix="_new")
    return joined.sort("manifold", "model"), base.height - common.height, new.height - common.height


def level_label(encoded: str) -> str:
    """How an x level (a parameter value as JSON) is shown: text as it is, the rest as JSON."""
    return _show(json.loads(encoded))


def level_order(encoded: str) -> tuple[int, float, str]:
    """Sort key of an x level: numbers by value, then the rest by text."""
    return _order(encoded)


def level_positions(levels: list[str]) -> tuple[dict[str, float], bool]:
    """x position of each level (a parameter value as JSON): its value when all are numbers,
    else its rank; and whether they are numbers."""
    decoded = [json.loads(level) for level in levels]
    numeric = all(_is_number(value) for value in decoded)
    positions = {
        level: float(value) if numeric else float(rank)
        for rank, (level, value) in enumerate(zip(levels, decoded, strict=True))
    }
    return positions, numeric


@dataclass(frozen=True)
class Heatmap:
    """One manifold's grid as a matrix: a row per model, a column per grid point (in grid
    order); `cells[(model, point_key)]` = (accuracy, correct, n_scored), accuracy None where
    the point has no scored case."""

    models: list[str]
    keys: list[str]
    cells: dict[tuple[str, str], tuple[float | None, int, int]]

    def accuracy(self, model: str, key: str) -> float | None:
        cell = self.cells.get((model, key))
        return cell[0] if cell else None


def heatmap(rows: pl.DataFrame, grid: list[str]) -> Heatmap:
    """The heatmap of one manifold's points (`rows`), its grid parameters `grid` ordering the
    columns (numbers by value, then text), models sorted."""
    models = sorted(set(rows["model"]))
    params = {key: _params(p) for key, p in rows.select("point_key", "params").iter_rows()}

    def order(key: str) -> tuple[Any, ...]:
        return (*(_order(_encode(params[key].get(name))) for name in grid), key)

    keys = sorted(params, key=order)
    cells = {
        (model, key): ((correct / scored) if scored else None, int(correct), int(scored))
        for model, key, correct, scored in rows.select(
            "model", "point_key", "correct", "n_scored"
        ).iter_rows()
    }
    return Heatmap(models, keys, cells)
