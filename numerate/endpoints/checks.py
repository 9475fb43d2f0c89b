"""Checking endpoints before anything is sent: reachable, accepting the key, serving the model."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

from numerate.config.sweep import ModelConfig
from numerate.endpoints.keys import EndpointError, api_key, key_source
from numerate.endpoints.limits import (
    bound_body,
    key_hint,
    read_json,
    refusal_cause,
    refuses_key,
)
from numerate.endpoints.retries import AnswerTooLarge, describe_error
from numerate.kernel.credentials import redact
from numerate.kernel.errors import ConfigError, shorten


async def check_endpoint(model: ModelConfig) -> str | None:
    """Fail early and clearly when an endpoint is unreachable or refuses the key.

    Returns a warning (the endpoint does not list the model id) or None. An endpoint whose
    model listing answers anything but a list (an error status, an HTML page) is asked one
    tiny chat request instead: it is usable only when that request is answered, and when it
    is not, the chat endpoint's answer is the cause shown (a LiteLLM proxy without a database
    answers a listing with "No connected db." whatever the key). The listing is read with
    httpx, not the OpenAI client, whose import (0.3 s) a fully cached run never needs.
    Credentials are redacted from every message (numerate.kernel.credentials).
    """
    if model.is_baseline:
        return None
    key = await api_key(model)
    where = f"model {model.name!r} at {redact(model.base_url or '')}"
    try:
        listed = await list_models(model, key, where)
        if listed is None:  # no usable model listing here (LiteLLM: 400; transformers: 500)
            import openai

            client = openai.AsyncOpenAI(base_url=model.base_url, api_key=key, max_retries=1,
                                        timeout=check_timeout_s(model))  # fmt: skip
            try:
                await probe(client, model, where)
            finally:
                await client.close()
            return None
    except EndpointError as error:
        raise EndpointError(redact(str(error), token_shapes=True)) from None
    if listed and model.model_id not in listed:
        return f"{where} does not list {model.model_id!r} (it lists: {', '.join(listed[:10])})"
    return None


CHECK_TIMEOUT_S = 15.0
"""The longest one check request waits (less when the model's own `timeout_s` is less)."""


def check_timeout_s(model: ModelConfig) -> float:
    """How long one check request waits: CHECK_TIMEOUT_S, or the model's `timeout_s` when
    shorter (a config that asks for 3 s waited 15 s twice)."""
    return min(CHECK_TIMEOUT_S, model.timeout_s)


async def list_models(model: ModelConfig, key: str, where: str) -> list[str] | None:
    """The model ids `GET {base_url}/models` lists; None when it answers no such list (an
    error status included: the chat request that follows says why). EndpointError when the
    endpoint cannot be reached (after one retry), or redirects (to where: base_url is wrong)."""
    import httpx

    url = f"{(model.base_url or '').rstrip('/')}/models"
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}
    # plain http has no TLS to verify: no certificate store to load (30 ms) for a local server
    https = url.startswith("https:")
    timeout = check_timeout_s(model)
    bounded = {"response": [bound_body]}  # a list of any size: read within the answers' bound
    async with httpx.AsyncClient(timeout=timeout, verify=https, event_hooks=bounded) as client:
        for attempt in (1, 2):
            try:
                response = await client.get(url, headers=headers)
                break
            except (AnswerTooLarge, httpx.DecodingError):  # no list to read: the chat request
                return None  # that follows says what the endpoint answers
            except httpx.TransportError as error:
                if attempt == 2:
                    detail = str(error) or (
                        f"no answer within {timeout:g} s, twice"
                        if isinstance(error, httpx.TimeoutException)
                        else "no details"
                    )
                    raise EndpointError(
                        f"cannot reach {where}: {type(error).__name__}: {detail}"
                    ) from None
                await asyncio.sleep(0.5)
    if response.is_redirect:  # followed, a POST would come back a GET (and then a 404/405)
        target = shorten(response.headers.get("location", ""), 200)
        raise EndpointError(
            f"{where} redirects {url} to {target!r} (HTTP {response.status_code}): give "
            "base_url as the address it points to (numerate follows no redirect)"
        )
    try:
        data = response.json()["data"] if response.is_success else None
        return [str(m["id"]) for m in data] if isinstance(data, list) else None
    except (ValueError, KeyError, TypeError):
        return None


