"""Runs on two workers publish Parquet shards; one ingest merges them idempotently."""

import asyncio
import logging
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from numerate.cli import app
from numerate.flows.ingest import ingest
from numerate.flows.sweep import sweep
from numerate.kernel.errors import ConfigError
from numerate.results.regrade import ingest_graded
from numerate.store import Store
from numerate.store.schema import ID_BUCKET
from numerate.store.shards import SUCCESS, complete_runs

pytestmark = pytest.mark.usefixtures("prefect_harness")


def config(model, results_dir):
    return {
        "name": "split",
        "results_dir": str(results_dir),
        "models": [{"name": model, "model": f"baseline:{model}"}],
        "manifolds": [{"manifold": "objects", "count": 5}, {"manifold": "shuffle", "count": 5}],
    }


def table(db, sql):
    store = Store.open(str(db))
    try:
        return sorted(store.query(sql))
    finally:
        Store.close_all()


def test_two_workers_share_one_sweep_through_shards(tmp_path, caplog):
    shared = tmp_path / "shared"
    # two "workers", each with its own database, one model each
    oracle_run = asyncio.run(sweep(config("oracle", shared), str(tmp_path / "worker-a.duckdb")))
    random_run = asyncio.run(sweep(config("random", shared), str(tmp_path / "worker-b.duckdb")))
    Store.close_all()
    assert complete_runs(str(shared)) == sorted([oracle_run, random_run])

    (shared / "half-written").mkdir()  # no _SUCCESS marker: never ingested
    (shared / "half-written" / "runs.parquet.partial").write_bytes(b"")

    central = tmp_path / "central.duckdb"
    with caplog.at_level(logging.WARNING, logger="prefect.task_runs"):  # an earlier run in
        loaded = asyncio.run(ingest(str(shared), str(central)))  # this process quieted it
    assert sorted(loaded) == sorted([oracle_run, random_run])
    assert f"1 folder(s) of {shared} not loaded" in caplog.text  # a deployment's log says
    assert "(still being published, or not a run's folder): half-written" in caplog.text  # it
    query = "SELECT run_id, model, count(*) FROM responses GROUP BY ALL"
    assert table(central, query) == sorted([(oracle_run, "oracle", 10), (random_run, "random", 10)])
    # the same cases served both runs: stored once
    assert table(central, "SELECT count(*) FROM cases") == [(10,)]
    assert table(central, "SELECT model FROM leaderboard") == [("oracle",), ("random",)]
    before = table(central, "SELECT * FROM summaries")

    assert asyncio.run(ingest(str(shared), str(central))) == []  # idempotent
    assert table(central, "SELECT * FROM summaries") == before
    assert table(central, "SELECT count(*) FROM responses") == [(20,)]


def test_a_run_of_long_prompts_is_ingested_whole(tmp_path):
    """Before: a case's prompt was refused past 200,000 characters by ingest alone, so a run of
    Shuffle Tracking's long stories (here about 260,000 characters each: 400 statements with a
    300-character anchor prefix and suffix) was stored by its worker and never ingested."""
    shared = tmp_path / "shared"
    long = {"manifold": "shuffle", "count": 2, "grid": {
        "anchor": ["NUMERIC"], "max_depth": [200], "confounding_count": [200],
        "anchor_prefix": ["p" * 300], "anchor_suffix": ["s" * 300],
    }}  # fmt: skip
    run_id = asyncio.run(sweep({**config("oracle", shared), "manifolds": [long]},
                               str(tmp_path / "w.duckdb")))  # fmt: skip
    Store.close_all()
    central = tmp_path / "c.duckdb"
    assert asyncio.run(ingest(str(shared), str(central))) == [run_id]
    [(shortest, correct)] = table(central, "SELECT min(length(input)), count(*) FILTER "
                                  "(WHERE outcome = 'correct') FROM responses JOIN cases USING "
                                  "(case_id)")  # fmt: skip
    assert shortest > 200_000 and correct == 2


def test_ingest_from_the_cli(tmp_path):
    shared = tmp_path / "shared"
    run_id = asyncio.run(sweep(config("oracle", shared), str(tmp_path / "w.duckdb")))
    Store.close_all()
    assert (shared / run_id / SUCCESS).exists()
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", str(tmp_path / "c.duckdb")])
    assert result.exit_code == 0, result.output
    assert "ingested 1 run(s)" in result.stdout and run_id in result.stdout
    missing = CliRunner().invoke(
        app, ["ingest", str(tmp_path / "nowhere"), "--db", str(tmp_path / "c.duckdb")]
    )
    assert missing.exit_code == 2 and "no results location" in missing.stderr
    lake = "ducklake:postgres:dbname=lake host=127.0.0.1"  # said so, not "no results location"
    of_a_lake = CliRunner().invoke(app, ["ingest", lake, "--db", str(tmp_path / "c.duckdb")])
    assert of_a_lake.exit_code == 2, of_a_lake.output
    assert of_a_lake.stderr.startswith(f"error: {lake} is a lake: ingest loads a folder")
    loop, dangling = tmp_path / "loop", tmp_path / "dangling"
    loop.symlink_to(loop)
    dangling.symlink_to(tmp_path / "gone" / "shared")
    gone = tmp_path / "gone" / "shared"
    for link, said in (
        (loop, "a symbolic link that loops"),
        (dangling, f"a symbolic link to {gone}"),
    ):
        wrong = CliRunner().invoke(app, ["ingest", str(link), "--db", str(tmp_path / "c.duckdb")])
        assert wrong.exit_code == 2 and f"results location {link} is {said}" in wrong.stderr


def test_a_run_whose_cases_another_sweep_stored_under_other_axes_is_ingested(tmp_path):
    """A first-contact review: a sweep naming `confounding_count` asks the cases a sweep that
    left it at its default stored first, under the key `length=3`; `numerate ingest` of the
    database refused the second run ("point_key 'confounding_count=0,length=3', its case's
    is 'length=3'"), which every other command reads as it is."""
    db, central = tmp_path / "a.duckdb", tmp_path / "c.duckdb"
    grids = ({"length": [3]}, {"length": [3], "confounding_count": [0]})
    runs = [
        asyncio.run(sweep({
            "name": f"axes-{len(grid)}", "models": [{"name": "oracle", "model": "baseline:oracle"}],
            "manifolds": [{"manifold": "shuffle", "count": 3, "grid": grid}],
        }, str(db)))
        for grid in grids
    ]  # fmt: skip
    Store.close_all()
    keys = table(db, "SELECT DISTINCT point_key FROM responses")
    assert keys == [("confounding_count=0,length=3",), ("length=3",)]
    assert table(db, "SELECT count(*) FROM cases") == [(3,)]  # stored once, by the first
    result = CliRunner().invoke(app, ["ingest", str(db), "--db", str(central)])
    assert result.exit_code == 0, result.output
    assert table(
        central, "SELECT run_id, point_key, count(*) FROM responses GROUP BY ALL"
    ) == sorted([(runs[0], "length=3", 3), (runs[1], "confounding_count=0,length=3", 3)])


