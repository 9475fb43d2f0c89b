"""What a model shares across the batches of one event loop: its client, its in-flight bounds
and its breaker (which stops asking a model that cannot answer)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import json
import time
import zlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from numerate.config.sweep import ModelConfig
from numerate.endpoints.keys import api_key
from numerate.endpoints.pacing import AdaptiveLimit
from numerate.endpoints.retries import AnswerTooLarge, too_large
from numerate.kernel.progress import current as current_progress

_clients: dict[tuple[int, str | None, str | None, float], EndpointClient] = {}


@dataclass(frozen=True, slots=True)
class EndpointClient:
    """What an endpoint is asked with in one event loop: the openai client (`sdk`: images),
    and the HTTP client beneath it (`http`: the client's own, bounded by `bound_body`), with
    which chat requests are posted as they are, with the client's headers
    (numerate.endpoints.answerers.chat_body)."""

    sdk: Any
    http: Any
    chat_url: str
    headers: dict[str, str]

    async def close(self) -> None:
        await self.sdk.close()  # its HTTP client with it


async def shared_client(model: ModelConfig) -> EndpointClient:
    """One client per endpoint and event loop, so that the batches of a run reuse its
    connections (a client belongs to the loop it first ran on)."""
    import openai

    loop = asyncio.get_running_loop()
    key = (id(loop), model.base_url, model.api_key_env or model.api_key_secret, model.timeout_s)
    client = _clients.get(key)
    if client is None:
        http = openai.DefaultAsyncHttpxClient(  # it follows redirects by default: answers
            timeout=model.timeout_s,  # from elsewhere, stored as the endpoint's, and requests
            event_hooks={"response": [bound_body]},  # sent on to any address (169.254.x)
            follow_redirects=False,
        )
        sdk = openai.AsyncOpenAI(
            base_url=model.base_url,
            api_key=await api_key(model),
            max_retries=0,  # retries are ours: we honour Retry-After and record attempts
            timeout=model.timeout_s,
            http_client=http,
        )
        headers = {name: value for name, value in {**sdk.default_headers,
                   **sdk.auth_headers}.items() if isinstance(value, str)}  # fmt: skip
        client = EndpointClient(sdk, http, f"{sdk.base_url}chat/completions", headers)
        _clients[key] = client
    return client


MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest answer body read from an endpoint: a body that says it is larger, or grows
larger while read, is not read on (an error, `answer body larger than 64 MiB`); one below is
read, and its text stored cut to numerate.kernel.answers.MAX_ANSWER_CHARS."""


MAX_INT_DIGITS = 100
"""Digits of the longest integer of an endpoint's JSON read as an int; a longer one is read as
a float (infinite past 308 digits): no count numerate reads has so many."""


def read_json(data: bytes | str) -> Any:
    """An endpoint's JSON body. An integer of any length is a number: Python refuses to read
    one of more than 4,300 digits as an int, and a body whose usage held one was called "not
    JSON" and its answer thrown away (its token count is then no count: stored NULL)."""
    return json.loads(data, parse_int=_number)


def _number(text: str) -> int | float:
    return int(text) if len(text) <= MAX_INT_DIGITS else float(text)


async def bound_body(response: Any) -> None:
    """An httpx response hook: the body of `response` is read up to MAX_BODY_BYTES, then
    AnswerTooLarge (before it is read, when its Content-Length says so). A compressed body
    (gzip, deflate: what the clients ask for) is unpacked here, within the same bound: the
    bytes on the wire said nothing of its size (300 KB of gzip unpacked to 300 MiB)."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        await response.aclose()
        raise AnswerTooLarge(MAX_BODY_BYTES)
    package = http_package(response)
    encoding = response.headers.get("content-encoding", "").strip().lower()
    inflate = None
    if encoding not in ("", "identity"):
        if encoding not in _WINDOW_BITS:
            await response.aclose()
            raise package.DecodingError(f"an answer encoded as {encoding!r:.40}, never asked for")
        inflate = zlib.decompressobj(_WINDOW_BITS[encoding])
        del response.headers["content-encoding"]  # unpacked here, not again by the package
    response.stream = _bounded_stream(package)(response.stream, MAX_BODY_BYTES, inflate)


_WINDOW_BITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS,
                "deflate": zlib.MAX_WBITS}  # fmt: skip
"""How zlib reads each encoding an HTTP client asks for (`Accept-Encoding: gzip, deflate`)."""


def http_package(value: Any) -> Any:
    """The HTTP package an HTTP object (a request, a response) belongs to: `httpx2`, which
    openai 3 uses, or `httpx`."""
    return importlib.import_module(type(value).__module__.partition(".")[0])


@functools.cache
def _bounded_stream(package: Any) -> type[BoundedStream]:
    """BoundedStream as a byte stream of an HTTP package (`http_package`), whose responses
    read only its own AsyncByteStream."""
    return type("BoundedStream", (BoundedStream, package.AsyncByteStream), {"package": package})


class BoundedStream:
    """An async byte stream that ends in AnswerTooLarge past `limit` bytes, unpacked by
    `inflate` (a zlib decompressor) first when given."""

    package: Any
    """The HTTP package whose stream it is (`_bounded_stream`): its DecodingError."""

    def __init__(self, stream: Any, limit: int, inflate: Any = None) -> None:
        self.stream = stream
        self.limit = limit
        self.inflate = inflate

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self.stream:
            if self.inflate is not None:
                chunk = self._unpacked(chunk, self.limit - read)
            read += len(chunk)
            if read > self.limit:
                raise AnswerTooLarge(self.limit)
            yield chunk
        if self.inflate is not None:
            rest = self._unpacked(b"", self.limit - read, end=True)
            if read + len(rest) > self.limit:
                raise AnswerTooLarge(self.limit)
            yield rest

    def _unpacked(self, chunk: bytes, room: int, end: bool = False) -> bytes:
        """What `chunk` unpacks to, never more than `room` + 1 bytes at once (then the bound
        is passed: AnswerTooLarge)."""
        try:
            data = self.inflate.decompress(self.inflate.unconsumed_tail + chunk, room + 1)
            if self.inflate.unconsumed_tail:  # more left than the room: past the bound
                raise AnswerTooLarge(self.limit)
            return data + (self.inflate.flush() if end else b"")
        except zlib.error as error:
            raise self.package.DecodingError(f"an answer's body: {error}") from None

    async def aclose(self) -> None:
        await self.stream.aclose()


_ModelKey = tuple[int, str, str | None, str, str | None]


def _model_key(model: ModelConfig) -> _ModelKey:
    """Whose limits and breaker a model shares in the running event loop: those of the same
    name, endpoint, model id and key (two sweeps in one process naming different endpoints,
    or keys, alike shared them: one's refused key stopped the other's model)."""
    key = model.api_key_env or model.api_key_secret
    return (id(asyncio.get_running_loop()), model.name, model.base_url, model.model_id, key)


_limits: dict[_ModelKey, tuple[AdaptiveLimit, asyncio.Semaphore]] = {}


def model_limits(model: ModelConfig) -> tuple[AdaptiveLimit, asyncio.Semaphore]:
    """The model's two bounds, shared by every batch of this event loop: requests being
    answered (an adaptive limit under `concurrency`), and requests in flight: sent, waiting to
    be retried, or answered but not committed (2 x `concurrency`). Waiters are served first
    come, first served, so an earlier batch keeps its turn while a later one fills the slots
    it frees."""
    key = _model_key(model)
    if key not in _limits:
        limit = AdaptiveLimit(model.concurrency)
        _limits[key] = (limit, asyncio.Semaphore(2 * model.concurrency))
        if not model.is_baseline:  # a baseline answers at once: it has no limit to show
            current_progress().watch_limit(key[1:], limit)  # whose, in any loop
    return _limits[key]


_runs: dict[int, int] = {}
"""How many runs that ask endpoints are under way in each event loop (by its id)."""


@contextlib.asynccontextmanager
async def endpoints_in_use() -> AsyncIterator[None]:
    """A run's use of the running event loop's clients, limits and breakers, made as its
    batches first ask: the last run of the loop to end closes and drops them (two sweeps at
    once in one process: the first to end closed the other's client under its requests)."""
    loop_id = id(asyncio.get_running_loop())
    _runs[loop_id] = _runs.get(loop_id, 0) + 1
    try:
        yield
    finally:
        _runs[loop_id] -= 1
        if not _runs[loop_id]:
            del _runs[loop_id]
            await _close_clients(loop_id)


async def _close_clients(loop_id: int) -> None:
    """Drop the clients, limits and breakers of event loop `loop_id` at once (a run that
    begins while they close makes its own), then close the clients."""
    for kept in (_limits, _breakers):
        for key in [k for k in kept if k[0] == loop_id]:
            del kept[key]
    clients = [_clients.pop(k) for k in [k for k in _clients if k[0] == loop_id]]
    await asyncio.gather(*(client.close() for client in clients), return_exceptions=True)


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
        self._cause: str | None = None
        self._trip = asyncio.Event()  # a breaker belongs to one event loop (model_breaker)

    @property
    def cause(self) -> str | None:
        """Why it tripped (None: it has not)."""
        return self._cause

    @cause.setter
    def cause(self, cause: str | None) -> None:
        self._cause = cause
        if cause is not None:
            self._trip.set()  # retries waiting out their backoff stop now

    @property
    def tripped(self) -> bool:
        return self._cause is not None

    async def pause(self, seconds: float) -> None:
        """Wait `seconds` before a retry, or less: until the breaker trips (requests waiting
        out a backoff of up to 90 s went on for 44 s after a trip, then said they stopped)."""
        if self.tripped:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._trip.wait(), seconds)

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
        elif (
            isinstance(error, openai.APIConnectionError)
            and not isinstance(error, openai.APITimeoutError)
            and too_large(error) is None  # the endpoint answered: too much
        ):
            now = time.monotonic()
            if self.unreachable_since is None:
                self.unreachable_since = now
            elif now - self.unreachable_since >= self.model.down_after_s:
                self.cause = f"endpoint unreachable for {self.model.down_after_s:.0f} s ({detail})"


def refusal_cause(status: int, detail: str) -> str:
    """What a refusal says about the endpoint, in one line."""
    if refuses_key(status, detail):
        return f"endpoint refused the key ({detail}){key_hint(detail)}"
    if status == 404:
        return f"endpoint does not serve this model ({detail})"
    return f"endpoint refused every request ({detail})"


def refuses_key(status: int, detail: str) -> bool:
    """Whether a refusal is about the key: 401, 403, a message about authentication, or a
    LiteLLM proxy without a database, which answers a key that is not its master key with
    HTTP 400 "No connected db." (it looks the key up as a virtual key)."""
    text = detail.lower()
    return status in (401, 403) or any(word in text for word in _KEY_WORDS)


_KEY_WORDS = ("auth", "api key", "no connected db", "no_db_connection")


def key_hint(detail: str) -> str:
    """What a refusal of the key means when the server's words do not say it."""
    if "no connected db" in detail.lower():
        return "; a LiteLLM proxy without a database answers so to any key but its master key"
    return ""


_breakers: dict[_ModelKey, Breaker] = {}


def model_breaker(model: ModelConfig) -> Breaker:
    """The model's breaker, shared by every batch of this event loop."""
    key = _model_key(model)
    if key not in _breakers:
        _breakers[key] = Breaker(model)
    return _breakers[key]


def stopped_cause(model: ModelConfig) -> str | None:
    """Why the model was stopped in this event loop, if it was."""
    breaker = _breakers.get(_model_key(model))
    return breaker.cause if breaker else None
