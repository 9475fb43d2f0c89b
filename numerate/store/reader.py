"""Reading the results without writing: `report`, `db`, `runs`, `compare` and `plot`.

A reader's connection is read-only and cannot touch any file outside the database (DuckDB's
`enable_external_access = false`, locked): no `COPY ... TO`, `EXPORT DATABASE`, `read_text`,
`ATTACH` or extension install.

Writers hold the file only for short sessions (numerate.store.writer), so a reader opens the
database itself, waiting (bounded, visibly: numerate.store.access) while a writer has it, and
sees every answer graded more than a few seconds ago. A reader holds the file while it is open:
open one for a command, not for an afternoon; one that reads for long calls `let_writers_in`
between pieces of its work.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import queue
import re
import shlex
import struct
import threading
import time
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numerate.kernel.errors import ConfigError, first_line
from numerate.kernel.files import is_duckdb_database, link_into_nowhere, looks_like_duckdb
from numerate.store import access, lake
from numerate.store.access import lock_timeout_s
from numerate.store.duckdb_words import (
    file_fault,
    is_corrupt,
    is_cut_short_at_open,
    is_interrupted,
    sql_literal,
)
from numerate.store.journal import live_owners
from numerate.store.schema import (
    SCHEMA_VERSION,
    DatabaseFault,
    changed_tables,
    missing_views,
    no_version,
)

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

__all__ = ["Reader", "any_cut"]

# Settings of every reader connection: nothing outside the database file can be reached.
# No folder to spill to either: DuckDB lets a connection read its spill folder, `<db>.tmp`
# beside the file or `.tmp` in the working directory, whatever a link there points to.
READ_ONLY_CONFIG = {"enable_external_access": False, "lock_configuration": True,
                    "temp_directory": "", "autoinstall_known_extensions": False,
                    "autoload_known_extensions": False}  # fmt: skip


QUERY = "SELECT"
"""The one statement type (DuckDB's) a reader runs of the user's SQL (`printable_frame`):
SELECT is also FROM, WITH, VALUES, TABLE, DESCRIBE, SHOW, SUMMARIZE and the PRAGMAs that
read (`table_info`); others are refused (COPY, EXPORT, CHECKPOINT, CALL, SET, CREATE, ...:
a lake's reader may read its data folder, and a COPY there replaced a data file, a
CHECKPOINT wrote files no snapshot records), EXPLAIN too, since EXPLAIN ANALYZE runs any
statement (`EXPLAIN ANALYZE COPY ... TO` wrote its file)."""

READING = frozenset({
    # DuckDB's own: its catalog, settings and logs as tables, series, files read (a file
    # database's reader may read no file, a lake's its data folder: READ_ONLY_CONFIG)
    "duckdb_approx_database_count", "duckdb_columns", "duckdb_connection_count",
    "duckdb_constraints", "duckdb_coordinate_systems", "duckdb_databases",
    "duckdb_dependencies", "duckdb_extensions", "duckdb_external_file_cache",
    "duckdb_functions", "duckdb_indexes", "duckdb_keywords", "duckdb_log_contexts",
    "duckdb_logs", "duckdb_logs_parsed", "duckdb_memory", "duckdb_optimizers",
    "duckdb_prepared_statements", "duckdb_profiling_settings", "duckdb_schemas",
    "duckdb_secret_types", "duckdb_secrets", "duckdb_sequences", "duckdb_settings",
    "duckdb_table_sample", "duckdb_tables", "duckdb_temporary_files", "duckdb_types",
    "duckdb_variables", "duckdb_views", "pragma_collations", "pragma_database_size",
    "pragma_metadata_info", "pragma_platform", "pragma_show", "pragma_storage_info",
    "pragma_table_info", "pragma_user_agent", "pragma_version", "which_secret",
    "generate_series", "range", "repeat", "repeat_row", "unnest", "json_each", "json_tree",
    "histogram", "histogram_values", "icu_calendar_names", "pg_timezone_names", "summary",
    "test_all_types", "test_vector_types", "glob", "sniff_csv", "read_blob", "read_text",
    "read_csv", "read_csv_auto", "read_json", "read_json_auto", "read_json_objects",
    "read_json_objects_auto", "read_ndjson", "read_ndjson_auto", "read_ndjson_objects",
    "read_parquet", "parquet_scan", "parquet_metadata", "parquet_file_metadata",
    "parquet_full_metadata", "parquet_kv_metadata", "parquet_schema", "parquet_bloom_probe",
    "read_duckdb",
    # DuckLake's that read a lake: its snapshots, settings, files and changes
    "ducklake_snapshots", "ducklake_current_snapshot", "ducklake_last_committed_snapshot",
    "ducklake_table_info", "ducklake_list_files", "ducklake_settings", "ducklake_options",
    "ducklake_table_changes", "ducklake_table_insertions", "ducklake_table_deletions",
})  # fmt: skip
"""The table functions the user's SQL may call (`Reader.printable_frame`): those known to
only read. The others do more, and a read-only connection does not stop them all: DuckDB's
`checkpoint()` and DuckLake's maintenance (`ducklake_merge_adjacent_files`, ...) wrote
Parquet files in a lake's data folder before their commit failed, `enable_logging` wrote its
logs there (a lake's reader may write where it may read), `query()` and
`json_execute_serialized_sql()` run SQL given as text, PostgreSQL's (`postgres_query`,
`postgres_scan`, ...) reach any PostgreSQL server with the lake's role. So a table function
is refused unless it is here, and one a later DuckDB or extension adds is refused until it
is known to only read (tests/store/test_reader.py classifies every one DuckDB and a lake's
extensions have). Scalar and aggregate functions compute; none is refused."""


def called(con: Any, sql: str) -> set[str] | None:
    """The names of the functions the query `sql` (one statement of SELECT's type, a
    PRAGMA's as DuckDB rewrote it: `extract_statements`) calls, in lower case (DuckDB's
    names are), as DuckDB's own parser finds them: not a name in a string, a comment, a
    common table expression's or an alias's column list. None when DuckDB cannot tell."""
    serialized = con.execute("SELECT json_serialize_sql(?::VARCHAR)", [sql]).fetchone()[0]
    try:
        parsed = json.loads(serialized)
    except RecursionError:  # a query nested some 500 deep (DuckDB takes 1,000)
        return None
    if parsed.get("error"):
        return None
    names: set[str] = set()
    found: list[Any] = [parsed]
    while found:
        item = found.pop()
        if isinstance(item, dict):
            if isinstance(item.get("function_name"), str):
                names.add(item["function_name"].lower())
            found.extend(item.values())
        elif isinstance(item, list):
            found.extend(item)
    return names


PRINTED_ROWS = 2_000
"""Rows of a frame of the user's query that `numerate db` writes whole (CSV, JSON, Markdown:
`Reader.printable_batches`), at most; batches of 1,000 to 50,000 rows wrote a million short
rows in about the same time."""

PRINTED_BYTES = 16 * 2**20
"""Bytes of Arrow data of such a frame, about: 2,000 answers of 262,144 characters are
1.5 GB, and 13.5 GB once written as JSON, as Python holds its text."""

READ_ROWS = 256
"""Rows DuckDB hands over at a time, joined or cut into frames (`_frames`): 64 took twice as
long as 2,000 over a million short rows, 256 as long."""

_END = object()
"""What follows a query's last batch (`Reader.printable_batches`)."""


