"""The database the viewer's tests read: two runs of one sweep made through the CLI (the same
cases: model `m` is the oracle in the first, a uniform guess in the second, so the second
loses cases), and a NumGen run on synthetic images."""

import duckdb
import pytest
from typer.testing import CliRunner

from numerate.cli import app
from tests.cli.test_run import write_config

runner = CliRunner()
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
        assert result.exit_code in (0, 3), result.output
    numgen = ["numgen", "run", "--generator", "synthetic", "--detector", "blobs", "--count", "2",
              "--db", str(db), "--images-dir", str(folder / "images")]  # fmt: skip
    result = runner.invoke(app, numgen)
    assert result.exit_code == 0, result.output
    Store.close_all()
    return db, [row[0] for row in sql(db, "SELECT run_id FROM runs ORDER BY started_at")]