STOPPED_AFTER_LOADING = """
import signal, sys, time
import numerate.results.regrade as regrade
said_as = sys.argv[3]
graded = []
grade = regrade.regrade_run
def stopped(store, run_id):
    if graded:  # Ctrl-C as the second run is graded, its rows written but not committed
        if said_as == "unreadable":  # the database cannot be read as the stop is said
            from numerate.store import Store, StoreError
            def busy(*args, **kwargs):
                raise StoreError("busy")
            Store.open = busy
        if said_as != "a query interrupted":
            raise KeyboardInterrupt
        try:
            signal.raise_signal(signal.SIGINT)  # numerate's handler takes it
            time.sleep(5)
        except KeyboardInterrupt:  # as DuckDB's bindings take it, and say it in their words
            raise RuntimeError("Query interrupted") from None
    graded.append(run_id)
    return grade(store, run_id)
regrade.regrade_run = stopped
from numerate.cli import main
sys.argv = ["numerate", "ingest", sys.argv[1], "--db", sys.argv[2]]
main()
"""


@pytest.mark.parametrize("said_as", ["KeyboardInterrupt", "a query interrupted", "unreadable"])
def test_an_ingest_a_signal_stops_names_the_runs_it_had_loaded(tmp_path, said_as):
    """Corpus L: a bare `terminated` beside a database that held the run it had loaded. The
    run being graded when the signal came is not loaded at all (issue 40: it was stored
    ungraded, and recorded as ingested). DuckDB's bindings say a Ctrl-C in a query as a
    RuntimeError, which said "no run was loaded" beside the run it had loaded (a hostile
    pass)."""
    import subprocess
    import sys

    shared = tmp_path / "shared"
    first = asyncio.run(sweep(config("oracle", shared), str(tmp_path / "w.duckdb")))
    second = asyncio.run(sweep(config("random", shared), str(tmp_path / "v.duckdb")))
    run_id = min(first, second)  # runs are loaded in the order of their ids
    Store.close_all()
    db = tmp_path / "c.duckdb"
    done = subprocess.run([sys.executable, "-c", STOPPED_AFTER_LOADING, str(shared), str(db),
                           said_as], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"interrupted: the runs loaded before the stop stay in {db}, each whole; run the same "
        "command again to load the rest"  # not "no run was loaded": it could not look
        if said_as == "unreadable"
        else f"interrupted: 1 run(s) were loaded into {db} ({run_id}); run the same command "
        "again to load the rest"
    )
    assert table(db, "SELECT DISTINCT run_id FROM responses") == [(run_id,)]
    assert table(db, "SELECT run_id FROM ingested_shards") == [(run_id,)]


def test_a_corrupt_or_incomplete_shard_is_skipped_and_named(tmp_path):
    shared = tmp_path / "shared"
    good = asyncio.run(sweep(config("oracle", shared), str(tmp_path / "a.duckdb")))
    cut = asyncio.run(sweep(config("random", shared), str(tmp_path / "b.duckdb")))
    Store.close_all()
    (shared / cut / "responses.parquet").write_bytes(b"PAR1 truncated")  # a cut upload
    lacking = shared / "lacking"
    lacking.mkdir()
    (lacking / SUCCESS).write_bytes(b"")  # marked complete, yet no table files
    central = str(tmp_path / "central.duckdb")
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", central])
    assert result.exit_code == 3, result.output
    assert f"ingested 1 run(s) into {central}\n  {good}" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2 and any(cut in w for w in warnings)
    assert "warning: skipped run lacking: runs.parquet is missing, beside its _SUCCESS" in warnings
    assert result.stderr.splitlines()[-1].startswith("error: 2 run(s) skipped")
    # nothing of a skipped run was written (its transaction rolled back): a later ingest of
    # its fixed shards loads it whole
    assert table(central, "SELECT DISTINCT run_id FROM responses") == [(good,)]
    assert table(central, "SELECT run_id FROM runs") == [(good,)]


def test_an_ingest_that_loads_nothing_leaves_no_database_it_made(tmp_path):
    """Every run skipped: the database made for the ingest (and its folder) is removed, as
    it holds nothing; one that was there before, even an empty file, is left as it was."""
    shared = tmp_path / "shared"
    (shared / "lacking").mkdir(parents=True)
    (shared / "lacking" / SUCCESS).write_bytes(b"")
    made = tmp_path / "new" / "central.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", str(made)])
    assert result.exit_code == 3, result.output
    assert result.stderr.splitlines()[-1] == (
        f"error: 1 run(s) skipped; nothing was loaded, and {made} was not made; fix or "
        "remove their shards and ingest again"
    )
    assert not (tmp_path / "new").exists() and result.stdout == ""
    import duckdb

    theirs = tmp_path / "theirs.duckdb"
    duckdb.connect(str(theirs)).close()
    kept = CliRunner().invoke(app, ["ingest", str(shared), "--db", str(theirs)])
    assert kept.exit_code == 3 and theirs.exists(), kept.output
    assert "was not made" not in kept.stderr and "ingested 0 run(s)" in kept.stdout


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """One oracle run published to a results location: its id and the location (a test
    rewrites a copy of it: `a_copy_of`)."""
    shared = tmp_path_factory.mktemp("published") / "shared"
    folder = shared.parent
    run_id = asyncio.run(sweep(config("oracle", shared), str(folder / "a.duckdb")))
    Store.close_all()
    return run_id, shared


def a_copy_of(published, tmp_path):
    """A copy of the published run's location in `tmp_path`: its run id and the location."""
    import shutil

    run_id, shared = published
    copy = tmp_path / "shared"
    shutil.copytree(shared, copy)
    return run_id, copy


def renamed_run(db, run_id, new_id):
    """Database `db` with run `run_id` renamed `new_id` in every table, by hand (outside
    numerate: a run id no run of numerate's has)."""
    import duckdb

    con = duckdb.connect(str(db))
    for (table,) in con.execute(
        "SELECT DISTINCT table_name FROM duckdb_columns() WHERE column_name = 'run_id' "
        "AND table_name IN (SELECT table_name FROM duckdb_tables())"
    ).fetchall():
        con.execute(f"UPDATE {table} SET run_id = ? WHERE run_id = ?", [new_id, run_id])
    con.close()


