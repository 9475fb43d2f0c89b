"""Which failed requests to send again, and how long to wait first.

Timeouts, connection errors, 408/409/429 and 5xx are retried with exponential backoff and
jitter (a Retry-After header wins); other 4xx are not, nor an answer too large to read.
"""

from __future__ import annotations

import contextlib
import email.utils
import random
import time
from http import HTTPStatus
from typing import Any

from numerate.kernel.credentials import redact
from numerate.kernel.errors import printable
from numerate.kernel.inputs import valid_text

RETRYABLE_STATUS = frozenset({408, 409, 429})
MAX_BACKOFF_S = 60.0
MAX_RETRY_AFTER_S = 300.0
MAX_THROTTLE_WAIT_S = 2.0


def retry_after_s(headers: Any) -> float | None:
    """Seconds a server asked us to wait (Retry-After / retry-after-ms), if it said a wait:
    a value that is none (negative, zero, a date gone by, not a number) is left to our own
    backoff, as the openai client does (`Retry-After: -5` had every retry sent at once, 118
    in 5 s against an overloaded server)."""
    if headers is None:
        return None
    asked = None
    millis = headers.get("retry-after-ms")
    if millis:
        with contextlib.suppress(ValueError):
            asked = float(millis) / 1000
    value = headers.get("retry-after")
    if asked is None and value:
        try:
            asked = float(value)
        except ValueError:
            with contextlib.suppress(TypeError, ValueError):  # an HTTP date
                asked = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    if asked is None or not asked > 0:  # NaN too
        return None
    return min(MAX_RETRY_AFTER_S, asked)


class AnswerTooLarge(Exception):
    """An endpoint's answer body beyond the bound numerate reads (`limit` bytes:
    numerate.endpoints.limits.MAX_BODY_BYTES). Not sent again: it is an endpoint's fault, not
    the way's, and a second answer as large would be read, and paid for, again."""

    def __init__(self, limit: int, what: str = "answer body") -> None:
        size = f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit:,} bytes"
        super().__init__(f"{what} larger than {size}: not read")
        self.limit = limit


def too_large(error: BaseException) -> AnswerTooLarge | None:
    """The AnswerTooLarge `error` is, or was raised from (the HTTP client's errors wrap it)."""
    for found in (error, error.__cause__):
        if isinstance(found, AnswerTooLarge):
            return found
    return None


class NotJson(ValueError):
    """An answer whose body is not JSON (an HTML page a proxy sends for a chat completion),
    said with its content type and first characters."""

    def __init__(self, content_type: str, body: bytes) -> None:
        shown = valid_text(body[:80].decode("utf-8", "replace"))
        super().__init__(f"not JSON ({content_type or 'no content type'}): {shown!r}")


class TimedOut(Exception):
    """A request whose whole answer did not arrive within the model's timeout_s (the client's
    own timeout bounds each read, not a body that trickles in)."""

    def __init__(self, seconds: float) -> None:
        super().__init__("timeout: no answer in time")  # as the client says its own
        self.seconds = seconds


def backoff_s(attempt: int, base_s: float, rng: random.Random) -> float:
    """Exponential backoff with jitter: base * 2^(attempt-1), capped, times 0.5..1.5."""
    return min(MAX_BACKOFF_S, base_s * 2 ** (attempt - 1)) * rng.uniform(0.5, 1.5)


def is_retryable(error: BaseException) -> bool:
    """Whether a failed request can succeed if sent again."""
    import openai

    if too_large(error) is not None:  # wrapped as a connection error: it is none
        return False
    if isinstance(error, openai.APIConnectionError):  # includes timeouts
        return True
    if isinstance(error, TimedOut):
        return True
    if isinstance(error, openai.APIStatusError):
        return error.status_code in RETRYABLE_STATUS or error.status_code >= 500
    # a body that is not what it claims (cut JSON, an unexpected shape): a glitch
    return isinstance(error, openai.APIResponseValidationError | ValueError)


def describe_error(error: BaseException) -> str:
    """A one-line description of a request failure, credentials redacted (what a server or a
    library says may quote the key or the URL's password), each control character but a tab
    or a line break written as its escape (a server's `\x1b[31m` was stored as it came, and
    the run's shards could then not be ingested)."""
    return redact(printable(valid_text(_description(error)), keep="\n\t"), token_shapes=True)


def _description(error: BaseException) -> str:
    import openai

    if isinstance(error, openai.APITimeoutError):
        return "timeout: no answer in time"
    if isinstance(error, TimedOut):
        return str(error)
    if (large := too_large(error)) is not None:
        return str(large)
    if isinstance(error, openai.APIConnectionError):
        cause = error.__cause__ or error
        said = str(cause).strip() or "no reason given (the connection was closed or reset)"
        return f"connection error: {type(cause).__name__}: {said}"
    if isinstance(error, openai.APIStatusError) and 300 <= error.status_code < 400:
        target = error.response.headers.get("location", "")
        return (
            f"HTTP {error.status_code}: a redirect to {target[:200]!r}; numerate follows no "
            "redirect: give base_url as the address it points to"
        )
    if isinstance(error, openai.APIStatusError):
        return f"HTTP {error.status_code}: {server_message(error)}"[:500]
    if isinstance(error, NotJson):
        return f"malformed answer: {error}"[:500]
    if isinstance(error, openai.APIResponseValidationError | ValueError):
        return f"malformed answer: {type(error).__name__}: {error}"[:500]
    if isinstance(error, RecursionError):  # a JSON body nested beyond any answer's shape
        return "malformed answer: nested too deep to read"
    return f"{type(error).__name__}: {error}"[:500]


def server_message(error: Any) -> str:
    """What the server said in its error body (`{"error": {"message", "type"}}`), else the
    client's summary of the answer."""
    body = getattr(error, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str) and body["message"]:
        kind = body.get("type")
        return f"{body['message']} ({kind})" if isinstance(kind, str) and kind else body["message"]
    status = getattr(error, "status_code", None)
    if not body and isinstance(status, int):  # the client's summary: "Error code: 429 - {}"
        with contextlib.suppress(ValueError):  # a status HTTP does not name
            return f"{HTTPStatus(status).phrase} (the answer said no more)"
    return str(getattr(error, "message", error))


def is_throttle(error: BaseException) -> bool:
    """A rate limit (429) or an overloaded server (503): too many requests, not a failure."""
    import openai

    return isinstance(error, openai.APIStatusError) and error.status_code in (429, 503)
