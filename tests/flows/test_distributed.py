"""A sweep split by model, its parts run by the task runner and ingested into one database."""

import asyncio

import pytest

from numerate.flows.distributed import CONFIG_EXAMPLE as CONFIG
from numerate.flows.distributed import distributed_sweep
from numerate.store import Store

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_parts_run_separately_and_land_in_one_database(tmp_path):
    db = str(tmp_path / "central.duckdb")
    run_ids = asyncio.run(distributed_sweep(CONFIG, db, str(tmp_path / "parts")))
    assert len(run_ids) == 2
    assert sorted(p.name for p in (tmp_path / "parts").glob("*.duckdb")) == [
        "oracle.duckdb", "random.duckdb",
    ]  # fmt: skip
    store = Store.open(db)
    rows = store.query("SELECT model, count(*) FROM responses GROUP BY model ORDER BY model")
    assert rows == [("oracle", 10), ("random", 10)]
    assert store.query("SELECT count(*) FROM cases") == [(10,)]
    assert store.query("SELECT accuracy FROM leaderboard WHERE model = 'oracle'") == [(1.0,)]
