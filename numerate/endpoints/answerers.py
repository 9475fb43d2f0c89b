"""Answerers: an OpenAI-compatible endpoint (with retries, rate limits and the breaker), and the
built-in baselines."""

from __future__ import annotations

import asyncio
import functools
import json
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from numerate.config.sweep import ModelConfig
from numerate.endpoints.limits import (
    EndpointClient,
    http_package,
    model_breaker,
    model_limits,
    read_json,
    shared_client,
)
from numerate.endpoints.retries import (
    MAX_THROTTLE_WAIT_S,
    NotJson,
    TimedOut,
    backoff_s,
    describe_error,
    is_retryable,
    is_throttle,
    retry_after_s,
)
from numerate.grading.judging import Completion
from numerate.kernel import stopping
from numerate.kernel.answers import cut_answer
from numerate.kernel.credentials import redact
from numerate.kernel.inputs import valid_text
from numerate.kernel.progress import current as current_progress
from numerate.manifolds import registry
from numerate.manifolds.grading import reasoning_part
from numerate.planning.plan import PlannedCase


class HasError(Protocol):
    @property
    def error(self) -> str | None: ...


Answer = TypeVar("Answer", bound=HasError)
"""What one request gives back: an answer, or why there is none (`error`)."""


class Answerer(Protocol):
    """Something that answers one request of a case: an endpoint, or a built-in baseline."""

    async def answer(
        self, planned: PlannedCase, messages: list[dict[str, str]], request_id: str,
        sample: int = 0,
    ) -> Completion:  # fmt: skip
        """The answer to one request (an error Completion when it failed for good)."""
        ...


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
        """The model's answer to one request of a case (see `ask`)."""
        sampling = self.model.sampling.request_fields(sample)
        return await self.ask(
            lambda: chat_body(
                self.client, model=self.model.model_id, messages=messages, **sampling
            ),
            lambda response, attempts, latency: read_completion(
                response, request_id, attempts, latency, sample
            ),
            lambda attempts, error: Completion(
                request_id, None, attempts=attempts, sample=sample, error=error
            ),
        )

    async def ask(
        self,
        send: Callable[[], Awaitable[Any]],
        read: Callable[[Any, int, float], Answer],
        failed: Callable[[int, str], Answer],
        declined: Callable[[BaseException, int, str], Answer | None] = lambda *_: None,
    ) -> Answer:
        """Ask until answered: `send()` a request, `read(response, attempts, latency)` its
        answer (one with an `error` is asked again, as a malformed body), `failed(attempts,
        why)` when it fails for good. A slot of the model's adaptive limit per attempt (none
        while waiting to retry); rate limits lower the limit and are waited out within
        `throttle_budget_s`, other failures spend `max_retries`. `declined(error, attempts,
        why)` turns an error that is the service's answer (a content policy's refusal) into
        one: it neither trips the breaker nor is asked again."""
        tries = attempts = 0
        throttled_since: float | None = None
        while True:
            async with self.limit:
                # After a stop signal nothing more is sent (a slot freed as the signal came
                # sent one more request before the stop reached the flow): this request
                # records nothing, as an unsent one never did, and waits to be cut short
                # with the run (the resumed run sends it).
                if stopping.asked():
                    await asyncio.get_running_loop().create_future()
                if self.breaker.tripped:  # while this one waited for a slot: sent no more
                    return failed(attempts, self._stopped(attempts))
                attempts += 1  # (those waiting went on sending for 45 s after a trip)
                sent_at = time.monotonic()
                try:  # the whole answer within timeout_s: a body that trickles in too
                    async with asyncio.timeout(self.model.timeout_s):
                        response = await send()
                except TimeoutError:
                    error: Exception | None = TimedOut(self.model.timeout_s)
                except Exception as caught:
                    error = caught
                else:
                    error = None
            if error is None:
                self.limit.succeeded()
                self.breaker.success()
                answer = read(response, attempts, time.monotonic() - sent_at)
                tries += 1
                if answer.error is None or tries > self.model.max_retries:
                    return answer
                # a malformed answer: a proxy's error page, a cut body; ask again
                current_progress().retried()
                await self.breaker.pause(backoff_s(tries, self.retry_base_s, self.rng))
                continue
            detail = describe_error(error)  # credentials redacted
            refusal = declined(error, attempts, detail)
            if refusal is not None:
                self.limit.succeeded()  # an answer: the service is up and serving
                return refusal
            self.breaker.failure(error, detail)
            if is_throttle(error):
                self.limit.throttled()
                current_progress().retried()
                throttled_since = throttled_since or sent_at
                waited = time.monotonic() - throttled_since
                left = self.model.throttle_budget_s - waited
                if left >= 0 and not self.breaker.tripped:  # never past the budget
                    await self.breaker.pause(
                        min(self.throttle_delay_s(error, attempts), left + 0.1)
                    )
                    continue
                return failed(attempts, f"{detail} (still refused after {waited:.0f} s)")
            tries += 1
            if not is_retryable(error) or tries > self.model.max_retries or self.breaker.tripped:
                return failed(attempts, detail)
            current_progress().retried()
            await self.breaker.pause(self.retry_delay_s(error, tries))
            if self.breaker.tripped:
                return failed(attempts, self._stopped(attempts))

    def _stopped(self, attempts: int) -> str:
        """Why the tripped breaker stopped a request: "not sent" when no attempt of it was (a
        re-run sends it), else "stopped"."""
        return f"{'stopped' if attempts else 'not sent'}: {self.breaker.cause}"

    def retry_delay_s(self, error: Exception, tries: int) -> float:
        """Wait before a retry: what the server asked for (with jitter), else backoff."""
        asked = retry_after_s(getattr(getattr(error, "response", None), "headers", None))
        if asked is not None:  # jitter: no retries in lockstep; never longer than a request
            return min(asked * self.rng.uniform(1.0, 1.5), self.model.timeout_s)
        return backoff_s(tries, self.retry_base_s, self.rng)

    def throttle_delay_s(self, error: Exception, attempts: int) -> float:
        """Wait after a rate limit: as asked (with jitter); without Retry-After a short wait,
        since the lowered limit already slows the model down."""
        asked = retry_after_s(getattr(getattr(error, "response", None), "headers", None))
        if asked is not None:
            return asked * self.rng.uniform(1.0, 1.5)
        return min(MAX_THROTTLE_WAIT_S, backoff_s(attempts, 0.1 * self.retry_base_s, self.rng))


