"""The sweep flow: plan the grid points -> a batch at a time, generate, store, ask and grade
(each answer graded and journaled as it arrives) -> aggregate. Wiring only."""

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Iterator
from datetime import UTC, datetime
from typing import Annotated, Any

from prefect import flow, get_run_logger, tags
from prefect.client.schemas.objects import State
from prefect.concurrency.asyncio import concurrency
from prefect.states import Failed
from pydantic import Field

from numerate.config.env import startup_objects_frozen
from numerate.config.provenance import generator_label
from numerate.config.sweep import (
    ManifoldSweep,
    ModelConfig,
    Precision,
    SweepConfig,
    load_sweep_config,
    results_database,
)
from numerate.endpoints import endpoints_in_use
from numerate.grading.verdict import PartVerdict, RunFailed, run_verdict
from numerate.kernel.errors import NumerateError
from numerate.kernel.progress import current as current_progress
from numerate.planning.adaptive import Sampler
from numerate.planning.plan import CaseRange, PlannedPoint, first_case_ids, plan_points
from numerate.planning.scheduler import ask_in_batches
from numerate.store import StoreError
from numerate.store.rows import ResponseRow
from numerate.tasks.aggregate import aggregate_run
from numerate.tasks.answer import answer_batch, check_before_run, model_verdict
from numerate.tasks.artifacts import progress_artifact, publish_run_artifacts, regressions
from numerate.tasks.database import (
    finish_run,
    open_run,
    publish_shards,
    release_database,
    store_point_stops,
    stored_counts,
    stored_floors,
)
from numerate.tasks.passing import unwalked

Plan = tuple[Precision | None, list[PlannedPoint]]
"""A manifold entry's adaptive sampling (None: a fixed count) and its grid points."""


async def evaluate_model(
    model: ModelConfig, plans: list[Plan], run_id: str, db: str, batch_size: int
) -> None:
    """Ask for and grade one model's answers, one batch of cases per task (each answer is
    graded and journaled as it arrives), as numerate.planning.scheduler.ask_in_batches hands them
    out:
    all of a fixed entry's cases at once, an adaptive entry's a round at a time as earlier
    rounds are graded."""
    samples = model.sampling.samples
    stored = await stored_counts(run_id, model.name, db) if any(p for p, _ in plans) else {}
    sampler = Sampler(plans, samples, stored)
    progress = current_progress()
    progress.add_total(sampler.opened * samples)

    async def ask(ranges: list[CaseRange], first: int) -> list[ResponseRow]:
        # unwalked(): Prefect would otherwise walk every point of a batch for futures
        graded = await answer_batch(model, unwalked(ranges), run_id, db, first)
        return graded.unquote()

    def graded(opened: int) -> None:
        progress.add_total(opened * samples)  # a round more for the points still open
        progress.points_open(model.name, sampler.open_points)

    await ask_in_batches(sampler, batch_size, ask, graded)
    if sampler.stops():
        await store_point_stops(run_id, model.name, sampler.stops(), db)


async def within_endpoint_limit(model: ModelConfig, work: Coroutine[Any, Any, None]) -> None:
    """Run `work` holding `concurrency` slots of the model's Prefect global concurrency limit,
    so that concurrent runs against one endpoint never exceed it together."""
    if not model.concurrency_limit:
        await work
        return
    async with concurrency(model.concurrency_limit, occupy=model.concurrency, strict=True):
        await work


async def evaluate_part(
    model: ModelConfig, plans: list[Plan], run_id: str, db: str, batch_size: int,
    stopped: str | None,
) -> PartVerdict:  # fmt: skip
    """One model's part of the run, and how it ended. A model that fails (its endpoint is
    down, it refuses the key) fails its own part only: the other models go on."""
    if stopped is None:
        try:
            work = evaluate_model(model, plans, run_id, db, batch_size)
            await within_endpoint_limit(model, work)
        except StoreError:
            raise  # the results database, not the model: the run stops, resumable
        except NumerateError as error:
            stopped = str(error)
    return await model_verdict(run_id, model, db, stopped)


