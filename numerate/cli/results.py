"""Reading and maintaining results: `numerate report`, `db`, `regrade` and `cache clear`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from numerate.cli.app import app
from numerate.cli.common import (
    DB_HELP,
    check_format,
    fail,
    open_reader,
    print_report,
    results_db,
)
from numerate.kernel.errors import ConfigError, NumerateError

RUN_HELP = "Run id, a unique prefix of one, latest or previous."


@app.command()
def report(
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
    run_id: Annotated[
        str | None, typer.Option("--run", help=RUN_HELP + " Default: latest.")
    ] = None,
    output: Annotated[
        str, typer.Option("--format", help="table, csv, json or markdown.")
    ] = "table",
    points: Annotated[bool, typer.Option(help="Also show every grid point.")] = False,
    model: Annotated[
        list[str] | None, typer.Option(help="Only this model (repeat for several).")
    ] = None,
    manifold: Annotated[
        list[str] | None, typer.Option(help="Only this manifold (repeat for several).")
    ] = None,
) -> None:
    """Show a run's results: per model and per manifold, with 95% intervals.

    Never writes; reads while sweeps write the database (README, "Many users, one database")."""
    from numerate.report import check_filters, render, run_points, run_state
    from numerate.runs import resolve_run

    models, manifolds = model or [], manifold or []
    try:
        fmt = check_format(output)
        with open_reader(db) as reader:
            run_id = resolve_run(reader, run_id)
            check_filters(reader, run_id, models, manifolds)
            state = run_state(reader, run_id)
            if state:
                typer.echo(f"note: {state}", err=True)
            print_report(reader, run_id, fmt, models, manifolds)
            if points:
                frame = run_points(reader, run_id, models, manifolds)
                typer.echo(render(frame, fmt, title="grid points"), nl=False)
    except NumerateError as error:
        fail(error)


@app.command("db")
def db_command(
    path: Annotated[
        str | None,
        typer.Argument(help=DB_HELP),
    ] = None,
    sql: Annotated[
        str | None, typer.Argument(help="SQL to run (default: list the tables).")
    ] = None,
    output: Annotated[
        str, typer.Option("--format", help="table, csv, json or markdown.")
    ] = "table",
) -> None:
    """Query the results with SQL, read-only; without SQL, list the tables and views.

    Nothing can be written, and no file other than the database can be read (COPY, EXPORT,
    ATTACH and file functions are refused). Any DuckDB file can be opened, also while runs
    write it; a long query makes them wait (README, "Many users, one database")."""
    from numerate.report import render
    from numerate.store import queries

    try:
        fmt = check_format(output)
        with open_reader(path, numerate_schema=False) as reader:
            # the user's SQL, or the list of tables and views
            frame = reader.frame(sql) if sql else queries.tables(reader)
    except NumerateError as error:
        fail(error)
    typer.echo(render(frame, fmt), nl=False)


@app.command()
def regrade(
    run_id: Annotated[str, typer.Option("--run", help="The run to grade again.")],
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
) -> None:
    """Grade a stored run's answers again with the current graders.

    The answers stay as received; their outcomes and the run's aggregates are updated.
    """
    from numerate.regrade import regrade_run
    from numerate.store import Store, queries

    db = results_db(db)
    try:
        if not Path(db).exists():
            raise ConfigError(f"no results database at {db}")
        store = Store.open(db)
        if queries.run_record(store, run_id) is None:
            raise ConfigError(f"{db} has no run {run_id!r}")
        changes = regrade_run(store, run_id)
    except NumerateError as error:
        fail(error)
        return
    total = sum(changes.values())
    moved = {k: n for k, n in changes.items() if k[0] != k[1]}
    detail = ", ".join(f"{a} -> {b}: {n}" for (a, b), n in sorted(moved.items()))
    typer.echo(
        f"regraded {total} responses of {run_id}: {sum(moved.values())} outcome(s) changed"
        + (f" ({detail})" if detail else "")
    )


@app.command()
def upgrade(db: Annotated[str | None, typer.Option(help=DB_HELP)] = None) -> None:
    """Bring a results database to this numerate's schema (readers never write, so they ask
    for this); every row is kept."""
    from numerate.store import Store
    from numerate.store.schema import SCHEMA_VERSION

    db = results_db(db)
    try:
        if not Path(db).is_file():
            raise ConfigError(f"no results database at {db}")
        store = Store.open(db)
    except NumerateError as error:
        fail(error)
    found = store.found_version
    Store.close_all()
    if found == SCHEMA_VERSION:
        typer.echo(f"{db} already has schema version {SCHEMA_VERSION}")
    else:
        typer.echo(f"{db}: schema version {found} -> {SCHEMA_VERSION}, every row kept")


cache_app = typer.Typer(
    help="The stored answers that cache policy `reuse` and resumed runs read.",
    no_args_is_help=True,
)
app.add_typer(cache_app, name="cache")


@cache_app.command("clear")
def cache_clear(
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
    model: Annotated[
        str | None, typer.Option(help="Only answers of this endpoint model id.")
    ] = None,
    before: Annotated[
        str | None, typer.Option(help="Only answers stored before this date (YYYY-MM-DD).")
    ] = None,
) -> None:
    """Remove stored answers, so that no later run can reuse them.

    Graded responses keep their text: no result is lost.
    """
    from datetime import UTC, datetime

    from numerate.store import Store

    db = results_db(db)
    try:
        when = None
        if before is not None:
            try:
                when = datetime.fromisoformat(before)
            except ValueError:
                raise ConfigError(f"--before {before!r}: expected a date, YYYY-MM-DD") from None
            when = when if when.tzinfo else when.replace(tzinfo=UTC)
        if not Path(db).exists():
            raise ConfigError(f"no results database at {db}")
        removed = Store.open(db).clear_completions(model, when)
    except NumerateError as error:
        fail(error)
        return
    typer.echo(f"removed {removed} stored answer(s) from {db}")
