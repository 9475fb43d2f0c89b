"""Grading a batch of answers."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from numerate.config import ModelConfig
from numerate.grading import Completion, grade_response
from numerate.plan import PlannedCase
from tasks.naming import batch_run_name


@task(cache_policy=NO_CACHE, task_run_name=batch_run_name("grade"))
async def grade_batch(
    planned: list[PlannedCase], completions: dict[tuple[str, int], Completion], run_id: str,
    model: dict[str, Any], first: int = 0,
) -> list[dict[str, Any]]:  # fmt: skip
    """Grade each answer (every sample of each case): correct, wrong, unparsed, truncated or
    error."""
    config = ModelConfig.model_validate(model)
    return [
        grade_response(p, completions[p.case_id, sample], run_id, config)
        for p in planned
        for sample in range(config.sampling.samples)
    ]
