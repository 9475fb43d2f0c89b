"""`numerate db`: read-only SQL over a results database."""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from numerate.cli.app import app
from numerate.cli.common import (
    DB_HELP,
    FORMAT_OPTION,
    a_path,
    check_format,
    fail,
    note,
    open_reader,
    show,
)
from numerate.kernel.errors import ConfigError, NumerateError, first_line, shorten


@app.command("db")
def db_command(
    path: Annotated[
        str | None,
        typer.Argument(help=DB_HELP),
    ] = None,
    sql: Annotated[
        str | None, typer.Argument(help="SQL to run (default: list the tables).")
    ] = None,
    output: Annotated[str, FORMAT_OPTION] = "table",
    db: Annotated[
        str | None, typer.Option("--db", help="The database, as every other command takes it.")
    ] = None,
) -> None:
    """Query the results with SQL, read-only; without SQL, list the tables and views.

    Nothing can be written, and no file other than the database can be read: a query only
    (SELECT, FROM, WITH, VALUES, DESCRIBE, SHOW, SUMMARIZE); COPY, EXPORT, ATTACH, EXPLAIN,
    CHECKPOINT, file functions and functions that write are refused. Any DuckDB file can be
    opened, also while runs write it; a long query, or a long CSV, JSON or Markdown output,
    makes them wait (docs/sharing.md, "Many users, one database")."""
    from numerate.results.report import render, rendered_in_parts
    from numerate.store import queries
    from numerate.store.reader import any_cut

    written = [0]  # rows given to the output
    try:
        fmt = check_format(output)
        path, sql = _database_and_sql(path, sql, db)
        if path is not None:  # positional: not `--db` as results_db says
            a_path(path)  # blank or with a control character: refused
        if sql is not None and not sql.strip():
            raise ConfigError(f"SQL {sql!r}: give a query, or leave it out to list the tables")
        with open_reader(path, numerate_schema=False) as reader:
            if sql is None:  # the list of tables and views
                frame = queries.tables(reader)
            elif fmt == "table":  # its first rows, its texts cut: for a person
                frame = reader.printable_frame(sql, SHOWN_ROWS + 1, SHOWN_CHARS, SHOWN_COLUMNS + 1)
            else:  # every row, a batch at a time: for a file or a program
                frames = _counted(reader.printable_batches(sql), written)
                with contextlib.closing(frames) as batches:
                    for part in rendered_in_parts(batches, fmt, as_queried=True):
                        show(part)
                return
    except typer.BadParameter as error:
        fail(f"{'PATH' if db is None else '--db'} {error.message}")
    except NumerateError as error:
        if written[0]:  # met midway: what was written is not the whole result
            fail(f"{first_line(error)} (met after {written[0]:,} rows were written: the output "
                 "is incomplete)", error.exit_code)  # fmt: skip
        fail(error)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the query stops with the process
        from numerate.cli.process import PROCESS

        # at once: the query still runs in DuckDB's threads, and an orderly exit would wait
        PROCESS.stopped(close=lambda: None)  # for it (read-only: nothing is lost)
    if fmt == "table" and frame.height > SHOWN_ROWS:
        note(
            f"the first {SHOWN_ROWS:,} rows are shown, and more follow: --format csv, json or "
            "markdown writes every row (or give the query a LIMIT)"
        )
        frame = frame.head(SHOWN_ROWS)
    if fmt == "table" and frame.width > SHOWN_COLUMNS:
        note(
            f"the first {SHOWN_COLUMNS} columns are shown, and more follow: --format csv, json "
            "or markdown writes every one (or name the columns the query gives)"
        )
        frame = frame.select(frame.columns[:SHOWN_COLUMNS])
    if sql and fmt == "table" and any_cut(frame, SHOWN_CHARS):
        note(f"texts longer than {SHOWN_CHARS:,} characters are cut (...): --format csv or json "
             "writes them whole")  # fmt: skip
    show(render(frame, fmt, as_queried=True))  # the columns the SQL names, as it names them


def _counted(frames: Iterator[Any], written: list[int]) -> Generator[Any]:
    """`frames`, with the rows given so far in `written[0]`."""
    for frame in frames:
        written[0] += frame.height
        yield frame


SHOWN_ROWS = 10_000
"""Rows a table shows at most: a terminal table of a million rows took minutes and gigabytes
to lay out; CSV, JSON and Markdown (written to files) write every row."""


SHOWN_COLUMNS = 50
"""Columns a table shows at most: a table of 5,000 columns and 3,000 rows took 220 s and 11 GB
to lay out (a terminal shows a few dozen, each cut to a few characters)."""


SHOWN_CHARS = 1_000
"""Characters of a text a table shows at most (five lines of a 200-column table): a table of
10,000 answers of 100,000 characters took 111 s and 3.1 GB to show, cut 4.7 s and 209 MB."""


SQL_WORDS = frozenset({"select", "with", "from", "show", "describe", "summarize", "pragma",
                       "explain", "values", "table"})  # fmt: skip
"""The first words of the queries `numerate db` runs."""


def _reads_as_sql(text: str) -> bool:
    words = text.split(maxsplit=1)
    return bool(words) and words[0].lower() in SQL_WORDS and len(words) > 1


def _database_and_sql(
    path: str | None, sql: str | None, db: str | None
) -> tuple[str | None, str | None]:
    """The database and the SQL: `numerate db --db X "SELECT ..."` reads its one argument as
    the SQL (`--db` was "No such option", though every other command takes it), and so does
    `numerate db "SELECT ..."` when no file has that name: on the database every command
    takes without `--db` (NUMERATE_DB, or the default), as `numerate db` alone lists it."""
    if db is None:
        if path is not None and _reads_as_sql(path) and not Path(path).exists():
            if sql is None:
                return None, path
            raise ConfigError(
                f"PATH {shorten(repr(path), 100)}: no such database; it reads as SQL, which "
                "comes after the database: numerate db DATABASE SQL (or --db DATABASE SQL)"
            )
        return path, sql
    if sql is not None:
        raise ConfigError(f"--db {db} and PATH {path}: give the database once")
    return db, path
