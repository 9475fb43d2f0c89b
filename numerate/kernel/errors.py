"""Named failures. The library raises these; the CLI turns them into one line and an exit code."""

from __future__ import annotations

import json
import math
import os
import re
from asyncio import CancelledError
from datetime import date
from typing import TYPE_CHECKING, Any

from numerate.kernel.names import RULES

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from pydantic import ValidationError


EXIT_BAD_INPUT = 2
"""The exit code of a command refused what it was given (the input is wrong: fix it)."""
EXIT_FAILED_FOR_NOW = 3
"""The exit code of a command that failed though its input was good: a run with a failed part
(stored all the same), a database that stayed busy, a server that did not start."""


class NumerateError(Exception):
    """Base of numerate's own errors: the message is meant for the user, and `exit_code` is
    the command's exit code when it ends on this error."""

    exit_code = EXIT_BAD_INPUT


class ConfigError(NumerateError):
    """A configuration value or parameter that cannot be used."""


def what_it_is(value: object) -> str:
    """A value read from a file, as its reader would name it: `nothing` for an empty
    document (`NoneType` before), `a list`, `text`, ..."""
    if value is None:
        return "nothing (an empty document, or comments only)"
    names = {bool: "true/false", int: "a number", float: "a number", str: "text",
             list: "a list", dict: "a mapping"}  # fmt: skip
    return names.get(type(value), f"a {type(value).__name__}")


TEXT_EXPECTED = frozenset({"literal_error", "string_type", "enum"})
"""pydantic's errors of a field that takes text (or one of some words)."""

YAML_BOOLEAN_WORDS = (
    " (YAML reads an unquoted yes, no, on or off as true or false: put the word in quotes)"
)
"""What a field of a YAML file that takes text adds when it was given true or false: `cache: off`
was read as false and refused with "Input should be 'resume', 'reuse' or 'off'"."""
YAML_DATES = " (YAML reads an unquoted date as a date: put it in quotes)"
"""What a field of a YAML file that takes text adds when it was given a date: `revision:
2024-06-01` was refused as `revision = datetime.date(2024, 6, 1)`."""


def describe_validation_error(
    error: ValidationError,
    where: str,
    options: Mapping[str, str] | None = None,
    yaml: bool = False,
) -> str:
    """One line per problem, naming the field and the offending value.

    Args:
        error: pydantic's error.
        where: what was being validated ("objects parameters", "sweep config").
        options: the fields the user gave as command-line options, and those options
            (`{"prompts.per_number": "--count"}`): a problem with one names the option (and
            its value; an option that holds it, `--set length=1e400`, as given).
        yaml: the other fields were read from a YAML file: a field that takes text given
            true or false says how YAML reads yes, no, on and off (YAML_BOOLEAN_WORDS).
    """
    lines = []
    problems = error.errors()
    for problem in problems[:MAX_PROBLEMS]:
        field = field_path(problem["loc"])
        value = problem.get("input")
        message = shorten(problem["msg"].removeprefix("Value error, "), 300)
        if problem["type"] == "string_pattern_mismatch":  # a rule of names, in words
            message = _name_rule(problem.get("ctx", {}).get("pattern"), message)
        if problem["type"] in ("model_type", "model_attributes_type", "dict_type"):
            given = "empty" if value is None else f"not {what_it_is(value)}"
            message = f"should be a mapping of settings ({given})"  # not a class
        key_of = _key_of(problem)
        if key_of is not None:  # `1: x` said "1 = 1: Keys should be strings"
            of = f" of {key_of}" if key_of else ""
            what = "null" if value is None else what_it_is(value)
            hint = YAML_DATES if yaml and isinstance(value, date) else ""
            lines.append(
                f"{where}: key {shorten(shown_value(value))}{of}: a setting's name is text, "
                f"not {what}{hint}"
            )
            continue
        if not field:  # a check of the whole (a model validator): its message names the fields
            named = _named_option(field, message, options or {})  # one an option gave: by it
            lines.append(named if named is not None else f"{where}: {message}")
            continue
        option = _option_of(field, options or {})
        if option is not None:
            # `--set key=text` shows the value as it was given (1e400, not the inf it was read
            # as); a repeated option's values are not shown: its message names the one at fault
            several = isinstance(value, list | dict)
            shown = "" if "=" in option or several else f" {shorten(repr(value))}"
            lines.append(f"{option}{shown}: {message}")
            continue
        named = _named_option(field, message, options or {})
        if named is not None:  # a check of a whole mapping whose message starts with the
            lines.append(named)  # field it is about, which an option gave
            continue
        shown = "" if isinstance(value, dict | list) else f" = {shorten(shown_value(value))}"
        if yaml and problem["type"] in TEXT_EXPECTED:
            message += YAML_BOOLEAN_WORDS if isinstance(value, bool) else ""
            message += YAML_DATES if isinstance(value, date) else ""
        lines.append(f"{where}: {field}{shown}: {message}")
    if len(problems) > MAX_PROBLEMS:
        lines.append(f"{where}: ... and {len(problems) - MAX_PROBLEMS} more problem(s)")
    return "\n".join(lines)


def _key_of(problem: Mapping[str, Any]) -> str | None:
    """For a problem with a mapping's key (a key that is no text: a number, a date), the
    mapping's field path ('' at the top); None for any other problem. pydantic names such a
    key as `invalid_key` at the top and, inside a field, as the key's repr then `[key]`."""
    loc = problem["loc"]
    if problem["type"] == "invalid_key":
        return field_path(loc[:-1])
    if loc and loc[-1] == "[key]":
        return field_path(loc[:-2])
    return None


