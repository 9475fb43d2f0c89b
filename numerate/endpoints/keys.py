"""API keys: where a model's key comes from, and keeping it out of every message."""

from __future__ import annotations

import os
import re
from typing import Any

from numerate.config import ModelConfig
from numerate.kernel.errors import ConfigError


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


_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+")
_KEY_LIKE = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}")


def redact(text: str, secret: str | None = None) -> str:
    """`text` (an error a server sent back) without the API key: the configured key, bearer
    tokens and key-shaped strings (sk-...) are replaced by [redacted]."""
    if secret and len(secret) >= 4 and secret != "EMPTY":
        text = text.replace(secret, "[redacted]")
    text = _BEARER.sub(r"\1[redacted]", text)
    return _KEY_LIKE.sub(lambda match: f"{match.group(1)}-[redacted]", text)


def key_source(model: ModelConfig) -> str:
    """Where the model's key comes from, for messages (never the key itself)."""
    if model.api_key_secret:
        return f"Secret block {model.api_key_secret!r}"
    if model.api_key_env:
        return f"${model.api_key_env}"
    return "no key (api_key_env unset)"
