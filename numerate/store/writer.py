"""The writer: every write of the results, in short sessions (the schema is numerate.store.schema).

DuckDB lets one process at a time hold a database file, and none read it meanwhile. So a
`Store` never keeps the file: each call attaches it to the process's in-memory DuckDB
(waiting, bounded and visibly, while another process holds it: numerate.store.access), does its
work in one session and detaches it, usually within a few milliseconds. Fresh answers are not
written one by one: `receive` puts them in the process's journal on disk at once
(numerate.store.journal), and a background thread writes
what the journal holds every `flush_seconds()` (NUMERATE_FLUSH_SECONDS, default 2 s); every
session also writes it first, so a process always reads its own answers. The first session of
a process brings the schema up to date and replays the journals of processes that died.

`:memory:` stores (tests) keep their one connection.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

from numerate.kernel.errors import first_line, shorten
from numerate.kernel.files import OutputPathError, output_folder
from numerate.kernel.progress import current
from numerate.store import access, journal, lake
from numerate.store.duckdb_words import committed, file_fault, is_damaged, out_of_memory
from numerate.store.reader import database_file_problem, open_error, whole_file_problem
from numerate.store.rows import CompletionRow
from numerate.store.schema import (
    JOURNALED,
    StoreError,
    StoreFailedForNow,
    migrate,
    now,
    restore_views,
    transaction,
)
from numerate.store.tables import Tables, check_columns, insert_rows

__all__ = ["Store", "StoreError", "flush_seconds", "now"]

logger = logging.getLogger("numerate.store")
T = TypeVar("T")


def flush_seconds() -> float:
    """How often received rows are written (NUMERATE_FLUSH_SECONDS, default 2; blank counts
    as unset, as for every NUMERATE_* setting)."""
    raw = os.environ.get("NUMERATE_FLUSH_SECONDS", "")
    if not raw.strip():
        return 2.0
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise StoreError(
            f"NUMERATE_FLUSH_SECONDS={raw!r}: expected seconds, more than 0 and at most 3600"
        )
    return value


WRITER_MEMORY = "128MB"
"""What DuckDB may hold in memory for a process's sessions; past it, it drops cached blocks
of the file and spills what a query needs to disk. Without a bound its cache grew with the
database: a 300,000-case sweep peaked at 1.3 GB; at 512 MB, 859 MB; at 128 MB, 464 MB. A
1,000,000-case sweep fits 128 MB since its keys have no indexes (which stayed in memory:
128 MB then failed at 875,000 answers) and its summaries' case sets are hashed as the ids
stream past (`string_agg` of a million ids was one 64 MB string). docs/benchmarks.md,
"Scale"."""


_instances = itertools.count()


def writer_settings() -> dict[str, str | bool | int | float | list[str]]:
    """The settings of an in-memory DuckDB of this process's: WRITER_MEMORY, and a spill
    folder of its own in the system's temporary folder (DuckDB's default, `.tmp` in the
    working folder, would be shared, and its files' names are unique neither between
    processes nor between the DuckDBs of one: an ingest holds three); DuckDB makes it when it
    first spills and removes it as it closes."""
    spill = Path(tempfile.gettempdir()) / f"numerate-duckdb-{os.getpid()}-{next(_instances)}"
    return {"memory_limit": WRITER_MEMORY, "temp_directory": str(spill)}


@contextlib.contextmanager
def _file_errors(path: str, spill: str) -> Iterator[None]:
    """A failure of the database file itself (damaged, truncated, the disk full) as a
    StoreError naming it, in one line."""
    import duckdb

    try:
        yield
    except OSError as error:
        raise StoreFailedForNow(f"results database {path}: {error.strerror}") from None
    except duckdb.Error as error:
        # the run stops, resumable: nothing is lost. A query whose result was being fetched
        # says so in a second line, its first one "unsuccessful ... pending query result"
        memory = out_of_memory(error)
        if memory:
            raise StoreFailedForNow(
                f"results database {path}: DuckDB needed more than the {WRITER_MEMORY} "
                f"numerate lets it hold in memory and could not spill to disk ({memory})"
            ) from None
        stopped = lake.away(path, error)  # a lake's PostgreSQL stopped or lost: exit 3
        if stopped:
            raise stopped from None
        if not is_damaged(error):  # the SQL, not the file
            raise
        if spill and spill in str(error):  # where DuckDB spills, not the database
            raise StoreFailedForNow(
                f"results database {path}: DuckDB could not write where it spills what does "
                f"not fit in {WRITER_MEMORY} of memory ({first_line(error)})"
            ) from None
        if NO_SPACE in str(error):  # the disk, not the file: exit 3, and no "damaged?"
            raise StoreFailedForNow(
                f"results database {path}: the disk is full ({file_fault(error)}); free some "
                "space, and the same command goes on"
            ) from None
        raise StoreError(
            f"results database {path} cannot be read or written: {file_fault(error)} "
            "(a damaged or truncated file?)"
        ) from None


NO_SPACE = os.strerror(errno.ENOSPC)
"""How the system says a disk is full ("No space left on device"), which DuckDB's IO errors
quote."""


def folder_problem(folder: Path) -> None:
    """StoreError when the database's folder cannot be one (a file on its way said only
    "File exists")."""
    try:
        output_folder(folder)
    except OutputPathError as error:
        raise StoreError(f"cannot open results database in {folder}: {error.reason}") from None


def _of_known_runs(con: Any, segment: Path, rows: journal.Rows) -> None:
    """StoreError naming the journal file when one of its answers is of a run the database
    holds no row of (a journal of another database, one edited): stored, it would be an
    answer of no run, counted by no report and never removed."""
    named = sorted(
        {str(row["run_id"]) for table, row in rows if table == "responses" and "run_id" in row}
    )  # a row without one: refused by the table (NOT NULL)
    if not named:
        return
    known = {row[0] for row in con.execute(
        "SELECT run_id FROM runs WHERE list_contains(?, run_id)", [named]).fetchall()}  # fmt: skip
    unknown = [run_id for run_id in named if run_id not in known]
    if unknown:
        raise StoreError(
            f"journal {segment}: answers of run {shorten(repr(unknown[0]), 80)}, which this "
            f"database holds no run of; move the file out of {segment.parent} to go on (the "
            "answers it holds are then not stored)"
        )


def _remove_if_untouched(path: Path) -> bool:
    """Remove the database file `path`, which this process just found empty and let go of,
    unless another process holds it now or wrote it since: the file's lock (DuckDB's, an
    fcntl lock) is taken first, so that one opening it meanwhile waits, then opens a file of
    its own."""
    try:
        seen = path.stat()
        handle = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        now = os.fstat(handle)
        if (now.st_ino, now.st_size, now.st_mtime_ns) != (
            seen.st_ino, seen.st_size, seen.st_mtime_ns
        ):  # fmt: skip
            return False
        path.unlink()
        Path(f"{path}.wal").unlink(missing_ok=True)
        return True
    except OSError:  # held by another process now
        return False
    finally:
        os.close(handle)


def holds_nothing(con: Any) -> bool:
    """Whether the database of `con` holds no row but its schema's migrations."""
    tables = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND table_name <> 'schema_migrations'"
    ).fetchall()
    return not any(
        con.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() for (table,) in tables
    )


