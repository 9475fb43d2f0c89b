"""NumGen tasks: thin wrappers over `numgen/` and the store. One task per batch of images."""

import asyncio
import contextlib
import json
import uuid
from collections import Counter
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import TypeVar

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.context import TaskRunContext

from numerate.config.provenance import code_version
from numerate.config.sweep import ModelConfig
from numerate.endpoints.images import ImagesApiGenerator, VisionCounter
from numerate.endpoints.limits import stopped_cause
from numerate.kernel.confined import write_below
from numerate.kernel.errors import NumerateError, for_terminal
from numerate.kernel.progress import current as current_progress
from numerate.numgen.baselines import baseline_counts
from numerate.numgen.batches import (
    RUN_LEVELS,
    DetectionRow,
    ImageRow,
    annotated_folder,
    count_hosted,
    detect_batch,
    detection_row,
    generate_batch,
    image_folder,
    image_row,
    make_hosted,
    read_manifest,
    run_folder,
    write_manifest,
)
from numerate.numgen.config import NumGenConfig, recount_settings
from numerate.numgen.detection import DetectionSettings, make_detector
from numerate.numgen.generation import make_generator
from numerate.numgen.heatmap import render_heatmap
from numerate.numgen.hosted import COUNTER_API, GENERATOR_API
from numerate.numgen.metrics import confusion_matrix, per_target_accuracy, score
from numerate.numgen.prompts import Prompt, make_prompts
from numerate.numgen.rows import MetricsRow, NumGenResult, TargetRow
from numerate.store import Store, browse, queries

Row = TypeVar("Row", ImageRow, DetectionRow)

IMAGES_MANIFEST = "images.jsonl"
DETECTIONS_MANIFEST = "detections.jsonl"


@task(cache_policy=NO_CACHE)
async def open_numgen_run(numgen: NumGenConfig, db: str, source_run_id: str | None = None) -> str:
    """Start a NumGen run in the store (`source_run_id`: the run whose images it counts
    again); returns its id."""
    store = await asyncio.to_thread(Store.open, db)
    run_id = f"numgen-{uuid.uuid4().hex[:12]}"
    store.start_numgen_run(
        run_id,
        numgen.kind,
        numgen.generator,
        numgen.detector_label,
        numgen.model_dump(mode="json"),
        code_version(),
        source_run_id,
    )
    return run_id


@task(cache_policy=NO_CACHE)
def build_prompts(config: NumGenConfig) -> list[Prompt]:
    """The run's prompts (deterministic in the prompt spec)."""
    return make_prompts(config.prompts)


BATCH_RETRIES = 1
"""Tries of a batch task after its first fails (a whole batch fails when its model does)."""


@contextlib.contextmanager
def counted_if_failing(n: int) -> Iterator[None]:
    """A batch of `n` images whose task fails counts on the progress bar: as `n` retries
    when the task will be tried again, else as `n` errors (0 errors was shown while every
    image failed)."""
    try:
        yield
    except Exception:
        context = TaskRunContext.get()
        tries = context.task_run.run_count if context else BATCH_RETRIES + 1
        if tries <= BATCH_RETRIES:
            current_progress().retried(n)
        else:
            current_progress().advance(0, errors=n)
        raise


@task(cache_policy=NO_CACHE, retries=BATCH_RETRIES)
async def generate_images(numgen: NumGenConfig, prompts: list[Prompt]) -> list[ImageRow]:
    """Make (or find already made) the images of a batch of prompts."""
    with counted_if_failing(len(prompts)):
        if numgen.generator.startswith(GENERATOR_API):
            hosted = ImagesApiGenerator(numgen)
            made = make_hosted(hosted, prompts, image_folder(numgen))
            rows = await said_stopped(hosted.model, made)
        else:
            generator = make_generator(numgen.generator, numgen.generation)
            folder = image_folder(numgen)
            rows = await asyncio.to_thread(generate_batch, generator, prompts, folder)
    errors = sum(1 for r in rows if r["error"])
    current_progress().advance(len(rows), errors=errors, cached=sum(r["cached"] for r in rows))
    return rows


@task(cache_policy=NO_CACHE, retries=BATCH_RETRIES)
async def detect_images(numgen: NumGenConfig, images: list[ImageRow]) -> list[DetectionRow]:
    """Count the objects in a batch of images (with the config's own counter)."""
    counter = numgen.detector_label
    with counted_if_failing(len(images)):
        if counter.startswith(COUNTER_API):
            hosted = VisionCounter(counter, numgen.detection)
            rows = await said_stopped(hosted.model, count_hosted(hosted, images))
        else:
            device = numgen.generation.device
            detector = make_detector(counter, numgen.detection, device, "float32")
            folder = annotated_folder(numgen)
            rows = await asyncio.to_thread(detect_batch, detector, images, folder)
    current_progress().advance(len(rows), errors=sum(1 for r in rows if r["error"]))
    return rows


async def said_stopped(model: ModelConfig, work: Awaitable[list[Row]]) -> list[Row]:
    """The rows of `work` (a batch asked of an endpoint); NumerateError with the cause when
    the endpoint's breaker stopped it (a wrong key, an unknown model, a server down), rather
    than the batch's own failure (every image of it failed): the run fails saying why; what
    was made is kept for a re-run."""
    try:
        rows: list[Row] | None = await work
    except NumerateError:
        if stopped_cause(model) is None:
            raise
        rows = None
    cause = stopped_cause(model)
    if cause is not None and (rows is None or any(row["error"] for row in rows)):
        raise NumerateError(f"{model.name} was stopped: {cause}") from None
    assert rows is not None
    return rows


