"""Every named read of the results, in one module: the CLI, reports, comparisons, plots and
artifacts ask these functions, never the database in SQL (tests/test_architecture.py checks
that no SQL is written outside numerate.store). Each takes a `Source` (a writer's `Store` or
a read-only `Reader`) and returns typed values or a polars frame.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

from numerate.kernel.errors import printable, shorten
from numerate.numgen.rows import ImageRow
from numerate.store.journal import stopped_runs
from numerate.store.schema import IMAGE_COLUMNS, NUMGEN_ENDED, RUN_ENDED, DatabaseFault
from numerate.store.texts import whole_texts

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

POOLED = "*"
"""The `manifold` of a model's summary over every manifold of a run."""

MULTI_SAMPLE_COLUMNS = ("samples", "pass_at_k", "maj_at_k", "consistency")
"""Figures of runs with `samples: k > 1` (null otherwise); reports show them only then."""
SUMMARY_COLUMNS = (
    "model", "manifold", "n", "n_scored", "points", "accuracy", "ci_low", "ci_high", "chance",
    "chance_adjusted", "unparsed_rate", "truncation_rate", "error_rate", "mean_completion_tokens",
    *MULTI_SAMPLE_COLUMNS, "score", "score_low", "score_high", "tier",
)  # fmt: skip
POINT_COLUMNS = (
    "model", "manifold", "point_key", "n", "accuracy", "ci_low", "ci_high", "ci_width",
    "stop_reason", "chance_adjusted", "unparsed_rate", "truncation_rate", "error_rate",
    *MULTI_SAMPLE_COLUMNS,
)  # fmt: skip
PLOTTED_POINT_COLUMNS = (
    "model", "manifold", "point_key", "params", "n", "n_scored", "correct", "chance", "accuracy",
    "se", *MULTI_SAMPLE_COLUMNS,
)  # fmt: skip
NUMGEN_METRIC_COLUMNS = (
    "n", "accuracy", "ci_low", "ci_high", "mwe", "knower_level", "human_correlation",
    "random_correlation", "sv_slope", "sv_p_slope_is_1", "zero_rate", "overflow_rate",
)  # fmt: skip
"""The metrics a terminal shows of a NumGen run (`NumGenScores.as_row()` names)."""


class Source(Protocol):
    """What results are read from: numerate.store.Store or numerate.store.reader.Reader. Its
    `query` and `frame` take SQL: they are for this package (and `numerate db`, whose SQL is
    the user's), not for the modules that read results."""

    path: str

    def query(self, sql: str, params: Sequence[object] | None = None) -> list[tuple[Any, ...]]: ...

    def frame(self, sql: str, params: Sequence[object] | None = None) -> pl.DataFrame: ...

    def batches(
        self, sql: str, params: Sequence[object] | None = None, rows: int = ...
    ) -> Iterator[pa.RecordBatch]: ...


def _only(
    models: Sequence[str], manifolds: Sequence[str], pooled: bool
) -> tuple[str, list[object]]:
    """Conditions (and their parameters) keeping only the given models and manifolds (and the
    pooled summaries, `pooled`)."""
    sql = ""
    params: list[object] = []
    if models:
        sql += " AND list_contains(?, model)"
        params.append(list(models))
    if manifolds:
        keep = (
            f"(manifold = '{POOLED}' OR list_contains(?, manifold))"
            if pooled
            else ("list_contains(?, manifold)")
        )
        sql += f" AND {keep}"
        params.append(list(manifolds))
    return sql, params


# ---------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunRecord:
    """A run's row of `runs`, and the answers it holds."""

    run_id: str
    sweep: str
    status: str
    config_hash: str
    code_version: str
    started: datetime
    finished: datetime | None
    answered: int


def run_record(source: Source, run_id: str) -> RunRecord | None:
    rows = source.query(
        "SELECT run_id, sweep_name, status, config_hash, code_version, started_at, finished_at, "
        "(SELECT count(*) FROM responses r WHERE r.run_id = runs.run_id) FROM runs "
        "WHERE run_id = ?",
        [run_id],
    )
    return RunRecord(*rows[0]) if rows else None


STOPPED = "stopped"
"""How a run is shown whose row says `running` but whose process is gone (killed, its machine
down: numerate.store.journal.stopped_runs): it stopped without ending, and the same command
resumes it. Never stored: the row keeps `running`, which the resume takes up."""


def current_run(source: Source, run_id: str) -> RunRecord | None:
    """The run's record with its status as it is now: STOPPED for one recorded running that
    no live process holds. Read again after that is probed: one that ended as it let its
    claim go is shown as it ended, never stopped."""
    record = run_record(source, run_id)
    if record is None or record.status != "running" or not stopped_runs(source.path, [run_id]):
        return record
    now = run_record(source, run_id)
    return replace(now, status=STOPPED) if now is not None and now.status == "running" else now


