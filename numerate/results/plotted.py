"""What `numerate plot` draws: a run's grid points (stored, or computed while it runs), of the
models and manifolds asked for, and with --against the base run's, filtered alike; checked, so
that a run with nothing to plot, or points no run can have, is one line."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from numerate.kernel.errors import ConfigError
from numerate.results.live import plotted_points
from numerate.results.report import require_known
from numerate.results.runs import resolve_run
from numerate.results.tokens import budget_curves
from numerate.store.queries import Source, run_record


def points_to_plot(
    source: Source, run: str, against: str | None, models: Sequence[str],
    manifolds: Sequence[str], note: Callable[[str], object], budgets: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """The run's points (and its token budgets, when `budgets`: a plot that draws them) and,
    with `against`, the base run's: the arguments of render_run."""
    run_id = resolve_run(source, run)
    read: dict[str, Any] = {
        "run_id": run_id,
        "points": _run_points(source, run_id, models, manifolds, note),
        "budgets": {
            (model, manifold): curve
            for (model, manifold), curve in budget_curves(source, run_id).items()
            if (not models or model in models) and (not manifolds or manifold in manifolds)
        }
        if budgets
        else None,
    }
    if against is not None:
        read["against_id"], read["against"] = _base_points(
            source, against, run_id, models, manifolds
        )
    return read


def _select(
    frame: pl.DataFrame, run_id: str, models: Sequence[str], manifolds: Sequence[str]
) -> pl.DataFrame:
    """The rows of the given models and manifolds (all when none are given); ConfigError
    naming a model or manifold the run does not have, and the ones it has."""

    for option, column, wanted in (
        ("--model", "model", models),
        ("--manifold", "manifold", manifolds),
    ):
        require_known(run_id, option, column, wanted, sorted(set(frame[column])))
    if models:
        frame = frame.filter(pl.col("model").is_in(list(models)))
    if manifolds:
        frame = frame.filter(pl.col("manifold").is_in(list(manifolds)))
    if frame.is_empty():
        raise ConfigError(f"run {run_id} has no grid point of the models and manifolds asked for")
    return frame


def _run_points(
    source: Source,
    run_id: str,
    models: Sequence[str],
    manifolds: Sequence[str],
    note: Callable[[str], object],
) -> pl.DataFrame:
    """A run's grid points to plot; ConfigError when it has none."""

    frame = plotted_points(source, run_id)
    run = run_record(source, run_id)
    status = run.status if run else "unknown"
    if frame.is_empty():
        raise ConfigError(f"run {run_id} ({status}) has no grid points to plot: nothing was graded")
    if status == "running":
        note(f"run {run_id} is still running: the plots are partial")
    return _select(frame, run_id, models, manifolds)


def _base_points(
    source: Source, against: str, run_id: str, models: Sequence[str], manifolds: Sequence[str]
) -> tuple[str, pl.DataFrame]:
    """The base run of a comparison, filtered like the new one."""
    base_id = resolve_run(source, against)
    if base_id == run_id:
        raise ConfigError(f"--against {against!r} names run {run_id} itself: nothing to compare")

    frame = plotted_points(source, base_id)
    if frame.is_empty():
        raise ConfigError(f"run {base_id} (--against) has no grid points to compare")
    if models:
        frame = frame.filter(frame["model"].is_in(list(models)))
    if manifolds:
        frame = frame.filter(frame["manifold"].is_in(list(manifolds)))
    return base_id, frame