def _rewrite(shard, sql):
    """`shard` (a Parquet file) with `sql` applied to it (its rows as `shard_rows`)."""
    import duckdb

    con = duckdb.connect()
    con.execute(f"CREATE TABLE shard_rows AS SELECT * FROM read_parquet('{shard}')")
    con.execute(sql)
    con.execute(f"COPY shard_rows TO '{shard}' (FORMAT parquet)")
    con.close()


@pytest.mark.parametrize(
    ("table_name", "sql", "said"),
    [
        ("responses", "UPDATE shard_rows SET run_id = '../../../../tmp/PWNED'",
         "responses.parquet row 1: run_id '../../../../tmp/PWNED', in the folder of run"),
        ("runs", "UPDATE shard_rows SET run_id = 'another-run'",
         "runs.parquet row 1: run_id 'another-run', in the folder of run"),
        ("responses", "UPDATE shard_rows SET outcome = 'bogus-outcome'",
         "responses.parquet row 1: outcome 'bogus-outcome' is none of correct, wrong"),
        ("runs", "UPDATE shard_rows SET status = 'bogus'",
         "runs.parquet row 1: status 'bogus' is none of finished, degraded"),
        # corpus L: loaded, exit 0, as a run `running` with a finish time
        ("runs", "UPDATE shard_rows SET status = 'running'",
         "runs.parquet row 1: status 'running' is none of finished, degraded, failed, interrupted"),
        ("run_models", "UPDATE shard_rows SET status = 'great'",
         "run_models.parquet row 1: status 'great' is none of ok, degraded, failed"),
        # corpus I: `Binder Error: Column "sample_index" in REPLACE list not found`
        ("responses", "CREATE OR REPLACE TABLE shard_rows AS SELECT 1 AS x",
         "responses.parquet: no column run_id, model, model_id, manifold, case_id (a file of"),
        ("responses", "DELETE FROM shard_rows",
         "responses.parquet holds no answer, yet points.parquet (2 rows) and summaries"),
        # issue 40, F9: a traceback, the run stored ungraded and recorded as ingested
        ("responses", "UPDATE shard_rows SET case_id = 'nope-' || case_id",
         "responses.parquet row 1: case 'nope-"),
        ("cases", "DELETE FROM shard_rows", "responses.parquet row 1: case '"),
        ("responses", "UPDATE shard_rows SET manifold = 'shuffle' WHERE manifold = 'objects'",
         "manifold 'shuffle', its case's is 'objects'"),
        ("responses", "UPDATE shard_rows SET point_key = 'forged'",
         "responses.parquet row 1: point_key 'forged' names no grid point of its case's "),
        ("responses", "UPDATE shard_rows SET point_key = 'length=5' WHERE manifold = 'objects'",
         "point_key 'length=5' names no grid point of its case's parameters, '{"),
        ("cases", "UPDATE shard_rows SET manifold = 'mystery'",
         "cases.parquet row 1: manifold 'mystery' is none of objects, "),
        ("cases", "UPDATE shard_rows SET data = '{}'", "its answers cannot be graded: "),
        # F10: loaded, exit 0
        ("responses", "UPDATE shard_rows SET completion_tokens = -5",
         "responses.parquet row 1: completion_tokens -5: a token count is 0 or more"),
        ("responses", "UPDATE shard_rows SET latency_s = 'NaN'::DOUBLE",
         "responses.parquet row 1: latency_s nan: a duration is a finite number of seconds"),
        ("responses", "ALTER TABLE shard_rows ALTER sample_index TYPE VARCHAR; "
                      "UPDATE shard_rows SET sample_index = 'first'",
         "responses.parquet row 1: sample_index 'first' is no integer"),
        # F11: names a config refuses, loaded and printed raw by report
        ("runs", "UPDATE shard_rows SET sweep_name = 'x<script>'",
         "runs.parquet row 1: sweep_name 'x<script>' is not a name numerate takes"),
        ("responses", "UPDATE shard_rows SET model = chr(27) || '[31mred'",
         "responses.parquet row 1: model '\\x1b[31mred' is not a name numerate takes"),
        ("responses", "UPDATE shard_rows SET model_id = 'a' || chr(27) || ']8;;http://x' || chr(7)",
         "responses.parquet row 1: model_id 'a\\x1b]8;;http://x\\x07' is not a name"),
        # F12: the first of two different rows kept silently
        ("runs", "INSERT INTO shard_rows SELECT * REPLACE ('other' AS sweep_name) FROM shard_rows",
         "runs.parquet rows 1 and 2: two different rows for one runs row (run_id 'split-"),
        ("responses", "INSERT INTO shard_rows SELECT * REPLACE ('7' AS raw_text) FROM shard_rows "
                      "WHERE case_id = (SELECT min(case_id) FROM shard_rows)",
         "two different rows for one responses row (run_id 'split-"),
        # the second hostile pass: a poisoned answer cache, planted targets, times no page
        # could show, a run without its row, models that gave no answer, values of any size
        ("completions", "INSERT INTO shard_rows SELECT * REPLACE ('nohash' AS request_hash) "
                        "FROM shard_rows LIMIT 1", "an answer to no request of the run"),
        ("responses", "UPDATE shard_rows SET raw_text = 'Answer: nope'",
         "responses.parquet row 1: its answer or model id is not its request's"),
        ("cases", "INSERT INTO shard_rows SELECT * REPLACE (case_id || 'x' AS case_id) "
                  "FROM shard_rows LIMIT 1", "a case no answer of the run is to"),
        ("cases", "UPDATE shard_rows SET target = '999', data = json_merge_patch(data, "
                  "'{\"target\": \"999\"}') WHERE manifold = 'objects'",
         "target is not what objects generates for its parameters, seed and index"),
        ("runs", "UPDATE shard_rows SET finished_at = 'infinity'::TIMESTAMPTZ",
         "runs.parquet row 1: finished_at"),
        ("runs", "UPDATE shard_rows SET finished_at = started_at - INTERVAL 1 HOUR",
         "runs.parquet row 1: finished_at is before started_at"),
        ("runs", "DELETE FROM shard_rows", "runs.parquet holds 0 rows"),
        ("run_models", "INSERT INTO shard_rows SELECT * REPLACE ('ghost' AS model) "
                       "FROM shard_rows", "a model that gave the run no answer"),
        ("run_models", "UPDATE shard_rows SET cause = repeat('x', 20000)",
         ": longer than 10,000 characters"),
        # the fourth: a password ingested as it was written, where numerate stores ***
        ("completions", "UPDATE shard_rows SET base_url = 'http://user:pw@evil/v1'",
         "base_url 'http://***@evil/v1': a password or token in an address (numerate "),
        ("responses", "ALTER TABLE shard_rows ALTER prompt_tokens TYPE VARCHAR; "
                      "UPDATE shard_rows SET prompt_tokens = '-4'",
         "responses.parquet row 1: prompt_tokens '-4': a token count is 0 or more"),
        ("responses", "UPDATE shard_rows SET error = 'x' || chr(27) || ']0;pwned' || chr(7)",
         "error 'x\\x1b]0;pwned\\x07': a control character"),
    ],
)  # fmt: skip
def test_a_shard_holding_another_run_s_rows_or_no_outcome_is_skipped(
    published, tmp_path, table_name, sql, said
):
    """Before: ingest stored a shard's rows as they were: a run id `../../x` that `plot` then
    wrote a file under (`plot-../../x.png`), an outcome that is none, a second folder holding
    the same run counted as a second run ingested."""
    run_id, shared = a_copy_of(published, tmp_path)
    _rewrite(shared / run_id / f"{table_name}.parquet", sql)
    central = str(tmp_path / "central.duckdb")
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", central])
    assert result.exit_code == 3, result.output
    [warning] = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warning.startswith(f"warning: skipped run {run_id}: ") and said in warning
    assert not Path(central).exists()  # nothing of it, and no database made for nothing


