"""Holding the results database for a moment: DuckDB's file lock, waited for within a bound.

DuckDB lets one process at a time open a database file for writing, and none open it (not even
read-only) while a writer has it. numerate's writers and readers therefore hold the file only for
short sessions and close it between them; a process that finds it held waits with jittered,
growing pauses (5 ms up to 0.2 s) until it is free, up to `lock_timeout_s()` (NUMERATE_LOCK_TIMEOUT,
default 600 s). A wait longer than a second is said once, naming the process that holds the file,
and again every 30 s. The lock is the operating system's: a process that dies, however it dies,
holds nothing afterwards.

A process that has waited KNOCK_AFTER_S says so with a file in `<db>.waiting/` (its pid, and
whether it waits to read or to write), removed when its wait ends: a process that must read for
long (an export of thousands of pages) checks `waiting_writers` between pieces of work and lets
the file go for their turn (numerate.store.reader.Reader.let_writers_in), so writers never wait
for the whole of it. A process about to open the file lets those of the other kind that knocked
before it go first (`let_go_first`): a reader waits until the writers that waited when it came
are in (readers share the file, so readers that each hold it for long, one after another, kept
a writer out for good), and a writer's sessions in a row let a waiting reader in within
TURN_S. A folder where no such file can be made only loses that courtesy.

With NUMERATE_LOCK_LOG set to a file, every session appends one JSON line (pid, database, read or
write, seconds waited, seconds held): `bench/contention.py` reads them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from numerate.kernel.credentials import scrub_command_line
from numerate.kernel.errors import for_terminal
from numerate.kernel.files import open_to_append
from numerate.kernel.progress import current
from numerate.store.duckdb_words import JITTER, is_lock_conflict, sql_literal
from numerate.store.schema import StoreError, StoreFailedForNow

__all__ = [
    "DatabaseBusy",
    "attach",
    "connect",
    "detach",
    "held",
    "holder",
    "hurried",
    "hurry",
    "let_go_first",
    "lock_timeout_s",
    "waiting_writers",
]

logger = logging.getLogger("numerate.store")

DEFAULT_LOCK_TIMEOUT_S = 600.0
ANNOUNCE_AFTER_S = 1.0
ANNOUNCE_EVERY_S = 30.0
KNOCK_AFTER_S = 0.05
TURN_S = 2.0
"""How long a process about to open the database lets those of the other kind (readers,
writers) that wait for it go first (`let_go_first`)."""


class DatabaseBusy(StoreFailedForNow):
    """Another process held the results database for longer than this one may wait (exit 3:
    nothing is lost, and running the command again goes on)."""


_cap: float | None = None
"""When set (time.monotonic()), every wait ends by then: see `hurry`."""


def hurry(seconds: float) -> None:
    """End every wait for the file, now and later in this process, within `seconds`: a
    command that is stopping (Ctrl-C, SIGTERM) writes what it can, then leaves, instead of
    waiting the whole NUMERATE_LOCK_TIMEOUT in some thread."""
    global _cap
    _cap = time.monotonic() + seconds


@contextlib.contextmanager
def hurried(seconds: float) -> Iterator[None]:
    """`hurry` for the block only: a last write on the way out of a command that failed,
    where the process may still do other work (a test's, a caller's)."""
    global _cap
    before = _cap
    hurry(seconds)
    try:
        yield
    finally:
        _cap = before


def lock_timeout_s() -> float:
    """How long a command waits for a results database another process holds
    (NUMERATE_LOCK_TIMEOUT, seconds; default 600)."""
    raw = os.environ.get("NUMERATE_LOCK_TIMEOUT", "")
    if not raw.strip():
        return DEFAULT_LOCK_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= MAX_LOCK_TIMEOUT_S:  # 1e308 was taken: a 309-digit wait said
        raise StoreError(
            f"NUMERATE_LOCK_TIMEOUT={raw!r}: expected a number of seconds from 0 to "
            f"{MAX_LOCK_TIMEOUT_S:g} (a week)"
        )
    return value


MAX_LOCK_TIMEOUT_S = 7 * 86_400.0


_PID = re.compile(r"\(PID (\d+)\)")


def holder(error: BaseException | str) -> str | None:
    """The process DuckDB names in a lock conflict, described for a person
    ("PID 4242: numerate run --config nightly.yaml"), or None when it names none."""
    found = _PID.search(str(error))
    if not found:
        return None
    return _described(found.group(1))


def _described(pid: str) -> str:
    """A process by its pid, described for a person as `holder` describes one."""
    return f"PID {pid}" + (f": {command}" if (command := _command_line(int(pid))) else "")


def _command_line(pid: int) -> str | None:
    """A short form of a process's command line (Linux /proc), or None."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    words = [w.decode(errors="replace") for w in raw.split(b"\0") if w]
    # `python .../bin/numerate run ...`: from the program's name on; `python -m x ...`: from x
    for index, word in enumerate(words):
        if Path(word).name in ("numerate", "prefect"):
            words = [Path(word).name, *words[index + 1 :]]
            break
        if word == "-m" and index + 1 < len(words):
            words = words[index + 1 :]
            break
    text = scrub_command_line(" ".join(" ".join(words).split()))  # one line, no secret
    return for_terminal(text if len(text) <= 100 else text[:97] + "...")  # another user's


