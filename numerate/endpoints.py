"""Sending cases to models: OpenAI-compatible endpoints and built-in baselines.

- One request per distinct request hash (endpoint, model id, revision, messages, sampling,
  sample); a stored answer stands in for it only as the model's cache policy allows.
- At most `concurrency` requests per model are being answered at once, and at most
  2 x `concurrency` are in flight: sent, or answered but not yet committed to the store.
  A process killed at any moment loses only those; they are sent again on resume.
- Timeouts, connection errors, 408/409/429 and 5xx are retried with exponential backoff and
  jitter (a Retry-After header wins); other 4xx are not. The last failure becomes an `error`.
- API keys come from the environment and are never stored or logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import email.utils
import functools
import json
import os
import random
import re
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

from kernel.errors import ConfigError
from manifolds import registry
from numerate.config import ModelConfig
from numerate.grading import Completion
from numerate.pacing import AdaptiveLimit
from numerate.plan import PlannedCase, messages_for, request_hasher
from numerate.progress import current as current_progress
from numerate.store import Store, now

RETRYABLE_STATUS = frozenset({408, 409, 429})
MAX_BACKOFF_S = 60.0
MAX_RETRY_AFTER_S = 300.0
MAX_THROTTLE_WAIT_S = 2.0


class EndpointError(ConfigError):
    """An endpoint that cannot be used at all: unreachable, or it refuses the key."""


async def api_key(model: ModelConfig) -> str:
    """The model's API key: from its Prefect Secret block or environment variable ("EMPTY"
    when none is configured: local servers ignore it)."""
    if model.api_key_secret:
        from prefect.blocks.system import Secret

        try:
            secret: Any = await Secret.aload(model.api_key_secret)
        except ValueError:
            raise ConfigError(
                f"model {model.name!r}: no Prefect Secret block named {model.api_key_secret!r}"
            ) from None
        return str(secret.get())
    if not model.api_key_env:
        return "EMPTY"
    key = os.environ.get(model.api_key_env)
    if not key:
        raise ConfigError(
            f"model {model.name!r}: environment variable {model.api_key_env} is not set "
            "(it should hold the API key)"
        )
    return key


def retry_after_s(headers: Any) -> float | None:
    """Seconds a server asked us to wait (Retry-After / retry-after-ms), if it said."""
    if headers is None:
        return None
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return min(MAX_RETRY_AFTER_S, max(0.0, float(millis) / 1000))
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(value)))
    except ValueError:
        pass
    try:  # an HTTP date
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None  # unreadable: fall back to our own backoff
    return min(MAX_RETRY_AFTER_S, max(0.0, when.timestamp() - time.time()))


def backoff_s(attempt: int, base_s: float, rng: random.Random) -> float:
    """Exponential backoff with jitter: base * 2^(attempt-1), capped, times 0.5..1.5."""
    return min(MAX_BACKOFF_S, base_s * 2 ** (attempt - 1)) * rng.uniform(0.5, 1.5)


def is_retryable(error: BaseException) -> bool:
    """Whether a failed request can succeed if sent again."""
    import openai

    if isinstance(error, openai.APIConnectionError):  # includes timeouts
        return True
    if isinstance(error, openai.APIStatusError):
        return error.status_code in RETRYABLE_STATUS or error.status_code >= 500
    # a body that is not what it claims (cut JSON, an unexpected shape): a glitch
    return isinstance(error, openai.APIResponseValidationError | ValueError)


def describe_error(error: BaseException) -> str:
    """A one-line description of a request failure (never contains the API key)."""
    import openai

    if isinstance(error, openai.APITimeoutError):
        return "timeout: no answer in time"
    if isinstance(error, openai.APIConnectionError):
        cause = error.__cause__ or error
        return f"connection error: {type(cause).__name__}: {cause}".strip()
    if isinstance(error, openai.APIStatusError):
        return f"HTTP {error.status_code}: {error.message}"[:500]
    if isinstance(error, openai.APIResponseValidationError | ValueError):
        return f"malformed answer: {type(error).__name__}: {error}"[:500]
    return f"{type(error).__name__}: {error}"[:500]


_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+")
_KEY_LIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}")


def redact(text: str, secret: str | None = None) -> str:
    """`text` (an error a server sent back) without the API key: the configured key, bearer
    tokens and key-shaped strings (sk-...) are replaced by [redacted]."""
    if secret and len(secret) >= 4 and secret != "EMPTY":
        text = text.replace(secret, "[redacted]")
    text = _BEARER.sub(r"\1[redacted]", text)
    return _KEY_LIKE.sub(lambda match: f"{match.group(1)}-[redacted]", text)


_clients: dict[tuple[int, str | None, str | None, float], Any] = {}


async def shared_client(model: ModelConfig) -> Any:
    """One AsyncOpenAI client per endpoint and event loop, so that the batches of a run reuse
    its connections (a client belongs to the loop it first ran on)."""
    import openai

    loop = asyncio.get_running_loop()
    key = (id(loop), model.base_url, model.api_key_env or model.api_key_secret, model.timeout_s)
    client = _clients.get(key)
    if client is None:
        client = openai.AsyncOpenAI(
            base_url=model.base_url,
            api_key=await api_key(model),
            max_retries=0,  # retries are ours: we honour Retry-After and record attempts
            timeout=model.timeout_s,
        )
        _clients[key] = client
    return client


_limits: dict[tuple[int, str], tuple[AdaptiveLimit, asyncio.Semaphore]] = {}


def model_limits(model: ModelConfig) -> tuple[AdaptiveLimit, asyncio.Semaphore]:
    """The model's two bounds, shared by every batch of this event loop: requests being
    answered (an adaptive limit under `concurrency`), and requests in flight: sent, waiting to
    be retried, or answered but not committed (2 x `concurrency`). Waiters are served first
    come, first served, so an earlier batch keeps its turn while a later one fills the slots
    it frees."""
    key = (id(asyncio.get_running_loop()), model.name)
    if key not in _limits:
        limit = AdaptiveLimit(model.concurrency)
        _limits[key] = (limit, asyncio.Semaphore(2 * model.concurrency))
        if not model.is_baseline:  # a baseline answers at once: it has no limit to show
            current_progress().watch_limit(model.name, limit)
    return _limits[key]


async def close_clients() -> None:
    """Close the clients and drop the limits of the running event loop (end of a sweep)."""
    loop_id = id(asyncio.get_running_loop())
    for key in [k for k in _clients if k[0] == loop_id]:
        await _clients.pop(key).close()
    for limit_key in [k for k in _limits if k[0] == loop_id]:
        del _limits[limit_key]
    for breaker_key in [k for k in _breakers if k[0] == loop_id]:
        del _breakers[breaker_key]


class Answerer(Protocol):
    """Something that answers one request of a case: an endpoint, or a built-in baseline."""

    async def answer(
        self, planned: PlannedCase, messages: list[dict[str, str]], request_id: str,
        sample: int = 0,
    ) -> Completion:  # fmt: skip
        """The answer to one request (an error Completion when it failed for good)."""
        ...


REFUSED_STATUS = frozenset({400, 401, 403, 404, 422})
"""Answers that say the endpoint will not serve these requests at all (when nothing succeeds)."""


class Breaker:
    """Stops asking a model that cannot answer, within seconds rather than hours.

    It trips when the first `breaker_after` answers of the model are all refusals (HTTP 400,
    401, 403, 404, 422: a wrong key, an unknown model, a proxy that refuses every request), or
    when the server has given no answer at all for `down_after_s` seconds (connection refused
    or reset; a slow answer is not "down"). Once tripped, requests not yet sent stay unsent
    and retries stop: a re-run after the fix sends only those and the failed ones.
    """

    def __init__(self, model: ModelConfig) -> None:
        self.model = model
        self.successes = 0
        self.refusals = 0
        self.unreachable_since: float | None = None
        self.cause: str | None = None

    @property
    def tripped(self) -> bool:
        return self.cause is not None

    def success(self) -> None:
        self.successes += 1
        self.unreachable_since = None

    def failure(self, error: BaseException, detail: str) -> None:
        """Count a failed attempt (`detail`: its description, secrets redacted); trip when the
        model is clearly unusable."""
        import openai

        if isinstance(error, openai.APIStatusError) and error.status_code in REFUSED_STATUS:
            self.refusals += 1
            if self.successes == 0 and self.refusals >= self.model.breaker_after:
                self.cause = refusal_cause(error.status_code, detail)
        elif isinstance(error, openai.APIConnectionError) and not isinstance(
            error, openai.APITimeoutError
        ):
            now = time.monotonic()
            if self.unreachable_since is None:
                self.unreachable_since = now
            elif now - self.unreachable_since >= self.model.down_after_s:
                self.cause = f"endpoint unreachable for {self.model.down_after_s:.0f} s ({detail})"


def refusal_cause(status: int, detail: str) -> str:
    """What a refusal says about the endpoint, in one line."""
    text = detail.lower()
    if status in (401, 403) or "auth" in text or "api key" in text:
        return f"endpoint refused the key ({detail})"
    if status == 404:
        return f"endpoint does not serve this model ({detail})"
    return f"endpoint refused every request ({detail})"


_breakers: dict[tuple[int, str], Breaker] = {}


def model_breaker(model: ModelConfig) -> Breaker:
    """The model's breaker, shared by every batch of this event loop."""
    key = (id(asyncio.get_running_loop()), model.name)
    if key not in _breakers:
        _breakers[key] = Breaker(model)
    return _breakers[key]


