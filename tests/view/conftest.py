"""The database the viewer's tests read: two runs of one sweep made through the CLI (the same
cases: model `m` is the oracle in the first, a uniform guess in the second, so the second
loses cases), and a NumGen run on synthetic images."""

import resource
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from numerate.cli import app
from tests.cli.test_run import write_config

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
GRID = {"manifold": "objects", "count": 30, "grid": {"length": [2, 6], "distractor_count": [0, 3]}}
MANIFOLDS = [GRID, {"manifold": "sequence", "count": 30}]


def sql(db, query, *params):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(query, list(params)).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="package")
def results(tmp_path_factory):
    """The database and the two run ids, oldest first."""
    from numerate.store import Store

    folder = tmp_path_factory.mktemp("view")
    db = folder / "results.duckdb"
    for model in ("baseline:oracle", "baseline:random"):
        models = [{"name": "m", "model": model}, {"name": "h", "model": "baseline:heuristic"}]
        config = write_config(folder / "sweep.yaml", models, MANIFOLDS, name="nightly")
        result = runner.invoke(app, ["run", "--config", str(config), "--db", str(db)])
        assert result.exit_code == 0, result.output
    numgen = ["numgen", "run", "--generator", "synthetic", "--detector", "blobs", "--count", "2",
              "--db", str(db), "--images-dir", str(folder / "images")]  # fmt: skip
    result = runner.invoke(app, numgen)
    assert result.exit_code == 0, result.output
    Store.close_all()
    return db, [row[0] for row in sql(db, "SELECT run_id FROM runs ORDER BY started_at")]


def start_view(db, env=None, files=None) -> tuple[subprocess.Popen, str]:
    """A `numerate view` process serving `db` on a free port of 127.0.0.1 (with environment
    `env`, else this process's; at most `files` open files, if given), once it answers; and its
    address."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "numerate.cli", "view", "--db", str(db), "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=None if files is None else lambda: resource.setrlimit(
            resource.RLIMIT_NOFILE, (files, files)
        ),
    )  # fmt: skip
    address = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(address, timeout=2).close()
            return process, address
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(
                    f"numerate view did not start: {process.stderr.read()}"
                ) from None
            time.sleep(0.2)
