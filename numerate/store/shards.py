"""Results from several workers or machines: Parquet shards in a shared location.

A DuckDB file is shared by the processes of one machine (numerate.store.access); it must not be
shared across machines (its lock is not reliable on a network filesystem). A run on another
machine writes its own database, then publishes its rows as Parquet files to a results location
(a folder or any fsspec URL: s3://..., gs://..., an NFS path); an ingest loads every complete,
not yet ingested run into the central database, one run a short session, while other runs
write it. A run's folder is complete when its `_SUCCESS` marker exists: the marker is written
last, and every file is written under a temporary name and then renamed.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from numerate.kernel.answers import MAX_ANSWER_CHARS, cut_sql
from numerate.kernel.confined import Confined, LeadsOutside
from numerate.kernel.errors import ConfigError, NumerateError, first_line, shorten, some_of
from numerate.kernel.files import is_duckdb_database, missing_link_target
from numerate.kernel.names import NAMES, name_problem
from numerate.store.duckdb_words import out_of_memory, sql_literal
from numerate.store.lake import is_lake
from numerate.store.schema import (
    OPTIONAL_SHARD_TABLES,
    RUN_ENDED,
    SHARD_ROWS,
    SHARD_TABLES,
    StoreError,
    now,
)
from numerate.store.shard_checks import database_problem, distinct_rows, run_problem
from numerate.store.tables import insert_rows, insert_table, split_in_place
from numerate.store.texts import LONG_TEXTS
from numerate.store.writer import WRITER_MEMORY, Store

SUCCESS = "_SUCCESS"

SHARD_ROW_GROUP = 4096
"""Rows in a row group of a shard (DuckDB's default is 122,880): the Parquet writer holds a
row group in memory until it is written, and one of cases (about 1 KB each) did not fit the
writer's bound (numerate.store.writer.WRITER_MEMORY)."""


def _filesystem(results_dir: str) -> tuple[Any, str]:
    """The filesystem and root of a results location; an empty one is a ConfigError (it would
    silently mean the working directory)."""
    import fsspec

    if not results_dir.strip():
        raise ConfigError(
            f"results location {results_dir!r}: give a folder or an fsspec URL (s3://...)"
        )
    try:
        fs, root = fsspec.core.url_to_fs(results_dir)
    except (ImportError, ValueError) as error:
        raise ConfigError(f"results location {results_dir!r}: {error}") from None
    except Exception as error:  # a file system's own: a server that refuses, an archive
        # that is none, a file system that needs arguments a URL cannot give
        raise ConfigError(
            f"results location {results_dir!r} cannot be opened: {type(error).__name__}: "
            f"{first_line(error) or 'no reason given'}"
        ) from None
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    if "memory" in protocols:
        raise ConfigError(
            f"results location {results_dir!r} is this process's memory: what is published "
            "there is gone when it ends (give a folder or a shared URL such as s3://...)"
        )
    return fs, root.rstrip("/") or "/"  # "/" itself: not "", the working folder


def publish_run(store: Store, run_id: str, results_dir: str) -> str:
    """Export a run's rows to `<results_dir>/<run_id>/`; returns that folder. A run id that
    is no name (`../x`: a database changed by hand) is a ConfigError, nothing written. In a
    local folder, a link planted at the run's folder is LeadsOutside and one at a shard's
    name is replaced: nothing is written through either (the results location itself may be
    reached through links: it is the user's to name)."""
    if name_problem("run_id", run_id):
        raise ConfigError(f"run id {_shown_id(run_id)}: {_NO_RUN_ID}")
    fs, root = _filesystem(results_dir)
    with tempfile.TemporaryDirectory(prefix="numerate-shards-") as local:
        files = export_run(store, run_id, local)
        for path in [*files, None]:  # the marker last: the run is complete once it is there
            _publish_file(fs, root, f"{run_id}/{Path(path).name if path else SUCCESS}", path)
    return f"{root}/{run_id}"


_NO_RUN_ID = f"no run id ({NAMES['run_id'][1]})"


def _shown_id(run_id: str) -> str:
    """A run id that is no name, as a line shows it: escaped, as `repr` writes it, and cut."""
    return shorten(repr(run_id), 80)


@dataclass(frozen=True)
class Location:
    """Where an ingest reads from (`as_location`): the folder of shards, the runs refused
    before it (shown, why) and, from a database file, its NumGen runs (not moved)."""

    folder: str
    refused: list[tuple[str, str]] = field(default_factory=list)
    numgen: list[str] = field(default_factory=list)


def in_its_tables(reason: str) -> str:
    """Why a run of a database file was skipped, in the file's words: its runs travel as
    temporary shards (`as_location`), whose files and row numbers its user never saw
    (`responses.parquet row 1: ...` is `table responses: ...`)."""
    return _SHARD_ROW.sub(lambda found: f"table {found[1]}", reason)


_SHARD_ROW = re.compile(
    rf"(?:^|(?<=[\s(]))({'|'.join(SHARD_TABLES)})\.parquet(?: row \d+)?(?=[\s:),]|$)"
)
"""A shard's name (and row) as the checks write it, not inside a quoted value ('cases.parquet'
is a model's name numerate takes)."""


@contextlib.contextmanager
def as_location(source: str) -> Iterator[Location]:
    """A results location to ingest from: `source` itself, or, where it is a results database
    file, a temporary folder holding the runs that ended (finished, degraded or failed: a
    worker publishes those) as shards (moving a file's runs into a lake, or another file: each
    run once, checked and graded like any worker's shards). A run that has not ended
    (running, or interrupted: it resumes where it is) and one whose id is no name (`../x`,
    changed by hand) are refused, the latter's folder never named. NumGen runs are not moved
    (shards hold reasoning runs): their ids are listed, so that none is passed over in
    silence. A lake is refused, in words (it was "no results location at" the lake)."""
    if is_lake(source):
        raise ConfigError(
            f"{source} is a lake: ingest loads a folder of run shards or a results database "
            "file into --db; a lake's runs are read where they are (--db with the lake)"
        )
    if not (Path(source).is_file() and is_duckdb_database(Path(source))):
        yield Location(source)
        return
    refused: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="numerate-moving-") as folder:
        origin = Store.open(source)
        try:
            runs = origin.query(
                f"SELECT run_id, status IN {RUN_ENDED}, status FROM runs ORDER BY started_at"
            )
            numgen = [
                _shown_id(run_id) if name_problem("run_id", run_id) else run_id
                for (run_id,) in origin.query("SELECT run_id FROM numgen_runs ORDER BY run_id")
            ]
            for run_id, ended, status in runs:
                if name_problem("run_id", run_id):
                    refused.append((_shown_id(run_id), f"its id is {_NO_RUN_ID}"))
                elif not ended:
                    refused.append((run_id, f"it is {status}, not ended: resume it (the same "
                                            "`numerate run`), then ingest again"))  # fmt: skip
                else:
                    publish_run(origin, run_id, folder)
        finally:
            Store.release(source)
        if len(refused) == len(runs):  # each named (it said the first of two running runs)
            said = [f"run {run_id}: {why}" for run_id, why in refused]
            parts = [some_of(said, 3, between="; ")] if said else []
            parts += [numgen_not_moved(numgen)] if numgen else []
            why = f" ({'; '.join(parts)})" if parts else ""
            raise ConfigError(f"results database {source} holds no run that ended to load{why}")
        yield Location(folder, refused, numgen)


