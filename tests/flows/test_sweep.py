"""The sweep flow under a Prefect test harness, against baselines and the loopback endpoint."""

import asyncio
import gc
import logging

import pytest

from numerate.flows.sweep import sweep
from numerate.kernel.progress import Progress, reporting_to
from numerate.kernel.stats import wilson_interval
from numerate.store import Store
from tests.fake_openai import Reply, prompt_of

pytestmark = pytest.mark.usefixtures("prefect_harness")


def config(models, manifolds=None, name="test"):
    return {
        "name": name,
        "seed": 3,
        "batch_size": 64,
        "models": models,
        "manifolds": manifolds
        or [
            {"manifold": "objects", "count": 30, "grid": {"length": [2, 4]}},
            {"manifold": "shuffle", "count": 30, "grid": {"length": [3, 5]}},
            {"manifold": "sequence", "count": 30},
        ],
    }


def run(cfg, db, **kwargs):
    return asyncio.run(sweep(cfg, db, **kwargs))


def test_baselines_oracle_is_perfect_and_random_sits_at_chance(db_path):
    manifolds = [
        {"manifold": "objects", "count": 400, "grid": {"length": 2, "max_count": 2}},
        {"manifold": "shuffle", "count": 400, "grid": {"length": 3}},
        {"manifold": "sequence", "count": 100},
    ]
    cfg = config([{"name": "oracle", "model": "baseline:oracle"},
                  {"name": "random", "model": "baseline:random"}], manifolds)  # fmt: skip
    run_id = run(cfg, db_path)
    store = Store.open(db_path)
    rows = store.query(
        "SELECT model, manifold, n, correct, accuracy, chance_random, chance FROM summaries "
        "WHERE run_id = ? AND level = 'manifold'",
        [run_id],
    )
    assert len(rows) == 6
    for model, manifold, n, correct, accuracy, chance_random, floor in rows:
        assert floor >= chance_random  # the floor is the stronger of guessing and heuristics
        if model == "oracle":
            assert accuracy == 1.0, manifold
        else:
            # uniform guessing: 1/(2*2+1), 1/3, 0 — each inside the 99.9% interval of the result
            low, high = wilson_interval(correct, n, z=3.29)
            assert low <= chance_random <= high, (manifold, accuracy, chance_random)
    assert store.query("SELECT status FROM runs WHERE run_id = ?", [run_id])[0][0] == "finished"
    assert gc.get_freeze_count() == 0  # the sweep gave its frozen objects back to the collector
    leaderboard = store.query(
        "SELECT model, rank FROM leaderboard WHERE sweep_name = 'test' ORDER BY rank"
    )
    assert leaderboard == [("oracle", 1), ("random", 2)]


def test_with_cache_reuse_a_rerun_sends_nothing(fake_openai, db_path):
    cfg = config([{"name": "fake", "model": "fake-model", "base_url": fake_openai.base_url,
                   "concurrency": 8, "max_retries": 1, "cache": "reuse"}])  # fmt: skip
    first = run(cfg, db_path)
    sent = len(fake_openai.prompts())
    store = Store.open(db_path)
    total_cases = store.query("SELECT count(*) FROM responses WHERE run_id = ?", [first])[0][0]
    assert total_cases == sent == 30 * 2 + 30 * 2 + 30

    second = run(cfg, db_path)
    assert second != first
    assert len(fake_openai.prompts()) == sent  # nothing sent twice
    store = Store.open(db_path)  # a finished sweep releases the database
    cached = store.query(
        "SELECT cached, count(*) FROM responses WHERE run_id = ? GROUP BY cached", [second]
    )
    assert cached == [(True, total_cases)]
    same = store.query(
        "SELECT count(*) FROM responses a JOIN responses b USING (case_id) "
        "WHERE a.run_id = ? AND b.run_id = ? AND a.raw_text = b.raw_text "
        "AND a.outcome = b.outcome",
        [first, second],
    )
    assert same[0][0] == total_cases


