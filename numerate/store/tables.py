"""Every write and read of the results tables, each in one session (numerate.store.writer.Store
holds the file for it); the schema is numerate.store.schema."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

from numerate.kernel.credentials import redact
from numerate.kernel.inputs import valid_text
from numerate.kernel.names import RUN_ID
from numerate.numgen.rows import DetectionRow, ImageRow, MetricsRow, TargetRow
from numerate.store import journal
from numerate.store.duckdb_words import LISTED, listed
from numerate.store.rows import (
    CaseRow,
    CompletionRow,
    PointStop,
    PointStopRow,
    Regrade,
    RunPartRow,
)
from numerate.store.schema import (
    CASE_COLUMNS,
    COMPLETION_COLUMNS,
    DETECTION_COLUMNS,
    IMAGE_COLUMNS,
    KEYS,
    METRICS_COLUMNS,
    NUMGEN_ENDED,
    POINT_STOP_COLUMNS,
    REGRADE_COLUMNS,
    RUN_ENDED,
    RUN_PART_COLUMNS,
    TARGET_COLUMNS,
    StoreError,
    now,
)
from numerate.store.texts import (
    LONG_TEXTS,
    PIECE_COLUMNS,
    ROW_BYTES,
    pieces_of,
    previews_made,
    rows_split,
    unreferenced_pieces,
    whole_texts,
)

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa


__all__ = ["Tables", "insert_arrow", "insert_rows", "insert_table", "split_in_place"]

T = TypeVar("T")


def check_columns(table: str, columns: Sequence[str], rows: Sequence[Mapping[str, object]]) -> None:
    """StoreError naming the first column a row lacks (numerate.store.rows): a row built
    without one is refused where it is built, never stored with a NULL."""
    for row in rows:
        missing = [c for c in columns if c not in row]
        if missing:
            raise StoreError(f"a {table} row has no column {missing[0]!r}")


def insert_rows(con: Any, table: str, columns: Sequence[str],
                rows: Sequence[Mapping[str, object]], strict: bool = True) -> None:  # fmt: skip
    """Bulk insert through Arrow (one statement for many rows), keyed as KEYS says. Every row
    holds every column (`check_columns`); `strict=False` (rows replayed from a journal, which
    an earlier version may have written with fewer columns) reads a missing column as NULL."""
    if not rows:
        return
    import pyarrow as pa

    if strict:
        check_columns(table, columns, rows)
    try:
        batch = pa.Table.from_pydict({c: [r.get(c) for r in rows] for c in columns})
    except UnicodeEncodeError:  # a lone surrogate (a journal written before answers were
        batch = pa.Table.from_pydict(  # cleaned): stored with U+FFFD, never a failed write
            {c: [_text(r.get(c)) for r in rows] for c in columns}
        )
    insert_arrow(con, table, batch)


def insert_arrow(con: Any, table: str, rows: Any) -> None:
    """Write an Arrow table's rows (its columns by name) into `table` in one statement. A
    table in KEYS is merged on its key: a row whose key is stored already is left as it is
    ("first") or replaces it ("last"), and of several rows with one key the first (or the
    last) is written; no primary key is needed (the largest tables have none). The long texts
    of completions and responses go to `texts` in pieces, their rows keep a preview
    (numerate.store.texts)."""
    import pyarrow as pa

    names = [str(name) for name in rows.column_names]
    incoming = "incoming_rows"
    source = incoming
    if table in KEYS:
        rows = rows.append_column(ORDINAL, pa.array(range(rows.num_rows), pa.int64()))
    con.register(incoming, rows)
    try:
        if table in LONG_TEXTS:
            if _any_long(table, rows):  # most batches have none: no statement for them
                _merge_pieces(con, pieces_of(table, incoming, names))
            split, columns = rows_split(table, incoming, [*names, ORDINAL])
            source, names = f"({split})", [c for c in columns if c != ORDINAL]
        con.execute(_merged(table, source, names))
    except BaseException:
        with contextlib.suppress(Exception):  # in an aborted transaction this fails too, and
            con.unregister(incoming)  # its error would hide the insert's
        raise
    con.unregister(incoming)


def _any_long(table: str, rows: Any) -> bool:
    """Whether an Arrow table of `table`'s rows holds a text longer than ROW_BYTES."""
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = [rows[c] for c, _ in LONG_TEXTS[table] if c in rows.column_names]
    return any(
        (pc.max(pc.binary_length(text)).as_py() or 0) > ROW_BYTES
        for text in texts
        if pa.types.is_string(text.type) or pa.types.is_large_string(text.type)
    )  # a column of no text (every row's None) is null-typed


