"""`numerate report`: a run's results table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from numerate.cli.app import app
from numerate.cli.common import (
    DB_OPTION,
    FORMAT_OPTION,
    RUN_HELP,
    check_format,
    fail,
    note,
    open_reader,
    show,
)
from numerate.kernel.errors import NumerateError

if TYPE_CHECKING:
    from numerate.results.report import Table


@app.command()
def report(
    db: Annotated[str | None, DB_OPTION] = None,
    run_id: Annotated[
        str | None, typer.Option("--run", help=RUN_HELP + " Default: latest.")
    ] = None,
    output: Annotated[str, FORMAT_OPTION] = "table",
    points: Annotated[bool, typer.Option(help="Also show every grid point.")] = False,
    tokens: Annotated[bool, typer.Option(help="Also show token efficiency and budget.")] = False,
    tiers: Annotated[bool, typer.Option(help="Also show each model's score and tier.")] = False,
    model: Annotated[
        list[str] | None, typer.Option(help="Only this model (repeat for several).")
    ] = None,
    manifold: Annotated[
        list[str] | None, typer.Option(help="Only this manifold (repeat for several).")
    ] = None,
) -> None:
    """Show a run's results: per model and per manifold, with 95% intervals.

    Never writes; reads while sweeps write the database (docs/sharing.md, "Many users, one
    database")."""
    from numerate.results.report import (
        Table,
        one_table,
        render_tables,
        report_state,
        run_points,
        summary_table,
        tier_tables,
    )
    from numerate.results.runs import resolve_run
    from numerate.results.tokens import token_tables

    models, manifolds = model or [], manifold or []
    try:
        fmt = check_format(output)
        asked = [name for name, given in (("--points", points), ("--tokens", tokens),
                                          ("--tiers", tiers)) if given]  # fmt: skip
        one_table(fmt, asked)
        with open_reader(db) as reader:
            run_id = resolve_run(reader, run_id)
            state = report_state(reader, run_id, models, manifolds)
            if state:
                note(state)
            tables = [summary_table(reader, run_id, models, manifolds)]
            if points:
                frame = run_points(reader, run_id, models, manifolds)
                tables.append(Table("points", "grid points", frame))
            if tokens:
                tables += token_tables(reader, run_id, points)
            if tiers:
                scored = tier_tables(reader, run_id, fmt)
                if not scored:
                    note(f"run {run_id} has no scored answer: no score and no tier")
                elif models or manifolds:  # a tier depends on every model beside it
                    note("scores and tiers rank every model and manifold of the run: --model "
                         "and --manifold narrow the other tables")  # fmt: skip
                tables += scored
            if fmt == "table":  # csv, json, markdown: every row
                tables = [_first_rows(table, len(tables) > 1) for table in tables]
            show(render_tables(tables, fmt, keyed=bool(asked)))
    except NumerateError as error:
        fail(error)


def _first_rows(table: Table, several: bool) -> Table:
    """`table` with its first SHOWN_ROWS rows, saying so when it has more (`--points` of
    200,000 grid points took 458 s and 2.4 GB to lay out), and which format writes them all
    (CSV holds one table: not with `several`)."""
    from numerate.cli.db import SHOWN_ROWS

    if table.frame.height <= SHOWN_ROWS:
        return table
    note(
        f"{table.title}: the first {SHOWN_ROWS:,} of {table.frame.height:,} rows are shown: "
        f"--format {'json' if several else 'csv, json'} or markdown writes every row"
    )
    return table._replace(frame=table.frame.head(SHOWN_ROWS))
