"""`numerate plot`: a run's difficulty curves and heatmaps, or two runs compared, as a PNG or a
self-contained HTML page (numerate.figures.plots draws them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from numerate.cli.app import app
from numerate.cli.common import (
    DB_OPTION,
    RUN_HELP,
    check_output,
    fail,
    note,
    open_reader,
    path_option,
    write_output,
)
from numerate.kernel.errors import ConfigError, NumerateError
from numerate.kernel.files import slug

if TYPE_CHECKING:
    import polars as pl

    from numerate.figures.plots import Kind


def _check_kind(kind: str) -> Kind:
    from numerate.figures.plots import KINDS

    for known in KINDS:
        if kind == known:
            return known
    raise ConfigError(f"--kind {kind!r}: choose {', '.join(KINDS[:-1])} or {KINDS[-1]}")


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


@app.command()
def plot(
    run: Annotated[str, typer.Argument(help=f"The run to plot. {RUN_HELP}")] = "latest",
    db: Annotated[str | None, DB_OPTION] = None,
    x: Annotated[
        str | None,
        typer.Option(
            "--x",
            help="Grid parameter along the curves' x axis (default: per "
            "manifold, the one with most values).",
        ),
    ] = None,
    kind: Annotated[
        str, typer.Option(help="curves, heatmap, budget (tokens), all or compare (--against).")
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
    """Plot a run: difficulty curves with 95% intervals, heatmaps, token budgets, comparisons.

    Accuracy against a difficulty parameter per manifold and model, a heatmap of every grid
    point, the token budget (cases still without an answer as tokens grow), and with --against
    a comparison with another run. Prints the path written."""
    from numerate.figures.plots import OutputFormat, output_format, render_run
    from numerate.results.plotted import points_to_plot

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
        with open_reader(db) as reader:
            read = points_to_plot(reader, run, against, model or [], manifold or [], note,
                                  budgets=chosen in ("budget", "all"))  # fmt: skip
        _note_left_out(read["points"], x, chosen)
        content = render_run(fmt=fmt, kind=chosen, x=x, **read)
    except NumerateError as error:
        fail(error)
    path = Path(out if out is not None else f"plot-{slug(read['run_id'])}.png")
    write_output(path, content)
    typer.echo(str(path))
