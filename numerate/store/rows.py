"""The rows the store writes, typed: one TypedDict per table, and each table's column list
derived from it (numerate.store.schema). A row built with a misspelt or missing column is a
type error (mypy), and a write of a row without a column fails (KeyError) instead of storing
NULL. Pure: no DuckDB.

Rows stay dicts at run time (journaled as JSON Lines, written through Arrow): a typed row
costs nothing over an untyped one."""

from datetime import datetime
from typing import NotRequired, TypedDict, get_type_hints


class CaseRow(TypedDict):
    """`cases`: a generated case (deterministic: shared by every run that plans it)."""

    case_id: str
    manifold: str
    point_key: str
    params: str
    """The point's parameters, as JSON."""
    seed: int
    case_index: int
    input: str
    target: str
    chance: float
    data: str
    """The case itself, as JSON."""
    generator_version: str
    chance_random: float | None
    chance_heuristic: float | None


class Reasoning(TypedDict):
    """What a reasoning model sent beside its answer, in `completions` and `responses` (the
    latter also for an answer the former does not keep: all of max_tokens spent reasoning).
    None: it sent none, or the row was stored before schema 12 (not recorded), never 0."""

    reasoning: str | None
    """Its reasoning, cut as an answer's text is."""
    reasoning_cut: bool | None
    """Whether `reasoning` is cut to numerate.kernel.answers.MAX_ANSWER_CHARS."""
    reasoning_chars: int | None
    """The length in characters of a cut reasoning as received (None when kept whole)."""
    reasoning_tokens: int | None
    """The reasoning tokens the endpoint's usage reported."""
    reasoning_ratio: float | None
    """How much the stored reasoning repeats itself (numerate.kernel.answers.compression_ratio:
    a reasoning trace that loops compresses far more)."""


class CompletionRow(Reasoning):
    """`completions`: what an endpoint answered to one request (the response cache)."""

    request_hash: str
    run_id: str
    base_url: str | None
    model_id: str
    revision: str | None
    sample_index: int
    text: str | None
    text_cut: bool
    """Whether `text` is the answer cut to numerate.kernel.answers.MAX_ANSWER_CHARS."""
    text_chars: int | None
    """The length in characters of a cut answer as received (None when kept whole)."""
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float | None
    attempts: int
    created_at: datetime | str
    """A time; a string once read back from a journal."""


class ResponseRow(Reasoning):
    """`responses`: one graded answer of a run."""

    run_id: str
    model: str
    model_id: str
    manifold: str
    case_id: str
    sample_index: int
    point_key: str
    request_hash: str
    raw_text: str | None
    raw_cut: bool
    """Whether `raw_text` is the answer cut to numerate.kernel.answers.MAX_ANSWER_CHARS."""
    raw_chars: int | None
    """The length in characters of a cut answer as received (None when kept whole)."""
    answer: str | None
    outcome: str
    """correct, wrong, unparsed, truncated or error (numerate.manifolds.grading.Outcome)."""
    error: str | None
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float | None
    cached: bool
    graded_at: NotRequired[datetime | str]
    """Set by the store when the row is written (or kept from the journal)."""


class PointStop(TypedDict):
    """How an adaptively sampled grid point stopped (numerate.planning.adaptive.Sampler.stops)."""

    manifold: str
    point_key: str
    asked: int
    reason: str
    width: float


class PointStopRow(PointStop):
    """`point_stops`: a model's point stop, in a run."""

    run_id: str
    model: str
    decided_at: datetime


class RunPartRow(TypedDict):
    """`run_models`: how one model's part of a run ended (numerate.grading.verdict.PartVerdict)."""

    run_id: str
    model: str
    status: str
    cause: str | None
    n: int
    errors: int
    error_rate: float
    decided_at: datetime


class Regrade(TypedDict):
    """A new grade of one stored response (numerate.results.regrade)."""

    model: str
    case_id: str
    sample_index: int
    outcome: str
    answer: str | None


def columns(row: type) -> tuple[str, ...]:
    """A row type's columns, in the order its class declares them."""
    return tuple(get_type_hints(row))
