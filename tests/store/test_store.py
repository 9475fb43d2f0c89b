import json
import os
import threading

import duckdb
import pytest

from numerate.kernel.errors import ConfigError
from numerate.store import Store, StoreError
from numerate.store.schema import MIGRATIONS, SCHEMA_VERSION, migrate, transaction
from tests.store.old_schema import database_at_version


def test_a_new_database_gets_the_current_schema(db_path):
    store = Store.open(db_path)
    versions = store.query("SELECT version FROM schema_migrations ORDER BY version")
    assert [v for (v,) in versions] == list(range(1, SCHEMA_VERSION + 1))
    assert len(MIGRATIONS) == SCHEMA_VERSION
    names = {r[0] for r in store.query("SELECT table_name FROM information_schema.tables")}
    assert {"runs", "cases", "completions", "responses", "points", "summaries",
            "leaderboard"} <= names  # fmt: skip


def test_migrating_twice_changes_nothing(tmp_path):
    con = duckdb.connect(str(tmp_path / "x.duckdb"))
    assert migrate(con) == 0
    assert migrate(con) == SCHEMA_VERSION
    con.close()


def test_a_newer_database_is_refused(tmp_path):
    path = str(tmp_path / "new.duckdb")
    con = duckdb.connect(path)
    migrate(con)
    con.execute("INSERT INTO schema_migrations VALUES (?, 'future', now())", [SCHEMA_VERSION + 1])
    con.close()
    with pytest.raises(StoreError, match="newer than this numerate"):
        Store(path)


@pytest.mark.parametrize(
    ("removed", "said", "kept"),
    [("version >= 8",  # 8 adds columns; 9 and 10 rebuild their tables: they can run again
      "migration 8 fails: Catalog Error", 7),
     ("true", "recorded schema version 0 (migration 1 fails: Catalog Error", 0)],
)  # fmt: skip
def test_a_schema_migrations_table_edited_by_hand_is_said_so(tmp_path, removed, said, kept):
    """Before: upgrade ran the migration again on tables that had it, and DuckDB's
    CatalogException ("Column with name ... already exists") came as a traceback."""
    path = str(tmp_path / "edited.duckdb")
    con = duckdb.connect(path)
    migrate(con)
    con.execute(f"DELETE FROM schema_migrations WHERE {removed}")
    con.close()
    with pytest.raises(StoreError, match="do not match its recorded schema version") as refused:
        Store(path)
    assert said in str(refused.value) and "changed by hand" in str(refused.value)
    con = duckdb.connect(path, read_only=True)  # nothing half done: the migration rolled back
    assert con.execute("SELECT count(*) FROM schema_migrations").fetchall()[0][0] == kept
    con.close()


def test_a_store_without_a_file_claims_runs_without_touching_dev_null():
    """Before: a `:memory:` store's claim was /dev/null opened, and releasing it removed
    /dev/null (a lake's store, which claims like it, did so at the end of every run)."""
    import stat

    store = Store(":memory:")
    assert store.claim_run("r") and store.claimed_runs() == ["r"]
    store.close()
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.parametrize("name", ["http://127.0.0.1:1/x.duckdb", "s3://bucket/x.duckdb",
                                  "md:mine", "results:2026.duckdb", "a:b.duckdb"])  # fmt: skip
def test_a_name_duckdb_reads_as_remote_or_an_extension_s_is_refused_and_makes_nothing(
    tmp_path, monkeypatch, name
):
    """Before: `--db http://host/x.duckdb` made the folders `http:/host` here, and DuckDB
    tried to install httpfs (or motherduck, for `md:`) from the network, a line that ended in
    a colon. Refused now, for the writer and the reader, naming the prefix; `./name` is a file."""
    from numerate.store.reader import Reader

    monkeypatch.chdir(tmp_path)
    prefix = name.split(":")[0] + ":"
    if len(prefix) == 2:  # one character and a colon: a drive letter's form, which DuckDB
        Store.open(name).close()  # reads as a file's name
        assert (tmp_path / name).is_file()
        return
    with pytest.raises(StoreError, match=f"starts with '{prefix}' as a remote database"):
        Store.open(name)
    with pytest.raises(ConfigError, match=f"starts with '{prefix}' as a remote database"):
        Reader.open(name)
    assert list(tmp_path.iterdir()) == []
    local = name if "//" not in name else "x:y.duckdb"  # a file whose name holds a colon
    Store.open(f"./{local}").close()
    assert (tmp_path / local).is_file()


def test_runs_resume_only_when_unfinished(db_path):
    store = Store.open(db_path)
    store.start_run("r1", "s", "h", {"a": 1}, "v")
    assert store.unfinished_run("s", "h") == "r1"
    assert store.unfinished_run("s", "other") is None
    store.set_run_status("r1", "finished")
    assert store.unfinished_run("s", "h") is None
    assert store.query("SELECT finished_at IS NOT NULL FROM runs")[0][0]


def completion(key, text, run_id="r", **overrides):
    from numerate.store import now

    row = {"request_hash": key, "run_id": run_id, "base_url": "http://127.0.0.1:1/v1",
           "model_id": "m", "revision": None, "sample_index": 0, "text": text,
           "text_cut": False, "text_chars": None, "finish_reason": "stop", "prompt_tokens": 1,
           "completion_tokens": 1, "latency_s": 0.1, "attempts": 1,
           "created_at": now(), "reasoning": None, "reasoning_cut": None,
           "reasoning_chars": None, "reasoning_tokens": None, "reasoning_ratio": None}  # fmt: skip
    return {**row, **overrides}


def test_completions_keep_the_first_answer_of_a_run(db_path):
    store = Store.open(db_path)
    row = completion("h", "first")
    store.put_completions([row])
    store.put_completions([{**row, "text": "second"}])
    assert store.get_completions(["h", "missing"])["h"]["text"] == "first"


