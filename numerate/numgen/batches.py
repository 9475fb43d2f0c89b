"""Batches of NumGen work with their file I/O: generate-and-save, load-and-detect, manifests.

Prefect-free: `tasks/numgen.py` wraps these. Images live under one folder per generator and
settings, named by prompt id, so an image already made (by this run before it was killed, or by
an earlier run with the same generator) is read back instead of generated again.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import re
from collections.abc import Callable, Coroutine, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from numerate.kernel.confined import Confined, LeadsOutside, write_below
from numerate.kernel.credentials import redact
from numerate.kernel.errors import ConfigError, NumerateError, printable, shorten
from numerate.kernel.files import not_as_recorded
from numerate.numgen.detection import Detection, Detector, annotate, caption_for
from numerate.numgen.generation import (
    IMAGE_LEVELS,
    ImageError,
    ImageGenerator,
    is_whole_png,
    read_png_metadata,
    save_png,
    stored_image,
    to_image,
)
from numerate.numgen.hosted import (
    COUNTER_API,
    GENERATOR_API,
    IMAGE_API_FIELDS,
    HostedCounter,
    HostedGenerator,
    checked_png,
)
from numerate.numgen.metrics import MAX_COUNT, cap
from numerate.numgen.prompts import Prompt
from numerate.numgen.rows import DetectionRow, ImageRow

if TYPE_CHECKING:
    from numerate.numgen.config import NumGenConfig

log = logging.getLogger("numerate.numgen")
T = TypeVar("T")


def slug(name: str, settings: dict[str, Any] | None = None) -> str:
    """A folder name for a model (and the settings that change its images)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", name.strip("/"))[-60:]
    if not settings:
        return readable
    digest = hashlib.blake2b(json.dumps(settings, sort_keys=True).encode(), digest_size=4)
    return f"{readable}-{digest.hexdigest()}"


def image_folder(config: NumGenConfig) -> Path:
    """Images of one generator with one set of sampling settings (an `api:` generator's: its
    endpoint and request fields): an absolute path (the database records where each image is,
    for a viewer started in any folder)."""
    settings = config.generation.for_model(config.generator) if config.needs_images else None
    if config.generator.startswith(GENERATOR_API):
        asked = config.generation.model_dump(include={"base_url", *IMAGE_API_FIELDS})
        settings = {**asked, "base_url": redact(str(asked["base_url"]))}
    return (
        Path(config.images_dir).expanduser().absolute()
        / "images"
        / slug(config.generator, settings)
    )


def annotated_folder(config: NumGenConfig) -> Path | None:
    """Where the run's own counter draws what it found on each image; None when it draws
    nothing (`annotate: false`, or a hosted counter, which says a number and no boxes)."""
    counter = config.detector_label
    if not config.annotate or counter.startswith(COUNTER_API):
        return None
    return image_folder(config) / "annotated" / slug(counter, config.detection.model_dump())


def run_folder(config: NumGenConfig, run_id: str) -> Path:
    """Where the GPU steps leave their manifests for the run (and the heatmap lands)."""
    return Path(config.images_dir) / "runs" / run_id


def check_folders(config: NumGenConfig) -> None:
    """ConfigError, before anything runs, when a folder the run writes in below images_dir
    (its images', its annotated images', its runs') is a symbolic link or not a folder (found
    after every image was made and counted, it failed the run and lost the counts)."""
    root = Path(config.images_dir).expanduser().absolute()
    confined = Confined(root)
    # the deepest folders, every name on the way checked: the images', each counter's
    # annotated images' (the others count in linked runs of their own), the runs'
    drawn = (annotated_folder(config.for_counter(counter)) for counter in config.counters)
    deepest = [image_folder(config), *(folder for folder in drawn if folder is not None)]
    try:
        for folder in [*("/".join(path.relative_to(root).parts) for path in deepest), "runs"]:
            confined.check_folder(folder)
    except LeadsOutside as error:
        raise ConfigError(f"images_dir {str(root)!r:.200}: {error}") from None


def _now() -> str:
    return datetime.now(UTC).isoformat()


def image_row(
    prompt: Prompt,
    generator: str,
    *,
    path: str | None = None,
    width: int | None = None,
    height: int | None = None,
    cached: bool = False,
    error: str | None = None,
    sha256: str | None = None,
    refused: bool = False,
) -> ImageRow:
    """A `numgen_images` row without its run id."""
    return {
        "prompt_id": prompt.prompt_id,
        "prompt_index": prompt.index,
        "target": prompt.target,
        "object": prompt.object,
        "prompt": prompt.text,
        "image_seed": prompt.image_seed,
        "generator": generator,
        "path": path,
        "width": width,
        "height": height,
        "cached": cached,
        "error": error,
        "created_at": _now(),
        "sha256": sha256,
        "refused": refused,
    }


