"""Test environment: offline, quiet, a private PREFECT_HOME; set before Prefect is imported."""

from __future__ import annotations

import os
import shutil
import tempfile

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
        # each test process starts and stops its own server; tests/cli/test_server.py checks
        # the background server that users get by default
        "NUMERATE_SERVER": "temporary",
    }
)
os.environ.pop("PREFECT_API_URL", None)

import pytest  # noqa: E402

from tests.fake_openai import FakeOpenAI  # noqa: E402


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect API for every flow test of the session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=60):
        yield


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


def pytest_sessionfinish(session, exitstatus):
    from numerate.store import Store

    Store.close_all()  # an open DuckDB connection at exit makes its bindings report leaks
    shutil.rmtree(_PREFECT_HOME, ignore_errors=True)