class Store(Tables):
    """This process's access to one results database."""

    _open: ClassVar[dict[str, Store]] = {}
    _open_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: str) -> None:
        self.path = path
        self.memory = path == ":memory:"
        self.lake = lake.is_lake(path)
        self.kept = self.memory or self.lake
        """One connection for the process's life: no file to hold and let go of (`:memory:`,
        written at once; a lake, whose own transactions serve its writers, journaled on this
        machine's disk: numerate.store.journal.journal_dir)."""
        self.lock = threading.RLock()
        self._instance: Any = None
        self._con: Any = None
        self._depth = 0
        self._hold: Any = None
        self._migrated = False
        self.found_version = 0
        """The schema version the file had when this process first opened it (0: new)."""
        self.views_made: list[str] = []
        """numerate's views this store made again as it first opened the file (dropped by
        hand)."""
        self._journal: journal.Journal | None = None
        self._claims: dict[str, journal.RunClaim | lake.RunClaim] = {}
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self._made: list[Path] = []  # the file and folders this process made, deepest first
        self.settings = writer_settings()
        """Its DuckDB's (one for the Store's life): bounded, spilling to a folder of its own;
        one in memory spills its tables there too."""
        self.spill = str(self.settings["temp_directory"])
        if not self.memory:
            self._every = flush_seconds()  # a bad setting is refused here, not in the thread
        if self.lake:
            lake.connection_string(path)  # a malformed name (a password) is refused at once
        elif not self.memory:
            access.lock_timeout_s()  # and here, not only once another process holds the file
            access.lock_log(path)  # and here: a log that cannot be written was silently none
            try:
                problem = database_file_problem(path, writing=True) or journal.journal_problem(path)
                if problem:
                    raise StoreError(f"cannot open results database {path}: {problem}")
                folder_problem(Path(path).parent)
                self._made = [p for p in (Path(path), *Path(path).parents) if not p.exists()]
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise StoreError(f"cannot open results database {path}: {error.strerror}") from None
        try:
            with self.session():  # creates or upgrades the file now: a bad path fails here
                pass
        except BaseException:  # a signal or an error while the file was made: no half-made
            self._discard_half_made()  # file is left (no Store holds it for _close_stores)
            raise

    def _discard_half_made(self) -> None:
        """Remove the file (and folders) this process began to make when its making failed
        or was stopped, if it holds no row: no Store holds it for `discard_if_unused`."""
        import duckdb

        if self.kept or Path(self.path) not in self._made:
            return
        self._drop_instance()  # lets go of the file whatever the session left held
        try:  # another process's now (it made the file first, this one waited): it is held
            con = duckdb.connect(self.path, read_only=True)
        except (duckdb.Error, OSError):
            return
        try:
            empty = holds_nothing(con)
        finally:
            con.close()
        if empty:
            self._remove_made()

    def _remove_made(self) -> bool:
        """Remove the file this process made, then the folders made for it that are empty,
        unless another process holds the file (see `_remove_if_untouched`)."""
        if not _remove_if_untouched(Path(self.path)):
            return False
        for folder in self._made[1:]:
            with contextlib.suppress(OSError):  # not empty: another process's files
                folder.rmdir()
        return True

    # ------------------------------------------------------------------ sessions

    @contextlib.contextmanager
    def session(self) -> Iterator[Any]:
        """Hold the database for the block; yields the connection. Nested sessions (and
        threads of this process) share one hold; it ends with the outermost block."""
        with self.lock:
            if self._depth == 0 and self._con is None:
                with _file_errors(self.path, self.spill):
                    self._connect()  # writes the journal (a file's session, a lake's first)
            elif self._depth == 0 and self.lake:  # a lake's connection stays: written here
                with _file_errors(self.path, self.spill):
                    self._write_journal(self._con)
            self._depth += 1
            try:
                with _file_errors(self.path, self.spill):
                    yield self._con
            finally:
                self._depth -= 1
                if self._depth == 0 and not self.kept:
                    with _file_errors(self.path, self.spill):
                        self._disconnect()

    def maintain(self) -> dict[str, int]:
        """A lake's maintenance (numerate.store.lake.MAINTENANCE): what each step did; nothing
        for a file (DuckDB's checkpoints keep it)."""
        if not self.lake:
            return {}
        with self.session() as con:
            return lake.maintain(con)

    def check_readable(self) -> None:
        """StoreError naming the file and the table when a row cannot be read back (a damaged
        or truncated file opens, and its first tables read, all the same): every table is
        read whole, once (`numerate upgrade`)."""
        import duckdb

        with self.session() as con:
            tables = con.execute(
                "SELECT table_name FROM duckdb_tables() "
                "WHERE database_name = current_database() ORDER BY table_name"
            ).fetchall()
            for (table,) in tables:
                try:
                    con.execute(
                        f'SELECT bit_xor(hash(numerate_row)) FROM "{table}" AS numerate_row'
                    ).fetchall()
                except duckdb.Error as error:  # IO, a checksum: the file, not this SQL
                    if out_of_memory(error):  # a healthy file of long texts: said as the
                        raise  # memory bound (_file_errors), not as a damaged file
                    raise StoreError(
                        f"results database {self.path}: table {table} cannot be read whole: "
                        f"{first_line(error)} (a damaged or truncated file)"
                    ) from None

    @property
    def con(self) -> Any:
        """The connection of the session in progress (use inside `session()`)."""
        if self._con is None:
            raise StoreError("the results database is not held: use Store.session()")
        return self._con

    def _connect(self) -> None:
        import duckdb

        started = time.monotonic()
        try:
            if self.memory:
                con = duckdb.connect(":memory:", config=self.settings)
            elif self.lake:
                con = duckdb.connect(config=self.settings)
                lake.attach(con, self.path)
            else:
                if self._instance is None:  # one in-memory DuckDB for the process's life
                    self._instance = duckdb.connect(config=self.settings)
                con = self._instance
                access.attach(con, self.path)
        except duckdb.Error as error:
            raise StoreError(
                f"cannot open results database {self.path}: {open_error(error, self.path)}"
            ) from None
        except OSError as error:
            raise StoreError(f"cannot open results database {self.path}: {error.strerror}"
                             ) from None  # fmt: skip
        waited = time.monotonic() - started  # a database in memory holds no file: no session
        self._hold = (
            contextlib.nullcontext() if self.kept else access.held(self.path, "write", waited)
        )
        self._hold.__enter__()
        self._con = con
        try:
            if not self._migrated:
                problem = None if self.kept else whole_file_problem(con, self.path)
                if problem:
                    raise StoreError(f"cannot use results database {self.path}: {problem}")
                try:
                    self.found_version = migrate(con)
                    self.views_made = restore_views(con)
                except StoreError as error:
                    raise StoreError(f"cannot use results database {self.path}: {error}") from None
                self._migrated = True
            if not self.memory:
                self._replay_orphans(con)
                self._write_journal(con)
        except BaseException:
            self._disconnect()
            raise

    def _drop_instance(self) -> None:
        """Close this process's in-memory DuckDB, and with it every file it holds; the next
        session makes a new one."""
        if self._instance is not None:
            with contextlib.suppress(Exception):
                self._instance.close()
            self._instance = None

    def _disconnect(self) -> None:
        con, self._con = self._con, None
        try:
            if self.kept:
                con.close()
            else:
                try:
                    access.detach(con)  # checkpoints the file and lets its lock go
                except BaseException:
                    # a checkpoint that failed (DuckDB's bound: answers of hundreds of KB)
                    # leaves the file attached, "invalidated", and its lock held: every later
                    # session said "Unique file handle conflict" until the process ended
                    self._drop_instance()
                    raise
        finally:
            hold, self._hold = self._hold, None
            if hold is not None:
                hold.__exit__(None, None, None)

    def _write_rows(self, con: Any, rows: journal.Rows) -> None:
        by_table: dict[str, list[Mapping[str, object]]] = {}
        for table, row in rows:
            by_table.setdefault(table, []).append(row)
        for table, table_rows in by_table.items():
            # checked when received (`receive`); a journal of an earlier version may lack a
            # column added since: NULL, as the schema's default
            insert_rows(con, table, JOURNALED[table], table_rows, strict=False)

    def _write_journal(self, con: Any) -> None:
        if self._journal is None:
            return
        segments = self._journal.take()
        if not segments:
            return

        for segment in segments:  # a segment is gone once all its parts are in
            self._write_parts(con, segment.rows)
            self._journal.written(segment)

    def _write_parts(self, con: Any, rows: journal.Rows, source: Path | None = None) -> None:
        """`rows` a part at a time (journal.PART_BYTES), each in a transaction of its own,
        tried again on a lake when another writer's commit came first (`committed`). A part
        that fails leaves those before it written: the journal keeps them all, and writing
        them again changes nothing (KEYS). `source`: the journal file of a dead process they
        were read from; rows a table refuses are then said as that file's (and not DuckDB's
        bound, a damaged file or a commit: `_file_errors` says those)."""
        import duckdb
        import pyarrow as pa

        for part in journal.parts(rows, journal.PART_BYTES):

            def attempt(part: journal.Rows = part) -> None:
                with transaction(con):
                    try:
                        self._write_rows(con, part)
                    except (duckdb.Error, pa.ArrowException, ValueError, TypeError) as error:
                        if source is None or out_of_memory(error) or is_damaged(error):
                            raise  # not the rows: DuckDB's bound, the file, where it spills
                        raise StoreError(
                            f"journal {source}: its rows cannot be written "
                            f"({first_line(error)}); move the file out of {source.parent} "
                            "to go on (those of its answers not stored yet are then lost)"
                        ) from None

            committed(attempt)  # a file's writer holds it alone: its commits never conflict

    def _replay_orphans(self, con: Any) -> None:
        """Write the journals processes that died left (their answers), a part at a time
        (`_write_parts`), then remove them; StoreError naming the file when one cannot be
        written: none numerate wrote (see journal.read_segment), or rows the table refuses."""
        with journal.orphans(self.path) as segments:
            if not segments:
                return
            for segment in segments:
                rows = journal.read_segment(segment)
                _of_known_runs(con, segment, rows)
                self._write_parts(con, rows, segment)
            logger.info("%s: wrote the answers a stopped process had received", self.path)

    def write(self, statements: Callable[[Any], T]) -> T:
        """`statements(con)` in one transaction of one session; what it returns. On a lake,
        another writer's commit may come first (DuckLake's snapshots: duckdb_words.committed):
        the transaction, which then committed nothing, is tried again and sees that writer's
        rows; `statements` must therefore hold no state of its own between tries. A file's
        writer holds it alone: its commits never conflict, and are tried once."""

        def attempt() -> T:
            with self.session() as con, transaction(con):
                return statements(con)

        return committed(attempt)

    # ------------------------------------------------------------------ the journal

    def receive(self, table: str, rows: Sequence[Mapping[str, object]]) -> None:
        """Rows this process just received (completions, graded responses): on disk at once,
        in the database within `flush_seconds()`."""
        if table not in JOURNALED:
            raise ValueError(f"not a journaled table: {table!r}")
        if not rows:
            return
        check_columns(table, JOURNALED[table], rows)  # refused here, in the caller's code
        if self.memory:
            with self.session() as con:
                insert_rows(con, table, JOURNALED[table], rows)
            return
        kept = self._journal or self.adopt(None)  # the lock only for the first
        assert kept is not None
        kept.append(table, rows)

    def get_completions(
        self, request_hashes: Iterable[str], run_id: str | None = None
    ) -> dict[str, CompletionRow]:
        """Tables.get_completions, with the answers this process received and has not
        written yet (its journal): a session that begins inside another's hold does not write
        them first, and a batch that missed them would pay for the same request again (with
        numerate.endpoints.answering.BeingAsked, which covers the requests still being
        asked). Those of the database stay where it has one (the first copy of a run's answer
        is the one kept, `KEYS`), but an answer of any run (`run_id` None) is the latest: this
        process's."""
        hashes = list(request_hashes)
        # the journal first: a row written meanwhile leaves it only once in the database
        received = self._journal.received("completions") if self._journal is not None else []
        found = super().get_completions(hashes, run_id)
        wanted = set(hashes)
        for row in received:
            key = str(row["request_hash"])
            if key not in wanted or (run_id is not None and row["run_id"] != run_id):
                continue
            if run_id is None or key not in found:  # any run's: the newest; a run's: the first
                found[key] = cast(CompletionRow, row)
        return found

    def adopt(self, taken: journal.Journal | None) -> journal.Journal | None:
        """This process's journal of the database: `taken` (one made before the store was
        opened, e.g. to tell readers a run is starting) or a new one, with the thread that
        writes it every `flush_seconds()`. None for `:memory:` (written at once)."""
        if self.memory:
            if taken is not None:
                taken.close()
            return None
        with self.lock:
            if self._journal is None:
                self._journal = taken if taken is not None else journal.Journal(self.path)
                self._flusher = threading.Thread(
                    target=self._flush_loop, name="numerate-flush", daemon=True
                )
                self._flusher.start()
            elif taken is not None and taken is not self._journal:
                taken.close()
            return self._journal

    def _flush_loop(self) -> None:
        while not self._stop.wait(self._every):
            if self._journal is not None and self._journal.pending:
                try:
                    self.flush()
                except Exception as error:  # the rows stay journaled: tried again
                    current().note(f"received answers wait in the journal: {error}")

    def flush(self) -> None:
        """Write what the journal holds now (each session begins so)."""
        with self.session():
            pass

    # ------------------------------------------------------------------ opening and closing

    @staticmethod
    def _key(path: str) -> str:
        try:
            return path if path == ":memory:" or lake.is_lake(path) else str(Path(path).resolve())
        except RuntimeError:  # a symbolic link that loops
            raise StoreError(f"results database {path}: a symbolic link that loops") from None
        except OSError as error:
            reason = "a symbolic link that loops" if error.errno == errno.ELOOP else error.strerror
            raise StoreError(f"results database {path}: {reason}") from None

    @classmethod
    def open(cls, path: str) -> Store:
        """The process's store for `path` (created, or upgraded, on first use)."""
        key = cls._key(path)
        with cls._open_lock:
            if key not in cls._open:
                cls._open[key] = cls(path)
            return cls._open[key]

    def close(self) -> None:
        """Write what the journal holds and give up this process's journal and run claims.
        Rows that cannot be written now stay in the journal for the next process."""
        self._stop.set()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join(timeout=60)
        try:
            if self._journal is not None and self._journal.pending:
                self.flush()
        except StoreError as error:  # said by whoever met it; the journal keeps the rows
            logger.info("%s: %s", self.path, error)
        finally:
            for claim in self._claims.values():
                claim.release()
            self._claims.clear()
            if self._journal is not None:
                self._journal.close()
                self._journal = None  # a session after the close writes no journal
            if self.kept and self._con is not None:
                self._disconnect()
            if self._instance is not None:
                self._instance.close()
                self._instance = None

    @property
    def made_here(self) -> bool:
        """Whether this process made the database file (and its schema)."""
        return not self.kept and self.found_version == 0 and Path(self.path) in self._made

    def discard_if_unused(self) -> bool:
        """Remove the file, and the folders made for it, when this process made it and it
        holds nothing but its schema (a command that failed or was stopped before its run
        began, an ingest that loaded nothing: no empty database is left behind); False, with
        nothing removed, when it was there before or holds a row (see `_remove_if_untouched`
        for another process that opens it meanwhile)."""
        if not self.made_here:
            return False
        with self.session() as con:
            if not holds_nothing(con):
                return False
        Store.release(self.path)  # let go of (a file removed while DuckDB held it aborted the
        return self._remove_made()  # process at its exit, SIGABRT)

    @classmethod
    def release(cls, path: str) -> None:
        """Close this process's store for `path`, if open (the next `open` starts anew)."""
        with cls._open_lock:
            store = cls._open.pop(cls._key(path), None)
        if store is not None:
            store.close()

    @classmethod
    def stop_flushing(cls, within: float = 2.0) -> None:
        """Stop every store's journal writer thread (within `within` seconds) without writing:
        a command leaving on a busy database says its last line after theirs."""
        with cls._open_lock:
            stores = list(cls._open.values())
        for store in stores:
            store._stop.set()
        for store in stores:
            if store._flusher is not None and store._flusher is not threading.current_thread():
                store._flusher.join(timeout=within)

    @classmethod
    def close_all(cls, failed: bool = False) -> list[Store]:
        """Close every store this process opened; returns them. `failed` (the command failed
        or was stopped): first remove each one it made that holds nothing (a run stopped while
        Prefect's server started left an empty database, and a later `report` on it said "no
        runs"), without waiting for one another process holds (it is in use: kept)."""
        with cls._open_lock:
            stores, cls._open = list(cls._open.values()), {}
        for store in stores:
            store.close()
        made = [store for store in stores if store.made_here]
        if failed and made:
            with access.hurried(0):  # for these only: the process may go on (a test's waits
                for store in made:  # then all ended at once, "stayed busy for 0 s")
                    with contextlib.suppress(StoreError):
                        store.discard_if_unused()
        return stores

    def claim_run(self, run_id: str) -> bool:
        """Hold `run_id` for this process (no other process resumes it meanwhile); False when
        another live process holds it."""
        with self.lock:
            if run_id in self._claims:
                return True
            if self.memory:
                self._claims[run_id] = journal.RunClaim(None)
                return True
            # its journal first, named in a file claim: a reader finds its live owner
            kept = self.adopt(None)
            claim = (
                lake.claim_run(self.path, run_id)
                if self.lake
                else journal.claim_run(self.path, run_id, kept.stem if kept else "")
            )
            if claim is None:
                return False
            self._claims[run_id] = claim
            return True

    def claimed_runs(self) -> list[str]:
        with self.lock:
            return list(self._claims)
