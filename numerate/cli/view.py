"""`numerate view`: the results in a browser (numerate.view)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import shutil
import signal
import socket
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from numerate.cli.app import app
from numerate.cli.common import fail
from numerate.kernel.confined import Confined, LeadsOutside
from numerate.kernel.errors import ConfigError, NumerateError


@app.command()
def view(
    db: Annotated[
        str | None,
        typer.Option(
            help="DuckDB results file (default: $NUMERATE_DB, else results/numerate.duckdb)."
        ),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port to serve on (default 8765).", min=1, max=65535)
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(help="Address to serve on (default 127.0.0.1: this machine only)."),
    ] = None,
    export: Annotated[
        str | None,
        typer.Option(help="Write the pages as files into this folder instead (no server)."),
    ] = None,
) -> None:
    """Browse the results in a web page: runs, a run's leaderboard, each manifold's curves and
    heatmap, the cases behind a cell, comparisons. Read-only; serves until Ctrl-C."""
    from numerate.config.sweep import results_database
    from numerate.store.reader import Reader

    try:
        path = results_database(db, None)
        Reader.open(path).close()  # a database that cannot be read: one line, now
        if export is not None:
            if port is not None or host is not None:
                given = "--port" if port is not None else "--host"
                raise ConfigError(f"{given}: --export writes files and serves nothing")
            export_pages(path, export_folder(export))
            return
    except NumerateError as error:
        _unmade()  # a new folder that failed holds nothing of its own: it is not left behind
        fail(error)
    except KeyboardInterrupt:  # before the export began writing (export_pages says after)
        _unmade()
        raise
    serve(path, "127.0.0.1" if host is None else host, 8765 if port is None else port)


def _unmade() -> None:
    """Remove the export folders this command made that hold nothing but their marker (a
    stop in an export's first second left one behind, an empty marker in it)."""
    for folder in MADE:  # deepest first: each above is empty once those below are gone
        with contextlib.suppress(OSError):
            if [inside.name for inside in folder.iterdir()] in ([MARKER], []):
                (folder / MARKER).unlink(missing_ok=True)
                folder.rmdir()


MARKER = ".numerate-export"
"""The file an export leaves in its folder: the files it wrote, one per line. A later export
into the same folder removes those it no longer writes (a run since deleted), nothing else.
Every file of the folder, the marker included, is read, written and removed without following
a link planted in it (numerate.kernel.confined)."""

MARKER_BYTES = 64 * 1024 * 1024
"""The largest marker an export reads (its list of a million pages is some 60 MB)."""


MADE: list[Path] = []
"""The export folder and the folders above it this command made, deepest first (a stopped
export removes them again)."""


def export_folder(given: str) -> Path:
    """The folder an export goes into, made if needed: new, or empty, or an earlier export
    (its MARKER, or the index.html of an export made before there was one); ConfigError when
    it is something else or cannot be written."""
    from numerate.kernel.files import check_folder

    if not given.strip():
        raise ConfigError("--export '': give a folder")
    check_folder("--export", given)  # a file, under a file, a name too long, not writable
    folder = Path(given).expanduser()
    inside = Confined(folder)
    earlier = inside.is_file(MARKER) or _an_old_export(_head(inside, "index.html", 4096))
    if folder.is_dir() and any(folder.iterdir()) and not earlier:
        raise ConfigError(f"--export {given}: a folder with other files in it (give a new one)")
    try:
        MADE.extend(made for made in (folder, *folder.parents) if not made.exists())
        folder.mkdir(parents=True, exist_ok=True)
        if not inside.is_file(MARKER):  # a link there is replaced, never written through
            inside.write(MARKER, b"")
    except OSError as error:
        raise ConfigError(f"--export {given}: cannot write there ({error.strerror})") from None
    return folder


def _an_old_export(index: str) -> bool:
    """Whether `index` (the beginning of an index.html) is the runs page of an export made
    before exports left their MARKER: its title, as the viewer writes it (a page of the user's
    that merely mentions "numerate view" was taken for one, and written over)."""
    return "<title>Runs · numerate view</title>" in index


def _earlier_export(folder: Path) -> set[str]:
    """The files an earlier export into `folder` wrote, as its MARKER lists them: only names
    of regular files inside the folder, reached through no link (a damaged or edited marker,
    with bytes that are no UTF-8, a NUL, `..`, a folder's name, a link, is no reason to stop,
    nor to remove anything else; a marker that is itself a link lists nothing)."""
    inside = Confined(folder)
    names = _head(inside, MARKER, MARKER_BYTES).splitlines()
    return {name for name in names if "\ufffd" not in name and _a_file(inside, name)}


def _a_file(inside: Confined, name: str) -> bool:
    try:
        inside.parts(name)
    except LeadsOutside:
        return False
    return inside.is_file(name)


def _head(inside: Confined, name: str, limit: int) -> str:
    """The start of a file of the folder, at most `limit` bytes, read through no link ("" when
    it cannot be read)."""
    try:
        return inside.read_bytes(name, limit, head=True).decode("utf-8", errors="replace")
    except (OSError, ValueError, LeadsOutside):
        return ""


def export_pages(path: str, folder: Path) -> None:
    from numerate.kernel import stopping
    from numerate.store.reader import Reader
    from numerate.view.app import templates
    from numerate.view.export import export

    written: list[str] = []

    def progress(page: str) -> None:
        written.append(page)
        if len(written) % 200 == 0:
            typer.echo(f"  {len(written):,} pages written ...", err=True)

    before = _earlier_export(folder)
    fresh = not before and [p.name for p in folder.iterdir()] == [MARKER]

    def warn(said: str) -> None:
        typer.echo(f"warning: {said}", err=True)

    try:
        try:
            with Reader.open(path) as reader:
                done = export(reader, folder, templates(), progress, warn=warn,
                              between=reader.let_writers_in)  # fmt: skip
            _remove_stale(folder, before - set(done.paths))
            _write_marker(folder, done.paths)
        except OSError as error:
            reason = error.strerror or error
            raise ConfigError(f"--export {folder}: cannot write there ({reason})") from None
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt) or stopping.asked():  # an error it caused
            _stopped_export(folder, fresh, before, written)
        _keep_what_was(folder, fresh, before, written)  # a failure: the same, said by fail()
        raise
    where = folder.resolve()
    typer.echo(f"{done.files:,} files in {where} (open {where / 'index.html'})")
    if done.unshown:
        typer.echo(
            f"warning: {len(done.unshown):,} page(s) could not be shown and say why instead, "
            f"e.g. {where / done.unshown[0]}",
            err=True,
        )


