"""The DuckDB store: the schema (one place, versioned migrations) and every read and write.

DuckDB allows one writing process. The pipeline opens the database once per process
(`Store.open`) and every task of that process shares the connection under a lock; work done
elsewhere returns rows for this process to write.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from numerate.errors import NumerateError

SCHEMA_VERSION = 4

# Each migration moves the database from version i to i + 1. Never edit a released one:
# add the next.
MIGRATIONS: list[tuple[str, str]] = [
    (
        "runs, cases, completions, responses, points, summaries, leaderboard",
        """
        CREATE TABLE runs (
            run_id        VARCHAR PRIMARY KEY,
            sweep_name    VARCHAR NOT NULL,
            config_hash   VARCHAR NOT NULL,
            config        JSON NOT NULL,
            code_version  VARCHAR NOT NULL,
            status        VARCHAR NOT NULL,
            started_at    TIMESTAMPTZ NOT NULL,
            finished_at   TIMESTAMPTZ
        );
        CREATE TABLE cases (
            case_id     VARCHAR PRIMARY KEY,
            manifold    VARCHAR NOT NULL,
            point_key   VARCHAR NOT NULL,
            params      JSON NOT NULL,
            seed        UBIGINT NOT NULL,
            case_index  INTEGER NOT NULL,
            input       VARCHAR NOT NULL,
            target      VARCHAR NOT NULL,
            chance      DOUBLE NOT NULL,
            data        JSON NOT NULL
        );
        CREATE TABLE completions (
            request_hash       VARCHAR PRIMARY KEY,
            run_id             VARCHAR NOT NULL,
            model_id           VARCHAR NOT NULL,
            text               VARCHAR NOT NULL,
            finish_reason      VARCHAR,
            prompt_tokens      INTEGER,
            completion_tokens  INTEGER,
            latency_s          DOUBLE NOT NULL,
            attempts           INTEGER NOT NULL,
            created_at         TIMESTAMPTZ NOT NULL
        );
        CREATE TABLE responses (
            run_id             VARCHAR NOT NULL,
            model              VARCHAR NOT NULL,
            model_id           VARCHAR NOT NULL,
            manifold           VARCHAR NOT NULL,
            case_id            VARCHAR NOT NULL,
            point_key          VARCHAR NOT NULL,
            request_hash       VARCHAR NOT NULL,
            raw_text           VARCHAR,
            answer             VARCHAR,
            outcome            VARCHAR NOT NULL,
            error              VARCHAR,
            finish_reason      VARCHAR,
            prompt_tokens      INTEGER,
            completion_tokens  INTEGER,
            latency_s          DOUBLE,
            cached             BOOLEAN NOT NULL,
            graded_at          TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (run_id, model, case_id)
        );
        CREATE TABLE points (
            run_id                    VARCHAR NOT NULL,
            model                     VARCHAR NOT NULL,
            manifold                  VARCHAR NOT NULL,
            point_key                 VARCHAR NOT NULL,
            params                    JSON NOT NULL,
            n                         INTEGER NOT NULL,
            n_scored                  INTEGER NOT NULL,
            correct                   INTEGER NOT NULL,
            wrong                     INTEGER NOT NULL,
            unparsed                  INTEGER NOT NULL,
            truncated                 INTEGER NOT NULL,
            error                     INTEGER NOT NULL,
            accuracy                  DOUBLE,
            ci_low                    DOUBLE NOT NULL,
            ci_high                   DOUBLE NOT NULL,
            chance                    DOUBLE NOT NULL,
            chance_adjusted           DOUBLE,
            truncation_rate           DOUBLE,
            unparsed_rate             DOUBLE,
            error_rate                DOUBLE NOT NULL,
            mean_completion_tokens    DOUBLE,
            median_completion_tokens  DOUBLE,
            mean_latency_s            DOUBLE,
            PRIMARY KEY (run_id, model, manifold, point_key)
        );
        CREATE TABLE summaries (
            level                     VARCHAR NOT NULL,
            run_id                    VARCHAR NOT NULL,
            model                     VARCHAR NOT NULL,
            manifold                  VARCHAR NOT NULL,
            n                         INTEGER NOT NULL,
            n_scored                  INTEGER NOT NULL,
            correct                   INTEGER NOT NULL,
            wrong                     INTEGER NOT NULL,
            unparsed                  INTEGER NOT NULL,
            truncated                 INTEGER NOT NULL,
            error                     INTEGER NOT NULL,
            accuracy                  DOUBLE,
            ci_low                    DOUBLE NOT NULL,
            ci_high                   DOUBLE NOT NULL,
            chance                    DOUBLE NOT NULL,
            chance_adjusted           DOUBLE,
            truncation_rate           DOUBLE,
            unparsed_rate             DOUBLE,
            error_rate                DOUBLE NOT NULL,
            mean_completion_tokens    DOUBLE,
            median_completion_tokens  DOUBLE,
            mean_latency_s            DOUBLE,
            PRIMARY KEY (level, run_id, model, manifold)
        );
        CREATE VIEW leaderboard AS
        WITH latest AS (
            SELECT s.*, r.sweep_name, r.finished_at,
                   row_number() OVER (
                       PARTITION BY r.sweep_name, s.model ORDER BY r.started_at DESC
                   ) AS recency
            FROM summaries s JOIN runs r USING (run_id)
            WHERE s.level = 'model' AND r.status = 'finished'
        )
        SELECT sweep_name, model, run_id, finished_at, n, n_scored, accuracy, ci_low, ci_high,
               chance_adjusted, truncation_rate, unparsed_rate, error_rate,
               mean_completion_tokens
        FROM latest WHERE recency = 1
        ORDER BY sweep_name, accuracy DESC NULLS LAST, model;
        """,
    ),
    (
        "ingested_shards: runs loaded from Parquet shards",
        """
        CREATE TABLE ingested_shards (
            run_id       VARCHAR PRIMARY KEY,
            source       VARCHAR NOT NULL,
            ingested_at  TIMESTAMPTZ NOT NULL
        );
        """,
    ),
    (
        "NumGen: numgen_runs, numgen_images, numgen_detections, numgen_metrics, "
        "numgen_targets, numgen_leaderboard, numgen_calibration",
        """
        CREATE TABLE numgen_runs (
            run_id        VARCHAR PRIMARY KEY,
            kind          VARCHAR NOT NULL,
            generator     VARCHAR NOT NULL,
            detector      VARCHAR NOT NULL,
            config        JSON NOT NULL,
            code_version  VARCHAR NOT NULL,
            status        VARCHAR NOT NULL,
            started_at    TIMESTAMPTZ NOT NULL,
            finished_at   TIMESTAMPTZ
        );
        CREATE TABLE numgen_images (
            run_id        VARCHAR NOT NULL,
            prompt_id     VARCHAR NOT NULL,
            prompt_index  INTEGER NOT NULL,
            target        INTEGER NOT NULL,
            object        VARCHAR NOT NULL,
            prompt        VARCHAR NOT NULL,
            image_seed    UBIGINT NOT NULL,
            generator     VARCHAR NOT NULL,
            path          VARCHAR,
            width         INTEGER,
            height        INTEGER,
            cached        BOOLEAN NOT NULL,
            error         VARCHAR,
            created_at    TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (run_id, prompt_id)
        );
        CREATE TABLE numgen_detections (
            run_id          VARCHAR NOT NULL,
            prompt_id       VARCHAR NOT NULL,
            detector        VARCHAR NOT NULL,
            caption         VARCHAR NOT NULL,
            raw_count       INTEGER,
            count           INTEGER,
            overflow        BOOLEAN,
            boxes           JSON,
            scores          JSON,
            annotated_path  VARCHAR,
            error           VARCHAR,
            created_at      TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (run_id, prompt_id)
        );
        CREATE TABLE numgen_metrics (
            run_id              VARCHAR PRIMARY KEY,
            generator           VARCHAR NOT NULL,
            detector            VARCHAR NOT NULL,
            n                   INTEGER NOT NULL,
            errors              INTEGER NOT NULL,
            accuracy            DOUBLE,
            ci_low              DOUBLE NOT NULL,
            ci_high             DOUBLE NOT NULL,
            mwe                 DOUBLE,
            knower_level        INTEGER NOT NULL,
            human_correlation   DOUBLE,
            random_correlation  DOUBLE,
            sv_slope            DOUBLE,
            sv_intercept        DOUBLE,
            sv_r_squared        DOUBLE,
            sv_slope_se         DOUBLE,
            sv_p_slope_is_1     DOUBLE,
            sv_points           INTEGER NOT NULL,
            zero_rate           DOUBLE,
            overflow_rate       DOUBLE,
            confusion           JSON NOT NULL
        );
        CREATE TABLE numgen_targets (
            run_id      VARCHAR NOT NULL,
            target      INTEGER NOT NULL,
            n           INTEGER NOT NULL,
            correct     INTEGER NOT NULL,
            accuracy    DOUBLE,
            ci_low      DOUBLE NOT NULL,
            ci_high     DOUBLE NOT NULL,
            mean_count  DOUBLE,
            PRIMARY KEY (run_id, target)
        );
        CREATE VIEW numgen_leaderboard AS
        WITH latest AS (
            SELECT m.*, r.finished_at,
                   row_number() OVER (
                       PARTITION BY m.generator, m.detector ORDER BY r.started_at DESC
                   ) AS recency
            FROM numgen_metrics m JOIN numgen_runs r USING (run_id)
            WHERE r.status = 'finished' AND r.kind = 'benchmark'
        )
        SELECT generator AS model, detector, run_id, finished_at, n, errors, accuracy,
               ci_low, ci_high, mwe, knower_level AS counting_level,
               human_correlation AS webers_law, random_correlation
        FROM latest WHERE recency = 1
        ORDER BY accuracy DESC NULLS LAST, model;
        CREATE VIEW numgen_calibration AS
        WITH latest AS (
            SELECT r.run_id, r.detector,
                   row_number() OVER (PARTITION BY r.detector ORDER BY r.started_at DESC)
                       AS recency
            FROM numgen_runs r
            WHERE r.status = 'finished' AND r.kind = 'calibration'
        )
        SELECT l.detector, t.*
        FROM latest l JOIN numgen_targets t USING (run_id)
        WHERE l.recency = 1
        ORDER BY l.detector, t.target;
        """,
    ),
    (
        "provenance: completions keyed by (request, run) with endpoint, revision and sample; "
        "responses per sample; cases with generator version and both chance floors; "
        "summaries with their case set; leaderboard compares like with like",
        """
        CREATE TABLE completions_v4 (
            request_hash       VARCHAR NOT NULL,
            run_id             VARCHAR NOT NULL,
            base_url           VARCHAR,
            model_id           VARCHAR NOT NULL,
            revision           VARCHAR,
            sample_index       INTEGER NOT NULL,
            text               VARCHAR NOT NULL,
            finish_reason      VARCHAR,
            prompt_tokens      INTEGER,
            completion_tokens  INTEGER,
            latency_s          DOUBLE NOT NULL,
            attempts           INTEGER NOT NULL,
            created_at         TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (request_hash, run_id)
        );
        -- earlier keys did not name the endpoint: kept as history, never matched again
        INSERT INTO completions_v4
        SELECT request_hash, run_id, NULL, model_id, NULL, 0, text, finish_reason,
               prompt_tokens, completion_tokens, latency_s, attempts, created_at
        FROM completions;
        DROP TABLE completions;
        ALTER TABLE completions_v4 RENAME TO completions;

        CREATE TABLE responses_v4 (
            run_id             VARCHAR NOT NULL,
            model              VARCHAR NOT NULL,
            model_id           VARCHAR NOT NULL,
            manifold           VARCHAR NOT NULL,
            case_id            VARCHAR NOT NULL,
            sample_index       INTEGER NOT NULL,
            point_key          VARCHAR NOT NULL,
            request_hash       VARCHAR NOT NULL,
            raw_text           VARCHAR,
            answer             VARCHAR,
            outcome            VARCHAR NOT NULL,
            error              VARCHAR,
            finish_reason      VARCHAR,
            prompt_tokens      INTEGER,
            completion_tokens  INTEGER,
            latency_s          DOUBLE,
            cached             BOOLEAN NOT NULL,
            graded_at          TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (run_id, model, case_id, sample_index)
        );
        INSERT INTO responses_v4 BY NAME SELECT *, 0 AS sample_index FROM responses;
        DROP TABLE responses;
        ALTER TABLE responses_v4 RENAME TO responses;

        ALTER TABLE cases ADD COLUMN generator_version VARCHAR DEFAULT 'unversioned';
        ALTER TABLE cases ADD COLUMN chance_random DOUBLE;
        ALTER TABLE cases ADD COLUMN chance_heuristic DOUBLE;
        UPDATE cases SET chance_random = chance;
        ALTER TABLE points ADD COLUMN chance_random DOUBLE;
        ALTER TABLE points ADD COLUMN chance_heuristic DOUBLE;
        ALTER TABLE summaries ADD COLUMN chance_random DOUBLE;
        ALTER TABLE summaries ADD COLUMN chance_heuristic DOUBLE;
        ALTER TABLE summaries ADD COLUMN case_set VARCHAR;
        ALTER TABLE summaries ADD COLUMN manifolds VARCHAR;

        CREATE OR REPLACE VIEW leaderboard AS
        WITH latest AS (
            SELECT s.*, r.sweep_name, r.finished_at,
                   row_number() OVER (
                       PARTITION BY s.case_set, s.model ORDER BY r.started_at DESC
                   ) AS recency
            FROM summaries s JOIN runs r USING (run_id)
            WHERE s.level = 'model' AND r.status = 'finished'
        )
        SELECT case_set, manifolds,
               rank() OVER (PARTITION BY case_set ORDER BY accuracy DESC NULLS LAST) AS rank,
               model, sweep_name, run_id, finished_at, n, n_scored, accuracy, ci_low, ci_high,
               chance, chance_adjusted, truncation_rate, unparsed_rate, error_rate,
               mean_completion_tokens
        FROM latest WHERE recency = 1
        ORDER BY case_set, accuracy DESC NULLS LAST, model;
        """,
    ),
]

# What a run exports as Parquet shards, and how ingesting one merges it: cases and
# completions are shared by runs (the first copy stays); the run's own rows replace any
# earlier copy of themselves.
SHARD_TABLES: dict[str, tuple[str, str]] = {
    "runs": ("SELECT * FROM runs WHERE run_id = $run", "OR REPLACE"),
    "cases": (
        "SELECT * FROM cases WHERE case_id IN (SELECT case_id FROM responses WHERE run_id = $run)",
        "OR IGNORE",
    ),
    "completions": (
        "SELECT * FROM completions WHERE request_hash IN "
        "(SELECT request_hash FROM responses WHERE run_id = $run)",
        "OR IGNORE",
    ),
    "responses": ("SELECT * FROM responses WHERE run_id = $run", "OR REPLACE"),
    "points": ("SELECT * FROM points WHERE run_id = $run", "OR REPLACE"),
    "summaries": ("SELECT * FROM summaries WHERE run_id = $run", "OR REPLACE"),
}

NUMGEN_TABLES = ("numgen_images", "numgen_detections", "numgen_metrics", "numgen_targets")

COMPLETION_COLUMNS = (
    "request_hash", "run_id", "base_url", "model_id", "revision", "sample_index", "text",
    "finish_reason", "prompt_tokens", "completion_tokens", "latency_s", "attempts", "created_at",
)  # fmt: skip
RESPONSE_COLUMNS = (
    "run_id", "model", "model_id", "manifold", "case_id", "sample_index", "point_key",
    "request_hash", "raw_text", "answer", "outcome", "error", "finish_reason", "prompt_tokens",
    "completion_tokens", "latency_s", "cached", "graded_at",
)  # fmt: skip
CASE_COLUMNS = (
    "case_id", "manifold", "point_key", "params", "seed", "case_index", "input", "target",
    "chance", "data", "generator_version", "chance_random", "chance_heuristic",
)  # fmt: skip


class StoreError(NumerateError):
    """The results database cannot be used."""


def _sql_path(path: str) -> str:
    """A file path as a SQL string literal's content."""
    return path.replace("'", "''")