async def check_endpoints(
    models: Sequence[ModelConfig], slow: Callable[[str], object] = lambda said: None
) -> tuple[list[str], dict[str, str]]:
    """`check_endpoint` for each model: the warnings, and the models that cannot be asked at
    all (unreachable, or refusing the key) with why. `slow` is told, in a line, of a check
    that has had no answer for SLOW_CHECK_S (a silent endpoint is waited for twice)."""
    warnings, unusable = [], {}
    for model in models:
        check = asyncio.ensure_future(check_endpoint(model))
        done, _ = await asyncio.wait({check}, timeout=SLOW_CHECK_S)
        if not done:
            most = 2 * check_timeout_s(model)
            slow(
                f"model {model.name!r} at {redact(model.base_url or '')} has not answered the "
                f"check yet (waiting up to {most:g} s; timeout_s bounds it)"
            )
        try:
            warning = await check
        except EndpointError as error:
            unusable[model.name] = str(error)
            continue
        if warning:
            warnings.append(warning)
    return warnings, unusable


SLOW_CHECK_S = 2.0
"""How long an endpoint check goes unanswered before the command says it waits."""


def refused_credentials(model: ModelConfig) -> str:
    """What an endpoint that refuses a request was given to authenticate it, in words: the
    API key's source, the user and password of the base URL, or nothing."""
    has_key = bool(model.api_key_env or model.api_key_secret)
    in_url = bool(model.base_url and urlsplit(model.base_url).username is not None)
    if has_key and in_url:
        return f"the API key from {key_source(model)} and the user and password in base_url"
    if in_url:
        return "the user and password in base_url"
    if has_key:
        return f"the API key from {key_source(model)}"
    return "the request without an API key (set api_key_env)"


async def probe(client: Any, model: ModelConfig, where: str) -> None:
    """One chat request of one token: raises EndpointError unless the endpoint answers it."""
    import openai

    try:
        request = {"model": model.model_id, "messages": [{"role": "user", "content": "Say OK."}],
                   "max_tokens": 1}  # fmt: skip
        body = read_json(await client.post("/chat/completions", body=request, cast_to=bytes))
    except openai.APIStatusError as error:
        detail = describe_error(error)
        if error.status_code == 429:  # busy, not refusing: the run paces itself (Retry-After)
            return
        if refuses_key(error.status_code, detail):
            cause = f"refused {refused_credentials(model)}: {detail}"
            raise EndpointError(f"{where} {cause}{key_hint(detail)}") from None
        raise EndpointError(f"{where}: {refusal_cause(error.status_code, detail)}") from None
    except openai.APIConnectionError as error:
        reason = error.__cause__ or error
        raise EndpointError(f"cannot reach {where}: {type(reason).__name__}: {reason}") from None
    except Exception as error:
        detail = describe_error(error)
        raise EndpointError(f"{where} is not an OpenAI-compatible endpoint ({detail})") from None
    if not isinstance(body, dict) or not body.get("choices"):
        raise EndpointError(
            f"{where} is not an OpenAI-compatible endpoint (its answer is not a chat completion)"
        )


async def check_concurrency_limit(model: ModelConfig) -> None:
    """A model's global concurrency limit must exist and hold its `concurrency` slots
    (a smaller limit could never be acquired: the run would wait forever)."""
    if not model.concurrency_limit:
        return
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    async with get_client() as client:
        try:
            limit = await client.read_global_concurrency_limit_by_name(model.concurrency_limit)
        except ObjectNotFound:
            raise ConfigError(
                f"model {model.name!r}: no global concurrency limit named "
                f"{model.concurrency_limit!r} (create it: prefect gcl create "
                f"{shlex.quote(model.concurrency_limit)} --limit {model.concurrency})"
            ) from None
    if limit.limit < model.concurrency:
        raise ConfigError(
            f"model {model.name!r}: concurrency {model.concurrency} exceeds the "
            f"{limit.limit} slots of limit {model.concurrency_limit!r}"
        )