@pytest.mark.parametrize(
    ("layout", "said"),
    [
        ({}, "holds no run folder"),
        ({"a/_SUCCESS": "", "a/runs.parquet": ""}, "is one run's folder (it holds _SUCCESS): give"),
        ({"r1/runs.parquet.partial": "", "r2/x": ""},
         "holds no complete run: none of its 2 folder(s) (r1, r2) has the _SUCCESS marker"),
    ],
)  # fmt: skip
def test_a_location_with_nothing_to_ingest_is_an_error_and_makes_no_database(
    tmp_path, layout, said
):
    """Before: an empty folder, a run's own folder (one level too deep) or folders without
    the _SUCCESS marker were `ingested 0 run(s)`, exit 0, and the database was made: a
    mistyped path looked like a quiet night."""
    shared = tmp_path / "shared"
    shared.mkdir()
    for name, text in layout.items():
        (shared / name).parent.mkdir(parents=True, exist_ok=True)
        (shared / name).write_text(text)
    given = str(shared / "a") if "a/_SUCCESS" in layout else str(shared)
    db = tmp_path / "c.duckdb"
    result = CliRunner().invoke(app, ["ingest", given, "--db", str(db)])
    assert result.exit_code == 2, result.output
    assert said in result.stderr and result.stderr.startswith("error: results location ")
    assert not db.exists()


def test_an_ingested_run_is_graded_here_not_taken_at_its_shards_word(tmp_path):
    """Before: outcomes rewritten to `correct` in a shard were stored as such, and the shard's
    own summaries beside them. Its answers are graded again on ingest, and its aggregates made
    from that."""
    shared = tmp_path / "shared"
    worker = tmp_path / "worker.duckdb"
    run_id = asyncio.run(sweep(config("random", shared), str(worker)))
    Store.close_all()
    truth = table(worker, "SELECT case_id, outcome FROM responses")
    accuracy = table(worker, "SELECT manifold, accuracy FROM summaries")
    assert {outcome for _, outcome in truth} != {"correct"}  # a random guesser misses some
    _rewrite(shared / run_id / "responses.parquet", "UPDATE shard_rows SET outcome = 'correct'")
    _rewrite(shared / run_id / "summaries.parquet", "UPDATE shard_rows SET accuracy = 1.0")
    central = tmp_path / "central.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", str(central)])
    assert result.exit_code == 0, result.output
    assert table(central, "SELECT case_id, outcome FROM responses") == truth
    assert table(central, "SELECT manifold, accuracy FROM summaries") == accuracy


def test_a_run_made_in_the_database_is_said_to_be_there_not_ingested(tmp_path):
    shared = tmp_path / "shared"
    db = str(tmp_path / "a.duckdb")
    run_id = asyncio.run(sweep(config("oracle", shared), db))
    Store.close_all()
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", db])
    assert result.exit_code == 0, result.output
    assert f"ingested 0 run(s) into {db}\n1 run(s) made in {db} already: {run_id}" in result.stdout


def test_an_ingest_names_every_run_and_folder_it_passes_over(tmp_path):
    """A hostile sweep: an ingest said nothing of the runs an earlier ingest had loaded, of a
    folder still being published beside complete runs, nor of a file's NumGen runs (which it
    does not move): "ingested 0 run(s)" read as if the location held nothing."""
    shared, db = tmp_path / "shared", tmp_path / "worker.duckdb"
    run_id = asyncio.run(sweep(config("oracle", shared), str(db)))
    Store.close_all()
    (shared / "publishing").mkdir()  # a run's shards on their way: no marker yet
    (shared / "publishing" / "runs.parquet").write_bytes(b"")
    (tmp_path / "elsewhere").mkdir()
    (shared / "linked").symlink_to(tmp_path / "elsewhere")  # a link to a folder: named too
    central = str(tmp_path / "central.duckdb")
    first = CliRunner().invoke(app, ["ingest", str(shared), "--db", central])
    assert first.exit_code == 0, first.output
    assert f"ingested 1 run(s) into {central}\n  {run_id}" in first.stdout
    assert f"2 folder(s) of {shared} not loaded, without the _SUCCESS marker" in first.stderr
    assert "(still being published, or not a run's folder): linked, publishing" in first.stderr
    again = CliRunner().invoke(app, ["ingest", str(shared), "--db", central])
    assert again.exit_code == 0, again.output
    assert f"1 run(s) loaded by an earlier ingest: {run_id}" in again.stdout
    with pytest.raises(ConfigError, match=r"^no results location at .*nowhere$"):
        ingest_graded(Store.open(central), str(tmp_path / "nowhere"))  # as a deployment's
    Store.close_all()  # ingest asks: said as the command says it, before anything is listed

    images = str(tmp_path / "images")
    numgen = ["numgen", "run", "--generator", "synthetic", "--detector", "blobs", "--count", "2",
              "--db", str(db), "--images-dir", images]  # fmt: skip
    assert CliRunner().invoke(app, numgen).exit_code == 0
    [(numgen_run,)] = table(db, "SELECT run_id FROM numgen_runs")
    moved = CliRunner().invoke(app, ["ingest", str(db), "--db", str(tmp_path / "other.duckdb")])
    assert moved.exit_code == 0, moved.output
    assert f"ingested 1 run(s) into {tmp_path / 'other.duckdb'}\n  {run_id}" in moved.stdout
    said = f"1 NumGen run(s) not moved, as ingest moves reasoning runs only: {numgen_run}"
    assert said in moved.stdout
    only = tmp_path / "numgen-only.duckdb"
    numgen[numgen.index(str(db))] = str(only)
    assert CliRunner().invoke(app, numgen).exit_code == 0
    [(alone,)] = table(only, "SELECT run_id FROM numgen_runs")
    refused = CliRunner().invoke(app, ["ingest", str(only), "--db", str(tmp_path / "x.duckdb")])
    assert refused.exit_code == 2, refused.output
    assert "holds no run that ended to load (1 NumGen run(s) not moved" in refused.stderr
    assert alone in refused.stderr