def test_each_run_keeps_its_own_answers_and_reuse_reads_the_latest(db_path):
    from datetime import timedelta

    store = Store.open(db_path)
    early = completion("h", "night 1", run_id="n1")
    late = completion("h", "night 2", run_id="n2", created_at=early["created_at"] + timedelta(1))
    store.put_completions([early])
    store.put_completions([late])
    assert store.get_completions(["h"], run_id="n1")["h"]["text"] == "night 1"
    assert store.get_completions(["h"], run_id="n2")["h"]["text"] == "night 2"
    assert store.get_completions(["h"], run_id="n3") == {}
    assert store.get_completions(["h"])["h"]["text"] == "night 2"


def test_cache_clear_by_model_and_date(db_path):
    from datetime import timedelta

    store = Store.open(db_path)
    old = completion("a", "x", model_id="m1")
    later = completion("b", "y", model_id="m2", created_at=old["created_at"] + timedelta(2))
    store.put_completions([old, later])
    with pytest.raises(StoreError, match=r"--model 'nope': no run in .* asked that model id"):
        store.clear_completions(model_ids=["nope"])  # a typo: "removed 0" before
    assert store.clear_completions(before=old["created_at"] + timedelta(1)) == 1
    assert set(store.get_completions(["a", "b"])) == {"b"}
    assert store.clear_completions(model_ids=["m2"]) == 1
    assert store.query("SELECT count(*) FROM completions")[0][0] == 0


def test_cache_clear_of_several_models_clears_each(db_path):
    """A hostile pass: `cache clear --model A --model B` cleared only B's answers, exit 0."""
    from typer.testing import CliRunner

    from numerate.cli import app

    store = Store.open(db_path)
    store.put_completions([completion(h, h, model_id=m) for h, m in (("a", "m1"), ("b", "m2"),
                                                                       ("c", "m3"))])  # fmt: skip
    Store.close_all()
    asked = ["cache", "clear", "--db", db_path, "--model", "m1", "--model", "m2"]
    cleared = CliRunner().invoke(app, asked)
    assert cleared.exit_code == 0, cleared.output
    assert "removed 2 stored answer(s)" in cleared.stdout
    store = Store.open(db_path)
    assert store.query("SELECT model_id FROM completions") == [("m3",)]


