"""numerate's background Prefect server (numerate.server.lifecycle): started by the first command
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

from numerate.server.lifecycle import alive, healthy
from tests.cli.test_run import numerate_env, start_endpoint, write_config
from tests.prefect_server import free_port

ROOT = Path(__file__).resolve().parents[2]


def background_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = numerate_env(tmp_path / "prefect", own_server=True)
    env.update(NUMERATE_SERVER="background", PREFECT_SERVER_API_PORT=str(free_port()), **extra)
    return env


def numerate(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "numerate.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


ANSWER_S = 10.0
"""How long a check of a server's health waits for its answer: a server just started on a
loaded machine took more than `healthy`'s 0.3 s (a refused connection is answered at once)."""


def state(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "prefect" / "numerate-server" / "server.json").read_text())


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def flow_runs_of(url: str, flow: str) -> list:
    """The runs of the flow named `flow` on the Prefect server at `url`."""
    import asyncio

    from prefect import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.settings import PREFECT_API_URL, temporary_settings

    async def read() -> list:
        async with get_client() as client:
            return await client.read_flow_runs(
                flow_filter=FlowFilter(name=FlowFilterName(any_=[flow]))
            )

    with temporary_settings(updates={PREFECT_API_URL: url}):
        return asyncio.run(read())


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
        server = state(tmp_path)
        assert alive(server["pid"]) and healthy(server["url"], timeout=ANSWER_S)

        second = numerate(env, "run", "--config", str(small_sweep), "--db", str(tmp_path / "b.db"))
        assert second.returncode == 0, second.stderr
        assert "background" not in second.stderr  # reused, not started again
        assert state(tmp_path)["pid"] == server["pid"]
        # numgen run too: it imported Prefect before it found the server, so Prefect started
        # a temporary server of its own for the run (8 s, and the run not in the UI)
        # (seen with a server of another PREFECT_HOME, which a command adopts)
        other = {**env, "PREFECT_HOME": str(tmp_path / "other-home")}
        images = str(tmp_path / "images")
        numgen = numerate(other, "numgen", "run", "--count", "1", "--db", str(tmp_path / "n.db"),
                          "--images-dir", images)  # fmt: skip
        assert numgen.returncode == 0, numgen.stderr
        assert "Starting temporary server" not in numgen.stderr, numgen.stderr
        assert "note: reporting to the Prefect server already on" in numgen.stderr
        assert flow_runs_of(server["url"], "numgen"), "the NumGen run is not on the server"

        running = numerate(env, "server", "status")
        assert running.returncode == 0 and server["url"] in running.stdout

        # a command holding the server: stop refuses, --force stops it all the same
        with (tmp_path / "prefect" / "numerate-server" / "users.lock").open("a") as users:
            fcntl.flock(users, fcntl.LOCK_SH)
            refused = numerate(env, "server", "stop")
            assert refused.returncode == 3 and refused.stderr.startswith("error: ")
            assert healthy(server["url"], timeout=ANSWER_S)
        stopped = numerate(env, "server", "stop")
        assert stopped.returncode == 0 and "stopped" in stopped.stdout
        assert not alive(server["pid"]) and not healthy(server["url"], timeout=ANSWER_S)
        assert numerate(env, "server", "status").returncode == 1
    finally:
        numerate(env, "server", "stop", "--force")


@pytest.mark.slow
def test_the_server_stops_by_itself_once_idle_and_never_under_a_command(tmp_path):
    env = background_env(tmp_path, NUMERATE_SERVER_IDLE_MINUTES="0.05")  # 3 s
    try:
        started = numerate(env, "server", "start")
        assert started.returncode == 0, started.stderr
        server = state(tmp_path)
        users = (tmp_path / "prefect" / "numerate-server" / "users.lock").open("a")
        fcntl.flock(users, fcntl.LOCK_SH)  # a command using it: it must stay
        time.sleep(8)
        assert alive(server["pid"]) and healthy(server["url"], timeout=ANSWER_S)
        users.close()
        assert wait_until(lambda: not alive(server["pid"]), 30), "idle server did not stop"
        assert not healthy(server["url"], timeout=ANSWER_S)
        assert not (tmp_path / "prefect" / "numerate-server" / "server.json").exists()
    finally:
        numerate(env, "server", "stop", "--force")


