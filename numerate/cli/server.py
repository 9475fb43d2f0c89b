"""`numerate server status|start|stop`: numerate's background Prefect server
(numerate.server.lifecycle), seen and kept by hand."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Annotated, cast

import typer

from numerate.kernel.errors import ConfigError, NumerateError
from numerate.server.lifecycle import (
    Background,
    api_answers,
    connect,
    healthy,
    home,
    in_use,
    mode,
    port_url,
    read_state,
    terminate,
)

server_app = typer.Typer(
    help="The Prefect server numerate's commands start in the background and reuse.",
    no_args_is_help=True,
)


def _checked_mode() -> str:
    """`mode()`, or one error line and exit 2 for a NUMERATE_SERVER that is none."""
    from numerate.cli.common import fail

    try:
        return mode()
    except ConfigError as error:
        fail(error)


@server_app.command()
def status() -> None:
    """Say whether numerate's background Prefect server runs, where, and for how long it
    has been idle. Exit 0 when it runs, 1 when it does not."""
    _checked_mode()  # NUMERATE_SERVER=bogus: a traceback here, one line in `start`
    folder = home()
    state = read_state(folder)
    if state is None:
        if mode() == "external":
            from numerate.kernel.credentials import redact

            url = os.environ["PREFECT_API_URL"]
            try:
                api_answers(url)
            except ConfigError as error:  # the URL's password or token hidden, as in errors
                said = redact(f"commands report to PREFECT_API_URL, which is not usable: {error}")
                typer.echo(said)
                raise typer.Exit(1) from None
            typer.echo(redact(f"commands report to PREFECT_API_URL={url}"))
            return
        theirs = port_url()
        if mode() == "background" and healthy(theirs):  # as a command would find it
            typer.echo(
                f"no background server of numerate's runs under {folder.parent}; a Prefect "
                f"server it did not start answers at {theirs}, and commands report to it"
            )
            return
        if mode() == "temporary":  # not "the next run starts one": it does not
            typer.echo(
                "no background Prefect server: NUMERATE_SERVER=temporary, so each command "
                "starts Prefect's temporary server and stops it when it ends"
            )
            raise typer.Exit(1)
        typer.echo("no background Prefect server runs (the next `numerate run` starts one)")
        raise typer.Exit(1)
    now = time.time()
    idle = "in use by a numerate command now" if in_use(folder) else idle_text(folder, now)
    stops = f"stops after {state.idle_minutes:g} idle minutes" if state.idle_minutes else (
        "runs until `numerate server stop`")  # fmt: skip
    typer.echo(
        f"Prefect server running in the background: UI at {state.ui}, API at {state.url}\n"
        f"  pid {state.pid}, up {minutes(now - state.started)}, {idle}; {stops}\n"
        f"  log: {folder / 'server.log'}"
    )


def idle_text(folder: Path, now: float) -> str:
    try:
        return f"idle for {minutes(now - (folder / 'last-used').stat().st_mtime)}"
    except OSError:
        return "idle"


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


@server_app.command()
def start() -> None:
    """Start numerate's background Prefect server now (every command starts it when needed)."""
    from numerate.cli.common import fail

    try:
        chosen = mode()
        if chosen != "background":
            raise ConfigError(
                "PREFECT_API_URL is set: commands report to its server, no background server "
                "is used"
                if chosen == "external"
                else "NUMERATE_SERVER=temporary is set: "
                "each command starts a server of its own, no background server is used"
            )
        server = cast(Background, connect())  # its settings checked as every command's
        server.wait()
    except NumerateError as error:
        fail(error)
    if server.state is None:
        typer.echo(f"a Prefect server not started by numerate answers at {server.url}")
    else:
        typer.echo(f"Prefect server running in the background: API at {server.url}")


@server_app.command()
def stop(
    force: Annotated[
        bool, typer.Option(help="Stop it even while a numerate command is using it.")
    ] = False,
) -> None:
    """Stop numerate's background Prefect server (a later command starts a new one)."""
    from numerate.cli.common import fail

    _checked_mode()  # NUMERATE_SERVER=bogus: ignored here, exit 0, refused by `start`
    folder = home()
    state = read_state(folder)
    if state is None:
        typer.echo("no background Prefect server runs")
        return
    if in_use(folder) and not force:
        fail("a numerate command is using the Prefect server now: let it end, or --force", 3)
    terminate(state)
    typer.echo(f"stopped the Prefect server at {state.ui}")