def _remove_stale(folder: Path, stale: set[str]) -> None:
    """The files an earlier export wrote that this one did not (a run since deleted), with
    the folders they leave empty up to the export's own: never through a link planted in the
    folder (one that leads out is said, and nothing is removed through it)."""
    inside = Confined(folder)
    for name in sorted(stale):
        try:
            inside.remove(name)
        except LeadsOutside as refused:
            typer.echo(f"warning: not removed: {refused}", err=True)


def _write_marker(folder: Path, names: Iterable[str]) -> None:
    """The export's MARKER: the files it wrote, one per line (a link at its name replaced)."""
    Confined(folder).write(MARKER, "".join(f"{name}\n" for name in names).encode())


def _stopped_export(folder: Path, fresh: bool, before: set[str], written: list[str]) -> NoReturn:
    """Leave an export a signal stopped (`_keep_what_was`), saying what is left of it."""
    from numerate.cli.process import PROCESS

    _keep_what_was(folder, fresh, before, written)
    if fresh:
        said = f"the export was stopped; what it had written in {folder} is removed"
    else:
        said = f"the export into {folder} is incomplete; run the same command again to finish it"
    PROCESS.stopped_saying(said)


def _keep_what_was(folder: Path, fresh: bool, before: set[str], written: list[str]) -> None:
    """After an export that did not end: what a new one wrote is removed (half a site whose
    links lead nowhere was left behind, or an empty marker in a new folder); an earlier one
    keeps the pages it had and those written now, listed in its marker (the next export
    removes those it no longer writes)."""

    if fresh:  # all in it is this export's: it held nothing but its marker when it began
        for inside in list(folder.iterdir()):
            with contextlib.suppress(OSError):  # rmtree removes a link, never its target
                if inside.is_dir() and not inside.is_symlink():
                    shutil.rmtree(inside)
                else:
                    inside.unlink()
        _unmade()  # a folder the user had is left as it was: empty
        return
    with contextlib.suppress(OSError, LeadsOutside):
        _write_marker(folder, sorted(before | set(written)))


