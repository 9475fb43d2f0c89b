"""Test environment: offline, quiet, a private PREFECT_HOME, and one Prefect server for the
whole session; all set before Prefect is imported.

The session's server: the first process of a session to import this file (pytest itself, or
pytest-xdist's controller) starts one `prefect server start` on a free port of 127.0.0.1 in a
home of its own and hands its address to everything that runs after it through
PREFECT_API_URL: the xdist workers, the in-process command runs and every `numerate` the tests
start as a process (tests/cli/test_run.py: numerate_env). A flow then costs its run, not a
server's start (about 7 s a command with a temporary server). The tests that check how numerate
starts a server itself (the background server, Prefect's temporary one) say so and clear the
variable: `numerate_env(home, own_server=True)`. A Prefect server the user runs, such as the
one `make run` leaves on 127.0.0.1:4200, is never used: the session's server has its own port
and home, and the start-up tests choose free ports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from hypothesis import HealthCheck, settings

SESSION_URL = "NUMERATE_TEST_PREFECT_API_URL"
"""The session server's API, set by the process that started it (its xdist workers inherit
it)."""

_PREFECT_HOME = tempfile.mkdtemp(prefix="numerate-test-prefect-")
os.environ.update(
    {
        "PREFECT_HOME": _PREFECT_HOME,
        # a private Hugging Face cache: tests install tiny models into it (tests/numgen)
        "HF_HOME": os.path.join(_PREFECT_HOME, "huggingface"),
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_LOGGING_TO_API_ENABLED": "false",
        "PREFECT_SERVER_UI_ENABLED": "false",
        "HF_HUB_OFFLINE": "1",
        # a test that clears PREFECT_API_URL gets Prefect's temporary server, never the
        # background server (tests/cli/test_server.py asks for that one by name)
        "NUMERATE_SERVER": "temporary",
        # a command that fails as numerate did not foresee prints its traceback, as Python
        # would, rather than one line and a file (numerate.cli._crashed)
        "NUMERATE_TRACEBACK": "1",
    }
)
for _variable in ("PREFECT_API_URL", "PREFECT_API_KEY", "PREFECT_PROFILES_PATH"):
    os.environ.pop(_variable, None)  # the user's server or profile is not the tests'

_SERVER_SERVICES_OFF = {
    f"PREFECT_SERVER_SERVICES_{name}_ENABLED": "false"
    for name in ("SCHEDULER", "LATE_RUNS", "FOREMAN", "CANCELLATION_CLEANUP", "PAUSE_EXPIRATIONS",
                 "REPOSSESSOR", "CLEANUP_RECONCILER", "TRIGGERS", "EVENT_PERSISTER",
                 "TASK_RUN_RECORDER")
}  # fmt: skip
"""The server's background services no test uses (no schedule, no worker, no automation; no
test reads events). The task-run recorder, which turns the runs' events into task runs, is off
too: under three workers its write waited up to 60 s for SQLite's lock while holding the
server's event loop (measured: the health check took 60 s, then the recorder logged `database
is locked`), and every command of every test waited with it. The one test that reads task
runs starts a server that records them (tests/flows/test_artifacts.py)."""

_session_server: subprocess.Popen[bytes] | None = None
if SESSION_URL not in os.environ:  # the session's first process: it starts the server
    from tests.prefect_server import SESSION_HOME, launch_prefect_server

    _SERVER_HOME = os.environ[SESSION_HOME] = tempfile.mkdtemp(
        prefix="numerate-test-prefect-server-"
    )
    _session_server, os.environ[SESSION_URL] = launch_prefect_server(
        dict(os.environ, PREFECT_HOME=_SERVER_HOME, **_SERVER_SERVICES_OFF),
        open(os.path.join(_SERVER_HOME, "server.log"), "wb"),  # noqa: SIM115 (its life)
        die_with_parent=True,
    )
os.environ["PREFECT_API_URL"] = os.environ[SESSION_URL]

# Hypothesis: the same examples on every run (a red suite is a bug, never bad luck) in the
# default profile; NUMERATE_HYPOTHESIS=nightly searches ten times as long, with new examples
# each time (tests/budget.py scales each property's own count).
settings.register_profile(
    "default", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("nightly", derandomize=False, deadline=None)
settings.load_profile(os.environ.get("NUMERATE_HYPOTHESIS", "default").strip() or "default")

import pytest  # noqa: E402

from tests.fake_openai import FakeOpenAI  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def prefect_harness():
    """The session's Prefect server, once it answers: every flow test reports to it."""
    from tests.prefect_server import migrated_template, wait_until_healthy

    url = os.environ[SESSION_URL]
    if not wait_until_healthy(url, timeout_s=120, server=_session_server):
        pytest.exit(f"the test session's Prefect server at {url} did not start", returncode=3)
    migrated_template()  # before any test has run a flow
    # Prefect takes its settings from the environment once, as it is first imported: a
    # process whose first import came in a test that had set PREFECT_API_URL to a server it
    # then stopped (tests/cli/test_first_contact.py's deploy tests) kept that address for
    # every later test ("Failed to reach API"), depending on which worker ran what first
    import prefect.context  # noqa: F401

    return url


@pytest.fixture
def fake_openai():
    """A loopback OpenAI-compatible endpoint, stopped after the test."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def db_path(tmp_path):
    from numerate.store import Store

    yield str(tmp_path / "results.duckdb")
    Store.close_all()


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL of this test process's own, for lakes (tests/postgres.py); the tests that
    need one are skipped, saying why, where it cannot start."""
    from tests import postgres

    try:
        server = postgres.start()
    except RuntimeError as error:
        pytest.skip(f"no PostgreSQL for the lake's tests: {error}")
    yield server
    server.stop()


@pytest.fixture
def lake(postgres_server, tmp_path, monkeypatch):
    """A new lake's name (a database of its own in the test process's PostgreSQL), with
    NUMERATE_LAKE_DATA a folder of the test's."""
    import uuid

    from numerate.store import Store

    name = f"lake_{uuid.uuid4().hex[:12]}"
    postgres_server.create_database(name)
    (tmp_path / "lake").mkdir()
    monkeypatch.setenv("NUMERATE_LAKE_DATA", f"{tmp_path / 'lake'}/")
    monkeypatch.setenv("NUMERATE_LAKE_JOURNALS", str(tmp_path / "journals"))
    yield postgres_server.location(name)
    Store.close_all()


def pytest_sessionfinish(session, exitstatus):
    from numerate.store import Store

    Store.close_all()  # an open DuckDB connection at exit makes its bindings report leaks
    shutil.rmtree(_PREFECT_HOME, ignore_errors=True)


def pytest_unconfigure(config):
    """The process that started the session's server stops it."""
    if _session_server is not None:
        from tests.prefect_server import stop

        stop(_session_server)
        shutil.rmtree(_SERVER_HOME, ignore_errors=True)
