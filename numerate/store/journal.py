"""A process's journal: rows received and not yet written to the results database.

A fresh answer costs money and time, so it is never held only in memory: `Journal.append`
writes its rows to a file at once (the operating system has them: a SIGKILL loses none), and the
store writes them to the database in its next short session (numerate.store.writer). The
journal lives beside the database, in `<database>.journal/`:

    <host>-<pid>-<token>.owner          held (flock) by the live process that writes it
    <host>-<pid>-<token>.<n>.jsonl      its segments, one JSON row a line

A segment is deleted once its rows are committed. A process that dies leaves its owner file
unlocked: the next process to open the database replays its segments (`replay_orphans`) and
removes them. Replaying twice is harmless: journaled tables are written on their key
(numerate.store.schema.KEYS: a stored completion is kept, a graded response replaced by the
same row).

The same folder holds a file database's run claims (`claim_run`): the process running a run
holds `run-<run id>.claim`, so two processes never resume one run at once, and names its
journal in it, so that readers tell a live run from a killed one (`stopped_runs`) without
trying the claim (a lake's runs are claimed in its PostgreSQL, from any machine:
numerate.store.lake.claim_run).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import json
import os
import socket
import stat
import threading
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import orjson

from numerate.kernel.answers import MAX_ANSWER_CHARS
from numerate.kernel.confined import LINK, Confined, LeadsOutside
from numerate.kernel.errors import ConfigError, shorten
from numerate.kernel.files import open_to_append
from numerate.kernel.names import name_problem
from numerate.store.lake import is_lake, runs_held
from numerate.store.schema import JOURNALED, StoreError

__all__ = [
    "Journal",
    "Segment",
    "claim_run",
    "journal_dir",
    "live_owners",
    "orphans",
    "parts",
    "read_segment",
]

TIMESTAMP_COLUMNS = frozenset({"created_at", "graded_at", "decided_at"})
"""Columns a journal line keeps as ISO text and a replay turns back into timestamps."""


LAKE_JOURNALS = "NUMERATE_LAKE_JOURNALS"
"""The folder of this machine's journals of lakes (default ~/.local/state/numerate/lakes)."""


def journal_dir(db: str) -> Path:
    """Where the journal of the database at `db` lives: `<db>.journal/` beside a file; for a
    lake, a folder of this machine's (LAKE_JOURNALS) named by a hash of the lake's name, so
    that the answers a writer received wait on its own disk, and a writer killed here has
    them written by the next that opens the lake here."""
    if is_lake(db):
        home = os.environ.get(LAKE_JOURNALS, "").strip()
        root = Path(home) if home else Path.home() / ".local" / "state" / "numerate" / "lakes"
        return root / hashlib.sha256(db.encode()).hexdigest()[:16]
    return Path(f"{db}.journal")


def journal_problem(db: str) -> str | None:
    """Why the journal folder of `db` cannot be made or used, or None: something else at its
    name (a file ended a run in a traceback; a link would have journals written where it
    points)."""
    folder = journal_dir(db)
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        return (
            f"{folder} is {'a link' if folder.is_symlink() else 'not a folder'}, where numerate "
            "keeps the database's journal folder: move it away"
        )
    return None


Rows = list[tuple[str, Mapping[str, object]]]
"""(table, row) pairs in the order they were received."""


@dataclass
class Segment:
    """Rows taken from the journal to be written, and the file that holds them."""

    path: Path
    rows: Rows = field(default_factory=list)


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"cannot journal a {type(value).__name__}")