def numgen_not_moved(runs: list[str]) -> str:
    """What an ingest says of a database file's NumGen runs, which it does not move."""
    return (
        f"{len(runs)} NumGen run(s) not moved, as ingest moves reasoning runs only: "
        f"{some_of(runs, 10)}"
    )


def _publish_file(fs: Any, root: str, relative: str, source: str | None) -> None:
    """A local file (or, without `source`, an empty one) copied to `root`/`relative` under a
    temporary name of its own and renamed: in a local folder through no link below `root`
    (numerate.kernel.confined), elsewhere under an unpredictable `.partial` name."""
    from fsspec.implementations.local import LocalFileSystem

    if isinstance(fs, LocalFileSystem):

        def copy(handle: BinaryIO) -> None:
            if source is not None:
                with open(source, "rb") as original:
                    shutil.copyfileobj(original, handle)

        Path(root).mkdir(parents=True, exist_ok=True)  # the user's: reached through links too
        Confined(root).write(relative, copy)
        return
    destination = f"{root}/{relative}"
    fs.makedirs(destination.rsplit("/", 1)[0], exist_ok=True)
    if source is None:
        fs.pipe_file(destination, b"")
        return
    partial = f"{destination}.{secrets.token_hex(8)}.partial"
    fs.put_file(source, partial)
    fs.mv(partial, destination)


