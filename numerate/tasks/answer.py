"""Asking models: endpoint checks and one task per batch of cases."""

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from prefect import Task, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.context import TaskRunContext
from prefect.tasks import exponential_backoff
from prefect.utilities.annotations import quote

from numerate.config.sweep import ModelConfig, SweepConfig
from numerate.endpoints import answer_cases, stopped_cause
from numerate.endpoints.preflight import Preflight, preflight
from numerate.grading.verdict import PartVerdict, part_verdict
from numerate.kernel.errors import first_line, shorten
from numerate.kernel.progress import current as current_progress
from numerate.planning.plan import CaseRange, made_cases, stored_ids
from numerate.store import Store, StoreFailedForNow
from numerate.tasks.naming import batch_run_name
from numerate.tasks.passing import returned_whole


def transient(error: BaseException) -> bool:
    """Whether a batch that raised `error` may pass when tried again: an `OSError` (a full
    disk) or a timeout of this machine (TimeoutError is one), not a bad config, the results
    database or a bug."""
    return isinstance(error, OSError)


async def retry_transient(task: Task[Any, Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Retry a batch only when it failed for a reason that can pass. Async, as the batch's
    task is: Prefect awaits it, and the state's error is read with `aresult` (`result()` in
    an async task gives a coroutine, which raised nothing)."""
    try:
        await state.aresult()
    except Exception as error:
        return transient(error)
    return False


@contextlib.contextmanager
def tried_again_in_the_open(model: str) -> Iterator[None]:
    """When a try of a batch fails for a reason that can pass (`transient`) and the batch
    will be tried again, the user is told (the run paused, without a word), and what the
    try counted on the progress bar is taken back (the next try counts the answers it
    stored as found). When it will not, the error is one line (StoreError: the run stops,
    resumable), not the traceback of an OSError."""
    progress = current_progress()
    with progress.tallied() as tally:
        try:
            yield
        except Exception as error:
            if not transient(error):
                raise
            context = TaskRunContext.get()  # none: called as a plain function, not retried
            tries = context.task_run.run_count if context else 1
            retries = context.task.retries if context else 0
            said = shorten(first_line(error))
            if tries > retries:
                raise StoreFailedForNow(
                    f"model {model}: a batch failed {tries} time(s): {said}; the answers "
                    "stored before are kept, and the same command resumes the run"
                ) from error
            progress.take_back(tally)
            progress.note(
                f"model {model}: a batch failed ({said}); it is tried again in a few seconds "
                f"(try {tries + 1} of {retries + 1}), asking what is not stored"
            )
            raise


@task(cache_policy=NO_CACHE)
async def check_before_run(config: SweepConfig, db: str, fresh: bool) -> Preflight:
    """The run's preflight (numerate.endpoints.preflight), when no caller ran it: results location,
    concurrency limits, endpoints, database, the run to resume."""
    return await preflight(config, db, fresh)


@task(cache_policy=NO_CACHE)
async def model_verdict(
    run_id: str, model: ModelConfig, db: str, stopped: str | None
) -> PartVerdict:
    """How the model's part of the run ended: ok, degraded or failed (and why)."""
    n, errors, common = await asyncio.to_thread(Store.open(db).error_counts, run_id, model.name)
    return part_verdict(model, n, errors, stopped or stopped_cause(model), common)


@task(
    task_run_name=batch_run_name("query"),
    cache_policy=NO_CACHE,  # the store is the cache: a batch asks only what is not answered
    retries=2,
    retry_delay_seconds=exponential_backoff(backoff_factor=5),
    retry_jitter_factor=0.5,
    retry_condition_fn=retry_transient,
)
async def answer_batch(
    model: ModelConfig, ranges: list[CaseRange], run_id: str, db: str, first: int = 0
) -> quote:
    """Make a batch's cases (those of points stored before are read back, the rest generated:
    numerate.planning.plan.made_cases), store those not stored yet (every model of a sweep
    asks the same), then answer and grade them: stored answers where the model's cache
    policy allows, the rest from the model, each graded and journaled as it arrives (in the
    database within seconds). Returns the graded `responses` rows (returned whole:
    `.unquote()` them). `first`: the batch's place in the model's cases (for the task run's
    name)."""
    store = Store.open(db)
    wanted = stored_ids(ranges)
    stored = await asyncio.to_thread(store.case_rows, wanted) if wanted else {}
    planned = made_cases(ranges, stored)
    with tried_again_in_the_open(model.name):
        answered = await answer_cases(model, planned, store, run_id, store_cases=True)
    return returned_whole(answered.responses)
