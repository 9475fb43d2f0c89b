"""Reading and maintaining results: `numerate report`, `db`, `regrade` and `cache clear`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kernel.errors import ConfigError, NumerateError
from numerate.cli.app import app
from numerate.cli.common import DB_HELP, check_format, fail, print_report, results_db


@app.command()
def report(
    db: Annotated[str | None, typer.Option(help=DB_HELP)] = None,
    run_id: Annotated[
        str | None, typer.Option("--run", help="Run id (default: the latest run).")
    ] = None,
    output: Annotated[
        str, typer.Option("--format", help="table, csv, json or markdown.")
    ] = "table",
    points: Annotated[bool, typer.Option(help="Also show every grid point.")] = False,
) -> None:
    """Show a run's results: per model and per manifold, with 95% intervals."""
    from numerate.report import latest_run, render
    from numerate.store import Store

    db = results_db(db)
    try:
        fmt = check_format(output)
        if not Path(db).exists():
            raise ConfigError(f"no results database at {db} (run `numerate run` first)")
        store = Store.open(db)
        run_id = run_id or latest_run(store)
        if run_id is None:
            raise ConfigError(f"{db} holds no runs yet")
        if not store.query("SELECT 1 FROM runs WHERE run_id = ?", [run_id]):
            raise ConfigError(f"{db} has no run {run_id!r}")
    except NumerateError as error:
        fail(str(error))
        return
    print_report(store, run_id, fmt)
    if points:
        frame = store.frame(
            "SELECT model, manifold, point_key, n, accuracy, ci_low, ci_high, chance_adjusted, "
            "unparsed_rate, truncation_rate, error_rate FROM points WHERE run_id = ? "
            "ORDER BY model, manifold, point_key",
            [run_id],
        )
        typer.echo(render(frame, fmt, title="grid points"), nl=False)


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
    """Query the results with SQL (read-only); without SQL, list the tables and views."""
    import duckdb

    from numerate.report import render

    path = results_db(path)
    try:
        fmt = check_format(output)
        if not Path(path).exists():
            raise ConfigError(f"no results database at {path}")
        con = duckdb.connect(path, read_only=True)
    except NumerateError as error:
        fail(str(error))
        return
    except duckdb.Error as error:
        fail(f"cannot open {path}: {error}")
        return
    query = sql or (
        "SELECT table_name AS name, table_type AS kind FROM information_schema.tables "
        "ORDER BY table_type, table_name"
    )
    try:
        frame = con.sql(query).pl()  # duckdb 2.0: only relations have .pl()
    except duckdb.Error as error:
        fail(str(error).splitlines()[0])
        return
    finally:
        con.close()
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
    from numerate.store import Store

    db = results_db(db)
    try:
        if not Path(db).exists():
            raise ConfigError(f"no results database at {db}")
        store = Store.open(db)
        if not store.query("SELECT 1 FROM runs WHERE run_id = ?", [run_id]):
            raise ConfigError(f"{db} has no run {run_id!r}")
        changes = regrade_run(store, run_id)
    except NumerateError as error:
        fail(str(error))
        return
    total = sum(changes.values())
    moved = {k: n for k, n in changes.items() if k[0] != k[1]}
    detail = ", ".join(f"{a} -> {b}: {n}" for (a, b), n in sorted(moved.items()))
    typer.echo(
        f"regraded {total} responses of {run_id}: {sum(moved.values())} outcome(s) changed"
        + (f" ({detail})" if detail else "")
    )


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
        fail(str(error))
        return
    typer.echo(f"removed {removed} stored answer(s) from {db}")
