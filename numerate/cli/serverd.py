"""The keeper of numerate's background Prefect server (numerate.cli.server): runs
`prefect server start` as its child, and stops it when told to (SIGTERM, SIGINT: `numerate
server stop`), when it has been idle for the set period (no numerate command holding it, none
started or ended for that long), or dies with it when the server exits by itself.

Run as `python -m numerate.cli.serverd HOME PORT IDLE_SECONDS` by the first command that needs
the server, in its own session; it imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

CHECK_SECONDS = 2.0
STOP_GRACE_SECONDS = 10.0


def die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    """The server dies with its keeper (Linux: PR_SET_PDEATHSIG), so that a keeper killed
    with SIGKILL leaves no server that nothing would ever stop."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start(home: Path, port: int) -> subprocess.Popen[bytes]:
    log = (home / "server.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
         "--port", str(port)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent if sys.platform == "linux" else None,
    )  # fmt: skip


def stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is not None:
        return
    server.terminate()
    try:
        server.wait(STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def forget(home: Path) -> None:
    """Remove the state file if it is still this keeper's (a newer keeper may own it)."""
    state = home / "server.json"
    with contextlib.suppress(OSError, ValueError):
        import json

        if json.loads(state.read_text()).get("pid") == os.getpid():
            state.unlink()


def idle_for(home: Path) -> float:
    """Seconds since a numerate command last started or ended on this server."""
    try:
        return time.time() - (home / "last-used").stat().st_mtime
    except OSError:
        return float("inf")


def stop_if_idle(home: Path, server: subprocess.Popen[bytes], idle_seconds: float) -> bool:
    """Stop the server when no command holds it and none came for `idle_seconds`. Holding the
    users' lock exclusively while stopping makes a command that arrives meanwhile wait, then
    find no server and start a new one, never one that is going away."""
    with (home / "users.lock").open("a") as users:
        try:
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # a command is using it
        if idle_for(home) < idle_seconds:
            return False
        forget(home)
        stop(server)
        return True


def main(argv: list[str]) -> int:
    home, port, idle_seconds = Path(argv[0]), int(argv[1]), float(argv[2])
    server = start(home, port)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        forget(home)
        stop(server)
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while server.poll() is None:
        time.sleep(CHECK_SECONDS)
        if idle_seconds > 0 and stop_if_idle(home, server, idle_seconds):
            return 0
    forget(home)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
