"""A run's answers reduced where they are, for numerate.results.aggregate: per grid point, the
counts of its answers and how many of its cases were alike (the same answers, scored and
correct answers, majority vote and agreement: `CASE_KINDS`); per model and manifold (and per
model), the totals over answers. What reaches Python follows the grid points and the kinds of
case, not the answers nor the cases, so a run of a million answers aggregates in the memory of
its points, with one answer a case or several: DuckDB does the rest within its bound
(numerate.store.writer.WRITER_MEMORY).

The same SQL reads a stored run (`of_run`) and answers given as frames (`of_frames`, in an
in-memory DuckDB): one aggregation, tested on both.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from numerate.store.duckdb_words import sql_literal
from numerate.store.schema import StoreError

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from numerate.store.queries import Source

FLOORS = ["chance", "chance_random", "chance_heuristic"]
"""The floors of a case (numerate.results.aggregate): means over the scored answers."""

COUNTS = """
    count(*) AS n,
    count(*) FILTER (outcome = 'correct')::INTEGER AS correct,
    count(*) FILTER (outcome = 'wrong')::INTEGER AS wrong,
    count(*) FILTER (outcome = 'unparsed')::INTEGER AS unparsed,
    count(*) FILTER (outcome = 'truncated')::INTEGER AS truncated,
    count(*) FILTER (outcome = 'error')::INTEGER AS error,
    avg(completion_tokens::DOUBLE) AS mean_completion_tokens,
    median(completion_tokens::DOUBLE) AS median_completion_tokens,
    avg(latency_s) AS mean_latency_s"""
"""A group's figures over its answers (tokens and latency over those that have them)."""

SCORED_FLOORS = ", ".join(
    f"coalesce(avg({c}) FILTER (outcome <> 'error'), avg({c})) AS {c}" for c in FLOORS
)
"""Each floor's mean over the scored answers; over all when every answer is an error."""

MANIFOLDS = "string_agg(DISTINCT manifold, ',' ORDER BY manifold) AS manifolds"
"""A group's manifolds, joined by commas."""

POINT_KEYS = ["run_id", "model", "manifold", "point_key"]
"""What names a grid point's answers."""

CASE_KINDS = [
    "case_answers", "case_scored", "case_correct", "case_truncated", "case_majority",
    "case_agrees",
]  # fmt: skip
"""What makes cases of a point alike: their answers, scored, correct and truncated answers,
majority vote (numerate.kernel.samples.majority_vote: 1, 0, or the right share of a tie) and
whether their scored answers agree (numerate.kernel.samples.agrees)."""

UNKNOWN = ["unknown_answers", "unknown_case"]
"""The counts' columns for a point's answers without a stored case: how many, and the least
of their case ids."""

SCAN_ROWS = 100_000
"""Rows a streamed scan (`Stream`) hands over at a time."""

RUN_RESPONSES = (
    "(SELECT run_id, model, manifold, case_id, point_key, outcome, answer, completion_tokens, "
    "latency_s FROM responses WHERE run_id = $1)"
)
"""A stored run's responses (the run id: the one parameter)."""

RUN_CASES = (
    "(SELECT case_id, params, chance, coalesce(chance_random, chance) AS chance_random, "
    "chance_heuristic FROM cases WHERE case_id IN (SELECT case_id FROM responses WHERE "
    "run_id = $1))"
)
"""The cases of those responses."""

Read = Callable[[str], "pl.DataFrame"]
"""Runs a SELECT where the answers are; its result as a polars frame."""

Stream = Callable[[str], "Iterable[pa.RecordBatch]"]
"""Runs a SELECT where the answers are; its result a batch of rows at a time, in order."""


@dataclass(frozen=True)
class Reduced:
    """A run's answers, reduced: `counts` (per point: its COUNTS, SCORED_FLOORS and params),
    `kinds` (per point and kind of case, its CASE_KINDS and how many `cases` were so: see
    numerate.results.aggregate), `manifold` and `model` (COUNTS, MANIFOLDS and the `case_set`
    per model and manifold, and per model: see `case_sets`)."""

    counts: pl.DataFrame
    kinds: pl.DataFrame
    manifold: pl.DataFrame
    model: pl.DataFrame


