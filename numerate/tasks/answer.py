"""Asking models: endpoint checks and one task per batch of cases."""

from __future__ import annotations

import asyncio
from typing import Any

from prefect import Task, task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.tasks import exponential_backoff

from numerate import endpoints
from numerate.config import ModelConfig
from numerate.endpoints import answer_cases, stopped_cause
from numerate.kernel.errors import ConfigError
from numerate.outcome import PartOutcome, part_outcome
from numerate.plan import PlannedCase
from numerate.store import Store
from numerate.tasks.naming import batch_run_name


def retry_transient(task: Task[Any, Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Retry a batch only when it failed for a reason that can pass (not a bad config)."""
    try:
        state.result()
    except ConfigError:
        return False
    except (OSError, TimeoutError):
        return True
    except Exception:
        return False
    return False


async def check_concurrency_limit(model: ModelConfig) -> None:
    """A model's global concurrency limit must exist and hold its `concurrency` slots
    (a smaller limit could never be acquired: the run would wait forever)."""
    if not model.concurrency_limit:
        return
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    async with get_client() as client:
        try:
            limit = await client.read_global_concurrency_limit_by_name(model.concurrency_limit)
        except ObjectNotFound:
            raise ConfigError(
                f"model {model.name!r}: no global concurrency limit named "
                f"{model.concurrency_limit!r} (create it: prefect gcl create "
                f"{model.concurrency_limit} --limit {model.concurrency})"
            ) from None
    if limit.limit < model.concurrency:
        raise ConfigError(
            f"model {model.name!r}: concurrency {model.concurrency} exceeds the "
            f"{limit.limit} slots of limit {model.concurrency_limit!r}"
        )


@task(cache_policy=NO_CACHE)
async def check_endpoints(models: list[dict[str, Any]]) -> tuple[list[str], dict[str, str]]:
    """Check each endpoint before anything is sent: returns warnings, and the models that
    cannot be asked at all (unreachable, or refusing the key) with why. A model's concurrency
    limit that cannot be held is a config error."""
    configs = [ModelConfig.model_validate(data) for data in models]
    for model in configs:
        await check_concurrency_limit(model)
    return await endpoints.check_endpoints(configs)


@task(cache_policy=NO_CACHE)
async def model_outcome(
    run_id: str, model: dict[str, Any], db: str, stopped: str | None
) -> PartOutcome:
    """How the model's part of the run ended: ok, degraded or failed (and why)."""
    config = ModelConfig.model_validate(model)
    n, errors, common = await asyncio.to_thread(Store.open(db).error_counts, run_id, config.name)
    return part_outcome(config, n, errors, stopped or stopped_cause(config), common)


@task(
    task_run_name=batch_run_name("query"),
    cache_policy=NO_CACHE,  # the store is the cache: a batch asks only what is not answered
    retries=2,
    retry_delay_seconds=exponential_backoff(backoff_factor=5),
    retry_jitter_factor=0.5,
    retry_condition_fn=retry_transient,
)
async def answer_batch(
    model: dict[str, Any], planned: list[PlannedCase], run_id: str, db: str, first: int = 0
) -> list[dict[str, Any]]:
    """Answer and grade a batch of cases: stored answers where the model's cache policy allows,
    the rest from the model, each graded and journaled as it arrives (in the database within
    seconds). Returns the graded `responses` rows. `first`: the batch's place in the model's
    cases (for the task run's name)."""
    config = ModelConfig.model_validate(model)
    answered = await answer_cases(config, planned, Store.open(db), run_id)
    return answered.responses