def _stored_size(path: Path, prompt: Prompt, generator: str) -> tuple[int, int] | None:
    """(width, height) of the image on disk made from this prompt by this generator (a
    finished save); None when there is none."""
    try:  # its first bytes, not through a link: the text chunks lie before the image data
        meta, size = read_png_metadata(stored_image(path, HEAD_BYTES, head=True))
    except (OSError, ValueError, LeadsOutside):  # none, unreadable, or a link planted there
        return None
    if meta.get("prompt_id") != prompt.prompt_id or meta.get("model") != generator:
        return None
    return size


HEAD_BYTES = 1 << 16
"""What is read of a stored image to know whether it is the one a prompt needs (its header
and text chunks lie before its image data)."""


def already_made(
    prompts: Sequence[Prompt], generator: str, folder: Path
) -> tuple[dict[str, ImageRow], list[Prompt]]:
    """The rows of the images of `prompts` already in `folder` (made by this run before it was
    killed, or by an earlier run with the same generator and settings), and the prompts whose
    images are still to be made (a stored one that is not whole too: `is_whole_png`)."""
    rows: dict[str, ImageRow] = {}
    missing = []
    for prompt in prompts:
        path = folder / f"{prompt.prompt_id}.png"
        size = _stored_size(path, prompt, generator)
        data = stored_image(path) if size is not None else b""
        if size is None or not is_whole_png(data):
            missing.append(prompt)
            continue
        rows[prompt.prompt_id] = image_row(
            prompt, generator, path=str(path), width=size[0], height=size[1], cached=True,
            sha256=hashlib.sha256(data).hexdigest(),
        )  # fmt: skip
    return rows, missing


def made_row(prompt: Prompt, generator: str, image: Any, folder: Path) -> ImageRow:
    """Save a new image of `prompt` (a PIL image, or a checked PNG's bytes) as
    `folder/<prompt_id>.png`; its row."""
    path = folder / f"{prompt.prompt_id}.png"
    digest, (width, height) = save_png(image, path, prompt, generator)
    return image_row(prompt, generator, path=str(path), width=width, height=height,
                     sha256=digest)  # fmt: skip


def _made_together(
    generator: ImageGenerator, prompts: list[Prompt]
) -> tuple[list[tuple[Prompt, Any]], str | None]:
    """The images of `prompts` made in one call, or none and the call's error, redacted (a
    generator's error may quote a key); a single prompt's error is raised."""
    try:
        return list(zip(prompts, generator.generate(prompts), strict=True)), None
    except Exception as error:
        if len(prompts) == 1:
            raise
        return [], redact(str(error), token_shapes=True)


def generate_batch(
    generator: ImageGenerator, prompts: Sequence[Prompt], folder: Path
) -> list[ImageRow]:
    """Make (or find) the image of every prompt and save it as `folder/<prompt_id>.png`.

    A failing generator call is retried image by image; an image that still fails gets a row
    with its error and the rest go on. When every image of the batch fails, the generator
    itself is broken and the first error is raised.
    """
    rows, missing = already_made(prompts, generator.name, folder)
    if missing:
        made, said = _made_together(generator, missing)
        if said is not None:  # logged outside the `except`: were the log handler to fail,
            # its traceback would show the error it handled as it was, a quoted key in it
            log.warning(
                "a batch of %d failed (%s); retrying image by image",
                len(missing),
                printable(shorten(said, 500)),
            )  # a service's words: escaped, bounded
            made, failures = [], []
            for prompt in missing:
                try:
                    made.append((prompt, generator.generate([prompt])[0]))
                except Exception as single:
                    failures.append((prompt, single))
            if not made:
                raise failures[0][1] from None
            for prompt, failure in failures:
                rows[prompt.prompt_id] = image_row(
                    prompt, generator.name,
                    error=redact(f"{type(failure).__name__}: {failure}", token_shapes=True),
                )  # fmt: skip
        for prompt, image in made:
            rows[prompt.prompt_id] = made_row(prompt, generator.name, image, folder)
    return [rows[p.prompt_id] for p in prompts]


async def make_hosted(
    generator: HostedGenerator, prompts: Sequence[Prompt], folder: Path
) -> list[ImageRow]:
    """Make (or find) the image of every prompt through an endpoint, all at once (the
    endpoint's limit bounds them), each saved as it arrives: a killed run keeps every image
    it was sent. A refused or failed image gets a row saying so."""
    rows, missing = await asyncio.to_thread(already_made, prompts, generator.name, folder)

    async def one(prompt: Prompt) -> None:  # an error (a full disk) stops the others
        made = await generator.make(prompt)
        if made.png is None:
            rows[prompt.prompt_id] = image_row(
                prompt, generator.name, error=made.error, refused=made.refused
            )
        else:
            rows[prompt.prompt_id] = await asyncio.to_thread(
                made_row, prompt, generator.name, made.png, folder
            )

    await together(one(prompt) for prompt in missing)
    broken_if_all_failed([rows[p.prompt_id] for p in missing], generator.name)
    return [rows[p.prompt_id] for p in prompts]


