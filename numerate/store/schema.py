"""The DuckDB schema, in one place: its version (the migrations are numerate.store.migrations),
the column lists the store writes, what the journal holds and what a run's Parquet shards hold.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from numerate.kernel.errors import EXIT_FAILED_FOR_NOW, NumerateError, first_line
from numerate.numgen.rows import DetectionRow, ImageRow, MetricsRow, TargetRow
from numerate.store.migrations import MIGRATIONS, SLIM_DATA
from numerate.store.rows import (
    CaseRow,
    CompletionRow,
    PointStopRow,
    Regrade,
    ResponseRow,
    RunPartRow,
    columns,
)

SCHEMA_VERSION = len(MIGRATIONS)

KEYS: dict[str, tuple[tuple[str, ...], str]] = {
    "runs": (("run_id",), "last"),
    "cases": (("case_id",), "first"),
    "completions": (("request_hash", "run_id"), "first"),
    "responses": (("run_id", "model", "case_id", "sample_index"), "last"),
    "run_models": (("run_id", "model"), "last"),
    "points": (("run_id", "model", "manifold", "point_key"), "last"),
    "point_stops": (("run_id", "model", "manifold", "point_key"), "last"),
    "summaries": (("level", "run_id", "model", "manifold"), "last"),
    "numgen_images": (("run_id", "prompt_id"), "last"),
    "numgen_detections": (("run_id", "prompt_id"), "last"),
    "numgen_metrics": (("run_id",), "last"),
    "ingested_shards": (("run_id",), "last"),
    "texts": (("sha", "part"), "first"),
}
"""What identifies a row of each table numerate writes again (a resumed run, a replayed
journal, an ingested shard), and which copy stays: "first" (cases and stored answers are
shared by runs and never change: a copy already stored stays) or "last" (a run's own rows: a
new copy replaces it). Writes keep it by matching on the key (numerate.store.tables.
insert_rows, one MERGE statement), not through a primary key: the tables with a row per
case or answer have none (an index the size of the data, rewritten at every checkpoint and
held in memory; a DuckLake table has none either; docs/schema.md, "Keys without indexes")."""

ID_BUCKET = "hash({})"
"""What a run's cases and completions are first matched on when its shards are exported: a
64-bit hash of the id. A semi join on the ids themselves holds every id of the run in memory,
and ran out of the writer's bound (numerate.store.writer.WRITER_MEMORY) exporting a run of a
million cases; ids that share a bucket with another row of the table are then matched whole
(`answered_rows`)."""


def answered_rows(table: str, key: str, bucket: str = ID_BUCKET) -> str:
    """The rows of `table` (cases, completions) that the run's answers name by `key`: exactly
    those, matched on the bucket of the key (`bucket`, a format string of it), and on the key
    itself only where rows of the table share a bucket."""
    bucketed = bucket.format(key)
    answered = f"SELECT {key} FROM responses WHERE run_id = $run"
    return (  # the shared buckets (a scan of the table's ids) found once, for both uses
        f"WITH shared AS MATERIALIZED (SELECT {bucketed} AS b FROM {table} GROUP BY ALL "
        f"HAVING min({key}) <> max({key})) "
        f"SELECT * FROM {table} WHERE {bucketed} IN (SELECT {bucketed} FROM ({answered})) "
        f"AND ({bucketed} NOT IN (SELECT b FROM shared) OR {key} IN "
        f"(SELECT {key} FROM ({answered}) WHERE {bucketed} IN (SELECT b FROM shared)))"
    )


def shard_tables(bucket: str = ID_BUCKET) -> dict[str, str]:
    """What a run exports as Parquet shards: one query per table, `$run` its id (ingesting
    one merges each table's rows as KEYS says)."""
    return {
        "runs": "SELECT * FROM runs WHERE run_id = $run",
        "cases": answered_rows("cases", "case_id", bucket),
        "completions": answered_rows("completions", "request_hash", bucket),
        "responses": "SELECT * FROM responses WHERE run_id = $run",
        "run_models": "SELECT * FROM run_models WHERE run_id = $run",
        "points": "SELECT * FROM points WHERE run_id = $run",
        "point_stops": "SELECT * FROM point_stops WHERE run_id = $run",
        "summaries": "SELECT * FROM summaries WHERE run_id = $run",
        "texts": "SELECT * FROM texts WHERE sha IN (SELECT raw_sha FROM responses WHERE "
        "run_id = $run UNION SELECT reasoning_sha FROM responses WHERE run_id = $run)",
    }


SHARD_TABLES = shard_tables()

SHARD_ROWS: dict[str, str] = {"cases": f'* REPLACE ({SLIM_DATA} AS "data")'}
"""A shard's rows of a table as this database stores them (what follows SELECT; `*` for the
tables not named): a case's `data` without the fields its columns hold, as shards published
before schema 14 did not store it."""

RUN_ENDED = "('finished', 'degraded', 'failed')"
"""The statuses of the runs that ended (not running, nor interrupted: those resume), as an SQL
list."""
NUMGEN_ENDED = "('finished', 'degraded')"
"""The statuses of the NumGen runs that ended with their metrics (those reports show), as an
SQL list."""
RUN_STATUSES = ("running", "finished", "degraded", "failed", "interrupted")
"""The statuses a run can have (docs/schema.md, `runs.status`)."""

OPTIONAL_SHARD_TABLES = frozenset({"run_models", "point_stops", "texts"})
"""Shard tables that runs published by earlier versions lack."""

COMPLETION_COLUMNS = columns(CompletionRow)
RESPONSE_COLUMNS = columns(ResponseRow)
CASE_COLUMNS = columns(CaseRow)
POINT_STOP_COLUMNS = columns(PointStopRow)
REGRADE_COLUMNS = columns(Regrade)
RUN_PART_COLUMNS = columns(RunPartRow)
IMAGE_COLUMNS = columns(ImageRow)
DETECTION_COLUMNS = columns(DetectionRow)
METRICS_COLUMNS = columns(MetricsRow)
TARGET_COLUMNS = columns(TargetRow)


JOURNALED: dict[str, tuple[str, ...]] = {
    "completions": COMPLETION_COLUMNS,
    "responses": RESPONSE_COLUMNS,
}
"""Tables whose rows wait in a process's journal (numerate.store.journal) until written, and
their columns; writing a row twice is harmless (KEYS)."""


class StoreError(NumerateError):
    """The results database cannot be used."""


class StoreFailedForNow(StoreError):
    """The results database cannot be used for now, though the command's input is good
    (DuckDB out of its memory bound, a full disk, held by another process too long): exit 3,
    and the same command goes on once it can."""

    exit_code = EXIT_FAILED_FOR_NOW


class DatabaseFault(StoreError):
    """A query of numerate's own failed in DuckDB: the database's fault (a view reading a file
    DuckDB refuses, a table damaged), not the request's (the viewer answers 500, not 400)."""


def now() -> datetime:
    return datetime.now(UTC)


MIGRATIONS_TABLE = (
    "CREATE TABLE schema_migrations (version INTEGER NOT NULL, description VARCHAR NOT NULL, "
    "applied_at TIMESTAMPTZ NOT NULL)"
)
"""The table that records the migrations a database has had."""

MAKE_TRIES = 5
"""Tries at making a new database's tables: two processes that start on a new lake at once
both try (nothing holds a lake the way a file is held), and the one whose transaction commits
second fails, then finds the tables made."""


def migrate(con: Any) -> int:
    """Bring the schema to SCHEMA_VERSION; returns the version found before (0: new). A new
    database gets today's schema at once. The caller holds a database file (DuckDB's lock),
    so two processes never migrate it at once: the second finds the work done; on a lake, the
    second to make its tables finds them made (MAKE_TRIES). A database that holds tables but
    not numerate's is refused, not filled with numerate's tables beside them."""
    import duckdb

    for attempt in range(MAKE_TRIES):
        tables = sorted(
            row[0]
            for row in con.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_catalog = current_database()"
            ).fetchall()
        )
        if tables and "schema_migrations" not in tables:
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise StoreError(
                f"a DuckDB database of something else (tables {shown}), not numerate's: "
                "give a new file or a numerate results database"
            )
        if tables:
            break
        try:
            _make(con)
            return 0
        except duckdb.Error as error:  # another process made them first (a lake)
            if attempt == MAKE_TRIES - 1:
                raise StoreError(f"cannot make numerate's tables: {first_line(error)}") from None
            time.sleep(0.05 * 2**attempt)
    # fetchall: duckdb 2.0 refuses other work on a connection whose result is not exhausted
    found = con.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchall()[0][0]
    if found > SCHEMA_VERSION:
        raise StoreError(
            f"the database has schema version {found}, newer than this numerate "
            f"({SCHEMA_VERSION}): upgrade numerate"
        )
    if found < 0:
        raise StoreError(no_version(found))
    _refuse_views_for_tables(con)
    replay(con, found)
    _refuse_changed_tables(con)
    return found