def now() -> datetime:
    return datetime.now(UTC)


def migrate(con: Any) -> int:
    """Bring the schema to SCHEMA_VERSION; returns the version found before."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, description VARCHAR NOT NULL,"
        " applied_at TIMESTAMPTZ NOT NULL)"
    )
    # fetchall: duckdb 2.0 refuses other work on a connection whose result is not exhausted
    found = con.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchall()[0][0]
    if found > SCHEMA_VERSION:
        raise StoreError(
            f"the database has schema version {found}, newer than this numerate "
            f"({SCHEMA_VERSION}): upgrade numerate"
        )
    for version in range(found + 1, SCHEMA_VERSION + 1):
        description, sql = MIGRATIONS[version - 1]
        con.execute("BEGIN TRANSACTION")
        try:
            con.execute(sql)
            con.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)", [version, description, now()]
            )
            con.execute("COMMIT")
        except Exception:
            con.execute("ROLLBACK")
            raise
    return found


class Store:
    """One process's connection to the results database."""

    _open: ClassVar[dict[str, Store]] = {}
    _open_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: str) -> None:
        import duckdb

        self.path = path
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        try:
            self.con = duckdb.connect(path)
        except duckdb.IOException as error:
            raise StoreError(f"cannot open results database {path}: {error}") from None
        self.lock = threading.RLock()
        self._appenders: dict[str, Any] = {}
        with self.lock:
            migrate(self.con)

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
        finished = now() if status == "finished" else None
        with self.lock:
            self.con.execute(
                f"UPDATE {table} SET status = ?, finished_at = ? WHERE run_id = ?",
                [status, finished, run_id],
            )
            if status == "finished" and self.path != ":memory:":
                self.con.execute("CHECKPOINT")

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
        where, params = ["TRUE"], []
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
        """BEGIN ... COMMIT around the block; ROLLBACK when it raises."""
        with self.lock:
            self.con.execute("BEGIN TRANSACTION")
            try:
                yield
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
            self.con.execute("COMMIT")

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
        """Swap in a run's points and summaries (polars frames) in one transaction."""
        with self.transaction():
            self.con.execute("DELETE FROM points WHERE run_id = ?", [run_id])
            self.con.execute("DELETE FROM summaries WHERE run_id = ?", [run_id])
            for table, frame in (("points", points), ("summaries", summaries)):
                if frame.height:
                    self.con.register("incoming_rows", frame.to_arrow())
                    self.con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming_rows")
                    self.con.unregister("incoming_rows")