def broken_if_all_failed(rows: Sequence[ImageRow] | Sequence[DetectionRow], model: str) -> None:
    """NumerateError with the first error when every row of a batch failed (none made, none
    refused, none counted): the model itself is broken (a dead endpoint, a wrong model id),
    as generate_batch says of a local generator, and the run must not end as a success."""
    failed = [row["error"] for row in rows if row["error"] and not row.get("refused")]
    if rows and len(failed) == len(rows):
        raise NumerateError(
            f"{model}: all {len(rows)} images of a batch failed: {printable(failed[0])}"
        )


async def together(steps: Iterable[Coroutine[Any, Any, Any]]) -> None:
    """Run `steps` at once; the first to fail cancels the others (none goes on asking for
    images of a batch that has failed, nor while it is tried again) and is raised as it was."""
    try:
        async with asyncio.TaskGroup() as group:
            for step in steps:
                group.create_task(step)
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None


MAX_RAW_COUNT = 2**31 - 1
"""The largest count stored as said (the column's range): a larger one is stored as this."""


def detection_row(
    image: ImageRow,
    detector: str,
    detection: Detection | None,
    *,
    count: int | None = None,
    annotated_path: str | None = None,
    error: str | None = None,
    answer: str | None = None,
) -> DetectionRow:
    """A `numgen_detections` row without its run id: of `detection`, or of a `count` said
    without boxes (a baseline's, a `vlm:` counter's: `raw_count` as said, `count` 20+ above
    20, as boxes are), or of the `error` that left the image uncounted."""
    row: DetectionRow = {
        "prompt_id": image["prompt_id"],
        "detector": detector,
        "caption": caption_for(image["object"]),
        "raw_count": None if count is None else min(count, MAX_RAW_COUNT),
        "count": None if count is None else cap(count),
        "overflow": None if count is None else count > MAX_COUNT,
        "boxes": None,
        "scores": None,
        "annotated_path": annotated_path,
        "error": error,
        "created_at": _now(),
        "answer": answer,
        "unparsed": error is None and detection is None and count is None,
    }
    if detection is not None:
        row["raw_count"] = detection.raw_count
        row["count"] = detection.count
        row["overflow"] = detection.raw_count > MAX_COUNT
        row["boxes"] = json.dumps([[round(v, 2) for v in box] for box in detection.boxes])
        row["scores"] = json.dumps([round(s, 4) for s in detection.scores])
    return row


PIXELS_AT_ONCE = 64 * 1024 * 1024
"""The most pixels a detector is given in one call, about: 64 images of 1024 x 1024. A task
batch's images are read and counted a part at a time, each part closed once its images reach
this, so a batch of the largest images an endpoint may return (8192 x 8192: 200 MB each once
decoded) is counted image by image, not held whole (64 of them took about 17 GB)."""


def detect_batch(
    detector: Detector, images: Sequence[ImageRow], annotate_folder: Path | None
) -> list[DetectionRow]:
    """Count the objects of each image row (from `generate_batch`). An image that was not made,
    or cannot be read, gets a row with its error; zero detections are a count of 0. Images
    are decoded a part of at most about PIXELS_AT_ONCE at a time."""
    rows, countable = _countable(images, detector.name)
    part: list[tuple[ImageRow, Any]] = []
    pixels = 0
    for image in countable:
        try:
            pil = _pixels(image)
        except ImageError as error:
            rows[image["prompt_id"]] = detection_row(image, detector.name, None, error=str(error))
            continue
        part.append((image, pil))
        pixels += pil.width * pil.height
        if pixels >= PIXELS_AT_ONCE:
            rows.update(_counted(detector, part, annotate_folder))
            part, pixels = [], 0
    if part:
        rows.update(_counted(detector, part, annotate_folder))
    return [rows[i["prompt_id"]] for i in images]


