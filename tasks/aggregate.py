"""Aggregating a run's graded responses."""

from __future__ import annotations

import asyncio

from prefect import task
from prefect.cache_policies import NO_CACHE

from numerate.aggregate import aggregate
from numerate.store import Store


@task(cache_policy=NO_CACHE)
async def aggregate_run(run_id: str, db: str) -> int:
    """Recompute the run's per-point aggregates and summaries; returns the number of points."""
    return await asyncio.to_thread(_aggregate, run_id, db)


def _aggregate(run_id: str, db: str) -> int:
    store = Store.open(db)
    responses = store.frame(
        "SELECT run_id, model, manifold, case_id, point_key, outcome, completion_tokens, "
        "latency_s FROM responses WHERE run_id = ?",
        [run_id],
    )
    cases = store.frame(
        "SELECT case_id, params, chance FROM cases WHERE case_id IN "
        "(SELECT case_id FROM responses WHERE run_id = ?)",
        [run_id],
    )
    points, summaries = aggregate(responses, cases)
    store.replace_aggregates(run_id, points, summaries)
    return points.height
