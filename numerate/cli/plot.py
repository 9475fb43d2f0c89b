"""`numerate plot`: a run's difficulty curves and heatmaps, or two runs compared, as a PNG or a
self-contained HTML page (numerate.figures.plots draws them)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from numerate.cli.app import app
from numerate.cli.common import (
    DB_HELP,
    check_output,
    fail,
    open_reader,
    path_option,
    write_output,
)
from numerate.kernel.errors import ConfigError, NumerateError
from numerate.kernel.files import slug

if TYPE_CHECKING:
    import polars as pl

    from numerate.figures.plots import Kind
    from numerate.store.reader import Reader

RUN_HELP = "An id, a unique prefix of one, latest or previous."


def _check_kind(kind: str) -> Kind:
    from numerate.figures.plots import KINDS

    for known in KINDS:
        if kind == known:
            return known
    raise ConfigError(f"--kind {kind!r}: choose {', '.join(KINDS[:-1])} or {KINDS[-1]}")


def _select(
    frame: pl.DataFrame, run_id: str, models: Sequence[str], manifolds: Sequence[str]
) -> pl.DataFrame:
    """The rows of the given models and manifolds (all when none are given); ConfigError
    naming a model or manifold the run does not have, and the ones it has."""
    import polars as pl

    from numerate.results.report import require_known

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
    reader: Reader, run_id: str, models: Sequence[str], manifolds: Sequence[str]
) -> pl.DataFrame:
    """A run's grid points to plot; ConfigError when it has none."""
    from numerate.results.live import plotted_points
    from numerate.store.queries import check_counts, run_record

    frame = plotted_points(reader, run_id)
    check_counts(frame, run_id)  # a point changed by hand: one line, not a traceback
    run = run_record(reader, run_id)
    status = run.status if run else "unknown"
    if frame.is_empty():
        raise ConfigError(f"run {run_id} ({status}) has no grid points to plot: nothing was graded")
    if status == "running":
        typer.echo(f"note: run {run_id} is still running: the plots are partial", err=True)
    return _select(frame, run_id, models, manifolds)


def _base_points(
    reader: Reader, against: str, run_id: str, models: Sequence[str], manifolds: Sequence[str]
) -> tuple[str, pl.DataFrame]:
    """The base run of a comparison, filtered like the new one."""
    from numerate.results.runs import resolve_run

    base_id = resolve_run(reader, against)
    if base_id == run_id:
        raise ConfigError(f"--against {against!r} names run {run_id} itself: nothing to compare")
    from numerate.results.live import plotted_points
    from numerate.store.queries import check_counts

    frame = plotted_points(reader, base_id)
    check_counts(frame, base_id)
    if frame.is_empty():
        raise ConfigError(f"run {base_id} (--against) has no grid points to compare")
    if models:
        frame = frame.filter(frame["model"].is_in(list(models)))
    if manifolds:
        frame = frame.filter(frame["manifold"].is_in(list(manifolds)))
    return base_id, frame


def _note_left_out(points: pl.DataFrame, x: str | None, kind: Kind) -> None:
    """With --x, say which manifolds the curves leave out for not having that parameter."""
    from numerate.figures.prepare import grid_parameters

    if x is None or kind not in ("curves", "all"):
        return
    grids = grid_parameters(points)
    missing = [manifold for manifold, grid in grids.items() if x not in grid]
    if missing and len(missing) < len(grids):
        typer.echo(
            f"note: no grid parameter {x!r} in {', '.join(missing)}: left out of the curves",
            err=True,
        )


def _read(
    db: str | None, run: str, against: str | None, models: Sequence[str], manifolds: Sequence[str]
) -> dict[str, Any]:
    """The run's points and, with `against`, the base run's: the arguments of render_run."""
    from numerate.results.runs import resolve_run

    with open_reader(db) as reader:
        run_id = resolve_run(reader, run)
        read: dict[str, Any] = {
            "run_id": run_id,
            "points": _run_points(reader, run_id, models, manifolds),
        }
        if against is not None:
            read["against_id"], read["against"] = _base_points(
                reader, against, run_id, models, manifolds
            )
    return read


@app.command()
def plot(
    run: Annotated[str, typer.Argument(help=f"The run to plot. {RUN_HELP}")] = "latest",
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
    x: Annotated[
        str | None,
        typer.Option(
            "--x",
            help="Grid parameter along the curves' x axis (default: per "
            "manifold, the one with most values).",
        ),
    ] = None,
    kind: Annotated[
        str, typer.Option(help="curves, heatmap, all (both) or compare (needs --against).")
    ] = "all",
    against: Annotated[
        str | None, typer.Option(help=f"Also compare with this run, the base. {RUN_HELP}")
    ] = None,
    model: Annotated[
        list[str] | None, typer.Option("--model", help="Only this model (repeatable).")
    ] = None,
    manifold: Annotated[
        list[str] | None, typer.Option("--manifold", help="Only this manifold (repeatable).")
    ] = None,
    out: Annotated[
        Path | None,
        path_option("File to write, .png or .html (default: plot-<run id>.png).", "--out"),
    ] = None,
) -> None:
    """Plot a run: difficulty curves with 95% intervals, heatmaps, comparisons.

    Accuracy against a difficulty parameter per manifold and model, a heatmap of every grid
    point, and with --against a comparison with another run. Prints the path written."""
    from numerate.figures.plots import OutputFormat, output_format, render_run

    try:
        check_output("--out", out)  # a folder's name first: its missing suffix is no news
        fmt: OutputFormat = output_format(out) if out is not None else "png"
        chosen = _check_kind(kind)
        if chosen == "compare" and against is None:
            raise ConfigError("--kind compare needs --against OTHER_RUN")
        if x is not None and chosen not in ("curves", "all"):  # it changed nothing
            raise ConfigError(
                f"--x {x!r} chooses the curves' x axis, and --kind {chosen} draws no curves "
                "(--kind curves or all draws them)"
            )
        read = _read(db, run, against, model or [], manifold or [])
        _note_left_out(read["points"], x, chosen)
        content = render_run(fmt=fmt, kind=chosen, x=x, **read)
    except NumerateError as error:
        fail(error)
    path = Path(out if out is not None else f"plot-{slug(read['run_id'])}.png")
    write_output(path, content)
    typer.echo(str(path))