def stopped_cause(model: ModelConfig) -> str | None:
    """Why the model was stopped in this event loop, if it was."""
    breaker = _breakers.get((id(asyncio.get_running_loop()), model.name))
    return breaker.cause if breaker else None


class EndpointAnswerer:
    """Sends requests to an OpenAI-compatible chat completions endpoint."""

    def __init__(self, model: ModelConfig, client: Any, retry_base_s: float = 1.0) -> None:
        self.model = model
        self.retry_base_s = retry_base_s
        self.rng = random.Random()
        self.client = client
        self.breaker = model_breaker(model)
        self.limit = model_limits(model)[0]

    async def answer(self, planned: PlannedCase, messages: list[dict[str, str]],
                     request_id: str, sample: int = 0) -> Completion:  # fmt: skip
        """Ask until answered: a slot of the model's adaptive limit per attempt (none while
        waiting to retry); rate limits lower the limit and are waited out within
        `throttle_budget_s`, other failures spend `max_retries`."""
        sampling = self.model.sampling.request_fields(sample)
        tries = attempts = 0
        throttled_since: float | None = None
        while True:
            attempts += 1
            async with self.limit:
                sent_at = time.monotonic()
                try:
                    response = await self.client.chat.completions.create(
                        model=self.model.model, messages=messages, **sampling
                    )
                except Exception as caught:
                    error: Exception | None = caught
                else:
                    error = None
            if error is None:
                self.limit.succeeded()
                self.breaker.success()
                latency = time.monotonic() - sent_at
                completion = read_completion(response, request_id, attempts, latency, sample)
                tries += 1
                if completion.error is None or tries > self.model.max_retries:
                    return completion
                # a malformed or empty answer: a proxy's error page, a cut body; ask again
                await asyncio.sleep(backoff_s(tries, self.retry_base_s, self.rng))
                continue
            detail = redact(describe_error(error), self.client.api_key)
            self.breaker.failure(error, detail)
            if is_throttle(error):
                self.limit.throttled()
                current_progress().retried()
                throttled_since = throttled_since or sent_at
                waited = time.monotonic() - throttled_since
                if waited <= self.model.throttle_budget_s and not self.breaker.tripped:
                    await asyncio.sleep(self.throttle_delay_s(error, attempts))
                    continue
                refused = f"{detail} (still refused after {waited:.0f} s)"
                return Completion(request_id, None, attempts=attempts, sample=sample, error=refused)
            tries += 1
            if not is_retryable(error) or tries > self.model.max_retries or self.breaker.tripped:
                return Completion(request_id, None, attempts=attempts, error=detail, sample=sample)
            current_progress().retried()
            await asyncio.sleep(self.retry_delay_s(error, tries))
            if self.breaker.tripped:
                return Completion(request_id, None, attempts=attempts, sample=sample,
                                  error=f"stopped: {self.breaker.cause}")  # fmt: skip

    def retry_delay_s(self, error: Exception, tries: int) -> float:
        """Wait before a retry: what the server asked for (with jitter), else backoff."""
        asked = retry_after_s(getattr(getattr(error, "response", None), "headers", None))
        if asked is not None:
            return asked * self.rng.uniform(1.0, 1.5)  # jitter: no retries in lockstep
        return backoff_s(tries, self.retry_base_s, self.rng)

    def throttle_delay_s(self, error: Exception, attempts: int) -> float:
        """Wait after a rate limit: as asked (with jitter); without Retry-After a short wait,
        since the lowered limit already slows the model down."""
        asked = retry_after_s(getattr(getattr(error, "response", None), "headers", None))
        if asked is not None:
            return asked * self.rng.uniform(1.0, 1.5)
        return min(MAX_THROTTLE_WAIT_S, backoff_s(attempts, 0.1 * self.retry_base_s, self.rng))