def test_a_database_is_not_ingested_into_itself(tmp_path):
    """A hostile sweep: `ingest t.duckdb --db t.duckdb` said "ingested 0 run(s)", exit 0."""
    db = tmp_path / "a.duckdb"
    asyncio.run(sweep(config("oracle", tmp_path / "shared"), str(db)))
    Store.close_all()
    (tmp_path / "link.duckdb").symlink_to(db)
    for source in (db, tmp_path / "link.duckdb"):
        result = CliRunner().invoke(app, ["ingest", str(source), "--db", str(db)])
        assert result.exit_code == 2, result.output
        assert f"{source} is the results database itself (--db {db})" in result.stderr


def test_the_default_plot_file_of_a_run_is_a_plain_name_in_the_working_folder(
    tmp_path, monkeypatch
):
    """A run id from elsewhere (`../../x`, written into a database by hand) made `plot` write
    `plot-../../x.png`, outside the working folder, making the folders on the way."""
    db = tmp_path / "a.duckdb"
    run_id = asyncio.run(sweep(config("oracle", tmp_path / "shared"), str(db)))
    Store.close_all()
    odd = "../../PWNED"
    renamed_run(db, run_id, odd)
    work = tmp_path / "deep" / "a"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    result = CliRunner().invoke(app, ["plot", "--db", str(db)])
    assert result.exit_code == 0, result.output
    (written,) = work.iterdir()
    assert written.name.startswith("plot-_.._PWNED-") and written.suffix == ".png"
    assert not (tmp_path / "PWNED.png").exists() and not (tmp_path / "plot-..").exists()


def test_ingest_of_a_file_is_an_error(tmp_path):
    a_file = tmp_path / "shard.parquet"
    a_file.write_bytes(b"x")
    result = CliRunner().invoke(app, ["ingest", str(a_file), "--db", str(tmp_path / "c.duckdb")])
    assert result.exit_code == 2 and result.stderr.strip() == (
        f"error: results location {a_file} is a file, neither a results database (a DuckDB "
        "file) nor a folder of run shards"
    )  # a damaged database file was said to be "a file, not a folder of run shards"


def test_a_results_dir_that_is_a_file_says_so(tmp_path):
    """It said "cannot be written: File exists"."""
    from numerate.kernel.errors import ConfigError
    from numerate.store.shards import check_writable

    planted = tmp_path / "planted"
    planted.write_text("a file")
    with pytest.raises(ConfigError, match="a file, not a folder"):
        check_writable(str(planted))
    assert planted.read_text() == "a file"


def test_a_results_location_in_this_process_s_memory_is_refused(tmp_path):
    """Before: `results_dir: memory://x` was accepted; the shards a run published there were
    gone when it ended."""
    from numerate.kernel.errors import ConfigError
    from numerate.store.shards import check_writable

    with pytest.raises(ConfigError, match="'memory://x' is this process's memory"):
        check_writable("memory://x")
    result = CliRunner().invoke(app, ["ingest", "memory://x", "--db", str(tmp_path / "c.db")])
    assert result.exit_code == 2 and "this process's memory" in result.stderr


def test_the_root_folder_is_the_root_not_the_working_folder(tmp_path, monkeypatch):
    """Before: `/` lost its slash and listed the working folder's runs as the root's."""
    from numerate.store.shards import _filesystem

    monkeypatch.chdir(tmp_path)
    assert _filesystem("/")[1] == "/" and _filesystem("/x/")[1] == "/x"


@pytest.mark.parametrize(
    ("location", "said"),
    [("zip://x", "cannot be opened: IsADirectoryError"),
     ("ftp://127.0.0.1:1/x", "cannot be opened: ConnectionRefusedError"),
     ("reference://", "cannot be opened: TypeError: ReferenceFileSystem")],
)  # fmt: skip
def test_a_results_location_its_file_system_cannot_open_is_one_error(
    tmp_path, monkeypatch, location, said
):
    """Before: a traceback from the file system (an FTP server that refuses, an archive that
    is none, a file system that needs arguments a URL cannot give)."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["ingest", location, "--db", str(tmp_path / "c.duckdb")])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: results location {location!r} {said}")
    assert not (tmp_path / "c.duckdb").exists()


def test_rows_a_shard_holds_twice_alike_are_loaded_once(tmp_path):
    """Two identical rows for one key are one row (a shard written twice over), not refused."""
    shared = tmp_path / "shared"
    worker = tmp_path / "w.duckdb"
    run_id = asyncio.run(sweep(config("random", shared), str(worker)))
    Store.close_all()
    for name in ("runs", "responses"):
        _rewrite(shared / run_id / f"{name}.parquet",
                 "INSERT INTO shard_rows SELECT * FROM shard_rows")  # fmt: skip
    central = tmp_path / "central.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", str(central)])
    assert result.exit_code == 0, result.output
    query = "SELECT case_id, outcome FROM responses"
    assert table(central, query) == table(worker, query)


@pytest.fixture(scope="module")
def two_runs_in_one(tmp_path_factory):
    """A database holding two runs of different models whose cases partly overlap: its path
    and the first run's id."""
    folder = tmp_path_factory.mktemp("two")
    db = str(folder / "two.duckdb")
    run_id = asyncio.run(sweep(config("oracle", folder / "a"), db))
    other = config("random", folder / "b")
    other["manifolds"] = [{"manifold": "objects", "count": 8}, {"manifold": "sequence", "count": 5}]
    asyncio.run(sweep(other, db))
    Store.close_all()
    return db, run_id


