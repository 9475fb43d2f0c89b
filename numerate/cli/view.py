"""`numerate view`: the results in a browser (numerate.view)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from numerate.cli.app import app
from numerate.cli.common import fail
from numerate.kernel.errors import ConfigError, NumerateError


@app.command()
def view(
    db: Annotated[
        str | None,
        typer.Option(
            help="DuckDB results file (default: $NUMERATE_DB, else results/numerate.duckdb)."
        ),
    ] = None,
    port: Annotated[int, typer.Option(help="Port to serve on.", min=1, max=65535)] = 8765,
    host: Annotated[
        str, typer.Option(help="Address to serve on (127.0.0.1: this machine only).")
    ] = "127.0.0.1",
    export: Annotated[
        str | None,
        typer.Option(help="Write the pages as files into this folder instead (no server)."),
    ] = None,
) -> None:
    """Browse the results in a web page: runs, a run's leaderboard, each manifold's curves and
    heatmap, the cases behind a cell, comparisons. Read-only; serves until Ctrl-C."""
    from numerate.config import results_database
    from numerate.store.reader import Reader

    try:
        path = results_database(db, None)
        Reader.open(path).close()  # a database that cannot be read: one line, now
        if export is not None:
            export_pages(path, export_folder(export))
            return
    except NumerateError as error:
        fail(error)
    serve(path, host, port)


def export_folder(given: str) -> Path:
    """The folder an export goes into: new, or empty, or an earlier export (its index.html)."""
    if not given.strip():
        raise ConfigError("--export '': give a folder")
    folder = Path(given).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--export {given}: not a folder")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / "index.html").is_file():
        raise ConfigError(f"--export {given}: a folder with other files in it (give a new one)")
    return folder


def export_pages(path: str, folder: Path) -> None:
    from numerate.store.reader import Reader
    from numerate.view.app import templates
    from numerate.view.export import export

    done = [0]

    def progress(page: str) -> None:
        done[0] += 1
        if done[0] % 200 == 0:
            typer.echo(f"  {done[0]:,} pages written ...", err=True)

    with Reader.open(path) as reader:
        written = export(reader, folder, templates(), progress, between=reader.let_writers_in)
    typer.echo(f"{written:,} files in {folder.resolve()} (open {folder.resolve() / 'index.html'})")


def serve(path: str, host: str, port: int) -> None:
    import socket

    import uvicorn

    from numerate.view.app import create_app

    try:
        with socket.create_server((host, port)):
            pass
    except OSError as error:
        fail(f"cannot serve on {host}:{port}: {error.strerror or error} (choose --host or --port)")
    typer.echo(f"numerate view of {path}: http://{host}:{port}/ (Ctrl-C stops it)", err=True)
    uvicorn.run(create_app(path), host=host, port=port, log_level="warning")
