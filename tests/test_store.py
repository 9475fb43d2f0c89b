import duckdb
import pytest

from numerate.store import MIGRATIONS, SCHEMA_VERSION, Store, StoreError, migrate


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


def test_runs_resume_only_when_unfinished(db_path):
    store = Store.open(db_path)
    store.start_run("r1", "s", "h", {"a": 1}, "v")
    assert store.unfinished_run("s", "h") == "r1"
    assert store.unfinished_run("s", "other") is None
    store.set_run_status("r1", "finished")
    assert store.unfinished_run("s", "h") is None
    assert store.query("SELECT finished_at IS NOT NULL FROM runs")[0][0]


def test_completions_keep_the_first_answer(db_path):
    store = Store.open(db_path)
    row = {"request_hash": "h", "run_id": "r", "model_id": "m", "text": "first",
           "finish_reason": "stop", "prompt_tokens": 1, "completion_tokens": 1,
           "latency_s": 0.1, "attempts": 1, "created_at": None}  # fmt: skip
    from numerate.store import now

    row["created_at"] = now()
    store.put_completions([row])
    store.put_completions([{**row, "text": "second"}])
    assert store.get_completions(["h", "missing"])["h"]["text"] == "first"


def test_a_database_held_by_another_writer_gives_a_clear_error(tmp_path):
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
        with pytest.raises(StoreError, match="cannot open results database"):
            Store(path)
    finally:
        holder.kill()
        holder.wait()


def test_a_batch_with_a_stored_request_keeps_the_rest_and_the_first_answer(db_path):
    from numerate.store import now

    store = Store.open(db_path)

    def row(key, text):
        return {"request_hash": key, "run_id": "r", "model_id": "m", "text": text,
                "finish_reason": "stop", "prompt_tokens": 1, "completion_tokens": 1,
                "latency_s": 0.1, "attempts": 1, "created_at": now()}  # fmt: skip

    store.put_completions([row("a", "first a")])
    store.put_completions([row("b", "b"), row("a", "second a"), row("c", "c")])
    stored = store.get_completions(["a", "b", "c"])
    assert {k: v["text"] for k, v in stored.items()} == {"a": "first a", "b": "b", "c": "c"}
    store.put_completions([row("d", "d")])  # the appender still works after a conflict
    assert "d" in store.get_completions(["d"])
