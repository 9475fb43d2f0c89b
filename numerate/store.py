"""The DuckDB store: every read and write of the results (the schema is numerate/schema.py).

DuckDB allows one writing process. The pipeline opens the database once per process
(`Store.open`) and every task of that process shares the connection under a lock; work done
elsewhere returns rows for this process to write. While a store is open, no other process can
open the file, not even read-only: `LivePublisher` copies the database to a snapshot next to it
(numerate.reader.live_path) every few seconds while it changes, for readers to open instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from numerate.schema import (
    CASE_COLUMNS,
    COMPLETION_COLUMNS,
    NUMGEN_TABLES,
    OPTIONAL_SHARD_TABLES,
    RESPONSE_COLUMNS,
    SHARD_TABLES,
    StoreError,
    migrate,
    now,
    transaction,
)

__all__ = ["LivePublisher", "Store", "StoreError", "now"]


class LivePublisher:
    """Keeps `numerate.reader.live_path(store.path)` a recent copy of an open store's database.

    A daemon thread looks every `seconds` at the database file and its write-ahead log; when
    either changed, it copies the database (`COPY FROM DATABASE`, under the store's lock, into a
    temporary file renamed over the snapshot: a reader never sees half a copy). A copy may take
    at most a tenth of the time between copies: a large database is published less often. The
    snapshot is removed when the store closes (the file itself is then readable again).
    """

    seconds: ClassVar[float] = float(os.environ.get("NUMERATE_LIVE_SECONDS", "5"))

    def __init__(self, store: Store) -> None:
        from numerate.reader import live_path

        self.store = store
        self.target = live_path(store.path)
        self._seen: tuple[int, ...] = ()
        self._wait = self.seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="numerate-live", daemon=True)
        self._thread.start()

    def _signature(self) -> tuple[int, ...]:
        stats = []
        for name in (self.store.path, self.store.path + ".wal"):
            try:
                info = os.stat(name)
                stats += [info.st_mtime_ns, info.st_size]
            except OSError:
                stats += [0, 0]
        return tuple(stats)

    def _loop(self) -> None:
        while not self._stop.wait(self._wait):
            signature = self._signature()
            if signature == self._seen:
                continue
            started = time.monotonic()
            try:
                self.publish()
            except Exception:  # a snapshot is a convenience: never let it stop a sweep
                continue
            self._seen = signature
            self._wait = max(self.seconds, 10 * (time.monotonic() - started))

    def publish(self) -> None:
        """Copy the database to the snapshot now."""
        temporary = f"{self.target}.{os.getpid()}.tmp"
        for leftover in (temporary, temporary + ".wal"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(leftover)
        with self.store.lock:
            if self._stop.is_set():
                return
            con = self.store.con
            [(source,)] = con.execute("SELECT current_database()").fetchall()
            con.execute(f"ATTACH '{_sql_path(temporary)}' AS numerate_live")
            try:
                con.execute(f'COPY FROM DATABASE "{source}" TO numerate_live')
            finally:
                con.execute("DETACH numerate_live")
        os.replace(temporary, self.target)

    def stop(self) -> None:
        """Stop publishing and remove the snapshot."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.target)


def _sql_path(path: str) -> str:
    """A file path as a SQL string literal's content."""
    return path.replace("'", "''")


