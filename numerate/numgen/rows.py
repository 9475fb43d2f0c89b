"""The rows a NumGen run stores, typed (the store derives its column lists from them). Pure:
no imports beyond typing, so the store can name them without loading images or models."""

from typing import NotRequired, TypedDict


class ImageRow(TypedDict):
    """A `numgen_images` row (its run id is added where the run is known)."""

    prompt_id: str
    prompt_index: int
    target: int
    object: str
    prompt: str
    image_seed: int
    generator: str
    path: str | None
    width: int | None
    height: int | None
    cached: bool
    error: str | None
    created_at: str
    run_id: NotRequired[str]


class DetectionRow(TypedDict):
    """A `numgen_detections` row (its run id is added where the run is known)."""

    prompt_id: str
    detector: str
    caption: str
    raw_count: int | None
    count: int | None
    overflow: bool | None
    boxes: str | None
    scores: str | None
    annotated_path: str | None
    error: str | None
    created_at: str
    run_id: NotRequired[str]


NumGenResult = dict[str, object]
"""A NumGen run's id, metrics and heatmap path (numerate.numgen.metrics.NumGenScores.as_dict),
as JSON: what the `numgen` flow returns."""
