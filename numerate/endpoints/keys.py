"""API keys: where a model's key comes from, checked where it is read, and registered so that
no text leaving the process shows it (numerate.kernel.credentials)."""

from __future__ import annotations

import os
from typing import Any

from numerate.config.sweep import ModelConfig
from numerate.kernel.credentials import register_secret, registered_secrets, url_secrets
from numerate.kernel.errors import ConfigError


class EndpointError(ConfigError):
    """An endpoint that cannot be used at all: unreachable, or it refuses the key."""


async def api_key(model: ModelConfig) -> str:
    """The model's API key: from its Prefect Secret block or environment variable ("EMPTY"
    when none is configured: local servers ignore it), without surrounding whitespace (a key
    file's trailing newline). ConfigError, naming where the key comes from but never showing
    it, when it holds a character an HTTP header cannot carry, or when the model's system
    prompt holds a credential."""
    key = await _api_key(model)
    prompt = model.system_prompt or ""
    if any(secret in prompt for secret in registered_secrets()):
        raise ConfigError(
            f"model {model.name!r}: system_prompt holds an API key or password given for an "
            "endpoint: it would be sent with every request, stored with each answer and shown "
            "in the Prefect flow run's parameters; remove it from the prompt"
        )
    return key


async def _api_key(model: ModelConfig) -> str:
    for credential in url_secrets(model.base_url):
        register_secret(credential)
    if model.api_key_secret:
        from prefect.blocks.system import Secret

        try:
            secret: Any = await Secret.aload(model.api_key_secret)
        except ValueError:
            raise ConfigError(
                f"model {model.name!r}: no Prefect Secret block named {model.api_key_secret!r}"
            ) from None
        key = checked_key(model, str(secret.get()))
        if not key:
            raise ConfigError(f"model {model.name!r}: {key_source(model)} holds no API key")
        return key
    if not model.api_key_env:
        return "EMPTY"
    key = checked_key(model, os.environ.get(model.api_key_env, ""))
    if not key:
        state = "is empty" if model.api_key_env in os.environ else "is not set"
        raise ConfigError(
            f"model {model.name!r}: environment variable {model.api_key_env} {state} "
            "(it should hold the API key)"
        )
    return key


def checked_key(model: ModelConfig, raw: str) -> str:
    """`raw` stripped of surrounding whitespace and registered as a secret; ConfigError when
    what is left holds a non-ASCII or control character (the key itself is never shown)."""
    register_secret(raw)
    key = raw.strip()
    bad = next((c for c in key if not " " <= c <= "~"), None)
    if bad is not None:
        kind = "a non-ASCII" if ord(bad) > 127 else "a control"
        raise ConfigError(
            f"model {model.name!r}: the API key in {key_source(model)} holds {kind} character "
            "(an HTTP header cannot carry it); check the value"
        )
    return key


def key_source(model: ModelConfig) -> str:
    """Where the model's key comes from, for messages (never the key itself)."""
    if model.api_key_secret:
        return f"Secret block {model.api_key_secret!r}"
    if model.api_key_env:
        return f"${model.api_key_env}"
    return "no key (api_key_env unset)"
