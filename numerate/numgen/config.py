"""A NumGen run's configuration: what generates, what counts, which prompts, where images go."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
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
from numerate.kernel.inputs import Flag, Real, Whole, check_parameters_size, has_control_character
from numerate.kernel.names import MODEL_ID
from numerate.numgen.baselines import BASELINES
from numerate.numgen.detection import DEFAULT_DETECTOR, DetectionSettings
from numerate.numgen.generation import GenerationSettings, load_callable
from numerate.numgen.hosted import (
    COUNTER_API,
    ENDPOINT_FIELDS,
    GENERATOR_API,
    IMAGE_API_FIELDS,
    KINDS,
    check_size,
)
from numerate.numgen.prompts import PromptSpec
from numerate.numgen.torch_utils import check_available

CALIBRATION_OBJECTS = ["dots", "triangles"]
"""The synthetic stimuli a detector is calibrated on: shapes its caption names truthfully."""


class NumGenConfig(BaseModel):
    """One NumGen run."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # misspelt: an error

    generator: str = "synthetic"
    """A diffusers model id or local path, `synthetic`, `callable:module:function`,
    `api:<model id>` (an OpenAI-compatible Images API at `generation.base_url`), or a baseline
    that needs no images: `random`, `weber`."""
    detector: str | list[str] = DEFAULT_DETECTOR
    """A Grounding DINO model id or local path, `blobs` (synthetic stimuli only),
    `vlm:<model id>` (a chat endpoint that takes images, at `detection.base_url`), or a list
    of them: the first counts the run, each other a linked run of the same images."""
    kind: Literal["benchmark", "calibration"] = "benchmark"
    """`calibration` runs measure the detector itself on images of known count."""
    prompts: PromptSpec = Field(default_factory=PromptSpec)
    """Numbers, objects, prompts per number and seed."""
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    """Sampling, device and dtype of a diffusers generator; endpoint and request fields of an
    `api:` one."""
    detection: DetectionSettings = Field(default_factory=DetectionSettings)
    """Grounding DINO's thresholds and filters; the endpoint of a `vlm:` counter."""
    images_dir: str = "results/numgen"
    """Where images, annotated images and the GPU steps' manifests go (a folder every worker
    can reach: a shared mount when generation runs on another machine)."""
    task_batch: Whole = Field(64, ge=1, le=10_000)
    """Images per Prefect task (model batches are sized separately, to the GPU's memory)."""
    annotate: Flag = True
    """Save a copy of every image with the detector's boxes drawn on it."""
    max_error_rate: Real = Field(0.02, ge=0.0, le=1.0)
    """Share of the run's images that may be in no metric (no count for an error: not made,
    or not read or counted; or a counter's answer that held no count) before the run counts
    as degraded (stored all the same; the command exits 3)."""

    @field_validator("generator")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return _named(value, "generator")

    @field_validator("detector")
    @classmethod
    def _counters(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, str):
            return _named(value, "detector")
        if not value:
            raise ValueError("name at least one counter")
        named = [_named(name, "detector") for name in value]
        twice = next((name for name in named if named.count(name) > 1), None)
        if twice is not None:
            raise ValueError(f"{twice!r} is named twice (each counter counts the images once)")
        return named[0] if len(named) == 1 else named

    @field_validator("images_dir")
    @classmethod
    def _a_folder(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("give the folder for the images (an empty path would mean here)")
        if has_control_character(value):  # printed in the run's last line
            raise ValueError("a path with a control character (a newline?)")
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
                f"detector = {self.detector!r}: the {self.generator} baseline answers counts "
                "itself and uses no detector (leave detector out)"
            )
        hosted = self.generator.startswith(GENERATOR_API)
        local = self.generator == "synthetic" or self.generator.startswith("callable:")
        diffusers = self.needs_images and not (local or hosted)
        endpoint = (*ENDPOINT_FIELDS, *IMAGE_API_FIELDS)
        _unused(self.generation, GenerationSettings(), "generation", self._who(), {
            "device": True,
            **dict.fromkeys(endpoint, hosted),
        }, default=diffusers)  # fmt: skip
        counters = self.counters if self.needs_images else []
        vlm = any(c.startswith(COUNTER_API) for c in counters)
        dino = any(map(grounding_dino, counters))
        _unused(self.detection, DetectionSettings(), "detection", self._who(),
                dict.fromkeys(ENDPOINT_FIELDS, vlm), default=dino)  # fmt: skip
        if self.generation.device != "auto" and not on_a_device(self.generator, counters):
            raise ValueError(
                f"generation.device {self.generation.device!r}: {self._who()} runs on no "
                "device (leave it out)"
            )
        for section, used, who in (
            (self.generation, hosted, self.generator),
            (self.detection, vlm, next((c for c in counters if c.startswith(COUNTER_API)), "")),
        ):
            name = "generation" if section is self.generation else "detection"
            if used and not section.base_url:
                raise ValueError(f"{name}.base_url: {who} is asked at an endpoint; give its root "
                                 "URL (e.g. https://api.openai.com/v1)")  # fmt: skip
            if used and section.api_key_env and section.api_key_secret:
                raise ValueError(f"{name}.api_key_env and {name}.api_key_secret: give one")
        if hosted and self.generation.size:
            try:
                check_size(self.generator.removeprefix(GENERATOR_API), self.generation.size)
            except ValueError as error:
                raise ValueError(f"generation.size {self.generation.size!r}: {error}") from None
        return self

    def _who(self) -> str:
        """What runs, in words, for a message about a setting nothing uses."""
        if not self.needs_images:
            return f"the {self.generator} baseline"
        counted = " and ".join(self.counters)
        return f"the {self.generator} generator with the {counted} detector"

    @property
    def needs_images(self) -> bool:
        return self.generator not in BASELINES

    @property
    def counters(self) -> list[str]:
        """The counters named, the run's own first."""
        return [self.detector] if isinstance(self.detector, str) else list(self.detector)

    def for_counter(self, counter: str) -> NumGenConfig:
        """This config with `counter` alone counting (a linked run's), without the settings
        only the other counters use."""
        hosted = counter.startswith(COUNTER_API)
        defaults = DetectionSettings()
        detection = {
            field: value if (field in ENDPOINT_FIELDS) == hosted and counter != "blobs"
            else getattr(defaults, field)
            for field, value in self.detection.model_dump().items()
        }  # fmt: skip
        generation = self.generation.model_dump()
        if not on_a_device(self.generator, [counter]):
            generation["device"] = "auto"
        values = {**self.model_dump(), "detector": counter, "detection": detection,
                  "generation": generation}  # fmt: skip
        return NumGenConfig.model_validate(values)

    def check_models(self, generator: bool = True) -> None:
        """Raise ModelLoadError when the generator (unless not `generator`: a recount makes no
        image) or a counter can surely not be loaded (see torch_utils.check_available),
        before any image is asked for."""
        if not self.needs_images:
            return
        made_here = self.generator == "synthetic" or self.generator.startswith(GENERATOR_API)
        if generator and self.generator.startswith("callable:"):  # imported: a typo is a line
            load_callable(self.generator.removeprefix("callable:"))
        elif generator and not made_here:
            check_available(self.generator, "model_index.json", "generator")
        for counter in self.counters:
            if grounding_dino(counter):
                check_available(counter, "config.json", "detector")

    @property
    def detector_label(self) -> str:
        """The run's own counter as results name it (`none` for baselines that answer
        directly)."""
        return self.counters[0] if self.needs_images else "none"