def _merged(table: str, source: str, names: Sequence[str], ordered: bool = True) -> str:
    """The statement that writes `source`'s rows (columns `names`, and ORDINAL for a table in
    KEYS, unless `ordered` is False: rows of one key once) into `table`, as `insert_arrow`
    says."""
    listed = ", ".join(f'"{c}"' for c in names)
    if table not in KEYS:
        return f"INSERT INTO {table} ({listed}) SELECT {listed} FROM {source}"
    key, keep = KEYS[table]
    order = "DESC" if keep == "last" else ""
    match = " AND ".join(f'{table}."{c}" = incoming."{c}"' for c in key)
    values = ", ".join(f'incoming."{c}"' for c in names)
    once = (
        f"(SELECT * FROM {source} QUALIFY row_number() OVER (PARTITION BY {', '.join(key)} "
        f"ORDER BY {ORDINAL} {order}) = 1)"
        if ordered
        else source
    )
    statement = (
        f"MERGE INTO {table} USING {once} AS incoming ON {match} "
        f"WHEN NOT MATCHED THEN INSERT ({listed}) VALUES ({values})"
    )
    updated = [c for c in names if c not in key]
    if keep == "last" and updated:
        assigned = ", ".join(f'"{c}" = incoming."{c}"' for c in updated)
        statement += f" WHEN MATCHED THEN UPDATE SET {assigned}"
    return statement


def _merge_pieces(con: Any, pieces: str) -> None:
    """Store the pieces `pieces` (SQL: numerate.store.texts.pieces_of, a text's pieces once)
    that `texts` lacks (KEYS: a text's pieces are the same whoever stores them)."""
    con.execute(_merged("texts", f"({pieces})", PIECE_COLUMNS, ordered=False))


def split_in_place(con: Any, table: str) -> None:
    """Split the long texts `table`'s rows hold whole (a shard published before schema 17,
    loaded as it was): their pieces into `texts`, their rows to previews."""
    _merge_pieces(con, pieces_of(table, table))
    for statement in previews_made(table):
        con.execute(statement)


TABLE_PAGE_ROWS = 20_000
"""Rows `insert_table` writes in one statement: DuckDB matches them with the table they go to
in memory (a case is about 1 KB)."""


