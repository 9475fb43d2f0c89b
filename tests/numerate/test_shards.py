"""Runs on two workers publish Parquet shards; one ingest merges them idempotently."""

import asyncio

import pytest
from typer.testing import CliRunner

from numerate.cli import app
from numerate.flows.ingest import ingest
from numerate.flows.sweep import sweep
from numerate.store import Store
from numerate.store.shards import SUCCESS, complete_runs

pytestmark = pytest.mark.usefixtures("prefect_harness")


def config(model, results_dir):
    return {
        "name": "split",
        "results_dir": str(results_dir),
        "models": [{"name": model, "model": f"baseline:{model}"}],
        "manifolds": [{"manifold": "objects", "count": 5}, {"manifold": "shuffle", "count": 5}],
    }


def table(db, sql):
    store = Store.open(str(db))
    try:
        return sorted(store.query(sql))
    finally:
        Store.close_all()


def test_two_workers_share_one_sweep_through_shards(tmp_path):
    shared = tmp_path / "shared"
    # two "workers", each with its own database, one model each
    oracle_run = asyncio.run(sweep(config("oracle", shared), str(tmp_path / "worker-a.duckdb")))
    random_run = asyncio.run(sweep(config("random", shared), str(tmp_path / "worker-b.duckdb")))
    Store.close_all()
    assert complete_runs(str(shared)) == sorted([oracle_run, random_run])

    (shared / "half-written").mkdir()  # no _SUCCESS marker: never ingested
    (shared / "half-written" / "runs.parquet.partial").write_bytes(b"")

    central = tmp_path / "central.duckdb"
    loaded = asyncio.run(ingest(str(shared), str(central)))
    assert sorted(loaded) == sorted([oracle_run, random_run])
    query = "SELECT run_id, model, count(*) FROM responses GROUP BY ALL"
    assert table(central, query) == sorted([(oracle_run, "oracle", 10), (random_run, "random", 10)])
    # the same cases served both runs: stored once
    assert table(central, "SELECT count(*) FROM cases") == [(10,)]
    assert table(central, "SELECT model FROM leaderboard") == [("oracle",), ("random",)]
    before = table(central, "SELECT * FROM summaries")

    assert asyncio.run(ingest(str(shared), str(central))) == []  # idempotent
    assert table(central, "SELECT * FROM summaries") == before
    assert table(central, "SELECT count(*) FROM responses") == [(20,)]


def test_ingest_from_the_cli(tmp_path):
    shared = tmp_path / "shared"
    run_id = asyncio.run(sweep(config("oracle", shared), str(tmp_path / "w.duckdb")))
    Store.close_all()
    assert (shared / run_id / SUCCESS).exists()
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", str(tmp_path / "c.duckdb")])
    assert result.exit_code == 0, result.output
    assert "ingested 1 run(s)" in result.stdout and run_id in result.stdout
    missing = CliRunner().invoke(
        app, ["ingest", str(tmp_path / "nowhere"), "--db", str(tmp_path / "c.duckdb")]
    )
    assert missing.exit_code == 2 and "no results location" in missing.stderr


def test_a_corrupt_or_incomplete_shard_is_skipped_and_named(tmp_path):
    shared = tmp_path / "shared"
    good = asyncio.run(sweep(config("oracle", shared), str(tmp_path / "a.duckdb")))
    cut = asyncio.run(sweep(config("random", shared), str(tmp_path / "b.duckdb")))
    Store.close_all()
    (shared / cut / "responses.parquet").write_bytes(b"PAR1 truncated")  # a cut upload
    lacking = shared / "lacking"
    lacking.mkdir()
    (lacking / SUCCESS).write_bytes(b"")  # marked complete, yet no table files
    central = str(tmp_path / "central.duckdb")
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", central])
    assert result.exit_code == 3, result.output
    assert f"ingested 1 run(s) into {central}\n  {good}" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2 and any(cut in w for w in warnings)
    assert any("lacking" in w for w in warnings)
    assert result.stderr.splitlines()[-1].startswith("error: 2 run(s) skipped")
    # nothing of a skipped run was written (its transaction rolled back): a later ingest of
    # its fixed shards loads it whole
    assert table(central, "SELECT DISTINCT run_id FROM responses") == [(good,)]
    assert table(central, "SELECT run_id FROM runs") == [(good,)]


def test_ingest_of_a_file_is_an_error(tmp_path):
    a_file = tmp_path / "shard.parquet"
    a_file.write_bytes(b"x")
    result = CliRunner().invoke(app, ["ingest", str(a_file), "--db", str(tmp_path / "c.duckdb")])
    assert result.exit_code == 2 and "is a file, not a folder of run shards" in result.stderr


def test_a_results_dir_that_is_a_file_says_so(tmp_path):
    """It said "cannot be written: File exists"."""
    from numerate.kernel.errors import ConfigError
    from numerate.store.shards import check_writable

    planted = tmp_path / "planted"
    planted.write_text("a file")
    with pytest.raises(ConfigError, match="a file, not a folder"):
        check_writable(str(planted))
    assert planted.read_text() == "a file"
