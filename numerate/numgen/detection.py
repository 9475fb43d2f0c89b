"""Detection and counting: Grounding DINO (transformers) or the weightless blob counter.

The filtering is pure numpy (no torchvision): the reference's defaults are box threshold 0.05,
text threshold 0.25, keep scores >= 0.40, non-maximum suppression at IoU 0.95, and optionally
drop boxes that cover more than 95% of the image.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from PIL import Image, ImageDraw
from pydantic import ConfigDict, Field

from numerate.kernel.inputs import Real, Whole
from numerate.numgen.hosted import EndpointSettings
from numerate.numgen.metrics import cap
from numerate.numgen.synthetic import count_blobs
from numerate.numgen.torch_utils import (
    ModelLoadError,
    cache_only,
    resolve_device,
    resolve_dtype,
    transformers_quietly,
)

DEFAULT_DETECTOR = "IDEA-Research/grounding-dino-tiny"


class DetectionSettings(EndpointSettings):
    """Grounding DINO's filters, the reference's values by default, or where a `vlm:` counter
    is."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # misspelt: an error

    box_threshold: Real = Field(0.05, ge=0, le=1)
    """Grounding DINO keeps a query whose best token logit passes this."""
    text_threshold: Real = Field(0.25, ge=0, le=1)
    """A token belongs to a box's label when its logit passes this."""
    min_score: Real = Field(0.40, ge=0, le=1)
    """Boxes scoring below this are dropped before counting."""
    nms_iou: Real = Field(0.95, gt=0, le=1)
    """Non-maximum suppression: of two boxes overlapping more than this, the weaker goes."""
    max_box_area: Real | None = Field(None, gt=0, le=1)
    """Drop boxes covering more than this share of the image (the reference's option: 0.95)."""
    batch_size: Whole = Field(8, ge=1, le=1024)
    """Images per forward pass."""


@dataclass
class Detection:
    """What was found in one image: boxes (x0, y0, x1, y1 in pixels) and their scores."""

    boxes: list[tuple[float, float, float, float]] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)

    @property
    def raw_count(self) -> int:
        return len(self.boxes)

    @property
    def count(self) -> int:
        """The count the confusion matrix records (20+ above 20)."""
        return cap(len(self.boxes))


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise intersection over union of boxes (N, 4) and (M, 4)."""
    x0 = np.maximum(a[:, None, 0], b[None, :, 0])
    y0 = np.maximum(a[:, None, 1], b[None, :, 1])
    x1 = np.minimum(a[:, None, 2], b[None, :, 2])
    y1 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x1 - x0, 0, None) * np.clip(y1 - y0, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter, dtype=float), where=union > 0)


def nms(boxes: np.ndarray, scores: np.ndarray, iou: float) -> list[int]:
    """Indices kept by greedy non-maximum suppression, best score first."""
    order = list(np.argsort(-scores, kind="stable"))
    keep: list[int] = []
    while order:
        best = order.pop(0)
        keep.append(int(best))
        if order:
            overlaps = box_iou(boxes[[best]], boxes[order])[0]
            order = [i for i, o in zip(order, overlaps, strict=True) if o <= iou]
    return keep


def filter_boxes(
    boxes: Sequence[Sequence[float]],
    scores: Sequence[float],
    image_size: tuple[int, int],
    settings: DetectionSettings,
) -> Detection:
    """Apply min_score, NMS and the optional large-box removal to raw detections.

    Args:
        boxes: (x0, y0, x1, y1) in pixels.
        scores: one confidence per box.
        image_size: (width, height) of the image.
        settings: the filters.
    """
    if len(boxes) != len(scores):
        raise ValueError(f"{len(boxes)} boxes but {len(scores)} scores")
    if not len(boxes):
        return Detection()
    b = np.asarray(boxes, dtype=float).reshape(-1, 4)
    s = np.asarray(scores, dtype=float)
    keep = s >= settings.min_score
    if settings.max_box_area is not None:
        width, height = image_size
        area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        keep &= area <= settings.max_box_area * width * height
    b, s = b[keep], s[keep]
    if not len(b):
        return Detection()
    kept = nms(b, s, settings.nms_iou)
    return Detection(
        boxes=[(float(b[i][0]), float(b[i][1]), float(b[i][2]), float(b[i][3])) for i in kept],
        scores=[float(s[i]) for i in kept],
    )


def caption_for(object_name: str) -> str:
    """Grounding DINO's caption: the full object phrase, lower case, ending with a period."""
    return object_name.strip().lower().rstrip(".") + "."


