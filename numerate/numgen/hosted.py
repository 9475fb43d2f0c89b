"""Models behind an endpoint: a hosted image generator (`api:<model id>`, the OpenAI Images API)
and a vision-language counter (`vlm:<model id>`, a chat endpoint that takes images).

Here are what a NumGen config says of them and what they give back; numerate.endpoints.images
asks them, through the chat models' endpoint machinery (this package stays below it).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Literal, Protocol

from PIL import Image, UnidentifiedImageError
from pydantic import BaseModel, Field, field_validator

from numerate.kernel.inputs import Real, Whole
from numerate.kernel.names import ENV_NAME
from numerate.numgen.prompts import Prompt

GENERATOR_API = "api:"
COUNTER_API = "vlm:"
KINDS = ("api:", "callable:", "vlm:")
"""The prefixes a generator or detector name may start with (a model id or path holds none)."""

ENDPOINT_FIELDS = (
    "base_url", "api_key_env", "api_key_secret", "concurrency", "timeout_s", "max_retries",
    "throttle_budget_s", "down_after_s",
)  # fmt: skip
"""Settings only a model behind an endpoint uses."""

IMAGE_API_FIELDS = ("size", "quality", "response_format", "send_seed")
"""Settings only the Images API uses."""

SIZES: dict[str, tuple[str, ...]] = {
    "dall-e-2": ("256x256", "512x512", "1024x1024"),
    "dall-e-3": ("1024x1024", "1792x1024", "1024x1792"),
    "gpt-image": ("auto", "1024x1024", "1536x1024", "1024x1536"),
}
"""The sizes OpenAI's own image models accept (matched on the start of the model id); other
servers' models may take any `WIDTHxHEIGHT`."""


class EndpointSettings(BaseModel):
    """Where a model behind an endpoint is, and how it is asked (as for a chat model of a
    sweep: numerate.config.sweep.ModelConfig)."""

    base_url: str | None = None
    """The endpoint's root, e.g. http://127.0.0.1:8000/v1."""
    api_key_env: str | None = Field(None, min_length=1, pattern=ENV_NAME)
    """Environment variable holding the API key; the key itself is never stored."""
    api_key_secret: str | None = None
    """Name of a Prefect Secret block holding the API key (instead of api_key_env)."""
    concurrency: Whole = Field(8, ge=1, le=4096)
    """Most requests in flight at once."""
    timeout_s: Real = Field(300.0, gt=0, le=86_400)
    """Seconds one request may take before it is retried."""
    max_retries: Whole = Field(6, ge=0, le=100)
    """Retries of a request after a timeout, connection error, 5xx or malformed answer (rate
    limits are waited out as the server asks and do not spend them)."""
    throttle_budget_s: Real = Field(600.0, gt=0.0, le=86_400.0)
    """Seconds one request may keep being refused by a rate limit (429, 503) before it ends
    as an error."""
    down_after_s: Real = Field(30.0, gt=0.0, le=86_400.0)
    """Seconds the server may stay unreachable (no answer at all) before the run stops."""


def check_size(model_id: str, size: str) -> str:
    """`size` as the Images API takes it (`auto` or `WIDTHxHEIGHT`), one the model accepts
    when it is one of OpenAI's own; ValueError saying which sizes it takes."""
    for prefix, sizes in SIZES.items():
        if model_id.startswith(prefix) and size not in sizes:
            raise ValueError(f"{model_id} makes images of {', '.join(sizes)}, not {size}")
    return size


class ImageApiSettings(EndpointSettings):
    """The Images API's own request fields."""

    size: str | None = None
    """`WIDTHxHEIGHT` or `auto` (None: the server's default)."""
    quality: str | None = Field(None, pattern=r"^[a-z]{1,16}$")
    """As the model names it: standard or hd (dall-e-3), low, medium, high or auto."""
    response_format: Literal["b64_json", "url"] | None = "b64_json"
    """How the image comes back; None sends no choice (gpt-image models refuse one)."""
    send_seed: bool = True
    """Send each image's seed (`seed`), for servers that take one; OpenAI's own refuse it."""

    @field_validator("size")
    @classmethod
    def _a_size(cls, value: str | None) -> str | None:
        if value is None or value == "auto":
            return value
        match = re.fullmatch(r"([1-9][0-9]{1,4})x([1-9][0-9]{1,4})", value)
        if not match or not all(64 <= int(side) <= 8192 for side in match.groups()):
            raise ValueError("give WIDTHxHEIGHT in pixels (64 to 8192 each), or auto")
        return value


@dataclass(frozen=True)
class Made:
    """What a hosted generator gave for one prompt: an image (a PNG, as checked by
    `checked_png`), or the service's refusal, or the error that left it without one."""

    png: bytes | None = None
    error: str | None = None
    refused: bool = False
    """The service declined the prompt (a content policy): its own outcome, not a failure."""


class HostedGenerator(Protocol):
    """Makes one image at a time through an endpoint, many at once."""

    name: str

    async def make(self, prompt: Prompt) -> Made:
        """The image of `prompt` (its text and its seed)."""
        ...


@dataclass(frozen=True)
class Counted:
    """What a hosted counter said of one image: its count (None when its answer holds none:
    `unparsed`), the answer itself, or the error that left the image uncounted."""

    count: int | None = None
    answer: str | None = None
    error: str | None = None

    @property
    def unparsed(self) -> bool:
        return self.error is None and self.count is None


MAX_SIDE = 8192
"""The widest and tallest image taken from a service (the largest size a config may ask for):
an image of one colour is a few kilobytes at 20,000 x 20,000 pixels, and 1.6 GB decoded."""


def checked_png(raw: bytes) -> bytes:
    """An answer's image as a PNG: the bytes themselves when they are a whole PNG (every
    chunk's CRC checked, nothing decoded: a 1024 x 1024 image is not encoded again, which took
    0.3 s), else the image (JPEG, WebP) converted; ValueError saying why they are no image, or
    none numerate takes (a side above MAX_SIDE pixels)."""
    try:
        with Image.open(io.BytesIO(raw)) as image:
            if max(image.size) > MAX_SIDE:
                raise ValueError(f"an image of {image.width} x {image.height} pixels (at most "
                                 f"{MAX_SIDE} a side)")  # fmt: skip
            if image.format == "PNG":
                image.verify()
                return raw
            image.load()
            buffer = io.BytesIO()
            image.convert("RGB").save(buffer, format="PNG")
            return buffer.getvalue()
    except ValueError:
        raise
    except UnidentifiedImageError:  # its words name the buffer (`<_io.BytesIO object at 0x..>`)
        raise ValueError(f"not an image: no format PIL reads ({len(raw):,} bytes)") from None
    except Exception as error:  # PIL raises many kinds for a corrupt image
        raise ValueError(f"not an image ({type(error).__name__}: {error})"[:300]) from None


class HostedCounter(Protocol):
    """Counts the objects of one image at a time through an endpoint, many at once."""

    name: str

    async def count(self, png: bytes, object_name: str) -> Counted:
        """How many `object_name` the image (a PNG's bytes) holds."""
        ...
