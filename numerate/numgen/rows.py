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
    sha256: str | None
    """The image file's SHA-256 (None: no image, or stored before they were recorded)."""
    refused: bool | None
    """The service declined the prompt (an `api:` generator's content policy); None: not
    recorded (stored before refusals were)."""
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
    answer: str | None
    """What a `vlm:` counter answered (None for a detector that draws boxes)."""
    unparsed: bool | None
    """The counter's answer held no count (not 0: no count); None: not recorded."""
    run_id: NotRequired[str]


class ScoresRow(TypedDict):
    """A run's metrics flat (numerate.numgen.metrics.NumGenScores.as_row), named as the
    columns of `numgen_metrics`."""

    n: int
    accuracy: float | None
    ci_low: float
    ci_high: float
    mwe: float | None
    knower_level: int
    human_correlation: float | None
    random_correlation: float | None
    sv_slope: float | None
    sv_intercept: float | None
    sv_r_squared: float | None
    sv_slope_se: float | None
    sv_p_slope_is_1: float | None
    sv_points: int
    zero_rate: float | None
    overflow_rate: float | None


class MetricsRow(ScoresRow):
    """A `numgen_metrics` row: the scores, what they were measured with, the images without a
    count by why (`errors`: failed; `refused` by the service; `unparsed`: the counter's answer
    held none) and the confusion matrix as JSON."""

    run_id: str
    generator: str
    detector: str
    errors: int
    refused: int
    """Images the generator's service declined to make."""
    unparsed: int
    """Images whose counter's answer held no count."""
    confusion: str


class TargetRow(TypedDict):
    """A `numgen_targets` row: one target's accuracy with its 95% Wilson interval (its run id
    is added where the run is known)."""

    target: int
    n: int
    correct: int
    accuracy: float | None
    ci_low: float
    ci_high: float
    mean_count: float | None
    run_id: NotRequired[str]


NumGenResult = dict[str, object]
"""A NumGen run's id, metrics and heatmap path (numerate.numgen.metrics.NumGenScores.as_dict),
as JSON: what the `numgen` flow returns."""
