"""numerate's background Prefect server (numerate.server.lifecycle): Prefect's API and UI served in
this process (uvicorn over `prefect.server.api.server.create_app`, what `prefect server start`
serves, without its command line: 0.2 s sooner, and one process to stop). It stops when told
to (SIGTERM, SIGINT: `numerate server stop`) or when it has been idle for the set period (no
numerate command holding it, none started or ended for that long).

Run as `python -m numerate.server.serverd HOME PORT IDLE_SECONDS [OWNER]` by the first command
that needs the server, in its own session, with its output going to HOME/server.log. With
OWNER (a process id: NUMERATE_SERVER=temporary), it serves that command only and stops as soon
as that process is gone, however it ended.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

CHECK_SECONDS = 2.0
OWNER_CHECK_SECONDS = 0.2
STOP_GRACE_SECONDS = 10

_stopping: list[IO[str]] = []  # the users' lock, held exclusively from an idle stop to exit


def forget(home: Path) -> None:
    """Remove the state file if it is still this server's (a newer one may own it)."""
    state = home / "server.json"
    with contextlib.suppress(OSError, ValueError):
        if json.loads(state.read_text()).get("pid") == os.getpid():
            state.unlink()


def idle_for(home: Path) -> float:
    """Seconds since a numerate command last started or ended on this server."""
    try:
        return time.time() - (home / "last-used").stat().st_mtime
    except OSError:
        return float("inf")


def stop_if_idle(home: Path, idle_seconds: float) -> bool:
    """Whether to stop now: no command holds the server and none came for `idle_seconds`.
    The users' lock stays held exclusively until this process exits: a command that arrives
    meanwhile waits, then finds no server and starts a new one, never one going away."""
    users = (home / "users.lock").open("a")
    try:
        fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        users.close()
        return False  # a command is using it
    if idle_for(home) < idle_seconds:
        users.close()
        return False
    _stopping.append(users)
    forget(home)
    return True


def watch_owner(owner: int, serving: list[Any]) -> None:
    """End this server once `owner`, the process that started it, is gone (this process then
    has another parent): at once while it is still starting, else gracefully (`serving`
    holds the uvicorn.Server once it is built)."""
    while os.getppid() == owner:
        time.sleep(OWNER_CHECK_SECONDS)
    if not serving:
        os._exit(0)
    serving[0].should_exit = True


def watch(home: Path, server: Any, idle_seconds: float) -> None:
    """Ask `server` (a uvicorn.Server) to exit once it has been idle for `idle_seconds`."""
    while not server.should_exit:
        time.sleep(CHECK_SECONDS)
        if stop_if_idle(home, idle_seconds):
            server.should_exit = True


def database_mark() -> str | None:
    """What names Prefect's database and the Prefect that migrates it (its version, its
    SQLite file's path); None when it is not a SQLite file that exists (a server elsewhere,
    a new home): its migrations then always run."""
    import prefect
    from prefect.settings import get_current_settings

    url = get_current_settings().server.database.connection_url
    text = url.get_secret_value() if url else ""
    path = text.removeprefix("sqlite+aiosqlite:///")
    if path == text or not Path(path).is_file():
        return None
    digest = hashlib.sha256(path.encode()).hexdigest()
    return json.dumps({"prefect": prefect.__version__, "database": digest})


def already_migrated(home: Path, mark: str) -> bool:
    """Whether this server migrated that database with this Prefect before (its migrations
    need not run again: 0.25 s of a start)."""
    try:
        return (home / "migrated.json").read_text() == mark
    except OSError:
        return False


def remember_migrated(home: Path, server: Any, mark: str) -> None:
    """Once the server answers (its migrations done): note that they are done."""
    while not server.started and not server.should_exit:
        time.sleep(0.1)
    if server.started:
        with contextlib.suppress(OSError):
            (home / "migrated.json").write_text(mark)


def serve(home: Path, port: int, idle_seconds: float, serving: list[Any]) -> None:

    gc.disable()  # while Prefect's server is imported and built: 0.6 s of its 2.7 s start
    import uvicorn
    from prefect.server.api.server import create_app
    from prefect.settings import (
        PREFECT_API_DATABASE_MIGRATE_ON_START,
        PREFECT_SERVER_API_KEEPALIVE_TIMEOUT,
        PREFECT_SERVER_API_WEBSOCKET_PING_INTERVAL,
        PREFECT_SERVER_API_WEBSOCKET_PING_TIMEOUT,
        PREFECT_SERVER_LOGGING_LEVEL,
        temporary_settings,
    )

    config = uvicorn.Config(
        create_app(final=True), host="127.0.0.1", port=port,
        timeout_keep_alive=PREFECT_SERVER_API_KEEPALIVE_TIMEOUT.value(),
        ws_ping_interval=PREFECT_SERVER_API_WEBSOCKET_PING_INTERVAL.value(),
        ws_ping_timeout=PREFECT_SERVER_API_WEBSOCKET_PING_TIMEOUT.value(),
        log_level=PREFECT_SERVER_LOGGING_LEVEL.value().lower(),
        timeout_graceful_shutdown=STOP_GRACE_SECONDS,
    )  # fmt: skip
    gc.freeze()  # what was built lives as long as the server: never scanned again
    gc.enable()
    server = uvicorn.Server(config)
    if idle_seconds > 0:
        threading.Thread(target=watch, args=(home, server, idle_seconds), daemon=True).start()
    serving.append(server)
    mark = database_mark() if PREFECT_API_DATABASE_MIGRATE_ON_START.value() else None
    skip: dict[Any, Any] = {}
    if mark is not None and already_migrated(home, mark):
        skip = {PREFECT_API_DATABASE_MIGRATE_ON_START: False}
    elif mark is not None:
        threading.Thread(target=remember_migrated, args=(home, server, mark), daemon=True).start()
    with temporary_settings(skip):
        server.run()  # SIGTERM and SIGINT: uvicorn's graceful stop


def main(argv: list[str]) -> int:
    home, port, idle_seconds = Path(argv[0]), int(argv[1]), float(argv[2])
    serving: list[Any] = []  # the uvicorn.Server, once built
    if len(argv) > 3:  # a command's own server: from its first moment, it ends with it
        owner = int(argv[3])
        threading.Thread(target=watch_owner, args=(owner, serving), daemon=True).start()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    for stop_signal in (signal.SIGTERM, signal.SIGINT):  # uvicorn raises it again once stopped
        signal.signal(stop_signal, lambda signum, frame: sys.exit(0))
    try:
        serve(home, port, idle_seconds, serving)
    finally:
        forget(home)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