class Detector(Protocol):
    """Counts objects: one Detection per (image, object phrase)."""

    name: str

    def detect(self, images: Sequence[Image.Image], objects: Sequence[str]) -> list[Detection]:
        """Detect `objects[i]` in `images[i]`."""
        ...


class BlobDetector:
    """The weightless counter: connected components of dark pixels (synthetic stimuli only)."""

    name = "blobs"

    def __init__(self, threshold: int = 200) -> None:
        self.threshold = threshold

    def detect(self, images: Sequence[Image.Image], objects: Sequence[str]) -> list[Detection]:

        detections = []
        for image in images:
            blobs = count_blobs(image, self.threshold)
            detections.append(Detection(boxes=list(blobs.boxes), scores=[1.0] * blobs.count))
        return detections


@functools.cache
def _load_grounding_dino(model_id: str, device: str, dtype: str) -> tuple[Any, Any]:
    """Processor and model, loaded once per process for each (model, device, dtype)."""
    with transformers_quietly():
        from transformers import AutoModelForZeroShotObjectDetection, AutoProcessor

        try:
            local = cache_only()
            processor = AutoProcessor.from_pretrained(model_id, local_files_only=local)
            model = AutoModelForZeroShotObjectDetection.from_pretrained(
                model_id, dtype=resolve_dtype(dtype, device), local_files_only=local
            )
        except (OSError, ValueError) as error:
            raise ModelLoadError(f"cannot load detector {model_id!r}: {error}") from None
    return processor, model.to(device).eval()


class GroundingDinoDetector:
    """Grounding DINO through transformers (`AutoModelForZeroShotObjectDetection`); needs no
    torchvision. Loads its weights once per process."""

    def __init__(
        self,
        model_id: str = DEFAULT_DETECTOR,
        settings: DetectionSettings | None = None,
        device: str = "auto",
        dtype: str = "float32",
    ) -> None:

        if not model_id or not model_id.strip():
            raise ValueError(f"detector model id is empty: {model_id!r}")
        self.name = model_id
        self.settings = settings or DetectionSettings()
        self.device = resolve_device(device)
        self.dtype = dtype

    def detect(self, images: Sequence[Image.Image], objects: Sequence[str]) -> list[Detection]:
        import torch

        if len(images) != len(objects):
            raise ValueError(f"{len(images)} images but {len(objects)} object phrases")
        processor, model = _load_grounding_dino(self.name, self.device, self.dtype)
        detections: list[Detection] = []
        step = self.settings.batch_size
        for start in range(0, len(images), step):
            batch = [image.convert("RGB") for image in images[start : start + step]]
            captions = [caption_for(o) for o in objects[start : start + step]]
            inputs = processor(images=batch, text=captions, return_tensors="pt", padding=True)
            inputs = inputs.to(self.device)
            if "pixel_values" in inputs:
                inputs["pixel_values"] = inputs["pixel_values"].to(model.dtype)
            with torch.inference_mode():
                outputs = model(**inputs)
            results = processor.post_process_grounded_object_detection(
                outputs,
                inputs["input_ids"],
                threshold=self.settings.box_threshold,
                text_threshold=self.settings.text_threshold,
                target_sizes=[(image.height, image.width) for image in batch],
            )
            for image, result in zip(batch, results, strict=True):
                detections.append(
                    filter_boxes(
                        result["boxes"].float().cpu().tolist(),
                        result["scores"].float().cpu().tolist(),
                        image.size,
                        self.settings,
                    )
                )
        return detections


def make_detector(
    name: str,
    settings: DetectionSettings | None = None,
    device: str = "auto",
    dtype: str = "float32",
) -> Detector:
    """`blobs` for the weightless counter, else a Grounding DINO model id or local path."""
    if name == "blobs":
        return BlobDetector()
    return GroundingDinoDetector(name, settings, device, dtype)


def annotate(image: Image.Image, detection: Detection, label: str = "") -> Image.Image:
    """A copy of `image` with the detection's boxes, their scores and the count drawn on it."""
    out = image.convert("RGB").copy()
    draw = ImageDraw.Draw(out)
    for (x0, y0, x1, y1), score in zip(detection.boxes, detection.scores, strict=True):
        draw.rectangle((x0, y0, x1, y1), outline=(230, 25, 75), width=2)
        draw.text((x0 + 2, y0 + 1), f"{score:.2f}", fill=(230, 25, 75))
    count = f"{detection.raw_count}" if detection.raw_count <= 20 else "20+"
    draw.rectangle((0, 0, 8 + 7 * (len(label) + len(count) + 3), 14), fill=(0, 0, 0))
    draw.text((4, 2), f"{label}: {count}" if label else count, fill=(255, 255, 255))
    return out