def test_a_database_held_by_another_writer_past_the_wait_gives_a_clear_error(tmp_path, monkeypatch):
    import subprocess
    import sys

    path = str(tmp_path / "held.duckdb")
    code = (
        f"import duckdb, time; c = duckdb.connect({path!r}); "
        "print('ready', flush=True); time.sleep(30)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        monkeypatch.setenv("NUMERATE_LOCK_TIMEOUT", "0.3")
        with pytest.raises(StoreError, match=f"stayed busy .* PID {holder.pid}"):
            Store(path)
    finally:
        holder.kill()
        holder.wait()


def test_a_batch_with_a_stored_request_keeps_the_rest_and_the_first_answer(db_path):
    store = Store.open(db_path)
    row = completion

    store.put_completions([row("a", "first a")])
    store.put_completions([row("b", "b"), row("a", "second a"), row("c", "c")])
    stored = store.get_completions(["a", "b", "c"])
    assert {k: v["text"] for k, v in stored.items()} == {"a": "first a", "b": "b", "c": "c"}
    store.put_completions([row("d", "d")])  # the appender still works after a conflict
    assert "d" in store.get_completions(["d"])


def test_a_version_3_database_keeps_its_rows_through_migration_4(tmp_path):
    path = str(tmp_path / "v3.duckdb")
    con = database_at_version(path, 3)
    con.execute(
        "INSERT INTO cases VALUES ('objects-00ff-0', 'objects', 'default', '{}', 255, 0, 'q', "
        "'3', 0.25, '{}')"
    )
    con.execute("INSERT INTO completions VALUES ('h', 'r', 'm', 'Answer: 3', 'stop', 1, 2, 0.1, "
                "1, now())")  # fmt: skip
    con.execute(
        "INSERT INTO responses VALUES ('r', 'm', 'm', 'objects', 'objects-00ff-0', 'default', "
        "'h', 'Answer: 3', '3', 'correct', NULL, 'stop', 1, 2, 0.1, false, now())"
    )
    con.close()
    store = Store(path)
    assert store.query("SELECT generator_version, chance_random, chance_heuristic FROM cases") == [
        ("unversioned", 0.25, None)
    ]
    assert store.query("SELECT base_url, sample_index, text FROM completions") == [
        (None, 0, "Answer: 3")
    ]
    assert store.query("SELECT sample_index, outcome FROM responses") == [(0, "correct")]
    store.close()


def test_a_row_holding_a_lone_surrogate_is_stored_with_a_replacement_character():
    """A journal written before answers were cleaned may hold "\\ud800": replaying it failed
    every later write to the database (a UnicodeEncodeError in each command)."""
    from numerate.store.tables import insert_rows

    store = Store.open(":memory:")
    with store.session() as con:
        con.execute("CREATE TABLE t (a VARCHAR, n INTEGER)")
        insert_rows(con, "t", ["a", "n"], [{"a": "x\ud800y", "n": 1}, {"a": "ok", "n": 2}],
                    strict=False)  # fmt: skip
        assert con.execute("SELECT a, n FROM t ORDER BY n").fetchall() == [
            ("x\ufffdy", 1), ("ok", 2),
        ]  # fmt: skip


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_a_database_whose_making_is_stopped_is_not_left_behind(tmp_path, monkeypatch, stop):
    """A Ctrl-C while `numgen run` made its database (in its migrations) left it behind,
    empty, while the command said nothing was stored: no Store held it to be removed."""
    import numerate.store.writer as writer

    def stopped_halfway(con):
        con.execute("CREATE TABLE half_made (x INTEGER)")
        raise stop

    made = tmp_path / "new" / "r.duckdb"
    kept = tmp_path / "kept.duckdb"
    Store.open(str(kept))
    Store.release(str(kept))
    monkeypatch.setattr(writer, "migrate", stopped_halfway)
    for path in (made, kept):
        with pytest.raises(stop):
            Store.open(str(path))
    assert not made.exists() and not made.parent.exists()  # its folder was made for it too
    assert kept.exists()  # there before: never removed


def changed_by_hand(tmp_path, *statements):
    """A new results database, then these statements run on it outside numerate."""
    db = str(tmp_path / "x.duckdb")
    Store.open(db)
    Store.close_all()
    con = duckdb.connect(db)
    for statement in statements:
        con.execute(statement)
    con.close()
    return db


def test_a_view_in_place_of_one_of_numerate_s_tables_is_refused_by_writers(tmp_path):
    """The second hostile pass: `runs` made a view (over `runs_real` and a file elsewhere):
    `numerate run` ended in DuckDB's `runs is not a table` (a traceback), and ingest read the
    file through the view, with file access on."""
    db = changed_by_hand(
        tmp_path,
        "ALTER TABLE runs RENAME TO runs_real",
        "CREATE VIEW runs AS SELECT * FROM runs_real",
        "CREATE VIEW my_own_view AS SELECT 1",  # an analyst's view: welcome
    )
    with pytest.raises(StoreError, match="runs is a view where numerate keeps a table"):
        Store.open(db)


@pytest.mark.parametrize(
    ("changed", "said", "reader"),
    [
        ("DROP TABLE summaries", "table summaries is missing", "report"),
        ("ALTER TABLE runs DROP COLUMN status", "table runs lacks its column status", "runs"),
        ("ALTER TABLE runs RENAME COLUMN sweep_name TO name",
         "table runs lacks its column sweep_name", "report"),
    ],
)  # fmt: skip
def test_a_table_or_column_removed_by_hand_is_said_not_met_midway(tmp_path, changed, said, reader):
    """A hostile pass: `run` and `regrade` on such a file ended in DuckDB's traceback (exit 1)
    after a sweep, and `upgrade` said the file was up to date; `runs` and `report` said
    DuckDB's "Binder Error: ...". A table or a column of one's own beside numerate's is
    welcome."""
    from typer.testing import CliRunner

    from numerate.cli import app

    db = str(tmp_path / "x.duckdb")
    config = tmp_path / "run.yaml"
    config.write_text("name: t\nmodels: [{name: o, model: 'baseline:oracle'}]\n"
                      "manifolds: [{manifold: objects, count: 2}]\n")  # fmt: skip
    assert CliRunner().invoke(app, ["run", "--config", str(config), "--db", db]).exit_code == 0
    Store.close_all()
    con = duckdb.connect(db)
    con.execute("CREATE TABLE my_notes (note VARCHAR)")
    con.execute("ALTER TABLE points ADD COLUMN my_flag BOOLEAN")
    con.close()
    Store.open(db).query("SELECT count(*) FROM my_notes")  # opens as it is
    Store.close_all()
    con = duckdb.connect(db)
    con.execute(changed)
    con.close()
    with pytest.raises(StoreError, match=f"{said} .*changed by hand; restore the file"):
        Store.open(db)
    read = CliRunner().invoke(app, [reader, "--db", db])  # a reader says it when it meets it
    assert read.exit_code == 2 and read.stdout == "", read.output
    assert read.stderr.startswith(f"error: results database {db}: {said} (schema version ")
    assert read.stderr.endswith("changed by hand; restore the file from a copy\n")


@pytest.mark.parametrize("version", [-83, -3])
def test_a_schema_version_below_0_is_said_changed_by_hand_nothing_migrated(tmp_path, version):
    """A hostile pass: with every version in schema_migrations set to -83, `upgrade` and `run`
    ended in an IndexError's traceback, and `runs` said `upgrade` would bring it up to date;
    with -3, `upgrade` ran migrations 15 to 17 (the list read from its end) before the first
    failed, and the file then said schema version 0."""
    from typer.testing import CliRunner

    from numerate.cli import app

    db = str(tmp_path / "x.duckdb")
    Store.open(db)
    Store.close_all()
    con = duckdb.connect(db)
    con.execute("UPDATE schema_migrations SET version = ?", [version])
    before = con.execute("SELECT * FROM schema_migrations ORDER BY ALL").fetchall()
    con.close()
    said = f"records schema version {version}, which no numerate writes: it was changed by hand"
    with pytest.raises(StoreError, match=said):
        Store.open(db)
    Store.close_all()
    for command in (["upgrade", "--db", db], ["runs", "--db", db]):
        done = CliRunner().invoke(app, command)
        assert done.exit_code == 2 and said in done.stderr, done.output
        assert "Traceback" not in done.output
    con = duckdb.connect(db)
    assert con.execute("SELECT * FROM schema_migrations ORDER BY ALL").fetchall() == before
    con.close()


def test_the_views_are_numerate_s_and_one_dropped_by_hand_is_asked_for_then_made_again(tmp_path):
    """A hostile pass: with `numgen_leaderboard` dropped, `numgen report` said DuckDB's
    "Catalog Error: Table with name numgen_leaderboard does not exist!", and `upgrade` that the
    file was up to date. Readers now name the view and the command that makes it again."""
    from typer.testing import CliRunner

    from numerate.cli import app
    from numerate.store.reader import Reader
    from numerate.store.schema import VIEWS, current_schema

    made = {s.split(" ")[2] for s in current_schema() if s.startswith("CREATE VIEW ")}
    assert made == VIEWS  # what readers look for is what the migrations make
    db = changed_by_hand(tmp_path, "DROP VIEW numgen_leaderboard", "DROP VIEW leaderboard")
    with pytest.raises(ConfigError, match=r"lacks numerate's view leaderboard \(dropped by hand"):
        Reader.open(db)
    upgraded = CliRunner().invoke(app, ["upgrade", "--db", db])  # a writer makes them again
    assert upgraded.exit_code == 0, upgraded.output  # and says so (it said only "already has")
    assert upgraded.stdout.splitlines() == [
        f"{db} already has schema version {SCHEMA_VERSION}",
        "made again numerate's view(s) dropped by hand: leaderboard, numgen_leaderboard",
    ]
    assert Store.open(db).views_made == []  # made: nothing to say the next time
    Store.close_all()
    with Reader.open(db) as reader:
        assert reader.query("SELECT count(*) FROM numgen_leaderboard") == [(0,)]


def test_a_version_13_database_keeps_each_prompt_once_through_migration_14(tmp_path):
    """A case's `data` repeated its columns (its prompt twice): migration 14 keeps the rest
    of the case there, and a row whose `data` says otherwise than its columns keeps it whole."""
    from numerate.config.sweep import parse_sweep_config
    from numerate.planning.plan import REPEATED, PlannedCase, case_row, plan_points

    config = parse_sweep_config({
        "name": "t", "models": [{"name": "b", "model": "baseline:oracle"}],
        "manifolds": [{"manifold": m, "count": 3} for m in ("objects", "shuffle", "sequence")],
    })  # fmt: skip
    points = [plan_points(entry, 5)[0] for entry in config.manifolds]
    cases = {case.case_id: case for point in points for case in point.cases()}
    as_13 = [{**case_row(case), "data": case.case.model_dump_json()} for case in cases.values()]
    changed = as_13[4]["case_id"]
    as_13[4]["input"] = "changed by hand"
    path = str(tmp_path / "v13.duckdb")
    con = database_at_version(path, 13)
    names = list(as_13[0])
    con.executemany(
        f"INSERT INTO cases ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
        [[row[name] for name in names] for row in as_13],
    )
    con.close()

    store = Store(path)
    rows = store.case_rows(list(cases))
    assert len(rows) == len(cases)
    for case_id, row in rows.items():
        whole = json.loads(cases[case_id].case.model_dump_json())
        if case_id == changed:
            assert json.loads(row["data"]) == whole
            continue
        assert json.loads(row["data"]) == {k: v for k, v in whole.items() if k not in REPEATED}
        point = next(p for p in points if p.manifold == row["manifold"])
        read = PlannedCase.from_row(row, point)
        assert read is not None and read.case == cases[case_id].case
    store.close()


WHOLE = {"manifold": "objects", "index": 3, "seed": 2**64 - 1, "params": {"a": 0.5, "b": [1, 2]},
         "input": 'q "x" é', "target": "2", "items": [{"name": "é", "n": None}]}  # fmt: skip
COLUMNS = {"manifold": "objects", "case_index": 3, "seed": 2**64 - 1,
           "params": '{"b": [1, 2], "a": 0.5}', "input": 'q "x" é', "target": "2"}  # fmt: skip


@pytest.mark.parametrize("typed", ["JSON", "VARCHAR"])  # a table's columns; a shard's may be text
@pytest.mark.parametrize(
    ("columns", "slimmed"),
    [
        ({}, True),  # the parameters in another order and spacing are the same parameters
        ({"manifold": "shuffle"}, False),
        ({"case_index": 4}, False),
        ({"seed": 2**64 - 2}, False),
        ({"params": '{"a": 0.6, "b": [1, 2]}'}, False),
        ({"params": '{"a": 0.5}'}, False),
        ({"input": "q"}, False),
        ({"target": "3"}, False),
    ],
)
def test_a_cases_data_loses_only_the_fields_its_columns_hold_alike(columns, slimmed, typed):
    """migrations.SLIM_DATA (migration 14, ingest): the fields a row's columns hold are taken
    out of its `data` only when each is what its column holds; else `data` stays whole."""
    from numerate.store.migrations import SLIM_DATA

    row = {**COLUMNS, **columns, "data": json.dumps(WHOLE, ensure_ascii=False)}
    with duckdb.connect() as con:
        con.execute(
            f"CREATE TABLE cases (manifold VARCHAR, case_index INTEGER, seed UBIGINT, params "
            f"{typed}, input VARCHAR, target VARCHAR, data {typed})"
        )
        con.execute(f"INSERT INTO cases VALUES ({', '.join('?' * len(row))})", list(row.values()))
        [(data,)] = con.execute(f"SELECT {SLIM_DATA} FROM cases").fetchall()
    expected = {"items": WHOLE["items"]} if slimmed else WHOLE
    assert json.loads(data) == expected


@pytest.mark.parametrize("data", ["{}", "[1, 2]", '"text"', '{"items": []}'])
def test_a_cases_data_that_repeats_nothing_is_kept_as_it_is(data):
    from numerate.store.migrations import SLIM_DATA

    with duckdb.connect() as con:
        con.execute("CREATE TABLE cases (manifold VARCHAR, case_index INTEGER, seed UBIGINT, "
                    "params JSON, input VARCHAR, target VARCHAR, data JSON)")  # fmt: skip
        con.execute("INSERT INTO cases VALUES ('objects', 0, 1, '{}', 'q', '2', ?)", [data])
        assert con.execute(f"SELECT {SLIM_DATA} FROM cases").fetchall() == [(data,)]


def test_the_fields_migration_14_takes_out_of_data_are_those_every_case_carries():
    """SLIM_DATA (migration 14, ingest) names the fields plan.case_json puts back."""
    from numerate.planning.plan import REPEATED
    from numerate.store.migrations import _REPEATS

    assert set(_REPEATS) == REPEATED


def test_a_writer_s_sessions_keep_row_groups_small_as_they_merge_them(db_path):
    """Each session appends its rows as row groups of their own, which DuckDB merges as the
    session lets the file go; numerate's sessions make them at most ROW_GROUP_SIZE rows, so
    that a merge never rebuilds DuckDB's default 122,880-row group in memory."""
    from numerate.store.access import ROW_GROUP_SIZE

    store = Store.open(db_path)
    session_rows = 2048
    for session in range(3 * ROW_GROUP_SIZE // session_rows):
        store.put_completions(
            [completion(f"{session}-{i}", "x") for i in range(session_rows)]
        )  # a session each, as a sweep's batches and flushes
    Store.close_all()
    with duckdb.connect(db_path, read_only=True) as con:
        groups = [n for (n,) in con.execute(
            "SELECT max(count) FROM pragma_storage_info('completions') GROUP BY row_group_id"
        ).fetchall()]  # fmt: skip
    assert sum(groups) == 3 * ROW_GROUP_SIZE
    assert max(groups) <= ROW_GROUP_SIZE
    assert len(groups) < 3 * ROW_GROUP_SIZE // session_rows  # the small groups were merged


def test_missing_cases_are_those_not_stored_whatever_else_is(db_path):
    """A batch's ids that the store lacks: not those stored (by this batch's look-up or any
    other), each once, among many stored ids of other points."""
    from numerate.config.sweep import parse_sweep_config
    from numerate.planning.plan import case_row, plan_points

    config = parse_sweep_config({
        "name": "t", "models": [{"name": "b", "model": "baseline:oracle"}],
        "manifolds": [{"manifold": "objects", "count": 40, "grid": {"length": [2, 3]}}],
    })  # fmt: skip
    first, second = plan_points(config.manifolds[0], 5)
    store = Store.open(db_path)
    stored = first.cases(0, 30) + second.cases(10, 20)
    store.put_cases([case_row(case) for case in stored])
    asked = first.case_ids(20, 40) + second.case_ids(0, 40) + first.case_ids(35, 40)
    expected = set(first.case_ids(30, 40)) | set(second.case_ids(0, 10) + second.case_ids(20, 40))
    assert store.missing_cases(asked) == expected
    assert store.missing_cases(first.case_ids(0, 30)) == set()
    assert store.missing_cases([]) == set()


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (
            duckdb.OutOfMemoryException(
                "Out of Memory Error: failed to allocate data of size 16.0 MiB"
            ),
            "Out of Memory Error: failed to allocate data of size 16.0 MiB",
        ),
        # as a fetch of a result reports it (`numerate regrade` of a million answers did)
        (
            duckdb.InvalidInputException(
                "Invalid Input Error: Attempting to execute an unsuccessful or closed pending "
                "query result\nError: Out of Memory Error: failed to allocate data of size 1.0 MiB"
            ),
            "Out of Memory Error: failed to allocate data of size 1.0 MiB",
        ),
        # as a session's checkpoint reports it when it lets the file go (a 25-case sweep at a
        # 32 MB bound did: docs/benchmarks.md); it was said as "a damaged or truncated file?"
        (
            duckdb.IOException(
                "IO Error: Detached database 'numerate_results', but CHECKPOINT during DETACH "
                'failed. \nCheckpoint failed for database "numerate_results". The database has '
                "been invalidated. Original error: failed to pin block of size 256.0 KiB "
                "(30.5 MiB/30.5 MiB used)\n\nPossible solutions:\n* Reducing the number of "
                "threads (SET threads=X)"
            ),
            "failed to pin block of size 256.0 KiB (30.5 MiB/30.5 MiB used)",
        ),
    ],
)
def test_duckdb_out_of_memory_is_said_in_a_line_however_it_comes(error, cause):
    from numerate.store.writer import WRITER_MEMORY, _file_errors

    with pytest.raises(StoreError) as raised, _file_errors("r.duckdb", "/tmp/spill"):
        raise error
    said = str(raised.value)
    assert said.startswith(
        f"results database r.duckdb: DuckDB needed more than the {WRITER_MEMORY}"
    )
    assert said.endswith(f"({cause})") and "damaged" not in said, said
    assert "\n" not in said
    assert raised.value.exit_code == 3  # the input was good: every command says so (numgen: 2)