STOPPING = (signal.SIGINT, signal.SIGTERM)

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
"""The Host headers a viewer bound to the loopback answers (numerate.view.app.create_app)."""


def serve(path: str, host: str, port: int) -> None:
    """Serve until SIGINT or SIGTERM, which end the process with 130 or 143 (numerate's
    handlers, not uvicorn's: a page still waiting for the database does not hold it up)."""
    import uvicorn

    from numerate.cli.process import PROCESS
    from numerate.store import access
    from numerate.view.app import create_app

    address, loopback = _bindable(host, port)
    shown = f"[{address}]" if ":" in address else address
    if not loopback:
        typer.echo(
            f"warning: serving on {host}: anyone who can reach this machine on port {port} can "
            "read these results (there is no password); --host 127.0.0.1 keeps them here",
            err=True,
        )
    typer.echo(f"numerate view of {path}: http://{shown}:{port}/ (Ctrl-C stops it)", err=True)
    hosts = LOOPBACK_NAMES | {shown} if loopback else None

    class Server(uvicorn.Server):
        """uvicorn's server, stopping gracefully on SIGINT/SIGTERM like uvicorn's own, but
        without raising the signal again when it is done: this command then ends as every
        command does on a signal (130/143, one line)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOPPING}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        def handle_exit(self, sig: int, frame: Any) -> None:
            PROCESS.came_as(sig)  # the command ends with its code (130, 143)
            access.hurry(0)  # a page waiting for the database gives up now, not at shutdown
            super().handle_exit(sig, frame)

    logging.getLogger("uvicorn.error").addFilter(_no_cancelled_pages)
    server = Server(uvicorn.Config(create_app(path, hosts), host=address, port=port,
                                   log_level="warning", timeout_graceful_shutdown=1))  # fmt: skip
    server.run()
    if server.should_exit:  # a signal; a page still waiting for the database gives up
        access.hurry(0)
        raise KeyboardInterrupt


def _no_cancelled_pages(record: logging.LogRecord) -> bool:
    """False for uvicorn's lines about a page cut off by the shutdown a signal asked for
    ("Cancel 1 running task(s)", a CancelledError's traceback, or its text when a second
    signal cuts the lifespan's shutdown short): the command says
    `interrupted`, and a traceback under it says something went wrong."""

    cancelled = record.exc_info is not None and isinstance(
        record.exc_info[1], asyncio.CancelledError
    )
    message = record.getMessage()
    as_text = message.startswith("Traceback") and message.rstrip().endswith("CancelledError")
    return not (cancelled or as_text) and not message.startswith("Cancel ")  # as text: the
    # lifespan's own, cut off by a second Ctrl-C


def _bindable(host: str, port: int) -> tuple[str, bool]:
    """The address `host` names and whether it is this machine's loopback; one error line
    when it names none or cannot be bound on `port`."""

    if not host.strip():
        fail("--host '': give an address (127.0.0.1: this machine only; 0.0.0.0: every one)")
    try:
        family, _, _, _, where = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        address = str(where[0])
        with socket.create_server((address, port), family=family):
            pass
    except (OSError, UnicodeError) as error:
        reason = getattr(error, "strerror", None) or error
        fail(f"cannot serve on {host}:{port}: {reason} (choose --host or --port)")
    return address, ipaddress.ip_address(address).is_loopback
