"""Image generation: any diffusers text-to-image pipeline, the synthetic stimulus generator,
or a user's callable (an API generator). Every image has its own seed, so any one image can be
made again alone, whatever batch it was made in."""

from __future__ import annotations

import functools
import hashlib
import importlib
import io
import logging
import re
import struct
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from PIL import Image, PngImagePlugin
from pydantic import ConfigDict, Field, ValidationError, field_validator

from numerate.kernel.confined import confined_path, write_below
from numerate.kernel.errors import ConfigError, NumerateError
from numerate.kernel.inputs import Real, Whole
from numerate.numgen.hosted import ImageApiSettings
from numerate.numgen.prompts import Prompt
from numerate.numgen.synthetic import draw_stimulus, shape_for
from numerate.numgen.torch_utils import (
    DTYPES,
    ModelLoadError,
    cache_only,
    require,
    resolve_device,
    resolve_dtype,
    transformers_quietly,
)

log = logging.getLogger("numerate.numgen")

# Recommended sampling per model family (the model cards' values); matched on the model id.
PRESETS: dict[str, dict[str, float | int]] = {
    "stable-diffusion-2-1": {"steps": 50, "guidance": 7.5, "height": 768, "width": 768},
    "stable-diffusion-3.5-large-turbo": {
        "steps": 4,
        "guidance": 0.0,
        "height": 1024,
        "width": 1024,
    },
    "stable-diffusion-3.5": {"steps": 28, "guidance": 3.5, "height": 1024, "width": 1024},
    "FLUX.1-schnell": {"steps": 4, "guidance": 0.0, "height": 1024, "width": 1024},
    "FLUX.1-dev": {"steps": 50, "guidance": 3.5, "height": 1024, "width": 1024},
}


class ImageError(NumerateError):
    """An image that cannot be read or converted."""


SIDE_MIN, SIDE_MAX, SIDE_STEP = 8, 4096, 8
"""An image side, in pixels: a multiple of SIDE_STEP from SIDE_MIN to SIDE_MAX."""


class GenerationSettings(ImageApiSettings):
    """How a diffusers pipeline samples (None takes the model family's preset, then the
    pipeline's own default), or where an `api:` generator is and what it is asked."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # misspelt: an error

    steps: Whole | None = Field(None, ge=1, le=1000)
    """Denoising steps (`num_inference_steps`)."""
    guidance: Real | None = Field(None, ge=0, le=50)
    """Classifier-free guidance scale (`guidance_scale`)."""
    height: Whole | None = Field(None, ge=SIDE_MIN, le=SIDE_MAX, multiple_of=SIDE_STEP)
    """Image height in pixels."""
    width: Whole | None = Field(None, ge=SIDE_MIN, le=SIDE_MAX, multiple_of=SIDE_STEP)
    """Image width in pixels."""
    device: str = "auto"
    """auto (cuda, else mps, else cpu), cpu, cuda, cuda:N or mps."""
    dtype: str = "auto"
    """auto (bfloat16 on a GPU, float32 on the CPU), float32, float16 or bfloat16."""
    batch_size: Whole | None = Field(None, ge=1, le=256)
    """Images per pipeline call; None sizes batches to the GPU's free memory."""

    @field_validator("device")
    @classmethod
    def _known_device(cls, value: str) -> str:
        """The devices numerate runs on (torch_utils.resolve_device), checked before any work:
        torch knows others (xla, meta, ...) that no NumGen step can use."""
        if not re.fullmatch(r"auto|cpu|mps|cuda(:[0-9]{1,3})?", value):
            raise ValueError("choose auto, cpu, cuda, cuda:N or mps")
        return value

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: str) -> str:

        if value not in DTYPES:
            raise ValueError(f"choose {', '.join(DTYPES)}")
        return value

    def for_model(self, model_id: str) -> dict[str, Any]:
        """The pipeline call's keyword arguments for `model_id`."""
        preset = next((p for key, p in PRESETS.items() if key.lower() in model_id.lower()), {})
        values = {
            "num_inference_steps": self.steps or preset.get("steps"),
            "guidance_scale": self.guidance
            if self.guidance is not None
            else preset.get("guidance"),
            "height": self.height or preset.get("height"),
            "width": self.width or preset.get("width"),
        }
        return {key: value for key, value in values.items() if value is not None}


