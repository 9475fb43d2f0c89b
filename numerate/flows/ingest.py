"""Loading the Parquet shards of runs made elsewhere into one database. Wiring only."""

from prefect import flow, get_run_logger

from numerate.config.sweep import results_database
from numerate.tasks.database import ingest_shards, release_database


@flow(name="ingest")
async def ingest(results_dir: str, db: str | None = None) -> list[str]:
    """Load every complete run in `results_dir` that `db` (default: $NUMERATE_DB, else
    results/numerate.duckdb) lacks; returns their run ids."""
    db = results_database(db)
    loaded = await ingest_shards(results_dir, db)
    await release_database(db)
    get_run_logger().info("ingested %d run(s) from %s into %s", len(loaded), results_dir, db)
    return loaded
