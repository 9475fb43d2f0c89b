"""NumGen's models behind an endpoint, asked through the chat models' machinery (one shared
client per endpoint, the adaptive limit, retries honouring Retry-After, the timeout, the
breaker, redaction of keys):

- `ImagesApiGenerator`: `api:<model id>`, `POST {base_url}/images/generations`, one image per
  prompt with the prompt's seed; `b64_json` or `url` answers. A content-policy refusal is the
  service's answer (`Made.refused`): it does not trip the breaker and is not asked again.
- `VisionCounter`: `vlm:<model id>`, a chat completion with the image as a data URL; the count
  is read with the Object Counting manifold's answer extraction (no number: unparsed, not 0).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import ipaddress
import math
import os
from typing import Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from numerate.config.sweep import ModelConfig
from numerate.endpoints.answerers import EndpointAnswerer, chat_body, read_completion
from numerate.endpoints.limits import bound_body, shared_client
from numerate.endpoints.retries import AnswerTooLarge, too_large
from numerate.grading.judging import Completion
from numerate.kernel.errors import ConfigError, describe_validation_error
from numerate.manifolds.objects import parse_answer
from numerate.numgen.config import NumGenConfig
from numerate.numgen.generation import PNG_SIGNATURE
from numerate.numgen.hosted import (
    COUNTER_API,
    ENDPOINT_FIELDS,
    GENERATOR_API,
    Counted,
    EndpointSettings,
    Made,
    checked_png,
)
from numerate.numgen.prompts import Prompt

POLICY_CODES = frozenset({"content_policy_violation", "moderation_blocked", "content_filter"})
"""Error codes with which image services decline a prompt (OpenAI, Azure OpenAI)."""

QUESTION = (
    "How many {object} are there in this image? Count them one by one, then give the number "
    "on the last line as 'Answer: N'."
)
"""What a vision-language counter is asked of each image."""


def hosted_model(name: str, section: str, settings: EndpointSettings) -> ModelConfig:
    """The chat machinery's model for a NumGen generator (`section` "generation") or counter
    ("detection") named `name` (`api:<id>`, `vlm:<id>`); ConfigError naming the field."""
    model_id = name.removeprefix(GENERATOR_API).removeprefix(COUNTER_API)
    values = {field: getattr(settings, field) for field in ENDPOINT_FIELDS}
    try:
        return ModelConfig.model_validate({"name": name, "model": model_id, **values})
    except ValidationError as error:
        options = {field: f"{section}.{field}" for field in ENDPOINT_FIELDS}
        raise ConfigError(
            describe_validation_error(error, f"numgen config, {section}", options)
        ) from None


def hosted_models(config: NumGenConfig, generator: bool = True) -> list[ModelConfig]:
    """The endpoint models a NumGen run asks: its `api:` generator (unless not `generator`: a
    recount makes no image) and its `vlm:` counters."""
    models = []
    if generator and config.needs_images and config.generator.startswith(GENERATOR_API):
        models.append(hosted_model(config.generator, "generation", config.generation))
    for counter in config.counters if config.needs_images else []:
        if counter.startswith(COUNTER_API):
            models.append(hosted_model(counter, "detection", config.detection))
    return models


def check_hosted(config: NumGenConfig, generator: bool = True) -> None:
    """ConfigError before anything is written when an endpoint model of the run (`generator`:
    its generator too) cannot be asked: a base URL that is no URL, a key variable that is not
    set (a Secret block is read in the flow, from Prefect's server)."""
    for model in hosted_models(config, generator):
        if model.api_key_env and not os.environ.get(model.api_key_env, "").strip():
            state = "is empty" if model.api_key_env in os.environ else "is not set"
            raise ConfigError(
                f"model {model.name!r}: environment variable {model.api_key_env} {state} (it "
                "should hold the API key)"
            )


def is_policy_refusal(error: BaseException) -> bool:
    """Whether an error is an image service declining the prompt (HTTP 400 with a content
    policy's code)."""
    import openai

    if not isinstance(error, openai.APIStatusError) or error.status_code != 400:
        return False
    body = error.body if isinstance(error.body, dict) else {}
    codes = {getattr(error, "code", None), body.get("code"), body.get("type")}
    return bool(codes & POLICY_CODES)


def image_url_problem(url: str, base_url: str) -> str | None:
    """Why an answer's image `url` is not fetched, or None: only http(s), no plain http from
    an https endpoint, and no loopback, private, link-local or other special address unless
    it is the endpoint's own host (a hostile service must not make numerate reach a machine
    of its network or a cloud's metadata service). A host name is not resolved: the address
    check stops only literal addresses and `localhost`."""
    parts, base = urlsplit(url), urlsplit(base_url)
    if parts.scheme not in ("http", "https"):
        return f"image url of scheme {parts.scheme!r} (http or https only)"
    if parts.scheme == "http" and base.scheme == "https":
        return "a plain http image url from an https endpoint"
    host = (parts.hostname or "").lower()
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        special = host in ("", "localhost") or host.endswith(".localhost")
    else:
        special = not address.is_global
    if special and host != (base.hostname or "").lower():
        return f"image url on a local or private address ({host or 'none'}), not the endpoint's"
    return None


class AtEndpoint:
    """A NumGen model asked at an endpoint (`name`, its settings in config section
    `section`): its chat-machinery model, and its answerer, made when it first asks (its
    client is the running event loop's: numerate.endpoints.limits.shared_client)."""

    def __init__(self, name: str, section: str, settings: EndpointSettings) -> None:
        self.name = name
        self.model = hosted_model(name, section, settings)
        self._answerer: EndpointAnswerer | None = None

    async def answerer(self) -> EndpointAnswerer:
        if self._answerer is None:
            self._answerer = EndpointAnswerer(self.model, await shared_client(self.model))
        return self._answerer


class ImagesApiGenerator(AtEndpoint):
    """An OpenAI-compatible Images API model (`api:<model id>`)."""

    def __init__(self, config: NumGenConfig) -> None:
        super().__init__(config.generator, "generation", config.generation)
        self.settings = config.generation

    def request(self, prompt: Prompt) -> dict[str, Any]:
        """The request's fields (one image: each prompt has its own seed)."""
        fields: dict[str, Any] = {"model": self.model.model_id, "prompt": prompt.text, "n": 1}
        for name in ("size", "quality", "response_format"):
            value = getattr(self.settings, name)
            if value is not None:
                fields[name] = value
        if self.settings.send_seed:
            fields["extra_body"] = {"seed": prompt.image_seed}
        return fields

    async def make(self, prompt: Prompt) -> Made:
        answerer = await self.answerer()
        fields = self.request(prompt)

        async def send() -> Made:
            """The answer's image, checked (off the event loop), or why it is none."""
            response = await answerer.client.sdk.images.generate(**fields)
            data = getattr(response, "data", None)
            first = data[0] if isinstance(data, list) and data else None
            encoded, url = getattr(first, "b64_json", None), getattr(first, "url", None)
            try:
                if isinstance(encoded, str) and encoded:
                    raw = base64.b64decode(encoded, validate=True)
                elif isinstance(url, str) and url:
                    raw = await self.fetch(url)
                else:
                    return Made(error="malformed answer: no b64_json or url of an image")
                if raw.startswith(PNG_SIGNATURE):  # its CRCs checked: here, quicker than a thread
                    return Made(png=checked_png(raw))
                return Made(png=await asyncio.to_thread(checked_png, raw))  # decoded, encoded
            except ValueError as error:  # binascii.Error is one
                return Made(error=f"malformed answer: {error}"[:300])

        return await answerer.ask(
            send,
            lambda made, attempts, latency: made,  # one with an error is asked again
            lambda attempts, error: Made(error=error),
            lambda error, attempts, detail: (
                Made(error=f"refused: {detail}", refused=True) if is_policy_refusal(error) else None
            ),
        )

    async def fetch(self, url: str) -> bytes:
        """The image at an answer's `url` (see `image_url_problem`; no redirect followed; its
        body bounded as an answer's is); ValueError, asked again, when it cannot be fetched;
        AnswerTooLarge, not asked again, when it is larger than that bound."""
        import openai

        problem = image_url_problem(url, self.model.base_url or "")
        if problem is not None:
            raise ValueError(problem)
        timeout = self.model.timeout_s
        async with openai.DefaultAsyncHttpxClient(
            timeout=timeout, follow_redirects=False, event_hooks={"response": [bound_body]}
        ) as http:
            try:
                response = await http.get(url)
                body = bytes(await response.aread())
            except Exception as error:  # any failure of the fetch: asked again
                if (large := too_large(error)) is not None:  # made, and paid: not asked again
                    raise AnswerTooLarge(large.limit, "the image at the answer's url") from None
                raise ValueError(f"cannot fetch the image's url: {type(error).__name__}") from None
        if response.status_code != 200:
            raise ValueError(f"the image's url answered HTTP {response.status_code}")
        return body


def read_count(text: str) -> int | None:
    """The count a counter's answer gives: a whole number from 0 up (the Object Counting
    manifold's extraction), else None (unparsed; a numeral too long to be a count reads as
    infinity, and is none)."""
    value = parse_answer(text)
    if value is None or not math.isfinite(value) or value < 0 or value != int(value):
        return None
    return int(value)


class VisionCounter(AtEndpoint):
    """A vision-language model at a chat endpoint (`vlm:<model id>`) asked how many objects
    an image holds."""

    def __init__(self, name: str, settings: EndpointSettings) -> None:
        super().__init__(name, "detection", settings)

    async def count(self, png: bytes, object_name: str) -> Counted:
        answerer = await self.answerer()
        url = "data:image/png;base64," + base64.b64encode(png).decode()  # as stored: no encoding
        content = [
            {"type": "text", "text": QUESTION.format(object=object_name)},
            {"type": "image_url", "image_url": {"url": url}},
        ]
        messages = [{"role": "user", "content": content}]
        completion = await answerer.ask(
            lambda: chat_body(answerer.client, model=self.model.model_id, messages=messages),
            lambda response, attempts, latency: counted_answer(
                read_completion(response, self.name, attempts, latency, 0)
            ),
            lambda attempts, error: Completion(self.name, None, attempts=attempts, error=error),
        )
        if completion.error is not None or completion.text is None:
            return Counted(error=completion.error or "empty answer")
        return Counted(read_count(completion.text), answer=completion.text)


def counted_answer(completion: Completion) -> Completion:
    """A counter's answer, where one that holds no text is an error, asked again (and one the
    run's error rate counts): the counter is the instrument, not the model measured, so its
    silence is a failure to count, not an answer (a sweep grades a model's empty answer)."""
    if completion.error is None and not (completion.text or "").strip():
        why = f"empty answer (finish_reason {completion.finish_reason!r})"
        return dataclasses.replace(completion, text=None, error=why)
    return completion
