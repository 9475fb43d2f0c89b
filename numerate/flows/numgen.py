"""NumGen flows: prompts -> images (gpu pool) -> counts (gpu pool) -> metrics -> DuckDB.

`numgen-generate` and `numgen-detect` are deployments of their own on work pool `gpu`; the
`numgen` flow dispatches them with `run_deployment` when they are deployed on the Prefect server
it talks to, and runs them in its own process otherwise. They hand their rows back through
JSON Lines manifests in the run's folder (DuckDB has one writer: the `numgen` flow). Wiring only.
"""

from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger

from numerate.config.sweep import results_database
from numerate.grading.verdict import RunFailed
from numerate.kernel import stopping
from numerate.kernel.errors import NumerateError
from numerate.kernel.progress import current as current_progress
from numerate.numgen.batches import DetectionRow, ImageRow, read_manifest, write_manifest
from numerate.numgen.config import NumGenConfig
from numerate.numgen.rows import NumGenResult
from numerate.tasks.artifacts import publish_numgen_artifacts
from numerate.tasks.database import release_database
from numerate.tasks.dispatch import Dispatch, require_deployed, run_step
from numerate.tasks.numgen import (
    DETECTIONS_MANIFEST,
    IMAGES_MANIFEST,
    answer_with_baseline,
    build_prompts,
    detect_images,
    finish_numgen_run,
    generate_images,
    ingest_manifests,
    open_numgen_run,
    run_folder,
    score_run,
)
from numerate.tasks.passing import unwalked

GENERATE_DEPLOYMENT = "numgen-generate/numgen-generate"
DETECT_DEPLOYMENT = "numgen-detect/numgen-detect"


def _expect(n: int) -> None:
    """A step's work for the progress bar, unless the numgen flow announced both steps."""
    if current_progress().total == 0:  # run as a deployment of its own, on a worker
        current_progress().add_total(n)


@flow(name="numgen-generate")
async def numgen_generate(config: NumGenConfig, run_dir: str) -> int:
    """Generate every prompt's image (on a GPU worker); the rows go to run_dir/images.jsonl."""
    prompts = build_prompts(config)
    _expect(len(prompts))
    rows: list[ImageRow] = []
    for start in range(0, len(prompts), config.task_batch):
        batch = prompts[start : start + config.task_batch]
        rows.extend(await generate_images(config, unwalked(batch)))
        get_run_logger().info("generated %d/%d images", len(rows), len(prompts))
    write_manifest(rows, Path(run_dir) / IMAGES_MANIFEST)
    return len(rows)


@flow(name="numgen-detect")
async def numgen_detect(config: NumGenConfig, run_dir: str) -> int:
    """Count the objects of every image in run_dir/images.jsonl (on a GPU worker); the rows go
    to run_dir/detections.jsonl."""
    images = read_manifest(Path(run_dir) / IMAGES_MANIFEST, ImageRow)
    _expect(len(images))
    rows: list[DetectionRow] = []
    batch = config.task_batch
    for start in range(0, len(images), batch):
        rows.extend(await detect_images(config, unwalked(images[start : start + batch])))
        get_run_logger().info("counted objects in %d/%d images", len(rows), len(images))
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


@flow(name="numgen", flow_run_name=numgen_run_name)
async def numgen(
    config: NumGenConfig | None = None,
    db: str | None = None,
    dispatch: Dispatch = "auto",
) -> NumGenResult:
    """A NumGen run: returns the run id and its metrics.

    Args:
        config: the NumGen config (generator, detector, prompts, ...); default: synthetic
            stimuli counted by the blob counter.
        db: DuckDB results file (default: $NUMERATE_DB, else results/numerate.duckdb).
        dispatch: `deployments` sends generation and detection to their deployments on pool
            `gpu`; `local` runs them here; `auto` sends them when they are deployed.
    """
    settings = config or NumGenConfig()
    db_path = results_database(db)
    if settings.needs_images:  # a missing deployment is said before the run is recorded
        await require_deployed([GENERATE_DEPLOYMENT, DETECT_DEPLOYMENT], dispatch)
    run_id = await open_numgen_run(settings, db_path)
    try:
        if settings.needs_images:
            # both steps up front: images, then counts (the bar does not jump from n/n to n/2n)
            current_progress().add_total(2 * len(build_prompts(settings)))
            folder = str(run_folder(settings, run_id))
            parameters: dict[str, NumGenConfig | str] = {"config": settings, "run_dir": folder}
            current_progress().doing("step 1 of 2, images")  # why the total is twice the prompts
            await run_step(GENERATE_DEPLOYMENT, numgen_generate, parameters, dispatch)
            current_progress().doing("step 2 of 2, counts")
            await run_step(DETECT_DEPLOYMENT, numgen_detect, parameters, dispatch)
            current_progress().doing("")
            await ingest_manifests(run_id, folder, db_path)
        else:
            prompts = build_prompts(settings)
            current_progress().add_total(len(prompts))
            await answer_with_baseline(settings, unwalked(prompts), run_id, db_path)
        metrics = await score_run(run_id, settings, db_path)
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
    await finish_numgen_run(run_id, db_path)
    try:
        await publish_numgen_artifacts(
            run_id, db_path, settings.generator, settings.detector_label, metrics
        )
    except Exception as error:  # artifacts show results; they never fail a stored run
        get_run_logger().warning("run %s: artifacts not published: %s", run_id, error)
    await release_database(db_path)
    return {"run_id": run_id, **metrics}
