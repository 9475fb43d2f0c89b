"""Batches of NumGen work with their file I/O: generate-and-save, load-and-detect, manifests.

Prefect-free: `tasks/numgen.py` wraps these. Images live under one folder per generator and
settings, named by prompt id, so an image already made (by this run before it was killed, or by
an earlier run with the same generator) is read back instead of generated again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from numerate.kernel.files import write_atomically
from numerate.numgen.detection import Detection, Detector, annotate, caption_for
from numerate.numgen.generation import (
    ImageError,
    ImageGenerator,
    read_png_metadata,
    save_png,
    to_image,
)
from numerate.numgen.prompts import Prompt

log = logging.getLogger("numerate.numgen")


def slug(name: str, settings: dict[str, Any] | None = None) -> str:
    """A folder name for a model (and the settings that change its images)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", name.strip("/"))[-60:]
    if not settings:
        return readable
    digest = hashlib.blake2b(json.dumps(settings, sort_keys=True).encode(), digest_size=4)
    return f"{readable}-{digest.hexdigest()}"


def _now() -> str:
    return datetime.now(UTC).isoformat()


def image_row(prompt: Prompt, generator: str, **values: Any) -> dict[str, Any]:
    """A `numgen_images` row without its run id."""
    return {
        "prompt_id": prompt.prompt_id,
        "prompt_index": prompt.index,
        "target": prompt.target,
        "object": prompt.object,
        "prompt": prompt.text,
        "image_seed": prompt.image_seed,
        "generator": generator,
        "path": None,
        "width": None,
        "height": None,
        "cached": False,
        "error": None,
        "created_at": _now(),
        **values,
    }


def _stored_size(path: Path, prompt: Prompt, generator: str) -> tuple[int, int] | None:
    """(width, height) of the image on disk made from this prompt by this generator (a
    finished save); None when there is none."""
    if not path.exists():
        return None
    try:
        meta, size = read_png_metadata(path)
    except OSError:
        return None
    if meta.get("prompt_id") != prompt.prompt_id or meta.get("model") != generator:
        return None
    return size


def generate_batch(
    generator: ImageGenerator, prompts: Sequence[Prompt], folder: Path
) -> list[dict[str, Any]]:
    """Make (or find) the image of every prompt and save it as `folder/<prompt_id>.png`.

    A failing generator call is retried image by image; an image that still fails gets a row
    with its error and the rest go on. When every image of the batch fails, the generator
    itself is broken and the first error is raised.
    """
    rows: dict[str, dict[str, Any]] = {}
    missing = []
    for prompt in prompts:
        path = folder / f"{prompt.prompt_id}.png"
        size = _stored_size(path, prompt, generator.name)
        if size is not None:
            width, height = size
            rows[prompt.prompt_id] = image_row(
                prompt, generator.name, path=str(path), width=width, height=height, cached=True
            )
        else:
            missing.append(prompt)
    if missing:
        try:
            made = list(zip(missing, generator.generate(missing), strict=True))
        except Exception as error:
            if len(missing) == 1:
                raise
            log.warning("a batch of %d failed (%s); retrying image by image", len(missing), error)
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
                    prompt, generator.name, error=f"{type(failure).__name__}: {failure}"
                )
        for prompt, image in made:
            path = folder / f"{prompt.prompt_id}.png"
            save_png(image, path, prompt, generator.name)
            rows[prompt.prompt_id] = image_row(
                prompt, generator.name, path=str(path), width=image.width, height=image.height
            )
    return [rows[p.prompt_id] for p in prompts]


def detection_row(
    image: dict[str, Any], detector: str, detection: Detection | None, **values: Any
) -> dict[str, Any]:
    """A `numgen_detections` row without its run id."""
    row: dict[str, Any] = {
        "prompt_id": image["prompt_id"],
        "detector": detector,
        "caption": caption_for(image["object"]),
        "raw_count": None,
        "count": None,
        "overflow": None,
        "boxes": None,
        "scores": None,
        "annotated_path": None,
        "error": None,
        "created_at": _now(),
    }
    if detection is not None:
        row.update(
            raw_count=detection.raw_count,
            count=detection.count,
            overflow=detection.raw_count > 20,
            boxes=json.dumps([[round(v, 2) for v in box] for box in detection.boxes]),
            scores=json.dumps([round(s, 4) for s in detection.scores]),
        )
    row.update(values)
    return row


def detect_batch(
    detector: Detector, images: Sequence[dict[str, Any]], annotate_folder: Path | None
) -> list[dict[str, Any]]:
    """Count the objects of each image row (from `generate_batch`). An image that was not made,
    or cannot be read, gets a row with its error; zero detections are a count of 0."""
    rows: dict[str, dict[str, Any]] = {}
    readable: list[tuple[dict[str, Any], Any]] = []
    for image in images:
        if image.get("error") or not image.get("path"):
            rows[image["prompt_id"]] = detection_row(
                image, detector.name, None, error=f"no image: {image.get('error')}"
            )
            continue
        try:
            readable.append((image, to_image(image["path"], f"image {image['path']}")))
        except ImageError as error:
            rows[image["prompt_id"]] = detection_row(image, detector.name, None, error=str(error))
    if readable:
        if annotate_folder is not None:
            annotate_folder.mkdir(parents=True, exist_ok=True)
        detections = detector.detect(
            [pil for _, pil in readable], [i["object"] for i, _ in readable]
        )
        for (image, pil), detection in zip(readable, detections, strict=True):
            annotated = None
            if annotate_folder is not None:
                annotated = str(annotate_folder / f"{image['prompt_id']}.png")
                annotate(pil, detection, image["object"]).save(annotated)
            rows[image["prompt_id"]] = detection_row(
                image, detector.name, detection, annotated_path=annotated
            )
    return [rows[i["prompt_id"]] for i in images]


def write_manifest(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Rows as JSON Lines, written to a temporary name and renamed (readers never see half)."""
    return write_atomically(path, "".join(json.dumps(row) + "\n" for row in rows))


def read_manifest(path: Path) -> list[dict[str, Any]]:
    """Rows written by `write_manifest` (timestamps stay ISO strings: DuckDB casts them on
    insert)."""
    if not path.exists():
        raise FileNotFoundError(f"NumGen manifest {path} is missing: did the GPU step run?")
    return [json.loads(line) for line in path.read_text().splitlines()]