CUT_MARK = "..."
"""What ends a text `Reader.printable_frame` cut: ASCII, since a table (rich) measures a text
with any other character a character at a time (`…` made a table of 10,000 cut texts take
34 s instead of 4.7)."""


def any_cut(frame: pl.DataFrame, cut: int) -> bool:
    """Whether a text of `frame` (from `Reader.printable_frame` with `cut`) was cut."""
    import polars as pl

    texts = [c for c, kind in frame.schema.items() if kind == pl.String]
    longest = cut + len(CUT_MARK)
    return bool(
        frame.select(
            pl.any_horizontal(
                [(pl.col(c).str.len_chars() == longest) & pl.col(c).str.ends_with(CUT_MARK)
                 for c in texts] or [pl.lit(False)]
            ).any()
        ).item()
    )  # fmt: skip


NATIVE_TYPES = frozenset(
    ("boolean", "tinyint", "smallint", "integer", "bigint", "utinyint", "usmallint", "uinteger",
     "ubigint", "float", "double", "decimal", "varchar")
)  # fmt: skip
"""DuckDB types (DuckDBPyType.id) that polars converts and every output format shows as they
are; `printable_frame` shows the others as text."""


def _streamed(batches: Any) -> Iterator[pa.RecordBatch]:
    """The batches of a query's Arrow reader. An error DuckDB meets past the first batches
    (`error()` at a row, a value it cannot cast) reaches Python through Arrow's stream as an
    OSError holding DuckDB's message: it is DuckDB's error, said as `Reader._user_query`
    says those."""
    import duckdb

    try:
        yield from batches
    except OSError as error:
        raise duckdb.Error(str(error)) from None