def test_by_default_every_run_asks_the_model_again(fake_openai, db_path):
    """A nightly sweep measures the model every night: the default cache policy (resume)
    reuses answers only within the run being resumed."""
    cfg = config([{"name": "fake", "model": "fake-model", "base_url": fake_openai.base_url}],
                 [{"manifold": "objects", "count": 10}])  # fmt: skip
    first = run(cfg, db_path)
    second = run(cfg, db_path)
    assert len(fake_openai.prompts()) == 20
    store = Store.open(db_path)
    rows = store.query(
        "SELECT run_id, count(*) FILTER (WHERE cached) FROM responses GROUP BY 1 ORDER BY 1"
    )
    assert sorted(rows) == sorted([(first, 0), (second, 0)])


def test_a_changed_generator_gets_new_case_ids_and_keeps_old_text(fake_openai, db_path,
                                                                 monkeypatch):  # fmt: skip
    """Responses always join to the exact case text they were graded against."""
    import numerate.config.provenance as provenance

    cfg = config([{"name": "oracle", "model": "baseline:oracle"}],
                 [{"manifold": "objects", "count": 5}])  # fmt: skip
    first = run(cfg, db_path)
    monkeypatch.setattr(provenance, "generator_label", lambda manifold: "0123456789abcdef+dirty")
    import numerate.flows.sweep

    monkeypatch.setattr(numerate.flows.sweep, "generator_label", provenance.generator_label)
    second = run(cfg, db_path)
    store = Store.open(db_path)
    ids = dict(store.query("SELECT run_id, list(DISTINCT case_id) FROM responses GROUP BY run_id"))
    assert not set(ids[first]) & set(ids[second])
    versions = store.query(
        "SELECT DISTINCT r.run_id, c.generator_version FROM responses r JOIN cases c "
        "USING (case_id) ORDER BY 2"
    )
    assert (second, "0123456789abcdef+dirty") in versions
    assert all(cid.startswith("objects-01234567-") for cid in ids[second])


def test_outcomes_through_the_whole_chain(fake_openai, db_path):
    answers = iter(
        [Reply(content="Answer: 0"), Reply(content="no idea"),
         Reply(content="Counting: one, two,", finish_reason="length"),
         Reply(status=400, error_message="context too long")] * 100
    )  # fmt: skip
    fake_openai.responder = lambda body: next(answers)
    cfg = config(
        [{"name": "fake", "model": "fake-model", "base_url": fake_openai.base_url,
          "concurrency": 1, "max_retries": 0, "max_error_rate": 0.5}],
        [{"manifold": "objects", "count": 8, "grid": {"max_count": 0}}],
    )  # fmt: skip
    run_id = run(cfg, db_path)
    store = Store.open(db_path)
    counts = dict(
        store.query(
            "SELECT outcome, count(*) FROM responses WHERE run_id = ? GROUP BY outcome", [run_id]
        )
    )
    # max_count=0 makes every target 0, so "Answer: 0" is correct
    assert counts == {"correct": 2, "unparsed": 2, "truncated": 2, "error": 2}
    point = store.query(
        "SELECT n, n_scored, correct, accuracy, unparsed_rate, truncation_rate, error_rate "
        "FROM points WHERE run_id = ?",
        [run_id],
    )[0]
    assert point == (8, 6, 2, 2 / 6, 2 / 6, 2 / 6, 2 / 8)
    error = store.query("SELECT error FROM responses WHERE outcome = 'error' LIMIT 1")[0][0]
    assert "HTTP 400" in error and "context too long" in error


