"""Reading input files, and writing output files so that a reader never sees half of one.

Every output file numerate writes goes through `write_atomically`: the content goes to a new
file of unpredictable name beside the target, created exclusively (never through a link planted
there), then is renamed over the target. A failure at any point (a full disk, an error while
rendering, Ctrl-C) removes the temporary file: the target is the old file or the whole new one.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import os
import re
import secrets
import stat
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, BinaryIO

from numerate.kernel.errors import ConfigError

Content = str | bytes | Callable[[BinaryIO], None]
"""What an output file holds: text (UTF-8), bytes, or a function writing a binary file."""


class OutputPathError(ConfigError):
    """An output path that cannot name a file to write (a folder, a device, no name)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{str(path) or repr(str(path))}: {reason}")
        self.path = path
        self.reason = reason


def read_text(path: Path, what: str = "", *, limit: int) -> str:
    """A UTF-8 text file's content (`text_lines`, joined); ConfigError naming `what` and the
    path when it cannot be read, is not UTF-8, or holds more than `limit` bytes."""
    return "".join(text_lines(path, limit, what))


def text_lines(path: Path, limit: int, what: str = "") -> Iterator[str]:
    """The lines of a UTF-8 text file (each with its line feed: a line ends at a line feed
    only, so a text holding U+2028 or U+0085 stays one line), read as they are asked for:
    memory follows a line, not the file (`grade` and `numgen score` held files of 512 MiB
    whole). ConfigError naming `what` and the path when the file cannot be read, holds more
    than `limit` bytes (said once reading passes them), or a line is not UTF-8 (named)."""
    name = f"{what} {path}".strip()
    read = 0
    try:
        with contextlib.ExitStack() as opened:
            with _said_while_waiting(path, name):  # a pipe: till its writer's first line
                handle = opened.enter_context(path.open("rb"))
                raw = handle.readline(limit + 1)
            for number in itertools.count(1):
                if not raw:
                    return
                read += len(raw)
                if read > limit:
                    raise ConfigError(
                        f"{name} is larger than {limit:,} bytes, the most numerate reads"
                    )
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise ConfigError(f"{name} is not UTF-8 text (line {number})") from None
                # a byte order mark (a spreadsheet's, an editor's) is no part of the text
                yield line.removeprefix("\ufeff") if number == 1 else line
                raw = handle.readline(limit - read + 1)
    except OSError as error:
        raise ConfigError(f"cannot read {name}: {error.strerror}") from None


WAIT_SAID_AFTER_S = 2.0
"""How long reading a pipe (or a terminal) waits before it says what it waits for."""


