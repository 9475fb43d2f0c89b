"""The schema's history: each migration moves the results database from version i to i + 1.

Never edit a released migration: add the next (and raise SCHEMA_VERSION in
numerate.store.schema).
"""

from __future__ import annotations


def _rebuilt(table: str, columns: str) -> str:
    """SQL that rebuilds `table` with these `columns` (their definitions, comma-separated),
    keeping its rows (copied by name)."""
    return f"""
        CREATE TABLE {table}_rebuilt ({columns});
        INSERT INTO {table}_rebuilt BY NAME SELECT * FROM {table};
        DROP TABLE {table};
        ALTER TABLE {table}_rebuilt RENAME TO {table};
        """


KEYLESS: dict[str, str] = {
    "ingested_shards": """
        run_id VARCHAR NOT NULL, "source" VARCHAR NOT NULL,
        ingested_at TIMESTAMPTZ NOT NULL
    """,
    "numgen_detections": """
        run_id VARCHAR NOT NULL, prompt_id VARCHAR NOT NULL, detector VARCHAR NOT NULL,
        caption VARCHAR NOT NULL, raw_count INTEGER, count INTEGER, overflow BOOLEAN,
        boxes JSON, scores JSON, annotated_path VARCHAR, "error" VARCHAR,
        created_at TIMESTAMPTZ NOT NULL
    """,
    "numgen_images": """
        run_id VARCHAR NOT NULL, prompt_id VARCHAR NOT NULL, prompt_index INTEGER NOT NULL,
        "target" INTEGER NOT NULL, "object" VARCHAR NOT NULL, prompt VARCHAR NOT NULL,
        image_seed UBIGINT NOT NULL, generator VARCHAR NOT NULL, path VARCHAR,
        width INTEGER, height INTEGER, cached BOOLEAN NOT NULL, "error" VARCHAR,
        created_at TIMESTAMPTZ NOT NULL
    """,
    "numgen_metrics": """
        run_id VARCHAR NOT NULL, generator VARCHAR NOT NULL, detector VARCHAR NOT NULL,
        n INTEGER NOT NULL, errors INTEGER NOT NULL, accuracy DOUBLE,
        ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL, mwe DOUBLE,
        knower_level INTEGER NOT NULL, human_correlation DOUBLE, random_correlation DOUBLE,
        sv_slope DOUBLE, sv_intercept DOUBLE, sv_r_squared DOUBLE, sv_slope_se DOUBLE,
        sv_p_slope_is_1 DOUBLE, sv_points INTEGER NOT NULL, zero_rate DOUBLE,
        overflow_rate DOUBLE, confusion JSON NOT NULL
    """,
    "numgen_runs": """
        run_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, generator VARCHAR NOT NULL,
        detector VARCHAR NOT NULL, config JSON NOT NULL, code_version VARCHAR NOT NULL,
        status VARCHAR NOT NULL, started_at TIMESTAMPTZ NOT NULL, finished_at TIMESTAMPTZ
    """,
    "numgen_targets": """
        run_id VARCHAR NOT NULL, "target" INTEGER NOT NULL, n INTEGER NOT NULL,
        correct INTEGER NOT NULL, accuracy DOUBLE, ci_low DOUBLE NOT NULL,
        ci_high DOUBLE NOT NULL, mean_count DOUBLE
    """,
    "point_stops": """
        run_id VARCHAR NOT NULL, model VARCHAR NOT NULL, manifold VARCHAR NOT NULL,
        point_key VARCHAR NOT NULL, asked INTEGER NOT NULL, reason VARCHAR NOT NULL,
        width DOUBLE NOT NULL, decided_at TIMESTAMPTZ NOT NULL
    """,
    "points": """
        run_id VARCHAR NOT NULL, model VARCHAR NOT NULL, manifold VARCHAR NOT NULL,
        point_key VARCHAR NOT NULL, params JSON NOT NULL, n INTEGER NOT NULL,
        n_scored INTEGER NOT NULL, correct INTEGER NOT NULL, wrong INTEGER NOT NULL,
        unparsed INTEGER NOT NULL, truncated INTEGER NOT NULL, "error" INTEGER NOT NULL,
        accuracy DOUBLE, ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL,
        chance DOUBLE NOT NULL, chance_adjusted DOUBLE, truncation_rate DOUBLE,
        unparsed_rate DOUBLE, error_rate DOUBLE NOT NULL, mean_completion_tokens DOUBLE,
        median_completion_tokens DOUBLE, mean_latency_s DOUBLE, chance_random DOUBLE,
        chance_heuristic DOUBLE, stop_reason VARCHAR, ci_width DOUBLE, se DOUBLE,
        samples INTEGER, pass_at_k DOUBLE, maj_at_k DOUBLE, consistency DOUBLE
    """,
    "run_models": """
        run_id VARCHAR NOT NULL, model VARCHAR NOT NULL, status VARCHAR NOT NULL,
        cause VARCHAR, n INTEGER NOT NULL, errors INTEGER NOT NULL,
        error_rate DOUBLE NOT NULL, decided_at TIMESTAMPTZ NOT NULL
    """,
    "runs": """
        run_id VARCHAR NOT NULL, sweep_name VARCHAR NOT NULL, config_hash VARCHAR NOT NULL,
        config JSON NOT NULL, code_version VARCHAR NOT NULL, status VARCHAR NOT NULL,
        started_at TIMESTAMPTZ NOT NULL, finished_at TIMESTAMPTZ
    """,
    "schema_migrations": """
        "version" INTEGER NOT NULL, description VARCHAR NOT NULL,
        applied_at TIMESTAMPTZ NOT NULL
    """,
    "summaries": """
        "level" VARCHAR NOT NULL, run_id VARCHAR NOT NULL, model VARCHAR NOT NULL,
        manifold VARCHAR NOT NULL, n INTEGER NOT NULL, n_scored INTEGER NOT NULL,
        correct INTEGER NOT NULL, wrong INTEGER NOT NULL, unparsed INTEGER NOT NULL,
        truncated INTEGER NOT NULL, "error" INTEGER NOT NULL, accuracy DOUBLE,
        ci_low DOUBLE NOT NULL, ci_high DOUBLE NOT NULL, chance DOUBLE NOT NULL,
        chance_adjusted DOUBLE, truncation_rate DOUBLE, unparsed_rate DOUBLE,
        error_rate DOUBLE NOT NULL, mean_completion_tokens DOUBLE,
        median_completion_tokens DOUBLE, mean_latency_s DOUBLE, chance_random DOUBLE,
        chance_heuristic DOUBLE, case_set VARCHAR, manifolds VARCHAR, se DOUBLE,
        points INTEGER, samples INTEGER, pass_at_k DOUBLE, maj_at_k DOUBLE,
        consistency DOUBLE
    """,
}
"""Migration 10: every table that had a primary key, and its columns without it (the key's
columns NOT NULL)."""