@pytest.mark.parametrize("bucket", [ID_BUCKET, "hash({}) % 2", "0"])
def test_a_run_exports_exactly_its_cases_and_answers_whatever_buckets_their_ids_share(
    two_runs_in_one, tmp_path, monkeypatch, bucket
):
    """A run's cases and completions are matched on a bucket of their ids (a hash: a join on
    the ids held a million in memory); where ids share a bucket (here many, or all), the run's
    still export exactly, none of the other run's in the same database."""
    from numerate.store import shards
    from numerate.store.schema import shard_tables

    db, run_id = two_runs_in_one
    monkeypatch.setattr(shards, "SHARD_TABLES", shard_tables(bucket))
    store = Store.open(db)
    (tmp_path / "out").mkdir()
    try:
        shards.export_run(store, run_id, str(tmp_path / "out"))
        exported = {
            name: sorted(store.query(f"SELECT {key} FROM '{tmp_path}/out/{name}.parquet'"))
            for name, key in (("cases", "case_id"), ("completions", "request_hash, run_id"))
        }
        held = {
            "cases": "SELECT case_id FROM cases WHERE case_id IN "
            "(SELECT case_id FROM responses WHERE run_id = ?)",
            "completions": "SELECT request_hash, run_id FROM completions WHERE request_hash IN "
            "(SELECT request_hash FROM responses WHERE run_id = ?)",
        }
        every = {name: store.query(f"SELECT count(*) FROM {name}")[0][0] for name in held}
        for name, sql in held.items():
            assert exported[name] == sorted(store.query(sql, [run_id]))
            assert 0 < len(exported[name]) < every[name]  # the other run's are there, not taken
    finally:
        Store.close_all()


def _two_runs(tmp_path):
    """Two runs of one sweep published to two locations, `first` and `second` (the id of its
    run), from databases a.duckdb and b.duckdb."""
    first, second = tmp_path / "first", tmp_path / "second"
    asyncio.run(sweep(config("oracle", first), str(tmp_path / "a.duckdb")))
    run_id = asyncio.run(sweep(config("random", second), str(tmp_path / "b.duckdb")))
    Store.close_all()
    return first, second, run_id


def test_a_case_unlike_the_one_the_database_holds_is_refused(tmp_path):
    """F12: a case (or completion) whose key the database holds already was ignored, so a
    shard's answers were graded against another case than the one they answered."""
    first, second, run_id = _two_runs(tmp_path)
    # of another generator version (which cannot be made again here to compare), same id
    _rewrite(second / run_id / "cases.parquet",
             "UPDATE shard_rows SET target = target || '0', generator_version = 'other' "
             "WHERE manifold = 'objects'")  # fmt: skip
    central = tmp_path / "central.duckdb"
    assert CliRunner().invoke(app, ["ingest", str(first), "--db", str(central)]).exit_code == 0
    result = CliRunner().invoke(app, ["ingest", str(second), "--db", str(central)])
    assert result.exit_code == 3, result.output
    import duckdb

    first_changed = duckdb.sql(  # the file's first row that was changed, counted from 1
        f"SELECT min(file_row_number) + 1 FROM read_parquet('{second / run_id / 'cases.parquet'}', "
        "file_row_number = true) WHERE manifold = 'objects'").fetchall()[0][0]  # fmt: skip
    said = f"cases.parquet row {first_changed}: not the cases row the database holds under case_id"
    assert said in result.stderr
    assert table(central, "SELECT count(DISTINCT run_id) FROM responses") == [(1,)]


def test_a_shard_that_is_a_link_out_of_the_location_is_not_followed(published, tmp_path):
    """A local results location: a shard that is a symbolic link (to a file elsewhere that
    is a shard too) is refused, not read; the run is skipped."""
    import os

    run_id, shared = a_copy_of(published, tmp_path)
    shard = shared / run_id / "responses.parquet"
    elsewhere = tmp_path / "elsewhere.parquet"
    os.rename(shard, elsewhere)
    os.symlink(elsewhere, shard)
    central = tmp_path / "central.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", str(central)])
    assert result.exit_code == 3, result.output
    assert f"warning: skipped run {run_id}: {shard}: a symbolic link" in result.stderr
    assert not central.exists()


def test_a_run_folder_whose_name_holds_an_escape_is_skipped_and_shown_escaped(published, tmp_path):
    """F11: a folder named with a terminal escape is no run id; the warning shows it escaped."""
    run_id, shared = a_copy_of(published, tmp_path)
    (shared / run_id).rename(shared / "\x1b]0;owned\x07")
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", str(tmp_path / "c.duckdb")])
    assert result.exit_code == 3, result.output
    assert "\x1b" not in result.output
    assert (
        "warning: skipped run '\\x1b]0;owned\\x07': its folder's name is no run id (1 to 200 "
        "of ASCII letters" in (result.stderr)
    )


def test_an_ingested_answer_beyond_the_bound_is_stored_cut_and_graded_on_what_is_kept(
    published, tmp_path
):
    """F2: a 60 MB answer in a shard was stored whole (its page still loading after 90 s)."""
    from numerate.kernel.answers import MAX_ANSWER_CHARS, cut_answer
    from tests.endpoints.test_answer_bound import WHOLE

    run_id, shared = a_copy_of(published, tmp_path)
    long = "<think>" + "w" * 300_000 + "</think>\n"
    _rewrite(shared / run_id / "responses.parquet",
             f"UPDATE shard_rows SET raw_text = '{long}' || raw_text")  # fmt: skip
    _rewrite(shared / run_id / "completions.parquet",
             f"UPDATE shard_rows SET text = '{long}' || text")  # fmt: skip
    central = tmp_path / "central.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", str(central)])
    assert result.exit_code == 0, result.output
    rows = table(
        central,
        f"SELECT {WHOLE.format(text='raw_text', sha='raw_sha')}, raw_cut, raw_chars, outcome "
        "FROM responses",
    )
    assert len(rows) == 10
    for text, cut, chars, outcome in rows:
        assert cut and len(text) == MAX_ANSWER_CHARS and chars > MAX_ANSWER_CHARS
        assert text.startswith("<think>w") and text.endswith("</think>\n" + text.split("\n")[-1])
        assert outcome == "correct"  # the oracle's answer, at the end, is kept
    assert text == cut_answer(long + text.split("\n")[-1])[0]
    completions = table(
        central,
        f"SELECT length({WHOLE.format(text='text', sha='text_sha')}), text_cut FROM completions",
    )
    assert completions and set(completions) == {(MAX_ANSWER_CHARS, True)}


