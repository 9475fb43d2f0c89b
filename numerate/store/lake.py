"""A results database that is a DuckLake: its catalog in PostgreSQL, its rows as Parquet files
in a shared folder, written from every machine at once (docs/sharing.md, "A team's lake").

A lake is named `ducklake:postgres:<libpq connection string>`, e.g.
`ducklake:postgres:dbname=lake host=127.0.0.1 port=5432 user=numerate`, wherever a results
database is named (`--db`, `db:`, NUMERATE_DB). Its data folder comes from NUMERATE_LAKE_DATA
when the lake is made, and from its catalog afterwards. The password is libpq's PGPASSWORD,
never part of the name: a name is stored with runs and shown in logs.

DuckDB's `ducklake` and `postgres_scanner` extensions come from their PyPI wheels (pinned in
constraints.txt) and are loaded from the files those wheels install: nothing is downloaded.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import importlib.util
import os
import re
import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from numerate.kernel.credentials import register_secret
from numerate.kernel.errors import shorten
from numerate.store.duckdb_words import sql_literal, unquoted
from numerate.store.schema import StoreError, StoreFailedForNow

PREFIX = "ducklake:"
POSTGRES = "ducklake:postgres:"
ALIAS = "numerate_lake"
"""The name the lake is attached under in a process's DuckDB."""

ATTACH_TRIES = 5
CONNECT_TIMEOUT_S = 10
"""How long a connection to the lake's PostgreSQL may take, unless its name says
(`connect_timeout=`)."""
DATA_ENV = "NUMERATE_LAKE_DATA"
SECRET_ENV = "NUMERATE_LAKE_SECRET"
"""Names a Prefect Secret block that holds the PostgreSQL password (used when PGPASSWORD is
unset), as a model's `api_key_secret` does for its key."""
EXTENSIONS = {"ducklake": "duckdb_extension_ducklake",
              "postgres_scanner": "duckdb_extension_postgres_scanner"}  # fmt: skip
"""Each extension a lake needs, and the Python package (PyPI wheel) that holds its file."""

_PASSWORD = re.compile(
    r"(^|\s)password\s*=|^postgres(?:ql)?://[^/?#@]*:[^/?#@]*@|[?&]password=", re.IGNORECASE
)
"""A password in a libpq connection string: `password=...`, or a URI's `user:password@` or
`?password=...` (printed, and stored with the runs, as every other form would be)."""
_URI = re.compile(r"^postgres(?:ql)?://", re.IGNORECASE)


def is_lake(location: str) -> bool:
    """Whether a results database's name is a lake's (`ducklake:...`), not a file's."""
    return location.startswith(PREFIX)


def connection_string(location: str) -> str:
    """The libpq connection string of a lake's name; StoreError, in the user's words, when it
    is not a PostgreSQL lake's name or holds a password."""
    shown = shorten(repr(location), 200)
    if not location.startswith(POSTGRES):
        raise StoreError(
            f"results database {shown}: a lake's catalog must be PostgreSQL, named "
            f"'{POSTGRES}<connection string>' (e.g. '{POSTGRES}dbname=lake host=127.0.0.1')"
        )
    conninfo = location[len(POSTGRES) :].strip()
    if not conninfo:
        raise StoreError(
            f"results database {shown}: no PostgreSQL connection string after '{POSTGRES}' "
            "(e.g. 'dbname=lake host=127.0.0.1 port=5432 user=numerate')"
        )
    if _PASSWORD.search(conninfo):
        raise StoreError(
            f"results database {POSTGRES}...: the connection string holds a password; give "
            "it in PGPASSWORD instead (a database's name is stored with its runs and logged)"
        )
    if "\x00" in conninfo:
        raise StoreError(f"results database {shown}: a NUL character in the connection string")
    if "connect_timeout" not in conninfo:  # libpq waits for an unanswering host for ever
        if _URI.match(conninfo):  # a URI's parameters follow `?` (a word after it was taken
            joined = "&" if "?" in conninfo else "?"  # for its database's name)
            conninfo += f"{joined}connect_timeout={CONNECT_TIMEOUT_S}"
        else:
            conninfo += f" connect_timeout={CONNECT_TIMEOUT_S}"
    return conninfo


