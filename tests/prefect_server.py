"""A real `prefect server` on 127.0.0.1, for the e2e tests and the benchmark."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from typing import IO, Any


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


def start_prefect_server(
    env: dict[str, str], log: IO[str] | int = subprocess.DEVNULL, timeout_s: float = 90
) -> tuple[subprocess.Popen[Any], str]:
    """Start a server with `env` and wait until it answers; returns it and its API URL.
    Raises RuntimeError (after stopping it) when it does not come up in time."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
         "--port", str(port)],
        env={**env, "PREFECT_SERVER_UI_ENABLED": "false"},
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2)
            return server, url
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                stop(server)
                raise RuntimeError("prefect server did not start") from None
            time.sleep(0.3)
