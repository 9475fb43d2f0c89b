"""Case generation, cached by Prefect on its inputs, in a folder of its own that is pruned."""

import asyncio
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE
from prefect.filesystems import LocalFileSystem
from prefect.settings import PREFECT_HOME

from numerate.config.sweep import ManifoldSweep
from numerate.planning.plan import PlannedCase, plan_manifold

CASE_CACHE_DAYS = 7
"""Generated cases are reused for a week; older cache files are removed (prune_case_cache)."""

CASE_CACHE = Path(PREFECT_HOME.value()) / "storage" / "numerate-cases"
CASE_BLOCK = "numerate-cases"


@task(
    cache_policy=INPUTS + TASK_SOURCE,
    persist_result=True,
    # zlib: a cache file of 1,000 cases is 0.1 MB instead of 2 MB, and reads faster
    result_serializer="compressed/pickle",
    cache_expiration=timedelta(days=CASE_CACHE_DAYS),
)
async def generate_cases(
    sweep: ManifoldSweep, base_seed: int, generator_version: str
) -> list[PlannedCase]:
    """Generate the cases of every grid point of one manifold entry.

    `generator_version` (a hash of the manifold's generator source, numerate.config.provenance) is
    part of each case id, and an input so that a changed generator is never answered from
    Prefect's cache. The task is async, like the flow that calls it: a synchronous task in an
    async flow makes Prefect build a second (synchronous) API client, about 70 ms.
    """
    return plan_manifold(sweep, base_seed, generator_version)


async def case_generator() -> Any:
    """generate_cases storing its cache in CASE_CACHE (a LocalFileSystem block saved as
    `numerate-cases`: Prefect takes only saved blocks as result storage), after removing the
    files older than CASE_CACHE_DAYS there."""
    await asyncio.to_thread(prune_case_cache)
    return generate_cases.with_options(result_storage=await case_storage())


async def case_storage() -> LocalFileSystem:
    """The `numerate-cases` block, saved again only when it is missing or points elsewhere
    (PREFECT_HOME changed): loading it costs half of saving it."""
    try:
        block: LocalFileSystem = await LocalFileSystem.aload(CASE_BLOCK)
        if Path(str(block.basepath)) == CASE_CACHE:
            return block
    except ValueError:  # no such block yet
        pass
    storage = LocalFileSystem(basepath=str(CASE_CACHE))
    await storage.save(CASE_BLOCK, overwrite=True)
    return storage


def prune_case_cache(days: float = CASE_CACHE_DAYS, folder: Path = CASE_CACHE) -> int:
    """Remove cached cases older than `days` (Prefect keeps result files forever); returns how
    many files went. A file another process removes first is not an error."""
    cutoff = time.time() - days * 86400
    removed = 0
    for path in folder.glob("*") if folder.is_dir() else ():
        try:
            if path.is_file() and path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed
