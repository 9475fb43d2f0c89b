"""numerate's background Prefect server (numerate.cli.server): started by the first command
that runs a flow, reused by later ones, stopped by `numerate server stop` or after an idle
period, never under a command that uses it. Real processes, a private PREFECT_HOME."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from numerate.cli.server import alive, healthy
from tests.cli.test_run import numerate_env, start_endpoint, write_config
from tests.prefect_server import free_port

ROOT = Path(__file__).resolve().parents[2]


def background_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = numerate_env(tmp_path / "prefect")
    env.update(NUMERATE_SERVER="background", PREFECT_SERVER_API_PORT=str(free_port()), **extra)
    return env


def numerate(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "numerate.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def state(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "prefect" / "numerate-server" / "server.json").read_text())


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.fixture
def small_sweep(tmp_path):
    endpoint, base_url, _log = start_endpoint(tmp_path, delay=0)
    config = write_config(
        tmp_path / "sweep.yaml",
        [{"name": "fake", "model": "fake-model", "base_url": base_url}],
        [{"manifold": "objects", "count": 5}],
    )
    yield config
    endpoint.kill()


@pytest.mark.slow
def test_the_first_run_starts_the_server_later_runs_reuse_it_and_stop_stops_it(
    tmp_path, small_sweep
):
    env = background_env(tmp_path)
    try:
        none = numerate(env, "server", "status")
        assert none.returncode == 1 and "no background Prefect server" in none.stdout

        first = numerate(env, "run", "--config", str(small_sweep), "--db", str(tmp_path / "a.db"))
        assert first.returncode == 0, first.stderr
        announced = [line for line in first.stderr.splitlines() if "background" in line]
        assert len(announced) == 1 and env["PREFECT_SERVER_API_PORT"] in announced[0]
        keeper = state(tmp_path)
        assert alive(keeper["pid"]) and healthy(keeper["url"])

        second = numerate(env, "run", "--config", str(small_sweep), "--db", str(tmp_path / "b.db"))
        assert second.returncode == 0, second.stderr
        assert "background" not in second.stderr  # reused, not started again
        assert state(tmp_path)["pid"] == keeper["pid"]

        running = numerate(env, "server", "status")
        assert running.returncode == 0 and keeper["url"] in running.stdout

        # a command holding the server: stop refuses, --force stops it all the same
        with (tmp_path / "prefect" / "numerate-server" / "users.lock").open("a") as users:
            fcntl.flock(users, fcntl.LOCK_SH)
            refused = numerate(env, "server", "stop")
            assert refused.returncode == 3 and refused.stderr.startswith("error: ")
            assert healthy(keeper["url"])
        stopped = numerate(env, "server", "stop")
        assert stopped.returncode == 0 and "stopped" in stopped.stdout
        assert not alive(keeper["pid"]) and not healthy(keeper["url"])
        assert numerate(env, "server", "status").returncode == 1
    finally:
        numerate(env, "server", "stop", "--force")


@pytest.mark.slow
def test_the_server_stops_by_itself_once_idle_and_never_under_a_command(tmp_path):
    env = background_env(tmp_path, NUMERATE_SERVER_IDLE_MINUTES="0.05")  # 3 s
    try:
        started = numerate(env, "server", "start")
        assert started.returncode == 0, started.stderr
        keeper = state(tmp_path)
        users = (tmp_path / "prefect" / "numerate-server" / "users.lock").open("a")
        fcntl.flock(users, fcntl.LOCK_SH)  # a command using it: it must stay
        time.sleep(8)
        assert alive(keeper["pid"]) and healthy(keeper["url"])
        users.close()
        assert wait_until(lambda: not alive(keeper["pid"]), 30), "idle server did not stop"
        assert not healthy(keeper["url"])
        assert not (tmp_path / "prefect" / "numerate-server" / "server.json").exists()
    finally:
        numerate(env, "server", "stop", "--force")


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("NUMERATE_SERVER", "sometimes", "NUMERATE_SERVER='sometimes': choose background"),
        ("NUMERATE_SERVER_IDLE_MINUTES", "soon", "NUMERATE_SERVER_IDLE_MINUTES='soon'"),
        ("NUMERATE_SERVER_IDLE_MINUTES", "-5", "NUMERATE_SERVER_IDLE_MINUTES='-5'"),
        ("PREFECT_SERVER_API_PORT", "99999", "PREFECT_SERVER_API_PORT='99999'"),
    ],
)
def test_a_bad_server_setting_is_one_error_line_and_starts_nothing(
    tmp_path, variable, value, message
):
    env = background_env(tmp_path)
    env[variable] = value
    done = numerate(env, "server", "start", timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "prefect" / "numerate-server" / "server.json").exists()


def test_the_keeper_file_lives_under_prefect_home(monkeypatch, tmp_path):
    from numerate.cli import server

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    assert server.home() == tmp_path / "home" / "numerate-server"
    monkeypatch.delenv("PREFECT_HOME")
    assert server.home() == Path(os.path.expanduser("~/.prefect/numerate-server"))