def extension_file(name: str) -> Path:
    """The file of one extension, from its installed wheel, for this DuckDB's version;
    StoreError saying what to install when there is none."""
    import duckdb

    package = EXTENSIONS[name]
    spec = importlib.util.find_spec(package)
    version = f"v{duckdb.__version__}"
    install = f"pip install -c constraints.txt '.[lake]' (the {package} wheel)"
    if spec is None or not spec.submodule_search_locations:
        raise StoreError(f"a DuckLake needs DuckDB's {name} extension: {install}")
    for folder in spec.submodule_search_locations:
        found = Path(folder) / "extensions" / version / f"{name}.duckdb_extension"
        if found.is_file():
            return found
    raise StoreError(
        f"a DuckLake needs DuckDB's {name} extension for DuckDB {duckdb.__version__}, and "
        f"{package} holds none for it: {install}"
    )


def attach(con: Any, location: str, read_only: bool = False) -> None:
    """Attach the lake `location` to `con` as ALIAS and use it. An existing lake's catalog
    says where its files are, whatever NUMERATE_LAKE_DATA says (set for another lake, or a
    folder mounted elsewhere: every command failed with DuckDB's "does not match existing
    data path"); a new one is made with NUMERATE_LAKE_DATA's folder (`new_lake_folder`).
    StoreError, in the user's words, when it cannot be reached."""
    conninfo = connection_string(location)
    _password_from_secret()
    load_extensions(con)
    options = ["READ_ONLY"] if read_only else []
    try:
        _attached(con, location, conninfo, options)
    except _NewLake:
        folder = new_lake_folder(location)
        _attached(con, location, conninfo, [*options, f"DATA_PATH {sql_literal(folder)}"])
    con.execute(f"USE {ALIAS}")


class _NewLake(Exception):
    """The catalog holds no lake yet, and the attachment gave no folder to make one with."""


def _attached(con: Any, location: str, conninfo: str, options: list[str]) -> None:
    import duckdb

    listed = f" ({', '.join(options)})" if options else ""
    for attempt in range(ATTACH_TRIES):
        try:
            con.execute(f"ATTACH {sql_literal(POSTGRES + conninfo)} AS {ALIAS}{listed}")
            return
        except duckdb.Error as error:
            if "data_path is not set" in str(error):  # "Attempting to create a new ducklake
                raise _NewLake from None  # instance but data_path is not set"
            # two processes that open a new lake at once both make its catalog's tables: the
            # second fails (PostgreSQL's duplicate key), then finds them made
            if attempt == ATTACH_TRIES - 1 or "Failed to initialize DuckLake" not in str(error):
                raise cannot_reach(f"cannot open lake {location}", error) from None
            time.sleep(0.1 * 2**attempt)