class Store:
    """One process's connection to the results database."""

    _open: ClassVar[dict[str, Store]] = {}
    _open_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: str) -> None:
        import duckdb

        self.path = path
        try:
            if path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.con = duckdb.connect(path)
        except OSError as error:
            raise StoreError(f"cannot open results database {path}: {error.strerror}") from None
        except duckdb.Error as error:
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise StoreError(f"cannot open results database {path}: {first}") from None
        self.lock = threading.RLock()
        self._appenders: dict[str, Any] = {}
        with self.lock:
            # the schema version the file had when it was opened (0: a new file)
            self.found_version = migrate(self.con)
        live = path != ":memory:" and LivePublisher.seconds > 0
        self.publisher = LivePublisher(self) if live else None

    @staticmethod
    def _key(path: str) -> str:
        return path if path == ":memory:" else str(Path(path).resolve())

    @classmethod
    def open(cls, path: str) -> Store:
        """The process's shared store for `path` (opened on first use)."""
        key = cls._key(path)
        with cls._open_lock:
            if key not in cls._open:
                cls._open[key] = cls(path)
            return cls._open[key]

    def close(self) -> None:
        if self.publisher is not None:
            self.publisher.stop()
        with self.lock:
            self._appenders.clear()
            self.con.close()

    @classmethod
    def release(cls, path: str) -> None:
        """Close this process's store for `path`, if open, so other processes can open the
        file (the next `open` reconnects)."""
        with cls._open_lock:
            store = cls._open.pop(cls._key(path), None)
        if store is not None:
            store.close()

    @classmethod
    def close_all(cls) -> None:
        """Close every store this process opened (the next `open` reconnects)."""
        with cls._open_lock:
            for store in cls._open.values():
                store.close()
            cls._open.clear()

    # ------------------------------------------------------------------ helpers

    def _insert_rows(
        self, table: str, columns: Sequence[str], rows: list[dict[str, Any]], conflict: str = ""
    ) -> None:
        """Bulk insert through Arrow (one statement for many rows)."""
        if not rows:
            return
        import pyarrow as pa

        batch = pa.Table.from_pydict({c: [r.get(c) for r in rows] for c in columns})
        names = ", ".join(columns)
        with self.lock:
            self.con.register("incoming_rows", batch)
            try:
                self.con.execute(
                    f"INSERT {conflict} INTO {table} ({names}) SELECT {names} FROM incoming_rows"
                )
            finally:
                self.con.unregister("incoming_rows")

    def _append_rows(self, table: str, columns: Sequence[str], rows: list[dict[str, Any]]) -> bool:
        """Insert through DuckDB's appender (about 4x cheaper per commit than a statement);
        False, with nothing written, when a row's key is already stored."""
        import duckdb

        with self.lock:
            appender = self._appenders.get(table)
            if appender is None:
                appender = self.con.appender(table, columns=list(columns))
                self._appenders[table] = appender
            appender.append_rows([[r.get(c) for c in columns] for r in rows])
            try:
                appender.flush()  # one statement: all the rows or none
            except duckdb.ConstraintException:
                appender.clear()
                return False
            return True

    def missing_cases(self, case_ids: Sequence[str]) -> set[str]:
        """The ids among `case_ids` that are not stored yet."""
        with self.lock:
            rows = self.con.execute(
                "SELECT id FROM (SELECT unnest(?) AS id) "
                "WHERE id NOT IN (SELECT case_id FROM cases)",
                [list(case_ids)],
            ).fetchall()
        return {r[0] for r in rows}

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with self.lock:
            return self.con.execute(sql, params or []).fetchall()

    def frame(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        """A query's result as a polars DataFrame."""
        with self.lock:
            # duckdb 2.0: connections have no .pl(); a relation from .sql() does
            return self.con.sql(sql, params=list(params or [])).pl()

    # ------------------------------------------------------------------ runs

    def start_run(self, run_id: str, sweep_name: str, config_hash: str, config: dict[str, Any],
                  code_version: str) -> None:  # fmt: skip
        with self.lock:
            self.con.execute(
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
        """Record how a run (of a sweep, or in `numgen_runs` of NumGen) ended; a finished run
        is also checkpointed into the database file, so the run that wrote the data pays for
        merging it (not a later one) and readers get one self-contained file."""
        if table not in ("runs", "numgen_runs"):
            raise ValueError(f"not a table of runs: {table!r}")
        finished = now() if status in ("finished", "degraded", "failed") else None
        with self.lock:
            self.con.execute(
                f"UPDATE {table} SET status = ?, finished_at = ? WHERE run_id = ?",
                [status, finished, run_id],
            )
            if finished is not None and self.path != ":memory:":
                self.con.execute("CHECKPOINT")

    def record_outcomes(self, run_id: str, outcomes: list[Any]) -> None:
        """How each model's part of the run ended (numerate.outcome.PartOutcome)."""
        rows = [
            {"run_id": run_id, "model": o.model, "status": o.status, "cause": o.cause,
             "n": o.n, "errors": o.errors, "error_rate": o.error_rate, "decided_at": now()}
            for o in outcomes
        ]  # fmt: skip
        columns = ("run_id", "model", "status", "cause", "n", "errors", "error_rate", "decided_at")
        self._insert_rows("run_models", columns, rows, conflict="OR REPLACE")

    def error_counts(self, run_id: str, model: str) -> tuple[int, int, str | None]:
        """(answers, errors, the most frequent error text) of a model in a run."""
        [(n, errors)] = self.query(
            "SELECT count(*), count(*) FILTER (WHERE outcome = 'error') FROM responses "
            "WHERE run_id = ? AND model = ?",
            [run_id, model],
        )
        common = self.query(
            "SELECT error FROM responses WHERE run_id = ? AND model = ? AND error IS NOT NULL "
            "GROUP BY error ORDER BY count(*) DESC, error LIMIT 1",
            [run_id, model],
        )
        return int(n), int(errors), common[0][0] if common else None

    def mark_interrupted(self, sweep_name: str, config_hash: str) -> None:
        """Runs of this sweep still marked running were stopped by the user (Ctrl-C)."""
        with self.lock:
            self.con.execute(
                "UPDATE runs SET status = 'interrupted' WHERE status = 'running' "
                "AND sweep_name = ? AND config_hash = ?",
                [sweep_name, config_hash],
            )

    # ------------------------------------------------------------------ cases and requests

    def put_cases(self, rows: list[dict[str, Any]]) -> None:
        """Cases are deterministic: one already stored is left as it is."""
        if rows and not self._append_rows("cases", CASE_COLUMNS, rows):
            self._insert_rows("cases", CASE_COLUMNS, rows, conflict="OR IGNORE")

    def put_completions(self, rows: list[dict[str, Any]]) -> None:
        """Finished requests (the response cache). A request already stored keeps its first
        answer (two model labels for one model id can answer the same request at once)."""
        if rows and not self._append_rows("completions", COMPLETION_COLUMNS, rows):
            self._insert_rows("completions", COMPLETION_COLUMNS, rows, conflict="OR IGNORE")

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
        with self.lock:
            cursor = self.con.execute(
                f"SELECT {names} FROM completions "
                f"WHERE request_hash IN (SELECT unnest(?)) {only_run} "
                "QUALIFY row_number() OVER (PARTITION BY request_hash "
                "ORDER BY created_at DESC, run_id) = 1",
                [hashes] if run_id is None else [hashes, run_id],
            )
            return {
                row[0]: dict(zip(COMPLETION_COLUMNS, row, strict=True)) for row in cursor.fetchall()
            }

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
        with self.lock:
            count = self.con.execute(
                f"SELECT count(*) FROM completions WHERE {condition}", params
            ).fetchall()[0][0]
            self.con.execute(f"DELETE FROM completions WHERE {condition}", params)
        return int(count)

    def put_responses(self, rows: list[dict[str, Any]]) -> None:
        """Graded responses of a run; grading a case again replaces its row."""
        graded_at = now()
        rows = [{**row, "graded_at": row.get("graded_at") or graded_at} for row in rows]
        self._insert_rows("responses", RESPONSE_COLUMNS, rows, conflict="OR REPLACE")

    def update_grades(self, run_id: str, rows: list[dict[str, Any]]) -> None:
        """New outcomes and answers for some of a run's responses (model, case_id,
        sample_index, outcome, answer), in one transaction."""
        if not rows:
            return
        import pyarrow as pa

        columns = ("model", "case_id", "sample_index", "outcome", "answer")
        batch = pa.Table.from_pydict({c: [r[c] for r in rows] for c in columns})
        with self.lock, self.transaction():
            self.con.register("regraded_rows", batch)
            try:
                self.con.execute(
                    "UPDATE responses SET outcome = g.outcome, answer = g.answer, "
                    "graded_at = ? FROM regraded_rows g WHERE responses.run_id = ? "
                    "AND responses.model = g.model AND responses.case_id = g.case_id "
                    "AND responses.sample_index = g.sample_index",
                    [now(), run_id],
                )
            finally:
                self.con.unregister("regraded_rows")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around the block, holding the store's lock (see schema.transaction)."""
        with self.lock, transaction(self.con):
            yield

    # ------------------------------------------------------------------ shards

    def export_run(self, run_id: str, folder: str) -> list[str]:
        """Write the run's rows as one Parquet file per table into a local folder."""
        written = []
        with self.lock:
            for table, (query, _) in SHARD_TABLES.items():
                target = str(Path(folder) / f"{table}.parquet")
                self.con.execute(
                    f"COPY ({query.replace('$run', '$1')}) TO '{_sql_path(target)}' "
                    "(FORMAT parquet)",
                    [run_id],
                )
                written.append(target)
        return written

    def ingested(self, run_id: str) -> bool:
        return bool(self.query("SELECT 1 FROM ingested_shards WHERE run_id = ?", [run_id]))

    def ingest_run(self, run_id: str, folder: str, source: str) -> None:
        """Load a run's Parquet shards (a local folder) in one transaction; loading the same
        run again changes nothing."""
        with self.transaction():
            for table, (_, conflict) in SHARD_TABLES.items():
                path = _sql_path(str(Path(folder) / f"{table}.parquet"))
                if table in OPTIONAL_SHARD_TABLES and not Path(path).exists():
                    continue
                self.con.execute(
                    f"INSERT {conflict} INTO {table} BY NAME SELECT * FROM read_parquet('{path}')"
                )
            self.con.execute(
                "INSERT OR REPLACE INTO ingested_shards VALUES (?, ?, ?)",
                [run_id, source, now()],
            )

    # ------------------------------------------------------------------ NumGen

    def start_numgen_run(self, run_id: str, kind: str, generator: str, detector: str,
                         config: dict[str, Any], code_version: str) -> None:  # fmt: skip
        with self.lock:
            self.con.execute(
                "INSERT INTO numgen_runs VALUES (?, ?, ?, ?, ?, ?, 'running', ?, NULL)",
                [run_id, kind, generator, detector, json.dumps(config), code_version, now()],
            )

    def put_numgen_rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        """Rows of one NumGen table (images, detections, metrics, calibration); a row already
        stored for the same key is replaced, so re-ingesting a manifest changes nothing."""
        if table not in NUMGEN_TABLES:
            raise ValueError(f"not a NumGen table: {table!r}")
        if rows:
            self._insert_rows(table, list(rows[0]), rows, conflict="OR REPLACE")

    # ------------------------------------------------------------------ aggregates

    def replace_aggregates(self, run_id: str, points: Any, summaries: Any) -> None:
        """Swap in a run's points and summaries (polars frames) in one transaction; each point
        gets its interval's width and, when sampled adaptively, why it stopped."""
        with self.transaction():
            self.con.execute("DELETE FROM points WHERE run_id = ?", [run_id])
            self.con.execute("DELETE FROM summaries WHERE run_id = ?", [run_id])
            for table, frame in (("points", points), ("summaries", summaries)):
                if frame.height:
                    self.con.register("incoming_rows", frame.to_arrow())
                    self.con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming_rows")
                    self.con.unregister("incoming_rows")
            self.con.execute(
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
        self._insert_rows("point_stops", columns, rows, conflict="OR REPLACE")