def _statements(responses: str, cases: str) -> dict[str, str]:
    """Each reduction's SQL over the relations (or subqueries) `responses` and `cases` (one
    row per case id, as the store keeps it). Only the per-point counts join each answer with
    its case, for its floors alone (and the least id of an answer whose case has none, which
    is an error); a point's params are those of its least case id, joined
    a point at a time (its cases share them); the rest read the answers alone. (Every
    reduction joined each answer with its case and params: a hash table of a million cases,
    60% of it params, in each.)"""
    joined = f"""WITH joined AS (
        SELECT r.run_id, r.model, r.manifold, r.point_key, r.case_id, r.outcome,
               r.completion_tokens, r.latency_s, c.chance::DOUBLE AS chance,
               c.chance_random::DOUBLE AS chance_random,
               c.chance_heuristic::DOUBLE AS chance_heuristic
        FROM {responses} r LEFT JOIN {cases} c USING (case_id))"""
    keys = ", ".join(POINT_KEYS)
    first_keys = ", ".join(f"f.{key}" for key in POINT_KEYS)
    return {
        "counts": f"{joined} SELECT {keys}, {COUNTS}, {SCORED_FLOORS}, "
        f"count(*) FILTER (chance IS NULL) AS {UNKNOWN[0]}, "
        f"min(case_id) FILTER (chance IS NULL) AS {UNKNOWN[1]} FROM joined GROUP BY {keys}",
        "params": f"SELECT {first_keys}, any_value(c.params) AS params FROM (SELECT {keys}, "
        f"min(case_id) AS case_id FROM {responses} GROUP BY {keys}) f LEFT JOIN {cases} c "
        f"ON c.case_id = f.case_id GROUP BY {first_keys}",
        "samples": "SELECT coalesce(max(n), 1) AS most FROM "
        f"(SELECT count(*) AS n FROM {responses} GROUP BY run_id, model, case_id)",
        "kinds": _kinds(responses, several=True),
        "one_answer_kinds": _kinds(responses, several=False),
        "manifold": f"SELECT run_id, model, manifold, {COUNTS}, {MANIFOLDS} "
        f"FROM {responses} GROUP BY run_id, model, manifold",
        "model": f"SELECT run_id, model, {COUNTS}, {MANIFOLDS} "
        f"FROM {responses} GROUP BY run_id, model",
    }


def _kinds(responses: str, several: bool) -> str:
    """Per point, how many of its cases were of each kind (CASE_KINDS). A case's answers are
    reduced an entry per distinct answer; then per number of votes (its scored answers alike,
    read: an answer that could not be read has no vote); then per case: its majority vote is
    the share of right answers among the most voted (a tie is broken at random), it agrees when
    one answer has every scored sample's vote. With one answer a case (`several` False: the
    caller has checked) a case is its answer, and the same figures need no group per case:
    checked against the general form by tests/results/test_aggregate.py."""
    keys = ", ".join(POINT_KEYS)
    per_case = f"""per_case AS (
        SELECT {keys}, 1 AS case_answers, (outcome <> 'error')::INTEGER AS case_scored,
               (outcome = 'correct')::INTEGER AS case_correct,
               (outcome = 'truncated')::INTEGER AS case_truncated,
               (outcome = 'correct' AND answer IS NOT NULL)::DOUBLE AS case_majority,
               outcome <> 'error' AND answer IS NOT NULL AS case_agrees
        FROM {responses})"""
    if several:
        per_case = f"""per_answer AS (
        SELECT {keys}, case_id, answer, count(*) AS answers,
               count(*) FILTER (outcome <> 'error') AS scored,
               count(*) FILTER (outcome = 'correct') AS correct,
               count(*) FILTER (outcome = 'truncated') AS truncated
        FROM (SELECT {keys}, case_id, outcome, answer::VARCHAR AS answer FROM {responses})
        GROUP BY {keys}, case_id, answer),
    per_votes AS (
        SELECT {keys}, case_id, CASE WHEN answer IS NULL THEN 0 ELSE scored END AS votes,
               sum(answers) AS answers, sum(scored) AS scored, sum(correct) AS correct,
               sum(truncated) AS truncated, count(*) AS named,
               count(*) FILTER (correct > 0) AS named_right
        FROM per_answer GROUP BY ALL),
    per_case AS (
        SELECT {keys}, sum(answers)::INTEGER AS case_answers,
               sum(scored)::INTEGER AS case_scored, sum(correct)::INTEGER AS case_correct,
               sum(truncated)::INTEGER AS case_truncated,
               CASE WHEN max(votes) > 0 THEN arg_max(named_right / named, votes) ELSE 0 END
                   AS case_majority,
               coalesce(sum(named) FILTER (votes > 0) = 1
                        AND coalesce(sum(scored) FILTER (votes = 0), 0) = 0, false)
                   AS case_agrees
        FROM per_votes GROUP BY {keys}, case_id)"""
    return (
        f"WITH {per_case} SELECT {keys}, {', '.join(CASE_KINDS)}, count(*) AS cases "
        "FROM per_case GROUP BY ALL"
    )


