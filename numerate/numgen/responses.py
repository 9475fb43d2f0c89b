"""Responses collected elsewhere (a human study, another tool) for `numerate numgen score`: a
CSV file of `target,generated` rows, the number asked for and the number counted (20+ for 20 or
more), read within numerate.kernel.inputs's bounds."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Any

from numerate.kernel.errors import ConfigError, shorten
from numerate.kernel.files import text_lines
from numerate.kernel.inputs import MAX_DATA_BYTES, whole_number


def read_responses(path: Path) -> Counter[tuple[int, int]]:
    """`target,generated` rows, as how many times each (target, generated) pair appears (what
    a confusion matrix counts: two lists of 15 million numbers took 600 MB); generated may be
    written 20+. ConfigError naming the file when it is not CSV (a NUL byte, a field of more
    than 128 KiB) or beyond kernel.inputs's bounds."""
    try:
        return _parse_responses(path)
    except csv.Error as error:
        raise ConfigError(f"{path}: not a CSV file numerate can read: {error}") from None


_EXTRA, _MISSING = "\x00extra", "\x00missing"  # what csv fills a row of the wrong length with


def _fields(row: dict[str, Any], columns: list[str]) -> int:
    """How many fields a row read with _EXTRA and _MISSING had."""
    return len(columns) + len(row.get(_EXTRA, [])) - list(row.values()).count(_MISSING)


def _parse_responses(path: Path) -> Counter[tuple[int, int]]:
    pairs: Counter[tuple[int, int]] = Counter()
    lines = text_lines(path, MAX_DATA_BYTES)  # a line at a time: memory follows a row
    reader = csv.DictReader(lines, restkey=_EXTRA, restval=_MISSING)
    columns = list(reader.fieldnames or [])
    if not any(name.strip() for name in columns):
        written = len(columns) > 1 or any(line.strip() for line in lines)  # the rest
        what = "has no header on its first line" if written else "is empty"
        raise ConfigError(f"{path} {what}; it needs a header target,generated")
    twice = sorted({name for name in columns if columns.count(name) > 1})
    if twice:  # before what is missing: `target,target` lacks `generated` for that reason
        raise ConfigError(f"{path}: the column {twice[0]!r} appears twice")
    missing = {"target", "generated"} - set(columns)
    if missing:
        raise ConfigError(
            f"{path}: needs columns target,generated; missing {', '.join(sorted(missing))}"
        )
    for line, row in enumerate(reader, start=2):
        got = _fields(row, columns)
        if got != len(columns):
            raise ConfigError(f"{path} line {line}: {got} field(s); the header has {len(columns)}")
        try:
            target = whole_number(str(row["target"]).strip(), f"{path} line {line}: target")
        except ValueError:
            raise ConfigError(
                f"{path} line {line}: target = {shorten(repr(row['target']))} is not a whole number"
            ) from None
        raw = str(row["generated"]).strip()
        try:
            value = 20 if raw == "20+" else whole_number(raw, f"{path} line {line}: generated")
        except ValueError:
            raise ConfigError(
                f"{path} line {line}: generated = {shorten(repr(raw))} is not a count (0, 1, "
                "..., 20+)"
            ) from None
        if value < 0:
            raise ConfigError(f"{path} line {line}: generated = {value} is negative")
        if not 1 <= target <= 19:
            raise ConfigError(f"{path} line {line}: target = {target} is outside 1..19")
        pairs[target, value] += 1
    if not pairs:
        raise ConfigError(f"{path} holds no responses")
    return pairs