def kept_answers(source: Source, run_id: str, models: Sequence[str]) -> int:
    """How many answers of `models` run `run_id` holds that a resumed run does not ask again:
    every one but an error (a failed request is sent again)."""
    if not models:
        return 0
    rows = source.query(
        "SELECT count(*) FROM responses WHERE run_id = ? AND outcome <> 'error' "
        "AND list_contains(?, model)",
        [run_id, list(models)],
    )
    return int(rows[0][0])


def latest_run_ids(source: Source, sweep: str | None, offset: int = 0) -> str | None:
    """The id of the newest run (of `sweep`), `offset` runs back."""
    where, params = ("WHERE sweep_name = ?", [sweep]) if sweep else ("", [])
    rows = source.query(
        f"SELECT run_id FROM runs {where} ORDER BY started_at DESC LIMIT 1 OFFSET {int(offset)}",
        params,
    )
    return str(rows[0][0]) if rows else None


def sweep_names(source: Source) -> list[str]:
    """The names of the sweeps the database holds runs of, sorted."""
    return [str(r[0]) for r in source.query("SELECT DISTINCT sweep_name FROM runs ORDER BY 1")]


def run_ids_starting(source: Source, prefix: str, limit: int = 6) -> list[str]:
    """Ids of the runs whose id starts with `prefix`, newest first."""
    rows = source.query(
        "SELECT run_id FROM runs WHERE starts_with(run_id, ?) ORDER BY started_at DESC "
        f"LIMIT {int(limit)}",
        [prefix],
    )
    return [str(r[0]) for r in rows]


def stopped_run_ids(source: Source, table: str = "runs") -> list[str]:
    """Ids of the runs (of `table`: runs or numgen_runs) recorded running that no live process
    holds (numerate.store.journal.stopped_runs), sorted."""
    assert table in ("runs", "numgen_runs")
    rows = source.query(f"SELECT run_id FROM {table} WHERE status = 'running'")
    return sorted(stopped_runs(source.path, [str(r[0]) for r in rows]))


def previous_run(source: Source, run_id: str) -> str | None:
    """The latest run of the same sweep that started before `run_id` and was not interrupted
    or left running: what tonight is compared with."""
    rows = source.query(
        "SELECT p.run_id FROM runs p JOIN runs r ON p.sweep_name = r.sweep_name "
        "WHERE r.run_id = ? AND p.started_at < r.started_at "
        f"AND p.status IN {RUN_ENDED} "
        "ORDER BY p.started_at DESC LIMIT 1",
        [run_id],
    )
    return str(rows[0][0]) if rows else None


@dataclass(frozen=True)
class PartRecord:
    """How one model's part of a run ended (`run_models`)."""

    model: str
    status: str
    cause: str
    n: int
    errors: int


def run_parts(source: Source, run_id: str) -> list[PartRecord]:
    rows = source.query(
        "SELECT model, status, coalesce(cause, ''), n, errors FROM run_models "
        "WHERE run_id = ? ORDER BY model",
        [run_id],
    )
    return [PartRecord(*row) for row in rows]


# ---------------------------------------------------------------------------- results


def run_status(source: Source, run_id: str) -> str | None:
    """The run's status (running, interrupted, finished, ...); None for no such run."""
    rows = source.query("SELECT status FROM runs WHERE run_id = ?", [run_id])
    return str(rows[0][0]) if rows else None


def summaries(
    source: Source, run_id: str, models: Sequence[str] = (), manifolds: Sequence[str] = ()
) -> pl.DataFrame:
    """The run's stored summaries (SUMMARY_COLUMNS): per model pooled over its manifolds
    (manifold POOLED) first, then per manifold; only the given models and manifolds when any
    are given. A run stores them as it ends (numerate.results.live reads the others)."""
    where, params = _only(models, manifolds, pooled=True)
    frame = source.frame(
        f"SELECT {', '.join(SUMMARY_COLUMNS)} FROM summaries WHERE run_id = ?{where} "
        f"ORDER BY model, (manifold = '{POOLED}') DESC, manifold",
        [run_id, *params],
    )
    check_figures(frame, run_id)
    return frame


def points(
    source: Source, run_id: str, models: Sequence[str] = (), manifolds: Sequence[str] = ()
) -> pl.DataFrame:
    """The run's stored grid points (POINT_COLUMNS), filtered like `summaries`."""
    where, params = _only(models, manifolds, pooled=False)
    frame = source.frame(
        f"SELECT {', '.join(POINT_COLUMNS)} FROM points WHERE run_id = ?{where} "
        "ORDER BY model, manifold, point_key",
        [run_id, *params],
    )
    check_figures(frame, run_id)
    return frame