def is_throttle(error: BaseException) -> bool:
    """A rate limit (429) or an overloaded server (503): too many requests, not a failure."""
    import openai

    return isinstance(error, openai.APIStatusError) and error.status_code in (429, 503)


def read_completion(
    response: Any, request_id: str, attempts: int, latency_s: float, sample: int
) -> Completion:
    """The Completion of a chat completions answer; a body that is not one (an HTML page, no
    choices) or that holds no text is an `error` with its cause (never stored as an answer)."""
    choices = getattr(response, "choices", None)
    if not choices:
        cause = "no choices" if isinstance(choices, list) else "not a chat completion"
        return Completion(
            request_id, None, attempts=attempts, error=f"malformed answer: {cause}", sample=sample
        )
    choice = choices[0]
    message = getattr(choice, "message", None)
    content = getattr(message, "content", None)
    finish_reason = getattr(choice, "finish_reason", None)
    usage = getattr(response, "usage", None)
    tokens = {
        "prompt_tokens": getattr(usage, "prompt_tokens", None),
        "completion_tokens": getattr(usage, "completion_tokens", None),
    }
    if not isinstance(content, str) or not content.strip():
        if finish_reason == "length":  # all of max_tokens spent before any answer text
            return Completion(
                request_id, "", finish_reason=finish_reason, latency_s=latency_s,
                attempts=attempts, sample=sample, **tokens,
            )  # fmt: skip
        return Completion(
            request_id, None, finish_reason=finish_reason, attempts=attempts, sample=sample,
            error=f"empty answer: no content (finish_reason {finish_reason!r})",
        )  # fmt: skip
    return Completion(
        request_id, content, finish_reason=finish_reason, latency_s=latency_s,
        attempts=attempts, sample=sample, **tokens,
    )  # fmt: skip


