"""The names numerate stores and shows: a sweep's name, a model's label, the model id an
endpoint serves. One rule each, read by a config (pydantic's `pattern`) and by an ingest
(DuckDB's `regexp_full_match`, the same RE2 syntax), so a shard cannot bring in a name a config
refuses: one holding HTML, a terminal's escape sequences or a newline, printed raw by
`report --format markdown|csv`."""

from __future__ import annotations

import re

__all__ = [
    "ENV_NAME",
    "LIMIT_NAME",
    "MODEL_ID",
    "MODEL_NAME",
    "NAMES",
    "RULES",
    "RUN_ID",
    "SWEEP_NAME",
    "name_problem",
]

SWEEP_NAME = r"^[A-Za-z0-9_.-]{1,100}$"
"""A sweep's name: letters, digits and _ . - (stored with every run; a run's id adds `-` and
its digits to it, so `..` makes no folder's name of its own)."""

RUN_ID = r"^([A-Za-z0-9_-][A-Za-z0-9_.-]{0,199}|\.[A-Za-z0-9_-][A-Za-z0-9_.-]{0,198}|\.\.[A-Za-z0-9_.-]{1,198})$"  # noqa: E501 - no look-ahead: DuckDB's and pydantic's regular expressions have none
"""A run's id: its sweep's name, `-` and 12 hexadecimal digits (`numgen-` and 12 for NumGen);
a shard's folder is named after it, so never `.` or `..` (the folder above: its shards were
written there)."""

MODEL_NAME = r"^[A-Za-z0-9_.:/@+-]{1,200}$"
"""A model's label in the results: letters, digits and _ . : / @ + -."""

MODEL_ID = r"^[^\x00-\x20\x7f-\x9f<>\"'`\\]{1,200}$"
"""The id an endpoint serves (`org/model`, `llama3:8b`, `claude-3@20240229`): up to 200
characters, none of them a space, a control character (a terminal's escape sequences begin
with one) or one of < > " ' ` \\ (HTML, quoting)."""

NAMES: dict[str, tuple[str, str]] = {
    "sweep_name": (SWEEP_NAME, "1 to 100 of ASCII letters, digits and _ . -"),
    "run_id": (RUN_ID, "1 to 200 of ASCII letters, digits and _ . -, not . or .."),
    "model": (MODEL_NAME, "1 to 200 of ASCII letters, digits and _ . : / @ + -"),
    "model_id": (MODEL_ID, "1 to 200 characters, no space, control character or < > \" ' ` \\"),
}
"""Each stored column of names: its rule and the rule in words."""

LIMIT_NAME = r"^[^/%&<>\x00-\x1f\x7f-\x9f]{1,200}$"
"""A Prefect global concurrency limit's name: Prefect refuses / % & < >, and its client puts
the name in a URL, which holds no control character."""

ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
"""An environment variable's name."""

RULES: dict[str, str] = {rule: words for rule, words in NAMES.values()} | {
    LIMIT_NAME: "1 to 200 characters, no control character or / % & < >",
    ENV_NAME: "ASCII letters, digits and _, not beginning with a digit",
}
"""Every rule of names a config checks, in words (an error names the rule so, not as a
regular expression)."""


def name_problem(column: str, value: object) -> str | None:
    """Why `value` cannot be the `column` (a key of NAMES) numerate stores, or None."""
    pattern, words = NAMES[column]
    if isinstance(value, str) and re.fullmatch(pattern, value):
        return None
    return f"{column} {value!r}: {words}"
