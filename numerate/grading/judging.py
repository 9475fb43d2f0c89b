"""From an answer to its grade: the outcome of one response. Pure code."""

from __future__ import annotations

from dataclasses import dataclass

from numerate.config.sweep import ModelConfig
from numerate.kernel.answers import compression_ratio
from numerate.manifolds import registry
from numerate.manifolds.common import CaseBase
from numerate.manifolds.grading import Outcome
from numerate.planning.plan import PlannedCase
from numerate.store.rows import Reasoning, ResponseRow


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
    sample: int = 0
    """Which of the case's `samples` answers this is (0-based)."""
    received_chars: int | None = None
    """The length of an answer `text` holds cut (numerate.kernel.answers), as received."""
    reasoning: str | None = None
    """What a reasoning model sent beside its answer (its `reasoning_content` or `reasoning`
    field), or the reasoning block of the text (`<think>...</think>`); None when it sent none
    (or it was not recorded)."""
    reasoning_chars: int | None = None
    """The length of the reasoning `reasoning` holds cut, as received."""
    reasoning_tokens: int | None = None
    """The reasoning tokens the endpoint's usage reported (None: it reported none)."""

    def reasoning_columns(self) -> Reasoning:
        """The reasoning columns of its `completions` and `responses` rows."""
        return {
            "reasoning": self.reasoning,
            "reasoning_cut": None if self.reasoning is None else self.reasoning_chars is not None,
            "reasoning_chars": self.reasoning_chars,
            "reasoning_tokens": self.reasoning_tokens,
            "reasoning_ratio": None
            if self.reasoning is None
            else compression_ratio(self.reasoning),
        }


def judge(
    manifold: str, case: CaseBase, text: str | None, finish_reason: str | None,
    error: str | None = None,
) -> tuple[Outcome, str | None]:  # fmt: skip
    """The outcome of one answer and the answer as the grader read it.

    An error ended the request's retries; a response cut at max_tokens (finish_reason
    "length") is `truncated` even when an answer can be read from it (the answer is kept).
    """
    if error is not None:
        return Outcome.ERROR, None
    grade = registry.get(manifold).grade(case, text or "")
    if finish_reason == "length":
        return Outcome.TRUNCATED, grade.answer
    return grade.outcome, grade.answer


def grade_response(
    planned: PlannedCase, completion: Completion, run_id: str, model: ModelConfig
) -> ResponseRow:
    """The `responses` row of one answer: outcome correct | wrong | unparsed | truncated |
    error (see `judge`)."""
    outcome, answer = judge(
        planned.manifold, planned.case, completion.text, completion.finish_reason,
        completion.error,
    )  # fmt: skip
    return {
        "run_id": run_id,
        "model": model.name,
        "model_id": model.model_id,
        "manifold": planned.manifold,
        "case_id": planned.case_id,
        "sample_index": completion.sample,
        "point_key": planned.point_key,
        "request_hash": completion.request_hash,
        "raw_text": completion.text,
        "raw_cut": completion.received_chars is not None,
        "raw_chars": completion.received_chars,
        "answer": answer,
        "outcome": outcome.value,
        "error": completion.error,
        "finish_reason": completion.finish_reason,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "latency_s": completion.latency_s,
        "cached": completion.fetched_by is not None and completion.fetched_by != run_id,
        **completion.reasoning_columns(),
    }