def check_size(size: int | None) -> None:
    """`--size` (both sides of the image) is one a generator can make; one error naming it."""
    try:
        GenerationSettings(height=size)
    except ValidationError as error:
        message = error.errors()[0]["msg"]  # the first rule broken: -1 was "a multiple of 8"
        raise ConfigError(
            f"--size {size}: {message} (pixels on each side: a multiple of {SIDE_STEP} from "
            f"{SIDE_MIN} to {SIDE_MAX})"
        ) from None


def to_image(value: Any, what: str = "image") -> Image.Image:
    """An RGB PIL image from a path, a PIL image, a numpy array or a torch tensor (HWC or CHW;
    uint8 0..255 or float 0..1).

    Args:
        value: what a generator returned.
        what: how to name it in an error ("image for prompt 'An image with 3 apples'").
    """
    if isinstance(value, Image.Image):
        return value.convert("RGB")
    if isinstance(value, (str, Path, bytes)):
        try:
            with Image.open(io.BytesIO(value) if isinstance(value, bytes) else value) as image:
                image.load()
                return image.convert("RGB")
        except (OSError, ValueError, Image.DecompressionBombError) as error:
            shown = f"{len(value):,} bytes" if isinstance(value, bytes) else repr(str(value))
            raise ImageError(f"{what}: cannot read {shown}: {error}") from None
    if type(value).__module__.startswith("torch"):
        value = value.detach().float().cpu().numpy()
    if isinstance(value, np.ndarray):
        array = value
        if array.ndim == 4 and array.shape[0] == 1:
            array = array[0]
        if array.ndim == 3 and array.shape[0] in (1, 3, 4) and array.shape[-1] not in (1, 3, 4):
            array = np.moveaxis(array, 0, -1)
        if array.ndim == 3 and array.shape[-1] == 1:
            array = array[..., 0]
        if array.ndim not in (2, 3) or (array.ndim == 3 and array.shape[-1] not in (3, 4)):
            raise ImageError(f"{what}: an array of shape {value.shape} is not an image")
        if not np.isfinite(array).all():
            raise ImageError(f"{what}: the array holds NaN or infinite values")
        if array.dtype != np.uint8 and array.min() < 0:  # clipped, it was a black image
            raise ImageError(f"{what}: the array holds negative values (floats are 0..1 or 0..255)")
        if array.dtype != np.uint8:
            scale = 255.0 if array.max() <= 1.0 else 1.0
            array = np.clip(array * scale, 0, 255).round().astype(np.uint8)
        return Image.fromarray(array).convert("RGB")
    raise ImageError(
        f"{what}: a generator must return a path, PIL image, numpy array or torch tensor, "
        f"got {type(value).__name__}"
    )


class ImageGenerator(Protocol):
    """Makes one image per prompt, each from the prompt's own seed."""

    name: str

    def generate(self, prompts: Sequence[Prompt]) -> list[Image.Image]:
        """Images in the order of `prompts`."""
        ...


class SyntheticGenerator:
    """Exactly n separate shapes per image: the weightless calibration stimulus."""

    name = "synthetic"

    def __init__(self, size: int = 256) -> None:
        self.size = size

    def generate(self, prompts: Sequence[Prompt]) -> list[Image.Image]:

        return [
            draw_stimulus(p.target, p.image_seed, self.size, shape_for(p.object)) for p in prompts
        ]


class CallableGenerator:
    """An API generator (DALL-E, a hosted model, an agent): `function(prompt, seed)` returns a
    path, PIL image, numpy array or torch tensor."""

    def __init__(self, function: Callable[[str, int], Any], name: str) -> None:
        self.function = function
        self.name = name

    def generate(self, prompts: Sequence[Prompt]) -> list[Image.Image]:
        return [
            to_image(self.function(p.text, p.image_seed), f"image for {p.text!r}") for p in prompts
        ]


def load_callable(reference: str) -> Callable[[str, int], Any]:
    """`package.module:function` -> the function."""
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"generator callable must be 'module:function', got {reference!r}")
    try:
        function = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"generator callable {reference!r} cannot be loaded: {error}") from None
    if not callable(function):
        raise ValueError(f"generator callable {reference!r} is not callable")
    return function