def connect(path: str, *, read_only: bool = False, config: dict[str, Any] | None = None) -> Any:
    """A DuckDB connection to `path`, waiting (bounded, visibly) while another process holds
    the file. DatabaseBusy past the bound; any other DuckDB error is raised as it is."""
    import duckdb

    return _when_free(path, lambda: duckdb.connect(path, read_only=read_only,
                                                   config=dict(config or {})),
                      "read" if read_only else "write")  # fmt: skip


ATTACHED = "numerate_results"
"""The name a writer's session gives the results database it attaches."""

ROW_GROUP_SIZE = 8192
"""Rows of a row group the writer's sessions make (DuckDB's default: 122,880). Each session
appends its rows as row groups of their own; as it lets the file go, DuckDB merges adjacent
small groups (a group with the next ones once they double it, up to three groups into fewer).
At the default size the last merges rebuild a whole 122,880-row group of `cases` in memory:
a 1,000,000-case sweep's RSS jumped by 150-230 MiB at each. At 8,192 rows a merge holds at
most three such groups; small appends (an answer every few seconds) are still merged, and the
file of the same cases is smaller (docs/benchmarks.md, "Row groups of 8,192 rows, and answers
Prefect kept (2026-11-28)")."""


def attach(con: Any, path: str) -> None:
    """Attach `path` to an open DuckDB connection as ATTACHED and make it the default database,
    waiting like `connect`. Attaching is about 8x cheaper than connecting (a new DuckDB
    instance costs some 20 ms, whatever the file): a writer keeps one in-memory instance and
    attaches the file for each session; `detach` lets it go."""

    def attached() -> None:
        con.execute(f"ATTACH {sql_literal(path)} AS {ATTACHED} (ROW_GROUP_SIZE {ROW_GROUP_SIZE})")
        con.execute(f"USE {ATTACHED}")

    let_go_first(path, "read")
    _when_free(path, attached, "write")


def detach(con: Any) -> None:
    """Let the attached results database go (its file lock with it)."""
    con.execute("USE memory")
    con.execute(f"DETACH {ATTACHED}")


def _when_free(path: str, open_it: Any, kind: str) -> Any:
    """`open_it()`, again and again while another process holds `path` (jittered, growing
    pauses), up to `lock_timeout_s()` (or a `hurry`); said after a second and every 30 s, and
    knocked (`_knock`) after KNOCK_AFTER_S."""
    import duckdb

    started = time.monotonic()
    pause = 0.005
    announced_at: float | None = None
    knocked = False
    with contextlib.ExitStack() as knocking:
        while True:
            try:
                return open_it()
            except duckdb.IOException as error:
                if not is_lock_conflict(error):
                    raise
                waited = time.monotonic() - started
                announced_at = _still_busy(path, error, waited, announced_at)
                if waited >= KNOCK_AFTER_S and not knocked:
                    knocking.enter_context(_knock(path, kind))
                    knocked = True
                time.sleep(pause * JITTER.uniform(0.5, 1.5))
                pause = min(pause * 2, 0.2)