def export_run(store: Store, run_id: str, folder: str) -> list[str]:
    """Write the run's rows as one Parquet file per table into a local folder (one session)."""
    written = []
    with store.session() as con:
        for table, query in SHARD_TABLES.items():
            target = str(Path(folder) / f"{table}.parquet")
            con.execute(
                f"COPY ({query.replace('$run', '$1')}) TO {sql_literal(target)} "
                f"(FORMAT parquet, ROW_GROUP_SIZE {SHARD_ROW_GROUP})",
                [run_id],
            )
            written.append(target)
    return written


def ingested(store: Store, run_id: str) -> bool:
    return bool(store.query("SELECT 1 FROM ingested_shards WHERE run_id = ?", [run_id]))


def ingest_run(
    store: Store, run_id: str, folder: str, source: str, grade: Callable[[Store, str], object]
) -> None:
    """Load a run's Parquet shards (a local folder): checked (numerate.store.shard_checks),
    loaded and graded (`grade`: a store and the run id) on a database of their own in the
    folder, then written into `store` in one transaction. A ShardError, or the grader's own
    error, leaves nothing of the run written. Loading the same run again changes nothing
    (two ingests of one location at once are harmless). Every step is in DuckDB within the
    writer's bound (numerate.store.writer.WRITER_MEMORY), whatever the run's size."""
    files = {
        table: str(Path(folder) / f"{table}.parquet")
        for table in SHARD_TABLES
        if table not in OPTIONAL_SHARD_TABLES or (Path(folder) / f"{table}.parquet").exists()
    }
    problem = run_problem(files, run_id)  # before the database is held
    if problem:
        raise ShardError(problem)
    graded = str(Path(folder) / "graded.duckdb")
    _grade_apart(files, run_id, grade, graded)

    def loaded(con: Any) -> None:
        problem = database_problem(con, files)  # again on each try: another ingest's run
        if problem:
            raise ShardError(problem)
        for table in SHARD_TABLES:
            insert_table(con, table, f"{GRADED}.main.{table}")
        ingested = {"run_id": run_id, "source": source, "ingested_at": now()}
        insert_rows(con, "ingested_shards", tuple(ingested), [ingested])

    with store.session() as con:
        con.execute(f"ATTACH {sql_literal(graded)} AS {GRADED} (READ_ONLY)")
        try:
            store.write(loaded)
        finally:
            con.execute(f"DETACH {GRADED}")


GRADED = "numerate_graded"
"""The name an ingest's graded run has in the session that writes it into the database."""


def _grade_apart(
    files: dict[str, str], run_id: str, grade: Callable[[Store, str], object], path: str
) -> None:
    """Each table's rows of the run as they are to be stored, in a database file of their
    own at `path`: loaded, long answers cut, graded there."""
    import duckdb

    scratch = Store(path)
    try:

        def copied(con: Any) -> None:
            for table, shard in files.items():
                try:  # identical rows twice are one (shard_checks refused different ones)
                    rows = distinct_rows(table, f"read_parquet({sql_literal(shard)})")
                    con.execute(
                        f"INSERT INTO {table} BY NAME SELECT {SHARD_ROWS.get(table, '*')} "
                        f"FROM ({rows})"
                    )
                except duckdb.Error as error:  # said by the table, not the local copy's path
                    raise ShardError(f"{table}.parquet: {_unreadable(error)}") from None
            _cut_long_answers(con)
            for table in LONG_TEXTS:  # a shard of before schema 17 holds long texts whole
                split_in_place(con, table)

        scratch.write(copied)
        grade(scratch, run_id)
    finally:
        scratch.close()


def _cut_long_answers(con: Any) -> None:
    """The answers longer than numerate.kernel.answers.MAX_ANSWER_CHARS, stored cut as an
    endpoint's are (with the flag and the length they had), before they are graded: on the
    database of its own that holds the one run being ingested."""
    for table, text, flag, chars in (
        ("responses", "raw_text", "raw_cut", "raw_chars"),
        ("completions", "text", "text_cut", "text_chars"),
        ("completions", "reasoning", "reasoning_cut", "reasoning_chars"),
        ("responses", "reasoning", "reasoning_cut", "reasoning_chars"),
    ):
        con.execute(
            f"UPDATE {table} SET {chars} = length({text}), {flag} = true, "
            f"{text} = {cut_sql(text)} WHERE length({text}) > {MAX_ANSWER_CHARS}"
        )