def undecodable(text: str) -> str | None:
    """`text` as given, each byte that is no UTF-8 written `\\xff`, when it holds such bytes
    (Python keeps them as surrogates, which DuckDB, pydantic and JSON refuse, and which print
    as `\\udcff`); None when it is valid text."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    return None


def shown_value(value: object) -> str:
    """A value read from a file as an error quotes it: text in quotes (Python's repr, which
    writes a control character escaped), a date (or time) as it was written, and null,
    true, false, lists and mappings as YAML and JSON write them (not None, True, {'a': 1})."""
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return repr(value)
    try:
        return json.dumps(value, default=shown_value, ensure_ascii=False)
    except ValueError:  # a list that holds itself (a YAML anchor and alias)
        return repr(value)


def _name_rule(pattern: object, message: str) -> str:
    """A name's rule (numerate.kernel.names) in words, or pydantic's `message` quoting the
    regular expression."""
    if isinstance(pattern, str) and pattern in RULES:
        return f"not a name numerate takes ({RULES[pattern]})"
    return message


MAX_PROBLEMS = 10
"""Problems an error message lists at most: a broken config gets a readable answer."""


def _named_option(field: str, message: str, options: Mapping[str, str]) -> str | None:
    """`message` of a check of the mapping at `field` (the whole config: "") that starts with
    one of its fields (`api_key_env: ...`, `base_url = 'x' must ...`, `generation.height = 64:
    ...`), with that field named by the option that gave it (`--api-key-env: ...`,
    `--base-url 'x' must ...`, `--size 64: ...`); None when no option gave it."""
    starts = re.match(r"([a-z_][a-z_.]*)( = |: )", message)
    if starts is None:
        return None
    named = f"{field}.{starts[1]}" if field else starts[1]
    if named not in options:
        return None
    option = options[named]
    return f"{option}{' ' if starts[2] == ' = ' else ': '}{message[starts.end() :]}"


def _option_of(field: str, options: Mapping[str, str]) -> str | None:
    """The option that gave `field` (or the list or mapping it is an item of)."""
    while field:
        if field in options:
            return options[field]
        field = field.rpartition(".")[0]
    return None


def field_path(loc: Sequence[object]) -> str:
    """A problem's field, its parts joined by dots (`models.0.name`) as a line can show them:
    a part that holds a character a terminal acts on (an escape sequence in a mapping's key)
    written escaped, as Python writes it, and each cut to MAX_PART characters (a key of a
    config or a case's params can be megabytes long)."""
    parts = (str(part) for part in loc)
    return ".".join(shorten(p if p.isprintable() else repr(p), MAX_PART) for p in parts)


MAX_PART = 60
"""Characters a part of a field's path shows at most (`field_path`)."""


def for_terminal(line: str, limit: int = 2000) -> str:
    """One line as a terminal may show it: a character a terminal acts on or cannot show (an
    escape sequence's ESC, a bidi override) written escaped, as Python writes it (`\\x1b`),
    and a line past `limit` characters cut in its middle, keeping its end (what an error says
    of a 90 KB value it names: `error: --run <…>: no such run`)."""
    line = printable(line, keep="\t")
    if len(line) <= limit:
        return line
    tail = limit // 4
    return f"{line[: limit - tail - 1]}…{line[-tail:]}"


def printable(text: str, keep: str = "") -> str:
    """`text` with each character a terminal acts on, but those in `keep`, written as Python
    escapes it (`\\x1b`, `\\u202e`): a control character (an escape sequence's ESC), a line
    or paragraph separator, a lone surrogate, a bidi control (it turns what follows around).
    Every other character stays as it is: a wide space, a no-break space, an emoji's joiner."""
    if text.isprintable():
        return text
    return _ACTED_ON.sub(lambda m: m[0] if m[0] in keep else repr(m[0])[1:-1], text)


_ACTED_ON = re.compile(
    "[\x00-\x1f\x7f-\x9f"  # Unicode's control characters (Cc), whole
    "\u2028\u2029"  # the line and paragraph separators (Zl, Zp)
    "\ud800-\udfff"  # surrogates (Cs): alone in a str, never a character
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"  # bidi controls
)
"""The characters `printable` escapes (a pattern: a long multi-line answer is read in C)."""


def is_a_stop(error: BaseException) -> bool:
    """Whether `error` ends the process or its task (Ctrl-C, an exit, a generator or task
    closed) rather than failing what it did. Every other BaseException is a failure: a Rust
    library's panic (polars' on a timestamp it cannot hold) derives from BaseException, not
    Exception, and a page or command that meets one says so as it says any failure."""
    return isinstance(error, KeyboardInterrupt | SystemExit | GeneratorExit | CancelledError)


def first_line(error: BaseException) -> str:
    """An error's first line, for a one-line message (its type's name when it has no text)."""
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def fixed(value: float, digits: int) -> str:
    """`value` with `digits` decimals, as a table shows it; one of 10^15 or more in scientific
    notation (`1.00e+300`), so that a value a hostile shard brought is a short cell, not 300
    digits."""
    if abs(value) < 1e15 or not math.isfinite(value):
        return f"{value:.{digits}f}"
    return f"{value:.{digits}e}"


def shorten(text: str, limit: int = 120) -> str:
    """`text` cut to `limit` characters, saying so."""
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def some_of(names: Sequence[str], most: int, whole: bool = True, between: str = ", ") -> str:
    """The first `most` of `names`, `between` each (a comma; a semicolon between phrases that
    hold commas), saying how many more there are (that there are more, when `names` is not
    `whole`: the first of them a bounded query read)."""
    shown = between.join(names[:most])
    if len(names) <= most:
        return shown
    return f"{shown} and {len(names) - most} more" if whole else f"{shown} and more"