def new_lake_folder(location: str) -> str:
    """The folder a new lake's files go to: NUMERATE_LAKE_DATA's, made now and absolute when
    it is a local path (the catalog keeps the path it was made with for good: a lake made on
    a file, or on a folder it could not write, failed every command after, and a relative
    path would mean another folder in each working directory). StoreError naming it when it
    is unset or cannot be used."""
    data = os.environ.get(DATA_ENV, "").strip()
    shown = f"cannot make lake {location}: {DATA_ENV}={shorten(repr(data), 200)}"
    if not data:
        raise StoreError(
            f"cannot make lake {location}: a new lake needs a folder for its files: set "
            f"{DATA_ENV} (a folder every machine that writes the lake can reach)"
        )
    if "://" in data:  # a store DuckDB reaches itself (s3://...)
        return data
    folder = Path(data).expanduser().absolute()  # `~/lake` as a shell would
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise StoreError(f"{shown}: that is a file, not a folder for the lake's files") from None
    except OSError as error:
        raise StoreError(f"{shown}: cannot make that folder: {error.strerror}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(f"{shown}: the folder cannot be written by this user")
    return str(folder) + os.sep


def load_extensions(con: Any) -> None:
    """Load the extensions a lake needs (EXTENSIONS) into `con`'s DuckDB, from their wheels'
    files; loading one already loaded does nothing."""
    for name in EXTENSIONS:
        con.execute(f"LOAD {sql_literal(str(extension_file(name)))}")


def _password_from_secret() -> None:
    """PGPASSWORD (which libpq reads) from the Prefect Secret block SECRET_ENV names, when
    PGPASSWORD is unset; registered so that no text numerate shows or stores holds it."""
    name = os.environ.get(SECRET_ENV, "").strip()
    if not name or os.environ.get("PGPASSWORD"):
        return
    from prefect.blocks.system import Secret

    def load() -> str:  # in a thread of its own: Prefect's `load` is a coroutine in a loop
        block: Any = Secret.load(name)  # no loop in this thread: the block itself
        return str(block.get())

    try:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            password = pool.submit(load).result()
    except ValueError:
        raise StoreError(f"{SECRET_ENV}={name!r}: no Prefect Secret block of that name") from None
    register_secret(password)
    os.environ["PGPASSWORD"] = password


AWAY = (
    "Connection refused", "timeout expired", "Connection timed out", "No route to host",
    "server closed the connection unexpectedly", "could not receive data from server",
    "no connection to the server", "the database system is starting up",
    "the database system is shutting down", "terminating connection due to administrator",
    "too many clients already", "remaining connection slots are reserved",
    "the database system is in recovery mode", "is not yet accepting connections",
    "Is the server running",
)  # fmt: skip
"""libpq's and PostgreSQL's words for a server that cannot serve now (stopped, restarting,
recovering from a crash, unreachable, full), which the same command later may find serving:
not bad input. libpq's "Is the server running ...?" follows a refused connection and a
socket that is not there: a host, a port or a socket where nothing answers now."""


POSTGRES_SAID = ("Unable to connect to Postgres", "Failed to prepare", "Failed to execute query",
                 "Failed to fetch", "DuckLake")  # fmt: skip
"""How DuckDB's PostgreSQL extension, and DuckLake above it, begin what libpq told them
(`Failed to prepare COPY "...": server closed the connection unexpectedly`, `Failed to get
data file list from DuckLake: Failed to fetch header for COPY: FATAL: terminating
connection due to administrator command`)."""


def _libpq_said(text: str) -> str | None:
    """libpq's reason in a DuckDB error or a psycopg one (the words after the connection
    string or the query DuckDB quotes, and after libpq's `connection to server at ...
    failed: `), or None when the error is not libpq's."""
    if any(words in text for words in POSTGRES_SAID):  # `... "<conninfo or query>": <libpq's>`
        text = text.rpartition('": ')[2] or text
    elif not text.startswith("connection failed: "):  # psycopg's
        return None
    return text.rpartition(" failed: ")[2] if " failed: " in text else text


def _one_line(error: BaseException) -> str:
    """An error's text in one line, without the query DuckDB may quote after it (`LINE 2:
    SELECT * FROM postgres_query(...`)."""
    return " ".join(str(error).partition("\nLINE ")[0].split()) or type(error).__name__


def unreachable(error: BaseException) -> str | None:
    """What libpq or PostgreSQL said when a lake's catalog cannot serve now (AWAY), in one
    line; None for any other error. The words count in psycopg's errors, and in DuckDB's
    where its PostgreSQL extension speaks (POSTGRES_SAID), whatever their kind (an IO
    Error, a Binder Error, one of no kind were seen), outside what the error quotes: a value
    may hold any words (an endpoint's error, stored: "Could not convert string 'Failed to
    fetch ...: Connection refused'", a column named "DuckLake: Connection refused")."""
    text = _one_line(error)
    own = unquoted(text)  # a value a query's error quotes is no server's word
    if not type(error).__module__.startswith("psycopg") and not any(
        words in own for words in POSTGRES_SAID
    ):
        return None
    if not any(words in own for words in AWAY):
        return None
    return shorten(_libpq_said(text) or text, 300)


def away(location: str, error: BaseException) -> StoreError | None:
    """For a lake `location` whose PostgreSQL does not answer now, the StoreFailedForNow that
    says so (a writer's session, a reader's query failed with `error`); else None. The error
    says so (`unreachable`), or PostgreSQL is asked: an error met after the connection was
    lost may say nothing of it ("Attempting to fetch from an unsuccessful query result ...
    Current transaction is aborted", `Failed to execute query "ROLLBACK": `)."""
    if not is_lake(location):
        return None
    silent = error if unreachable(error) else _silent(location)
    return cannot_reach(f"results database {location}", silent) if silent else None


def _silent(location: str) -> BaseException | None:
    """The error of a connection made now to the lake's PostgreSQL, when it does not answer
    (`unreachable`); None when it does, or cannot be asked (no psycopg)."""
    try:
        import psycopg
    except ImportError:
        return None
    _password_from_secret()
    try:
        psycopg.connect(connection_string(location), application_name="numerate check").close()
    except psycopg.Error as error:
        return error if unreachable(error) else None
    return None


def cannot_reach(what: str, error: BaseException) -> StoreError:
    """`what` (`cannot open lake L`) failed on PostgreSQL: StoreFailedForNow (exit 3: the
    same command goes on once it serves) when it cannot serve now, else StoreError (exit 2:
    a database, a role, a password or a port that is wrong), with libpq's reason."""
    away = unreachable(error)
    if away:
        return StoreFailedForNow(
            f"{what}: PostgreSQL does not answer now ({away}); the same command goes on once "
            "it does"
        )
    text = _one_line(error)  # libpq's words say what is wrong: no verb of numerate's
    return StoreError(f"{what}: {shorten(_libpq_said(text) or text, 300)}")


CLAIM_KEEPALIVES = {"tcp_keepalives_idle": 30, "tcp_keepalives_interval": 10,
                    "tcp_keepalives_count": 3}  # fmt: skip
"""How PostgreSQL finds a claiming machine gone (its power lost, its network cut) and lets its
claims go: 30 s of silence, then three probes 10 s apart (a killed process's go at once)."""


class RunClaim:
    """A run of a lake held by this process, from any machine: a PostgreSQL advisory lock in a
    session of its own (released when the claim is, or when the session ends: its process
    killed, its machine gone; CLAIM_KEEPALIVES)."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def release(self) -> None:
        """Let the run go, at once: a reader asking next finds it free. The session's end
        releases the lock too, but after the close returns (PostgreSQL's backend ends on its
        own time: a `runs` at that moment still saw the run held)."""
        with contextlib.suppress(Exception):  # a session already gone holds nothing
            self._session.execute("SELECT pg_advisory_unlock_all()")
        self._session.close()


def claim_run(location: str, run_id: str) -> RunClaim | None:
    """Hold run `run_id` of the lake `location` for this process; None when a live process
    (on any machine) holds it. StoreError, in the user's words, when PostgreSQL cannot be
    reached."""
    session = _postgres(location, f"numerate run {run_id}")
    import psycopg  # there: _postgres said how to install it

    try:
        for setting, value in CLAIM_KEEPALIVES.items():
            session.execute(f"SET {setting} = {int(value)}")
        held = session.execute("SELECT pg_try_advisory_lock(%s)", [_claim_key(run_id)]).fetchone()
    except psycopg.Error as error:
        session.close()
        raise cannot_reach(f"cannot claim run {run_id} in lake {location}", error) from None
    if not held or not held[0]:
        session.close()
        return None
    return RunClaim(session)


def runs_held(location: str, run_ids: Collection[str]) -> set[str]:
    """Those of `run_ids` that a live process (on any machine) holds in the lake: their
    claims' locks (`claim_run`) granted, read from PostgreSQL's `pg_locks`, which takes no
    lock (trying a lock would make a resume that comes at that moment fail its claim)."""
    if not run_ids:
        return set()
    keys = {_claim_key(run_id) & 0xFFFF_FFFF_FFFF_FFFF: run_id for run_id in run_ids}
    with contextlib.closing(_postgres(location, "numerate reader")) as session:
        import psycopg  # there: _postgres said how to install it

        try:  # pg_locks: a key's halves as unsigned oids (joined here: as one bigint in SQL,
            granted = session.execute(  # a negative key's overflowed)
                "SELECT classid::bigint, objid::bigint FROM pg_locks "
                "WHERE locktype = 'advisory' AND granted AND objsubid = 1 AND "
                "database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            ).fetchall()
        except psycopg.Error as error:
            raise cannot_reach(f"cannot read lake {location}", error) from None
    return {keys[key] for high, low in granted if (key := high << 32 | low) in keys}


def _claim_key(run_id: str) -> int:
    """The advisory lock (64 bits, signed) that holds run `run_id` of a lake."""
    digest = hashlib.sha256(f"numerate run {run_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _postgres(location: str, name: str) -> Any:
    """A session of the lake's PostgreSQL (autocommit) named `name` for its administrators;
    StoreError, in the user's words, when psycopg is missing or PostgreSQL cannot be
    reached."""
    try:
        import psycopg
    except ImportError:  # the extensions' wheels installed by hand, without the extra
        raise StoreError(
            "a DuckLake's runs are claimed in its PostgreSQL with psycopg: "
            "pip install -c constraints.txt '.[lake]'"
        ) from None
    _password_from_secret()
    try:
        return psycopg.connect(
            connection_string(location), autocommit=True, application_name=name[:63]
        )
    except psycopg.Error as error:
        raise cannot_reach(f"cannot open lake {location}", error) from None


_READING: dict[str, Any] = {}
"""This process's one read-only attachment of each lake it reads (`read_only`)."""
_LOADED: dict[str, Any] = {}
"""This process's DuckDB for reading each lake, its extensions loaded (`load_for_reading`)."""
_READING_LOCK = threading.RLock()


def load_for_reading(location: str) -> Any:
    """This process's DuckDB for reading the lake `location`, with the lake's extensions
    loaded, once a process (0.16-0.25 s on an idle machine: a start-up cost, like an import,
    which a reader's wait does not count: numerate.store.reader)."""
    import duckdb

    with _READING_LOCK:
        con = _LOADED.get(location)
        if con is None:
            con = _LOADED[location] = duckdb.connect()
            load_extensions(con)
        return con


def read_only(location: str) -> Any:
    """A connection that reads the lake `location` and nothing else: a cursor of this
    process's one read-only attachment of it, made on first use (loading the extensions and
    reaching PostgreSQL take 0.2 s, most of a second on a busy machine: each page of
    `numerate view` paid it). Each query sees the lake's latest snapshot (tested), and the
    attachment outlives a restart of PostgreSQL (measured)."""
    with _READING_LOCK:
        attached = _READING.get(location)
        if attached is None:
            attached = _READING[location] = _reading(location)
        cursor = attached.cursor()  # not thread-safe on one connection: under the lock
    cursor.execute(f"USE {ALIAS}")
    return cursor


def _reading(location: str) -> Any:
    """The lake's catalog attached read-only, its data folder the only one DuckDB may read
    (as a file database's readers, which may read no file: the SQL of `numerate db` is the
    user's; no spill folder either: numerate.store.reader.READ_ONLY_CONFIG), its settings
    locked."""
    con = load_for_reading(location)
    attach(con, location, read_only=True)  # its extensions loaded already: no load again
    data = con.execute(f"SELECT data_path FROM ducklake_settings('{ALIAS}')").fetchall()[0][0]
    con.execute("SET temp_directory = ''")  # else its spill folder, `.tmp` in the working
    con.execute(f"SET allowed_directories = [{sql_literal(data)}]")  # directory, may be read
    con.execute("SET autoinstall_known_extensions = false")  # it may install none: DuckDB
    con.execute("SET autoload_known_extensions = false")  # then says whose function it is
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
    return con


MAINTENANCE = {
    "tables whose inlined rows went to files": "ducklake_flush_inlined_data('{lake}')",
    "tables whose small files were merged": "ducklake_merge_adjacent_files('{lake}')",
    "snapshots expired (older than 7 days)": (
        "ducklake_expire_snapshots('{lake}', older_than => now() - INTERVAL '7 days')"
    ),
    "files removed (no snapshot needs them)": (
        "ducklake_cleanup_old_files('{lake}', older_than => now() - INTERVAL '1 hour')"
    ),
}
"""DuckLake's own maintenance, in order, as `numerate upgrade` runs it on a lake: the rows
small commits left in the catalog (inlined: DuckLake keeps an insert of fewer than 10 rows
there, as a run's answers arrive) written to Parquet files, each table's small files merged
into larger ones, snapshots older than a week expired (time travel reaches a week back), and
the files that no snapshot needs any longer, scheduled for removal an hour ago or more
(a reader's query never lasts that long), removed."""


def maintain(con: Any) -> dict[str, int]:
    """Run MAINTENANCE on the lake attached to `con`; what each step did (rows it reported)."""
    return {
        what: len(con.execute(f"CALL {call.format(lake=ALIAS)}").fetchall())
        for what, call in MAINTENANCE.items()
    }
