"""NumGen flows: prompts -> images (gpu pool) -> counts (gpu pool) -> metrics -> DuckDB.

`numgen-generate` and `numgen-detect` are deployments of their own on work pool `gpu`; the
`numgen` flow dispatches them with `run_deployment` when they are deployed on the Prefect server
it talks to, and runs them in its own process otherwise. They hand their rows back through
JSON Lines manifests in the run's folder (DuckDB has one writer: the `numgen` flow). Wiring only.
"""

import asyncio
import functools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, cast

from prefect import flow, get_run_logger

from numerate.config.sweep import results_database
from numerate.endpoints.limits import endpoints_in_use
from numerate.grading.verdict import RunFailed, numgen_verdict
from numerate.kernel import stopping
from numerate.kernel.errors import NumerateError
from numerate.kernel.progress import current as current_progress
from numerate.numgen.batches import (
    DetectionRow,
    ImageRow,
    read_manifest,
    run_folder,
    together,
    write_manifest,
)
from numerate.numgen.config import NumGenConfig
from numerate.numgen.detection import DetectionSettings
from numerate.numgen.hosted import COUNTER_API, GENERATOR_API
from numerate.numgen.rows import NumGenResult
from numerate.tasks.artifacts import publish_numgen_artifacts
from numerate.tasks.database import release_database
from numerate.tasks.dispatch import Dispatch, require_deployed, run_step
from numerate.tasks.numgen import (
    DETECTIONS_MANIFEST,
    IMAGES_MANIFEST,
    answer_with_baseline,
    build_prompts,
    copy_images,
    detect_images,
    finish_numgen_run,
    generate_images,
    ingest_manifests,
    open_numgen_run,
    recount_config,
    score_run,
)
from numerate.tasks.passing import unwalked

Row = TypeVar("Row", ImageRow, DetectionRow)

GENERATE_DEPLOYMENT = "numgen-generate/numgen-generate"
DETECT_DEPLOYMENT = "numgen-detect/numgen-detect"


def _expect(n: int) -> None:
    """A step's work for the progress bar, unless the numgen flow announced both steps."""
    if current_progress().total == 0:  # run as a deployment of its own, on a worker
        current_progress().add_total(n)