async def chat_body(client: EndpointClient, **request: Any) -> Any:
    """The JSON body of an endpoint's answer to one chat completions request (`request`: its
    fields), as it was sent.

    The request is posted as it is, with the openai client's HTTP client and headers, and
    its failures are the openai client's errors (an HTTP status: APIStatusError with what the
    server said; no answer in time: APITimeoutError; anything else on the way, a body past
    MAX_BODY_BYTES included: APIConnectionError), which numerate.endpoints.retries reads.
    The client's own request machinery (it rewrites the fields against its types, then makes
    the answer into its pydantic objects) cost as much again as the HTTP exchange itself
    (docs/benchmarks.md, "Requests posted as they are, and the long checkpoints
    (2026-11-28)"). A body that is not JSON (an HTML page) raises ValueError, one nested
    beyond reading RecursionError: malformed answers."""
    import openai

    http = client.http
    content = json.dumps(request, separators=(",", ":")).encode()
    sent = http.build_request("POST", client.chat_url, headers=client.headers, content=content)
    try:
        response = await http.send(sent)
    except Exception as error:
        if isinstance(error, http_package(sent).TimeoutException):
            raise openai.APITimeoutError(request=sent) from error
        raise openai.APIConnectionError(request=sent) from error
    if not response.is_success:
        raise status_error(response)
    try:
        return read_json(response.content)
    except ValueError:  # UnicodeDecodeError included
        content_type = response.headers.get("content-type", "").partition(";")[0].strip()
        raise NotJson(content_type, response.content) from None


def status_error(response: Any) -> Exception:
    """The openai client's error for an answer with an error status: its message, and the
    server's error object as its `body` (`{"error": {...}}` unwrapped), as the client makes
    them."""
    import openai

    text = response.text.strip()
    try:
        body: object = read_json(text)
    except (ValueError, RecursionError):
        body, message = text, text or f"Error code: {response.status_code}"
    else:
        message = f"Error code: {response.status_code} - {body}"
    error = body.get("error", body) if isinstance(body, dict) else body
    return openai.APIStatusError(message, response=response, body=error)


def _field(value: object, name: str) -> Any:
    """`value[name]` when `value` is a JSON object (a dict), else None."""
    return value.get(name) if isinstance(value, dict) else None


FINISH_REASON_CHARS = 64
"""The longest finish reason stored ("stop", "length", "content_filter", ...)."""


def is_a_reason(text: str) -> bool:
    """Whether an endpoint's finish reason can be one: a short printable word, not any text
    (a server's 100,000 characters and escape codes were stored as they came, and the run's
    shards could then not be ingested)."""
    return 0 < len(text) <= FINISH_REASON_CHARS and text.isprintable()