@functools.cache
def _load_pipeline(model_id: str, device: str, dtype: str) -> Any:
    """The pipeline, loaded once per process for each (model, device, dtype)."""
    diffusers = require("diffusers")
    log.info("loading %s on %s (%s)", model_id, device, dtype)
    verbosity = diffusers.utils.logging.get_verbosity()
    diffusers.utils.logging.set_verbosity_error()
    diffusers.utils.logging.disable_progress_bar()
    try:
        with transformers_quietly():
            pipeline = diffusers.AutoPipelineForText2Image.from_pretrained(
                model_id, dtype=resolve_dtype(dtype, device), local_files_only=cache_only()
            )
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"cannot load generator {model_id!r}: {error}") from None
    finally:
        diffusers.utils.logging.set_verbosity(verbosity)
        diffusers.utils.logging.enable_progress_bar()
    pipeline.set_progress_bar_config(disable=True)
    return pipeline.to(device)


# Activation memory per image per megapixel for SD/SD3/FLUX-class pipelines at 16 bits: a
# conservative figure (attention at 1024 x 1024 dominates); the OOM fallback halves anyway.
BYTES_PER_MEGAPIXEL = 3 * 2**30


def auto_batch_size(device: str, height: int, width: int, limit: int = 32) -> int:
    """Images per call that fit the GPU's free memory (after the weights are loaded); 1 on
    the CPU, where batching gains nothing."""
    import torch

    if not device.startswith("cuda"):
        return 1
    free, _total = torch.cuda.mem_get_info(torch.device(device))
    per_image = BYTES_PER_MEGAPIXEL * height * width / 1e6
    return max(1, min(limit, int(0.8 * free // per_image)))


class DiffusersGenerator:
    """Any diffusers text-to-image pipeline by model id or local path
    (`AutoPipelineForText2Image`): Stable Diffusion 1.x/2.x/XL/3.x, FLUX, ..."""

    def __init__(self, model_id: str, settings: GenerationSettings | None = None) -> None:

        if not model_id or not model_id.strip():
            raise ValueError(f"generator model id is empty: {model_id!r}")
        self.name = model_id
        self.settings = settings or GenerationSettings()
        self.device = resolve_device(self.settings.device)
        resolve_dtype(self.settings.dtype, self.device)  # check before any GPU work
        self.call_args = self.settings.for_model(model_id)
        self.batch_size = self.settings.batch_size

    def generate(self, prompts: Sequence[Prompt]) -> list[Image.Image]:
        import torch

        pipeline = _load_pipeline(self.name, self.device, self.settings.dtype)
        if self.batch_size is None:
            height = self.call_args.get("height") or 1024
            width = self.call_args.get("width") or 1024
            self.batch_size = auto_batch_size(self.device, height, width)
            log.info("batch size %d for %s", self.batch_size, self.name)
        images: list[Image.Image] = []
        start = 0
        while start < len(prompts):
            batch = prompts[start : start + self.batch_size]
            generators = [
                torch.Generator(device="cpu" if self.device == "mps" else self.device).manual_seed(
                    p.image_seed
                )
                for p in batch
            ]
            try:
                output = pipeline(
                    prompt=[p.text for p in batch],
                    generator=generators,
                    output_type="pil",
                    **self.call_args,
                )
            except torch.cuda.OutOfMemoryError:
                if self.batch_size == 1:
                    raise
                torch.cuda.empty_cache()
                self.batch_size = max(1, self.batch_size // 2)
                log.warning("out of GPU memory: batch size now %d", self.batch_size)
                continue
            images.extend(to_image(image) for image in output.images)
            start += len(batch)
        return images


def make_generator(name: str, settings: GenerationSettings | None = None) -> ImageGenerator:
    """`synthetic`, `callable:module:function`, or a diffusers model id / local path (an
    `api:` generator is numerate.endpoints.images.ImagesApiGenerator)."""
    if name == "synthetic":
        return SyntheticGenerator()
    if name.startswith("callable:"):
        reference = name.removeprefix("callable:")
        return CallableGenerator(load_callable(reference), name)
    return DiffusersGenerator(name, settings)


METADATA_KEYS = ("prompt", "prompt_id", "target", "object", "seed", "model")


def save_png(
    image: Image.Image | bytes, path: Path, prompt: Prompt, model: str
) -> tuple[str, tuple[int, int]]:
    """Save `image` (a PIL image, or a whole PNG's bytes: kept as they are, not encoded again)
    as PNG with its prompt, seed and model in text chunks; write to a temporary name and
    rename, so a killed run never leaves half an image behind, and a symbolic link planted at
    its name is replaced, never written through (numerate.kernel.confined). Returns the file's
    SHA-256 and the image's (width, height)."""
    values = {
        "prompt": prompt.text,
        "prompt_id": prompt.prompt_id,
        "target": str(prompt.target),
        "object": prompt.object,
        "seed": str(prompt.image_seed),
        "model": model,
    }
    if isinstance(image, bytes):
        data = with_text(image, values)
        size: tuple[int, int] = struct.unpack(">II", image[16:24])  # IHDR: width, height
    else:
        info = PngImagePlugin.PngInfo()
        for key in METADATA_KEYS:
            info.add_text(key, values[key])
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", pnginfo=info)
        data, size = buffer.getvalue(), image.size
    write_below(path, IMAGE_LEVELS, data)  # made and written through no link
    return hashlib.sha256(data).hexdigest(), size


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def with_text(png: bytes, values: dict[str, str]) -> bytes:
    """A PNG's bytes with `values` as text chunks before its image data (`tEXt` where Latin-1
    holds the text, else `iTXt`, UTF-8, as PIL writes them); a text chunk of the PNG with one
    of their keys is left out (the service's `prompt` would hide numerate's)."""
    if not png.startswith(PNG_SIGNATURE):
        raise ImageError("not a PNG (no signature)")
    kept: list[bytes] = []
    at, ours = len(PNG_SIGNATURE), None
    while at + 8 <= len(png):
        length, kind = struct.unpack(">I", png[at : at + 4])[0], png[at + 4 : at + 8]
        chunk = png[at : at + 12 + length]
        keyword = png[at + 8 : at + 8 + min(length, 80)].partition(b"\0")[0]
        if kind == b"IDAT" and ours is None:
            ours = len(kept)
        if not (kind in (b"tEXt", b"iTXt", b"zTXt") and keyword.decode("latin-1") in values):
            kept.append(chunk)
        at += 12 + length
    if ours is None or not kept or kept[0][4:8] != b"IHDR":
        raise ImageError("not a PNG (no header chunk first, or no image data)")
    chunks = []
    for key, text in values.items():
        try:
            kind, data = b"tEXt", key.encode("latin-1") + b"\0" + text.encode("latin-1")
        except UnicodeEncodeError:
            kind, data = b"iTXt", key.encode("latin-1") + b"\0\0\0\0\0" + text.encode()
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        chunks.append(struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc))
    return PNG_SIGNATURE + b"".join(kept[:ours] + chunks + kept[ours:])


MAX_IMAGE_BYTES = 256 * 2**20
"""The largest image file numerate reads back (a 8192 x 8192 PNG of noise is about 200 MB)."""


def stored_image(path: str | Path, limit: int = MAX_IMAGE_BYTES, head: bool = False) -> bytes:
    """The bytes of an image file numerate saved (its first `limit` with `head`), reached
    without following a link at its name: one planted there (to /etc/passwd, or to a file the
    run would send to a vision model) is refused (LeadsOutside), never read; ValueError above
    `limit` bytes, OSError when it cannot be read."""
    folder, name = confined_path(path, IMAGE_LEVELS)
    return folder.read_bytes(name, limit, head)


def is_whole_png(data: bytes) -> bool:
    """Whether a stored PNG is whole: each of its chunks there, its checksum right (PIL's
    `verify`, which decodes no pixel). A copy cut short keeps the header and text chunks
    that say which prompt it is of, and was read back on every run, never made again."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
    except (OSError, SyntaxError, ValueError):  # PIL's "Truncated File Read", "broken PNG"
        return False
    return True


IMAGE_LEVELS = 3
"""An image's path below the images folder the user named: `images/<generator>/<file>`
(numerate.numgen.batches.image_folder); numerate reaches each of them through no link."""


def read_png_metadata(source: Path | bytes) -> tuple[dict[str, str], tuple[int, int]]:
    """The text chunks `save_png` wrote, and the image's (width, height), of a PNG file or its
    first bytes (the chunks lie before its image data). ValueError for an image PIL refuses
    to open as a decompression bomb (30,000 x 30,000 pixels planted in the images folder
    failed the whole run, naming no file)."""
    try:
        with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as image:
            meta = {key: str(image.info[key]) for key in METADATA_KEYS if key in image.info}
            return meta, image.size
    except Image.DecompressionBombError as error:
        raise ValueError(str(error)) from None
