"""The flow's steps that read or write the results database (numerate.store: short sessions, so
other runs, ingests and readers use the same database meanwhile)."""

import asyncio
import uuid

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from numerate.config.provenance import code_version
from numerate.config.sweep import SweepConfig
from numerate.endpoints.preflight import check_locations
from numerate.grading.verdict import PartVerdict
from numerate.kernel.errors import NumerateError
from numerate.planning.plan import PointFloor, stored_floor
from numerate.results.regrade import ingest_graded
from numerate.store import Store, now, queries
from numerate.store.rows import PointStop
from numerate.store.shards import publish_run, unfinished_note


@task(cache_policy=NO_CACHE)
async def open_run(sweep: SweepConfig, db: str, fresh: bool = False) -> str:
    """Resume the unfinished run of this exact sweep, or start a new one; returns its id."""
    await check_locations(sweep)  # a deployment's run has had no CLI preflight
    store = await asyncio.to_thread(Store.open, db)
    fingerprint = sweep.fingerprint()
    if not fresh:
        resumable = await asyncio.to_thread(store.unfinished_run, sweep.name, fingerprint)
        if resumable and store.claim_run(resumable):
            await asyncio.to_thread(store.set_run_status, resumable, "running")
            return resumable
        if resumable:  # another live process runs it: never two processes on one run
            get_run_logger().warning(
                "run %s of sweep %r is being run by another process: starting a new run",
                resumable, sweep.name,
            )  # fmt: skip
    run_id = f"{sweep.name}-{uuid.uuid4().hex[:12]}"
    await asyncio.to_thread(
        store.start_run,
        run_id,
        sweep.name,
        fingerprint,
        sweep.model_dump(mode="json"),
        code_version(),
    )
    return run_id


@task(cache_policy=NO_CACHE)
async def stored_counts(run_id: str, model: str, db: str) -> dict[tuple[str, str], int]:
    """Cases of each (manifold, point key) the model already answered in this run: where a
    resumed adaptive run takes up each point."""
    return await asyncio.to_thread(queries.cases_answered_per_point, Store.open(db), run_id, model)


@task(cache_policy=NO_CACHE)
async def stored_floors(first_cases: dict[str, str], db: str) -> dict[str, PointFloor]:
    """The floors stored with grid points' first cases (by id, with the generator version
    each is of), those stored by that version (not a row ingested from elsewhere under the
    same id): numerate.planning.plan.plan_points does not measure those points again."""
    found = await asyncio.to_thread(Store.open(db).case_rows, list(first_cases))
    floors = {case: stored_floor(row, first_cases[case]) for case, row in found.items()}
    return {case: floor for case, floor in floors.items() if floor is not None}


@task(cache_policy=NO_CACHE)
async def store_point_stops(run_id: str, model: str, stops: list[PointStop], db: str) -> None:
    """How each adaptive grid point of the model stopped
    (numerate.planning.adaptive.Sampler.stops)."""
    await asyncio.to_thread(Store.open(db).put_point_stops, run_id, model, stops)


@task(cache_policy=NO_CACHE)
async def release_database(db: str) -> None:
    """Write what the run's journal still holds and give up its journal and run claims (a
    worker's flow process may linger after the run is done)."""
    await asyncio.to_thread(Store.release, db)


@task(cache_policy=NO_CACHE)
async def publish_shards(run_id: str, db: str, results_dir: str) -> str:
    """Publish the run's rows as Parquet shards to the shared results location."""
    return await asyncio.to_thread(publish_run, Store.open(db), run_id, results_dir)


@task(cache_policy=NO_CACHE)
async def ingest_shards(results_dir: str, db: str) -> list[str]:
    """Load every complete run in the results location that the database lacks; a run whose
    shards cannot be read is skipped with a warning, and the task fails once the rest is in."""
    done = await asyncio.to_thread(ingest_graded, Store.open(db), results_dir)
    if done.unfinished:
        get_run_logger().warning(unfinished_note(results_dir, done.unfinished))
    for run_id, reason in done.skipped:
        get_run_logger().warning("skipped run %s: %s", run_id, reason)
    if done.skipped:
        names = ", ".join(run_id for run_id, _ in done.skipped)
        raise NumerateError(f"{len(done.skipped)} run(s) skipped ({names}); the rest is loaded")
    return done.loaded


@task(cache_policy=NO_CACHE)
async def finish_run(
    run_id: str, db: str, status: str = "finished", verdicts: list[PartVerdict] | None = None
) -> None:
    """Record how the run ended, and how each model's part did."""
    store = Store.open(db)
    if verdicts:
        decided = now()
        rows = [verdict.row(run_id, decided) for verdict in verdicts]
        await asyncio.to_thread(store.record_verdicts, rows)
    await asyncio.to_thread(store.set_run_status, run_id, status)
