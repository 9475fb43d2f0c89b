"""Grading answers from a file (`numerate grade`): each line a case as `numerate generate`
writes it, with the model's `response`, graded with the current graders. The case is checked
against what its manifold generates, so a hand-edited line is never graded as numerate's."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import ValidationError

from numerate.config.sweep import too_long_for_a_point
from numerate.grading.judging import judge
from numerate.kernel.errors import (
    ConfigError,
    describe_validation_error,
    field_path,
    shown_value,
    what_it_is,
)
from numerate.kernel.inputs import json_value
from numerate.manifolds import registry


def grade_record(record: Any, where: str) -> dict[str, Any]:
    """A case as `numerate generate` writes it, plus its `response` (text, or null for a
    request that failed) and optionally `finish_reason`: the same record with `outcome` and
    `answer` set.

    Raises ConfigError naming `where` and the field when the record is not such a case.
    """
    if not isinstance(record, dict):
        got = "null" if record is None else what_it_is(record)  # a JSON line, not a document
        raise ConfigError(f"{where}: expected a JSON object, got {got}")
    if "manifold" not in record:
        raise ConfigError(f"{where}: no `manifold` field (the case's manifold: "
                          f"{', '.join(registry.names())})")  # fmt: skip
    manifold = record["manifold"]
    if not isinstance(manifold, str):
        raise ConfigError(f"{where}: manifold = {shown_value(manifold)}: expected a manifold name")
    try:
        spec = registry.get(manifold)
    except registry.UnknownManifoldError as error:
        raise ConfigError(f"{where}: {error}") from None
    if "response" not in record:
        raise ConfigError(f"{where}: no `response` field (the model's answer, or null)")
    response, finish_reason = record["response"], record.get("finish_reason")
    if response is not None and not isinstance(response, str):
        raise ConfigError(f"{where}: response = {response!r}: expected text or null")
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise ConfigError(f"{where}: finish_reason = {finish_reason!r}: expected text or null")
    case = _the_case(spec, record, where)
    error_text = "no response" if response is None else None
    outcome, answer = judge(manifold, case, response, finish_reason, error_text)
    return {**record, "outcome": outcome.value, "answer": answer}


def _the_case(spec: registry.Manifold[Any, Any, Any], record: dict[str, Any], where: str) -> Any:
    """The case `record` holds, checked against the one its manifold generates for its params,
    seed and index: a hand-edited `target` (or `seed`, `input`, ...) would otherwise be graded
    as if it were numerate's. Raises ConfigError naming `where` and the first field that differs."""
    try:
        case = spec.case_model.model_validate(record)
    except ValidationError as error:
        missing = [field_path(p["loc"]) for p in error.errors() if p["type"] == "missing"]
        if missing:  # not a case at all: say which shape is expected, in one line
            raise ConfigError(
                f"{where}: not a case of {spec.name} as `numerate generate {spec.name}` writes it "
                f"(missing {', '.join(missing)})"
            ) from None
        raise ConfigError(describe_validation_error(error, where)) from None
    fields = spec.params_model.model_fields  # as a sweep's point and `generate` count them:
    given = {  # the values set, not the defaults
        name: value for name, value in case.params.items()
        if name not in fields or value != fields[name].get_default(call_default_factory=True)
    }  # fmt: skip
    too_long = too_long_for_a_point(given, f"{where}: params.")
    if too_long:  # its case would be made first: a 1 MB anchor made a 400 MB prompt
        raise ConfigError(too_long)
    try:
        params = spec.params(**case.params)  # the parameters a case of this manifold can have
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, f"{where}: params")) from None
    except TypeError as error:  # a key that is no parameter name (not a string)
        raise ConfigError(f"{where}: params: {error}") from None
    given = case.model_dump(mode="json", exclude={"params"})
    generated = spec.generate(params, case.seed, case.index).model_dump(
        mode="json", exclude={"params"}
    )
    for field, value in generated.items():
        if given.get(field) != value:
            shown, expected = around_difference(json.dumps(given.get(field)), json.dumps(value))
            raise ConfigError(
                f"{where}: {field} = {shown} is not what {spec.name} generates for this line's "
                f"params, seed and index ({expected}): a case edited by hand, or generated by "
                "another version of numerate (generate it again with `numerate generate`)"
            )
    return case


def around_difference(given: str, expected: str, width: int = 60) -> tuple[str, str]:
    """The two texts cut to about `width` characters around where they first differ, `...`
    where cut: both cut at the same 60 characters showed two identical texts (a space added
    at the end of an input)."""
    if len(given) <= width and len(expected) <= width:
        return given, expected
    first = next(
        (i for i, (a, b) in enumerate(zip(given, expected, strict=False)) if a != b),
        min(len(given), len(expected)),
    )
    start = max(0, first - width // 3)

    def cut(text: str) -> str:
        end = start + width
        return f"{'...' if start else ''}{text[start:end]}{'...' if end < len(text) else ''}"

    return cut(given), cut(expected)


def grade_lines(lines: Iterable[str], source: str) -> Iterator[dict[str, Any]]:
    """Every non-empty JSON line of `source`, graded (see grade_record), one at a time (a
    caller keeps what it writes of each, not the records: they took 7.5 times the file);
    ConfigError after the last when there was none."""
    graded = 0
    for number, ended in enumerate(lines, start=1):
        line = ended.removesuffix("\n")  # as read: a line keeps its line feed
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            record = json_value(line, where)
        except json.JSONDecodeError as error:
            raise ConfigError(  # its msg alone said "Unterminated string starting at"
                f"{where}, column {error.colno}: not valid JSON: {error.msg}"
            ) from None
        yield grade_record(record, where)
        graded += 1
    if not graded:
        raise ConfigError(f"{source} holds no answers to grade")
