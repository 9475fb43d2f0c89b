"""The writer: every write of the results, in short sessions (the schema is numerate.store.schema).

DuckDB lets one process at a time hold a database file, and none read it meanwhile. So a
`Store` never keeps the file: each call attaches it to the process's in-memory DuckDB
(waiting, bounded and visibly, while another process holds it: numerate.store.access), does its
work in one session and detaches it, usually within a few milliseconds. Fresh answers are not
written one by one: `receive` puts them in the process's journal on disk at once
(numerate.store.journal), and a background thread writes
what the journal holds every `flush_seconds()` (NUMERATE_FLUSH_SECONDS, default 2 s); every
session also writes it first, so a process always reads its own answers. The first session of
a process brings the schema up to date and replays the journals of processes that died.

`:memory:` stores (tests) keep their one connection.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from numerate.store import access, journal
from numerate.store.schema import (
    CASE_COLUMNS,
    COMPLETION_COLUMNS,
    JOURNALED,
    NUMGEN_TABLES,
    RESPONSE_COLUMNS,
    StoreError,
    migrate,
    now,
    transaction,
)

__all__ = ["Store", "StoreError", "flush_seconds", "now"]

logger = logging.getLogger("numerate.store")


def flush_seconds() -> float:
    """How often received rows are written (NUMERATE_FLUSH_SECONDS, default 2)."""
    raw = os.environ.get("NUMERATE_FLUSH_SECONDS", "2")
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise StoreError(f"NUMERATE_FLUSH_SECONDS={raw!r}: expected seconds between 0 and 3600")
    return value


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def insert_rows(con: Any, table: str, columns: Sequence[str], rows: list[dict[str, Any]],
                conflict: str = "") -> None:  # fmt: skip
    """Bulk insert through Arrow (one statement for many rows); a missing key is NULL."""
    if not rows:
        return
    import pyarrow as pa

    batch = pa.Table.from_pydict({c: [r.get(c) for r in rows] for c in columns})
    names = ", ".join(columns)
    con.register("incoming_rows", batch)
    try:
        con.execute(f"INSERT {conflict} INTO {table} ({names}) SELECT {names} FROM incoming_rows")
    finally:
        con.unregister("incoming_rows")


class Store:
    """This process's access to one results database."""

    _open: ClassVar[dict[str, Store]] = {}
    _open_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: str) -> None:
        self.path = path
        self.memory = path == ":memory:"
        self.lock = threading.RLock()
        self._instance: Any = None
        self._con: Any = None
        self._depth = 0
        self._hold: Any = None
        self._migrated = False
        self.found_version = 0
        """The schema version the file had when this process first opened it (0: new)."""
        self._journal: journal.Journal | None = None
        self._claims: dict[str, journal.RunClaim] = {}
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        if not self.memory:
            if Path(path).is_dir():
                raise StoreError(f"cannot open results database {path}: it is a folder")
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise StoreError(f"cannot open results database {path}: {error.strerror}") from None
        with self.session():  # creates or upgrades the file now: a bad path fails here
            pass

    # ------------------------------------------------------------------ sessions

    @contextlib.contextmanager
    def session(self) -> Iterator[Any]:
        """Hold the database for the block; yields the connection. Nested sessions (and
        threads of this process) share one hold; it ends with the outermost block."""
        with self.lock:
            if self._depth == 0 and self._con is None:
                self._connect()
            self._depth += 1
            try:
                yield self._con
            finally:
                self._depth -= 1
                if self._depth == 0 and not self.memory:
                    self._disconnect()

    @property
    def con(self) -> Any:
        """The connection of the session in progress (use inside `session()`)."""
        if self._con is None:
            raise StoreError("the results database is not held: use Store.session()")
        return self._con

    def _connect(self) -> None:
        import duckdb

        started = time.monotonic()
        try:
            if self.memory:
                con = duckdb.connect(":memory:")
            else:
                if self._instance is None:  # one in-memory DuckDB for the process's life
                    self._instance = duckdb.connect()
                con = self._instance
                access.attach(con, self.path)
        except duckdb.Error as error:
            raise StoreError(f"cannot open results database {self.path}: {_first_line(error)}"
                             ) from None  # fmt: skip
        except OSError as error:
            raise StoreError(f"cannot open results database {self.path}: {error.strerror}"
                             ) from None  # fmt: skip
        self._hold = access.held(self.path, "write", time.monotonic() - started)
        self._hold.__enter__()
        self._con = con
        try:
            if not self._migrated:
                self.found_version = migrate(con)
                self._migrated = True
            if not self.memory:
                self._replay_orphans(con)
                self._write_journal(con)
        except BaseException:
            self._disconnect()
            raise

    def _disconnect(self) -> None:
        con, self._con = self._con, None
        try:
            if self.memory:
                con.close()
            else:
                access.detach(con)  # checkpoints the file and lets its lock go
        finally:
            hold, self._hold = self._hold, None
            if hold is not None:
                hold.__exit__(None, None, None)

    def _write_rows(self, con: Any, rows: journal.Rows) -> None:
        by_table: dict[str, list[dict[str, Any]]] = {}
        for table, row in rows:
            by_table.setdefault(table, []).append(row)
        for table, table_rows in by_table.items():
            columns, conflict = JOURNALED[table]
            insert_rows(con, table, columns, table_rows, conflict)

    def _write_journal(self, con: Any) -> None:
        if self._journal is None:
            return
        segments = self._journal.take()
        if not segments:
            return
        with transaction(con):
            for segment in segments:
                self._write_rows(con, segment.rows)
        for segment in segments:
            self._journal.written(segment)

    def _replay_orphans(self, con: Any) -> None:
        with journal.orphans(self.path) as segments:
            if segments:
                with transaction(con):
                    for segment in segments:
                        self._write_rows(con, journal.read_segment(segment))
                logger.info("%s: wrote the answers a stopped process had received", self.path)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """One transaction in one session; yields the connection."""
        with self.session() as con, transaction(con):
            yield con

    # ------------------------------------------------------------------ the journal

    def receive(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Rows this process just received (completions, graded responses): on disk at once,
        in the database within `flush_seconds()`."""
        if table not in JOURNALED:
            raise ValueError(f"not a journaled table: {table!r}")
        if not rows:
            return
        if self.memory:
            with self.session() as con:
                columns, conflict = JOURNALED[table]
                insert_rows(con, table, columns, rows, conflict)
            return
        kept = self.adopt(None)
        assert kept is not None
        kept.append(table, rows)

    def adopt(self, taken: journal.Journal | None) -> journal.Journal | None:
        """This process's journal of the database: `taken` (one made before the store was
        opened, e.g. to tell readers a run is starting) or a new one, with the thread that
        writes it every `flush_seconds()`. None for `:memory:` (written at once)."""
        if self.memory:
            if taken is not None:
                taken.close()
            return None
        with self.lock:
            if self._journal is None:
                self._journal = taken if taken is not None else journal.Journal(self.path)
                self._flusher = threading.Thread(
                    target=self._flush_loop, name="numerate-flush", daemon=True
                )
                self._flusher.start()
            elif taken is not None and taken is not self._journal:
                taken.close()
            return self._journal

    def _flush_loop(self) -> None:
        every = flush_seconds()
        while not self._stop.wait(every):
            if self._journal is not None and self._journal.pending:
                try:
                    self.flush()
                except Exception as error:  # the rows stay journaled; the run's next
                    logger.warning("%s: received answers not written yet: %s", self.path, error)

    def flush(self) -> None:
        """Write what the journal holds now."""
        with self.session():
            pass

    # ------------------------------------------------------------------ opening and closing

    @staticmethod
    def _key(path: str) -> str:
        return path if path == ":memory:" else str(Path(path).resolve())

    @classmethod
    def open(cls, path: str) -> Store:
        """The process's store for `path` (created, or upgraded, on first use)."""
        key = cls._key(path)
        with cls._open_lock:
            if key not in cls._open:
                cls._open[key] = cls(path)
            return cls._open[key]

    def close(self) -> None:
        """Write what the journal holds and give up this process's journal and run claims.
        Rows that cannot be written now stay in the journal for the next process."""
        self._stop.set()
        if self._flusher is not None and self._flusher is not threading.current_thread():
            self._flusher.join(timeout=60)
        try:
            if self._journal is not None and self._journal.pending:
                self.flush()
        except StoreError as error:
            logger.warning("%s: %s", self.path, error)
        finally:
            for claim in self._claims.values():
                claim.release()
            self._claims.clear()
            if self._journal is not None:
                self._journal.close()
            if self.memory and self._con is not None:
                self._disconnect()
            if self._instance is not None:
                self._instance.close()
                self._instance = None

    @classmethod
    def release(cls, path: str) -> None:
        """Close this process's store for `path`, if open (the next `open` starts anew)."""
        with cls._open_lock:
            store = cls._open.pop(cls._key(path), None)
        if store is not None:
            store.close()

    @classmethod
    def close_all(cls) -> None:
        """Close every store this process opened."""
        with cls._open_lock:
            stores, cls._open = list(cls._open.values()), {}
        for store in stores:
            store.close()

    # ------------------------------------------------------------------ reading

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with self.session() as con:
            return list(con.execute(sql, params or []).fetchall())

    def frame(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """A query's result as a polars DataFrame."""
        with self.session() as con:
            # duckdb 2.0: connections have no .pl(); a relation from .sql() does
            return con.sql(sql, params=list(params or [])).pl()

    def missing_cases(self, case_ids: Sequence[str]) -> set[str]:
        """The ids among `case_ids` that are not stored yet."""
        rows = self.query(
            "SELECT id FROM (SELECT unnest(?) AS id) WHERE id NOT IN (SELECT case_id FROM cases)",
            [list(case_ids)],
        )
        return {r[0] for r in rows}

    # ------------------------------------------------------------------ runs

    def claim_run(self, run_id: str) -> bool:
        """Hold `run_id` for this process (no other process resumes it meanwhile); False when
        another live process holds it."""
        with self.lock:
            if run_id in self._claims:
                return True
            if self.memory:
                self._claims[run_id] = journal.RunClaim(open(os.devnull))  # noqa: SIM115
                return True
            claim = journal.claim_run(self.path, run_id)
            if claim is None:
                return False
            self._claims[run_id] = claim
            return True

    def start_run(self, run_id: str, sweep_name: str, config_hash: str, config: dict[str, Any],
                  code_version: str) -> None:  # fmt: skip
        self.claim_run(run_id)
        self.query(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, 'running', ?, NULL)",
            [run_id, sweep_name, config_hash, json.dumps(config), code_version, now()],
        )

    def unfinished_run(self, sweep_name: str, config_hash: str) -> str | None:
        """The latest run of this exact sweep that did not finish (to resume), if any."""
        rows = self.query(
            "SELECT run_id FROM runs WHERE sweep_name = ? AND config_hash = ? "
            "AND status <> 'finished' ORDER BY started_at DESC LIMIT 1",
            [sweep_name, config_hash],
        )
        return rows[0][0] if rows else None

    def set_run_status(self, run_id: str, status: str, table: str = "runs") -> None:
        """Record how a run (of a sweep, or in `numgen_runs` of NumGen) ended."""
        if table not in ("runs", "numgen_runs"):
            raise ValueError(f"not a table of runs: {table!r}")
        finished = now() if status in ("finished", "degraded", "failed") else None
        self.query(
            f"UPDATE {table} SET status = ?, finished_at = ? WHERE run_id = ?",
            [status, finished, run_id],
        )

    def record_outcomes(self, run_id: str, outcomes: list[Any]) -> None:
        """How each model's part of the run ended (numerate.outcome.PartOutcome)."""
        rows = [
            {"run_id": run_id, "model": o.model, "status": o.status, "cause": o.cause,
             "n": o.n, "errors": o.errors, "error_rate": o.error_rate, "decided_at": now()}
            for o in outcomes
        ]  # fmt: skip
        columns = ("run_id", "model", "status", "cause", "n", "errors", "error_rate", "decided_at")
        with self.session() as con:
            insert_rows(con, "run_models", columns, rows, conflict="OR REPLACE")

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

    def mark_interrupted(self, sweep_name: str, config_hash: str) -> None:
        """Runs of this sweep that this process was running were stopped by the user."""
        mine = [run_id for run_id in self._claims]
        if mine:
            self.query(
                "UPDATE runs SET status = 'interrupted' WHERE status = 'running' "
                "AND sweep_name = ? AND config_hash = ? AND run_id IN (SELECT unnest(?))",
                [sweep_name, config_hash, mine],
            )

    # ------------------------------------------------------------------ cases and answers

    def put_cases(self, rows: list[dict[str, Any]]) -> None:
        """Cases are deterministic: one already stored is left as it is."""
        with self.session() as con:
            insert_rows(con, "cases", CASE_COLUMNS, rows, conflict="OR IGNORE")

    def put_completions(self, rows: list[dict[str, Any]]) -> None:
        """Finished requests (the response cache), written now. A request already stored keeps
        its first answer."""
        with self.session() as con:
            insert_rows(con, "completions", COMPLETION_COLUMNS, rows, conflict="OR IGNORE")

    def get_completions(
        self, request_hashes: Iterable[str], run_id: str | None = None
    ) -> dict[str, dict[str, Any]]:
        """Stored answers for the given request hashes: those of run `run_id` only, or (None)
        the latest answer of any run."""
        hashes = list(request_hashes)
        if not hashes:
            return {}
        names = ", ".join(COMPLETION_COLUMNS)
        only_run = "AND run_id = ?" if run_id is not None else ""
        rows = self.query(
            f"SELECT {names} FROM completions WHERE request_hash IN (SELECT unnest(?)) {only_run} "
            "QUALIFY row_number() OVER (PARTITION BY request_hash "
            "ORDER BY created_at DESC, run_id) = 1",
            [hashes] if run_id is None else [hashes, run_id],
        )
        return {row[0]: dict(zip(COMPLETION_COLUMNS, row, strict=True)) for row in rows}

    def clear_completions(self, model_id: str | None = None, before: datetime | None = None) -> int:
        """Remove stored answers (all, one endpoint model id's, or those stored before a
        time); returns how many. Graded responses keep their text: no result is lost."""
        where: list[str] = ["TRUE"]
        params: list[Any] = []
        if model_id is not None:
            where.append("model_id = ?")
            params.append(model_id)
        if before is not None:
            where.append("created_at < ?")
            params.append(before)
        condition = " AND ".join(where)
        with self.transaction() as con:
            [(count,)] = con.execute(
                f"SELECT count(*) FROM completions WHERE {condition}", params
            ).fetchall()
            con.execute(f"DELETE FROM completions WHERE {condition}", params)
        return int(count)

    def put_responses(self, rows: list[dict[str, Any]]) -> None:
        """Graded responses of a run, written now; grading a case again replaces its row."""
        graded_at = now()
        rows = [{**row, "graded_at": row.get("graded_at") or graded_at} for row in rows]
        with self.session() as con:
            insert_rows(con, "responses", RESPONSE_COLUMNS, rows, conflict="OR REPLACE")

    def update_grades(self, run_id: str, rows: list[dict[str, Any]]) -> None:
        """New outcomes and answers for some of a run's responses (model, case_id,
        sample_index, outcome, answer), in one transaction."""
        if not rows:
            return
        import pyarrow as pa

        columns = ("model", "case_id", "sample_index", "outcome", "answer")
        batch = pa.Table.from_pydict({c: [r[c] for r in rows] for c in columns})
        with self.transaction() as con:
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

    # ------------------------------------------------------------------ NumGen

    def start_numgen_run(self, run_id: str, kind: str, generator: str, detector: str,
                         config: dict[str, Any], code_version: str) -> None:  # fmt: skip
        self.query(
            "INSERT INTO numgen_runs VALUES (?, ?, ?, ?, ?, ?, 'running', ?, NULL)",
            [run_id, kind, generator, detector, json.dumps(config), code_version, now()],
        )

    def put_numgen_rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Rows of one NumGen table (images, detections, metrics, calibration); a row already
        stored for the same key is replaced, so re-ingesting a manifest changes nothing."""
        if table not in NUMGEN_TABLES:
            raise ValueError(f"not a NumGen table: {table!r}")
        if rows:
            with self.session() as con:
                insert_rows(con, table, list(rows[0]), rows, conflict="OR REPLACE")

    # ------------------------------------------------------------------ aggregates

    def replace_aggregates(self, run_id: str, points: Any, summaries: Any) -> None:
        """Swap in a run's points and summaries (polars frames) in one transaction; each point
        gets its interval's width and, when sampled adaptively, why it stopped."""
        with self.transaction() as con:
            con.execute("DELETE FROM points WHERE run_id = ?", [run_id])
            con.execute("DELETE FROM summaries WHERE run_id = ?", [run_id])
            for table, frame in (("points", points), ("summaries", summaries)):
                if frame.height:
                    con.register("incoming_rows", frame.to_arrow())
                    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming_rows")
                    con.unregister("incoming_rows")
            con.execute(
                "UPDATE points SET ci_width = ci_high - ci_low, stop_reason = s.reason "
                "FROM (SELECT p.model, p.manifold, p.point_key, s.reason FROM points p "
                "      LEFT JOIN point_stops s USING (run_id, model, manifold, point_key) "
                "      WHERE p.run_id = $run) s "
                "WHERE points.run_id = $run AND points.model = s.model "
                "AND points.manifold = s.manifold AND points.point_key = s.point_key",
                {"run": run_id},
            )

    def put_point_stops(self, run_id: str, model: str, stops: list[dict[str, Any]]) -> None:
        """Record how a model's adaptive grid points stopped (a resumed run replaces them)."""
        rows = [{**stop, "run_id": run_id, "model": model, "decided_at": now()} for stop in stops]
        columns = ("run_id", "model", "manifold", "point_key", "asked", "reason", "width",
                   "decided_at")  # fmt: skip
        with self.session() as con:
            insert_rows(con, "point_stops", columns, rows, conflict="OR REPLACE")