def test_an_answer_too_large_to_read_is_said_so_and_its_run_skipped(published, tmp_path):
    """A hostile pass: an answer of 40 million characters in a shard (no run publishes one:
    answers are cut at MAX_ANSWER_CHARS) skipped its run in DuckDB's words alone ("Out of
    Memory Error: failed to allocate ...", or "its shards cannot be read", as if damaged)."""
    run_id, shared = a_copy_of(published, tmp_path)
    first = "WHERE request_hash = (SELECT min(request_hash) FROM shard_rows)"
    for shard, column in (("responses", "raw_text"), ("completions", "text")):
        huge = f"repeat('w', 40000000) || {column}"
        _rewrite(
            shared / run_id / f"{shard}.parquet", f"UPDATE shard_rows SET {column} = {huge} {first}"
        )
    central = tmp_path / "central.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", str(central)])
    assert result.exit_code == 3, result.output
    [warning] = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warning.startswith(f"warning: skipped run {run_id}: "), warning
    assert "a value too large to read in the 128MB numerate lets DuckDB hold" in warning, warning


def test_a_shard_that_is_a_folder_is_skipped_in_one_warning(published, tmp_path):
    """Issue 41, found from outside: DuckDB's own words and a temporary path, exit 2."""
    run_id, shared = a_copy_of(published, tmp_path)
    shard = shared / run_id / "cases.parquet"
    shard.unlink()
    shard.mkdir()
    central = tmp_path / "central.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", str(central)])
    assert result.exit_code == 3, result.output
    assert f"warning: skipped run {run_id}: {shard}: not a regular file\n" in result.stderr
    assert not central.exists()


def test_a_shard_published_before_schema_14_loads_beside_the_same_cases_stored_since(tmp_path):
    """Shards of earlier versions hold each case whole in `data` (its columns repeated): they
    are the same cases as those stored since, not refused as others, and stored as numerate
    stores cases now."""
    first, second, run_id = _two_runs(tmp_path)
    _rewrite(second / run_id / "cases.parquet",
             "UPDATE shard_rows SET data = json_merge_patch(json_object('manifold', manifold, "
             "'index', case_index, 'seed', seed, 'params', params, 'input', input, "
             "'target', target), data)")  # fmt: skip
    central, fresh = tmp_path / "central.duckdb", tmp_path / "fresh.duckdb"
    assert CliRunner().invoke(app, ["ingest", str(first), "--db", str(central)]).exit_code == 0
    for db in (central, fresh):
        result = CliRunner().invoke(app, ["ingest", str(second), "--db", str(db)])
        assert result.exit_code == 0, result.output
        assert table(db, "SELECT count(DISTINCT case_id) FROM responses") == [(10,)]
        stored = table(db, "SELECT DISTINCT json_keys(data) FROM cases")
        assert stored and not {"input", "params"} & {k for (keys,) in stored for k in keys}
    query = "SELECT case_id, outcome FROM responses WHERE run_id = ?"
    assert table(central, query.replace("?", f"'{run_id}'")) == table(
        tmp_path / "b.duckdb", query.replace("?", f"'{run_id}'")
    )


@pytest.mark.parametrize("target", ["a file", "nothing"])
def test_a_marker_that_is_a_link_out_of_the_location_is_not_followed(published, tmp_path, target):
    """A local results location: a run whose _SUCCESS marker is a symbolic link (to a file
    elsewhere, or to nothing) is skipped and named, as a shard that is a link is; its
    existence was once tested through the link."""
    import os

    run_id, shared = a_copy_of(published, tmp_path)
    marker = shared / run_id / SUCCESS
    marker.unlink()
    elsewhere = tmp_path / "elsewhere"
    if target == "a file":
        elsewhere.write_bytes(b"")
    os.symlink(elsewhere, marker)
    central = tmp_path / "central.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(shared), "--db", str(central)])
    assert result.exit_code == 3, result.output
    assert f"warning: skipped run {run_id}: {marker}: a symbolic link; numerate follows no" in (
        result.stderr
    )
    assert not central.exists()


def test_a_run_of_a_moved_database_whose_id_is_a_path_writes_nothing_outside(
    two_runs_in_one, tmp_path
):
    """A hostile pass: a database file whose run id was changed by hand to `../../<a folder
    elsewhere>` had that run's shards written there (a file there replaced) as its runs were
    moved, before the id was refused. Now the run is skipped, named escaped, and the other
    moved as before."""
    import os
    import shutil
    import tempfile

    db, run_id = two_runs_in_one
    elsewhere = tmp_path / "elsewhere"
    climb = "../" * (len(Path(tempfile.gettempdir()).resolve().parts) + 1)
    hostile = climb + str(elsewhere)[1:] + "\x1b]0;x"
    copy = tmp_path / "moved.duckdb"
    shutil.copy(db, copy)
    renamed_run(copy, run_id, hostile)
    central = tmp_path / "central.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(copy), "--db", str(central)])
    assert result.exit_code == 3, result.output
    assert not os.path.lexists(tmp_path / "elsewhere\x1b]0;x") and not elsewhere.exists()
    assert "\x1b" not in result.output
    assert "warning: skipped run '../" in result.stderr
    assert "its id is no run id (1 to 200 of ASCII letters, digits" in result.stderr
    assert "ingested 1 run(s)" in result.stdout


def test_a_moved_database_s_skipped_run_is_named_by_its_table_not_a_shard_it_never_saw(
    two_runs_in_one, tmp_path
):
    """A hostile pass: a run of a database file skipped for a model name changed by hand was
    said as `responses.parquet row 1: ...`, a file of the temporary shards its runs travel
    as, which the user never saw."""
    import shutil

    import duckdb

    db, run_id = two_runs_in_one
    copy = tmp_path / "moved.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    con.execute("UPDATE responses SET model = 'red\x1b[31m' WHERE run_id = ?", [run_id])
    con.close()
    result = CliRunner().invoke(app, ["ingest", str(copy), "--db", str(tmp_path / "c.duckdb")])
    assert result.exit_code == 3, result.output
    assert (
        f"warning: skipped run {run_id}: table responses: model 'red\\x1b[31m' is not a name "
        "numerate takes"
    ) in result.stderr, result.stderr
    assert ".parquet" not in result.stderr


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        ("responses.parquet row 1: model 'cases.parquet' is not a name",
         "table responses: model 'cases.parquet' is not a name"),
        ("responses.parquet row 3: case 'x' is not in cases.parquet (a run publishes)",
         "table responses: case 'x' is not in table cases (a run publishes)"),
        ("its answer is not its request's (completions.parquet)",
         "its answer is not its request's (table completions)"),
        ("model 'a.runs.parquet' is not", "model 'a.runs.parquet' is not"),
    ],
)  # fmt: skip
def test_a_moved_database_s_problems_name_tables_and_leave_values_be(reason, said):
    from numerate.store.shards import in_its_tables

    assert in_its_tables(reason) == said