def _still_busy(
    path: str, error: BaseException, waited: float, announced_at: float | None
) -> float | None:
    """DatabaseBusy once the wait is over its bound; says the wait after a second and every 30
    s (returns when it last did)."""
    timeout = lock_timeout_s()
    other = holder(error)
    if waited >= timeout or (_cap is not None and time.monotonic() >= _cap):
        raise DatabaseBusy(
            f"results database {path} stayed busy for {waited:.0f} s"
            + (f" (held by {other})" if other else "")
            + ": nothing is lost; run the same command again once it is free, or "
            "wait longer with NUMERATE_LOCK_TIMEOUT=<seconds>"
        ) from None
    due = ANNOUNCE_AFTER_S if announced_at is None else announced_at + ANNOUNCE_EVERY_S
    if waited < due:
        return announced_at
    _announce(
        f"waiting for results database {path}"
        + (f", held by {other}" if other else "")
        + f" ({waited:.0f} s so far; up to {timeout:.0f} s, NUMERATE_LOCK_TIMEOUT)"
    )
    return waited


def _waiting_dir(path: str) -> Path:
    return Path(f"{path}.waiting")


def _open_waiting(path: str) -> int | None:
    """The `<path>.waiting` folder, opened without following a link (a link planted there
    had knocks written, and files removed, where it points), or None where there is none
    to use."""
    try:
        return os.open(_waiting_dir(path), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None


@contextlib.contextmanager
def _knock(path: str, kind: str) -> Iterator[None]:
    """A file saying that this process waits for `path` (to `kind`: read or write), while the
    block runs; nothing when it cannot be made (a read-only folder, a link at its name)."""
    name = f"{os.getpid()}.{kind}.{uuid.uuid4().hex[:8]}"
    with contextlib.suppress(OSError):
        _waiting_dir(path).mkdir(exist_ok=True)
    folder = _open_waiting(path)
    if folder is not None:
        try:
            os.close(os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644, dir_fd=folder))
        except OSError:
            os.close(folder)
            folder = None
    if folder is None:
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=folder)
        os.close(folder)
        with contextlib.suppress(OSError):
            os.rmdir(_waiting_dir(path))  # not empty: another process waits too


def waiting_writers(path: str) -> int:
    """How many live processes wait to write `path` (knocks of dead ones are removed)."""
    return len(_waiting(path, "write"))


def let_go_first(path: str, kind: str, seconds: float = TURN_S) -> None:
    """Before opening `path`, let the processes that knocked to `kind` it (read or write)
    before this call have their turn: return once each of them is in (its knock gone: it
    opened the file, or stopped waiting), or after `seconds`. Those that knock later wait
    their own turn, so that two writers in turn never keep a reader out, nor readers in turn
    a writer. A reader lets waiting writers go first for as long as it would wait for the
    file (`seconds`: the lock's timeout; readers share the file, so the writer needs them all
    out, and readers that each held it a few seconds, one after another, kept a writer out
    until it gave up); a writer lets waiting readers go first for TURN_S (its sessions follow
    each other within milliseconds: a `numerate runs` beside a fast sweep waited 14 s). Said
    past TURN_S, as any wait, and within the bound of every wait: a command that is stopping
    (`hurry`) spends no courtesy past it. A thread must not hold the file while it calls this
    (it would wait for a writer that waits for it)."""
    ahead = _waiting(path, kind)
    if not ahead:  # almost always: one look at a folder that is not there
        return
    started = time.monotonic()
    deadline = started + min(seconds, lock_timeout_s())
    if _cap is not None:
        deadline = min(deadline, _cap)
    said_at: float | None = None
    while time.monotonic() < deadline and (ahead := ahead & _waiting(path, kind)):
        waited = time.monotonic() - started
        if waited >= (TURN_S if said_at is None else said_at + ANNOUNCE_EVERY_S):
            said_at = waited
            first = ", ".join(sorted({_described(name.partition(".")[0]) for name in ahead}))
            _announce(f"waiting for results database {path} while {first} (waiting to {kind} "
                      f"it) goes first ({waited:.0f} s so far; up to {seconds:.0f} s)")  # fmt: skip
        time.sleep(0.01)


