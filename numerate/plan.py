"""From a sweep config to the cases it evaluates, and from a response to its grade. Pure code."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from manifolds import registry
from manifolds.common import CaseBase, point_seed
from manifolds.grading import Outcome
from numerate.config import ManifoldSweep, ModelConfig


@dataclass(frozen=True, slots=True)
class PlannedCase:
    """A case of a sweep: its `cases` row, with what the pipeline needs to send and grade it.

    A sweep holds all of its cases at once, so a planned case is flat: plain fields, and the
    full case as its JSON text (cheap to cache and to read back from Prefect's result storage),
    parsed only where a manifold needs it. Holding parsed cases (a dozen objects each) made
    Python's garbage collector walk them again and again: it cost more than grading.
    """

    case_id: str
    manifold: str
    point_key: str
    chance: float
    params: str
    """The generation parameters as JSON, keys sorted."""
    seed: int
    index: int
    input: str
    target: str
    case_json: str

    @property
    def case(self) -> CaseBase:
        """The full case, parsed from its JSON at each call (keep it while you need it)."""
        return registry.get(self.manifold).case_model.model_validate_json(self.case_json)

    @classmethod
    def of(cls, case: CaseBase, case_id: str, point_key: str, chance: float) -> PlannedCase:
        return cls(
            case_id, case.manifold, point_key, chance, json.dumps(case.params, sort_keys=True),
            case.seed, case.index, case.input, case.target, case.model_dump_json(),
        )  # fmt: skip


def case_id(manifold: str, seed: int, index: int) -> str:
    """Stable id of a case: the same case has the same id in every run and sweep."""
    return f"{manifold}-{seed:016x}-{index}"


def plan_manifold(sweep: ManifoldSweep, base_seed: int) -> list[PlannedCase]:
    """Every case of every grid point of one manifold entry, in a stable order."""
    spec = registry.get(sweep.manifold)
    planned = []
    for key, params in sweep.points():
        chance = spec.chance_level(params)
        seed = point_seed(spec.name, params, base_seed)
        for index in range(sweep.count):
            case = spec.generate(params, seed, index)
            planned.append(PlannedCase.of(case, case_id(spec.name, seed, index), key, chance))
    return planned


def case_row(planned: PlannedCase) -> dict[str, Any]:
    """The `cases` table row of a planned case."""
    return {
        "case_id": planned.case_id,
        "manifold": planned.manifold,
        "point_key": planned.point_key,
        "params": planned.params,
        "seed": planned.seed,
        "case_index": planned.index,
        "input": planned.input,
        "target": planned.target,
        "chance": planned.chance,
        "data": planned.case_json,
    }


def generator_version() -> str:
    """Hash of the code that makes a sweep's cases: the manifolds, and the config and planning
    modules. A change to any of them is never answered from Prefect's cache."""
    digest = hashlib.sha256()
    sources = sorted(Path(registry.__file__).parent.glob("*.py"))
    sources += [Path(__file__), Path(__file__).with_name("config.py")]
    for path in sources:
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# ---------------------------------------------------------------------------- requests


def messages_for(model: ModelConfig, planned: PlannedCase) -> list[dict[str, str]]:
    """The chat messages sent for a case."""
    messages = [{"role": "user", "content": planned.input}]
    if model.system_prompt:
        messages.insert(0, {"role": "system", "content": model.system_prompt})
    return messages


def request_hash(model_id: str, messages: list[dict[str, str]], sampling: dict[str, Any]) -> str:
    """Key of a request: a hash of (endpoint model id, messages, sampling parameters)."""
    payload = json.dumps(
        {"model": model_id, "messages": messages, "sampling": sampling},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()


# ---------------------------------------------------------------------------- grading


@dataclass(frozen=True, slots=True)
class Completion:
    """What came back for one request: an answer, or the error that ended its retries."""

    request_hash: str
    text: str | None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    attempts: int = 1
    error: str | None = None
    fetched_by: str | None = None
    """Run that sent the request (None for an error, which is never stored as an answer)."""


def grade_response(
    planned: PlannedCase, completion: Completion, run_id: str, model: ModelConfig
) -> dict[str, Any]:
    """The `responses` row of one case: outcome correct | wrong | unparsed | truncated | error.

    An error ended the request's retries; a response cut at max_tokens (finish_reason
    "length") is `truncated` even when an answer can be read from it (the answer is kept).
    """
    answer = None
    if completion.error is not None:
        outcome = Outcome.ERROR
    else:
        grade = registry.get(planned.manifold).grade(planned.case, completion.text or "")
        answer = grade.answer
        outcome = Outcome.TRUNCATED if completion.finish_reason == "length" else grade.outcome
    return {
        "run_id": run_id,
        "model": model.name,
        "model_id": model.model,
        "manifold": planned.manifold,
        "case_id": planned.case_id,
        "point_key": planned.point_key,
        "request_hash": completion.request_hash,
        "raw_text": completion.text,
        "answer": answer,
        "outcome": outcome.value,
        "error": completion.error,
        "finish_reason": completion.finish_reason,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "latency_s": completion.latency_s,
        "cached": completion.fetched_by is not None and completion.fetched_by != run_id,
    }
