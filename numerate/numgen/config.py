"""A NumGen run's configuration: what generates, what counts, which prompts, where images go."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from numerate.kernel.errors import ConfigError, describe_validation_error
from numerate.kernel.inputs import Flag, Whole, check_parameters_size
from numerate.numgen.baselines import BASELINES
from numerate.numgen.detection import DEFAULT_DETECTOR, DetectionSettings
from numerate.numgen.generation import GenerationSettings, load_callable
from numerate.numgen.prompts import PromptSpec
from numerate.numgen.torch_utils import check_available

CALIBRATION_OBJECTS = ["dots", "triangles"]
"""The synthetic stimuli a detector is calibrated on: shapes its caption names truthfully."""


class NumGenConfig(BaseModel):
    """One NumGen run."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # misspelt: an error

    generator: str = "synthetic"
    """A diffusers model id or local path, `synthetic`, `callable:module:function`, or a
    baseline that needs no images: `random`, `weber`."""
    detector: str = DEFAULT_DETECTOR
    """A Grounding DINO model id or local path, or `blobs` (synthetic stimuli only)."""
    kind: Literal["benchmark", "calibration"] = "benchmark"
    """`calibration` runs measure the detector itself on images of known count."""
    prompts: PromptSpec = Field(default_factory=PromptSpec)
    """Numbers, objects, prompts per number and seed."""
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    """Sampling, device and dtype of a diffusers generator."""
    detection: DetectionSettings = Field(default_factory=DetectionSettings)
    """Grounding DINO's thresholds and filters."""
    images_dir: str = "results/numgen"
    """Where images, annotated images and the GPU steps' manifests go (a folder every worker
    can reach: a shared mount when generation runs on another machine)."""
    task_batch: Whole = Field(64, ge=1, le=10_000)
    """Images per Prefect task (model batches are sized separately, to the GPU's memory)."""
    annotate: Flag = True
    """Save a copy of every image with the detector's boxes drawn on it."""

    @field_validator("generator", "detector")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must name a model, a path or a built-in")
        return value.strip()

    @field_validator("images_dir")
    @classmethod
    def _a_folder(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("give the folder for the images (an empty path would mean here)")
        return value

    @model_validator(mode="after")
    def _small_enough(self) -> NumGenConfig:
        check_parameters_size(self.model_dump_json(), "the numgen config")
        return self

    @model_validator(mode="after")
    def _settings_it_uses(self) -> NumGenConfig:
        # by value, not by fields set: a config comes back from Prefect with every field set
        if not self.needs_images and self.detector != DEFAULT_DETECTOR:
            raise ValueError(
                f"detector {self.detector!r}: the {self.generator} baseline answers counts "
                "itself and uses no detector (leave detector out)"
            )
        diffusers = self.needs_images and not (
            self.generator == "synthetic" or self.generator.startswith("callable:")
        )
        defaults = GenerationSettings().model_dump()
        unused = [name for name, value in self.generation.model_dump().items()
                  if name != "device" and value != defaults[name]]  # fmt: skip
        if unused and not diffusers:
            raise ValueError(
                f"generation.{unused[0]} = {getattr(self.generation, unused[0])!r}: "
                f"{self._who()} makes no use of it (it sets how a diffusers model samples)"
            )
        detection = self.detection.model_dump()
        changed = [n for n, v in detection.items() if v != DetectionSettings().model_dump()[n]]
        if changed and (not self.needs_images or self.detector == "blobs"):
            raise ValueError(
                f"detection.{changed[0]} = {detection[changed[0]]!r}: {self._who()} makes no "
                "use of it (it sets how Grounding DINO finds and filters boxes)"
            )
        runs_a_model = diffusers or (self.needs_images and self.detector != "blobs")
        if self.generation.device != "auto" and not runs_a_model:
            raise ValueError(
                f"generation.device {self.generation.device!r}: {self._who()} runs on no "
                "device (leave it out)"
            )
        return self

    def _who(self) -> str:
        """What runs, in words, for a message about a setting nothing uses."""
        if not self.needs_images:
            return f"the {self.generator} baseline"
        return f"the {self.generator} generator with the {self.detector} detector"

    @property
    def needs_images(self) -> bool:
        return self.generator not in BASELINES

    def check_models(self) -> None:
        """Raise ModelLoadError when the generator or detector can surely not be loaded (see
        torch_utils.check_available), before any image is asked for."""
        if not self.needs_images:
            return
        if self.generator.startswith("callable:"):  # imported now: a typo is one line
            load_callable(self.generator.removeprefix("callable:"))
        elif self.generator != "synthetic":
            check_available(self.generator, "model_index.json", "generator")
        if self.detector != "blobs":
            check_available(self.detector, "config.json", "detector")

    @property
    def detector_label(self) -> str:
        """The detector as results name it (`none` for baselines that answer directly)."""
        return self.detector if self.needs_images else "none"


def calibration_config(
    detector: str, per_number: int = 10, seed: int = 0, **values: object
) -> NumGenConfig:
    """A calibration run of `detector`: synthetic images of dots and triangles, known counts."""
    return NumGenConfig.model_validate(
        {
            **values,
            "generator": "synthetic",
            "detector": detector,
            "kind": "calibration",
            "prompts": {"objects": CALIBRATION_OBJECTS, "per_number": per_number, "seed": seed},
        }
    )


def with_options(
    data: dict[str, Any], generator: str | None, detector: str | None,
    prompts: dict[str, Any], generation: dict[str, Any], images_dir: str | None,
) -> dict[str, Any]:  # fmt: skip
    """A NumGen config's settings (from its YAML, or empty) with the given ones over them
    (None: not given): the synthetic generator by default, counted by the blob counter unless
    a detector is named."""
    if generator is not None:
        data["generator"] = generator
    data.setdefault("generator", "synthetic")
    if detector is not None:
        data["detector"] = detector
    elif "detector" not in data and data["generator"] == "synthetic":
        data["detector"] = "blobs"
    for section, values in (("prompts", prompts), ("generation", generation)):
        given = {key: value for key, value in values.items() if value is not None}
        if given:
            data.setdefault(section, {}).update(given)
    if images_dir is not None:
        data["images_dir"] = images_dir
    return data


def parse_numgen_config(data: dict[str, Any], options: dict[str, str]) -> NumGenConfig:
    """The NumGen config of `data`; ConfigError naming the option that gave a bad value
    (`options`: {config field: command-line option}), else the config's field."""
    try:
        return NumGenConfig.model_validate(data)
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, "numgen config", options)) from None