def plotted_points(source: Source, run_id: str) -> pl.DataFrame:
    """What the plots read of each stored grid point of a run (PLOTTED_POINT_COLUMNS; params
    as JSON text)."""
    columns = ", ".join(
        "CAST(params AS VARCHAR) AS params" if c == "params" else c for c in PLOTTED_POINT_COLUMNS
    )
    frame = source.frame(
        f"SELECT {columns} FROM points WHERE run_id = ? ORDER BY manifold, model, point_key",
        [run_id],
    )
    check_figures(frame, run_id)
    return frame


COUNTED = ("n", "n_scored", "correct", "points", "refused", "errors")
"""Counts a stored row of figures holds: none is below 0."""
SHARES = ("accuracy", "ci_low", "ci_high", "chance", "unparsed_rate", "truncation_rate",
          "error_rate", "zero_rate", "overflow_rate")  # fmt: skip
"""Shares a stored row of figures holds (an accuracy, its interval, a rate): each is between
0 and 1 (or null: nothing scored)."""
NOT_BELOW_ZERO = ("mean_completion_tokens", "mwe", "knower_level", "counting_level")
"""Other figures no run stores below 0 (a mean of token counts, NumGen's mean weighted error
and knower level)."""
_ROUNDING = 1e-9


def check_figures(frame: pl.DataFrame, run_id: str | None = None, numgen: bool = False) -> None:
    """DatabaseFault naming the first stored row (a run's grid point or summary, a NumGen
    run's figures) whose figures no run can have: a count below 0, more correct answers than
    scored, more scored than asked, a share that is not a number or outside 0-1, a mean error
    or a knower level below 0. Such a database was changed by hand; its figures are said to
    be impossible in one line, not shown (`report` showed n -10 and accuracy nan)."""
    import polars as pl

    columns = set(frame.columns)

    def number(column: str) -> pl.Expr:  # a column made text by hand reads as nothing
        return pl.col(column).cast(pl.Float64, strict=False)

    rules = [(number(c) < 0, c, "") for c in (*COUNTED, *NOT_BELOW_ZERO) if c in columns]
    for above, below, asked in (("n_scored", "n", "asked"), ("correct", "n_scored", "scored")):
        if {above, below} <= columns:
            rules.append((number(above) > number(below), above, f" of {{{below}}} {asked}"))
    rules += [
        (number(c).is_nan() | (number(c) < -_ROUNDING) | (number(c) > 1 + _ROUNDING), c,
         " (a share: between 0 and 1)")
        for c in SHARES if c in columns
    ]  # fmt: skip
    for odd, column, more in rules:
        found = frame.filter(odd.fill_null(False))
        if found.height:
            row = found.row(0, named=True)
            said = f"{column} {row[column]}{more.format(**row)}"
            run = row.get("run_id", run_id)
            whose = f"NumGen run {run}" if numgen else _figures_of(row, run)
            hint = "" if numgen else _recounted(run, column)
            raise DatabaseFault(f"{whose} holds {said}, figures no run can have (the database "
                                f"was changed?){hint}")  # fmt: skip


def _figures_of(row: dict[str, Any], run_id: str | None) -> str:
    """Whose figures a stored row holds, in words."""
    where = [f"model {row['model']}"] if "model" in row else []
    if "manifold" in row:
        point = row.get("point_key")  # a grid value may hold a line break, and 10,000 characters
        manifold = "every manifold" if row["manifold"] == POOLED else row["manifold"]
        where.append(f"{manifold} point {shorten(printable(point), 200)}" if point is not None
                     else manifold)  # fmt: skip
    return f"run {run_id}: {', '.join(where)}" if where else f"run {run_id}"


def _recounted(run_id: str | None, column: str) -> str:
    """How a run's figures are counted again from its answers' outcomes (none for a token
    count, which the answers hold)."""
    if run_id is None or column == "mean_completion_tokens":
        return ""
    return f"; `numerate regrade --run {run_id}` counts them again from the answers"


def summarised(source: Source, run_id: str, column: str) -> list[str]:
    """The models (`column` = model) or manifolds a run's stored summaries hold (not POOLED)."""
    if column not in ("model", "manifold"):
        raise ValueError(f"not a summary column to list: {column!r}")
    rows = source.query(
        f"SELECT DISTINCT {column} FROM summaries WHERE run_id = ? AND {column} <> '{POOLED}' "
        "ORDER BY 1",
        [run_id],
    )
    return [str(r[0]) for r in rows]


def answered(source: Source, run_id: str, column: str) -> list[str]:
    """The models (`column` = model) or manifolds a run holds answers for."""
    if column not in ("model", "manifold"):
        raise ValueError(f"not a response column to list: {column!r}")
    rows = source.query(
        f"SELECT DISTINCT {column} FROM responses WHERE run_id = ? ORDER BY 1", [run_id]
    )
    return [str(r[0]) for r in rows]