def _counted(
    detector: Detector, readable: list[tuple[ImageRow, Any]], annotate_folder: Path | None
) -> dict[str, DetectionRow]:
    """The detection rows of images read (each with its picture), counted in one call, with
    their annotated copies written."""
    detections = detector.detect([pil for _, pil in readable], [i["object"] for i, _ in readable])
    rows = {}
    for (image, pil), detection in zip(readable, detections, strict=True):
        annotated = None
        if annotate_folder is not None:
            annotated = str(annotate_folder / f"{image['prompt_id']}.png")
            drawn = annotate(pil, detection, image["object"])
            # images/<generator>/annotated/<counter>/<file>, through no link
            write_below(annotated, IMAGE_LEVELS + 2, functools.partial(drawn.save, format="PNG"))
        rows[image["prompt_id"]] = detection_row(
            image, detector.name, detection, annotated_path=annotated
        )
    return rows


def _countable(
    images: Sequence[ImageRow], detector: str
) -> tuple[dict[str, DetectionRow], list[ImageRow]]:
    """The rows of images that cannot be counted (refused, or not made), and the others."""
    rows: dict[str, DetectionRow] = {}
    for image in images:
        if image.get("error") or not image.get("path"):
            why = "refused" if image.get("refused") else "no image"
            rows[image["prompt_id"]] = detection_row(
                image, detector, None, error=f"{why}: {image.get('error')}"
            )
    return rows, [image for image in images if image["prompt_id"] not in rows]


def _stored(image: ImageRow, read: Callable[[bytes], T]) -> T:
    """`read` of an image row's file, reached without following a link at its name
    (ImageError when it cannot be read, is a link, is not the image its row's SHA-256 names,
    or `read` refuses it)."""
    try:
        data = stored_image(str(image["path"]))
    except (OSError, ValueError, LeadsOutside) as error:
        raise ImageError(f"image {image['path']}: cannot read it: {error}") from None
    changed = not_as_recorded(data, image.get("sha256"))
    if changed:  # replaced since it was made: its count would be stored as the count of the
        raise ImageError(f"image {image['path']}: not the image the run made ({changed})")
    try:
        return read(data)
    except (OSError, ValueError) as error:
        raise ImageError(f"image {image['path']}: cannot read it: {error}") from None


def _pixels(image: ImageRow) -> Any:
    """An image row's picture (ImageError when it cannot be read, or is a link)."""
    return _stored(image, lambda data: to_image(data, f"image {image['path']}"))


ANSWER_CHARS = 2000
"""A counter's answer is stored whole up to twice this, else its head and tail (where its
count is) of this many characters each."""


async def count_hosted(counter: HostedCounter, images: Sequence[ImageRow]) -> list[DetectionRow]:
    """Count the objects of each image row through an endpoint, all at once (the endpoint's
    limit bounds them), each image read when its turn comes. An answer without a count is
    `unparsed` (never 0)."""
    rows, countable = _countable(images, counter.name)

    async def one(image: ImageRow) -> None:
        try:
            png = await asyncio.to_thread(_stored, image, checked_png)  # a PNG, checked
        except ImageError as error:
            rows[image["prompt_id"]] = detection_row(image, counter.name, None, error=str(error))
            return
        counted = await counter.count(png, image["object"])
        answer = counted.answer
        if answer is not None and len(answer) > 2 * ANSWER_CHARS:
            answer = f"{answer[:ANSWER_CHARS]} [...] {answer[-ANSWER_CHARS:]}"
        rows[image["prompt_id"]] = detection_row(
            image, counter.name, None, count=counted.count, error=counted.error, answer=answer
        )

    await together(one(image) for image in countable)
    broken_if_all_failed([rows[i["prompt_id"]] for i in countable], counter.name)
    return [rows[i["prompt_id"]] for i in images]


def write_manifest(rows: Sequence[ImageRow] | Sequence[DetectionRow], path: Path) -> Path:
    """Rows as JSON Lines, written to a temporary name and renamed (readers never see half),
    at `<images_dir>/runs/<run id>/<file>`, through no link below the images folder."""
    return write_below(path, RUN_LEVELS, "".join(json.dumps(row) + "\n" for row in rows).encode())


RUN_LEVELS = 3
"""A run's file below the images folder the user named: `runs/<run id>/<file>`."""


Row = TypeVar("Row", ImageRow, DetectionRow)


def read_manifest(path: Path, kind: type[Row]) -> list[Row]:
    """Rows written by `write_manifest` (timestamps stay ISO strings: DuckDB casts them on
    insert); ValueError naming the line when one lacks a column of `kind`."""
    if not path.exists():
        raise FileNotFoundError(f"NumGen manifest {path} is missing: did the GPU step run?")
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        row = json.loads(line)
        required: frozenset[str] = getattr(kind, "__required_keys__")  # noqa: B009 (typing)
        missing = required - set(row) if isinstance(row, dict) else {"*"}
        if missing:
            raise ValueError(
                f"{path} line {number}: not a {kind.__name__} (lacks {sorted(missing)})"
            )
        rows.append(cast(Row, row))
    return rows
