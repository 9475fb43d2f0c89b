"""A bounded HTTP question: is anything answering at a URL, whole and in time?"""

from __future__ import annotations

import base64
import re
import threading
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import unquote, urlsplit

import idna


class Unanswered(Exception):
    """No whole HTTP answer: `timed_out` (none within the time), else `reason` (no connection,
    a URL that is none)."""

    def __init__(self, reason: str, timed_out: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is the answer (its 3xx status), not followed: a Location with a user and
    password in it was taken for a host name, and the error blamed the DNS."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirects)


def shown_url(url: str) -> str:
    """`url` as a message may show it: everything before its last `@` after the scheme is
    hidden (a password with a space, a `/` or a `#` in it is no well-formed user information,
    and the redaction of well-formed URLs would not find it)."""
    return re.sub(r"^([^:/]*://)?.*@", lambda m: f"{m.group(1) or ''}***@", url, flags=re.S)


MAX_URL_CHARS = 8_192
"""The longest URL numerate sends to (a base URL, a server's): request paths are added at its
end, and HTTP servers refuse request lines much longer (httpx refuses 65,536 characters)."""


def url_problem(url: str) -> str | None:
    """Why `url` is no URL an HTTP client can use (a host, a port that is a number, a host
    that httpx's IDNA decoding reads, at most MAX_URL_CHARS), in words that quote no part of a
    password; None when it is one."""
    if len(url) > MAX_URL_CHARS:
        return f"it is {len(url):,} characters long; at most {MAX_URL_CHARS:,}"
    if any(not " " < c <= "~" for c in url):
        return "it holds a space, a control or a non-ASCII character (write it percent-encoded)"
    try:
        parts = urlsplit(url)
    except ValueError as error:  # an unclosed `[`: its text quotes no password without one
        return "user information that is no user:password@" if "@" in url else str(error)
    if parts.scheme not in ("http", "https"):
        return "it does not start with http:// or https://"
    if "@" in url.partition("://")[2] and "@" not in parts.netloc:  # `u:pa/ss@host`: the
        return (  # `/` ended the host, and `pa` was taken for its port
            "a '/', '?' or '#' before its '@': in a user name or password, write them "
            "percent-encoded (%2F, %3F, %23)"
        )
    try:
        parts.port  # noqa: B018 (parsing the port is the check)
    except ValueError:  # what follows the `@` only: the error quotes the port
        try:
            parts._replace(netloc=parts.netloc.rpartition("@")[2]).port  # noqa: B018
        except ValueError as error:
            return str(error)
        return "user information that is no user:password@"
    if not parts.hostname:
        return "it names no host"
    if ":" in unquote(parts.username or ""):  # basic authentication sends user:password, and
        return (  # a server splits it at the first colon: another user, another password
            "its user name holds a colon (%3A), which basic authentication cannot carry (the "
            "server would read another user and password)"
        )
    if parts.hostname.startswith("xn--"):  # httpx decodes such a host (URL.host), and a
        try:  # malformed label raised from inside a request: read it as httpx does
            idna.decode(parts.hostname)
        except idna.IDNAError as error:  # quotes a label of the host, never user information
            return f"a malformed punycode label in its host ({error})"
    return None


def answer(url: str, timeout_s: float, limit: int = 64 * 1024) -> tuple[int, bytes]:
    """The HTTP status `url` answers a GET with (an error status and a redirect, not
    followed, included) and up to `limit` bytes of its body, all read within `timeout_s` in
    all. A server that sends its headers and then nothing, or one byte at a time, is no
    answer (each read's own timeout would let it go on). Raises Unanswered."""
    found: dict[str, tuple[int, bytes] | BaseException] = {}

    request = _request(url)

    def ask() -> None:
        try:
            with _OPENER.open(request, timeout=timeout_s) as response:
                found["answer"] = (response.status, response.read(limit))
        except urllib.error.HTTPError as error:
            found["answer"] = (error.code, b"")
        except Exception as error:  # http.client.InvalidURL is no ValueError: a traceback
            found["error"] = error  # from the thread, and "no answer within 5 s"

    asking = threading.Thread(target=ask, name="numerate-http-probe", daemon=True)
    asking.start()
    deadline = time.monotonic() + timeout_s
    while asking.is_alive() and time.monotonic() < deadline:  # short joins: a signal another
        asking.join(min(0.1, max(0.0, deadline - time.monotonic())))  # thread took is handled
    answered, error = found.get("answer"), found.get("error")
    if isinstance(answered, tuple):
        return answered
    if error is None or isinstance(getattr(error, "reason", error), TimeoutError):
        raise Unanswered(f"no answer within {timeout_s:g} s", timed_out=True)
    raise Unanswered(str(getattr(error, "reason", None) or error), timed_out=False)


def _request(url: str) -> Any:
    """A GET of `url`; a user and password in it (`http://u:pw@host/`) go as HTTP basic
    authentication, as HTTP clients send them (urllib took `u:pw@host` for a host name, and
    the error blamed the DNS)."""
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return url  # urlopen says why it is no URL
    if user is None:
        return url
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    token = base64.b64encode(f"{unquote(user)}:{unquote(password or '')}".encode()).decode()
    return urllib.request.Request(bare, headers={"Authorization": f"Basic {token}"})