def insert_table(con: Any, table: str, source: str) -> None:
    """Write the rows of `source` (a table of another database attached to `con`, one row per
    key of KEYS) into `table`, keyed as `insert_arrow` keeps them: a row whose key is stored
    already is left as it is ("first") or replaces it ("last"). A page of about
    TABLE_PAGE_ROWS rows (by the hash of their key) at a time, in INSERT statements: DuckDB
    writes an INSERT's rows to the file as they come, but holds a MERGE's in memory until the
    transaction commits (a million answers merged a page at a time ran out of WRITER_MEMORY
    past 540,000)."""
    names = [row[0] for row in con.execute(f"DESCRIBE {source}").fetchall()]
    listed = ", ".join(f'"{c}"' for c in names)
    if table not in KEYS:
        con.execute(f"INSERT INTO {table} ({listed}) SELECT {listed} FROM {source}")
        return
    key, keep = KEYS[table]
    keyed = ", ".join(f'"{c}"' for c in key)
    match = " AND ".join(f'{table}."{c}" = incoming."{c}"' for c in key)
    [(rows,)] = con.execute(f"SELECT count(*) FROM {source}").fetchall()
    pages = max(1, -(-rows // TABLE_PAGE_ROWS))
    for page in range(pages):
        part = f"(SELECT * FROM {source} WHERE hash({keyed}) % {pages} = {page}) AS incoming"
        new = f"NOT EXISTS (SELECT 1 FROM {table} WHERE {match})"
        if keep == "last":  # the stored copy goes, the new one comes
            con.execute(f"DELETE FROM {table} WHERE EXISTS (SELECT 1 FROM {part} WHERE {match})")
            new = "true"
        con.execute(f"INSERT INTO {table} ({listed}) SELECT {listed} FROM {part} WHERE {new}")


ORDINAL = "numerate_ordinal"
"""The column that gives an incoming row its place, so that of two with one key the first or
the last is kept (KEYS)."""


def _text(value: object) -> object:

    return valid_text(value) if isinstance(value, str) else value


class Tables:
    """The results tables' reads and writes; `Store` gives them their sessions."""

    path: str

    def session(self) -> contextlib.AbstractContextManager[Any]:
        """Hold the database for the block (numerate.store.writer.Store.session)."""
        raise NotImplementedError

    def write(self, statements: Callable[[Any], T]) -> T:
        """`statements(con)` in one transaction, tried again on a lake when another writer's
        commit came first (numerate.store.writer.Store.write)."""
        raise NotImplementedError

    def put(self, table: str, columns: Sequence[str], rows: Sequence[Mapping[str, object]]) -> None:
        """Rows into `table`, keyed as KEYS says (insert_rows), in writes of at most
        journal.PART_BYTES of text each (a row at least), as a journal's rows are written:
        DuckDB holds a MERGE's rows in memory until it commits, and 20 cases of 3,600,000-
        character prompts in one write ran out of its bound. A part written stays written if
        a later one fails, and writing it again changes nothing (KEYS)."""
        for part in journal.parts([(table, row) for row in rows], journal.PART_BYTES):
            self.write(functools.partial(insert_rows, table=table, columns=columns,
                                         rows=[row for _, row in part]))  # fmt: skip

    def claim_run(self, run_id: str) -> bool:
        """Hold a run for this process (numerate.store.writer.Store.claim_run)."""
        raise NotImplementedError

    def claimed_runs(self) -> list[str]:
        """The runs this process holds."""
        raise NotImplementedError

    # ------------------------------------------------------------------ reading

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with self.session() as con:
            return list(con.execute(sql, params or []).fetchall())

    def frame(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """A query's result as a polars DataFrame."""
        with self.session() as con:
            # duckdb 2.0: connections have no .pl(); a relation from .sql() does
            return con.sql(sql, params=list(params or [])).pl()

    def batches(
        self, sql: str, params: Sequence[object] | None = None, rows: int = 100_000
    ) -> Iterator[pa.RecordBatch]:
        """A query's result as pyarrow RecordBatches of at most `rows` rows, in one session
        (memory follows a batch, not the result)."""
        with self.session() as con:
            yield from con.sql(sql, params=list(params or [])).to_arrow_reader(rows)

    def missing_cases(self, case_ids: Sequence[str]) -> set[str]:
        """The ids among `case_ids` that are not stored yet: those the stored ids among them
        leave. (`NOT IN (SELECT case_id FROM cases)` hashed every stored id for each batch:
        at 1,000,000 cases about 100 MiB more in memory and 4x the time; docs/benchmarks.md,
        "Looking up a batch's cases (2026-11-29)".)"""
        if not case_ids:
            return set()
        rows = self.query(
            f"SELECT case_id FROM cases WHERE case_id IN (SELECT {LISTED})", [listed(case_ids)]
        )
        return set(case_ids).difference(r[0] for r in rows)

    def case_rows(self, case_ids: Sequence[str]) -> dict[str, CaseRow]:
        """The stored `cases` rows among `case_ids`, by id."""
        if not case_ids:
            return {}
        rows = self.query(
            f"SELECT {', '.join(CASE_COLUMNS)} FROM cases WHERE case_id IN (SELECT {LISTED})",
            [listed(case_ids)],
        )
        found = [cast(CaseRow, dict(zip(CASE_COLUMNS, row, strict=True))) for row in rows]
        return {row["case_id"]: row for row in found}

    # ------------------------------------------------------------------ runs

    def start_run(self, run_id: str, sweep_name: str, config_hash: str,
                  config: Mapping[str, object], code_version: str) -> None:  # fmt: skip
        self.claim_run(run_id)
        # no credential in the stored config: a base URL's password, a key in its text
        row = [run_id, sweep_name, config_hash, redact(json.dumps(config)), code_version, now()]
        self.write(lambda con: con.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, 'running', ?, NULL)", row
        ))  # fmt: skip

    def unfinished_run(self, sweep_name: str, config_hash: str) -> str | None:
        """The latest run of this exact sweep that did not finish (to resume), if any; never
        one whose id was changed by hand into no run id (its claim would be a file outside
        the journal's folder: numerate.store.journal.claim_run), which would block every run
        of the sweep."""
        rows = self.query(
            "SELECT run_id FROM runs WHERE sweep_name = ? AND config_hash = ? "
            "AND status <> 'finished' AND regexp_full_match(run_id, ?) "
            "ORDER BY started_at DESC LIMIT 1",
            [sweep_name, config_hash, RUN_ID],
        )
        return rows[0][0] if rows else None

    def set_run_status(self, run_id: str, status: str, table: str = "runs") -> None:
        """Record how a run (of a sweep, or in `numgen_runs` of NumGen) ended."""
        if table not in ("runs", "numgen_runs"):
            raise ValueError(f"not a table of runs: {table!r}")
        finished = now() if status in ("finished", "degraded", "failed") else None
        self.write(lambda con: con.execute(
            f"UPDATE {table} SET status = ?, finished_at = ? WHERE run_id = ?",
            [status, finished, run_id],
        ))  # fmt: skip

    def record_verdicts(self, rows: Sequence[RunPartRow]) -> None:
        """How each model's part of a run ended (numerate.grading.verdict.PartVerdict.row)."""
        self.put("run_models", RUN_PART_COLUMNS, rows)

    def error_counts(self, run_id: str, model: str) -> tuple[int, int, str | None]:
        """(answers, errors, the most frequent error text) of a model in a run."""
        with self.session():
            [(n, errors)] = self.query(
                "SELECT count(*), count(*) FILTER (WHERE outcome = 'error') FROM responses "
                "WHERE run_id = ? AND model = ?",
                [run_id, model],
            )
            common = self.query(
                "SELECT error FROM responses WHERE run_id = ? AND model = ? "
                "AND error IS NOT NULL GROUP BY error ORDER BY count(*) DESC, error LIMIT 1",
                [run_id, model],
            )
        return int(n), int(errors), common[0][0] if common else None

    def ingested_since(self, since: datetime) -> list[str]:
        """The runs loaded from shards at or after `since`, in the order they were loaded."""
        rows = self.query(
            "SELECT run_id FROM ingested_shards WHERE ingested_at >= ? ORDER BY ingested_at",
            [since],
        )
        return [str(row[0]) for row in rows]

    def mark_interrupted(self) -> None:
        """The runs this process holds (sweeps' and NumGen's) that are still running were
        stopped by the user."""
        mine = self.claimed_runs()

        def interrupted(con: Any) -> None:
            for table in ("runs", "numgen_runs"):
                con.execute(
                    f"UPDATE {table} SET status = 'interrupted' WHERE status = 'running' "
                    f"AND run_id IN (SELECT {LISTED})",
                    [listed(mine)],
                )

        if mine:
            self.write(interrupted)

    def ended_since(self, sweep_name: str, config_hash: str, since: datetime) -> str | None:
        """The run of this sweep that ended (finished, degraded or failed) at or after
        `since`, if any: a signal that came as it ended stopped nothing of it."""
        rows = self.query(
            "SELECT run_id FROM runs WHERE sweep_name = ? AND config_hash = ? AND status IN "
            f"{RUN_ENDED} AND finished_at >= ? "
            "ORDER BY finished_at DESC LIMIT 1",
            [sweep_name, config_hash, since],
        )
        return str(rows[0][0]) if rows else None

    def numgen_ended_since(self, config: Mapping[str, object], since: datetime) -> str | None:
        """The NumGen run of `config` started at or after `since` (a command's start) and
        ended with its metrics (finished or degraded), if any: a signal that came as it ended
        stopped nothing of it."""
        rows = self.query(
            "SELECT run_id FROM numgen_runs WHERE CAST(config AS VARCHAR) = ? AND status IN "
            f"{NUMGEN_ENDED} AND started_at >= ? ORDER BY finished_at DESC LIMIT 1",
            [json.dumps(config), since],
        )
        return str(rows[0][0]) if rows else None

    # ------------------------------------------------------------------ cases and answers

    def put_cases(self, rows: Sequence[CaseRow]) -> None:
        """Cases are deterministic: one already stored is left as it is."""
        self.put("cases", CASE_COLUMNS, rows)

    def put_completions(self, rows: Sequence[CompletionRow]) -> None:
        """Finished requests (the response cache), written now. A request already stored keeps
        its first answer."""
        self.put("completions", COMPLETION_COLUMNS, rows)

    def get_completions(
        self, request_hashes: Iterable[str], run_id: str | None = None
    ) -> dict[str, CompletionRow]:
        """Stored answers for the given request hashes: those of run `run_id` only, or (None)
        the latest answer of any run."""
        hashes = list(request_hashes)
        if not hashes:
            return {}
        names = ", ".join(COMPLETION_COLUMNS)
        only_run = "AND run_id = ?" if run_id is not None else ""
        rows = self.query(
            f"SELECT {names}, text_sha, reasoning_sha FROM completions WHERE request_hash IN "
            f"(SELECT {LISTED}) {only_run} QUALIFY row_number() OVER (PARTITION BY "
            "request_hash ORDER BY created_at DESC, run_id) = 1",
            [listed(hashes)] if run_id is None else [listed(hashes), run_id],
        )
        wholes = whole_texts(self.query, (sha for row in rows for sha in row[-2:]))
        found: dict[str, CompletionRow] = {}
        for *values, text_sha, reasoning_sha in rows:
            row = cast(CompletionRow, dict(zip(COMPLETION_COLUMNS, values, strict=True)))
            row["text"] = wholes.get(text_sha, row["text"])  # a long one's whole, not its preview
            row["reasoning"] = wholes.get(reasoning_sha, row["reasoning"])
            found[row["request_hash"]] = row
        return found

    def clear_completions(
        self, model_ids: Sequence[str] = (), before: datetime | None = None
    ) -> int:
        """Remove stored answers (all, those of some endpoint model ids, or those stored
        before a time); returns how many. Graded responses keep their text: no result is
        lost. StoreError when a model id is none any run asked (a typo removed 0)."""
        if model_ids:
            known = [r[0] for r in self.query(
                "SELECT model_id FROM responses UNION SELECT model_id FROM completions ORDER BY 1"
            )]  # fmt: skip
            for model_id in model_ids:
                if model_id not in known:
                    shown = ", ".join(map(str, known[:10])) or "none"
                    raise StoreError(
                        f"--model {model_id!r}: no run in {self.path} asked that model id (its "
                        f"model ids: {shown})"
                    )
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        if model_ids:
            where.append(f"model_id IN ({', '.join('?' for _ in model_ids)})")
            params.extend(model_ids)
        if before is not None:
            where.append("created_at < ?")
            params.append(before)
        condition = " AND ".join(where)

        def cleared(con: Any) -> int:
            [(count,)] = con.execute(
                f"SELECT count(*) FROM completions WHERE {condition}", params
            ).fetchall()
            con.execute(f"DELETE FROM completions WHERE {condition}", params)
            con.execute(unreferenced_pieces())  # their long texts, where no response has them
            return int(count)

        return self.write(cleared)

    def update_grades(self, run_id: str, rows: Sequence[Regrade]) -> None:
        """New outcomes and answers for some of a run's responses (model, case_id,
        sample_index, outcome, answer), in one transaction."""
        if not rows:
            return
        import pyarrow as pa

        plain: Sequence[Mapping[str, object]] = rows
        batch = pa.Table.from_pydict({c: [r[c] for r in plain] for c in REGRADE_COLUMNS})

        def regraded(con: Any) -> None:
            con.register("regraded_rows", batch)
            try:
                con.execute(
                    "UPDATE responses SET outcome = g.outcome, answer = g.answer, "
                    "graded_at = ? FROM regraded_rows g WHERE responses.run_id = ? "
                    "AND responses.model = g.model AND responses.case_id = g.case_id "
                    "AND responses.sample_index = g.sample_index",
                    [now(), run_id],
                )
            finally:
                con.unregister("regraded_rows")

        self.write(regraded)

    # ------------------------------------------------------------------ NumGen

    def start_numgen_run(self, run_id: str, kind: str, generator: str, detector: str,
                         config: Mapping[str, object], code_version: str,
                         source_run_id: str | None = None) -> None:  # fmt: skip
        """Record a NumGen run as running (`source_run_id`: the run whose images it counts)."""
        self.claim_run(run_id)
        row = [run_id, kind, generator, detector, json.dumps(config), code_version, now(),
               source_run_id]  # fmt: skip
        self.write(lambda con: con.execute(
            "INSERT INTO numgen_runs (run_id, kind, generator, detector, config, code_version, "
            "status, started_at, source_run_id) VALUES (?, ?, ?, ?, ?, ?, 'running', ?, ?)", row
        ))  # fmt: skip

    def put_images(self, rows: Sequence[ImageRow]) -> None:
        """A NumGen run's images (each with its run id); re-ingesting a manifest changes
        nothing."""
        self.put("numgen_images", IMAGE_COLUMNS, rows)

    def put_detections(self, rows: Sequence[DetectionRow]) -> None:
        """A NumGen run's counts (each with its run id); re-ingesting a manifest changes
        nothing."""
        self.put("numgen_detections", DETECTION_COLUMNS, rows)

    def put_numgen_scores(self, metrics: MetricsRow, targets: Sequence[TargetRow]) -> None:
        """A NumGen run's metrics and per-target accuracy (each target row with its run id),
        in one transaction; scoring the run again replaces them."""

        def scored(con: Any) -> None:
            insert_rows(con, "numgen_metrics", METRICS_COLUMNS, [metrics])
            con.execute("DELETE FROM numgen_targets WHERE run_id = ?", [metrics["run_id"]])
            insert_rows(con, "numgen_targets", TARGET_COLUMNS, targets)

        self.write(scored)

    # ------------------------------------------------------------------ aggregates

    def replace_aggregates(
        self, run_id: str, points: pl.DataFrame, summaries: pl.DataFrame
    ) -> None:
        """Swap in a run's points and summaries (polars frames) in one transaction; each point
        gets its interval's width and, when sampled adaptively, why it stopped."""

        def replaced(con: Any) -> None:
            con.execute("DELETE FROM points WHERE run_id = ?", [run_id])
            con.execute("DELETE FROM summaries WHERE run_id = ?", [run_id])
            for table, frame in (("points", points), ("summaries", summaries)):
                if frame.height:
                    insert_arrow(con, table, frame.to_arrow())
            con.execute(
                "UPDATE points SET ci_width = ci_high - ci_low, stop_reason = s.reason "
                "FROM (SELECT p.model, p.manifold, p.point_key, s.reason FROM points p "
                "      LEFT JOIN point_stops s USING (run_id, model, manifold, point_key) "
                "      WHERE p.run_id = $run) s "
                "WHERE points.run_id = $run AND points.model = s.model "
                "AND points.manifold = s.manifold AND points.point_key = s.point_key",
                {"run": run_id},
            )

        self.write(replaced)

    def put_point_stops(self, run_id: str, model: str, stops: Sequence[PointStop]) -> None:
        """Record how a model's adaptive grid points stopped (a resumed run replaces them)."""
        decided = now()
        rows: list[PointStopRow] = [
            {**stop, "run_id": run_id, "model": model, "decided_at": decided} for stop in stops
        ]
        self.put("point_stops", POINT_STOP_COLUMNS, rows)