def _numgen_views(create: str, ended: str, refused: bool = False) -> str:
    """The NumGen leaderboard and calibration views (`create`: CREATE or CREATE OR REPLACE),
    over the runs whose status is in `ended` (an SQL list); `refused`: the leaderboard shows
    the images the generator's service refused (a column since schema 11)."""
    counted = "n, errors, refused" if refused else "n, errors"
    return f"""
        {create} VIEW numgen_leaderboard AS
        WITH latest AS (
            SELECT m.*, r.finished_at,
                   row_number() OVER (
                       PARTITION BY m.generator, m.detector ORDER BY r.started_at DESC
                   ) AS recency
            FROM numgen_metrics m JOIN numgen_runs r USING (run_id)
            WHERE r.status IN {ended} AND r.kind = 'benchmark'
        )
        SELECT generator AS model, detector, run_id, finished_at, {counted}, accuracy,
               ci_low, ci_high, mwe, knower_level AS counting_level,
               human_correlation AS webers_law, random_correlation
        FROM latest WHERE recency = 1
        ORDER BY accuracy DESC NULLS LAST, model;
        {create} VIEW numgen_calibration AS
        WITH latest AS (
            SELECT r.run_id, r.detector,
                   row_number() OVER (PARTITION BY r.detector ORDER BY r.started_at DESC)
                       AS recency
            FROM numgen_runs r
            WHERE r.status IN {ended} AND r.kind = 'calibration'
        )
        SELECT l.detector, t.*
        FROM latest l JOIN numgen_targets t USING (run_id)
        WHERE l.recency = 1
        ORDER BY l.detector, t.target;
        """


_CASES = """
            case_id VARCHAR NOT NULL, manifold VARCHAR NOT NULL, point_key VARCHAR NOT NULL,
            params JSON NOT NULL, seed UBIGINT NOT NULL, case_index INTEGER NOT NULL,
            "input" VARCHAR NOT NULL, "target" VARCHAR NOT NULL, chance DOUBLE NOT NULL,
            "data" JSON NOT NULL, generator_version VARCHAR DEFAULT 'unversioned',
            chance_random DOUBLE, chance_heuristic DOUBLE
"""
"""The `cases` table's columns since migration 9."""

