"""`numerate runs`: the runs a results database holds, newest first."""

from __future__ import annotations

from typing import Annotated

import typer

from numerate.cli.app import app
from numerate.cli.common import (
    DB_OPTION,
    FORMAT_OPTION,
    check_format,
    fail,
    open_reader,
    results_db,
    show,
)
from numerate.kernel.errors import NumerateError


@app.command("runs")
def list_runs_command(
    db: Annotated[str | None, DB_OPTION] = None,
    sweep: Annotated[str | None, typer.Option(help="Only the runs of this sweep.")] = None,
    limit: Annotated[int, typer.Option(help="Show at most this many runs.")] = 20,
    output: Annotated[str, FORMAT_OPTION] = "table",
) -> None:
    """List the runs, newest first: id, sweep, models, status, times and answers stored.

    A run recorded running whose process is gone (killed, its machine down) is listed
    stopped: the same command resumes it. Never writes; reads while sweeps write the database
    (docs/sharing.md, "Many users, one database")."""
    from numerate.results.report import render
    from numerate.results.runs import check_known_sweep, list_runs, numgen_runs_elsewhere

    try:
        fmt = check_format(output)
        with open_reader(db) as reader:
            frame = list_runs(reader, limit=limit, sweep=sweep)
            check_known_sweep(reader, sweep)  # a typo listed nothing
            elsewhere = "" if sweep or not frame.is_empty() else numgen_runs_elsewhere(reader)
    except NumerateError as error:
        fail(error)
    if frame.is_empty() and fmt in ("table", "markdown"):
        scope = f" of sweep {sweep!r}" if sweep else ""
        typer.echo(f"{results_db(db)} holds no runs{scope}{elsewhere}", err=True)
        return
    show(render(frame, fmt))