def _frames(relation: Any, rows: int, budget: int) -> Iterator[pl.DataFrame]:
    """A relation's rows as polars frames of at most `rows` rows and about `budget` bytes of
    Arrow data (more only for a single row larger than that): read READ_ROWS at a time, a
    batch larger than the budget cut, small ones joined. At least one frame, with the
    columns."""
    import polars as pl
    import pyarrow as pa

    batches = relation.to_arrow_reader(min(rows, READ_ROWS))
    held: list[pa.RecordBatch] = []
    count = size = 0
    given = False
    for batch in _streamed(batches):
        per_row = max(1, batch.nbytes // max(1, batch.num_rows))
        start = 0
        while start < batch.num_rows:
            taken = max(1, min(batch.num_rows - start, rows - count, (budget - size) // per_row))
            held.append(batch.slice(start, taken))
            start, count, size = start + taken, count + taken, size + taken * per_row
            if count >= rows or size >= budget:
                yield pl.DataFrame(pa.Table.from_batches(held, schema=batches.schema))
                held, count, size, given = [], 0, 0, True
    if held or not given:
        yield pl.DataFrame(pa.Table.from_batches(held, schema=batches.schema))


def _unique(names: Sequence[str]) -> list[str]:
    """A result's column names, each repeat of one before it suffixed `_1`, `_2`, ... (the
    `select *` of a join holds `run_id` twice; a frame cannot, and a CSV's reader would
    take the last for both)."""
    taken: set[str] = set()
    unique = []
    for name in names:
        named, n = name, 0
        while named in taken:
            n += 1
            named = f"{name}_{n}"
        taken.add(named)
        unique.append(named)
    return unique


def _connect(path: str) -> Any:
    """A read-only connection, once the processes that waited to write `path` have had their
    turn (numerate.store.access.let_go_first, within NUMERATE_LOCK_TIMEOUT); a lake's
    snapshot, which no writer holds."""
    if lake.is_lake(path):
        return lake.read_only(path)
    access.let_go_first(path, "write", lock_timeout_s())
    return access.connect(path, read_only=True, config=READ_ONLY_CONFIG)


def existing_database(path: str) -> None:
    """ConfigError, in the user's words, unless `path` is an existing regular file: a folder, a
    device, a pipe or socket, a missing file (or one a run is only starting to write) each say
    so (a command that reads or changes results never makes a database). A lake's name is
    checked as a name (whether it holds numerate's tables shows as it is read)."""
    if lake.is_lake(path):
        lake.connection_string(path)
        return
    lock_timeout_s()  # a bad NUMERATE_LOCK_TIMEOUT is refused at once, not when a wait comes
    try:
        problem = database_file_problem(path)
        if problem:
            raise ConfigError(f"{path}: {problem}")
        if not Path(path).exists():
            if live_owners(path):
                raise ConfigError(
                    f"no results in {path} yet: a run is starting to write it (try again in a "
                    "few seconds)"
                )
            raise ConfigError(  # numgen report said to run `numerate run`
                f"no results database at {path} (a run makes it: `numerate run` or "
                "`numerate numgen run`)"
            )
    except OSError as error:  # a name longer than the file system allows
        raise ConfigError(f"results database {path}: {error.strerror or error}") from None


def not_duckdb(path: str) -> str | None:
    """Why the existing file at `path` is no DuckDB database, read from its first bytes (a
    SQLite file would make DuckDB fetch an extension to open it), or None."""
    with open(path, "rb") as file:
        head = file.read(16)
        if not head and not _being_made(file):
            return "an empty file, not a DuckDB database (remove it, and a new one is made)"
    if head.startswith(b"SQLite format 3\x00"):
        return "a SQLite database, not a DuckDB one"
    if head and not looks_like_duckdb(head):
        return "not a DuckDB database file"
    return None


def _being_made(file: Any) -> bool:
    """Whether another process holds the lock of an empty database file (DuckDB's: it is
    writing the file's first bytes). A 0-byte file nobody holds was left empty (DuckDB then
    said only "not a valid DuckDB database file")."""
    try:
        fcntl.lockf(file, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    fcntl.lockf(file, fcntl.LOCK_UN)
    return False


def cut_short(con: Any, path: str) -> str | None:
    """Why the DuckDB file at `path` (the current database of `con`) is shorter than its
    tables (said without the path), or None. Opening such a file works, and reading fails
    only at the first missing block: a run failed at its end (exit 3, a `.wal` left beside
    the file), a report halfway.
    The table metadata says which blocks the tables use; reading it, not the blocks, takes
    milliseconds (a metadata block that is missing is an error here too, the same kind)."""
    database = con.execute("SELECT current_database()").fetchall()[0][0]
    tables = con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = ?", [database]
    ).fetchall()
    if not tables:
        return None
    parts = " UNION ALL ".join(
        "SELECT max(block_id) AS block FROM pragma_storage_info("
        f"{sql_literal(f'{_name(database)}.{_name(schema)}.{_name(table)}')}) WHERE persistent"
        for schema, table in tables
    )
    last = con.execute(f"SELECT max(block) FROM ({parts})").fetchall()[0][0]
    size_rows = con.execute(  # fetchall: DuckDB 2 keeps a result unfinished until then
        "SELECT block_size FROM pragma_database_size() WHERE database_name = ?", [database]
    ).fetchall()
    if last is None or last < 0 or not size_rows:
        return None
    needed = HEADERS_SIZE + (last + 1) * size_rows[0][0]
    size = Path(path).stat().st_size
    if size >= needed:
        return None
    return (
        f"the file is cut short: its tables need {needed:,} bytes and it has {size:,} (a copy "
        "that stopped early, or a full disk); restore it from a copy"
    )


def open_error(error: BaseException, path: str) -> str:
    """What DuckDB's error opening `path` means, in the words `cut_short` uses when the file
    ends inside the metadata read at open (DuckDB: "Could not read enough bytes ...")."""
    said = first_line(error)
    made = re.fullmatch(r'IO Error: Cannot open file ".*": (.+)', said)
    if made and not os.path.lexists(path):  # "Cannot open file": one it was to make
        return f"no file can be made in {Path(path).parent}: {made[1]}"
    if is_cut_short_at_open(error):
        with contextlib.suppress(OSError):
            size = Path(path).stat().st_size
            return (
                f"the file is cut short: it ends at byte {size:,}, inside what DuckDB reads "
                "to open it (a copy that stopped early, or a full disk); restore it from a copy"
            )
    return said


def whole_file_problem(con: Any, path: str) -> str | None:
    """`cut_short`, or why the file's metadata cannot be read; remembered while the file keeps
    its size and time (the view opens a reader for each page)."""
    import duckdb

    try:
        stat = Path(path).stat()
        seen = (stat.st_size, stat.st_mtime_ns)
        if _whole.get(path) == seen:
            return None
        problem = cut_short(con, path)
    except (duckdb.Error, OSError) as error:  # its metadata cannot be read: the same
        return f"its metadata cannot be read: {first_line(error)} (a damaged or truncated file)"
    if problem is None:
        _whole[path] = seen
    return problem


_whole: dict[str, tuple[int, int]] = {}
"""The files found whole, with the size and time they had then."""

HEADERS_SIZE = 3 * 4096
"""A DuckDB file's main header and its two database headers, before its first block."""


def shorter_than_its_header_says(path: str) -> bool:
    """Whether the DuckDB file at `path` is shorter than the blocks its header counts: a
    truncated file, known without opening it (a command refuses it before it makes anything
    beside it; `cut_short` says why, with DuckDB's own figures). Read from the two database
    headers after the main one (the newer one counts: its block count times its block size);
    False when they cannot be read so (another storage format). A file DuckDB shrank after a
    table was dropped keeps counting the freed blocks: it is taken for one cut short here
    (its run then announces itself only once the store opens), never by `cut_short`."""
    try:
        with open(path, "rb") as file:
            head = file.read(HEADERS_SIZE)
            size = os.fstat(file.fileno()).st_size
    except OSError:
        return False
    if len(head) < HEADERS_SIZE or not looks_like_duckdb(head[:16]):
        return False
    headers = [struct.unpack_from("<6Q", head, offset) for offset in (4096, 8192)]
    _, _, _, _, blocks, block_size = max(headers, key=lambda header: header[1])  # iteration
    if not (4096 <= block_size <= 1 << 30 and block_size & (block_size - 1) == 0):
        return False  # no block size of DuckDB's: another format, not judged here
    return size < HEADERS_SIZE + blocks * block_size


def _name(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


_DUCKDB_PREFIX = re.compile(r"[A-Za-z0-9_]{2,}:")
"""The start of a name DuckDB does not read as a file's path: `http:`, `s3:`, `md:`, or any
word of two characters or more before a colon, which it takes for an extension's name (and
would install to read); `a:b.duckdb` (a drive letter's form) is a file."""


def database_file_problem(path: str, writing: bool = False) -> str | None:
    """Why what is at `path` cannot be a results database (a name DuckDB reads as no file's,
    a folder, a device, a pipe or a socket, a file that is no DuckDB database: see
    not_duckdb), or None (nothing there
    included): the reader's check and the writer's, in the same words. `writing`: also a name
    DuckDB keeps for another database's write-ahead log (`X.wal`): opening X to write would
    take the file for its log and remove it, and the runs stored in it with it."""
    prefix = _DUCKDB_PREFIX.match(path)
    if prefix and not lake.is_lake(path):
        return (
            f"DuckDB reads a name that starts with {prefix.group()!r} as a remote database or "
            "an extension's (http://, s3://, md:), not a file on this machine; give a file's "
            "path (for a file whose name starts so, begin it with ./)"
        )
    file = Path(path)
    if writing and file.name.endswith(".wal") and len(file.name) > len(".wal"):
        other = file.with_name(file.name.removesuffix(".wal"))
        return (
            f"a name DuckDB keeps for the write-ahead log of the database {other}: opening "
            "that one to write would remove this file with every run stored in it; give the "
            "results database a name that does not end in .wal (move an existing one, e.g. "
            f"to {other.with_name(other.stem + '-results' + (other.suffix or '.duckdb'))})"
        )
    try:
        os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:  # readers said "no results database at ..."
            return "a symbolic link that loops"
        if error.errno == errno.ENAMETOOLONG:  # no file can be there (exit 3 before)
            return error.strerror or str(error)
        dangling = link_into_nowhere(file)  # DuckDB named the link
        if dangling:
            return dangling
    if file.is_dir():
        return "a folder, not a results database"
    if file.exists() and not file.is_file():  # DuckDB would wait on a pipe for a writer
        return "not a regular file (a device, a pipe or a socket), not a results database"
    log = Path(f"{path}.wal")  # DuckDB writes it through a link: another database, lost
    if log.is_symlink() or (log.exists() and not log.is_file()):
        what = "a link" if log.is_symlink() else "not a regular file"
        return f"{log} is {what}, where DuckDB keeps the database's write-ahead log: move it away"
    if writing and log.is_file() and is_duckdb_database(log):  # made so by an earlier version
        return (
            f"{log} is a results database, where DuckDB keeps this one's write-ahead log: "
            f"opening {file.name} to write would remove it with every run stored in it; move it "
            "to a name that does not end in .wal"
        )
    return not_duckdb(path) if file.is_file() else None


class DamagedDatabase(DatabaseFault):
    """A query failed on the file itself (a block whose checksum does not match, one cut
    short), not on its SQL: said with the database's name."""


class Reader:
    """A read-only connection to a results database."""

    def __init__(self, path: str, con: Any, waited_s: float = 0.0) -> None:
        self.path = path
        self.con = con
        self.abandoned = False
        """True after Ctrl-C left a query running on `con` (see printable_frame)."""
        self.numerate_schema = False
        """True once `check_schema` found numerate's schema (its version, its views)."""
        self._held: Any = access.held(path, "read", waited_s)  # NUMERATE_LOCK_LOG's line
        self._held.__enter__()

    @classmethod
    def open(cls, path: str, numerate_schema: bool = True) -> Reader:
        """Open `path` read-only, waiting while a writer holds it. ConfigError, in the user's
        words, when it does not exist (or a run is only starting to write it), is not a file,
        cannot be read or is not a numerate database (when `numerate_schema`); DatabaseBusy
        when writers held it past NUMERATE_LOCK_TIMEOUT."""
        import duckdb

        existing_database(path)
        access.lock_log(path)  # one that cannot be written: refused, as writers refuse it
        try:
            if lake.is_lake(path):  # a start-up cost, not a wait for writers
                lake.load_for_reading(path)
            started = time.monotonic()
            reader = cls(path, _connect(path), time.monotonic() - started)
        except duckdb.Error as error:
            raise ConfigError(f"cannot open {path}: {open_error(error, path)}") from None
        except OSError as error:
            raise ConfigError(f"cannot open {path}: {error.strerror}") from None
        problem = None if lake.is_lake(path) else whole_file_problem(reader.con, path)
        if problem:
            reader.close()
            raise ConfigError(f"results database {path}: {problem}")
        if numerate_schema:
            try:
                reader.check_schema()
            except BaseException:
                reader.close()
                raise
        return reader

    def check_schema(self) -> None:
        """ConfigError unless the database has numerate's current schema."""
        try:
            found = self.query("SELECT coalesce(max(version), 0) FROM schema_migrations")[0][0]
        except DamagedDatabase:
            raise
        except DatabaseFault:
            raise ConfigError(f"{self.path} is not a numerate results database") from None
        if found < 0:
            raise ConfigError(f"{self.path}: {no_version(found)}")
        if found != SCHEMA_VERSION:
            upgrade = (
                "upgrade numerate"
                if found > SCHEMA_VERSION
                else f"`numerate upgrade --db {self.path}` brings it up to date, keeping every row"
            )
            raise ConfigError(
                f"{self.path} has schema version {found}, this numerate reads version "
                f"{SCHEMA_VERSION}: {upgrade}"
            )
        missing = missing_views(self.con)
        if missing:
            raise ConfigError(
                f"{self.path} lacks numerate's view {missing[0]} (dropped by hand): "
                f"`numerate upgrade --db {self.path}` makes it again"
            )
        self.numerate_schema = True

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        import duckdb

        try:
            return self.con.execute(sql, list(params or [])).fetchall()
        except duckdb.Error as error:
            raise self._fault(error) from None

    def frame(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """A query's result as a polars DataFrame (DatabaseFault with DuckDB's first line when
        the SQL fails: numerate's own queries; the user's go through printable_frame)."""
        import duckdb
        import polars as pl

        try:
            relation = self.con.sql(sql, params=list(params or []))
            # duckdb 2.0: only relations have .pl(); a statement without rows gives None
            return pl.DataFrame() if relation is None else relation.pl()
        except duckdb.Error as error:
            raise self._fault(error) from None

    def batches(
        self, sql: str, params: Sequence[object] | None = None, rows: int = 100_000
    ) -> Iterator[pa.RecordBatch]:
        """A query's result as pyarrow RecordBatches of at most `rows` rows (DatabaseFault as
        `frame`)."""
        import duckdb

        try:
            yield from _streamed(self.con.sql(sql, params=list(params or [])).to_arrow_reader(rows))
        except duckdb.Error as error:  # met midway too (`_streamed`)
            raise self._fault(error) from None

    def _fault(self, error: Exception) -> Exception:
        """A failed query of numerate's as DatabaseFault with DuckDB's first line, or, when it
        failed to bind because a table or column of numerate's is missing (dropped or renamed
        by hand) from a database of numerate's schema, as the ConfigError that says so
        (checked then, not at every open)."""
        import duckdb

        stopped = lake.away(self.path, error)  # a lake's PostgreSQL stopped or lost: exit 3
        if stopped:
            return stopped
        binding = isinstance(error, duckdb.BinderException | duckdb.CatalogException)
        if binding and self.numerate_schema:
            with contextlib.suppress(duckdb.Error):
                problem = changed_tables(self.con)
                if problem:
                    return ConfigError(f"results database {self.path}: {problem}")
        if is_corrupt(error):  # a block of the file, not the query: named,
            return DamagedDatabase(  # as writers name it (not a full disk, a spill folder)
                f"results database {self.path} cannot be read: {file_fault(error)} (a damaged "
                f"or truncated file? `numerate upgrade --db {shlex.quote(self.path)}` names "
                "the table)"
            )
        return DatabaseFault(first_line(error))

    def printable_frame(
        self, sql: str, limit: int | None = None, cut: int | None = None, width: int | None = None
    ) -> pl.DataFrame:
        """A query's result as a polars DataFrame that every output format can show (the
        user's SQL in `numerate db`): columns of any type but booleans, numbers and text come
        as DuckDB's own text of their values (INTERVAL, UNION, MAP, STRUCT, LIST, BLOB, BIT,
        UUID, HUGEINT, ENUM, dates and times, which may be infinite, ...), which polars could
        not convert or CSV could not hold. ConfigError with DuckDB's first line when the SQL
        fails. With `limit`, its first `limit` rows only (read no further); with `cut`, each
        text longer than `cut` characters cut to them and CUT_MARK (in the query: memory
        follows what is shown, not the texts); with `width`, its first `width` columns only.

        The query runs in a thread while this one waits, so that Ctrl-C always reaches Python
        (DuckDB's bindings miss some): KeyboardInterrupt then leaves the query running and
        this reader unusable; the caller ends the process (os._exit), which stops it."""
        import polars as pl

        rows = limit or PRINTED_ROWS
        frames = list(self._printable_batches(sql, limit, cut, rows, width=width))
        return pl.concat(frames) if len(frames) > 1 else frames[0]

    def printable_batches(self, sql: str, rows: int = 0) -> Generator[pl.DataFrame]:
        """Every row of `printable_frame(sql)`, in frames of at most `rows` rows (default
        PRINTED_ROWS) and about PRINTED_BYTES: what is in memory is a frame or two, not the
        result, which may be larger than this machine's memory (every answer as JSON). At
        least one frame comes, with the result's columns, even when it has no row. The query
        is read in a thread, a frame ahead, as `printable_frame` reads it; when the caller
        stops taking frames, it stops after the frame it reads (DuckDB's interrupt, tried for
        a stop at once, is racy: one sent as a query ended reached a later query, and one
        sent as a query began was lost)."""
        return self._printable_batches(sql, None, None, rows or PRINTED_ROWS)

    def _printable_batches(
        self, sql: str, limit: int | None, cut: int | None, rows: int, width: int | None = None
    ) -> Generator[pl.DataFrame]:
        ahead: queue.Queue[Any] = queue.Queue(maxsize=1)
        left = threading.Event()  # the caller stopped taking frames

        def give(item: object) -> None:
            while not left.is_set():
                with contextlib.suppress(queue.Full):
                    ahead.put(item, timeout=0.1)
                    return

        def run() -> None:
            try:
                with self._user_query():
                    relation = self._printable(sql, limit, cut, width)
                    for frame in _frames(relation, rows, PRINTED_BYTES):
                        if left.is_set():
                            break
                        give(frame)
                give(_END)
            except BaseException as error:  # given to the waiting thread
                give(error)

        worker = threading.Thread(target=run, daemon=True, name="numerate-db-query")
        worker.start()
        try:
            while True:
                try:
                    item = ahead.get(timeout=0.1)
                except queue.Empty:
                    continue
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        except KeyboardInterrupt:
            self.abandoned = True  # the connection is busy: close() leaves it to the exit
            raise
        finally:  # the caller left early (its output closed): the query stops after the
            left.set()  # frame it reads, and the connection is free again
            if not self.abandoned:
                worker.join()

    def _printable(
        self, sql: str, limit: int | None, cut: int | None, width: int | None = None
    ) -> Any:
        """The relation `printable_frame` reads: ConfigError unless `sql` is one query
        (QUERY) that calls no table function but those that only read (READING)."""
        found = self.con.extract_statements(sql)
        statements = len(found)
        if statements != 1:  # DuckDB would run each and show the last, or say nothing
            said = (
                f"{statements} statements as DuckDB reads it (a PIVOT without `IN (...)` is two)"
                if statements
                else "no statement (only comments?)"
            )
            raise ConfigError(f"the SQL holds {said}: give one query")
        kind = found[0].type.name
        if kind != QUERY:  # a lake's reader may read its data folder, so a COPY there
            raise ConfigError(  # replaced a data file, and a CHECKPOINT wrote files
                f"numerate db only reads: give a query (SELECT, FROM, WITH, VALUES, DESCRIBE, "
                f"SHOW or SUMMARIZE), not a {kind} statement; --format csv or json with a "
                "shell's > writes its rows to a file"
            )
        calls = called(self.con, found[0].query)
        if calls is None:
            raise ConfigError(
                "numerate db only reads, and cannot tell which functions this query calls "
                "(nested hundreds deep?): give a simpler query"
            )
        refused = sorted(calls & self._table_functions() - READING)
        if refused:
            raise ConfigError(
                f"numerate db only reads, and {refused[0]}() may do more (write files, run SQL "
                "given as text, reach another server): give a query without it (the table "
                "functions it takes only read: docs/commands.md; a lake's maintenance is "
                "`numerate upgrade`'s)"
            )
        relation = self.con.sql(sql)
        columns = [
            f"#{i}" if kind.id in NATIVE_TYPES else f"CAST(#{i} AS VARCHAR)"
            for i, kind in enumerate(relation.dtypes, start=1)
        ]
        if cut is not None:  # as text: a JSON column's cut text is no JSON (`runs.config`
            columns = [  # failed: "Malformed JSON at byte 1003")
                c if kind.id in NATIVE_TYPES and kind.id != "varchar" else
                f"CASE WHEN length(left({c}::VARCHAR, {cut + 1:d})) > {cut:d} "
                f"THEN left({c}::VARCHAR, {cut:d}) || {sql_literal(CUT_MARK)} "
                f"ELSE {c}::VARCHAR END"
                for c, kind in zip(columns, relation.dtypes, strict=True)
            ]  # fmt: skip
        names = ['"' + name.replace('"', '""') + '"' for name in _unique(relation.columns)]
        pairs = list(zip(columns, names, strict=True))[:width]
        printable = relation.project(", ".join(f"{c} AS {n}" for c, n in pairs))
        return printable if limit is None else printable.limit(limit)

    def _table_functions(self) -> set[str]:
        """The names of the table functions this connection's DuckDB has (its extensions'
        included), in lower case."""
        listed = self.con.execute(
            "SELECT DISTINCT lower(function_name) FROM duckdb_functions() "
            "WHERE function_type IN ('table', 'table_macro')"
        ).fetchall()
        return {name for (name,) in listed}

    @contextlib.contextmanager
    def _user_query(self) -> Iterator[None]:
        """The user's SQL failing: ConfigError with DuckDB's first line (DamagedDatabase where
        it met a damaged block of the file); a Ctrl-C DuckDB saw (duckdb 2's bindings report
        it so): KeyboardInterrupt."""
        import duckdb

        try:
            yield
        except duckdb.Error as error:
            if is_corrupt(error) or lake.away(self.path, error):  # the file, or the lake's
                raise self._fault(error) from None  # PostgreSQL, not the SQL: as numerate's
            raise ConfigError(first_line(error)) from None
        except RuntimeError as error:
            if is_interrupted(error):
                raise KeyboardInterrupt from None
            raise

    def let_writers_in(self) -> bool:
        """For a reader that reads for long (an export): when a process waits to write the
        database (numerate.store.access.waiting_writers), let the file go until it has had
        its turn, then open it again (as any reader opens it). True when it did."""
        if self.abandoned or lake.is_lake(self.path) or not access.waiting_writers(self.path):
            return False
        self.con.close()
        self.con = _connect(self.path)
        return True

    def close(self) -> None:
        if not self.abandoned:
            self.con.close()
        held, self._held = self._held, None  # closed twice: logged once
        if held is not None:
            held.__exit__(None, None, None)

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
