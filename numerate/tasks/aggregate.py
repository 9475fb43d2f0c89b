"""Aggregating a run's graded responses."""

import asyncio

from prefect import task
from prefect.cache_policies import NO_CACHE

from numerate.results.regrade import aggregate_stored_run
from numerate.store import Store


@task(cache_policy=NO_CACHE)
async def aggregate_run(run_id: str, db: str) -> int:
    """Recompute the run's per-point aggregates and summaries; returns the number of points."""
    return await asyncio.to_thread(_aggregate, run_id, db)


def _aggregate(run_id: str, db: str) -> int:
    return aggregate_stored_run(Store.open(db), run_id)