def cases_answered_per_point(source: Source, run_id: str, model: str) -> dict[tuple[str, str], int]:
    """Cases of each (manifold, point key) the model answered in the run."""
    rows = source.query(
        "SELECT manifold, point_key, count(DISTINCT case_id) FROM responses "
        "WHERE run_id = ? AND model = ? GROUP BY ALL",
        [run_id, model],
    )
    return {(str(manifold), str(point)): int(n) for manifold, point, n in rows}


@dataclass(frozen=True)
class StoredAnswer:
    """A stored response with what grading it again needs."""

    model: str
    case_id: str
    sample_index: int
    manifold: str
    raw_text: str | None
    finish_reason: str | None
    error: str | None
    outcome: str
    answer: str | None
    case: CaseText


class CaseText(NamedTuple):
    """What a case's JSON is made of (numerate.planning.plan.case_json): the `cases`
    columns every case has, and its `data`."""

    manifold: str
    case_index: int
    seed: int
    params: str
    input: str
    target: str
    data: str


CASE_TEXT = (
    "c.manifold, c.case_index, c.seed, CAST(c.params AS VARCHAR), c.input, c.target, "
    "CAST(c.data AS VARCHAR)"
)


ANSWERS_A_PAGE = 10_000
"""About how many answers (with their cases) `stored_answers` and `run_cases` read at a time:
memory follows a page, not the run. Reading a run's million answers with their cases in one
query failed within DuckDB's bound (numerate.store.writer.WRITER_MEMORY: the cases' text is
about 1 KB each) and would have held them all in Python; a page at a time, 999,984 answers
with their 499,992 cases took 29 s and 128 MiB (docs/benchmarks.md,
"Grading a million answers again (2026-11-29)")."""


def answers_in(source: Source, run_id: str) -> int:
    """How many answers a run has stored."""
    return int(source.query("SELECT count(*) FROM responses WHERE run_id = ?", [run_id])[0][0])


TEXT_BYTES_A_PAGE = 32_000_000
"""About how many bytes of text (long answers whole, their cases' prompts and data) a page of
`stored_answers` and `run_cases` holds: a page of 10,000 answers of 262,144 characters
(numerate.kernel.answers.MAX_ANSWER_CHARS) would have held 2.6 GB, as would 10,000 cases of
a Shuffle Tracking story of that length. A run of short texts is paged by ANSWERS_A_PAGE
(about 8 MB of text a page, 300,000 oracle answers)."""