def storable(completion: Completion) -> bool:
    """Whether an answer may be stored for reuse: only complete ones (text received; never an
    error, a malformed body or an empty answer)."""
    return completion.error is None and bool(completion.text)


class BaselineAnswerer:
    """`baseline:oracle` answers with the target; `baseline:random` guesses uniformly over the
    manifold's response space, seeded by the request so the guess is reproducible;
    `baseline:heuristic` plays the manifold's trivial strategy (no reasoning)."""

    def __init__(self, model: ModelConfig) -> None:
        self.kind = model.model.removeprefix("baseline:")

    async def answer(self, planned: PlannedCase, messages: list[dict[str, str]],
                     request_id: str, sample: int = 0) -> Completion:  # fmt: skip
        started = time.monotonic()
        spec = registry.get(planned.manifold)
        if self.kind == "oracle":
            text = f"Answer: {planned.target}"
        elif self.kind == "heuristic":
            prior = heuristic_prior(planned.manifold, planned.params, planned.seed)
            text = f"Answer: {spec.heuristic(planned.case, prior)}"
        else:
            rng = random.Random(request_id)
            text = f"Answer: {spec.guess(planned.case, rng)}"
        return Completion(
            request_id, text, finish_reason="stop", completion_tokens=len(text.split()),
            prompt_tokens=sum(len(m["content"].split()) for m in messages),
            latency_s=time.monotonic() - started, sample=sample,
        )  # fmt: skip