def import_what_it_uses() -> None:
    """The modules the sweep flow imports on first use, imported ahead: `numerate run` does it
    while Prefect's server is still starting (a first run: 0.5 s less after the server
    answers), not otherwise (a fully cached re-run never imports the OpenAI client). What a
    run imports late, Prefect's and polars' lazy imports included: `python -X importtime -m
    numerate.cli run`."""
    import fastapi.encoders  # noqa: F401
    import openai  # noqa: F401
    import prefect.flow_engine
    import prefect.task_engine
    import prefect.telemetry.run_telemetry
    import prefect.utilities.visualization  # noqa: F401
    import pyarrow  # noqa: F401


def planning_said(entry: ManifoldSweep, number: int, entries: int) -> Callable[[int, int], None]:
    """What the progress line says while an entry's grid points are planned (a point's
    trivial strategy is measured on its cases: about 0.1 s a point, minutes for a large
    grid): the points planned of the entry's, and once it takes a while the time left, at
    most twice a second."""
    progress, started = current_progress(), time.monotonic()
    last = [started]
    head = f"planning {entry.manifold} grid points ({number}/{entries})"

    def said(done: int, points: int) -> None:
        now = time.monotonic()
        if now - last[0] < 0.5 and done < points:
            return
        last[0], taken = now, now - started
        rest = taken / done * (points - done) if done else 0.0
        left = f"{rest / 60:,.0f} min" if rest >= 90 else f"{rest:.0f} s"
        late = taken > 2 and done < points
        progress.doing(f"{head}: {done:,} of {points:,}" + (f", about {left} left" if late else ""))

    progress.doing(f"{head}: 0 of {len(entry.points()):,}")
    return said


MODEL_TAGS = 50
"""The most models a sweep's flow run is tagged with. Prefect's server refuses to make a flow
run whose events relate it to more than 100 resources (each tag is one; its setting
`PREFECT_SERVER_EVENTS_MAXIMUM_RELATED_RESOURCES`), so a sweep of more models is tagged with
its sweep alone."""


def run_tags(config: SweepConfig) -> list[str]:
    """Tags of a sweep's flow run: `sweep:<name>`, and `model:<name>` for each model when it
    has at most MODEL_TAGS."""
    models = [f"model:{m.name}" for m in config.models] if len(config.models) <= MODEL_TAGS else []
    return [f"sweep:{config.name}", *models]


@contextlib.contextmanager
def untagged_tasks(config: SweepConfig) -> Iterator[None]:
    """The sweep's own tags (run_tags) label its flow run, not its task runs: Prefect asks the
    API for a tag's concurrency slots before and after every tagged task run, two calls per
    task run for labels nobody limits. Tags set by the caller for a limit stay."""
    from prefect.context import TagsContext

    kept = TagsContext.get().current_tags - set(run_tags(config))
    with TagsContext(current_tags=kept):
        yield


def sweep_run_name() -> str:
    """A sweep flow run's name: the sweep's, and when it started."""
    from prefect.runtime import flow_run

    config = flow_run.parameters.get("config")
    name = config.get("name") if isinstance(config, dict) else getattr(config, "name", None)
    return f"{name or 'sweep'} {datetime.now(UTC):%Y-%m-%d %H:%M}"