def _line(table: str, row: Mapping[str, object]) -> bytes:
    """A row's journal line: JSON, times as ISO text (orjson writes them as
    datetime.isoformat does). A row orjson refuses (a lone surrogate in a text) is written by
    the json module, which escapes it."""
    try:
        return orjson.dumps([table, row], option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        return (json.dumps([table, row], default=_encode) + "\n").encode()


def _lock(file: IO[Any]) -> bool:
    """Take the file's exclusive lock without waiting; False when another holder has it."""
    try:
        fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class Journal:
    """This process's journal for one database (thread-safe)."""

    def __init__(self, db: str) -> None:
        self.folder = journal_dir(db)
        # beside a database file, whose folder must exist; a lake's: this machine's, made
        self.folder.mkdir(parents=is_lake(db), exist_ok=True)
        self.stem = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        # created under another name and locked before it is visible: no other process can
        # take a new journal for an orphan
        hidden = self.folder / f".{self.stem}.owner"
        self._owner = open(hidden, "w")  # noqa: SIM115 - held for the process's life
        _lock(self._owner)
        os.replace(hidden, self.folder / f"{self.stem}.owner")
        self._lock = threading.Lock()
        self._number = 0
        self._file = self._next_file()
        self._rows: Rows = []
        self._taken: list[Segment] = []
        self.closed = False

    def _next_file(self) -> IO[bytes]:
        self._number += 1
        return open(self.folder / f"{self.stem}.{self._number:06d}.jsonl", "ab")

    def append(self, table: str, rows: Sequence[Mapping[str, object]]) -> None:
        """Keep rows for `table` until they are written: on disk before this returns (one
        write for all of them)."""
        if not rows:
            return
        text = b"".join([_line(table, row) for row in rows])
        with self._lock:
            try:
                if self._file.closed:  # a new segment could not be made after a failed write
                    self._file = self._next_file()
                self._file.write(text)
                self._file.flush()
            except BaseException:  # a full disk, a stop: part of the text may be in the file
                self._end_segment()  # the next rows start a file of their own
                raise
            self._rows.extend((table, row) for row in rows)

    def _end_segment(self) -> None:
        """Go on in a new segment file after a write that failed: the text written of it ends
        the old one as a last line cut short (left out when it is read: `read_segment`),
        where the next rows would have made it a line that is no row, and every row of the
        file refused when a process that died left it."""
        if not self._file.closed:
            with contextlib.suppress(OSError):  # what of the text is still buffered
                self._file.close()
            if self._rows:
                self._taken.append(Segment(Path(self._file.name), self._rows))  # removed once
                self._rows = []  # written
            else:  # it holds none of the rows this process keeps
                with contextlib.suppress(OSError):
                    Path(self._file.name).unlink()
        self._file = self._next_file()

    def received(self, table: str) -> list[Mapping[str, object]]:
        """The rows for `table` kept and not yet written to the database, oldest first."""
        with self._lock:
            kept = [*(row for segment in self._taken for row in segment.rows), *self._rows]
        return [row for name, row in kept if name == table]

    @property
    def pending(self) -> int:
        """Rows not yet written to the database."""
        with self._lock:
            return len(self._rows) + sum(len(s.rows) for s in self._taken)

    def take(self) -> list[Segment]:
        """Every segment not yet written (oldest first); new rows go to a new segment.
        `written` removes a segment once its rows are committed."""
        with self._lock:
            if self._rows:
                self._file.close()
                segment = Segment(Path(self._file.name), self._rows)
                self._taken.append(segment)
                self._rows = []
                self._file = self._next_file()
            return list(self._taken)

    def written(self, segment: Segment) -> None:
        with self._lock:
            self._taken.remove(segment)
        with contextlib.suppress(FileNotFoundError):
            segment.path.unlink()

    def close(self) -> None:
        """Give the journal up. Rows not written stay on disk, for the next process that opens
        the database to replay."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            self._file.close()
            empty = not self._rows and not self._taken
            if empty:
                with contextlib.suppress(FileNotFoundError):
                    Path(self._file.name).unlink()
                with contextlib.suppress(FileNotFoundError):
                    (self.folder / f"{self.stem}.owner").unlink()
            self._owner.close()  # releases the lock
        if empty:
            with contextlib.suppress(OSError):  # not empty: another process's journal
                self.folder.rmdir()


PART_BYTES = 8_000_000
"""About the most text (UTF-8 bytes) a transaction writes of rows that may be long (a row at
least): journaled rows (numerate.store.writer), and what `Tables.put` writes. DuckDB holds a
MERGE's rows in memory until it commits, about four times their text: 32 MB of answers in one
transaction ran out of WRITER_MEMORY, and a backlog that never fits would never be written.
An answer is at most 2 x 262,144 characters (text and reasoning:
numerate.kernel.answers.MAX_ANSWER_CHARS), so a part stays well within the bound."""


def parts(rows: Rows, most_bytes: int) -> Iterator[Rows]:
    """`rows` in order, in parts of at most `most_bytes` bytes of text (their values' UTF-8;
    a row at least): what one transaction writes."""
    part: Rows = []
    held = 0
    for entry in rows:
        size = text_bytes(entry[1])
        if part and held + size > most_bytes:
            yield part
            part, held = [], 0
        part.append(entry)
        held += size
    if part:
        yield part


def text_bytes(row: Mapping[str, object]) -> int:
    """The UTF-8 bytes of a row's text values (a lone surrogate, in a journal written before
    answers were cleaned, as the 3 bytes it is stored as)."""
    return sum(
        len(value.encode("utf-8", "surrogatepass")) for value in row.values()
        if isinstance(value, str)
    )  # fmt: skip


MAX_LINE = 32 * 2**20
"""Characters a journal line holds at most: a row's answer and reasoning are cut to
numerate.kernel.answers.MAX_ANSWER_CHARS each (a few MB as JSON at most); a longer line is no
row numerate wrote, and is not read into memory whole."""


def read_segment(path: Path) -> Rows:
    """A segment's rows; a last line cut short (the writer died mid-line) is left out. Read
    as a regular file in the journal's folder, never through a link (nor from a pipe).

    Raises:
        StoreError: a line that is no row numerate journals (not JSON before the last line,
            another table, a row that is no mapping, a column its table lacks, a time that is
            none, a line longer than MAX_LINE), naming the file and the line; a file that
            cannot be read, or is no regular file.
    """
    try:
        return _rows_of(path)
    except (OSError, LeadsOutside) as error:  # a folder or a link at its name, unreadable
        why = error.what if isinstance(error, LeadsOutside) else error.strerror or str(error)
        raise StoreError(
            f"journal {path} cannot be read: {why}; move it out of "
            f"{path.parent} to go on (the answers it holds are then not stored)"
        ) from None


def _rows_of(path: Path) -> Rows:
    rows: Rows = []
    with io.TextIOWrapper(
        Confined(path.parent).open(path.name), encoding="utf-8", errors="replace"
    ) as lines:
        for number, line in enumerate(iter(lambda: lines.readline(MAX_LINE), ""), start=1):
            if len(line) == MAX_LINE and not line.endswith("\n"):
                raise StoreError(
                    f"journal {path} line {number}: longer than {MAX_LINE:,} characters, no "
                    f"row numerate writes; move the file out of {path.parent} to go on"
                )
            try:
                entry = json.loads(line)
            except ValueError:
                if not line.endswith("\n"):
                    continue  # the last line, cut short: its rows are not taken as written
                entry = None
            problem = _entry_problem(entry)
            if problem:
                raise StoreError(
                    f"journal {path} line {number}: {problem}; move the file out of "
                    f"{path.parent} to go on (the answers it holds are then not stored)"
                )
            rows.append((entry[0], entry[1]))
    return rows


def _entry_problem(entry: Any) -> str | None:
    """Why a journal line's JSON is no `[table, row]` numerate writes, or None; its times,
    written as text, are made times (in place) as they are checked."""
    if not (isinstance(entry, list) and len(entry) == 2):
        return "not a [table, row] pair"
    table, row = entry
    if table not in JOURNALED:
        return f"{shorten(repr(table), 60)} is no table a journal holds"
    if not isinstance(row, dict):
        return f"a {table} row that is no mapping"
    unknown = sorted(set(row) - set(JOURNALED[table]))
    if unknown:
        return f"{shorten(repr(unknown[0]), 60)} is no column of {table}"
    for column, value in row.items():  # an answer and its reasoning are cut before they are
        if isinstance(value, str) and len(value) > MAX_ANSWER_CHARS:  # journaled (the most)
            return (
                f"{column} holds {len(value):,} characters, more than numerate stores of a "
                f"value ({MAX_ANSWER_CHARS:,})"
            )
    for column in TIMESTAMP_COLUMNS & row.keys():
        try:
            if isinstance(row[column], str):
                row[column] = datetime.fromisoformat(row[column])
        except ValueError:
            return f"{column} = {shorten(repr(row[column]), 60)} is no time"
    return None


@contextlib.contextmanager
def orphans(db: str) -> Iterator[list[Path]]:
    """The segments of journals whose process died, oldest first, locked for the block; they
    and their owner files are removed when the block ends without an error."""
    folder = journal_dir(db)
    if not folder.is_dir():
        yield []
        return
    held: list[tuple[IO[bytes], Path]] = []
    try:
        for owner in sorted(folder.glob("*.owner")):
            try:
                file = _owner_file(owner)
            except (OSError, LeadsOutside):  # gone, or not numerate's: a link, a pipe
                continue
            if _lock(file) and owner.exists():
                held.append((file, owner))
            else:
                file.close()
        segments = [
            segment
            for _, owner in held
            for segment in sorted(folder.glob(f"{owner.name.removesuffix('.owner')}.*.jsonl"))
        ]
        yield segments
        for segment in segments:
            with contextlib.suppress(FileNotFoundError):
                segment.unlink()
        for _, owner in held:
            with contextlib.suppress(FileNotFoundError):
                owner.unlink()
    finally:
        for locked, _ in held:
            locked.close()


def live_owners(db: str) -> int:
    """How many live processes hold a journal of `db` (a run is writing it, or starting to)."""
    folder = journal_dir(db)
    if not folder.is_dir():
        return 0
    return sum(_live(folder, owner.name) for owner in folder.glob("*.owner"))


def _live(folder: Path, owner: str) -> bool:
    """Whether a live process holds the owner file `owner` of the journal's folder (it is
    locked: no lock is taken from a live owner, which locked it before its name was
    visible)."""
    try:
        with Confined(folder).open(owner) as probe:  # a regular file there, no link, no pipe
            return not _lock(probe)
    except (OSError, LeadsOutside):  # gone, or not numerate's
        return False


def stopped_runs(db: str, run_ids: Collection[str]) -> set[str]:
    """Of runs of `db` recorded `running`, those no live process holds: stopped without
    ending (killed, their machine down). A lake's run is held by its claim, a lock in the
    lake's PostgreSQL that any machine sees (numerate.store.lake.runs_held); a database
    file's by the live process whose journal its claim names (`claim_run`), read without
    taking the claim (trying it would make a resume that comes at that moment fail)."""
    if not run_ids:
        return set()
    if is_lake(db):
        return set(run_ids) - runs_held(db, run_ids)
    return {run_id for run_id in run_ids if not _held(db, run_id)}


def _held(db: str, run_id: str) -> bool:
    """Whether the live process whose journal a file claim names holds run `run_id` of `db`:
    no claim file, a run whose process let it go; a claim that names no journal (made before
    claims named one), any live process's journal of the database."""
    folder = journal_dir(db)
    try:
        named = Confined(folder).read_bytes(f"run-{run_id}.claim", 256, head=True)
    except FileNotFoundError:
        return False
    except (OSError, LeadsOutside):  # not numerate's (a link, a pipe): not known to be dead
        named = b""
    stem = named.decode("utf-8", "replace").strip()
    return _live(folder, f"{stem}.owner") if stem else bool(live_owners(db))