def test_the_api_key_never_reaches_results_or_logs(fake_openai, db_path, monkeypatch, caplog):
    secret = "sk-numerate-test-0123456789abcdef"
    fake_openai.api_key = secret
    monkeypatch.setenv("NUMERATE_TEST_KEY", secret)
    cfg = config(
        [{"name": "fake", "model": "fake-model", "base_url": fake_openai.base_url,
          "api_key_env": "NUMERATE_TEST_KEY"}],
        [{"manifold": "shuffle", "count": 5}],
    )  # fmt: skip
    with caplog.at_level(logging.DEBUG):
        run(cfg, db_path)
    assert fake_openai.authorizations[-1] == f"Bearer {secret}"
    Store.close_all()
    with open(db_path, "rb") as handle:
        assert secret.encode() not in handle.read()
    wal = db_path + ".wal"
    import os

    if os.path.exists(wal):
        with open(wal, "rb") as handle:
            assert secret.encode() not in handle.read()
    assert secret not in caplog.text
    store = Store.open(db_path)
    config_text = store.query("SELECT config FROM runs")[0][0]
    assert "NUMERATE_TEST_KEY" in config_text and secret not in config_text


def test_prompt_content_reaches_the_endpoint(fake_openai, db_path):
    cfg = config([{"name": "fake", "model": "fake-model", "base_url": fake_openai.base_url}],
                 [{"manifold": "sequence", "count": 3}])  # fmt: skip
    run(cfg, db_path)
    stored = {r[0] for r in Store.open(db_path).query("SELECT input FROM cases")}
    assert {prompt_of(b) for b in fake_openai.requests} == stored


def test_the_leaderboard_ranks_only_runs_on_the_same_case_set(db_path):
    """An on-demand run restricted to one manifold is not ranked against a full run."""
    models = [{"name": "oracle", "model": "baseline:oracle"},
              {"name": "random", "model": "baseline:random"}]  # fmt: skip
    full = [{"manifold": "objects", "count": 20}, {"manifold": "shuffle", "count": 20}]
    run(config(models, full), db_path)
    run(config(models[1:], full[1:]), db_path)  # random alone, on shuffle alone
    rows = Store.open(db_path).query(
        "SELECT case_set, manifolds, model, rank, n FROM leaderboard ORDER BY manifolds, rank"
    )
    assert [(m, model, rank, n) for _, m, model, rank, n in rows] == [
        ("objects,shuffle", "oracle", 1, 40),
        ("objects,shuffle", "random", 2, 40),
        ("shuffle", "random", 1, 20),
    ]
    assert rows[0][0] == rows[1][0] != rows[2][0]


# ---------------------------------------------------------------- failures look failed


def fake_model(server, **overrides):
    return {"name": "fake", "model": "fake-model", "base_url": server.base_url,
            "concurrency": 4, "max_retries": 1, **overrides}  # fmt: skip


def test_too_many_errors_fail_the_flow_run_naming_model_cause_and_counts(fake_openai, db_path):
    answers = iter([Reply(content="Answer: 0"), Reply(status=400, error_message="too long")] * 20)
    fake_openai.responder = lambda body: next(answers)
    cfg = config([fake_model(fake_openai, concurrency=1)],
                 [{"manifold": "objects", "count": 8, "grid": {"max_count": 0}}])  # fmt: skip
    state = asyncio.run(sweep(cfg, db_path, return_state=True))
    assert state.is_failed()
    assert "model 'fake' degraded: 4 of 8 requests failed (50.0% > max_error_rate 2.0%)" in (
        state.message
    )
    assert "HTTP 400" in state.message
    store = Store.open(db_path)
    [(run_id, status)] = store.query("SELECT run_id, status FROM runs")
    assert status == "degraded"
    assert store.query("SELECT model, status, n, errors FROM run_models") == [
        ("fake", "degraded", 8, 4)
    ]
    assert store.query("SELECT count(*) FROM responses WHERE run_id = ?", [run_id]) == [(8,)]


def test_a_key_refused_with_400_stops_the_model_within_a_few_requests(fake_openai, db_path):
    """A LiteLLM proxy answers 400 to a bad key, and 400 on /v1/models."""
    fake_openai.models_status = 400
    calls = []

    def responder(body):
        calls.append(1)
        if len(calls) == 1:  # the endpoint check's probe gets through
            return Reply(content="OK")
        return Reply(status=400, error_message="Authentication Error, Invalid proxy server token")

    fake_openai.responder = responder
    cfg = config([fake_model(fake_openai, breaker_after=5)])
    state = asyncio.run(sweep(cfg, db_path, return_state=True))
    assert state.is_failed()
    assert "model 'fake' failed: endpoint refused the key (HTTP 400" in state.message
    assert len(calls) <= 1 + 5 + 2 * 4  # the probe, the breaker's five, what was in flight
    store = Store.open(db_path)
    not_sent = store.query(
        "SELECT count(*) FROM responses WHERE error LIKE 'not sent: endpoint refused the key%'"
    )[0][0]
    assert not_sent >= 30 * 5 - len(calls)
    assert store.query("SELECT status FROM runs") == [("failed",)]