@pytest.mark.slow
def test_a_run_that_stops_on_bad_input_says_one_line_and_leaves_no_server(tmp_path):
    """The server starts before the sweep is read (it overlaps); a sweep that cannot run
    stops the server it started for nothing, and says nothing of it."""
    env = background_env(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nmodels: []\nmanifolds: []\n")
    try:
        db = str(tmp_path / "a.db")
        done = numerate(env, "run", "--config", str(bad), "--db", db, timeout=60)
        assert done.returncode == 2
        lines = done.stderr.strip().splitlines()  # the two problems, and nothing of a server
        assert len(lines) == 2 and all(line.startswith("error: ") for line in lines)
        port = env["PREFECT_SERVER_API_PORT"]
        assert wait_until(lambda: not healthy(f"http://127.0.0.1:{port}/api"), 10)
        assert numerate(env, "server", "status").returncode == 1
        assert not (tmp_path / "prefect" / "numerate-server" / "server.json").exists()
    finally:
        numerate(env, "server", "stop", "--force")


@pytest.mark.slow
def test_a_restarted_server_skips_the_migrations_it_already_ran(tmp_path):
    """Prefect's migrations run on a new database and once more, then are remembered for this
    Prefect and this database (migrated.json): a later start is 0.25 s sooner. Its state file
    goes with it when it stops."""
    env = background_env(tmp_path)
    folder = tmp_path / "prefect" / "numerate-server"
    try:
        for _ in range(2):  # a new database (created), then one that exists (marked)
            assert numerate(env, "server", "start").returncode == 0
            assert numerate(env, "server", "stop").returncode == 0
            assert not (folder / "server.json").exists()
        mark = json.loads((folder / "migrated.json").read_text())
        assert set(mark) == {"prefect", "database"}
        started = numerate(env, "server", "start")  # no migrations: still answers
        assert started.returncode == 0, started.stderr
        assert healthy(state(tmp_path)["url"], timeout=ANSWER_S)
    finally:
        numerate(env, "server", "stop", "--force")


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("NUMERATE_SERVER", "sometimes", "NUMERATE_SERVER='sometimes': choose background"),
        ("NUMERATE_SERVER_IDLE_MINUTES", "soon", "NUMERATE_SERVER_IDLE_MINUTES='soon'"),
        ("NUMERATE_SERVER_IDLE_MINUTES", "-5", "NUMERATE_SERVER_IDLE_MINUTES='-5'"),
        ("PREFECT_SERVER_API_PORT", "99999", "PREFECT_SERVER_API_PORT='99999'"),
        ("PREFECT_SERVER_API_PORT", "abc", "PREFECT_SERVER_API_PORT='abc'"),
        # Prefect took these, then its client's traceback, 5 to 77 s later
        ("PREFECT_API_REQUEST_TIMEOUT", "nan", "PREFECT_API_REQUEST_TIMEOUT=nan: give the"),
        ("PREFECT_API_REQUEST_TIMEOUT", "0", "PREFECT_API_REQUEST_TIMEOUT=0.0: give the"),
        ("PREFECT_API_REQUEST_TIMEOUT", "1e308", "PREFECT_API_REQUEST_TIMEOUT=1e+308: give"),
        # a blank home made the folder ` /numerate-server/temporary` here before its error
        ("PREFECT_HOME", " ", "PREFECT_HOME=' ': an empty path would mean here"),
        # the server did not start, exit 3, naming a port to change; never the value (a password)
        (
            "PREFECT_SERVER_DATABASE_CONNECTION_URL",
            "garbage:secret",
            "PREFECT_SERVER_DATABASE_CONNECTION_URL: no database URL; unset it",
        ),
        ("PREFECT_SERVER_DATABASE_CONNECTION_URL", "", "DATABASE_CONNECTION_URL: no database URL"),
    ],
)
def test_a_bad_server_setting_is_one_error_line_and_starts_nothing(
    tmp_path, variable, value, message
):
    env = background_env(tmp_path)
    env[variable] = value
    here = tmp_path / "here"
    here.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "numerate.cli", "server", "start"],
        cwd=here, env=dict(env, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and message in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "secret" not in done.stderr
    assert not (tmp_path / "prefect" / "numerate-server" / "server.json").exists()
    assert not any(here.iterdir())  # nothing made where the command ran


@pytest.mark.parametrize("kind", ["fifo", "folder", "zeros", "large"])
@pytest.mark.parametrize("variable", ["PREFECT_LOGGING_CONFIG_PATH", "PREFECT_PROFILES_PATH"])
def test_a_prefect_file_that_is_no_small_file_is_refused_before_prefect_reads_it(
    tmp_path, monkeypatch, kind, variable
):
    """Prefect reads these whole as it is imported: a pipe waited for ever, /dev/zero filled
    the memory (killed at 35 s), a folder was `[Errno 21] Is a directory`, exit 3."""
    from numerate.kernel.errors import ConfigError
    from numerate.server.lifecycle import MAX_PREFECT_FILE_BYTES, check_prefect_settings

    path = tmp_path / "settings"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "large":
        path.write_bytes(b"#" * (MAX_PREFECT_FILE_BYTES + 1))
    else:
        path = Path("/dev/zero")
    monkeypatch.setenv(variable, str(path))
    with pytest.raises(ConfigError) as refused:
        check_prefect_settings()
    said = {
        "fifo": "a device, a pipe or a socket, not a file",
        "zeros": "a device, a pipe",
        "folder": "a folder, not a file",
        "large": "1,048,577 bytes, more than the",
    }[kind]
    assert str(refused.value).startswith(f"{variable} {str(path)!r}: {said}")


def test_a_blank_home_without_prefect_home_is_refused_before_anything_is_made(monkeypatch):
    """`HOME=` and no PREFECT_HOME: Prefect made /.prefect, at the root (exit 0)."""
    from numerate.kernel.errors import ConfigError
    from numerate.server.lifecycle import check_prefect_home

    monkeypatch.delenv("PREFECT_HOME")
    monkeypatch.setenv("HOME", "")
    with pytest.raises(ConfigError, match=r"^HOME='': Prefect keeps its files in \$HOME/\.prefect"):
        check_prefect_home()


def test_a_port_another_program_holds_is_one_line_and_starts_nothing(tmp_path):
    """Before: the server was launched on it and failed, and the error quoted the last line
    of its log ("Application shutdown failed. Exiting.")."""
    import socket

    env = background_env(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", int(env["PREFECT_SERVER_API_PORT"])))
        holder.listen()
        done = numerate(env, "server", "start", timeout=60)
    assert done.returncode == 2, done.stderr
    port = env["PREFECT_SERVER_API_PORT"]
    assert done.stderr == (
        f"error: PREFECT_SERVER_API_PORT={port}: the port is taken by another program, not a "
        "Prefect server (choose a free port, or unset it for 4200 or any free port)\n"
    )
    assert not (tmp_path / "prefect" / "numerate-server" / "server.json").exists()


def test_the_server_files_live_under_prefect_home(monkeypatch, tmp_path):
    from numerate.server import lifecycle as server

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    assert server.home() == tmp_path / "home" / "numerate-server"
    monkeypatch.delenv("PREFECT_HOME")
    assert server.home() == Path(os.path.expanduser("~/.prefect/numerate-server"))


def health_server(body: bytes = b"true"):
    """A server that says it is a healthy Prefect server (and nothing else), running; with
    another `body`, a web server of another kind."""
    import http.server
    import threading

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    theirs = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=theirs.serve_forever, daemon=True).start()
    return theirs


def test_status_names_a_prefect_server_numerate_did_not_start_that_commands_use(tmp_path):
    """Before: "no background Prefect server runs (the next `numerate run` starts one)" while
    another Prefect server answered on the port and every command reported to it."""
    theirs = health_server()
    try:
        env = background_env(tmp_path)
        env["PREFECT_SERVER_API_PORT"] = str(theirs.server_address[1])
        done = numerate(env, "server", "status", timeout=60)
    finally:
        theirs.shutdown()
    assert done.returncode == 0, done.stderr
    url = f"http://127.0.0.1:{theirs.server_address[1]}/api"
    assert f"a Prefect server it did not start answers at {url}, and commands report" in (
        done.stdout
    )


def test_a_command_reporting_to_a_server_numerate_did_not_start_says_so(
    tmp_path, monkeypatch, capsys
):
    """Before: a run reported to whatever Prefect server answered on the port (another
    user's, or numerate's background server of another PREFECT_HOME) and said nothing."""
    theirs = health_server()
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PREFECT_SERVER_API_PORT", str(theirs.server_address[1]))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    try:
        from numerate.server.lifecycle import Background

        found = Background()
        found.wait()
        found.wait()
    finally:
        theirs.shutdown()
        os.environ.pop("PREFECT_API_URL", None)  # set by Background for the command's flows
    said = capsys.readouterr().err.splitlines()
    url = f"http://127.0.0.1:{theirs.server_address[1]}/api"
    assert said == [
        f"note: reporting to the Prefect server already on {url}, which numerate did not start "
        f"under PREFECT_HOME={tmp_path / 'home'} (NUMERATE_SERVER=temporary keeps this "
        "command's runs to itself)"
    ]  # once


def test_status_with_a_prefect_api_url_that_does_not_answer_exits_1(tmp_path):
    """It said `commands report to PREFECT_API_URL=...` and exit 0 with nothing behind it."""
    env = background_env(tmp_path)
    env["PREFECT_API_URL"] = "http://127.0.0.1:9/api"
    done = numerate(env, "server", "status", timeout=60)
    assert done.returncode == 1
    assert done.stdout.startswith("commands report to PREFECT_API_URL, which is not usable: ")
    assert "Prefect's API cannot be reached" in done.stdout


@pytest.mark.parametrize("password", ["PW/LEAK88", "PW#LEAK88"])
def test_a_prefect_api_url_whose_password_breaks_it_is_one_line_that_hides_it(tmp_path, password):
    """Corpus K: `http://u:PW/LEAK88@host/api` is no URL (the `/` ends the host, and `PW` was
    taken for its port): two thread tracebacks, "no answer within 5 s" (after 1 s), and the
    password in clear, from `server status` and `run`."""
    env = background_env(tmp_path)
    env["PREFECT_API_URL"] = f"http://u:{password}@127.0.0.1:1/api"
    status = numerate(env, "server", "status", timeout=60)
    run = numerate(env, "run", "--db", str(tmp_path / "r.duckdb"), timeout=60)
    for done, code in ((status, 1), (run, 2)):
        said = done.stdout + done.stderr
        assert done.returncode == code, said
        assert "LEAK88" not in said and "Traceback" not in said, said
        assert (
            "PREFECT_API_URL http://***@127.0.0.1:1/api is not a valid URL: a '/', '?' or " in said
        )
    assert not (tmp_path / "r.duckdb").exists()


def test_status_with_a_prefect_api_url_at_another_kind_of_server_says_what_it_is(monkeypatch):
    """Corpus J: a web server that answers was said to be one that "does not answer"."""
    from typer.testing import CliRunner

    from numerate.cli import app

    theirs = health_server(b"<html>hello</html>")
    try:
        monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{theirs.server_port}/api")
        result = CliRunner().invoke(app, ["server", "status"])
    finally:
        theirs.shutdown()
    assert result.exit_code == 1
    assert "which is not usable: " in result.output and "does not answer" not in result.output
    assert "not a Prefect API (" in result.output and "'<html>hello</html>'" in result.output


def test_status_under_temporary_servers_says_no_run_starts_a_background_one(tmp_path):
    """It said "the next `numerate run` starts one", which under NUMERATE_SERVER=temporary
    no run does (`server start` said so)."""
    env = background_env(tmp_path)
    env["NUMERATE_SERVER"] = "temporary"
    done = numerate(env, "server", "status", timeout=60)
    assert done.returncode == 1
    assert done.stdout.startswith("no background Prefect server: NUMERATE_SERVER=temporary")


def test_server_status_hides_the_credentials_of_prefect_api_url(monkeypatch):
    """Before: `server status` printed PREFECT_API_URL's password or token in clear (every
    other command's errors hid it); the health check was asked after the URL's query."""
    from typer.testing import CliRunner

    from numerate.cli import app
    from numerate.server.lifecycle import health_url

    for url, secret in (("http://alice:pw-S3CR3T-99@127.0.0.1:1/api", "pw-S3CR3T-99"),
                        ("http://127.0.0.1:1/api?token=TOKSECRET77", "TOKSECRET77")):  # fmt: skip
        monkeypatch.setenv("PREFECT_API_URL", url)
        result = CliRunner().invoke(app, ["server", "status"])
        assert result.exit_code == 1 and "which is not usable" in result.output
        assert secret not in result.output and "***" in result.output
    assert health_url("http://h/api?token=X") == "http://h/api/health?token=X"
    assert health_url("http://h/api/") == "http://h/api/health"


def test_a_prefect_api_url_that_redirects_is_said_to_redirect():
    """Before: the redirect was followed, its Location's `user:pw@host` taken for a host
    name, and the error blamed the DNS ("Name or service not known")."""
    import http.server
    import threading

    from numerate.kernel.errors import ConfigError
    from numerate.server.lifecycle import api_answers

    class Redirects(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(307)
            self.send_header("Location", "http://u:pw@elsewhere.invalid/api/health")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirects)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ConfigError, match=r"answers with a redirect \(HTTP 307\); give the"):
            api_answers(f"http://127.0.0.1:{server.server_port}/api")
    finally:
        server.shutdown()


