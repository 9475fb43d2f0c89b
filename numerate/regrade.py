"""Grading again: answers from a file (`numerate grade`) or a stored run (`numerate regrade`)
with the current graders. The answers never change; their outcomes may."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from pydantic import ValidationError

from numerate.judging import judge
from numerate.kernel.errors import ConfigError, describe_validation_error
from numerate.kernel.inputs import json_value
from numerate.manifolds import registry
from numerate.store import Store, queries
from numerate.store.rows import Regrade


def grade_record(record: Any, where: str) -> dict[str, Any]:
    """A case as `numerate generate` writes it, plus its `response` (text, or null for a
    request that failed) and optionally `finish_reason`: the same record with `outcome` and
    `answer` set.

    Raises ConfigError naming `where` and the field when the record is not such a case.
    """
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(record).__name__}")
    manifold = record.get("manifold")
    if not isinstance(manifold, str):
        raise ConfigError(f"{where}: manifold = {manifold!r}: expected a manifold name")
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
    try:
        case = spec.case_model.model_validate(record)
    except ValidationError as error:
        missing = [".".join(map(str, p["loc"])) for p in error.errors() if p["type"] == "missing"]
        if missing:  # not a case at all: say which shape is expected, in one line
            raise ConfigError(
                f"{where}: not a case of {manifold} as `numerate generate {manifold}` writes it "
                f"(missing {', '.join(missing)})"
            ) from None
        raise ConfigError(describe_validation_error(error, where)) from None
    try:
        spec.params(**case.params)  # the parameters a case of this manifold can have
    except ValidationError as error:
        raise ConfigError(describe_validation_error(error, f"{where}: params")) from None
    except TypeError as error:  # a key that is no parameter name (not a string)
        raise ConfigError(f"{where}: params: {error}") from None
    error_text = "no response" if response is None else None
    outcome, answer = judge(manifold, case, response, finish_reason, error_text)
    return {**record, "outcome": outcome.value, "answer": answer}


def grade_lines(lines: list[str], source: str) -> list[dict[str, Any]]:
    """Every non-empty JSON line of `source`, graded (see grade_record)."""
    graded = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            record = json_value(line, where)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{where}: not valid JSON: {error.msg}") from None
        graded.append(grade_record(record, where))
    if not graded:
        raise ConfigError(f"{source} holds no answers to grade")
    return graded


def regrade_run(store: Store, run_id: str) -> Counter[tuple[str, str]]:
    """Grade a stored run's answers again with the current graders and refresh its
    aggregates; returns how many outcomes went from one value to another."""
    changes: Counter[tuple[str, str]] = Counter()
    updates: list[Regrade] = []
    for stored in queries.stored_answers(store, run_id):
        manifold = stored.manifold
        case = registry.get(manifold).case_model.model_validate_json(stored.case_data)
        outcome, answer = judge(manifold, case, stored.raw_text, stored.finish_reason, stored.error)
        changes[stored.outcome, outcome.value] += 1
        if outcome.value != stored.outcome or answer != stored.answer:
            updates.append(
                {"model": stored.model, "case_id": stored.case_id,
                 "sample_index": stored.sample_index, "outcome": outcome.value, "answer": answer}
            )  # fmt: skip
    store.update_grades(run_id, updates)
    aggregate_stored_run(store, run_id)
    return changes


def aggregate_stored_run(store: Store, run_id: str) -> int:
    """Recompute a stored run's per-point aggregates and summaries; returns the points."""
    from numerate.aggregate import aggregate

    responses, cases = queries.aggregation_inputs(store, run_id)
    points, summaries = aggregate(responses, cases)
    store.replace_aggregates(run_id, points, summaries)
    return points.height
