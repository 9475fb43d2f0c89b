"""`numerate view`: the results in a browser (numerate.view)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import socket
from collections.abc import Iterator
from typing import Annotated, Any

import typer

from numerate.cli.app import app
from numerate.cli.common import DB_HELP, fail, open_reader, warn
from numerate.cli.process import PROCESS
from numerate.kernel.errors import ConfigError, NumerateError
from numerate.view.folder import ExportFolder


@app.command()
def view(
    db: Annotated[
        str | None,
        typer.Option(help=DB_HELP),
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
    """Browse the results in a web page, read-only; serves until Ctrl-C.

    Its pages: the runs, a run's leaderboard, each manifold's curves and heatmap, the cases
    behind a cell, comparisons."""
    folder = None
    try:
        with open_reader(db) as reader:  # a database that cannot be read: one line, now
            path = reader.path
        if export is not None:
            if port is not None or host is not None:
                given = "--port" if port is not None else "--host"
                raise ConfigError(f"{given}: --export writes files and serves nothing")
            folder = ExportFolder.make(export)
            export_pages(path, folder)
            return
    except NumerateError as error:
        if folder is not None:
            folder.unmade()  # a new folder that failed holds nothing of its own: not left
        fail(error)
    except KeyboardInterrupt:  # before the export began writing (export_pages says after)
        if folder is not None:
            folder.unmade()
        raise
    serve(path, "127.0.0.1" if host is None else host, 8765 if port is None else port)


def export_pages(path: str, folder: ExportFolder) -> None:
    """Write the pages into `folder`, saying how many as it goes; a stop (or a failure) keeps
    what was there before (ExportFolder.keep_what_was), and a stop says what is left."""
    from numerate.kernel import stopping
    from numerate.store.reader import Reader
    from numerate.view.app import templates
    from numerate.view.export import export

    written: list[str] = []

    def progress(page: str) -> None:
        written.append(page)
        if len(written) % 200 == 0:
            typer.echo(f"  {len(written):,} pages written ...", err=True)

    try:
        try:
            with Reader.open(path) as reader:
                done = export(reader, folder.path, templates(), progress, warn=warn,
                              between=reader.let_writers_in)  # fmt: skip
            folder.finish(done.paths, warn)
        except OSError as error:
            reason = error.strerror or error
            raise ConfigError(f"--export {folder.path}: cannot write there ({reason})") from None
    except BaseException as error:
        folder.keep_what_was(written)  # a failure: said by fail(); a stop: said here
        if isinstance(error, KeyboardInterrupt) or stopping.asked():  # or an error it caused
            PROCESS.stopped_saying(
                f"the export was stopped; what it had written in {folder.path} is removed"
                if folder.fresh
                else f"the export into {folder.path} is incomplete; run the same command "
                "again to finish it"
            )
        raise
    where = folder.path.resolve()
    typer.echo(f"{done.files:,} files in {where} (open {where / 'index.html'})")
    if done.unshown:
        typer.echo(
            f"warning: {len(done.unshown):,} page(s) could not be shown and say why instead, "
            f"e.g. {where / done.unshown[0]}",
            err=True,
        )


STOPPING = (signal.SIGINT, signal.SIGTERM)

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
"""The Host headers a viewer bound to the loopback answers (numerate.view.app.create_app)."""


def serve(path: str, host: str, port: int) -> None:
    """Serve until SIGINT or SIGTERM, which end the process with 130 or 143 (numerate's
    handlers, not uvicorn's: a page still waiting for the database does not hold it up)."""
    import uvicorn
    from uvicorn.protocols.http.h11_impl import H11Protocol

    from numerate.store import access
    from numerate.view import connections
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

        async def serve(self, sockets: list[socket.socket] | None = None) -> None:
            asyncio.get_running_loop().set_exception_handler(connections.out_of_files(warn))
            await super().serve(sockets)

        def handle_exit(self, sig: int, frame: Any) -> None:
            PROCESS.came_as(sig)  # the command ends with its code (130, 143)
            access.hurry(0)  # a page waiting for the database gives up now, not at shutdown
            super().handle_exit(sig, frame)

    logging.getLogger("uvicorn.error").addFilter(_no_cancelled_pages)
    logging.getLogger("uvicorn.error").addFilter(_not_about_a_request)
    most = connections.most_connections()
    bounded = connections.guarded(H11Protocol, most, warn)
    config = uvicorn.Config(
        create_app(path, hosts),
        host=address,
        port=port,
        http=bounded,
        ws="none",  # no page uses one, and an upgrade hands the connection past the bounds
        backlog=most,
        log_level="warning",
        timeout_graceful_shutdown=1,
    )
    server = Server(config)
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


def _not_about_a_request(record: logging.LogRecord) -> bool:
    """False for uvicorn's warnings about one client's request ("Invalid HTTP request
    received.", "Unsupported upgrade request.", ...: its HTTP protocol's), which that client
    is answered (400) and which a client sending garbage in a loop made a line each on the
    terminal; uvicorn's errors (an application that failed) stay."""
    about_a_request = f"{os.sep}uvicorn{os.sep}protocols{os.sep}" in record.pathname
    return not (about_a_request and record.levelno == logging.WARNING)


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