def _make(con: Any) -> None:
    """Today's schema in a new database, in one transaction, recorded as every migration."""
    with transaction(con):
        con.execute(MIGRATIONS_TABLE)
        for statement in current_schema():
            con.execute(statement)
        for version, (description, _) in enumerate(MIGRATIONS, start=1):
            con.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, description, now()]
            )


def no_version(found: int) -> str:
    """What a database whose schema_migrations records a version below 0 is: changed by hand
    (migration -3 would be the list's third from its end, run before the first)."""
    return (
        f"its schema_migrations table records schema version {found}, which no numerate "
        "writes: it was changed by hand; restore the file from a copy"
    )


def replay(con: Any, found: int) -> None:
    """Run the migrations after version `found`, each in a transaction."""
    import duckdb

    for version in range(found + 1, SCHEMA_VERSION + 1):
        description, sql = MIGRATIONS[version - 1]
        try:
            with transaction(con):
                con.execute(sql)
                con.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, description, now()]
                )
        except duckdb.Error as error:  # its tables already changed: a schema_migrations edited
            raise StoreError(
                f"its tables do not match its recorded schema version {found} (migration "
                f"{version} fails: {first_line(error)}); its schema_migrations table was "
                "changed by hand: restore the file from a copy"
            ) from None


_current: list[str] = []
_columns: dict[str, frozenset[str]] = {}
"""Each table's columns at SCHEMA_VERSION, made with `_current` (once a process)."""