@functools.lru_cache(maxsize=1024)
def heuristic_prior(manifold: str, params_json: str, seed: int) -> Any:
    """What the trivial strategy knows of a grid point (computed once per point)."""
    spec = registry.get(manifold)
    return spec.heuristic_prior_of(spec.params(**json.loads(params_json)), seed)


async def answerer_for(model: ModelConfig, retry_base_s: float = 1.0) -> Answerer:
    if model.is_baseline:
        return BaselineAnswerer(model)
    return EndpointAnswerer(model, await shared_client(model), retry_base_s)


async def check_endpoint(model: ModelConfig) -> str | None:
    """Fail early and clearly when an endpoint is unreachable or refuses the key.

    Returns a warning (the endpoint does not list the model id) or None. An endpoint whose
    model listing answers anything but a list (an error status, an HTML page) is asked one
    tiny chat request instead: it is usable only when that request is answered. The listing
    is read with httpx, not the OpenAI client, whose import (0.3 s) a fully cached run never
    needs.
    """
    if model.is_baseline:
        return None
    key = await api_key(model)
    where = f"model {model.name!r} at {model.base_url}"
    listed = await list_models(model, key, where)
    if listed is None:  # no usable model listing here (LiteLLM: 400; transformers: 500)
        import openai

        client = openai.AsyncOpenAI(base_url=model.base_url, api_key=key, max_retries=1,
                                    timeout=CHECK_TIMEOUT_S)  # fmt: skip
        try:
            await probe(client, model, where, key)
        finally:
            await client.close()
        return None
    if listed and model.model not in listed:
        return f"{where} does not list {model.model!r} (it lists: {', '.join(listed[:10])})"
    return None


CHECK_TIMEOUT_S = 15.0


async def list_models(model: ModelConfig, key: str, where: str) -> list[str] | None:
    """The model ids `GET {base_url}/models` lists; None when it answers no such list.
    EndpointError when the endpoint cannot be reached (after one retry) or refuses the key."""
    import httpx

    url = f"{(model.base_url or '').rstrip('/')}/models"
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json"}
    # plain http has no TLS to verify: no certificate store to load (30 ms) for a local server
    https = url.startswith("https:")
    async with httpx.AsyncClient(timeout=CHECK_TIMEOUT_S, verify=https) as client:
        for attempt in (1, 2):
            try:
                response = await client.get(url, headers=headers)
                break
            except httpx.TransportError as error:
                if attempt == 2:
                    detail = str(error) or (
                        f"no answer within {CHECK_TIMEOUT_S:g} s"
                        if isinstance(error, httpx.TimeoutException)
                        else "no details"
                    )
                    raise EndpointError(
                        f"cannot reach {where}: {type(error).__name__}: {detail}"
                    ) from None
                await asyncio.sleep(0.5)
    if response.status_code in (401, 403):
        raise EndpointError(
            f"{where} refused the API key from {key_source(model)}: HTTP {response.status_code}"
        )
    try:
        data = response.json()["data"] if response.is_success else None
        return [str(m["id"]) for m in data] if isinstance(data, list) else None
    except (ValueError, KeyError, TypeError):
        return None