def test_a_full_disk_is_said_as_one_not_as_a_damaged_file():
    """A hostile pass: a database made on a full disk was "cannot be read or written: ...
    No space left on device (a damaged or truncated file?)", exit 2, as for a bad file."""
    from numerate.store.writer import _file_errors

    full = duckdb.IOException('IO Error: Could not write file "r.duckdb": No space left on device')
    with pytest.raises(StoreError) as raised, _file_errors("r.duckdb", "/tmp/spill"):
        raise full
    said = str(raised.value)
    assert said.startswith("results database r.duckdb: the disk is full (")
    assert "damaged" not in said and raised.value.exit_code == 3


def answered(store, rows):
    """Responses of run r, model m (sample, case, outcome, error), inserted as they are."""
    store.write(lambda con: con.executemany(
        "INSERT INTO responses (run_id, model, model_id, manifold, case_id, sample_index, "
        "point_key, request_hash, outcome, error, cached, graded_at) VALUES ('r', 'm', 'm', "
        "'objects', ?, ?, 'p', ?, ?, ?, false, now())",
        [(case, sample, f"h{case}{sample}", outcome, error)
         for case, sample, outcome, error in rows],
    ))  # fmt: skip


def test_a_run_s_end_is_timed_whatever_its_verdict_and_an_interruption_is_no_end(db_path):
    """A mutation sweep: timing only `finished` runs passed every test; `ended_since` reads
    `finished_at`, so a degraded or failed run's end was never found."""
    store = Store.open(db_path)
    for run_id, status in (("a", "finished"), ("b", "degraded"), ("c", "failed"),
                           ("d", "interrupted")):  # fmt: skip
        store.start_run(run_id, "s", "h", {}, "v")
        store.set_run_status(run_id, status)
    ended = store.query("SELECT run_id FROM runs WHERE finished_at IS NOT NULL ORDER BY 1")
    assert ended == [("a",), ("b",), ("c",)]