def current_schema() -> list[str]:
    """The statements that make every table and view of SCHEMA_VERSION at once, as DuckDB
    states them after every migration ran on an empty database in memory (once a process).
    A lake cannot run the early migrations (primary keys), and a new file need not."""
    if not _current:
        import duckdb

        with duckdb.connect() as scratch:
            scratch.execute(MIGRATIONS_TABLE)
            replay(scratch, 0)
            made = scratch.execute(
                "SELECT sql FROM duckdb_tables() WHERE database_name = current_database() "
                "AND table_name <> 'schema_migrations' ORDER BY table_name"
            ).fetchall()
            made += scratch.execute(
                "SELECT sql FROM duckdb_views() WHERE database_name = current_database() "
                "AND NOT internal ORDER BY view_name"
            ).fetchall()
            _columns.update(_columns_of(scratch))
            _columns.pop("schema_migrations", None)
        _current.extend(statement for (statement,) in made)
    return list(_current)


TABLES = frozenset({
    "runs", "cases", "completions", "responses", "run_models", "points", "point_stops",
    "summaries", "ingested_shards", "numgen_runs", "numgen_images", "numgen_detections",
    "numgen_metrics", "numgen_targets",
})  # fmt: skip
"""numerate's tables (docs/schema.md): never a view of the same name."""