async def check_endpoints(
    models: Sequence[ModelConfig],
) -> tuple[list[str], dict[str, str]]:
    """`check_endpoint` for each model: the warnings, and the models that cannot be asked at
    all (unreachable, or refusing the key) with why."""
    warnings, unusable = [], {}
    for model in models:
        try:
            warning = await check_endpoint(model)
        except EndpointError as error:
            unusable[model.name] = str(error)
            continue
        if warning:
            warnings.append(warning)
    return warnings, unusable


def key_source(model: ModelConfig) -> str:
    """Where the model's key comes from, for messages (never the key itself)."""
    if model.api_key_secret:
        return f"Secret block {model.api_key_secret!r}"
    if model.api_key_env:
        return f"${model.api_key_env}"
    return "no key (api_key_env unset)"


async def probe(client: Any, model: ModelConfig, where: str, key: str) -> None:
    """One chat request of one token: raises EndpointError unless the endpoint answers it."""
    import openai

    try:
        response = await client.chat.completions.create(
            model=model.model, messages=[{"role": "user", "content": "Say OK."}], max_tokens=1
        )
    except openai.APIStatusError as error:
        detail = redact(describe_error(error), key)
        raise EndpointError(f"{where}: {refusal_cause(error.status_code, detail)}") from None
    except openai.APIConnectionError as error:
        cause = error.__cause__ or error
        raise EndpointError(f"cannot reach {where}: {type(cause).__name__}: {cause}") from None
    except Exception as error:
        detail = redact(describe_error(error), key)
        raise EndpointError(f"{where} is not an OpenAI-compatible endpoint ({detail})") from None
    if not getattr(response, "choices", None):
        raise EndpointError(
            f"{where} is not an OpenAI-compatible endpoint (its answer is not a chat completion)"
        )


class CompletionWriter:
    """Commits finished requests to the store in batches, off the event loop.

    A DuckDB commit costs one to three milliseconds of CPU, held under the GIL, whatever its
    size: committing every answer on its own stalled the event loop by about 15% at 700
    requests/s. Rows are gathered for up to `interval_s` (or until `max_rows` wait) and
    committed together. `write` returns once its row is committed.
    """

    def __init__(self, store: Store, max_rows: int, interval_s: float = 0.05) -> None:
        self.store = store
        self.max_rows = max_rows
        self.interval_s = interval_s
        self.pending: list[tuple[dict[str, Any], asyncio.Future[None]]] = []
        self.wake = asyncio.Event()
        self.full = asyncio.Event()
        self.closing = False
        self.task = asyncio.create_task(self._run())

    async def write(self, row: dict[str, Any]) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.pending.append((row, future))
        self.wake.set()
        if len(self.pending) >= self.max_rows:
            self.full.set()
        await future

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            if not self.closing:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.full.wait(), self.interval_s)
            self.wake.clear()
            self.full.clear()
            batch, self.pending = self.pending, []
            if batch:
                try:
                    await asyncio.to_thread(self.store.put_completions, [r for r, _ in batch])
                except Exception as error:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(error)
                else:
                    for _, future in batch:
                        if not future.done():
                            future.set_result(None)
            if self.closing and not self.pending:
                return

    async def close(self) -> None:
        self.closing = True
        self.wake.set()
        self.full.set()
        await self.task


Requests = dict[str, tuple[PlannedCase, list[dict[str, str]], int]]
"""Request hash -> (the case, its messages, the sample index)."""


