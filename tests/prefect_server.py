"""A real `prefect server` on 127.0.0.1: the test session's own (`SessionServer`, one for every
test and xdist worker), the e2e tests' and the benchmark's."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO, Any

SESSION_HOME = "NUMERATE_TEST_PREFECT_SERVER_HOME"
"""The session server's PREFECT_HOME (tests/conftest.py), where its migrated database lies."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop(process: subprocess.Popen[Any]) -> None:
    """TERM, then INT, then KILL, 5 s apart (a worker may ignore one SIGTERM); the process
    must lead its own session (start_new_session=True)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
        if process.poll() is not None:
            return
        os.killpg(process.pid, sig)
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            continue


def launch_prefect_server(
    env: dict[str, str], log: IO[str] | int = subprocess.DEVNULL, die_with_parent: bool = False
) -> tuple[subprocess.Popen[Any], str]:
    """Start a server with `env` on a free port of 127.0.0.1, without waiting for it; returns
    it and its API URL. `die_with_parent`: the kernel sends it SIGTERM when the process that
    started it ends, however it ends (a test session killed with SIGKILL leaves no server)."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
         "--port", str(port)],
        env={**env, "PREFECT_SERVER_UI_ENABLED": "false"},
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        preexec_fn=_terminated_with_parent if die_with_parent else None,
    )  # fmt: skip
    return server, f"http://127.0.0.1:{port}/api"


def _terminated_with_parent() -> None:
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def wait_until_healthy(
    url: str, timeout_s: float, server: subprocess.Popen[Any] | None = None
) -> bool:
    """Whether the Prefect API at `url` answers its health check within `timeout_s` (False
    at once when `server`, its process, has ended)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.read().strip() == b"true":
                    return True
        except OSError:
            pass
        if time.monotonic() > deadline or (server is not None and server.poll() is not None):
            return False
        time.sleep(0.1)


def start_prefect_server(
    env: dict[str, str], log: IO[str] | int = subprocess.DEVNULL, timeout_s: float = 90
) -> tuple[subprocess.Popen[Any], str]:
    """Start a server with `env` and wait until it answers; returns it and its API URL.
    Raises RuntimeError (after stopping it) when it does not come up in time."""
    server, url = launch_prefect_server(env, log)
    if not wait_until_healthy(url, timeout_s, server):
        stop(server)
        raise RuntimeError("prefect server did not start")
    return server, url


def migrated_database(prefect_home: Path) -> None:
    """Put a Prefect database whose migrations have run into `prefect_home`: a copy of the
    session server's as it began (`migrated_template`). A command that starts Prefect's own
    server in that home then skips about 9 s of migrations; what it does is the same."""
    prefect_home.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(migrated_template(), prefect_home / "prefect.db")


def migrated_template() -> Path:
    """A copy of the session server's database, made once, as the session begins (the first
    worker to ask makes it): migrated, and holding no run of any test yet."""
    import fcntl
    import sqlite3

    server_home = Path(os.environ[SESSION_HOME])
    template = server_home / "migrated-template.db"
    with (server_home / "migrated-template.lock").open("a") as lock:  # xdist workers
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            partial = template.with_suffix(".partial")
            source = sqlite3.connect(f"file:{server_home / 'prefect.db'}?mode=ro", uri=True)
            copy = sqlite3.connect(partial)
            try:
                source.backup(copy)  # a consistent copy of a database the server writes
            finally:
                copy.close()
                source.close()
            partial.replace(template)
    return template