def _pages(source: Source, run_id: str) -> Iterator[str]:
    """A run's answers in pages of about ANSWERS_A_PAGE, and of about TEXT_BYTES_A_PAGE of
    text: each page's condition on `case_id` (a hash of the case id, so that a case's
    answers share a page)."""
    [(answers, text)] = source.query(
        "SELECT (SELECT count(*) FROM responses WHERE run_id = $1), "
        "coalesce((SELECT sum(strlen(piece)) FROM texts WHERE sha IN "
        "(SELECT raw_sha FROM responses WHERE run_id = $1)), 0) + "
        "coalesce((SELECT sum(strlen(input) + coalesce(strlen(CAST(data AS VARCHAR)), 0)) "
        "FROM cases WHERE case_id IN (SELECT case_id FROM responses WHERE run_id = $1)), 0)",
        [run_id],
    )
    pages = max(1, -(-answers // ANSWERS_A_PAGE), -(-int(text) // TEXT_BYTES_A_PAGE))
    for page in range(pages):
        yield f"hash(case_id) % {pages} = {page}"


def stored_answers(source: Source, run_id: str) -> Iterator[list[StoredAnswer]]:
    """A run's stored answers, each with its case's text, a page at a time (`_pages`)."""
    for page in _pages(source, run_id):
        rows = source.query(
            "WITH r AS (SELECT model, case_id, sample_index, manifold, raw_text, finish_reason, "
            f"error, outcome, answer, raw_sha FROM responses WHERE run_id = ? AND {page}) "
            f"SELECT r.*, {CASE_TEXT} FROM r JOIN cases c USING (case_id) "
            "WHERE c.case_id IN (SELECT case_id FROM r)",
            [run_id],
        )
        wholes = whole_texts(source.query, (row[9] for row in rows))  # a long answer's whole
        yield [
            StoredAnswer(model, case_id, sample, manifold, wholes.get(sha, text), finish, error,
                         outcome, answer, CaseText(*case))
            for model, case_id, sample, manifold, text, finish, error, outcome, answer, sha, *case
            in rows
        ]  # fmt: skip


def run_cases(source: Source, run_id: str) -> Iterator[tuple[str, str, CaseText]]:
    """(case id, generator version, its text) of each case a run answered, a page at a time
    (`_pages`; in order of id within a page)."""
    for page in _pages(source, run_id):
        rows = source.query(
            f"SELECT c.case_id, c.generator_version, {CASE_TEXT} FROM cases c WHERE c.case_id "
            f"IN (SELECT case_id FROM responses WHERE run_id = ? AND {page}) ORDER BY c.case_id",
            [run_id],
        )
        for row in rows:
            yield row[0], row[1], CaseText(*row[2:])


def responses_of(source: Source, run_id: str) -> bool:
    """Whether the run has a graded response."""
    return bool(source.query("SELECT 1 FROM responses WHERE run_id = ? LIMIT 1", [run_id]))


# ---------------------------------------------------------------------------- tokens


def token_efficiency(source: Source, run_id: str, by_point: bool = False) -> pl.DataFrame:
    """Per model and manifold (and grid point, `by_point`) of a run, its answers (errors left
    out): completion and reasoning tokens (mean, median; `reasoning_reported`: answers whose
    usage gave reasoning tokens), the mean completion tokens of correct and of wrong answers
    (wrong, unparsed and truncated: not correct, as in every accuracy), and correct answers
    per 1,000 completion tokens (over the answers with a token count)."""
    point = ", point_key" if by_point else ""
    return source.frame(
        f"SELECT model, manifold{point}, count(*) AS answers, "
        "avg(completion_tokens) AS mean_completion_tokens, "
        "median(completion_tokens) AS median_completion_tokens, "
        "count(reasoning_tokens) AS reasoning_reported, "
        "avg(reasoning_tokens) AS mean_reasoning_tokens, "
        "median(reasoning_tokens) AS median_reasoning_tokens, "
        "avg(completion_tokens) FILTER (outcome = 'correct') AS mean_tokens_correct, "
        "avg(completion_tokens) FILTER (outcome <> 'correct') AS mean_tokens_wrong, "
        "1000.0 * count(*) FILTER (outcome = 'correct' AND completion_tokens IS NOT NULL) "
        "/ nullif(sum(completion_tokens), 0) AS correct_per_1k_tokens "
        f"FROM responses WHERE run_id = ? AND outcome <> 'error' GROUP BY model, manifold{point} "
        f"ORDER BY model, manifold{point}",
        [run_id],
    )


def reasoning_loops(source: Source, run_id: str) -> pl.DataFrame:
    """How much the reasoning of a run's answers repeats itself (`reasoning_ratio`), per model,
    manifold and outcome: the answers with a reasoning, the median, 90th percentile and
    largest ratio (empty when no answer came with a reasoning)."""
    return source.frame(
        "SELECT model, manifold, outcome, count(*) AS answers, "
        "median(reasoning_ratio) AS median_ratio, "
        "quantile_cont(reasoning_ratio, 0.9) AS p90_ratio, max(reasoning_ratio) AS max_ratio "
        "FROM responses WHERE run_id = ? AND reasoning_ratio IS NOT NULL "
        "GROUP BY model, manifold, outcome ORDER BY model, manifold, outcome",
        [run_id],
    )


def most_repetitive(
    source: Source, run_id: str, limit: int = 10, manifold: str | None = None
) -> pl.DataFrame:
    """The answers of a run (of one manifold, when given) whose reasoning repeats itself
    most: the likeliest loops."""
    where, params = _only((), [manifold] if manifold is not None else (), pooled=False)
    return source.frame(
        "SELECT model, manifold, case_id, sample_index, outcome, completion_tokens, "
        "reasoning_ratio, point_key FROM responses WHERE run_id = ? "
        f"AND reasoning_ratio IS NOT NULL{where} "
        f"ORDER BY reasoning_ratio DESC, case_id LIMIT {int(limit)}",
        [run_id, *params],
    )


def token_budgets(source: Source, run_id: str) -> Iterator[tuple[str, str, list[int], list[bool]]]:
    """Per model and manifold of a run: the completion tokens of each answer with a count
    (errors left out), and whether it came to an end (false: truncated at max_tokens)."""
    rows = source.query(
        "SELECT model, manifold, list(completion_tokens ORDER BY completion_tokens), "
        "list(outcome <> 'truncated' ORDER BY completion_tokens) FROM responses "
        "WHERE run_id = ? AND outcome <> 'error' AND completion_tokens IS NOT NULL "
        "GROUP BY model, manifold ORDER BY model, manifold",
        [run_id],
    )
    for model, manifold, tokens, ended in rows:
        if tokens and tokens[0] < 0:  # sorted: the least first
            raise DatabaseFault(
                f"run {run_id}: model {model}, {manifold} holds an answer of {tokens[0]} "
                "completion tokens, a count no answer can have (the database was changed?)"
            )
        yield str(model), str(manifold), list(tokens), list(ended)


PAIR_KEYS = ("model", "manifold", "point_key", "case_id", "sample_index")
"""What pairs an answer of one run with one of another: the same model (or the two models
paired under one label) and case, by its first answer (`sample_index` 0: with `samples: k` a
case's k answers are not k independent pairs, and a test that took them so said "differ" in
26% of simulated comparisons of two equally good models at alpha 0.05, k = 5)."""

RIGHT = (
    "CASE outcome WHEN 'correct' THEN true WHEN 'error' THEN NULL "
    "WHEN 'wrong' THEN false WHEN 'unparsed' THEN false WHEN 'truncated' THEN false "
    "ELSE error('unknown outcome ' || outcome) END"
)
"""An answer as a comparison reads it: right, wrong (an unparsed or truncated answer is a
wrong answer) or no answer at all (NULL: an error, the endpoint failed)."""

_COMPARED = """
WITH {sides}joined AS (
  SELECT model, manifold, point_key, b.here IS NOT NULL AS in_base, n.here IS NOT NULL AS in_new,
         b.correct AS was, n.correct AS now
  FROM (SELECT * FROM {base} WHERE sample_index = 0) b
  FULL JOIN (SELECT * FROM {new} WHERE sample_index = 0) n
  USING (model, manifold, point_key, case_id, sample_index)
), marked AS (
  SELECT *, in_base AND in_new AND was IS NOT NULL AND now IS NOT NULL AS paired FROM joined
)
SELECT model, manifold, point_key,
       count(*) FILTER (paired) AS n,
       count(*) FILTER (in_base AND NOT in_new) AS n_base_only,
       count(*) FILTER (in_new AND NOT in_base) AS n_new_only,
       count(*) FILTER (in_base AND in_new AND NOT paired) AS n_errors,
       count(*) FILTER (paired AND was) AS base_correct,
       count(*) FILTER (paired AND now) AS new_correct,
       count(*) FILTER (paired AND was AND NOT now) AS lost,
       count(*) FILTER (paired AND NOT was AND now) AS gained
FROM marked GROUP BY ALL ORDER BY ALL
"""
"""Two runs' answers (`base`, `new`: model, manifold, point_key, case_id, sample_index,
correct, here) counted per grid point, each case by its first answer (PAIR_KEYS): pairs (n:
both answered, neither an error), answers on one side only, pairs with an error on a side,
each side's correct answers in the pairs, and the discordant cells (lost: base right and new
wrong; gained: the other way)."""


def compared_counts(
    source: Source,
    runs: tuple[str, str],
    models: Sequence[str] = (),
    manifolds: Sequence[str] = (),
    pairing: tuple[str, str, str] | None = None,
) -> pl.DataFrame:
    """Two runs' answers (`runs`: base, new) counted per grid point where they are
    (`_COMPARED`): the answers of `models` (all without) and `manifolds` (all without); or,
    `pairing` (base model, new model, label), the base run's answers of one model paired with
    the new run's of another, both under the label. Nothing of a run is read into Python but
    its counts (a million answers a side are a few rows a grid point)."""
    sides, params = [], []
    for side, run_id in zip(("b", "n"), runs, strict=True):
        only = [pairing[0 if side == "b" else 1]] if pairing else models
        where, given = _only(only, manifolds, pooled=False)
        model = "?::VARCHAR" if pairing else "model"
        sides.append(
            f"{side}_answers AS (SELECT {model} AS model, manifold, point_key, case_id, "
            f"sample_index, {RIGHT} AS correct, true AS here FROM responses "
            f"WHERE run_id = ?{where}), "
        )
        params += [*([pairing[2]] if pairing else []), run_id, *given]
    sql = _COMPARED.format(sides="".join(sides), base="b_answers", new="n_answers")
    return source.frame(sql, params)


def counted_frames(base: pl.DataFrame, new: pl.DataFrame) -> pl.DataFrame:
    """`compared_counts` of two runs' answers given as frames (PAIR_KEYS and `correct`: true,
    false, or null for no answer), counted in an in-memory DuckDB by the same SQL."""
    import duckdb

    with duckdb.connect() as con:
        for name, frame in (("given_base", base), ("given_new", new)):
            con.register(name, frame.select(*PAIR_KEYS, "correct").to_arrow())
        side = "(SELECT *, true AS here FROM {})"
        sql = _COMPARED.format(
            sides="", base=side.format("given_base"), new=side.format("given_new")
        )
        return con.sql(sql).pl()


PAIRED_COUNTS = ("n", "n_errors", "base_correct", "new_correct", "lost", "gained")
"""What `paired_counts` gives each pair of models at a grid point (see results.compare)."""


def paired_counts(source: Source, run_id: str) -> pl.DataFrame:
    """Every pair of a run's models (base < new by name) at each grid point, over the cases
    both answered, by each one's first answer (sample 0: with `samples: k` a case's answers
    are not independent pairs, and the exact test needs independent pairs): pairs (n, both
    scored), pairs with an error on a side, each side's correct answers, and the discordant
    cells (lost: base right and new wrong; gained: the other way). An unparsed or truncated
    answer is wrong."""
    right = "{}.outcome = 'correct'"
    scored = "x.outcome <> 'error' AND y.outcome <> 'error'"
    return source.frame(
        "WITH a AS (SELECT model, manifold, point_key, case_id, sample_index, outcome "
        "FROM responses WHERE run_id = ? AND sample_index = 0) "
        "SELECT x.model AS base_model, y.model AS new_model, manifold, point_key, "
        f"count(*) FILTER ({scored}) AS n, count(*) FILTER (NOT ({scored})) AS n_errors, "
        f"count(*) FILTER ({scored} AND {right.format('x')}) AS base_correct, "
        f"count(*) FILTER ({scored} AND {right.format('y')}) AS new_correct, "
        f"count(*) FILTER ({scored} AND {right.format('x')} AND NOT {right.format('y')}) "
        "AS lost, "
        f"count(*) FILTER ({scored} AND NOT {right.format('x')} AND {right.format('y')}) "
        "AS gained "
        "FROM a x JOIN a y USING (manifold, point_key, case_id, sample_index) "
        "WHERE x.model < y.model GROUP BY ALL ORDER BY ALL",
        [run_id],
    )


# ---------------------------------------------------------------------------- NumGen


def numgen_counts(source: Source, run_id: str) -> list[tuple[int, int | None, bool, bool]]:
    """(target, detected count, refused, unparsed) of each image of a NumGen run; the count
    None where nothing was counted: the image was refused, not made or unreadable, or the
    counter's answer held no count."""
    rows = source.query(
        "SELECT i.target, d.count, coalesce(i.refused, false), coalesce(d.unparsed, false) "
        "FROM numgen_images i LEFT JOIN numgen_detections d USING (run_id, prompt_id) "
        "WHERE i.run_id = ?",
        [run_id],
    )
    return [(int(target), None if count is None else int(count), bool(refused), bool(unparsed))
            for target, count, refused, unparsed in rows]  # fmt: skip


@dataclass(frozen=True)
class CountedTwice:
    """The images of a NumGen run linked to a source run (a recount, or a further counter of
    the same run), each with both counts."""

    source_run_id: str
    source_detector: str
    detector: str
    prompt_ids: list[str]
    targets: list[int]
    paths: list[str | None]
    shas: list[str | None]
    """Each image's SHA-256 as it was made (None: not recorded)."""
    source_counts: list[int | None]
    counts: list[int | None]


def numgen_counted_twice(source: Source, run_id: str) -> CountedTwice | None:
    """Both counts of the images of run `run_id`, when it counts the images of another run;
    None for a run of its own."""
    link = source.query(
        "SELECT r.source_run_id, s.detector, r.detector FROM numgen_runs r "
        "JOIN numgen_runs s ON s.run_id = r.source_run_id WHERE r.run_id = ?",
        [run_id],
    )
    if not link:
        return None
    rows = source.query(
        "SELECT i.prompt_id, i.target, i.path, i.sha256, a.count, b.count FROM numgen_images i "
        "LEFT JOIN numgen_detections b ON b.run_id = i.run_id AND b.prompt_id = i.prompt_id "
        "LEFT JOIN numgen_detections a ON a.run_id = ? AND a.prompt_id = i.prompt_id "
        "WHERE i.run_id = ? ORDER BY i.prompt_index",
        [link[0][0], run_id],
    )
    columns = list(zip(*rows, strict=True)) if rows else [()] * 6
    return CountedTwice(
        str(link[0][0]), str(link[0][1]), str(link[0][2]),
        [str(p) for p in columns[0]], [int(t) for t in columns[1]], list(columns[2]),
        list(columns[3]), list(columns[4]), list(columns[5]),
    )  # fmt: skip


def numgen_linked_runs(source: Source, limit: int = 20) -> list[str]:
    """The ended NumGen runs (finished or degraded) that count another run's images, newest
    first."""
    rows = source.query(
        "SELECT run_id FROM numgen_runs WHERE source_run_id IS NOT NULL AND status IN "
        f"{NUMGEN_ENDED} "
        f"ORDER BY started_at DESC LIMIT {int(limit)}"
    )
    return [str(row[0]) for row in rows]


def numgen_run_config(source: Source, run_id: str) -> tuple[str, str] | None:
    """A NumGen run's config (JSON) and status; None when there is no such run."""
    rows = source.query("SELECT config, status FROM numgen_runs WHERE run_id = ?", [run_id])
    return (str(rows[0][0]), str(rows[0][1])) if rows else None


def numgen_image_rows(source: Source, run_id: str) -> list[ImageRow]:
    """The `numgen_images` rows of a run (without its run id), in prompt order, timestamps as
    ISO text (a manifest's form)."""
    names = [c for c in IMAGE_COLUMNS if c != "run_id"]
    quoted = ", ".join(f'"{c}"' for c in names)
    rows = source.query(
        f"SELECT {quoted} FROM numgen_images WHERE run_id = ? ORDER BY prompt_index", [run_id]
    )
    found = [dict(zip(names, row, strict=True)) for row in rows]
    return [cast(ImageRow, {**row, "created_at": str(row["created_at"])}) for row in found]


def numgen_metrics(source: Source, run_id: str) -> dict[str, object] | None:
    """A NumGen run's stored metrics (NUMGEN_METRIC_COLUMNS)."""
    import polars as pl

    rows = source.query(
        f"SELECT {', '.join(NUMGEN_METRIC_COLUMNS)} FROM numgen_metrics WHERE run_id = ?",
        [run_id],
    )
    if not rows:
        return None
    metrics = dict(zip(NUMGEN_METRIC_COLUMNS, rows[0], strict=True))
    check_figures(pl.DataFrame([metrics]), run_id, numgen=True)
    return metrics


def numgen_targets(source: Source, run_id: str) -> pl.DataFrame:
    """Accuracy per target number of a NumGen run."""
    return source.frame(
        "SELECT target, n, correct, accuracy, ci_low, ci_high, mean_count FROM numgen_targets "
        "WHERE run_id = ? ORDER BY target",
        [run_id],
    )


def numgen_leaderboard(source: Source) -> pl.DataFrame:
    """Every finished NumGen run's headline figures (the `numgen_leaderboard` view)."""
    frame = source.frame(
        "SELECT model, detector, accuracy, ci_low, ci_high, mwe, counting_level, "
        "webers_law, n, refused, errors, run_id FROM numgen_leaderboard"
    )
    check_figures(frame, numgen=True)
    return frame.drop("run_id")


def numgen_confusion(source: Source, run_id: str) -> tuple[str, str, str, str] | None:
    """(run id, generator, detector, confusion JSON) of NumGen run `run_id` (None: it has no
    metrics)."""
    rows = source.query(
        "SELECT run_id, generator, detector, confusion FROM numgen_metrics WHERE run_id = ?",
        [run_id],
    )
    return (str(rows[0][0]), str(rows[0][1]), str(rows[0][2]), str(rows[0][3])) if rows else None


def calibrations_shown(path: str) -> str:
    """How a database's detector calibrations are shown (`path` quoted for a shell), as the
    end of a sentence."""
    return f'`numerate db {path} "SELECT * FROM numgen_calibration"` shows them'


def numgen_run_count(source: Source, kind: str = "benchmark", finished: bool = True) -> int:
    """How many NumGen runs of `kind` (benchmark or calibration) the database holds: those
    that ended with their metrics, finished or degraded (those `numgen report` shows), or any."""
    where = f" AND status IN {NUMGEN_ENDED}" if finished else ""
    rows = source.query(f"SELECT count(*) FROM numgen_runs WHERE kind = ?{where}", [kind])
    return int(rows[0][0])


def numgen_runs_named(source: Source, text: str) -> list[str]:
    """Ids of the NumGen runs with metrics that `text` names, newest first: `latest` and
    `previous` one each, of the benchmark runs that ended with their metrics (finished or
    degraded: a detector's calibration, or an interrupted run, is named by its id), else those
    whose id starts with `text` (an exact id alone)."""
    text = text.strip()
    base = "SELECT m.run_id FROM numgen_metrics m JOIN numgen_runs r USING (run_id) "
    if text in ("latest", "previous"):
        offset = 1 if text == "previous" else 0
        rows = source.query(
            base + f"WHERE r.kind = 'benchmark' AND r.status IN {NUMGEN_ENDED} "
            f"ORDER BY r.started_at DESC LIMIT 1 OFFSET {offset}"
        )
    else:
        rows = source.query(
            base + "WHERE starts_with(m.run_id, ?) ORDER BY r.started_at DESC LIMIT 6", [text]
        )
    ids = [str(row[0]) for row in rows]
    return [text] if text in ids else ids


def calibration_by_target(source: Source, detector: str) -> dict[int, tuple[int, int]]:
    """{target: (correct, n)} of a detector's latest calibration ({} when it has none)."""
    rows = source.query(
        "SELECT target, correct, n FROM numgen_calibration WHERE detector = ?", [detector]
    )
    return {int(target): (int(correct), int(n)) for target, correct, n in rows}


def detector_calibration(source: Source, detector: str) -> tuple[int, int]:
    """(correct, n) of a detector's calibration counts."""
    rows = source.query(
        "SELECT sum(correct), sum(n) FROM numgen_calibration WHERE detector = ?", [detector]
    )
    correct, n = rows[0] if rows else (0, 0)
    return int(correct or 0), int(n or 0)


def tables(source: Source) -> pl.DataFrame:
    """The database's tables and views (what `numerate db` shows without SQL)."""
    return source.frame(
        "SELECT table_name AS name, table_type AS kind FROM information_schema.tables "
        "ORDER BY table_type, table_name"
    )