@task(cache_policy=NO_CACHE)
async def answer_with_baseline(
    numgen: NumGenConfig, prompts: list[Prompt], run_id: str, db: str
) -> int:
    """A baseline's counts, stored as if a detector had found them (no images)."""
    counts = baseline_counts(numgen.generator, [p.target for p in prompts], numgen.prompts.seed)
    images: list[ImageRow] = [{**image_row(p, numgen.generator), "run_id": run_id} for p in prompts]
    detections: list[DetectionRow] = [
        {**detection_row(image, "none", None, count=count), "run_id": run_id}
        for image, count in zip(images, counts, strict=True)
    ]
    store = Store.open(db)
    await asyncio.to_thread(store.put_images, images)
    await asyncio.to_thread(store.put_detections, detections)
    current_progress().advance(len(prompts))
    return len(prompts)


@task(cache_policy=NO_CACHE)
async def recount_config(
    source: str, detector: str | list[str], detection: DetectionSettings | None, db: str
) -> NumGenConfig:
    """The config of a recount of run `source` with the counters `detector`, set by
    `detection` (default: their defaults: a run's own detector settings are not another
    counter's); NumerateError when the run cannot be counted again."""
    stored = await asyncio.to_thread(queries.numgen_run_config, Store.open(db), source)
    return recount_settings(source, stored, detector, detection)


@task(cache_policy=NO_CACHE)
async def copy_images(source_run_id: str, folder: str, db: str) -> int:
    """The images of run `source_run_id` as a manifest of a run that counts them again (none is
    made: each row is `cached`); returns how many."""
    store = Store.open(db)
    rows = await asyncio.to_thread(queries.numgen_image_rows, store, source_run_id)
    folder_of_images = await asyncio.to_thread(browse.numgen_images_folder, store, source_run_id)
    copied = [recounted(row, folder_of_images) for row in rows]
    write_manifest(copied, Path(folder) / IMAGES_MANIFEST)
    current_progress().doing(f"counting the {len(rows)} images of {source_run_id}")
    return len(rows)


def recounted(row: ImageRow, folder: str | None) -> ImageRow:
    """A stored image row as a recount's (`cached`: none is made). One whose recorded path
    does not lie in `images/` of its run's images folder (`folder`, as the viewer finds it)
    loses its path: a path edited into the database (`/home/me/.ssh/id_rsa`) is never read,
    nor sent to a counter, and the image is counted as not made, naming why."""
    path = row.get("path")
    if path is None or browse.image_below(folder, path) is not None:
        return {**row, "cached": True}
    where = f"{folder}/images" if folder else "no images folder"
    return {**row, "cached": True, "path": None,
            "error": f"its recorded path {for_terminal(path, 300)} is not below the run's "
                     f"images ({for_terminal(where, 300)}): not read"}  # fmt: skip


@task(cache_policy=NO_CACHE)
async def ingest_manifests(run_id: str, folder: str, db: str) -> int:
    """Load the GPU steps' manifests into the store (idempotent); returns the images loaded."""
    store = Store.open(db)
    images = read_manifest(Path(folder) / IMAGES_MANIFEST, ImageRow)
    detections = read_manifest(Path(folder) / DETECTIONS_MANIFEST, DetectionRow)
    with_run: list[ImageRow] = [{**r, "run_id": run_id} for r in images]
    counted: list[DetectionRow] = [{**r, "run_id": run_id} for r in detections]
    await asyncio.to_thread(store.put_images, with_run)
    await asyncio.to_thread(store.put_detections, counted)
    return len(images)


@task(cache_policy=NO_CACHE)
async def score_run(run_id: str, numgen: NumGenConfig, db: str) -> NumGenResult:
    """Confusion matrix and metrics of a run; stores them and draws the heatmap PNG."""
    store = Store.open(db)
    rows = await asyncio.to_thread(queries.numgen_counts, store, run_id)
    counted = [(target, count) for target, count, _, _ in rows if count is not None]
    refused_at = Counter(t for t, count, was_refused, _ in rows if count is None and was_refused)
    refused = sum(refused_at.values())
    unparsed = sum(1 for _, count, _, was_unparsed in rows if count is None and was_unparsed)
    errors = len(rows) - len(counted) - refused - unparsed  # not made, or unreadable
    design = range(numgen.prompts.n_min, numgen.prompts.n_max + 1)
    cm = confusion_matrix([t for t, _ in counted], [c for _, c in counted], design)
    scores = score(cm, refused)  # a refusal is the generator's answer: not correct
    metrics: MetricsRow = {
        **scores.as_row(),
        "run_id": run_id,
        "generator": numgen.generator,
        "detector": numgen.detector_label,
        "errors": errors,
        "refused": refused,
        "unparsed": unparsed,
        "confusion": json.dumps({"targets": list(cm.targets), "counts": cm.counts.tolist()}),
    }
    by_target = per_target_accuracy(cm, refused_at)
    targets: list[TargetRow] = [{**row, "run_id": run_id} for row in by_target]
    await asyncio.to_thread(store.put_numgen_scores, metrics, targets)
    heatmap = run_folder(numgen, run_id) / "confusion.png"
    image = render_heatmap(cm, f"{numgen.generator} / {numgen.detector_label} (n = {cm.n})")
    write_below(heatmap, RUN_LEVELS, lambda handle: image.save(handle, format="PNG"))
    counts = {"errors": errors, "refused": refused, "unparsed": unparsed}
    return {**scores.as_dict(), **counts, "heatmap": str(heatmap)}


@task(cache_policy=NO_CACHE)
async def finish_numgen_run(run_id: str, db: str, status: str = "finished") -> None:
    """Record how the run ended."""
    await asyncio.to_thread(Store.open(db).set_run_status, run_id, status, "numgen_runs")