def _claim_file(path: Path) -> IO[str]:
    """A run's claim file, made or opened to append, without following a link at its name
    (ELOOP) or waiting on a pipe; anything there but a regular file is refused (ENOTSUP)."""
    file = open_to_append(path, follow_links=False)
    if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
        file.close()
        raise OSError(errno.ENOTSUP, "not a regular file")
    os.set_blocking(file.fileno(), True)
    return file


def _owner_file(owner: Path) -> IO[bytes]:
    """An owner file of the journal's folder, open to be locked: a regular file there, never
    reached through a link nor a pipe that would keep the open waiting (LeadsOutside)."""
    return Confined(owner.parent).open(owner.name)


class RunClaim:
    """This process's hold on a run: no other process resumes it while held."""

    def __init__(self, file: IO[str] | None) -> None:
        self._file = file
        """The claim's file, held open; None where no file holds it (a `:memory:` store,
        which has no journal folder)."""

    def release(self) -> None:
        if self._file is None:
            return
        with contextlib.suppress(FileNotFoundError):
            Path(self._file.name).unlink()
        self._file.close()


def claim_run(db: str, run_id: str, owner: str = "") -> RunClaim | None:
    """Hold run `run_id` of `db` for this process, whose journal is `owner` (its stem, written
    in the claim: a reader tells whether the run is held by that journal's lock, without
    trying the claim's); None when another live process holds it. ConfigError for a run id
    that is no name numerate makes (one changed by hand: `x/../../notes` truncated and then
    removed a file outside the journal's folder as a claim)."""
    problem = name_problem("run_id", run_id)
    if problem is not None:
        raise ConfigError(f"{problem}; a run whose id is no such name cannot be held, resumed "
                          "or graded again (its claim is a file named after it)")  # fmt: skip
    folder = journal_dir(db)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"run-{run_id}.claim"
    while True:
        try:  # never through a link planted at its name (it would make a file elsewhere)
            file = _claim_file(path)
        except OSError as error:
            why = (
                LeadsOutside(folder, path.name, LINK).what  # as every refused link says it
                if error.errno == errno.ELOOP
                else error.strerror or str(error)
            )
            raise StoreError(f"run claim {path} cannot be made: {why}; move it out to go on"
                             ) from None  # fmt: skip
        if not _lock(file):
            file.close()
            return None
        try:
            same = os.stat(path).st_ino == os.fstat(file.fileno()).st_ino
        except FileNotFoundError:
            same = False
        if same:  # not a file its last holder removed as we opened it
            file.truncate(0)  # a killed holder's name
            file.write(owner)
            file.flush()
            return RunClaim(file)
        file.close()