def case_sets(read: Read, stream: Stream, responses: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Each model and manifold's case set, and each model's (frames keyed by run_id, model
    and manifold, and by run_id and model): the first 12 hex digits of the SHA-256 of its
    distinct case ids, sorted and joined by commas (the same name for the same cases in every
    run).

    Hashed as each model and manifold's sorted ids stream past, so that memory follows a batch
    of rows and DuckDB sorts one manifold's ids at a time (DuckDB's `string_agg` of a million
    ids was one 64 MB string; its sort of a million ids held 222 MiB, of a third of them 95
    MiB). A model's sorted ids are its manifolds' one after the other, in the manifolds'
    order, when each manifold's ids all sort after the one's before (numerate's case ids
    begin with their manifold's name); a model whose ids do not is hashed from its own."""
    import polars as pl

    groups = read(f"SELECT DISTINCT run_id, model, manifold FROM {responses} ORDER BY ALL")
    by_manifold: list[tuple[str, str, str, str]] = []
    models: dict[tuple[str, str], _Joined | None] = {}  # None: its ids to be sorted alone
    last: dict[tuple[str, str], str] = {}  # each model's greatest id so far
    for run_id, model, manifold in groups.iter_rows():
        key = (run_id, model)
        mine, whole = _Joined(), models.setdefault(key, _Joined())
        where = f"{_model(run_id, model)} AND manifold = {sql_literal(manifold)}"
        for first, final, joined in _sorted_ids(stream, responses, where):
            if whole is not None and mine.empty and key in last and not last[key] < first:
                whole = models[key] = None
            mine.add(joined)
            if whole is not None:
                whole.add(joined)
            last[key] = final
        by_manifold.append((run_id, model, manifold, mine.name()))
    by_model = []
    for (run_id, model), whole in models.items():
        if whole is None:
            whole = _Joined()
            for _, _, joined in _sorted_ids(stream, responses, _model(run_id, model)):
                whole.add(joined)
        by_model.append((run_id, model, whole.name()))
    keys = ["run_id", "model", "manifold", "case_set"]
    return (
        pl.DataFrame(by_manifold, schema=dict.fromkeys(keys, pl.String), orient="row"),
        pl.DataFrame(by_model, schema=dict.fromkeys(keys[:2] + keys[3:], pl.String), orient="row"),
    )


def _model(run_id: str, model: str) -> str:
    return f"run_id = {sql_literal(run_id)} AND model = {sql_literal(model)}"


def _sorted_ids(stream: Stream, responses: str, where: str) -> Iterator[tuple[str, str, bytes]]:
    """The distinct case ids of the answers `where` selects, sorted, a batch at a time: its
    first id, its last, and its ids joined by commas."""
    import polars as pl

    sql = f"SELECT DISTINCT case_id FROM {responses} WHERE {where} ORDER BY case_id"
    for batch in stream(sql):
        if batch.num_rows:
            ids = batch.column(0)
            joined = pl.Series(ids).str.join(",").item()
            yield ids[0].as_py(), ids[-1].as_py(), joined.encode()


class _Joined:
    """The SHA-256 of strings joined by commas, given a run of them (joined) at a time."""

    def __init__(self) -> None:
        self.digest = hashlib.sha256()
        self.empty = True

    def add(self, joined: bytes) -> None:
        self.digest.update(joined if self.empty else b"," + joined)
        self.empty = False

    def name(self) -> str:
        return self.digest.hexdigest()[:12]


def reduce_answers(read: Read, stream: Stream, responses: str, cases: str) -> Reduced:
    """The answers in `responses` (run_id, model, manifold, case_id, point_key, outcome, answer,
    completion_tokens, latency_s) and their `cases` (case_id, params, chance, chance_random,
    chance_heuristic), reduced by `read`.

    Raises:
        UnknownCase: a response whose case is not in `cases`.
    """
    sql = _statements(responses, cases)
    counts, kinds = reduce_points(read, responses, cases)
    by_manifold, by_model = case_sets(read, stream, responses)
    manifold = read(sql["manifold"]).join(
        by_manifold, on=["run_id", "model", "manifold"], how="left"
    )
    model = read(sql["model"]).join(by_model, on=["run_id", "model"], how="left")
    return Reduced(counts, kinds, manifold, model)


def reduce_points(read: Read, responses: str, cases: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`reduce_answers`' counts and kinds alone (what a run's standing needs).

    Raises:
        UnknownCase: a response whose case is not in `cases`.
    """
    import polars as pl

    sql = _statements(responses, cases)
    counts = read(sql["counts"])
    unknown = counts.filter(pl.col(UNKNOWN[0]) > 0)
    if unknown.height:
        raise UnknownCase(str(unknown[UNKNOWN[1]].min()))
    counts = counts.drop(UNKNOWN).with_columns(pl.col(FLOORS).cast(pl.Float64))
    counts = counts.join(read(sql["params"]), on=POINT_KEYS, how="left")
    # one answer a case: no group per case (a million answers' kinds in 2 s and +40-56 MiB
    # with them; docs/benchmarks.md, "A point's cases as kinds (2026-11-29)")
    several = read(sql["samples"])["most"][0] > 1
    return counts, read(sql["kinds" if several else "one_answer_kinds"])


class UnknownCase(ValueError):
    """A response whose case is not stored: its floors and grid point are not known."""

    def __init__(self, case_id: str) -> None:
        super().__init__(f"response for case {case_id!r} has no stored case")
        self.case_id = case_id


def of_run(source: Source, run_id: str) -> Reduced:
    """A stored run's answers, reduced in its database.

    Raises:
        StoreError: an answer of the run stored without its case.
    """
    with _cases_of(run_id):
        return reduce_answers(
            lambda sql: source.frame(sql, [run_id]),
            lambda sql: source.batches(sql, [run_id], SCAN_ROWS),
            RUN_RESPONSES,
            RUN_CASES,
        )


def points_of_run(source: Source, run_id: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A stored run's `reduce_points`, in its database (StoreError: as `of_run`)."""
    with _cases_of(run_id):
        return reduce_points(lambda sql: source.frame(sql, [run_id]), RUN_RESPONSES, RUN_CASES)


@contextlib.contextmanager
def _cases_of(run_id: str) -> Iterator[None]:
    """A stored answer without its case is the database's damage, said as a StoreError."""
    try:
        yield
    except UnknownCase as unknown:
        raise StoreError(
            f"run {run_id}: an answer for case {unknown.case_id!r} is stored without its case "
            "(the `cases` table lost rows: a damaged database, or rows deleted by hand); its "
            "figures cannot be computed"
        ) from None


def completed(responses: pl.DataFrame, cases: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Answers given as frames with the columns they may lack: answer (none), chance_random
    (the uniform guess's floor: the case's chance) and chance_heuristic (none); a case given
    twice counts once (its first row), as the store holds it."""
    import polars as pl

    cases = cases.unique(subset="case_id", keep="first", maintain_order=True)

    if "chance_random" not in cases.columns:
        cases = cases.with_columns(chance_random=pl.col("chance"))
    if "chance_heuristic" not in cases.columns:
        cases = cases.with_columns(chance_heuristic=pl.lit(None, dtype=pl.Float64))
    if "answer" not in responses.columns:
        responses = responses.with_columns(answer=pl.lit(None, dtype=pl.String))
    return responses, cases


def of_frames(responses: pl.DataFrame, cases: pl.DataFrame) -> Reduced:
    """Answers given as frames (see `reduce_answers`; answer, chance_random and
    chance_heuristic may be absent: none, the uniform guess's floor, none), reduced in an
    in-memory DuckDB."""
    import duckdb

    responses, cases = completed(responses, cases)
    with duckdb.connect() as con:
        con.register("given_responses", responses.to_arrow())
        con.register("given_cases", cases.to_arrow())
        return reduce_answers(
            lambda sql: con.sql(sql).pl(),
            lambda sql: con.sql(sql).to_arrow_reader(SCAN_ROWS),
            "given_responses",
            "given_cases",
        )