class ShardError(StoreError):
    """A run's shards hold what its run cannot: rows of another run, unknown outcomes, a
    negative token count, a name no config takes, an answer to a case they lack."""


def check_writable(results_dir: str) -> None:
    """Raise ConfigError unless shards can be published to `results_dir` (checked before a
    run starts, so that a finished run never fails to publish)."""
    fs, root = _filesystem(results_dir)
    if fs.exists(root) and not fs.isdir(root):
        raise ConfigError(f"results_dir {results_dir!r}: a file, not a folder")
    probe = f"{root}/.numerate-write-check"
    try:
        fs.makedirs(root, exist_ok=True)
        fs.pipe_file(probe, b"")
        fs.rm(probe)
    except OSError as error:
        reason = error.strerror or str(error)
        raise ConfigError(f"results_dir {results_dir!r} cannot be written: {reason}") from None


def complete_runs(results_dir: str) -> list[str]:
    """Run ids whose shards are complete in the results location, sorted."""
    return run_folders(results_dir)[0]


def run_folders(results_dir: str) -> tuple[list[str], list[str]]:
    """The results location's folders, from one listing: the run ids whose shards are
    complete, and the names of the folders without the marker a published run ends with (a
    run still being published, or no run's folder; a link to a folder among them), each
    sorted."""
    try:
        return _run_folders(results_dir)
    except OSError as error:  # a share that went away, a listing refused
        raise ConfigError(
            f"results location {results_dir} cannot be read: {error.strerror or error}"
        ) from None


def _run_folders(results_dir: str) -> tuple[list[str], list[str]]:
    fs, root = _filesystem(results_dir)
    if not fs.exists(root):
        missing = None if "://" in results_dir else missing_link_target(Path(results_dir))
        if missing:  # "no results location" sent the user looking for a typo
            raise ConfigError(f"results location {results_dir} is {missing}")
        raise ConfigError(f"no results location at {results_dir}")
    if not fs.isdir(root):
        kind = "a file" if fs.isfile(root) else "something else"  # a DuckDB file: as_location
        raise ConfigError(
            f"results location {results_dir} is {kind}, neither a results database (a DuckDB "
            "file) nor a folder of run shards"
        )
    complete, unfinished = [], []
    for entry in fs.ls(root, detail=True):
        name = PurePosixPath(entry["name"]).name
        # a local marker that is a link counts (never followed): ingest refuses its run, named
        if fs.lexists(f"{entry['name']}/{SUCCESS}"):
            complete.append(name)
        elif entry.get("type") != "file":  # a folder, or a link (to one)
            unfinished.append(_shown_id(name) if name_problem("run_id", name) else name)
    return sorted(complete), sorted(unfinished)


def require_complete_runs(results_dir: str) -> list[str]:
    """`complete_runs`, or a ConfigError saying why the location holds none: a location with
    nothing to load is a wrong path far more often than an ingest with nothing to do (a run's
    own folder, the folder above the location, runs still being published)."""
    runs, folders = run_folders(results_dir)
    if runs:
        return runs
    fs, root = _filesystem(results_dir)
    if fs.exists(f"{root}/{SUCCESS}"):
        parent = PurePosixPath(results_dir.rstrip("/")).parent
        raise ConfigError(
            f"results location {results_dir} is one run's folder (it holds {SUCCESS}): give "
            f"the folder of run folders, {parent}"
        )
    if not folders:
        raise ConfigError(
            f"results location {results_dir} holds no run folder (runs publish to "
            "<results_dir>/<run id>/)"
        )
    raise ConfigError(
        f"results location {results_dir} holds no complete run: none of its {len(folders)} "
        f"folder(s) ({some_of(folders, 3)}) has the {SUCCESS} marker a "
        "published run ends with (still being published, or not run folders?)"
    )


def unfinished_note(results_dir: str, folders: list[str]) -> str:
    """What an ingest says of the folders without a marker (`run_folders`; a warning: a
    later ingest loads those that are runs still being published)."""
    return (
        f"{len(folders)} folder(s) of {results_dir} not loaded, without the {SUCCESS} marker "
        f"a published run ends with (still being published, or not a run's folder): "
        f"{some_of(folders, 10)}"
    )