def plan_requests(
    model: ModelConfig, planned: Sequence[PlannedCase]
) -> tuple[dict[tuple[str, int], str], Requests]:
    """The requests the cases need: every (case id, sample) -> its request hash, and each
    distinct request once (identical cases share one)."""
    by_answer: dict[tuple[str, int], str] = {}
    requests: Requests = {}
    hashers = [request_hasher(model, sample) for sample in range(model.sampling.samples)]
    for item in planned:
        messages = messages_for(model, item)
        for sample, hasher in enumerate(hashers):
            key = hasher(messages)
            by_answer[item.case_id, sample] = key
            requests.setdefault(key, (item, messages, sample))
    return by_answer, requests


async def stored_answers(
    model: ModelConfig, store: Store, requests: Requests, run_id: str
) -> dict[str, Completion]:
    """The stored answers the model's cache policy lets stand in for these requests:
    `resume` those of this run, `reuse` those of any run, `off` none."""
    if model.cache == "off":
        return {}
    only_run = run_id if model.cache == "resume" else None
    stored = await asyncio.to_thread(store.get_completions, list(requests), only_run)
    return {
        key: Completion(
            key,
            row["text"],
            finish_reason=row["finish_reason"],
            prompt_tokens=row["prompt_tokens"],
            completion_tokens=row["completion_tokens"],
            latency_s=row["latency_s"],
            attempts=row["attempts"],
            fetched_by=row["run_id"],
            sample=requests[key][2],
        )
        for key, row in stored.items()
    }


async def answer_cases(
    model: ModelConfig,
    planned: Sequence[PlannedCase],
    store: Store,
    run_id: str,
    retry_base_s: float = 1.0,
) -> dict[tuple[str, int], Completion]:
    """Answers for the cases, keyed by (case id, sample): `model.sampling.samples` per case.

    A stored answer stands in for a request only as the model's `cache` policy allows (see
    `stored_answers`): a resumed run sends only what it lacks. The rest are asked of the
    model, and complete answers are stored.
    """
    progress = current_progress()
    by_answer, requests = plan_requests(model, planned)
    results = await stored_answers(model, store, requests, run_id)
    answers_per_request = Counter(by_answer.values())
    earlier = sum(answers_per_request[k] for k, c in results.items() if c.fetched_by != run_id)
    progress.advance(sum(answers_per_request[k] for k in results), cached=earlier)

    pending = [key for key in requests if key not in results]
    if not pending:  # all stored: no client (nor its import) is needed
        return {answer: results[key] for answer, key in by_answer.items()}
    answerer = await answerer_for(model, retry_base_s)
    writer = CompletionWriter(store, max_rows=model.concurrency)
    # in flight = sent, or answered and waiting for the writer's next commit: at most
    # 2 x concurrency per model, which is all a SIGKILL can make us send again
    _, unsaved = model_limits(model)
    breaker = model_breaker(model)

    async def ask(key: str) -> None:
        item, messages, sample = requests[key]
        async with unsaved:
            if breaker.tripped:  # never sent: a re-run sends it
                completion = Completion(key, None, attempts=0, sample=sample,
                                        error=f"not sent: {breaker.cause}")  # fmt: skip
            else:
                completion = await answerer.answer(item, messages, key, sample)
            if completion.error is None:
                completion = dataclasses.replace(completion, fetched_by=run_id)
            if storable(completion):
                await writer.write(completion_row(model, completion, run_id))
        results[key] = completion
        weight = answers_per_request[key]
        progress.advance(weight, errors=weight if completion.error is not None else 0)

    try:
        await asyncio.gather(*(ask(key) for key in pending))
    finally:
        await writer.close()
    return {answer: results[key] for answer, key in by_answer.items()}


def completion_row(model: ModelConfig, completion: Completion, run_id: str) -> dict[str, Any]:
    """The `completions` row of an answer this run received."""
    return {
        "request_hash": completion.request_hash,
        "run_id": run_id,
        "base_url": model.base_url,
        "model_id": model.model,
        "revision": model.revision,
        "sample_index": completion.sample,
        "text": completion.text,
        "finish_reason": completion.finish_reason,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "latency_s": completion.latency_s,
        "attempts": completion.attempts,
        "created_at": now(),
    }
