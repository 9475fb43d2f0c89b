"""One big sweep over a cluster: its models run as separate parts, on a Dask cluster when
NUMERATE_DASK_ADDRESS names its scheduler (else in a local thread pool), each into its own
database; their Parquet shards are then ingested into one. Wiring only."""

import asyncio
import os
from typing import Any

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from numerate.config.sweep import SweepConfig, parse_sweep_config, results_database, split_by_model
from numerate.flows.sweep import sweep
from numerate.tasks.database import ingest_shards, release_database

CONFIG_EXAMPLE = parse_sweep_config(
    {
        "name": "distributed-example",
        "models": [
            {"name": "oracle", "model": "baseline:oracle"},
            {"name": "random", "model": "baseline:random"},
        ],
        "manifolds": [{"manifold": "shuffle", "count": 6}, {"manifold": "objects", "count": 4}],
    },
    "the distributed-sweep example",
)
"""A small config that needs no network: the default of the flow's `config` parameter."""


def task_runner() -> Any:
    """Dask when NUMERATE_DASK_ADDRESS is set (needs the `dask` extra), else threads."""
    address = os.environ.get("NUMERATE_DASK_ADDRESS")
    if not address:
        return ThreadPoolTaskRunner(max_workers=4)
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:  # pragma: no cover - depends on the install
        raise ImportError(
            "NUMERATE_DASK_ADDRESS is set but prefect-dask is not installed: "
            "pip install -c constraints.txt -e '.[dask]'"
        ) from None
    return DaskTaskRunner(address=address)


@task(cache_policy=NO_CACHE)
async def evaluate_part(part: SweepConfig, db: str) -> str:
    """Run one part of a sweep into its own database (publishing its shards); its run id."""
    return str(await sweep(part, db))  # a Failed run raises here


@flow(name="distributed-sweep", task_runner=task_runner())
async def distributed_sweep(
    config: SweepConfig = CONFIG_EXAMPLE,
    db: str | None = None,
    work_dir: str = "results/parts",
) -> list[str]:
    """Evaluate each model of `config` as its own part, wherever the task runner puts it, then
    ingest every part into `db`; returns the parts' run ids.

    Args:
        config: the sweep config; its `results_dir` (default: `<work_dir>/shards`) must be
            reachable from every Dask worker and from here.
        db: the database that receives every part (default: $NUMERATE_DB, else
            results/numerate.duckdb).
        work_dir: where each part keeps its own database (on the machine that runs it).
    """
    db = results_database(db, config.db)
    results_dir = config.results_dir or os.path.join(work_dir, "shards")
    parts = split_by_model(config, results_dir)
    futures = [
        evaluate_part.submit(part, os.path.join(work_dir, f"{part.models[0].name}.duckdb"))
        for part in parts
    ]
    # wait off the event loop; ingest here, where the central database is, never on a worker
    run_ids = await asyncio.gather(*(asyncio.to_thread(future.result) for future in futures))
    await ingest_shards(results_dir, db)
    await release_database(db)
    return [str(run_id) for run_id in run_ids]
