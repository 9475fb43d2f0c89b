"""Adaptive sampling through the sweep flow: baselines, resuming a crashed run, and a tighter
target that only adds cases."""

import asyncio

import pytest

from numerate.flows.sweep import sweep
from numerate.store import Store

pytestmark = pytest.mark.usefixtures("prefect_harness")

PRECISION = {"ci_width": 0.10, "min_count": 20, "max_count": 400, "step": 20}


def config(models, precision=PRECISION, grid=None, name="adaptive"):
    entry = {"manifold": "objects", "precision": precision, "grid": grid or {"length": [2, 3]}}
    return {"name": name, "seed": 4, "batch_size": 50, "models": models, "manifolds": [entry]}


def run(cfg, db):
    return asyncio.run(sweep(cfg, db))


def test_baselines_stop_where_their_interval_is_narrow_enough(db_path):
    models = [{"name": "oracle", "model": "baseline:oracle"},
              {"name": "random", "model": "baseline:random"}]  # fmt: skip
    run_id = run(config(models, grid={"length": [2, 3, 4]}), db_path)
    store = Store.open(db_path)
    points = store.query(
        "SELECT model, point_key, n, ci_width, stop_reason FROM points WHERE run_id = ?", [run_id]
    )
    assert len(points) == 6
    for _, _, n, width, reason in points:
        assert width <= 0.10 or n == 400
        assert reason == ("precision" if width <= 0.10 else "max_count")
    spent = {m: sum(n for model, _, n, _, _ in points if model == m) for m in ("oracle", "random")}
    assert spent["oracle"] == 3 * 40  # 40 correct answers: width 0.088
    assert spent["oracle"] < spent["random"]
    assert sum(spent.values()) < 6 * 400  # a fixed count with the same worst-case width
    stops = store.query("SELECT count(*) FROM point_stops WHERE run_id = ?", [run_id])
    assert stops == [(6,)]


def test_a_crashed_run_resumes_each_point_sending_nothing_twice(fake_openai, db_path):
    cfg = config([{"name": "fake", "model": "fake-model", "base_url": fake_openai.base_url,
                   "concurrency": 8}])  # fmt: skip
    clean = run(cfg, db_path)
    store = Store.open(db_path)
    expected = store.query(
        "SELECT case_id, outcome FROM responses WHERE run_id = ? ORDER BY case_id", [clean]
    )
    points = store.query(
        "SELECT point_key, n, stop_reason FROM points WHERE run_id = ? ORDER BY 1", [clean]
    )
    # the crash: the last answers of each point never reached the store, the run is open
    lost = store.query(
        "SELECT case_id, request_hash FROM (SELECT case_id, request_hash, row_number() OVER "
        "(PARTITION BY point_key ORDER BY graded_at DESC, case_id) AS k FROM responses "
        "WHERE run_id = ?) WHERE k <= 15",
        [clean],
    )

    def crashed(con):
        for case_id, request_hash in lost:
            con.execute("DELETE FROM responses WHERE run_id = ? AND case_id = ?", [clean, case_id])
            con.execute("DELETE FROM completions WHERE request_hash = ?", [request_hash])
        con.execute("DELETE FROM point_stops WHERE run_id = ?", [clean])
        con.execute("UPDATE runs SET status = 'interrupted' WHERE run_id = ?", [clean])

    store.write(crashed)
    Store.close_all()
    before = len(fake_openai.prompts())

    resumed = run(cfg, db_path)
    assert resumed == clean
    assert len(fake_openai.prompts()) - before == len(lost)  # only what was lost is asked
    store = Store.open(db_path)
    assert (
        store.query(
            "SELECT case_id, outcome FROM responses WHERE run_id = ? ORDER BY case_id", [clean]
        )
        == expected
    )
    assert (
        store.query(
            "SELECT point_key, n, stop_reason FROM points WHERE run_id = ? ORDER BY 1", [clean]
        )
        == points
    )


def test_a_tighter_target_only_adds_cases(fake_openai, db_path):
    model = {"name": "fake", "model": "fake-model", "base_url": fake_openai.base_url,
             "concurrency": 8, "cache": "reuse"}  # fmt: skip
    first = run(config([model], {**PRECISION, "ci_width": 0.2}), db_path)
    sent = set(fake_openai.prompts())
    tighter = run(config([model], {**PRECISION, "ci_width": 0.12}), db_path)
    assert len(fake_openai.prompts()) == len(set(fake_openai.prompts()))  # nothing twice
    added = set(fake_openai.prompts()) - sent
    store = Store.open(db_path)
    n = dict(store.query("SELECT run_id, sum(n) FROM points GROUP BY run_id"))
    assert n[tighter] == n[first] + len(added) > n[first]


def test_a_point_stored_under_another_key_is_read_back_under_its_own(db_path):
    """Two sweeps share a database, and one names an axis the other leaves at its default:
    their points are the same cases, stored once under the first sweep's key. The second
    reads them back under its own key, which its adaptive rounds and its aggregation read
    (read back under the stored key, its rounds were never graded: the point stalled)."""
    oracle = [{"name": "oracle", "model": "baseline:oracle"}]
    run(config(oracle, grid={"length": [2]}, name="short"), db_path)
    named = run(config(oracle, grid={"length": [2], "max_count": [5]}, name="named"), db_path)
    store = Store.open(db_path)
    keys = store.query("SELECT DISTINCT point_key FROM responses WHERE run_id = ?", [named])
    assert keys == [("length=2,max_count=5",)]
    points = store.query("SELECT point_key, n, stop_reason FROM points WHERE run_id = ?", [named])
    assert points == [("length=2,max_count=5", 40, "precision")]