def _window(concurrency: int | None, task_batch: int) -> int:
    """Batches in flight at once: one for a model on this machine (`concurrency` None: a GPU
    takes one batch at a time), else enough for an endpoint's limit to stay full while a
    batch's last answers come."""
    return 1 if concurrency is None else 1 + -(-2 * concurrency // task_batch)


async def _batched(
    items: list[Any], size: int, window: int, step: Callable[[list[Any]], Awaitable[list[Row]]],
    said: str,
) -> list[Row]:  # fmt: skip
    """`step` over `items` in batches of `size`, at most `window` at once; the rows in order."""
    batches = [items[start : start + size] for start in range(0, len(items), size)]
    done = 0
    slots = asyncio.Semaphore(window)
    made: list[list[Row]] = [[] for _ in batches]

    async def one(index: int, batch: list[Any]) -> None:
        nonlocal done
        async with slots:
            made[index] = await step(unwalked(batch))
        done += len(made[index])
        get_run_logger().info("%s %d/%d images", said, done, len(items))

    if window == 1:  # in this coroutine: a model's own exception (its SystemExit too) as raised
        for index, batch in enumerate(batches):
            await one(index, batch)
    else:  # a batch that fails stops the others
        await together(one(index, batch) for index, batch in enumerate(batches))
    return [row for rows in made for row in rows]


@flow(name="numgen-generate")
async def numgen_generate(config: NumGenConfig, run_dir: str) -> int:
    """Generate every prompt's image (on a GPU worker; an `api:` generator's in the numgen
    flow's process); the rows go to run_dir/images.jsonl."""
    prompts = build_prompts(config)
    _expect(len(prompts))
    hosted = config.generator.startswith(GENERATOR_API)
    window = _window(config.generation.concurrency if hosted else None, config.task_batch)
    step = functools.partial(generate_images, config)
    async with endpoints_in_use():  # an `api:` generator's client: closed at the end
        rows = await _batched(prompts, config.task_batch, window, step, "generated")
    write_manifest(rows, Path(run_dir) / IMAGES_MANIFEST)
    return len(rows)


@flow(name="numgen-detect")
async def numgen_detect(config: NumGenConfig, run_dir: str) -> int:
    """Count the objects of every image in run_dir/images.jsonl (on a GPU worker; a `vlm:`
    counter's in the numgen flow's process); the rows go to run_dir/detections.jsonl."""
    images = read_manifest(Path(run_dir) / IMAGES_MANIFEST, ImageRow)
    _expect(len(images))
    hosted = config.detector_label.startswith(COUNTER_API)
    window = _window(config.detection.concurrency if hosted else None, config.task_batch)
    step = functools.partial(detect_images, config)
    async with endpoints_in_use():  # a `vlm:` counter's client: closed at the end
        rows = await _batched(images, config.task_batch, window, step, "counted objects in")
    write_manifest(rows, Path(run_dir) / DETECTIONS_MANIFEST)
    return len(rows)


def numgen_run_name() -> str:
    """A NumGen flow run's name: its generator and detector, and when it started."""
    from prefect.runtime import flow_run

    config = flow_run.parameters.get("config") or {}
    if isinstance(config, dict):
        generator, detector = config.get("generator", "synthetic"), config.get("detector", "blobs")
    else:
        generator, detector = getattr(config, "generator", "?"), getattr(config, "detector", "?")
    return f"numgen {generator}/{detector} {datetime.now(UTC):%Y-%m-%d %H:%M}"


def deployments_needed(config: NumGenConfig) -> list[str]:
    """The GPU steps' deployments a run uses: none for an endpoint's generator or counter,
    which are asked from the numgen flow's own process (work pool `cpu`)."""
    if not config.needs_images:
        return []
    made_here = config.generator.startswith(GENERATOR_API)
    return ([] if made_here else [GENERATE_DEPLOYMENT]) + counting_deployments(config)


def counting_deployments(config: NumGenConfig) -> list[str]:
    """numgen-detect when a counter of `config` runs on a GPU worker (not at an endpoint)."""
    on_a_gpu = any(not counter.startswith(COUNTER_API) for counter in config.counters)
    return [DETECT_DEPLOYMENT] if on_a_gpu else []


async def _count(config: NumGenConfig, parameters: dict[str, Any], dispatch: Dispatch) -> None:
    """The counting step: a `vlm:` counter here, any other as the numgen-detect step."""
    here = config.detector_label.startswith(COUNTER_API)
    await run_step(DETECT_DEPLOYMENT, numgen_detect, parameters, "local" if here else dispatch)


async def _recorded(run_id: str, db_path: str, config: NumGenConfig,
                    body: Callable[[], Awaitable[NumGenResult]]) -> NumGenResult:  # fmt: skip
    """`body()` of a recorded run, its metrics with how it ended (`status`, and `cause` when
    it is not finished): `finished`, or `degraded` (more images in no metric, for an error or
    a counter's answer without a count, than the config's max_error_rate: stored all the
    same), or `failed` (RunFailed with the
    cause), or `interrupted` by a signal (raised as it came)."""
    try:
        metrics = await body()
    except BaseException as error:
        # a signal, a cancellation, or an error a stop signal caused (recorded `failed` before)
        stopped = not isinstance(error, Exception | SystemExit) or stopping.asked()
        await finish_numgen_run(run_id, db_path, "interrupted" if stopped else "failed")
        if stopped:
            raise  # the command says it was stopped
        detail = (
            str(error)
            if isinstance(error, NumerateError | ValueError)
            else (f"{type(error).__name__}: {error}")
        )  # a generator's own exception, its exit (SystemExit) included: exit 0 before
        raise RunFailed(f"NumGen run {run_id} failed: {detail}", run_id) from error
    images = sum(cast(int, metrics[key]) for key in ("n", "errors", "refused", "unparsed"))
    errors, unparsed = cast(int, metrics["errors"]), cast(int, metrics["unparsed"])
    cause = numgen_verdict(images, errors, config.max_error_rate, unparsed)
    status = "degraded" if cause else "finished"
    await finish_numgen_run(run_id, db_path, status)
    return {**metrics, "status": status, **({"cause": cause} if cause else {})}


def _degraded(results: list[NumGenResult]) -> str | None:
    """One line naming each degraded run of `results` and why, or None when none is."""
    said = [f"run {r['run_id']} degraded: {r['cause']}" for r in results if r.get("cause")]
    return "; ".join(said) or None


async def _published(run_id: str, db_path: str, config: NumGenConfig,
                     metrics: NumGenResult) -> NumGenResult:  # fmt: skip
    try:
        await publish_numgen_artifacts(
            run_id, db_path, config.generator, config.detector_label, metrics
        )
    except Exception as error:  # artifacts show results; they never fail a stored run
        get_run_logger().warning("run %s: artifacts not published: %s", run_id, error)
    return {"run_id": run_id, **metrics}


@flow(name="numgen", flow_run_name=numgen_run_name)
async def numgen(
    config: NumGenConfig | None = None,
    db: str | None = None,
    dispatch: Dispatch = "auto",
) -> NumGenResult:
    """A NumGen run: returns the run id and its metrics (and, when several counters are
    named, each further counter's linked run under `recounts`).

    Args:
        config: the NumGen config (generator, detector, prompts, ...); default: synthetic
            stimuli counted by the blob counter.
        db: DuckDB results file (default: $NUMERATE_DB, else results/numerate.duckdb).
        dispatch: `deployments` sends generation and detection to their deployments on pool
            `gpu`; `local` runs them here; `auto` sends them when they are deployed and a
            worker polls the pool.
    """
    settings = config or NumGenConfig()
    db_path = results_database(db)
    # a missing deployment is said before the run is recorded
    await require_deployed(deployments_needed(settings), dispatch)
    own = settings.for_counter(settings.detector_label) if settings.needs_images else settings
    run_id = await open_numgen_run(settings, db_path)

    async def body() -> NumGenResult:
        if settings.needs_images:
            # every step up front: images, then counts (the bar does not jump from n/n to n/2n)
            steps = 1 + len(settings.counters)
            current_progress().add_total(steps * len(build_prompts(settings)))
            folder = str(run_folder(settings, run_id))
            parameters: dict[str, Any] = {"config": own, "run_dir": folder}
            current_progress().doing(f"step 1 of {steps}, images")  # why the total is larger
            here = settings.generator.startswith(GENERATOR_API)  # asked from here: cpu pool
            await run_step(GENERATE_DEPLOYMENT, numgen_generate, parameters,
                           "local" if here else dispatch)  # fmt: skip
            current_progress().doing(f"step 2 of {steps}, counts")
            await _count(own, parameters, dispatch)
            current_progress().doing("")
            await ingest_manifests(run_id, folder, db_path)
        else:
            prompts = build_prompts(settings)
            current_progress().add_total(len(prompts))
            await answer_with_baseline(settings, unwalked(prompts), run_id, db_path)
        return await score_run(run_id, own, db_path)

    result = await _published(run_id, db_path, own, await _recorded(run_id, db_path, own, body))
    recounts = []
    for step, counter in enumerate(settings.counters[1:] if settings.needs_images else [], 3):
        current_progress().doing(f"step {step} of {1 + len(settings.counters)}, {counter}")
        recounts.append(await _count_again(run_id, settings.for_counter(counter), db_path,
                                           dispatch))  # fmt: skip
    await release_database(db_path)
    result = {**result, "recounts": recounts} if recounts else result
    degraded = _degraded([result, *recounts])
    if degraded:  # the flow run ends Failed, as a sweep's with a degraded part
        raise RunFailed(f"NumGen {degraded}", run_id, result)
    return result


async def _count_again(
    source_run_id: str, config: NumGenConfig, db_path: str, dispatch: Dispatch
) -> NumGenResult:
    """A run linked to `source_run_id` that counts its images with `config`'s counter: no
    image is made."""
    run_id = await open_numgen_run(config, db_path, source_run_id)

    async def body() -> NumGenResult:
        folder = str(run_folder(config, run_id))
        await copy_images(source_run_id, folder, db_path)
        await _count(config, {"config": config, "run_dir": folder}, dispatch)
        await ingest_manifests(run_id, folder, db_path)
        return await score_run(run_id, config, db_path)

    recorded = await _recorded(run_id, db_path, config, body)
    result = await _published(run_id, db_path, config, recorded)
    return {**result, "detector": config.detector_label, "source_run_id": source_run_id}


def recount_run_name() -> str:
    """A recount's flow run name: the run it counts again, and when."""
    from prefect.runtime import flow_run

    return f"numgen recount {flow_run.parameters.get('source')} {datetime.now(UTC):%Y-%m-%d %H:%M}"


@flow(name="numgen-recount", flow_run_name=recount_run_name)
async def numgen_recount(
    source: str,
    detector: str | list[str],
    detection: DetectionSettings | None = None,
    db: str | None = None,
    dispatch: Dispatch = "auto",
) -> list[NumGenResult]:
    """Count a stored NumGen run's images again with other counters, no image made: a new run
    per counter, linked to `source` (its id); returns each one's id and metrics.

    Args:
        source: the NumGen run whose images are counted.
        detector: a counter, or a list of them (as a NumGen config names them).
        detection: the counters' settings (a `vlm:` counter's endpoint); default: the source
            run's.
        db: DuckDB results file (default: $NUMERATE_DB, else results/numerate.duckdb).
        dispatch: where a Grounding DINO counter runs, as for `numgen`.
    """
    db_path = results_database(db)
    config = await recount_config(source, detector, detection, db_path)
    await require_deployed(counting_deployments(config), dispatch)
    current_progress().add_total(len(config.counters) * len(build_prompts(config)))
    results = [
        await _count_again(source, config.for_counter(counter), db_path, dispatch)
        for counter in config.counters
    ]
    await release_database(db_path)
    degraded = _degraded(results)
    if degraded:
        raise RunFailed(f"NumGen {degraded}", str(results[0]["run_id"]), results)
    return results