def on_a_device(generator: str, counters: list[str]) -> bool:
    """Whether a run of `generator` counted by `counters` loads a model on a device: a
    diffusers generator, or a Grounding DINO counter."""
    made_here = generator in ("synthetic", *BASELINES) or generator.startswith(
        ("callable:", GENERATOR_API)
    )
    return not made_here or any(map(grounding_dino, counters))


def grounding_dino(counter: str) -> bool:
    """Whether a counter is a Grounding DINO model (not `blobs`, not a `vlm:` endpoint)."""
    return counter != "blobs" and not counter.startswith(COUNTER_API)


def _named(value: str, what: str) -> str:
    """A generator's or counter's name, stripped; ValueError when it is blank, or starts with a
    kind numerate does not know (`apx:`), or names no model after its kind (`api:`)."""
    value = value.strip()
    if not value:
        raise ValueError("must name a model, a path or a built-in")
    kind = re.match(r"[A-Za-z][A-Za-z0-9_-]*:", value)
    if kind and kind.group() not in KINDS and not value.startswith(("http:", "https:")):
        known = "api:, callable:" if what == "generator" else "vlm:"
        raise ValueError(f"{kind.group()} is no kind of {what} numerate knows ({known})")
    if kind and kind.group() in (GENERATOR_API, COUNTER_API):
        right = GENERATOR_API if what == "generator" else COUNTER_API
        if kind.group() != right:
            other = "counter" if right == GENERATOR_API else "generator"
            raise ValueError(f"{kind.group()} names a {other}, not a {what}")
        if not re.fullmatch(MODEL_ID, value.removeprefix(right)):
            raise ValueError(f"give the endpoint's model id after {right} (no space or quote)")
    return value