VIEWS = frozenset({"leaderboard", "numgen_leaderboard", "numgen_calibration"})
"""numerate's views (docs/schema.md): derived from the tables, so one dropped by hand is made
again by the next command that writes (`numerate upgrade`), and readers ask for that."""


def missing_views(con: Any) -> list[str]:
    """numerate's views that the database lacks (dropped by hand), sorted."""
    held = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database()"
    ).fetchall()
    return sorted(VIEWS - {name for (name,) in held})


def restore_views(con: Any) -> list[str]:
    """Make again the views of numerate's that were dropped (by hand: they hold no row), once
    `migrate` brought the schema up to date; returns their names. On a lake, another process
    that made them first is as good."""
    import duckdb

    missing = missing_views(con)
    if not missing:
        return []
    try:
        with transaction(con):
            for statement in current_schema():
                if statement.startswith("CREATE VIEW ") and _view_name(statement) in missing:
                    con.execute(statement)
    except duckdb.Error:
        if missing_views(con):
            raise
    return missing


def _view_name(statement: str) -> str:
    return statement.removeprefix("CREATE VIEW ").split(" ", 1)[0]


def _refuse_views_for_tables(con: Any) -> None:
    """StoreError when one of numerate's tables is a view (a database changed by hand: a view
    named `runs` over a file elsewhere was read by every writing command, with file access on,
    and `run` ended in DuckDB's `runs is not a table`)."""
    views = con.execute(
        "SELECT view_name FROM duckdb_views() WHERE database_name = current_database() "
        "AND NOT internal AND list_contains(?, view_name) ORDER BY 1",
        [sorted(TABLES)],
    ).fetchall()
    if views:
        raise StoreError(
            f"{views[0][0]} is a view where numerate keeps a table: the database was changed "
            "by hand; restore the file from a copy"
        )


def _refuse_changed_tables(con: Any) -> None:
    """StoreError when one of numerate's tables, or a column of one, is missing (a database
    changed by hand: `run` and `regrade` ended in DuckDB's traceback, and `upgrade` said it
    was up to date). Tables and columns of the user's own, beside numerate's, are left be."""
    problem = changed_tables(con)
    if problem:
        raise StoreError(problem)


def changed_tables(con: Any) -> str | None:
    """What is missing of numerate's tables and their columns, in the user's words; None when
    nothing is."""
    held = _columns_of(con)
    current_schema()  # what a database of SCHEMA_VERSION holds (_columns)
    for table, expected in sorted(_columns.items()):
        lacking = sorted(expected - held.get(table, set()))
        if lacking:
            what = (
                f"table {table} is missing"
                if table not in held
                else (f"table {table} lacks its column {lacking[0]}")
            )
            return (
                f"{what} (schema version {SCHEMA_VERSION} has it): the database was changed "
                "by hand; restore the file from a copy"
            )
    return None


def _columns_of(con: Any) -> dict[str, frozenset[str]]:
    """Each table of the database and its columns (views left out)."""
    rows = con.execute(
        "SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = "
        "current_database() AND table_name IN (SELECT table_name FROM duckdb_tables() "
        "WHERE database_name = current_database())"
    ).fetchall()
    held: dict[str, set[str]] = {}
    for table, column in rows:
        held.setdefault(table, set()).add(column)
    return {table: frozenset(columns) for table, columns in held.items()}


@contextlib.contextmanager
def transaction(con: Any) -> Iterator[None]:
    """BEGIN ... COMMIT around the block on a DuckDB connection; ROLLBACK when it raises. A
    ROLLBACK that fails too (a lake whose PostgreSQL was lost: "Failed to execute query
    ROLLBACK") leaves the block's own error to say why, not its own."""
    import duckdb

    con.execute("BEGIN TRANSACTION")
    try:
        yield
    except BaseException:
        with contextlib.suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
