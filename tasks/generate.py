"""Case generation, cached by Prefect on its inputs."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE

from numerate.config import ManifoldSweep
from numerate.plan import PlannedCase, plan_manifold


@task(cache_policy=INPUTS + TASK_SOURCE, persist_result=True)
def generate_cases(
    sweep: dict[str, Any], base_seed: int, generator_version: str
) -> list[PlannedCase]:
    """Generate the cases of every grid point of one manifold entry.

    `generator_version` (a hash of the manifold's generator source, numerate.provenance) is
    part of each case id, and an input so that a changed generator is never answered from
    Prefect's cache.
    """
    return plan_manifold(ManifoldSweep.model_validate(sweep), base_seed, generator_version)
