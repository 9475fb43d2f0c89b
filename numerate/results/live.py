"""A run's points and summaries as readers see them: stored when the run stored them (as it
ends), computed from the answers graded so far while it runs or after it was interrupted (a
report of an interrupted run showed an empty table, exit 0, and `plot` said nothing was
graded). Every reader of aggregates asks here, never the stored tables alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from numerate.results.aggregate import aggregate_run
from numerate.store import queries
from numerate.store.queries import (
    PLOTTED_POINT_COLUMNS,
    POINT_COLUMNS,
    POOLED,
    SUMMARY_COLUMNS,
    Source,
)

UNCONCLUDED = ("running", "interrupted")
"""The statuses of runs whose points and summaries are not stored."""


def live_aggregates(source: Source, run_id: str) -> tuple[pl.DataFrame, pl.DataFrame] | None:
    """A running or interrupted run's points and summaries, computed as its end would store
    them from the answers graded so far; None for a run that stored its own."""
    if queries.run_status(source, run_id) not in UNCONCLUDED:
        return None
    if not queries.responses_of(source, run_id):
        return None
    points, summaries = aggregate_run(source, run_id)
    points = points.with_columns(
        ci_width=pl.col("ci_high") - pl.col("ci_low"), stop_reason=pl.lit(None, pl.String)
    )
    return points, summaries


def _as_stored(
    frame: pl.DataFrame, columns: Sequence[str], models: Sequence[str],
    manifolds: Sequence[str], pooled: bool, order: Sequence[Any],
) -> pl.DataFrame:  # fmt: skip
    """A live aggregate `frame` as the stored one is read: `columns`, only the given models
    and manifolds (and the pooled rows, `pooled`), sorted by `order`."""
    if models:
        frame = frame.filter(pl.col("model").is_in(list(models)))
    if manifolds:
        kept = pl.col("manifold").is_in(list(manifolds))
        frame = frame.filter(kept | (pl.col("manifold") == POOLED) if pooled else kept)
    return frame.sort(list(order)).select(list(columns))


def summaries(
    source: Source, run_id: str, models: Sequence[str] = (), manifolds: Sequence[str] = ()
) -> pl.DataFrame:
    """The run's summaries (SUMMARY_COLUMNS): per model pooled over its manifolds (manifold
    POOLED) first, then per manifold; only the given models and manifolds when any are given."""
    live = live_aggregates(source, run_id)
    if live is None:
        return queries.summaries(source, run_id, models, manifolds)
    order = ["model", pl.col("manifold") != POOLED, "manifold"]
    return _as_stored(live[1], SUMMARY_COLUMNS, models, manifolds, True, order)


def points(
    source: Source, run_id: str, models: Sequence[str] = (), manifolds: Sequence[str] = ()
) -> pl.DataFrame:
    """The run's grid points (POINT_COLUMNS), filtered like `summaries`."""
    live = live_aggregates(source, run_id)
    if live is None:
        return queries.points(source, run_id, models, manifolds)
    order = ["model", "manifold", "point_key"]
    return _as_stored(live[0], POINT_COLUMNS, models, manifolds, False, order)


def plotted_points(source: Source, run_id: str) -> pl.DataFrame:
    """What the plots read of each grid point of a run (PLOTTED_POINT_COLUMNS; params as
    JSON text)."""
    live = live_aggregates(source, run_id)
    if live is None:
        return queries.plotted_points(source, run_id)
    order = ["manifold", "model", "point_key"]
    return _as_stored(live[0], PLOTTED_POINT_COLUMNS, (), (), False, order)


def summarised(source: Source, run_id: str, column: str) -> list[str]:
    """The models (`column` = model) or manifolds a run's summaries hold (not POOLED)."""
    live = live_aggregates(source, run_id)
    if live is None:
        return queries.summarised(source, run_id, column)
    if column not in ("model", "manifold"):
        raise ValueError(f"not a summary column to list: {column!r}")
    return sorted({str(name) for name in live[1][column]} - {POOLED})
