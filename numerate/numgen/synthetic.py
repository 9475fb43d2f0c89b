"""Weightless stimuli and counting: a generator that draws exactly n separate shapes, and a
connected-component counter. Together they check the NumGen pipeline end to end (the pair
must score 100%) on a machine without model weights."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw

SHAPES = ("circle", "square", "triangle")
BACKGROUND = (255, 255, 255)


def shape_for(object_name: str) -> str | None:
    """The shape drawn for an object: dots are circles, triangles triangles, anything else a
    shape drawn at random (None)."""
    return {"dots": "circle", "dot": "circle", "triangles": "triangle", "triangle": "triangle"}.get(
        object_name
    )


def draw_stimulus(n: int, seed: int, size: int = 256, shape: str | None = None) -> Image.Image:
    """An RGB image with exactly `n` dark shapes on white, none touching another or the border.

    Args:
        n: number of shapes, 0..40.
        seed: the image's seed: the same seed draws the same image.
        size: width and height in pixels, at least 64.
        shape: "circle", "square", "triangle", or None for a random shape each.
    """
    if not 0 <= n <= 40:
        raise ValueError(f"n must be in 0..40, got {n}")
    if size < 64:
        raise ValueError(f"size must be at least 64 pixels, got {size}")
    if shape is not None and shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)} or None, got {shape!r}")
    rng = random.Random(seed)
    gap = max(3, size // 64)  # free pixels between shapes, so they never merge
    for attempt in range(200):
        # Shrink the shapes when the canvas is crowded; retry the layout from scratch if stuck.
        radius_high = max(4.0, size / (2.6 * math.sqrt(max(n, 1)) + 4) * 0.9**attempt)
        placed: list[tuple[float, float, float]] = []
        for _ in range(n):
            for _ in range(500):
                r = rng.uniform(radius_high * 0.6, radius_high)
                x = rng.uniform(r + gap, size - r - gap)
                y = rng.uniform(r + gap, size - r - gap)
                if all(math.hypot(x - px, y - py) > r + pr + gap for px, py, pr in placed):
                    placed.append((x, y, r))
                    break
            else:
                break
        if len(placed) == n:
            break
    else:  # pragma: no cover - 200 shrinking attempts always fit 40 shapes in 64 px
        raise RuntimeError(f"could not place {n} shapes on {size} px")
    image = Image.new("RGB", (size, size), BACKGROUND)
    draw = ImageDraw.Draw(image)
    for x, y, r in placed:
        kind = shape or rng.choice(SHAPES)
        colour = tuple(rng.randrange(0, 140) for _ in range(3))
        if kind == "circle":
            draw.ellipse((x - r, y - r, x + r, y + r), fill=colour)
        elif kind == "square":
            h = r / math.sqrt(2)
            draw.rectangle((x - h, y - h, x + h, y + h), fill=colour)
        else:
            angle = rng.uniform(0, 2 * math.pi)
            points = [
                (
                    x + r * math.cos(angle + k * 2 * math.pi / 3),
                    y + r * math.sin(angle + k * 2 * math.pi / 3),
                )
                for k in range(3)
            ]
            draw.polygon(points, fill=colour)
    return image


@dataclass(frozen=True)
class Blobs:
    """Connected components of an image: their number and bounding boxes (x0, y0, x1, y1)."""

    count: int
    boxes: list[tuple[float, float, float, float]]


def count_blobs(image: Image.Image, threshold: int = 200, min_area: int | None = None) -> Blobs:
    """Count dark connected regions (8-connectivity) on a light background.

    Args:
        image: any PIL image; converted to grayscale.
        threshold: a pixel darker than this (0..255) belongs to a shape.
        min_area: smallest region counted, in pixels (default: 0.02% of the image, at least 4),
            so that compression specks are not counted.
    """
    from scipy import ndimage

    if not 0 < threshold <= 255:
        raise ValueError(f"threshold must be in 1..255, got {threshold}")
    gray = np.asarray(image.convert("L"))
    mask = gray < threshold
    labels, found = ndimage.label(mask, structure=np.ones((3, 3), dtype=bool))
    if found == 0:
        return Blobs(0, [])
    floor = min_area if min_area is not None else max(4, gray.size // 5000)
    areas = np.bincount(labels.ravel())[1:]
    boxes = []
    for index, region in enumerate(ndimage.find_objects(labels)):
        if region is None or areas[index] < floor:
            continue
        ys, xs = region
        boxes.append((float(xs.start), float(ys.start), float(xs.stop), float(ys.stop)))
    return Blobs(len(boxes), boxes)
