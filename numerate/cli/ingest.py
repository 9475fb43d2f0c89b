"""`numerate ingest`: load the Parquet shards of runs made elsewhere into one database."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from numerate.cli.app import app
from numerate.cli.common import DB_OPTION, fail, results_db, warn
from numerate.kernel.errors import NumerateError, some_of

SOURCE = "Results location (folder or fsspec URL), or a results database file to move in."


@app.command()
def ingest(
    results_dir: Annotated[str, typer.Argument(help=SOURCE)],
    db: Annotated[str | None, DB_OPTION] = None,
) -> None:
    """Load runs made elsewhere: workers' Parquet shards (complete, new), or a database file's."""
    from numerate.cli.process import PROCESS

    PROCESS.if_stopped_say(_what_was_loaded("", []))
    from numerate.grading.verdict import EXIT_RUN_FAILED
    from numerate.kernel import stopping
    from numerate.results.regrade import ingest_graded
    from numerate.store import Store, shards

    db = results_db(db)
    if _same_file(results_dir, db):  # each run "made in it already": 0 loaded, exit 0
        fail(f"{results_dir} is the results database itself (--db {db}): give the database "
             "file or the folder of shards the runs come from")  # fmt: skip
    started = datetime.now(UTC)
    try:
        with shards.as_location(results_dir) as location:  # a database file: its runs'
            shards.require_complete_runs(location.folder)  # shards; before the database is made
            of_a_file = location.folder != results_dir
            done = ingest_graded(store := Store.open(db), location.folder)
            done.skipped[:0] = location.refused
            discarded = not done.loaded and done.skipped and store.discard_if_unused()
    except KeyboardInterrupt:  # a bare `terminated` beside a database holding loaded runs
        _stopped(db, started)
    except Exception as error:
        if stopping.asked():  # the stop, said as another error: DuckDB's bindings raise
            _stopped(db, started)  # `RuntimeError: Query interrupted` (then said "no run
        if not isinstance(error, NumerateError):  # was loaded" beside one it had loaded)
            raise
        fail(error)
    loaded = done.loaded
    PROCESS.if_stopped_say(_what_was_loaded(db, loaded))  # stopped as it says so
    if not discarded:
        typer.echo(f"ingested {len(loaded)} run(s) into {db}" + "".join(f"\n  {r}" for r in loaded))
    if done.present:
        typer.echo(f"{len(done.present)} run(s) made in {db} already: {some_of(done.present, 10)}")
    if done.before:
        typer.echo(f"{len(done.before)} run(s) loaded by an earlier ingest: "
                   f"{some_of(done.before, 10)}")  # fmt: skip
    if location.numgen:
        typer.echo(shards.numgen_not_moved(location.numgen))
    if done.unfinished:
        warn(shards.unfinished_note(results_dir, done.unfinished))
    for run_id, reason in done.skipped:
        warn(f"skipped run {run_id}: {shards.in_its_tables(reason) if of_a_file else reason}")
    if done.skipped:
        nothing = f"; nothing was loaded, and {db} was not made" if discarded else ""
        then = (
            f"they stay in {results_dir}, unchanged"
            if of_a_file
            else "fix or remove their shards and ingest again"
        )
        fail(f"{len(done.skipped)} run(s) skipped{nothing}; {then}", EXIT_RUN_FAILED)


def _same_file(source: str, db: str) -> bool:
    """Whether the location to ingest is the database file itself (through links too)."""
    try:
        return Path(source).is_file() and Path(source).samefile(db)
    except OSError:  # a URL, a name too long, the database not made yet
        return False


def _stopped(db: str, started: datetime) -> NoReturn:
    """Leave an ingest a signal stopped, saying which runs it had loaded (each one whole, in
    a transaction of its own): the same command loads the rest."""
    from numerate.cli.process import PROCESS
    from numerate.store import Store, StoreError, access

    access.hurry(2)  # within the 5 s every command stops in
    loaded: list[str] | None = None
    with contextlib.suppress(StoreError):
        loaded = Store.open(db).ingested_since(started)
    PROCESS.stopped_saying(_what_was_loaded(db, loaded))


def _what_was_loaded(db: str, loaded: list[str] | None) -> str:
    """What a stopped ingest says of the runs it had loaded (None: it could not look)."""
    if loaded is None:
        return (f"the runs loaded before the stop stay in {db}, each whole; run the same "
                "command again to load the rest")  # fmt: skip
    if not loaded:
        return "no run was loaded; run the same command again to load them"
    shown = ", ".join(loaded[:5]) + (", ..." if len(loaded) > 5 else "")
    return (
        f"{len(loaded)} run(s) were loaded into {db} ({shown}); run the same command again to "
        "load the rest"
    )
