"""Credentials never leave the process: one redaction for every text that does (an error
printed, a text stored in the database, a log line), and the process's registry of the
secrets in use.

Endpoint code registers each API key it reads and each password of a base URL
(`register_secret`); `redact` replaces them, the userinfo of any URL
(`http://user:password@host` -> `http://***@host`) and the value of a query parameter named
like a credential (`?token=...`, `&api_key=...`), with `MARKER`. No I/O.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import re
import threading
from collections.abc import Iterable
from urllib.parse import quote, quote_plus, unquote, urlsplit

MARKER = "***"
"""What a secret is replaced with."""

MIN_SECRET_CHARS = 4
"""Shorter strings are not replaced on their own (they would blank out ordinary words); a
URL's userinfo is replaced whatever its length."""

PLACEHOLDERS = frozenset({"EMPTY"})
"""Keys that are no secret: what local servers are sent when no key is configured."""

# well-formed user information, or a `user:password@` whose password holds a `/`, `?` or
# `#` (no URL then, but meant as one: `http://u:pa/ss@host`, whose `pa` parsers take for a port)
_USERINFO = re.compile(
    r"(?i)\b([a-z][a-z0-9+.\-]*://)(?:[^\s/?#'\"<>]+|[^\s/?#'\"<>@:]*:[^\s'\"<>]*)@"
)
_BEARER = re.compile(r"(?i)\b((?:bearer|basic)\s+)[^\s\"',;()<>:\[\]{}]+")
_KEY_LIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}")
_CREDENTIAL_WORDS = "token|key|secret|password|passwd|signature|sig|auth"
"""How the name of a credential ends: a URL's query parameter, a command-line option."""
_QUERY_SECRET = re.compile(
    rf"(?i)([?&;](?:[a-z0-9_\-]*(?:{_CREDENTIAL_WORDS}))=)"
    r"[^&;#\s'\"<>]+?(?=[&;#\s'\"<>]|:\s|:$|$)"  # ": " after it is the message's
)

_registered: set[str] = set()
_lock = threading.Lock()


def scrub(text: str, secrets: Iterable[str], *, token_shapes: bool = False) -> str:
    """`text` with each of `secrets` and the userinfo of every URL replaced by MARKER.

    Args:
        text: any text about to leave the process.
        secrets: the strings to hide (those shorter than MIN_SECRET_CHARS are left alone).
        token_shapes: also hide what looks like a credential though it is none of `secrets`
            (a bearer or basic-authentication token, an `sk-...` key): for errors a server
            sends back, never for a
            model's answer, whose words it could change.
    """
    for form in _longest_first(frozenset(secrets)):
        if form in text:
            text = text.replace(form, MARKER)
    if "://" in text and "@" in text:
        text = _USERINFO.sub(lambda match: f"{match.group(1)}{MARKER}@", text)
    if "://" in text and "=" in text:  # a URL's query holding a credential: ?token=...
        text = _QUERY_SECRET.sub(lambda match: f"{match.group(1)}{MARKER}", text)
    if token_shapes:
        text = _BEARER.sub(lambda match: f"{match.group(1)}{MARKER}", text)
        text = _KEY_LIKE.sub(lambda match: f"{match.group(1)}-{MARKER}", text)
    return text


@functools.lru_cache(maxsize=64)
def _longest_first(secrets: frozenset[str]) -> tuple[str, ...]:
    """Every written form of `secrets`, longest first (a form inside another is replaced
    after it); made once per set of secrets, not for each text scrubbed."""
    hidden = {form for secret in secrets for form in _written_forms(secret)}
    return tuple(sorted(hidden, key=len, reverse=True))


@functools.lru_cache(maxsize=256)
def _written_forms(secret: str) -> frozenset[str]:
    """`secret` as a server may quote it back: as it is, escaped in JSON, HTML or a Python
    repr (backslashes doubled), percent-
    encoded (`Tok/en+Secret=` came back as `Tok%2Fen%2BSecret%3D` and was stored), in base64; none
    for a placeholder or a string too short to be a secret."""
    if len(secret) < MIN_SECRET_CHARS or secret in PLACEHOLDERS:
        return frozenset()
    raw = secret.encode(errors="surrogateescape")  # a value from the environment's bytes:
    # not valid UTF-8 (`K=$'sk-\xff'`), its hiding raised in the very error path that says so
    encoded = (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode())
    quoted = {quote_plus(raw, safe=""), quote(raw, safe=""), quote(raw), quote_plus(raw)}
    padded = {form for text in encoded for form in (text, text.rstrip("="))}  # base64, as sent
    escaped = {html.escape(secret), html.escape(secret, quote=False)}  # an HTML error page
    backslashed = {repr(secret)[1:-1], secret.replace("\\", "\\\\")}  # Python's repr, a log
    return frozenset({secret, json.dumps(secret)[1:-1]} | quoted | padded | escaped | backslashed)


_SECRET_OPTION = re.compile(rf"(?i)(--?[a-z0-9_\-]*(?:{_CREDENTIAL_WORDS})(?:=|\s+))(?!-)\S+")


def scrub_command_line(text: str) -> str:
    """A command line shown to a person (another process's, holding a file) with the value of
    every option named like a credential (`--api-key X`, `--token=X`), what looks like one,
    and the secrets registered here, hidden."""
    text = _SECRET_OPTION.sub(lambda match: f"{match.group(1)}{MARKER}", text)
    return redact(text, token_shapes=True)


def redact(text: str, *, token_shapes: bool = False) -> str:
    """`scrub` with the secrets registered in this process."""
    return scrub(text, registered_secrets(), token_shapes=token_shapes)


def register_secret(secret: str | None) -> None:
    """Hide `secret` from every text `redact` sees from now on (the process's lifetime)."""
    if not secret:
        return
    with _lock:
        for form in {secret, secret.strip(), unquote(secret)}:
            if len(form) >= MIN_SECRET_CHARS and form not in PLACEHOLDERS:
                _registered.add(form)


def registered_secrets() -> frozenset[str]:
    """The secrets registered so far."""
    with _lock:
        return frozenset(_registered)


def url_secrets(url: str | None) -> list[str]:
    """The credentials a URL carries in its userinfo: its password, else its user name (a
    token given as `https://TOKEN@host`), and the HTTP basic-authentication token made of
    them (base64 of `user:password`, which a server may quote back in an error)."""
    if not url or "@" not in url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    secret = parts.password or parts.username
    if not secret:
        return []
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    return [secret, base64.b64encode(f"{user}:{password}".encode()).decode()]