def read_completion(
    body: Any, request_id: str, attempts: int, latency_s: float, sample: int
) -> Completion:
    """The Completion of a chat completions answer (its JSON body, `chat_body`); a body that
    is not one (no choices, a choice without a message, content that is neither text nor
    content parts: any other JSON) is an `error` with its cause (never stored as an answer).
    A message that holds no text (`content: null`, "", white space, parts without text) is
    the model's answer all the same: an empty one, which grading finds no answer in
    (`unparsed`, or `truncated` when cut at max_tokens), not asked again. A credential the
    answer quotes (a server that echoes the key) is redacted; an answer longer than
    numerate.kernel.answers.MAX_ANSWER_CHARS is cut (`received_chars`)."""
    choices = _field(body, "choices")
    message = _field(choices[0], "message") if isinstance(choices, list) and choices else None
    content = _field(message, "content")
    malformed = _malformed(choices, message, content)
    if malformed is not None:
        return Completion(
            request_id, None, attempts=attempts, error=f"malformed answer: {malformed}",
            sample=sample,
        )  # fmt: skip
    finish_reason = _field(choices[0], "finish_reason")
    if not isinstance(finish_reason, str) or not is_a_reason(finish_reason):
        finish_reason = None  # not a reason a grader knows: unknown
    usage = _field(body, "usage")
    tokens: dict[str, Any] = {
        "prompt_tokens": token_count(_field(usage, "prompt_tokens")),
        "completion_tokens": token_count(_field(usage, "completion_tokens")),
        "reasoning_tokens": token_count(
            _field(_field(usage, "completion_tokens_details"), "reasoning_tokens")
        ),
    }
    text = message_text(content)
    refusal = _field(message, "refusal")  # OpenAI's: the model declined, in words
    if not text.strip() and isinstance(refusal, str):
        text = valid_text(refusal)
    sent = next((field for field in (_field(message, name) for name in REASONING_FIELDS)
                 if isinstance(field, str) and field.strip()), None)  # fmt: skip
    reasoning = sent if sent is not None else reasoning_part(text)
    if reasoning is not None:  # bounded and redacted as an answer is
        tokens["reasoning"], tokens["reasoning_chars"] = cut_answer(redact(valid_text(reasoning)))
    text, cut_from = cut_answer(redact(text))  # bounded: numerate.kernel.answers
    return Completion(
        request_id, text, finish_reason=finish_reason, latency_s=latency_s,
        attempts=attempts, sample=sample, received_chars=cut_from, **tokens,
    )  # fmt: skip


REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where reasoning models send their reasoning beside the answer (DeepSeek and vLLM, then
OpenRouter and Ollama)."""


def _malformed(choices: object, message: object, content: object) -> str | None:
    """Why a body is no chat completion (its `choices`, the first one's `message` and that
    message's `content`), or None when it is one: content that is neither text nor content
    parts, or a text part whose text is not text (`{"type": "text", "text": 7}`), is as
    malformed as no choices, not a model's empty answer."""
    if not isinstance(choices, list):
        return "not a chat completion"
    if not choices:
        return "no choices"
    if not isinstance(message, dict):
        return "a choice without a message"
    if content is not None and not isinstance(content, (str, list)):
        return f"content of type {type(content).__name__}, not text"
    if isinstance(content, list) and any(
        _field(part, "type") == "text" and not isinstance(_field(part, "text"), str)
        for part in content
    ):
        return "a text part whose text is not text"
    return None


def message_text(content: str | list[Any] | None) -> str:
    """A message's answer text: the string itself, or the text parts of a list of content
    parts (`[{"type": "text", "text": ...}]`, as some servers send) joined; "" for none
    (`content: null`, parts without text). A lone surrogate ("\\ud800") is no character."""
    if isinstance(content, list):
        parts = (_field(part, "text") for part in content)
        content = "".join(text for text in parts if isinstance(text, str))
    return valid_text(content or "")


def token_count(reported: object) -> int | None:
    """A token count as a server reported it, when it is one: a whole number from 0 to
    MAX_TOKEN_COUNT; None for anything else (a string, a float, 1e30, a negative number)."""
    if isinstance(reported, int) and not isinstance(reported, bool):
        return reported if 0 <= reported <= MAX_TOKEN_COUNT else None
    return None


MAX_TOKEN_COUNT = 2**31 - 1
"""The largest token count stored (the column's range); a server that reports more is not
counting tokens."""


def storable(completion: Completion) -> bool:
    """Whether an answer may be stored for reuse: every answer the model gave (an empty one
    too), never an error or a malformed body."""
    return completion.error is None


class BaselineAnswerer:
    """`baseline:oracle` answers with the target; `baseline:random` guesses uniformly over the
    manifold's response space, seeded by the request so the guess is reproducible;
    `baseline:heuristic` plays the manifold's trivial strategy (no reasoning)."""

    def __init__(self, model: ModelConfig) -> None:
        self.kind = model.model_id.removeprefix("baseline:")

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