def _unused(
    section: BaseModel, defaults: BaseModel, name: str, who: str, used: dict[str, bool],
    default: bool,
) -> None:  # fmt: skip
    """ValueError naming the first field of `section` changed from its default that what runs
    makes no use of (`used`: field -> whether it is used; any other field: `default`)."""
    for field, value in section.model_dump().items():
        if value != getattr(defaults, field) and not used.get(field, default):
            purpose = (
                "how an endpoint is asked" if field in (*ENDPOINT_FIELDS, *IMAGE_API_FIELDS)
                else "how a diffusers model samples" if name == "generation"
                else "how Grounding DINO finds and filters boxes"
            )  # fmt: skip
            raise ValueError(f"{name}.{field} = {value!r}: {who} makes no use of it (it sets "
                             f"{purpose})")  # fmt: skip


def recount_settings(
    source: str, stored: tuple[str, str] | None, detector: str | list[str],
    detection: DetectionSettings | None,
) -> NumGenConfig:  # fmt: skip
    """The config of a recount of run `source` (`stored`: its config as JSON and its status;
    None: no such run) with the counters `detector`, set by `detection` (default: their
    defaults: a run's own detector settings are not another counter's); ConfigError when it
    cannot be one."""
    if stored is None:
        raise ConfigError(f"no NumGen run {source!r}")
    config, status = json.loads(stored[0]), stored[1]
    if config.get("generator") in BASELINES:
        raise ConfigError(f"run {source} made no image (the {config['generator']} baseline): "
                          "there is nothing to count again")  # fmt: skip
    if status not in ("finished", "degraded"):  # degraded: its images stored, some failed
        raise ConfigError(f"run {source} is {status}: only a finished run's images are all "
                          "stored (run it again to finish it)")  # fmt: skip
    given = detection.model_dump() if detection is not None else {}
    values = {**config, "detector": detector, "detection": given}
    counters = [detector] if isinstance(detector, str) else detector
    if not on_a_device(str(config.get("generator")), counters):  # the source's device was its
        values["generation"] = {**config.get("generation", {}), "device": "auto"}  # counter's
    try:
        return NumGenConfig.model_validate(values)
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, f"recount of {source}")) from None


def calibration_config(
    detector: str, per_number: int = 10, seed: int = 0,
    options: Mapping[str, str] | None = None, **values: object,
) -> NumGenConfig:  # fmt: skip
    """A calibration run of `detector`: synthetic images of dots and triangles, known counts;
    ConfigError naming the option (`options`: {field: option}) or field of a bad value."""
    prompts = {"objects": CALIBRATION_OBJECTS, "per_number": per_number, "seed": seed}
    fixed = {"generator": "synthetic", "detector": detector, "kind": "calibration"}
    try:
        return NumGenConfig.model_validate({**values, **fixed, "prompts": prompts})
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, "calibration", options)) from None


def with_options(
    data: dict[str, Any], generator: str | None, detector: list[str] | None,
    prompts: dict[str, Any], generation: dict[str, Any], images_dir: str | None,
) -> dict[str, Any]:  # fmt: skip
    """A NumGen config's settings (from its YAML, or empty) with the given ones over them
    (None: not given): the synthetic generator by default, counted by the blob counter unless
    a detector is named."""
    if generator is not None:
        data["generator"] = generator
    data.setdefault("generator", "synthetic")
    if detector:
        data["detector"] = detector[0] if len(detector) == 1 else detector
    elif "detector" not in data and data["generator"] == "synthetic":
        data["detector"] = "blobs"
    if str(data["generator"]).startswith(GENERATOR_API) and generation.get("height"):
        # an Images API takes one size field: --size N asks for N x N
        generation = {**generation, "height": None, "width": None,
                      "size": f"{generation['height']}x{generation['width']}"}  # fmt: skip
    for section, values in (("prompts", prompts), ("generation", generation)):
        given = {key: value for key, value in values.items() if value is not None}
        if given:
            data.setdefault(section, {}).update(given)
    if images_dir is not None:
        data["images_dir"] = images_dir
    return data


def parse_numgen_config(data: dict[str, Any], options: dict[str, str]) -> NumGenConfig:
    """The NumGen config of `data` (a YAML file's, with the options given); ConfigError naming
    the option that gave a bad value (`options`: {config field: command-line option}), else
    the config's field."""
    try:
        return NumGenConfig.model_validate(data)
    except ValidationError as error:
        said = describe_validation_error(error, "numgen config", options, yaml=True)
        raise ConfigError(said) from None