def _waiting(path: str, wanted: str) -> set[str]:
    """The knocks of the live processes that wait to `wanted` (read or write) `path` (knocks
    of dead ones are removed)."""
    folder = _open_waiting(path)
    if folder is None:
        return set()
    live = set()
    try:
        for knock in os.listdir(folder):
            pid, _, kind = knock.partition(".")
            if not kind.startswith(f"{wanted}."):
                continue
            if pid.isdigit() and _alive(int(pid)):
                live.add(knock)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(knock, dir_fd=folder)
    finally:
        os.close(folder)
    return live


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _announce(message: str) -> None:
    """Say a wait where the user looks: the progress display (terminal, or the run's log)."""
    current().note(message)


def lock_log(db: str | None = None) -> str | None:
    """The file NUMERATE_LOCK_LOG names, checked: StoreError naming the variable when it
    cannot be appended to (a folder, a missing folder, no permission: it was silently not
    written) or is one of the files of the database `db` (its lines went into the database
    or its write-ahead log; a new database's name was made an empty file, and the run then
    refused it); None when unset or empty."""
    log = os.environ.get("NUMERATE_LOCK_LOG", "").strip()
    if not log:
        return None
    if db is not None and _of_the_database(log, db):
        raise StoreError(
            f"NUMERATE_LOCK_LOG={for_terminal(repr(log), 200)}: a file of the results "
            f"database {for_terminal(db, 200)} (the database, its write-ahead log, journal "
            "or waiting folder); give another file, or unset it"
        )
    try:
        with open_to_append(log):  # never waiting on a pipe no one reads (it hung)
            pass
    except OSError as error:
        raise StoreError(
            f"NUMERATE_LOCK_LOG={for_terminal(repr(log), 200)}: cannot be written "
            f"({error.strerror or error}); give a file to append each database session to, "
            "or unset it"
        ) from None
    return log


def _of_the_database(log: str, db: str) -> bool:
    """Whether `log` is the database file `db`, its `.wal`, or its journal or waiting folder
    (or below them), links followed."""
    target, base = os.path.realpath(log), os.path.realpath(db)
    folders = (f"{base}.journal", f"{base}.waiting")
    return target in (base, f"{base}.wal", *folders) or target.startswith(
        tuple(folder + os.sep for folder in folders)
    )


_LOG_LOST: list[str] = []  # the NUMERATE_LOCK_LOG a write of failed (said once)


@contextlib.contextmanager
def held(path: str, kind: str, waited_s: float) -> Iterator[None]:
    """Time a session that holds `path` (for NUMERATE_LOCK_LOG)."""
    started = time.monotonic()
    try:
        yield
    finally:
        log = os.environ.get("NUMERATE_LOCK_LOG", "").strip()
        if log:
            line = {"pid": os.getpid(), "db": path, "kind": kind, "waited_s": round(waited_s, 4),
                    "held_s": round(time.monotonic() - started, 4), "at": time.time()}  # fmt: skip
            try:
                with open_to_append(log) as out:
                    out.write(json.dumps(line) + "\n")
            except OSError as error:  # a log never fails the work it logs; said once
                if log not in _LOG_LOST:
                    _LOG_LOST.append(log)
                    _announce(f"NUMERATE_LOCK_LOG {log}: not written ({error.strerror})")