def test_an_empty_prefect_api_url_is_taken_as_unset(tmp_path):
    """`PREFECT_API_URL= numerate run`: Prefect took the empty text for an address, and its
    event worker printed some 280 lines of tracebacks (exit 0)."""
    env = {**numerate_env(tmp_path / "prefect", own_server=True), "NUMERATE_SERVER": "temporary",
           "PREFECT_API_URL": ""}  # fmt: skip
    db = str(tmp_path / "r.db")
    done = numerate(env, "run", "--model", "baseline:oracle", "--db", db)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "EventsWorker" not in done.stderr, done.stderr


def test_server_start_names_what_keeps_the_background_server_unused(tmp_path):
    """Corpus H: `PREFECT_API_URL or NUMERATE_SERVER=temporary is set` when only one was."""
    env = {**numerate_env(tmp_path / "prefect", own_server=True), "NUMERATE_SERVER": "temporary"}
    done = numerate(env, "server", "start", timeout=60)
    assert done.returncode == 2 and done.stderr == (
        "error: NUMERATE_SERVER=temporary is set: each command starts a server of its own, no "
        "background server is used\n"
    )


@pytest.mark.parametrize("command", [["server", "status"], ["server", "stop"]])
def test_a_bad_numerate_server_is_one_line_for_status_and_stop(tmp_path, command):
    """Corpus J: `status` showed a ConfigError traceback (exit 1), `stop` ignored it (exit 0)."""
    env = {**numerate_env(tmp_path / "prefect", own_server=True), "NUMERATE_SERVER": "bogus"}
    done = numerate(env, *command, timeout=60)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == "error: NUMERATE_SERVER='bogus': choose background or temporary\n"


@pytest.mark.parametrize("command", ["run", "numgen"])
def test_a_run_whose_database_is_refused_leaves_no_server(tmp_path, command):
    """The server starts first (it overlaps the checks); a database that is no database, found
    after it was started, stops the server started for nothing, as bad input does."""
    env = background_env(tmp_path)
    db = tmp_path / "notes.duckdb"
    db.write_text("my notes, not a database\n")
    asked = {
        "run": ["run", "--db", str(db)],
        "numgen": ["numgen", "run", "--generator", "synthetic", "--detector", "blobs",
                   "--db", str(db), "--images-dir", str(tmp_path / "images")],
    }[command]  # fmt: skip
    try:
        done = numerate(env, *asked, timeout=60)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("error: cannot open results database"), done.stderr
        assert db.read_text() == "my notes, not a database\n"
        port = env["PREFECT_SERVER_API_PORT"]
        assert wait_until(lambda: not healthy(f"http://127.0.0.1:{port}/api"), 10)
        assert not (tmp_path / "prefect" / "numerate-server" / "server.json").exists()
    finally:
        numerate(env, "server", "stop", "--force")
