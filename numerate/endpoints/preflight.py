"""Everything checked before a sweep asks anything, in one place: the CLI (`numerate run`) and
the flow (when a deployment starts it) both go through `preflight`.

1. the shared results location, when the sweep publishes shards there, can be written;
2. each model's Prefect global concurrency limit exists and holds its `concurrency` slots (a
   smaller limit could never be acquired: the run would wait forever);
3. each endpoint answers and accepts its key (numerate.endpoints.check_endpoints);
4. the results database opens (created or upgraded now, so readers see it at once);
5. the unfinished run of the same sweep and config, if any, is claimed to be resumed.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from numerate.config.sweep import SweepConfig
from numerate.endpoints import check_concurrency_limit, check_endpoints
from numerate.kernel.files import check_writable_folder
from numerate.kernel.progress import current
from numerate.store import Store, queries
from numerate.store.journal import Journal
from numerate.store.shards import check_writable


@dataclass(frozen=True)
class Preflight:
    """What the checks found."""

    db: str
    """The results database (numerate.config.sweep.results_database)."""
    warnings: list[str] = field(default_factory=list)
    """Endpoints that answer but do not list their model id, and the like."""
    unusable: dict[str, str] = field(default_factory=dict)
    """Models that cannot be asked at all (unreachable, refusing the key), with why: their
    part of the run fails, the others go on."""
    resuming: str | None = None
    """The unfinished run this one resumes (claimed by this process), if any."""
    answered: int = 0
    """Answers the resumed run already holds that it does not ask again: not errors, of models
    whose `cache` is not `off` (queries.kept_answers)."""

    def nothing_can_run(self, config: SweepConfig) -> str | None:
        """Why no model of the sweep can be asked, when none can."""
        if self.unusable and len(self.unusable) == len(config.models):
            return "; ".join(self.unusable.values())
        return None


async def check_locations(config: SweepConfig) -> None:
    """The sweep's own places, before anything is written: `results_dir` and `view_dir`
    writable, made if need be (the CLI's preflight and a deployment's run both ask)."""
    if config.results_dir:
        await asyncio.to_thread(check_writable, config.results_dir)
    if config.view_dir:
        await asyncio.to_thread(check_writable_folder, "view_dir", config.view_dir)


async def preflight(
    config: SweepConfig,
    db: str,
    fresh: bool = False,
    journal: Journal | None = None,
    prefect_ready: Callable[[], None] = lambda: None,
) -> Preflight:
    """Check a sweep before it runs (see the module's docstring); ConfigError or StoreError
    names what is wrong. `journal`: the run's journal taken before the checks (readers hear
    that a run is starting); `prefect_ready` is called before the first question to
    Prefect's API (the CLI's temporary server may still be starting)."""
    await check_locations(config)
    if any(model.concurrency_limit or model.api_key_secret for model in config.models):
        await asyncio.to_thread(prefect_ready)  # else Prefect's client starts a server of its own
        for model in config.models:
            await check_concurrency_limit(model)
    warnings, unusable = await check_endpoints(config.models, slow=current().note)
    found = Preflight(db, warnings, unusable)
    if found.nothing_can_run(config):
        return found  # nothing will run: nothing is written
    store = await asyncio.to_thread(Store.open, db)
    if journal is not None:
        store.adopt(journal)
    resuming, answered = None, 0
    if not fresh:
        run_id = await asyncio.to_thread(store.unfinished_run, config.name, config.fingerprint())
        if run_id and store.claim_run(run_id):
            cached = [model.name for model in config.models if model.cache != "off"]
            kept = await asyncio.to_thread(queries.kept_answers, store, run_id, cached)
            resuming, answered = run_id, kept
    return dataclasses.replace(found, resuming=resuming, answered=answered)