def test_a_run_is_compared_with_the_latest_earlier_run_that_ended(db_path):
    """A mutation sweep: taking an interrupted run, or a later one, as the previous run passed
    every test."""
    from numerate.store.queries import previous_run

    store = Store.open(db_path)
    for run_id, status in (("r1", "degraded"), ("r2", "interrupted"), ("r3", "running"),
                           ("r4", "finished"), ("other", "finished")):  # fmt: skip
        store.start_run(run_id, "other" if run_id == "other" else "s", "h", {}, "v")
        store.set_run_status(run_id, status)
    assert previous_run(store, "r3") == "r1"  # not r2 (interrupted), nor r4 (after it)
    assert previous_run(store, "r4") == "r1"  # nor the other sweep's
    assert previous_run(store, "r1") is None


def test_a_part_s_cause_is_its_most_frequent_error(db_path):
    """A mutation sweep: naming the least frequent error passed every test."""
    store = Store.open(db_path)
    answered(store, [("c1", 0, "error", "HTTP 500: rare"), ("c2", 0, "error", "HTTP 429: busy"),
                     ("c3", 0, "error", "HTTP 429: busy"), ("c4", 0, "correct", None)])  # fmt: skip
    assert store.error_counts("r", "m") == (4, 3, "HTTP 429: busy")