def test_one_dead_endpoint_fails_its_own_part_and_the_others_go_on(db_path):
    gone = {"name": "gone", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    cfg = config([gone, {"name": "oracle", "model": "baseline:oracle"}],
                 [{"manifold": "objects", "count": 10}])  # fmt: skip
    state = asyncio.run(sweep(cfg, db_path, return_state=True))
    assert state.is_failed() and "model 'gone' failed: cannot reach model 'gone'" in state.message
    store = Store.open(db_path)
    assert sorted(store.query("SELECT model, status FROM run_models")) == [
        ("gone", "failed"), ("oracle", "ok"),
    ]  # fmt: skip
    assert store.query("SELECT model, accuracy FROM summaries WHERE level = 'model'") == [
        ("oracle", 1.0)
    ]
    # a failed part stays out of the leaderboard; the oracle's part is in it
    assert store.query("SELECT model FROM leaderboard") == [("oracle",)]


def test_a_server_that_dies_mid_sweep_stops_the_model_after_down_after_s(db_path):
    import threading
    import time

    from tests.fake_openai import FakeOpenAI

    server = FakeOpenAI().__enter__()
    calls = []

    def responder(body):
        calls.append(1)
        if len(calls) == 20:  # the server goes away while answering its 20th request
            threading.Thread(target=server.__exit__, args=(None, None, None)).start()
        return Reply(content="Answer: 1", delay_s=0.01)

    server.responder = responder
    cfg = config([fake_model(server, max_retries=100, down_after_s=1.0)],
                 [{"manifold": "objects", "count": 200}])  # fmt: skip
    started = time.monotonic()
    state = asyncio.run(sweep(cfg, db_path, return_state=True))
    elapsed = time.monotonic() - started
    assert state.is_failed() and "endpoint unreachable for 1 s" in state.message
    assert elapsed < 30  # not the minutes of backoff each request would otherwise spend
    store = Store.open(db_path)
    errors = store.query("SELECT count(*) FROM responses WHERE outcome = 'error'")[0][0]
    assert 150 <= errors <= 200


def test_each_grid_is_built_once_where_the_config_is_validated(db_path, monkeypatch):
    """The flow and its tasks take the validated SweepConfig: nothing validates it again, so
    no grid is built again (before, the built-in sweep built its 3 grids up to 27 times)."""
    from numerate.config.sweep import DEFAULT_SWEEP, ManifoldSweep, parse_sweep_config

    built = []
    original = ManifoldSweep._build_points

    def counting(self):
        built.append(self.manifold)
        return original(self)

    monkeypatch.setattr(ManifoldSweep, "_build_points", counting)
    config = parse_sweep_config({**DEFAULT_SWEEP, "name": "grids-once"})
    assert sorted(built) == ["objects", "sequence", "shuffle"]
    asyncio.run(sweep(config, db_path, plot=False))
    assert sorted(built) == ["objects", "sequence", "shuffle"]  # none built again


def test_a_sweep_of_more_models_than_a_flow_run_can_be_tagged_with_is_made_all_the_same():
    """A hostile pass: a sweep of 99 models or more failed as its flow run was made (Prefect's
    server refuses an event related to over 100 resources, one a tag: `numerate run` exit 1,
    the API's 500). Past MODEL_TAGS models its flow run is tagged with its sweep alone."""
    from prefect import flow, tags
    from prefect.runtime import flow_run

    from numerate.config.sweep import parse_sweep_config
    from numerate.flows.sweep import MODEL_TAGS, run_tags

    @flow
    def tagged() -> list[str]:
        return sorted(flow_run.tags)

    models = [{"name": f"m{i}", "model": "baseline:oracle"} for i in range(120)]
    many = parse_sweep_config(config(models, name="many"))
    with tags(*run_tags(many)):
        assert tagged() == ["sweep:many"]
    few = parse_sweep_config(config(models[:MODEL_TAGS], name="few"))
    with tags(*run_tags(few)):
        assert tagged() == sorted(["sweep:few", *(f"model:m{i}" for i in range(MODEL_TAGS))])


def test_a_rerun_reads_each_points_floors_and_cases_from_the_store(db_path, monkeypatch):
    """Each grid point's trivial strategy is measured once, by the run that first stores its
    cases (2 x HEURISTIC_SAMPLE cases generated and graded a point), and its cases are
    generated once: a later run of the point takes the floors its stored cases carry (those
    aggregation reads) and reads its cases back. A new point is measured and generated."""
    from numerate.manifolds.registry import Manifold
    from numerate.planning.plan import PlannedPoint

    measured, generated = [], []
    real, real_cases = Manifold.heuristic_level, PlannedPoint.cases

    def counted(self, params, seed):
        measured.append((self.name, params.length))
        return real(self, params, seed)

    def counted_cases(self, start=0, stop=None):
        made = real_cases(self, start, stop)
        generated.append((self.key, len(made)))
        return made

    monkeypatch.setattr(Manifold, "heuristic_level", counted)
    monkeypatch.setattr(PlannedPoint, "cases", counted_cases)
    oracle = [{"name": "o", "model": "baseline:oracle"}]
    grid = {"manifold": "objects", "count": 5, "grid": {"length": [2, 4]}}
    first = run(config(oracle, [grid]), db_path, plot=False)
    assert sorted(measured) == [("objects", 2), ("objects", 4)]
    assert sorted(generated) == [("length=2", 5), ("length=4", 5)]

    store = Store.open(db_path)
    store.write(
        lambda con: con.execute(  # as if measured by a grader of its own day
            "UPDATE cases SET chance_heuristic = 0.875, chance = 0.875 WHERE point_key = 'length=2'"
        )
    )
    store.write(
        lambda con: con.execute(  # a row ingested from elsewhere under the same id
            "UPDATE cases SET generator_version = '0123456789abcdef' "
            "WHERE point_key = 'length=4' AND case_index = 0"
        )
    )
    Store.close_all()
    measured.clear()
    generated.clear()
    wider = {**grid, "grid": {"length": [2, 4, 6]}}
    second = run(config(oracle, [wider]), db_path, fresh=True, plot=False)
    assert sorted(measured) == [("objects", 4), ("objects", 6)]  # the new point, and one
    assert sorted(generated) == [("length=4", 5), ("length=6", 5)]  # not stored by its version

    store = Store.open(db_path)
    floors = store.query(
        "SELECT run_id, point_key, chance_heuristic FROM points ORDER BY run_id, point_key"
    )
    by_run = {(run_id, point): floor for run_id, point, floor in floors}
    assert by_run[second, "length=2"] == 0.875
    graded = store.query(
        "SELECT a.case_id, a.outcome, b.outcome FROM responses a JOIN responses b USING (case_id) "
        "WHERE a.run_id = ? AND b.run_id = ?",
        [first, second],
    )
    assert len(graded) == 10 and all(a == b == "correct" for _, a, b in graded)


class Shown(Progress):
    """A progress display that keeps each (step, total, done) it is asked to show."""

    def __init__(self):
        super().__init__()
        self.shown = []

    def render(self):
        self.shown.append((self.step, self.total, self.done))


def test_the_bar_says_grid_points_are_being_planned_while_it_has_nothing_to_count(db_path):
    """A 9-million-case plan showed `0/0` for minutes: the bar now names what it is doing
    (planning the grid points: each point's trivial strategy is measured)."""
    manifolds = [{"manifold": "objects", "count": 5}, {"manifold": "shuffle", "count": 5}]
    with reporting_to(Shown()) as progress:
        run(config([{"name": "o", "model": "baseline:oracle"}], manifolds), db_path)
    steps = [step for step, _, _ in progress.shown]
    objects, shuffle = "planning objects grid points (1/2)", "planning shuffle grid points (2/2)"
    assert steps[:4] == [f"{objects}: 0 of 1", f"{objects}: 1 of 1", f"{shuffle}: 0 of 1",
                         f"{shuffle}: 1 of 1"]  # fmt: skip
    counted = [(total, done) for step, total, done in progress.shown if total]
    assert counted and all(step == "" for step, total, _ in progress.shown if total)


def test_a_runs_statistics_are_todays_and_do_not_depend_on_its_batches(tmp_path):
    """The aggregation reduces the answers in SQL now: every point and summary of a run (three
    baselines, one with three samples a case, one manifold sampled adaptively) is what the
    whole-frame aggregation of 3a9c61d (tests/results/reference_aggregate.py) computes from
    the same stored answers, and a run asked 7 cases a batch stores the same figures as one
    asked 500 (but for the latencies, measured in each), scores and tiers too. Counts,
    outcomes, keys and case sets are equal; a mean of floats may differ in its last bits (the
    order of summation), so floats agree to 1e-12."""
    import polars as pl

    from tests.results.reference_aggregate import aggregate as todays

    manifolds = [
        {"manifold": "objects", "count": 24, "grid": {"length": [2, 4]}},
        {"manifold": "shuffle", "grid": {"length": 3},
         "precision": {"ci_width": 0.3, "min_count": 10, "max_count": 60, "step": 10}},
        {"manifold": "sequence", "count": 12},
    ]  # fmt: skip
    models = [
        {"name": "oracle", "model": "baseline:oracle"},
        {"name": "random", "model": "baseline:random", "sampling": {"samples": 3}},
        {"name": "heuristic", "model": "baseline:heuristic"},
    ]
    stored = {}
    for batch in (7, 500):
        db = str(tmp_path / f"batch{batch}.duckdb")
        cfg = {**config(models, manifolds), "batch_size": batch}
        run_id = run(cfg, db, plot=False)
        store = Store.open(db)
        points = store.frame("SELECT * EXCLUDE (run_id, ci_width, stop_reason) FROM points "
                             "ORDER BY model, manifold, point_key")  # fmt: skip
        summaries = store.frame("SELECT * EXCLUDE (run_id) FROM summaries "
                                "ORDER BY level, model, manifold")  # fmt: skip
        responses = store.frame(
            "SELECT run_id, model, manifold, case_id, point_key, outcome, answer, "
            "completion_tokens, latency_s FROM responses WHERE run_id = ?",
            [run_id],
        )
        cases = store.frame("SELECT case_id, params, chance, chance_random, chance_heuristic "
                            "FROM cases")  # fmt: skip
        ref_points, ref_summaries = todays(responses, cases)
        assert_same(points, ref_points.drop("run_id").sort("model", "manifold", "point_key"))
        standing = ["score", "score_low", "score_high", "tier"]  # newer than the reference
        assert summaries.filter(pl.col("manifold") == "*")["score"].is_not_null().all()
        assert_same(
            summaries.drop(standing),
            ref_summaries.drop("run_id")
            .sort("level", "model", "manifold")
            .select(summaries.drop(standing).columns),
        )
        stored[batch] = (points, summaries)
        assert points.height == 3 * 4 and points["samples"].max() == 3  # 4 points a model
    timed = pl.exclude("mean_latency_s")  # how long each answer took: measured, in each run
    assert_same(*[stored[b][0].select(timed) for b in (7, 500)])
    assert_same(*[stored[b][1].select(timed) for b in (7, 500)])


def assert_same(got, expected):
    """Equal frames: every column of `got` in `expected`, floats to 1e-12."""
    from polars.testing import assert_frame_equal

    assert_frame_equal(
        got, expected.select(got.columns), check_dtypes=False, rel_tol=1e-12, abs_tol=1e-12
    )