def waits_for_a_writer(path: Path) -> bool:
    """Whether reading `path` may wait for a writer: it is no regular file (a named pipe,
    `<(command)`, a terminal). One that cannot be looked at does not (opening it says why)."""
    try:
        return not stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def _said_while_waiting(path: Path, name: str) -> Iterator[None]:
    """For a path read as `cat` reads it, waiting for its writer (`waits_for_a_writer`): a
    line on standard error once the wait passes WAIT_SAID_AFTER_S, so that a command reading
    a pipe nobody writes is not silent; never once the block has ended."""
    if not waits_for_a_writer(path):
        yield
        return
    lock, ended = threading.Lock(), [False]

    line = (f"waiting for {name} to be written (not a regular file: a pipe is read as its "
            "writer writes it; Ctrl-C stops)\n")  # fmt: skip

    def say() -> None:
        with lock:
            if not ended[0]:
                sys.stderr.write(line)
                sys.stderr.flush()

    timer = threading.Timer(WAIT_SAID_AFTER_S, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        with lock:
            ended[0] = True
        timer.cancel()


def output_target(path: Path) -> Path:
    """The file that writing `path` replaces (see _output_target); OutputPathError also when
    the path cannot even be looked at (a name longer than the file system allows)."""
    try:
        return _output_target(path)
    except OSError as error:
        raise OutputPathError(path, error.strerror or str(error)) from None


def check_suffix(option: str, path: Path | str, suffixes: Sequence[str]) -> str:
    """The suffix of output `path` (lowercase) when it is one of `suffixes`; else a ConfigError
    naming `option`, the suffix and those it may be. A name or suffix that ends or begins with
    a space is quoted (`'p.png '`: "no .png  output" hid it)."""
    suffix = Path(path).suffix.lower()
    if suffix in suffixes:
        return suffix
    name = str(path)
    if name != name.strip():  # its end shown, where the space is
        name, suffix = repr(name if len(name) <= 200 else "…" + name[-199:]), repr(suffix)
    else:
        name = name[:200]
    shown = f"no {suffix} output" if suffix else "no suffix"
    raise ConfigError(f"{option} {name}: {shown}; give a {' or '.join(suffixes)} file name")


def _output_target(path: Path) -> Path:
    """The file that writing `path` replaces: through a symbolic link, the file it points to
    (as the shell's `>` writes through one), so the link stays a link.

    Raises:
        OutputPathError: `path` has no file name, names a folder or something that is not a
            regular file (a device, a pipe), a link that leads nowhere (a loop), or lies in a
            "folder" that is a file.
    """
    if not path.name or path.name in (".", ".."):
        raise OutputPathError(path, "not a file name")
    if _a_process_file(path):
        raise OutputPathError(
            path, "an open file of a process (standard output or input, a descriptor), not a "
            "file's name: the file behind it would be replaced, not written to; name that "
            "file, or leave the option out where the command writes to standard output"
        )  # fmt: skip
    target = Path(os.path.realpath(path))
    if target.is_symlink():
        raise OutputPathError(path, "a symbolic link that leads nowhere (a loop)")
    if target.is_dir():
        raise OutputPathError(path, "a folder; give a file name")
    if target.exists() and not target.is_file():
        raise OutputPathError(path, "not a regular file (a device, a pipe or a socket)")
    if target.is_file() and is_duckdb_database(target):  # no output of numerate's is one
        raise OutputPathError(path, "a DuckDB database (results?); give another file name")
    database = _database_of(target)
    if database is not None:
        raise OutputPathError(
            path, f"a file of the DuckDB database {database} (its write-ahead log, or "
            "numerate's journal of answers not yet in it); give another file name"
        )  # fmt: skip
    dangling = link_into_nowhere(path) or link_above_into_nowhere(path)  # the folders made
    if dangling:  # would be the link's, wherever it points (/nonexist/ at the root)
        raise OutputPathError(path, dangling)
    _nearest_folder(path, target, target.parents)
    return target


def _a_process_file(path: Path) -> bool:
    """Whether `path`, or a link it leads through, names a process's file in /proc
    (`/dev/stdout` is a link to `/proc/self/fd/1`, `/dev/fd` to `/proc/self/fd`): its link
    resolves to the file a descriptor has open, which writing a file's way (a new file renamed
    over it) replaces, and `>>` or a pipe behind it loses what was there."""
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own bound on links followed
        if os.path.realpath(os.path.dirname(current)).startswith("/proc/"):
            return True
        if not os.path.islink(current):
            return False
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
    return False  # a loop: said as one by the caller


def _database_of(target: Path) -> Path | None:
    """The DuckDB database `target` belongs to: DuckDB's write-ahead log beside it
    (`<database>.wal`), or a file of numerate's journal of it (`<database>.journal/`,
    numerate.store.journal); None for any other file."""
    for owned, suffix in ((target, ".wal"), (target.parent, ".journal")):
        if owned.name.endswith(suffix) and len(owned.name) > len(suffix):
            database = owned.with_name(owned.name.removesuffix(suffix))
            if database.is_file() and is_duckdb_database(database):
                return database
    return None


def link_into_nowhere(path: Path) -> str | None:
    """What `path` is when it is a symbolic link into a folder that does not exist (said for
    outputs and results databases alike), else None."""
    target = Path(os.path.realpath(path))
    if path.is_symlink() and not target.parent.is_dir():
        return f"a symbolic link to {target}, whose folder does not exist"
    return None


def link_above_into_nowhere(path: Path) -> str | None:
    """What a folder above `path` is when it is a symbolic link that leads nowhere (`dl/x`,
    `dl` a link to /nonexistent/dir: writing made /nonexistent/dir), else None."""
    for folder in path.parents:
        missing = missing_link_target(folder)
        if missing:
            return f"{folder} is {missing}"
    return None


def missing_link_target(path: Path) -> str | None:
    """What `path` is when it is a symbolic link that leads nowhere (a loop, or to something
    that does not exist), else None."""
    if not path.is_symlink():
        return None
    try:
        path.stat()
    except OSError as error:
        if error.errno == errno.ELOOP:
            return "a symbolic link that loops"
        return f"a symbolic link to {os.path.realpath(path)}, which does not exist"
    return None


def looks_like_duckdb(head: bytes) -> bool:
    """Whether a file's first bytes are a DuckDB database's ("DUCK" after its first 8)."""
    return head[8:12] == b"DUCK"


def is_duckdb_database(file: Path) -> bool:
    """Whether the file at `file` begins as a DuckDB database does (False where it cannot be
    read; give a regular file: a pipe would block)."""
    try:
        with open(file, "rb") as handle:
            return looks_like_duckdb(handle.read(12))
    except OSError:
        return False


def _nearest_folder(path: Path, target: Path, candidates: Iterable[Path]) -> Path:
    """The first of `candidates` (`target` or its parents, nearest first) that exists, when it
    is a folder; OutputPathError naming it otherwise (`path` lies under a file)."""
    for folder in candidates:
        if folder.exists():
            if not folder.is_dir():
                kind = "a file" if folder.is_file() else "a device, a pipe or a socket"
                where = "" if folder == target else f"{folder} is "
                raise OutputPathError(path, f"{where}{kind}, not a folder")
            return folder
    return Path(target.anchor or "/")


def output_folder(path: Path) -> Path:
    """The folder files will be written in, resolved (`~` expanded); nothing is created.

    Raises:
        OutputPathError: `path` is empty, names something that is not a folder (a file, a
            device, a link that leads nowhere), lies under a "folder" that is a file, or the
            nearest existing folder cannot be written.
    """
    if not str(path).strip():
        raise OutputPathError(path, "no folder named")
    try:
        return _output_folder(path)
    except OSError as error:  # a name longer than the file system allows
        raise OutputPathError(path, error.strerror or str(error)) from None
    except RuntimeError:  # Path.expanduser: `~name` of no user here (a traceback before)
        user = str(path).split("/", 1)[0]
        raise OutputPathError(path, f"{user}: no user of this machine has that name") from None


def _output_folder(path: Path) -> Path:
    target = Path(os.path.realpath(path.expanduser()))
    if target.is_symlink():
        raise OutputPathError(path, "a symbolic link that leads nowhere (a loop)")
    missing = missing_link_target(path.expanduser()) or link_above_into_nowhere(path.expanduser())
    if missing:  # its folder was not made: "cannot write there (File exists)"
        raise OutputPathError(path, missing)
    folder = _nearest_folder(path, target, (target, *target.parents))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputPathError(path, f"{folder} cannot be written (permission denied)")
    return target


def check_folder(option: str, path: Path | str) -> None:
    """Refuse an output folder before any work is done (see output_folder); ConfigError
    naming `option` (a command-line option or a config field) and the path."""
    try:
        output_folder(Path(path))
    except OutputPathError as error:
        raise ConfigError(f"{option} {str(path)!r:.200}: {error.reason}") from None


def check_writable_folder(option: str, path: Path | str) -> None:
    """`check_folder`, then the folder made (with its parents) and a file made and removed
    in it: ConfigError naming `option` when it cannot be (a view_dir under /proc was taken,
    and its pages silently not written after the run; an images_dir there started a NumGen
    run that failed). The folders made for the check are removed: the work makes them."""
    check_folder(option, path)
    folder = Path(path).expanduser()
    made = [above for above in (folder, *folder.parents) if not above.exists()]  # deepest first
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, probe = _create_temporary(folder / ".numerate-write-check")
        handle.close()
        probe.unlink()
    except OSError as error:
        reason = error.strerror or str(error)
        raise ConfigError(f"{option} {str(path)!r:.200} cannot be written: {reason}") from None
    finally:
        for above in made:
            with contextlib.suppress(OSError):  # not empty: another process writes there
                above.rmdir()


def _create_temporary(target: Path) -> tuple[BinaryIO, Path]:
    """A new, empty file beside `target`, created exclusively under a random name (a link or
    file already at that name is an error, never written through); an existing target's
    permissions carry over, as when the shell's `>` overwrites a file."""
    mode = 0o666
    with contextlib.suppress(OSError):
        mode = stat.S_IMODE(target.stat().st_mode)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        temporary = target.with_name(f".{target.name[:100]}.{secrets.token_hex(8)}.partial")
        try:
            descriptor = os.open(temporary, flags, mode)
        except FileExistsError:
            continue
        return os.fdopen(descriptor, "wb"), temporary
    raise FileExistsError(f"no free temporary name beside {target}")


def write_atomically(path: Path, content: Content) -> Path:
    """Write `path` under a temporary name beside it, then rename: a reader (or a run killed
    half-way) sees the old file or the whole new one, never a part; a failure (a full disk
    included) leaves no temporary file behind.

    Args:
        path: the file to write; its folder is created. A symbolic link is written through:
            its target gets the content (a link into a folder that does not exist is refused).
        content: text (UTF-8), bytes, or a function that writes the binary file it is given.

    Raises:
        OutputPathError: `path` cannot be a file (see `output_target`).
        OSError: the file cannot be written (no permission, a full disk).
    """
    target = output_target(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        handle, temporary = _create_temporary(target)
    except FileNotFoundError:  # the folder is there: a file system of the kernel's (/proc)
        raise OutputPathError(path, f"no file can be made in {target.parent}") from None
    try:
        with handle:
            if isinstance(content, str):
                handle.write(content.encode("utf-8"))
            elif isinstance(content, bytes):
                handle.write(content)
            else:
                content(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path


def open_to_append(path: Path | str, follow_links: bool = True) -> IO[str]:
    """A text file opened to append (made when missing), never waiting on a named pipe that
    no one reads (that open fails at once, ENXIO "No such device or address"); without
    `follow_links`, a symbolic link at its name is refused (ELOOP), never written through."""

    def opener(name: str, flags: int) -> int:
        extra = os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW)
        return os.open(name, flags | extra, 0o666)

    return open(path, "a", opener=opener)


def slug(text: str) -> str:
    """`text` as a file name: itself when it is plain (letters, digits, `.`, `_`, `-`, not
    starting with `.`), else its plain part and a digest: a run id read from a shard, or any
    name from the data, never names a path (`../../x`) or a hidden file."""
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:60]
    if plain == text and not text.startswith("."):
        return text
    return f"{plain.lstrip('.')}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


def not_as_recorded(content: bytes, sha256: str | None) -> str | None:
    """How a file's content differs from the SHA-256 recorded of it, in words (None: it is
    the same, or none was recorded)."""
    found = hashlib.sha256(content).hexdigest()
    if not sha256 or found == sha256:
        return None
    return f"its SHA-256 was {sha256[:12]}…, the file's is {found[:12]}…"