def test_a_regrade_changes_each_sample_s_grade_alone(db_path):
    """A mutation sweep: matching a new grade on the case alone, not its sample, passed every
    test; with `samples: k`, one sample's grade was written over every sample of its case."""
    store = Store.open(db_path)
    answered(store, [("c1", 0, "wrong", None), ("c1", 1, "wrong", None),
                     ("c1", 2, "wrong", None)])  # fmt: skip
    store.update_grades("r", [{"model": "m", "case_id": "c1", "sample_index": 1,
                               "outcome": "correct", "answer": "7"}])  # fmt: skip
    graded = store.query("SELECT sample_index, outcome, answer FROM responses ORDER BY 1")
    assert graded == [(0, "wrong", None), (1, "correct", "7"), (2, "wrong", None)]


def test_token_efficiency_counts_answers_and_correct_answers_with_their_tokens(db_path):
    """A mutation sweep: counting errors among the answers, or correct answers without a
    token count in the correct answers per 1,000 tokens (whose tokens are not summed),
    passed every test."""
    from numerate.store.queries import token_efficiency

    store = Store.open(db_path)
    rows = [("c1", "correct", None, 100), ("c2", "correct", None, None),  # tokens unknown
            ("c3", "wrong", None, 300), ("c4", "error", "HTTP 500: x", None)]  # fmt: skip
    store.write(lambda con: con.executemany(
        "INSERT INTO responses (run_id, model, model_id, manifold, case_id, sample_index, "
        "point_key, request_hash, outcome, error, cached, graded_at, completion_tokens) "
        "VALUES ('r', 'm', 'm', 'objects', ?, 0, 'p', ?, ?, ?, false, now(), ?)",
        [(case, f"h{case}", outcome, error, tokens) for case, outcome, error, tokens in rows],
    ))  # fmt: skip
    [row] = token_efficiency(store, "r").to_dicts()
    assert row["answers"] == 3  # the error is no answer
    assert row["correct_per_1k_tokens"] == pytest.approx(1000 * 1 / 400)


def test_a_point_s_cases_answered_are_cases_not_samples(db_path):
    """A mutation sweep: counting answers for cases passed every test; with `samples: 3` a
    resumed adaptive run took 3 answers of a case for 3 cases."""
    from numerate.store.queries import cases_answered_per_point

    store = Store.open(db_path)
    answered(store, [("c1", s, "correct", None) for s in range(3)] + [("c2", 0, "wrong", None)])
    assert cases_answered_per_point(store, "r", "m") == {("objects", "p"): 2}


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"correct": 3, "n_scored": 5, "n": 5, "accuracy": 0.6}, None),
        ({"correct": 0, "n_scored": 0, "n": 2, "accuracy": None, "ci_low": 0.0}, None),
        ({"correct": 5, "n_scored": 5, "n": 5, "ci_high": 1.0 + 1e-12}, None),  # rounding
        ({"correct": -1, "n_scored": 5, "n": 5}, "correct -1"),
        ({"correct": 6, "n_scored": 5, "n": 6}, "correct 6 of 5 scored"),
        ({"correct": 3, "n_scored": 6, "n": 5}, "n_scored 6 of 5 asked"),
        ({"correct": 3, "n_scored": 5, "n": -10}, "n -10"),
        ({"n": 5, "accuracy": float("nan")}, "accuracy nan (a share: between 0 and 1)"),
        ({"n": 5, "ci_low": -5.0}, "ci_low -5.0 (a share: between 0 and 1)"),
        ({"n": 5, "chance": float("-inf")}, "chance -inf (a share: between 0 and 1)"),
        ({"n": 5, "error_rate": 1.5}, "error_rate 1.5 (a share: between 0 and 1)"),
    ],
)
def test_figures_no_run_can_have_are_refused(values, said):
    """A mutation sweep: no test had a point with more scored answers than asked; a hostile
    pass: `report` showed n -10, accuracy nan and an interval [-5, inf] of a database changed
    by hand, while `plot` refused it."""
    import polars as pl

    from numerate.store.queries import check_figures
    from numerate.store.schema import DatabaseFault

    point = pl.DataFrame([{"model": "m", "manifold": "objects", "point_key": "p", **values}])
    if said is None:
        check_figures(point, "r")
        return
    with pytest.raises(DatabaseFault) as refused:
        check_figures(point, "r")
    assert str(refused.value) == (
        f"run r: model m, objects point p holds {said}, figures no run can have (the database "
        "was changed?); `numerate regrade --run r` counts them again from the answers"
    )


