"""Named failures. The library raises these; the CLI turns them into one line and an exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class NumerateError(Exception):
    """Base of numerate's own errors: the message is meant for the user."""


class ConfigError(NumerateError):
    """A configuration value or parameter that cannot be used."""


def describe_validation_error(error: ValidationError, where: str) -> str:
    """One line per problem, naming the field and the offending value.

    Args:
        error: pydantic's error.
        where: what was being validated ("objects parameters", "sweep config").
    """
    lines = []
    for problem in error.errors():
        field = ".".join(str(part) for part in problem["loc"]) or "(whole object)"
        value = problem.get("input")
        shown = "" if isinstance(value, dict) else f" = {value!r}"
        message = problem["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {field}{shown}: {message}")
    return "\n".join(lines)
