"""What a run's Parquet shards must hold before anything of them is written.

A shard comes from another machine, another version of numerate, or someone's hands: every
table of a run is read and checked before the first row is inserted, so that a run loads whole
or not at all. Each problem is one line naming the table's file and the row (counted from 1
in the file), with the offending value as `repr` shows it (an escape sequence is shown, never
sent to the terminal):

- the columns the table cannot be without, and their types (a value that is no whole number,
  no time, ...);
- the rows are the run's own (a run id like `../../x` names files where it is used);
- values from a fixed list (outcomes, statuses), ranges (token counts and sizes 0 or more,
  latencies finite and 0 or more, rates from 0 to 1);
- names by the rules a config follows (numerate.kernel.names: no HTML, no escape sequence);
- one row per key: two identical rows are one, two different ones are refused, as is a case
  or completion that differs from the one the database holds under the same key;
- each answer's case is in the shard or the database, of the answer's manifold and grid
  point, and of a manifold this numerate knows; answers exist where aggregates count some;
- each piece of a long text is of an answer of the run, and a text's pieces are the text its
  SHA-256 names.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterator
from typing import Any

from numerate.config.sweep import names_point
from numerate.kernel.answers import MAX_ANSWER_CHARS
from numerate.kernel.credentials import MARKER, scrub
from numerate.kernel.errors import shorten
from numerate.kernel.inputs import (
    LINE_CONTROLS,
    MAX_CASE_DATA_CHARS,
    MAX_FIELD_CHARS,
    MAX_PROMPT_CHARS,
)
from numerate.kernel.names import NAMES
from numerate.manifolds import registry
from numerate.manifolds.grading import Outcome
from numerate.store.duckdb_words import sql_literal
from numerate.store.schema import KEYS, RUN_STATUSES, SHARD_ROWS, migrate
from numerate.store.texts import LONG_TEXTS, PIECE_CHARS, rows_split
from numerate.store.writer import writer_settings

__all__ = ["database_problem", "run_problem"]

_OUTCOMES = tuple(outcome.value for outcome in Outcome)
_KNOWN_VALUES: dict[str, dict[str, tuple[str, ...]]] = {
    "runs": {"status": tuple(s for s in RUN_STATUSES if s != "running")},  # complete runs
    # only: one stored `running` with a finish time was loaded (exit 0)
    "run_models": {"status": ("ok", "degraded", "failed")},
    "point_stops": {"reason": ("precision", "max_count", "unscored")},
}
"""The columns of a shard whose values come from a fixed list (by table; every other table:
`outcome`)."""

_COUNT = ("{c} >= 0", "a count is 0 or more")
_RATE = ("{c} BETWEEN 0 AND 1", "a rate or chance lies from 0 to 1")
_SECONDS = ("isfinite({c}) AND {c} >= 0", "a duration is a finite number of seconds, 0 or more")
_RANGES: dict[str, tuple[str, str]] = {
    "prompt_tokens": ("{c} >= 0", "a token count is 0 or more"),
    "completion_tokens": ("{c} >= 0", "a token count is 0 or more"),
    "reasoning_tokens": ("{c} >= 0", "a token count is 0 or more"),
    "latency_s": _SECONDS,
    "sample_index": _COUNT,
    "case_index": _COUNT,
    "attempts": _COUNT,
    "n": _COUNT,
    "errors": _COUNT,
    "asked": _COUNT,
    "raw_chars": _COUNT,
    "text_chars": _COUNT,
    "reasoning_chars": _COUNT,
    "reasoning_ratio": (
        "isfinite({c}) AND {c} > 0",
        "a compression ratio is a finite number above 0",
    ),
    "error_rate": _RATE,
    "chance": _RATE,
    "chance_random": _RATE,
    "chance_heuristic": _RATE,
    "width": ("isfinite({c}) AND {c} >= 0", "a width is a finite number, 0 or more"),
}
"""Columns (of any table) whose values lie in a range: the condition a value (not NULL) meets,
and the rule in words."""

_TIMES = ("started_at", "finished_at", "created_at", "graded_at", "decided_at")
_A_TIME = (
    "isfinite({c}) AND {c} BETWEEN TIMESTAMPTZ '2000-01-01' AND TIMESTAMPTZ '2200-01-01'",
    "a time between the years 2000 and 2200",
)
_RANGES.update(dict.fromkeys(_TIMES, _A_TIME))
_USER_INFO = "'^[^/?#]*//[^/?#]*@'"  # an address's user information: a password, a token
_REDACTED = "'^[^/?#]*//\\*\\*\\*@'"  # what numerate.kernel.credentials leaves of it
_A_SHA = ("regexp_full_match({c}, '[0-9a-f]{{64}}')", "a SHA-256 is 64 hexadecimal digits")
_RANGES.update(dict.fromkeys(("sha", "text_sha", "raw_sha", "reasoning_sha"), _A_SHA))
_RANGES["part"] = (
    f"{{c}} BETWEEN 0 AND {MAX_ANSWER_CHARS // PIECE_CHARS}",
    f"a piece of a text is one of its first {MAX_ANSWER_CHARS // PIECE_CHARS + 1:,}",
)
_RANGES["base_url"] = (
    f"NOT regexp_matches({{c}}, {_USER_INFO}) OR regexp_matches({{c}}, {_REDACTED})",
    f"a password or token in an address (numerate stores it as {MARKER}@)",
)

_CUT_TEXTS = frozenset({"raw_text", "text", "reasoning"})
"""Answers and reasoning, stored cut to numerate.kernel.answers.MAX_ANSWER_CHARS rather than
refused."""

_BIG_TEXTS = {
    "piece": PIECE_CHARS,
    "config": 1_000_000,
    "data": MAX_CASE_DATA_CHARS,
    "input": MAX_PROMPT_CHARS,
    "params": 100_000,
}
"""The most characters a shard may hold in one value of these columns; of any other text (an
error, a cause, a code version, a target, a grid point's key): MAX_FIELD_CHARS."""

_PLAIN_TEXTS = frozenset({
    "error", "finish_reason", "cause", "code_version", "config_hash", "revision", "base_url",
    "point_key", "target", "reason", "manifold",
})  # fmt: skip
"""Texts that are one line of words: no control character but a tab or a newline (ESC, BEL:
a terminal's escape sequences)."""
_NO_CONTROL = rf"^[^{LINE_CONTROLS}]*$"

_OF_THE_RUN = frozenset({"runs", "responses", "run_models", "points", "point_stops", "summaries"})
"""Tables whose every row names the run (`completions` and `cases` may be shared with the runs
whose answers and cases it reused)."""

_KEPT = frozenset({"cases", "completions"})
"""Tables whose rows the database may hold already (another run's): kept, so a shard's row
under the same key must be the same."""


def run_problem(files: dict[str, str], run_id: str) -> str | None:
    """Why a run's shards (`files`: each table's Parquet file, local) cannot be loaded as run
    `run_id` into a results database of this numerate's schema, or None. Read on a database of
    its own in memory, within the writer's bound (spilling past it): the results database is
    not held meanwhile (the writers' sessions stay short); what depends on its rows is
    `database_problem`'s."""
    import duckdb

    con = duckdb.connect(config=writer_settings())
    try:
        migrate(con)
        for table, path in files.items():
            problem = _table_problem(con, table, _Shard(path), run_id)
            if problem:
                return f"{table}.parquet{problem}"
        return _across_tables(con, {table: _Shard(path) for table, path in files.items()})
    finally:
        con.close()


def database_problem(con: Any, files: dict[str, str]) -> str | None:
    """Why a run's shards, each fine (`run_problem`), cannot be loaded into the database of
    `con` (held: in the ingest's transaction), or None: a case or completion it holds already
    under the same key, and not the same."""
    for table in sorted(_KEPT & set(files)):
        shard = _Shard(files[table])
        given = _columns(con, shard)
        key = KEYS[table][0]
        keyed = ", ".join(f'"{c}"' for c in key)
        shared = [c for c in given if c not in key and c != "created_at"]
        if not shared:
            continue
        said = f"hash({', '.join(f'{chr(34)}{c}{chr(34)}::VARCHAR' for c in shared)}) AS said"
        rows = f"(SELECT {SHARD_ROWS.get(table, '*')} FROM {shard.rows})"
        if table in LONG_TEXTS:  # as stored: a long text (in a shard of before schema 17) as
            rows = f"({rows_split(table, rows, [*given, 'file_row_number'])[0]})"  # its preview
        held = _first(  # rows compared by a hash of what they say, the shard's made first
            con,  # (each side's rows whole did not fit the writer's bound at a million cases)
            f"WITH s AS MATERIALIZED (SELECT file_row_number, {keyed}, {said} FROM {rows}) "
            f"SELECT s.file_row_number, {', '.join(f's.{c}' for c in key)} FROM s "
            f"JOIN (SELECT {keyed}, {said} FROM {table}) t USING ({keyed}) "
            "WHERE s.said <> t.said",
        )
        if held:
            named = ", ".join(f"{c} {_shown(v)}" for c, v in zip(key, held[1:], strict=True))
            return (
                f"{table}.parquet{_row(held)}: not the {table} row the database holds under {named}"
            )
    return None


class _Shard:
    """One shard file, read with its row numbers (`file_row_number`, from 0)."""

    def __init__(self, path: str) -> None:
        self.rows = f"read_parquet({sql_literal(path)}, file_row_number = true)"
        self.plain = f"read_parquet({sql_literal(path)})"


def _row(found: tuple[Any, ...]) -> str:
    """` row N` of a row found with its file_row_number first, counted from 1."""
    return f" row {found[0] + 1}"


def _first(con: Any, sql: str, params: list[Any] | None = None) -> tuple[Any, ...] | None:
    """The first row `sql` finds, in the order of its columns (the file's first offending
    row, where the first column is its row number): the same row every time."""
    rows: list[tuple[Any, ...]] = con.execute(
        f"SELECT * FROM ({sql}) ORDER BY ALL LIMIT 1", params or []
    ).fetchall()
    return rows[0] if rows else None


def _shown(value: object) -> str:
    """A value of a shard as a warning shows it: cut, and a password in an address hidden
    (`scrub`: a shard's base URL may hold one)."""
    return shorten(repr(scrub(value, ()) if isinstance(value, str) else value), 80)


def _table_problem(con: Any, table: str, shard: _Shard, run_id: str) -> str | None:
    described = con.execute(f"DESCRIBE SELECT * FROM {shard.plain}").fetchall()
    given: dict[str, str] = {row[0]: row[1] for row in described}
    expected = {
        name: (kind, nullable)
        for name, kind, nullable in con.execute(
            "SELECT column_name, data_type, is_nullable FROM duckdb_columns() WHERE "
            "database_name = current_database() AND table_name = ? ORDER BY column_index",
            [table],
        ).fetchall()
    }
    lacking = [
        name for name, (_, nullable) in expected.items() if not nullable and name not in given
    ]
    if lacking:  # DuckDB's Binder Error named its own REPLACE list
        return f": no column {', '.join(lacking[:5])} (a file of another program, or cut)"
    unknown = [name for name in given if name not in expected]
    if unknown:
        return f": column {_shown(unknown[0])} is no column of {table} (a file of another program)"
    checks: list[Callable[[], str | None]] = [
        lambda: _types(con, shard, given, expected),
        lambda: _values(con, table, shard, given, run_id, expected),
        lambda: _one_row_per_key(con, table, shard),
    ]
    return next((problem for check in checks if (problem := check())), None)


def _types(
    con: Any, shard: _Shard, given: dict[str, str], expected: dict[str, tuple[str, bool]]
) -> str | None:
    for column, kind in given.items():
        wanted, nullable = expected[column]
        if not nullable:
            empty = _first(
                con, f'SELECT file_row_number FROM {shard.rows} WHERE "{column}" IS NULL'
            )
            if empty:
                return f"{_row(empty)}: {column} is empty; every row has one"
        if kind == wanted:
            continue
        odd = _first(
            con,
            f'SELECT file_row_number, "{column}" FROM {shard.rows} '
            f'WHERE "{column}" IS NOT NULL AND TRY_CAST("{column}" AS {wanted}) IS NULL',
        )
        if odd:
            return f"{_row(odd)}: {column} {_shown(odd[1])} is no {wanted.lower()}"
    return None


def _rules(
    table: str, run_id: str, given: dict[str, str]
) -> Iterator[tuple[str, str, list[Any], str]]:
    """What each value of a column of `table` meets: (column, condition on `{c}`, its
    parameters, what a value that does not meet it is)."""
    for column, kind in given.items():
        if column in _CUT_TEXTS or kind not in ("VARCHAR", "JSON"):
            continue
        most = _BIG_TEXTS.get(column, MAX_FIELD_CHARS)
        yield column, f"length({{c}}::VARCHAR) <= {most}", [], f": longer than {most:,} characters"
        if column in _PLAIN_TEXTS:
            said = ": a control character (an escape sequence?) in a line of text"
            yield column, "regexp_full_match({c}, ?)", [_NO_CONTROL], said
    if table in _OF_THE_RUN:
        yield "run_id", "{c} = ?", [run_id], f", in the folder of run {run_id!r}"
    for column, known in _KNOWN_VALUES.get(table, {"outcome": _OUTCOMES}).items():
        yield column, "list_contains(?, {c})", [list(known)], f" is none of {', '.join(known)}"
    for column, (condition, words) in _RANGES.items():
        yield column, condition, [], f": {words}"
    for column, (rule, words) in NAMES.items():
        yield (
            column,
            "regexp_full_match({c}, ?)",
            [rule],
            f" is not a name numerate takes ({words})",
        )


def _values(
    con: Any, table: str, shard: _Shard, given: dict[str, str], run_id: str,
    expected: dict[str, tuple[str, bool]],
) -> str | None:  # fmt: skip
    for column, condition, params, what in _rules(table, run_id, given):
        if column not in given:
            continue
        quoted = f'"{column}"'  # as the table has it (a number the shard holds as text)
        typed = f"TRY_CAST({quoted} AS {expected[column][0]})"
        odd = _first(
            con,
            f"SELECT file_row_number, {quoted} FROM {shard.rows} "
            f"WHERE {typed} IS NOT NULL AND NOT ({condition.format(c=typed)})",
            params,
        )
        if odd:
            return f"{_row(odd)}: {column} {_shown(odd[1])}{what}"
    return None


def distinct_rows(table: str, source: str) -> str:
    """The rows of `source` (a shard's, as SQL) made distinct: only those of keys (KEYS) that
    repeat are compared whole (all rows made distinct did not fit the writer's bound at a
    million cases)."""
    keyed = ", ".join(f'"{c}"' for c in KEYS[table][0])
    repeated = f"(SELECT {keyed} FROM {source} GROUP BY ALL HAVING count(*) > 1)"
    return (
        f"SELECT * FROM {source} ANTI JOIN {repeated} USING ({keyed}) UNION ALL "
        f"SELECT DISTINCT * FROM (SELECT * FROM {source} SEMI JOIN {repeated} USING ({keyed}))"
    )


def _one_row_per_key(con: Any, table: str, shard: _Shard) -> str | None:
    key = KEYS[table][0]
    keyed = ", ".join(f'"{c}"' for c in key)
    twice = _first(
        con,
        f"SELECT {keyed} FROM ({distinct_rows(table, shard.plain)}) GROUP BY ALL "
        "HAVING count(*) > 1",
    )
    if twice:
        where = " AND ".join(f'"{c}" = ?' for c in key)
        rows = con.execute(
            f"SELECT file_row_number FROM {shard.rows} WHERE {where} ORDER BY 1 LIMIT 2",
            list(twice),
        ).fetchall()
        named = ", ".join(f"{c} {_shown(v)}" for c, v in zip(key, twice, strict=True))
        return (
            f" rows {rows[0][0] + 1} and {rows[1][0] + 1}: two different rows for one "
            f"{table} row ({named})"
        )
    return None


def _across_tables(con: Any, shards: dict[str, _Shard]) -> str | None:
    cases, responses = shards["cases"], shards["responses"]
    known = list(registry.names())
    odd = _first(
        con,
        f"SELECT file_row_number, manifold FROM {cases.rows} WHERE NOT list_contains(?, manifold)",
        [known],
    )
    if odd:
        return f"cases.parquet{_row(odd)}: manifold {_shown(odd[1])} is none of {', '.join(known)}"
    every_case = f"(SELECT case_id, manifold, params, point_key FROM {cases.plain})"
    missing = _first(
        con,
        f"SELECT r.file_row_number, r.case_id FROM {responses.rows} r "
        f"ANTI JOIN {every_case} c USING (case_id)",
    )
    if missing:
        return (
            f"responses.parquet{_row(missing)}: case {_shown(missing[1])} is not in "
            "cases.parquet (a run publishes every case it answered)"
        )
    other = _first(
        con,
        f"SELECT r.file_row_number, r.manifold, c.manifold FROM {responses.rows} r "
        f"JOIN {every_case} c USING (case_id) WHERE r.manifold <> c.manifold",
    )
    if other:
        shown = f"manifold {_shown(other[1])}, its case's is {_shown(other[2])}"
        return f"responses.parquet{_row(other)}: {shown}"
    return (
        _keys_name_points(con, responses.rows, every_case)
        or _one_run(con, shards)
        or _answers_counted(con, shards)
        or _all_belong(con, shards)
        or _texts_are_answers(con, shards)
    )


def _keys_name_points(con: Any, responses: str, every_case: str) -> str | None:
    """Each answer's point key is its case row's, or names its case's grid point
    (config.sweep.names_point): the case row holds the key of the sweep that stored the case
    first, which may name other axes of the same point."""
    found = con.execute(
        f"SELECT min(r.file_row_number), r.point_key, c.params, c.point_key FROM {responses} r "
        f"JOIN {every_case} c USING (case_id) GROUP BY ALL ORDER BY ALL"
    )
    for row, key, params, case_key in _fetched(found):
        if key != case_key and not names_point(key, _parameters(params)):
            return (
                f"responses.parquet{_row((row,))}: point_key {_shown(key)} names no grid "
                f"point of its case's parameters, {_shown(params)}"
            )
    return None


def _parameters(params: str) -> dict[str, Any]:
    """A case row's parameters (JSON text); none for a text that is no JSON object."""
    try:
        parsed = json.loads(params)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _one_run(con: Any, shards: dict[str, _Shard]) -> str | None:
    """The run's one row in runs.parquet, its end after its start."""
    runs = shards["runs"]
    [(count,)] = con.execute(
        f"SELECT count(*) FROM (SELECT DISTINCT * FROM {runs.plain})"
    ).fetchall()
    if count != 1:  # an empty runs.parquet loaded a run no list showed, recorded as ingested
        return f"runs.parquet holds {count} rows: one, the run's, is what a run publishes"
    backwards = _first(
        con, f"SELECT file_row_number FROM {runs.rows} WHERE finished_at < started_at"
    )
    if backwards:
        return f"runs.parquet{_row(backwards)}: finished_at is before started_at"
    return None


_BELONGS = (
    ("cases", "case_id", "case_id", "false", "a case no answer of the run is to"),
    ("completions", "request_hash", "request_hash", "false", "an answer to no request of the run"),
    ("run_models", "model", "model", "status = 'failed'",
     "a model that gave the run no answer, and whose part did not fail"),
    ("point_stops", "model, manifold, point_key", "model, manifold, point_key", "false",
     "a grid point of no answer of the run"),
)  # fmt: skip
"""Rows of a table that must each belong to an answer of the run (responses.parquet), but
those the condition beside them lets be (a model whose part failed before it answered: its
endpoint was down): a case or completion beside them would be stored for other runs to use
(a planted target, a poisoned answer cache)."""


def _all_belong(con: Any, shards: dict[str, _Shard]) -> str | None:
    responses = shards["responses"]
    for table, columns, of_responses, let_be, what in _BELONGS:
        if table not in shards:
            continue
        stray = _first(
            con,
            f"SELECT file_row_number FROM {shards[table].rows} WHERE ({columns}) NOT IN "
            f"(SELECT ({of_responses}) FROM {responses.plain}) AND NOT ({let_be})",
        )
        if stray:
            return f"{table}.parquet{_row(stray)}: {what}"
    unlike = _first(  # an answer and its request's completion say different things; matched
        con,  # on hashes (each request's completions whole did not fit the writer's bound)
        f"SELECT r.file_row_number FROM {responses.rows} r JOIN (SELECT hash(request_hash) "
        f"AS request, hash(text, model_id) AS said FROM {shards['completions'].plain}) c "
        "ON c.request = hash(r.request_hash) WHERE r.raw_text IS NOT NULL GROUP BY ALL "
        "HAVING NOT bool_or(c.said = hash(r.raw_text, r.model_id))",
    )
    if unlike:
        return (
            f"responses.parquet{_row(unlike)}: its answer or model id is not its request's "
            "(completions.parquet)"
        )
    return None


def _texts_are_answers(con: Any, shards: dict[str, _Shard]) -> str | None:
    """Each piece of texts.parquet is of a long text an answer of the run names by its
    SHA-256 (completions.parquet, responses.parquet), and a text's pieces, joined in order,
    are the text that SHA-256 names. A text is kept by the first run that stores it
    (numerate.store.texts): a piece planted under another text's SHA-256, or a damaged one,
    would stand for that text in the answers of every later run."""
    if "texts" not in shards:
        return None
    texts = shards["texts"]
    given = {table: _columns(con, shards[table]) for table in LONG_TEXTS if table in shards}
    named = " UNION ALL ".join(
        f'SELECT "{sha}" AS sha FROM {shards[table].plain}'
        for table, columns in given.items()
        for _, sha in LONG_TEXTS[table]
        if sha in columns
    )
    stray = _first(
        con,
        f"SELECT t.file_row_number, t.sha FROM {texts.rows} t "
        f"ANTI JOIN ({named or 'SELECT NULL::VARCHAR AS sha'}) n USING (sha)",
    )
    if stray:
        return f"texts.parquet{_row(stray)}: a piece of text {_shown(stray[1])}, no answer's"
    [(size,)] = con.execute(f"SELECT coalesce(sum(strlen(piece)), 0) FROM {texts.plain}").fetchall()
    groups = max(1, -(-int(size) // TEXT_BYTES_CHECKED))
    for group in range(groups):  # a group of the texts at a time: DuckDB's sort of every piece
        found = con.execute(  # of a run ran out of the writer's bound at 140 MB of texts
            f"SELECT sha, min(file_row_number), piece FROM {texts.rows} "
            f"WHERE hash(sha) % {groups} = {group} GROUP BY sha, part, piece "
            "ORDER BY sha, TRY_CAST(part AS INTEGER)"  # identical rows are one
        )
        for sha, of_text in itertools.groupby(_fetched(found), key=lambda piece: piece[0]):
            digest, rows = hashlib.sha256(), []
            for _, row, piece in of_text:
                digest.update(piece.encode())
                rows.append(row)
            if digest.hexdigest() != sha:
                return (
                    f"texts.parquet row {min(rows) + 1}: the pieces of text {_shown(sha)} are "
                    "not the text its SHA-256 names (damaged, or another text's)"
                )
    return None


TEXT_PIECES_READ = 1_000
"""Rows a check reads from DuckDB at a time (`_fetched`; pieces of texts.parquet: each at
most 4,000 bytes)."""

TEXT_BYTES_CHECKED = 16_000_000
"""About how many bytes of texts.parquet's pieces one sort holds as they are checked."""


def _fetched(cursor: Any) -> Iterator[tuple[Any, ...]]:
    """The rows of a statement run on `cursor`, TEXT_PIECES_READ at a time."""
    while batch := cursor.fetchmany(TEXT_PIECES_READ):
        yield from batch


def _columns(con: Any, shard: _Shard) -> list[str]:
    """The columns of a shard."""
    return [row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {shard.plain}").fetchall()]


def _answers_counted(con: Any, shards: dict[str, _Shard]) -> str | None:
    """Aggregates counted over answers the shards do not hold (an empty `responses.parquet`
    beside summaries)."""
    counted = {
        table: con.execute(f"SELECT count(*) FROM {shards[table].plain}").fetchone()[0]
        for table in ("responses", "points", "summaries")
        if table in shards
    }
    if counted.get("responses") == 0:
        aggregated = [f"{table}.parquet ({n} rows)" for table, n in counted.items() if n]
        if aggregated:
            return f"responses.parquet holds no answer, yet {' and '.join(aggregated)} count some"
    return None