_REPEATS = ("manifold", "index", "seed", "params", "input", "target")

SLIM_DATA = (
    "CASE WHEN json_extract_string(data, '$.manifold') = manifold "
    "AND TRY_CAST(json_extract_string(data, '$.index') AS BIGINT) = case_index "
    "AND TRY_CAST(json_extract_string(data, '$.seed') AS UBIGINT) = seed "
    "AND json_extract_string(data, '$.input') = \"input\" "
    "AND json_extract_string(data, '$.target') = \"target\" "
    "AND list_sort(map_entries(TRY_CAST(json_extract(data, '$.params') AS MAP(VARCHAR, JSON)))) "
    "= list_sort(map_entries(TRY_CAST(TRY_CAST(params AS JSON) AS MAP(VARCHAR, JSON)))) "
    "THEN json_merge_patch(data, '{" + ", ".join(f'"{f}": null' for f in _REPEATS) + "}') "
    "ELSE data END"
)
"""A `cases` row's `data` as numerate stores it since migration 14, from a row that may hold
the whole case (as every row did before): without the fields its columns hold, when each is
what its column holds (the parameters compared as a set of keys and values, the column read
as JSON whether typed so or text, as a shard's may be); a row whose
`data` says otherwise keeps its `data` whole (numerate.planning.plan.case_json reads both).
An expression over the `cases` columns; ingest applies it to a shard's cases too."""

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
        """
        + _numgen_views("CREATE", "('finished')"),
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
    (
        "run_models: how each model's part of a run ended; the leaderboard leaves out failed "
        "parts and unfinished runs",
        """
        CREATE TABLE run_models (
            run_id      VARCHAR NOT NULL,
            model       VARCHAR NOT NULL,
            status      VARCHAR NOT NULL,
            cause       VARCHAR,
            n           INTEGER NOT NULL,
            errors      INTEGER NOT NULL,
            error_rate  DOUBLE NOT NULL,
            decided_at  TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (run_id, model)
        );

        CREATE OR REPLACE VIEW leaderboard AS
        WITH latest AS (
            SELECT s.*, r.sweep_name, r.finished_at,
                   row_number() OVER (
                       PARTITION BY s.case_set, s.model ORDER BY r.started_at DESC
                   ) AS recency
            FROM summaries s JOIN runs r USING (run_id)
            LEFT JOIN run_models m ON m.run_id = s.run_id AND m.model = s.model
            WHERE s.level = 'model' AND r.status IN ('finished', 'degraded', 'failed')
              AND coalesce(m.status, 'ok') <> 'failed'
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
    (
        "point_stops: how each adaptively sampled grid point stopped; points.stop_reason and "
        "points.ci_width",
        """
        CREATE TABLE point_stops (
            run_id      VARCHAR NOT NULL,
            model       VARCHAR NOT NULL,
            manifold    VARCHAR NOT NULL,
            point_key   VARCHAR NOT NULL,
            asked       INTEGER NOT NULL,
            reason      VARCHAR NOT NULL,
            width       DOUBLE NOT NULL,
            decided_at  TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (run_id, model, manifold, point_key)
        );
        ALTER TABLE points ADD COLUMN stop_reason VARCHAR;
        ALTER TABLE points ADD COLUMN ci_width DOUBLE;
        """,
    ),
    (
        "summaries weigh grid points equally (design-independent); se, samples and the "
        "multi-sample figures pass_at_k, maj_at_k, consistency on points and summaries",
        """
        ALTER TABLE points ADD COLUMN se DOUBLE;
        ALTER TABLE points ADD COLUMN samples INTEGER;
        ALTER TABLE points ADD COLUMN pass_at_k DOUBLE;
        ALTER TABLE points ADD COLUMN maj_at_k DOUBLE;
        ALTER TABLE points ADD COLUMN consistency DOUBLE;
        ALTER TABLE summaries ADD COLUMN se DOUBLE;
        ALTER TABLE summaries ADD COLUMN points INTEGER;
        ALTER TABLE summaries ADD COLUMN samples INTEGER;
        ALTER TABLE summaries ADD COLUMN pass_at_k DOUBLE;
        ALTER TABLE summaries ADD COLUMN maj_at_k DOUBLE;
        ALTER TABLE summaries ADD COLUMN consistency DOUBLE;

        CREATE OR REPLACE VIEW leaderboard AS
        WITH latest AS (
            SELECT s.*, r.sweep_name, r.finished_at,
                   row_number() OVER (
                       PARTITION BY s.case_set, s.model ORDER BY r.started_at DESC
                   ) AS recency
            FROM summaries s JOIN runs r USING (run_id)
            LEFT JOIN run_models m ON m.run_id = s.run_id AND m.model = s.model
            WHERE s.level = 'model' AND r.status IN ('finished', 'degraded', 'failed')
              AND coalesce(m.status, 'ok') <> 'failed'
        )
        SELECT case_set, manifolds,
               rank() OVER (PARTITION BY case_set ORDER BY accuracy DESC NULLS LAST) AS rank,
               model, sweep_name, run_id, finished_at, n, n_scored, points, accuracy, ci_low,
               ci_high, chance, chance_adjusted, truncation_rate, unparsed_rate, error_rate,
               mean_completion_tokens, samples, pass_at_k, maj_at_k, consistency
        FROM latest WHERE recency = 1
        ORDER BY case_set, accuracy DESC NULLS LAST, model;
        """,
    ),
    (
        "answers stored cut beyond numerate.kernel.answers.MAX_ANSWER_CHARS: flag, length",
        # each column with a DEFAULT after the other: DuckDB 1.5.5 refuses to commit a column
        # added to a table with rows after one with a DEFAULT in the same transaction ("another
        # transaction has altered this table"). Migration 9 sets the columns' order anew.
        """
        ALTER TABLE completions ADD COLUMN text_chars INTEGER;
        ALTER TABLE completions ADD COLUMN text_cut BOOLEAN DEFAULT false;
        ALTER TABLE responses ADD COLUMN raw_chars INTEGER;
        ALTER TABLE responses ADD COLUMN raw_cut BOOLEAN DEFAULT false;
        """,
    ),
    (
        "no primary key on the tables with a row per case or answer (keyed writes match on "
        "numerate.store.schema.KEYS instead: an index the size of the data is gone)",
        f"""
        CREATE TABLE cases_v9 ({_CASES});
        INSERT INTO cases_v9 BY NAME SELECT * FROM cases;
        DROP TABLE cases;
        ALTER TABLE cases_v9 RENAME TO cases;

        CREATE TABLE completions_v9 (
            request_hash VARCHAR NOT NULL, run_id VARCHAR NOT NULL, base_url VARCHAR,
            model_id VARCHAR NOT NULL, revision VARCHAR, sample_index INTEGER NOT NULL,
            "text" VARCHAR NOT NULL, finish_reason VARCHAR, prompt_tokens INTEGER,
            completion_tokens INTEGER, latency_s DOUBLE NOT NULL, attempts INTEGER NOT NULL,
            created_at TIMESTAMPTZ NOT NULL, text_cut BOOLEAN DEFAULT false, text_chars INTEGER
        );
        INSERT INTO completions_v9 BY NAME SELECT * FROM completions;
        DROP TABLE completions;
        ALTER TABLE completions_v9 RENAME TO completions;

        CREATE TABLE responses_v9 (
            run_id VARCHAR NOT NULL, model VARCHAR NOT NULL, model_id VARCHAR NOT NULL,
            manifold VARCHAR NOT NULL, case_id VARCHAR NOT NULL, sample_index INTEGER NOT NULL,
            point_key VARCHAR NOT NULL, request_hash VARCHAR NOT NULL, raw_text VARCHAR,
            answer VARCHAR, outcome VARCHAR NOT NULL, "error" VARCHAR, finish_reason VARCHAR,
            prompt_tokens INTEGER, completion_tokens INTEGER, latency_s DOUBLE,
            cached BOOLEAN NOT NULL, graded_at TIMESTAMPTZ NOT NULL,
            raw_cut BOOLEAN DEFAULT false, raw_chars INTEGER
        );
        INSERT INTO responses_v9 BY NAME SELECT * FROM responses;
        DROP TABLE responses;
        ALTER TABLE responses_v9 RENAME TO responses;
        """,
    ),
    (
        "no primary key on any table (keyed writes match on numerate.store.schema.KEYS; the "
        "same tables serve a DuckLake, which has no primary keys)",
        "".join(_rebuilt(table, columns) for table, columns in KEYLESS.items()),
    ),
    (
        "NumGen at endpoints: a run linked to the run whose images it counts again, each "
        "image's SHA-256 and refusal, a counter's answer and whether it held no count, and the "
        "refused and unparsed images of a run's metrics (NULL in older rows: not recorded)",
        """
        ALTER TABLE numgen_runs ADD COLUMN source_run_id VARCHAR;
        ALTER TABLE numgen_images ADD COLUMN sha256 VARCHAR;
        ALTER TABLE numgen_images ADD COLUMN refused BOOLEAN;
        ALTER TABLE numgen_detections ADD COLUMN answer VARCHAR;
        ALTER TABLE numgen_detections ADD COLUMN unparsed BOOLEAN;
        ALTER TABLE numgen_metrics ADD COLUMN refused INTEGER;
        ALTER TABLE numgen_metrics ADD COLUMN unparsed INTEGER;
        """,
    ),
    (
        "what reasoning models send: an answer's reasoning (cut as its text is), its reasoning "
        "tokens and how much the reasoning repeats itself (NULL in older rows: not recorded, "
        "never 0)",
        """
        ALTER TABLE completions ADD COLUMN reasoning VARCHAR;
        ALTER TABLE completions ADD COLUMN reasoning_cut BOOLEAN;
        ALTER TABLE completions ADD COLUMN reasoning_chars INTEGER;
        ALTER TABLE completions ADD COLUMN reasoning_tokens INTEGER;
        ALTER TABLE responses ADD COLUMN reasoning_tokens INTEGER;
        ALTER TABLE responses ADD COLUMN reasoning VARCHAR;
        ALTER TABLE responses ADD COLUMN reasoning_cut BOOLEAN;
        ALTER TABLE responses ADD COLUMN reasoning_chars INTEGER;
        ALTER TABLE completions ADD COLUMN reasoning_ratio DOUBLE;
        ALTER TABLE responses ADD COLUMN reasoning_ratio DOUBLE;
        """,
    ),
    (
        "each model's score (chance-adjusted, truncation-penalised, geometric mean over "
        "manifolds) with its 95% interval, and its tier, in the summaries (NULL in older "
        "runs until `numerate regrade`)",
        """
        ALTER TABLE summaries ADD COLUMN score DOUBLE;
        ALTER TABLE summaries ADD COLUMN score_low DOUBLE;
        ALTER TABLE summaries ADD COLUMN score_high DOUBLE;
        ALTER TABLE summaries ADD COLUMN tier INTEGER;
        """,
    ),
    (
        "a case's data without the fields its columns hold (manifold, index, seed, params, "
        "input, target): each case's prompt was stored twice",
        # rebuilt, not UPDATEd: an UPDATE of every case holds the new values in memory, past
        # numerate's bound on DuckDB's memory; a copy streams
        f"""
        CREATE TABLE cases_rebuilt ({_CASES});
        INSERT INTO cases_rebuilt BY NAME SELECT * REPLACE ({SLIM_DATA} AS "data") FROM cases;
        DROP TABLE cases;
        ALTER TABLE cases_rebuilt RENAME TO cases;
        """,
    ),
    (
        "a NumGen run with more images without a count than its max_error_rate ends degraded: "
        "its metrics stay on the NumGen leaderboard and in the calibrations, as a sweep's "
        "degraded run stays on its leaderboard",
        _numgen_views("CREATE OR REPLACE", "('finished', 'degraded')"),
    ),
    (
        "the NumGen leaderboard shows the images each run's generator service refused, beside "
        "`n` and `errors`: its accuracy counts them as not correct (NULL for runs before "
        "schema 11: not recorded)",
        _numgen_views("CREATE OR REPLACE", "('finished', 'degraded')", refused=True),
    ),
    (
        "long texts in pieces: an answer or a reasoning of more than 4,000 bytes is stored in "
        "`texts` (pieces of 1,000 characters, by its SHA-256), its row keeps a preview and the "
        "SHA-256; rows stored before keep their texts whole (their SHA-256 NULL)",
        """
        CREATE TABLE IF NOT EXISTS texts (
            sha VARCHAR NOT NULL, part INTEGER NOT NULL, piece VARCHAR NOT NULL
        );
        ALTER TABLE completions ADD COLUMN IF NOT EXISTS text_sha VARCHAR;
        ALTER TABLE completions ADD COLUMN IF NOT EXISTS reasoning_sha VARCHAR;
        ALTER TABLE responses ADD COLUMN IF NOT EXISTS raw_sha VARCHAR;
        ALTER TABLE responses ADD COLUMN IF NOT EXISTS reasoning_sha VARCHAR;
        """,
    ),
]