def test_a_moved_database_s_runs_that_ended_move_and_those_that_did_not_are_named(
    two_runs_in_one, tmp_path
):
    """A first-contact review: `ingest` of a database file moved its `finished` runs only; a
    `failed` run (a model whose endpoint was down beside two that answered) was left behind
    unsaid, and a skipped run was to be fixed in "its shards", which the user never saw."""
    import shutil

    import duckdb

    db, run_id = two_runs_in_one
    copy = tmp_path / "moved.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    [(other,)] = con.execute("SELECT run_id FROM runs WHERE run_id <> ?", [run_id]).fetchall()
    con.execute("UPDATE runs SET status = 'failed' WHERE run_id = ?", [run_id])
    con.execute("UPDATE runs SET status = 'interrupted' WHERE run_id = ?", [other])
    con.close()
    central = tmp_path / "central.duckdb"
    result = CliRunner().invoke(app, ["ingest", str(copy), "--db", str(central)])
    assert result.exit_code == 3, result.output
    assert f"ingested 1 run(s) into {central}\n  {run_id}" in result.stdout
    assert f"warning: skipped run {other}: it is interrupted, not ended: resume it" in result.stderr
    assert f"1 run(s) skipped; they stay in {copy}, unchanged" in result.stderr
    assert table(central, "SELECT run_id, status FROM runs") == [(run_id, "failed")]


def test_a_moved_database_whose_runs_all_go_on_names_each(two_runs_in_one, tmp_path):
    """A review: of a database whose two runs were both still to resume, `ingest` named the
    first only; each is named, with why."""
    import shutil

    import duckdb

    db, _ = two_runs_in_one
    copy = tmp_path / "moved.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    con.execute("UPDATE runs SET status = 'interrupted'")
    runs = [r for (r,) in con.execute("SELECT run_id FROM runs ORDER BY started_at").fetchall()]
    con.close()
    result = CliRunner().invoke(app, ["ingest", str(copy), "--db", str(tmp_path / "c.duckdb")])
    assert result.exit_code == 2, result.output
    said = "run {}: it is interrupted, not ended: resume it (the same `numerate run`)"
    assert result.stderr.strip() == (
        f"error: results database {copy} holds no run that ended to load "
        f"({said.format(runs[0])}, then ingest again; {said.format(runs[1])}, then ingest again)"
    )


def test_a_run_whose_model_failed_before_it_answered_moves_with_its_cause(tmp_path):
    """A first-contact review: a run whose model could not be reached (beside one that
    answered) was refused by ingest, "a model that gave the run no answer": its part's row
    is the record of why it gave none."""
    db, central = tmp_path / "a.duckdb", tmp_path / "c.duckdb"
    both = config("oracle", tmp_path / "shared")
    both["models"].append({"name": "down", "model": "m", "base_url": "http://127.0.0.1:9/v1"})
    cause = "cannot reach model 'down' at http://127.0.0.1:9/v1: ConnectError"
    with pytest.raises(Exception, match="model 'down' failed"):
        asyncio.run(sweep(both, str(db), unusable={"down": cause}))
    Store.close_all()
    result = CliRunner().invoke(app, ["ingest", str(db), "--db", str(central)])
    assert result.exit_code == 0, result.output
    assert table(central, "SELECT model, status, cause FROM run_models") == [
        ("down", "failed", f"{cause}; nothing was sent"), ("oracle", "ok", None)
    ]  # fmt: skip
    assert table(central, "SELECT status FROM runs") == [("failed",)]


@pytest.mark.parametrize("hostile", ["..", "."])
def test_a_run_of_a_moved_database_whose_id_is_a_dot_or_two_writes_nothing(
    two_runs_in_one, tmp_path, monkeypatch, hostile
):
    """A review: `..` and `.` passed the rule of run ids, so such a run's shards were written
    to the folder above the temporary one (or into it), and the run went unsaid."""
    import shutil
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temporary"))
    (tmp_path / "temporary").mkdir()
    db, run_id = two_runs_in_one
    copy = tmp_path / "moved.duckdb"
    shutil.copy(db, copy)
    renamed_run(copy, run_id, hostile)
    result = CliRunner().invoke(app, ["ingest", str(copy), "--db", str(tmp_path / "c.duckdb")])
    assert result.exit_code == 3, result.output
    assert f"warning: skipped run '{hostile}': its id is no run id" in result.stderr
    assert not list(tmp_path.glob("*.parquet")) and not list(tmp_path.glob("temporary/*"))


def test_a_link_planted_at_a_run_s_folder_or_shard_in_the_location_is_not_written_through(
    tmp_path,
):
    """A hostile pass: a link planted at `<results_dir>/<run id>` (while the run went on, for
    hours) had the run's shards written into the folder it named, a file there overwritten,
    exit 0; a link at a shard's name had its target overwritten."""
    from numerate.kernel.confined import LeadsOutside
    from numerate.store.shards import publish_run

    db, shared, elsewhere = tmp_path / "a.duckdb", tmp_path / "shared", tmp_path / "elsewhere"
    run_id = asyncio.run(sweep(config("oracle", shared), str(db)))
    Store.close_all()
    elsewhere.mkdir()
    (elsewhere / "runs.parquet").write_text("theirs")
    shutil.rmtree(shared / run_id)
    (shared / run_id).symlink_to(elsewhere)
    with pytest.raises(LeadsOutside, match=f"{shared / run_id}: a symbolic link; numerate "):
        publish_run(Store.open(str(db)), run_id, str(shared))
    assert [p.name for p in elsewhere.iterdir()] == ["runs.parquet"]
    assert (elsewhere / "runs.parquet").read_text() == "theirs"

    (shared / run_id).unlink()
    (shared / run_id).mkdir()
    (shared / run_id / "runs.parquet").symlink_to(elsewhere / "runs.parquet")
    publish_run(Store.open(str(db)), run_id, str(shared))
    Store.close_all()
    assert (elsewhere / "runs.parquet").read_text() == "theirs"
    assert not (shared / run_id / "runs.parquet").is_symlink()
    assert (shared / run_id / SUCCESS).exists()