@flow(name="sweep", flow_run_name=sweep_run_name)
async def sweep(
    config: SweepConfig,
    db: str | None = None,
    fresh: bool = False,
    unusable: dict[str, str] | None = None,
    plot: bool = True,
    regression_alpha: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.05,
) -> str:
    """Evaluate every model of a sweep config on every grid point; returns the run id.

    The flow run ends Failed (RunFailed), naming the model, the cause and the counts, when a
    model's part is degraded (too many errors) or failed (stopped); the results are stored
    all the same.

    Args:
        config: the sweep config (validated once, where it enters: a deployment's parameters
            are validated by Prefect into a SweepConfig).
        db: DuckDB file (default: the config's `db`, else $NUMERATE_DB, else
            results/numerate.duckdb).
        fresh: start a new run even if an unfinished run of the same sweep can be resumed.
        unusable: the models the run's preflight (numerate.endpoints.preflight) found unusable, with
            why (the CLI runs it before it starts); given, it is not run again.
        plot: draw the run's plot for its artifacts (about 0.6 s).
        regression_alpha: the family-wise error rate of the summary artifact's comparison
            with the previous run of the sweep (`nightly-sweep` gives its gate's).
    """
    # the garbage collector walks the sweep's objects, not all of Prefect's (numerate.config.env)
    with startup_objects_frozen(), untagged_tasks(config):
        db_path = results_database(db, config.db)
        models = config.models
        if unusable is None:
            checked = await check_before_run(config, db_path, fresh)
            for warning in checked.warnings:
                get_run_logger().warning(warning)
            unusable = checked.unusable
        run_id = await open_run(config, db_path, fresh)
        get_run_logger().info("run %s of sweep %r -> %s", run_id, config.name, db_path)
        labels = [generator_label(entry.manifold) for entry in config.manifolds]
        firsts = {i: v for e, v in zip(config.manifolds, labels, strict=True)
                  for i in first_case_ids(e, config.seed, v)}  # fmt: skip
        floors = await stored_floors(unwalked(firsts), db_path)  # of points stored before
        plans: list[Plan] = []  # grid points: their cases are made a batch at a time, as asked
        for i, entry in enumerate(config.manifolds, 1):  # each new point's trivial strategy
            said = planning_said(entry, i, len(config.manifolds))  # is measured first
            point_plan = plan_points(entry, config.seed, labels[i - 1], floors, said)
            plans.append((entry.precision, point_plan))
        current_progress().doing("")
        batch = config.batch_size
        async with endpoints_in_use(), progress_artifact(config.name):
            verdicts = await asyncio.gather(
                *(
                    evaluate_part(m, plans, run_id, db_path, batch, unusable.get(m.name))
                    for m in models
                ),
            )
        return await conclude(run_id, db_path, config, verdicts, plot, regression_alpha)


async def conclude(
    run_id: str, db: str, config: SweepConfig, verdicts: list[PartVerdict], plot: bool = True,
    alpha: float = 0.05,
) -> str:  # fmt: skip
    """Aggregate, record how every part ended, publish; the run id. RunFailed, naming every
    part that is not ok, when one is not: raised, not returned as a Failed state, so that its
    caller gets it from this process (Prefect keeps a raised error in memory). A returned
    state's data came back through the API: when a state proposal was retried (a loaded
    server answers late), the API took the retry for a duplicate and returned its own copy,
    without the data, and the caller got Prefect's bare FailedRun (`numerate run` exit 1)."""
    await aggregate_run(run_id, db)
    status, message = run_verdict(verdicts)
    await finish_run(run_id, db, status, unwalked(verdicts))
    try:
        await publish_run_artifacts(run_id, db, plot, config.view_dir, alpha)
    except Exception as error:  # artifacts show results; they never fail a stored run
        get_run_logger().warning("run %s: artifacts not published: %s", run_id, error)
    if config.results_dir:
        await publish_shards(run_id, db, config.results_dir)
    await release_database(db)
    if message is not None:
        raise RunFailed(message, run_id)
    return run_id


@flow(name="nightly-sweep")
async def nightly_sweep(
    config_path: str = "deployments/sweeps/nightly.yaml",
    db: str | None = None,
    fail_on_regression: bool = True,
    regression_alpha: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.05,
) -> str | State:
    """The scheduled sweep: the config file's models and manifolds; returns the run id.

    With `fail_on_regression`, the flow run ends Failed, naming each regression, when some
    model x manifold is significantly worse than in the previous run of the sweep (the
    comparison of the summary artifact, `numerate compare previous latest`) at family-wise
    error rate `regression_alpha`: lower it for fewer false alarms, raise it to catch smaller
    drops (docs/statistics.md, "What the gate can see")."""
    sweep_config = load_sweep_config(config_path)
    db_path = results_database(db, sweep_config.db)
    with tags(*run_tags(sweep_config)):
        run_id = str(await sweep(sweep_config, db_path, regression_alpha=regression_alpha))
        # (a Failed run raises there); its summary artifact compares at the gate's alpha
    if fail_on_regression:
        found = await regressions(run_id, db_path, regression_alpha)
        if found:
            message = f"run {run_id} regressed against the previous run: {'; '.join(found)}"
            get_run_logger().error(message)
            return Failed(message=message, data=run_id)
    return run_id