def test_a_numgen_run_s_impossible_figures_name_its_model_and_counter():
    import polars as pl

    from numerate.store.queries import check_figures
    from numerate.store.schema import DatabaseFault

    row = {"model": "synthetic", "detector": "blobs", "n": 20, "mwe": 0.1, "counting_level": -7,
           "webers_law": float("nan"), "run_id": "numgen-1"}  # fmt: skip
    with pytest.raises(DatabaseFault) as refused:
        check_figures(pl.DataFrame([row]), numgen=True)
    assert str(refused.value) == (
        "NumGen run numgen-1 holds counting_level -7, figures no run can have (the database "
        "was changed?)"
    )
    check_figures(pl.DataFrame([{**row, "counting_level": 0}]), numgen=True)  # NaN: no fit


def test_figures_no_run_can_have_name_their_point_in_one_short_line():
    """A review: a grid value may hold a line break (and 10,000 characters); the error split
    in two `error:` lines."""
    import polars as pl

    from numerate.store.queries import check_figures
    from numerate.store.schema import DatabaseFault

    point = {"model": "m", "manifold": "shuffle", "point_key": "anchor_prefix=a\nb" + "c" * 9_000}
    with pytest.raises(DatabaseFault) as refused:
        check_figures(pl.DataFrame([{**point, "n": -1}]), "r")
    said = str(refused.value)
    assert "\n" not in said and len(said) < 500
    assert said.startswith("run r: model m, shuffle point anchor_prefix=a\\nbccc")


def test_a_mean_of_token_counts_below_zero_is_not_sent_to_regrade():
    """Regrading counts outcomes again, not the tokens the answers hold."""
    import polars as pl

    from numerate.store.queries import check_figures
    from numerate.store.schema import DatabaseFault

    summary = {"model": "m", "manifold": "*", "n": 5, "mean_completion_tokens": -2.0}
    with pytest.raises(DatabaseFault) as refused:
        check_figures(pl.DataFrame([summary]), "r")
    assert str(refused.value) == (
        "run r: model m, every manifold holds mean_completion_tokens -2.0, figures no run can "
        "have (the database was changed?)"
    )


def test_a_resumed_run_keeps_its_answers_but_errors_of_the_models_that_reuse_them(db_path):
    """What `resuming run ...: N answers already stored are not asked again` counts: an error
    is asked again, and so is every answer of a model whose cache is off (not in `models`)."""
    from numerate.store.queries import kept_answers

    store = Store.open(db_path)
    answered(store, [("c1", 0, "correct", None), ("c2", 0, "wrong", None),
                     ("c3", 0, "unparsed", None), ("c4", 0, "error", "HTTP 500: x")])  # fmt: skip
    assert kept_answers(store, "r", ["m"]) == 3
    assert kept_answers(store, "r", ["other"]) == kept_answers(store, "r", []) == 0


def test_a_database_in_a_folder_that_takes_no_file_says_so():
    """`--db /proc/x.duckdb` said DuckDB's `IO Error: Cannot open file "/proc/x.duckdb": No
    such file or directory`, of a file that was to be made in a folder that exists."""
    with pytest.raises(StoreError) as refused:
        Store.open("/proc/numerate-test.duckdb")
    assert str(refused.value) == (
        "cannot open results database /proc/numerate-test.duckdb: no file can be made in "
        "/proc: No such file or directory"
    )


def test_a_failed_command_keeps_a_database_it_made_once_it_holds_an_answer(tmp_path):
    """close_all(failed=True) removes a database this process made only while it holds
    nothing (a run stopped as Prefect's server started); one holding an answer is kept. A
    mutation sweep: with the check gone, every test passed and such a database was deleted."""
    empty, kept = tmp_path / "empty.duckdb", tmp_path / "kept.duckdb"
    Store.open(str(empty)).flush()  # a second session: still the file this process made
    Store.open(str(kept)).put_completions([completion("h", "an answer")])
    Store.close_all(failed=True)
    assert not empty.exists() and kept.exists()
    assert Store.open(str(kept)).query("SELECT text FROM completions") == [("an answer",)]


def test_a_session_whose_checkpoint_failed_leaves_the_next_one_a_fresh_duckdb(db_path, monkeypatch):
    """A hostile pass: answers of hundreds of KB made DuckDB's checkpoint at the end of a
    session run out of the 128 MB bound; the file stayed attached ("invalidated") to the
    process's DuckDB with its lock, and every later session said "Unique file handle
    conflict" until the process ended. Here the detach fails as that one did, leaving the
    file attached: the next session opens it in a new DuckDB."""
    from numerate.store import access

    store = Store.open(db_path)
    with store.session() as con:
        con.execute("SELECT 1")

    def fails(con):
        raise duckdb.IOException("Detached database, but CHECKPOINT during DETACH failed")

    monkeypatch.setattr(access, "detach", fails)
    with (
        pytest.raises(StoreError, match="CHECKPOINT during DETACH failed"),
        store.session() as con,
    ):
        con.execute("SELECT 1")
    monkeypatch.undo()
    with store.session() as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    Store.close_all()