@dataclass
class Ingested:
    """What an ingest did: the runs it loaded, those it skipped with why, those it had."""

    loaded: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    """Runs the database holds already, made in it (not ingested)."""
    before: list[str] = field(default_factory=list)
    """Runs an earlier ingest loaded (each is loaded once)."""
    unfinished: list[str] = field(default_factory=list)
    """Folders of the location without the marker a published run ends with (`run_folders`):
    not loaded."""


def ingest(store: Store, results_dir: str, grade: Callable[[Store, str], object]) -> Ingested:
    """Load every complete run not ingested yet, each graded by `grade` (a store of its own
    holding the run, its id) before it is written. A run whose shards cannot be read (a file
    missing or truncated), or hold what no run of numerate's can (shard_checks), or whose
    answers cannot be graded, is skipped, named with why, and the others are loaded; nothing
    of a skipped run is written, so the next ingest tries it again."""
    import duckdb

    fs, root = _filesystem(results_dir)
    local_files = _confined(fs, root)
    runs, unfinished = run_folders(results_dir)
    done = Ingested(unfinished=unfinished)
    for run_id in runs:
        if name_problem("run_id", run_id):  # a folder no run of numerate's is named
            done.skipped.append((_shown_id(run_id), f"its folder's name is {_NO_RUN_ID}"))
            continue
        if ingested(store, run_id):
            done.before.append(run_id)
            continue
        if store.query("SELECT 1 FROM runs WHERE run_id = ?", [run_id]):
            done.present.append(run_id)  # made in this database: nothing to load
            continue
        source = f"{results_dir.rstrip('/')}/{run_id}"
        with tempfile.TemporaryDirectory(prefix="numerate-ingest-") as local:
            try:
                if local_files is not None:  # a marker that is a link: refused, as a shard
                    local_files.open(f"{run_id}/{SUCCESS}").close()
                for table in SHARD_TABLES:
                    shard = f"{root}/{run_id}/{table}.parquet"
                    if not fs.exists(shard):
                        if table in OPTIONAL_SHARD_TABLES:
                            continue  # published before the table existed
                        raise ShardError(f"{table}.parquet is missing, beside its {SUCCESS}")
                    _fetch(fs, local_files, f"{run_id}/{table}.parquet", shard, local)
                ingest_run(store, run_id, local, source, _graded_or_refused(grade))
            except (ShardError, LeadsOutside) as error:
                done.skipped.append((run_id, str(error)[:300]))
                continue
            except (OSError, duckdb.Error) as error:  # named by the shard, not the local copy
                said = _unreadable(error).replace(local, source)[:300]
                done.skipped.append((run_id, f"its shards cannot be read: {said}"))
                continue
        done.loaded.append(run_id)
    return done


def _unreadable(error: BaseException) -> str:
    """Why a shard could not be read, in one line: a value larger than a run of numerate's
    holds (an answer of 40 million characters) said as such, not in DuckDB's words alone."""
    memory = out_of_memory(error)
    if memory:
        return (
            f"a value too large to read in the {WRITER_MEMORY} numerate lets DuckDB hold "
            f"(no shard a run publishes holds one; {memory})"
        )
    return first_line(error)


def _confined(fs: Any, root: str) -> Confined | None:
    """The results location as a confined folder when it is a local one (a shard there that
    is a symbolic link is refused, never followed out of it), else None."""
    from fsspec.implementations.local import LocalFileSystem

    return Confined(root) if isinstance(fs, LocalFileSystem) else None


def _fetch(fs: Any, local_files: Confined | None, relative: str, shard: str, local: str) -> None:
    """A shard copied into the local folder `local` (by its file name) to be read there."""
    target = f"{local}/{PurePosixPath(relative).name}"
    if local_files is None:
        fs.get_file(shard, target)
        return
    with local_files.open(relative) as original, open(target, "wb") as copy:
        shutil.copyfileobj(original, copy)


def _graded_or_refused(grade: Callable[[Store, str], object]) -> Callable[[Store, str], object]:
    """`grade`, whose failure on what a shard holds (a case its manifold cannot read, an
    answer the aggregates cannot place) is a ShardError; the database's own stays its own."""

    def graded(store: Store, run_id: str) -> object:
        try:
            return grade(store, run_id)
        except StoreError:
            raise
        except (NumerateError, ValueError, LookupError, TypeError) as error:
            raise ShardError(f"its answers cannot be graded: {first_line(error)}") from None

    return graded