def test_a_user_s_query_comes_a_batch_at_a_time_and_stops_when_its_reader_leaves(
    tmp_path, monkeypatch
):
    """`numerate db --format csv` of a million rows held them all (1.2 GB; JSON 2.8 GB), and
    a result of over 2 GiB of text failed in Arrow. Its rows now come in frames of a bounded
    number of rows and bytes; a caller that stops taking them stops the query."""
    import numerate.store.reader as reader_module
    from numerate.store.reader import Reader

    path = str(tmp_path / "x.duckdb")
    duckdb.connect(path).close()
    with Reader.open(path, numerate_schema=False) as reader:
        batches = list(
            reader.printable_batches("SELECT range AS n, [range] AS l FROM range(10)", 3)
        )
        assert len(batches) > 1 and all(b.height <= 3 for b in batches)
        assert [n for b in batches for n in b["n"]] == list(range(10))
        assert batches[0]["l"][0] == "[0]"  # a list as DuckDB writes it, as printable_frame
        empty = list(reader.printable_batches("SELECT 1 AS a, 'x' AS b WHERE false"))
        assert [(b.height, b.columns) for b in empty] == [(0, ["a", "b"])]
        # a hostile pass: 2,000 answers of 262,144 characters as JSON took 13.5 GB
        monkeypatch.setattr(reader_module, "PRINTED_BYTES", 20_000)
        long = list(
            reader.printable_batches("SELECT repeat('é', 1000) || range AS t FROM range(90)")
        )
        assert 1 < max(b.height for b in long) < 20 and sum(b.height for b in long) == 90
        assert [t[1000:] for b in long for t in b["t"]] == [str(n) for n in range(90)]
        # a hostile pass: the `select *` of a join (two `x`) was polars' DuplicateError
        twice = next(reader.printable_batches("SELECT 1 AS x, 2 AS x, 3 AS x_1, 4 AS X"))
        assert twice.columns == ["x", "x_1", "x_1_1", "X"] and twice.row(0) == (1, 2, 3, 4)
        with pytest.raises(ConfigError, match="nope"):
            next(reader.printable_batches("SELECT * FROM nope"))
        midway = reader.printable_batches(
            "SELECT CASE WHEN range = 500000 THEN error('boom') ELSE range END FROM range(1000000)",
            1000,
        )  # DuckDB's error past the first batches came through Arrow, as an OSError (exit 3);
        # the query's other threads are stopped, and DuckDB says either (a race of its own)
        said = r"^(Invalid Input Error: boom|INTERRUPT Error: Interrupted!)$"
        with pytest.raises(ConfigError, match=said):
            assert next(midway).height == 1000  # then the rest
            list(midway)
        endless = reader.printable_batches("SELECT range AS n FROM range(10_000_000_000)", 2)
        assert next(endless)["n"].to_list() == [0, 1]
        closing = threading.Thread(target=endless.close, daemon=True)
        closing.start()  # it would read ten billion rows to the end
        closing.join(10)
        assert not closing.is_alive()
        assert reader.printable_frame("SELECT 42 AS a")["a"].to_list() == [42]  # usable still


def test_a_table_too_long_to_read_within_the_bound_is_said_so_not_damaged(tmp_path, monkeypatch):
    """A hostile pass: `upgrade` of a sound file whose cases hold 8,000,000-character prompts
    (the longest a case may have) said "table cases cannot be read whole: Out of Memory Error
    ... (a damaged or truncated file)": it is the memory bound, said as every run says it."""
    import numerate.store.writer as writer

    db = str(tmp_path / "long.duckdb")
    Store.open(db)
    Store.close_all()
    with duckdb.connect(db) as con:  # rows no table of numerate's holds so long, but might
        con.execute(
            "INSERT INTO ingested_shards SELECT 'r' || range, repeat('x', 3_000_000), now() "
            "FROM range(12)"
        )
    monkeypatch.setattr(writer, "WRITER_MEMORY", "16MB")
    store = Store.open(db)
    with pytest.raises(StoreError, match=r"DuckDB needed more than the 16MB") as raised:
        store.check_readable()
    assert "damaged" not in str(raised.value)
    Store.close_all()


def test_a_damaged_block_a_user_s_query_meets_names_the_file(tmp_path):
    """A hostile pass: `numerate db` meeting a damaged block (after 32 MB of CSV) said
    DuckDB's `IO Error: Corrupt database file ...` alone, as the SQL's fault, where numerate's
    own queries name the file and the command that names its table."""
    from numerate.store.reader import DamagedDatabase, Reader

    path = tmp_path / "x.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute(
            "CREATE TABLE t AS SELECT range AS i, md5(range::VARCHAR) AS h FROM range(3e5::INT)"
        )
    size = path.stat().st_size
    with path.open("r+b") as file:  # a block in the table's middle
        file.seek(size // 2)
        file.write(b"\xff" * 4096)
    damaged = pytest.raises(DamagedDatabase, match=r"x\.duckdb cannot be read: .*Corrupt")
    with Reader.open(str(path), numerate_schema=False) as reader, damaged as met:
        list(reader.printable_batches("SELECT * FROM t"))
    assert "numerate upgrade --db" in str(met.value)


def test_a_transaction_whose_rollback_fails_too_raises_the_blocks_own_error():
    """A lake whose PostgreSQL was lost failed its ROLLBACK too ("Failed to execute query
    ROLLBACK"), and that error, raised instead of the block's, was a traceback (exit 1)."""
    con = duckdb.connect()
    with pytest.raises(ValueError, match="the block's"), transaction(con):
        con.close()  # its ROLLBACK cannot run
        raise ValueError("the block's")
