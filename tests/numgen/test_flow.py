"""The numgen flow under the Prefect test harness, into a real DuckDB file."""

import asyncio

import duckdb
import pytest

from numerate.flows.numgen import numgen

pytestmark = pytest.mark.usefixtures("prefect_harness")


def run(config, db):
    return asyncio.run(numgen(config, db, "local"))


def query(db, sql):
    con = duckdb.connect(db, read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_synthetic_stimuli_counted_by_blobs_score_100_percent(db_path, tmp_path):
    config = {"generator": "synthetic", "detector": "blobs", "images_dir": str(tmp_path),
              "prompts": {"per_number": 3}}  # fmt: skip
    result = run(config, db_path)
    assert (result["accuracy"], result["mwe"], result["knower_level"]) == (1.0, 0.0, 10)
    assert result["n"] == 30 and result["errors"] == 0
    run_id = result["run_id"]
    assert query(db_path, "SELECT count(*), count(path) FROM numgen_images") == [(30, 30)]
    assert query(db_path, "SELECT count(*) FROM numgen_detections WHERE count = raw_count") == [
        (30,)
    ]
    [(status, kind)] = query(
        db_path, f"SELECT status, kind FROM numgen_runs WHERE run_id = '{run_id}'"
    )
    assert (status, kind) == ("finished", "benchmark")
    assert query(db_path, "SELECT model, counting_level FROM numgen_leaderboard") == [
        ("synthetic", 10)
    ]
    assert query(db_path, "SELECT count(*), sum(correct) FROM numgen_targets") == [(10, 30)]
    assert (tmp_path / "runs" / run_id / "confusion.png").exists()
    assert len(list((tmp_path / "images").glob("synthetic*/annotated/*/*.png"))) == 30


def test_the_random_baseline_needs_no_images(db_path, tmp_path):
    config = {"generator": "random", "images_dir": str(tmp_path), "prompts": {"per_number": 50}}
    result = run(config, db_path)
    assert result["n"] == 500 and result["knower_level"] == 0
    assert 0.0 <= result["accuracy"] < 0.12
    assert query(db_path, "SELECT count(path), min(cached) FROM numgen_images") == [(0, False)]
    assert query(db_path, "SELECT DISTINCT detector FROM numgen_detections") == [("none",)]


def test_tiny_diffusers_and_grounding_dino_end_to_end(db_path, tmp_path, tiny_models):
    config = {
        **tiny_models,
        "images_dir": str(tmp_path),
        "prompts": {"per_number": 1, "n_max": 4},
        "generation": {"steps": 2, "height": 32, "width": 32, "device": "cpu"},
        "task_batch": 3,
    }
    result = run(config, db_path)
    assert result["n"] + result["errors"] == 4
    rows = query(
        db_path,
        "SELECT i.generator, i.width, d.detector, d.caption, d.count <= 20 FROM numgen_images i "
        "JOIN numgen_detections d USING (run_id, prompt_id) ORDER BY i.prompt_index",
    )
    assert [r[:3] for r in rows] == [(tiny_models["generator"], 32, tiny_models["detector"])] * 4
    assert all(r[4] for r in rows)
    # a second run finds every image already made: nothing is generated twice
    again = run(config, db_path)
    cached = query(
        db_path, f"SELECT bool_and(cached) FROM numgen_images WHERE run_id = '{again['run_id']}'"
    )
    assert cached == [(True,)]


def test_calibration_runs_feed_the_calibration_view(db_path, tmp_path):
    from numerate.numgen.config import calibration_config

    config = calibration_config("blobs", per_number=2, images_dir=str(tmp_path))
    run(config.model_dump(mode="json"), db_path)
    rows = query(
        db_path,
        "SELECT detector, count(*), sum(correct), sum(n) FROM numgen_calibration GROUP BY 1",
    )
    assert rows == [("blobs", 10, 20, 20)]
    assert query(db_path, "SELECT DISTINCT object FROM numgen_images") in (
        [("dots",), ("triangles",)],
        [("triangles",), ("dots",)],
    )
    assert query(db_path, "SELECT count(*) FROM numgen_leaderboard") == [(0,)]  # not a benchmark
    # corpus M: `runs` sent the user to `numgen report`, which said no finished run was there
    from typer.testing import CliRunner

    from numerate.cli import app
    from numerate.store import Store

    Store.close_all()
    shown = f'`numerate db {db_path} "SELECT * FROM numgen_calibration"` shows them'
    # a review: `recount latest` said "no NumGen run with metrics", with calibrations there
    recount = ["numgen", "recount", "latest", "--detector", "blobs"]
    for command in (["runs"], ["numgen", "report"], recount):
        said = CliRunner().invoke(app, [*command, "--db", db_path]).stderr
        assert said.strip().endswith(f"it holds 1 detector calibration(s): {shown}"), said


def test_a_broken_generator_marks_the_run_failed(db_path, tmp_path):
    config = {"generator": "callable:tests.numgen.test_flow:unreachable", "detector": "blobs",
              "images_dir": str(tmp_path), "prompts": {"per_number": 1, "n_max": 2}}  # fmt: skip
    from numerate.grading.verdict import RunFailed

    with pytest.raises(RunFailed, match="failed: ConnectionError: image API unreachable") as ended:
        run(config, db_path)
    assert isinstance(ended.value.__cause__, ConnectionError)  # the generator's own, kept
    from numerate.store import Store

    Store.close_all()
    assert query(db_path, "SELECT status FROM numgen_runs") == [("failed",)]


def unreachable(text, seed):
    raise ConnectionError("image API unreachable")


def fails_at_two(text, seed):
    """The shapes asked for, except for two: no image (half of a design of 1..2)."""
    from numerate.numgen.synthetic import draw_stimulus

    n = int(text.split(" with ")[1].split()[0])
    if n == 2:
        raise ConnectionError("image API timed out")
    return draw_stimulus(n, seed, 64)


@pytest.mark.parametrize("max_error_rate", [None, 0.5])
def test_a_run_with_more_images_failed_than_its_rate_is_degraded_and_kept(
    db_path, tmp_path, max_error_rate
):
    """Half of the images failed: the run was `finished` (exit 0 from `numgen run`) on the
    half that was made. It is stored all the same, `degraded` beyond max_error_rate (2% by
    default; 50% is not beyond it), and stays on the leaderboard with its errors."""
    from numerate.grading.verdict import RunFailed
    from numerate.store import Store

    config = {"generator": "callable:tests.numgen.test_flow:fails_at_two", "detector": "blobs",
              "images_dir": str(tmp_path), "prompts": {"per_number": 2, "n_max": 2}}  # fmt: skip
    if max_error_rate is not None:
        result = run({**config, "max_error_rate": max_error_rate}, db_path)
        assert (result["status"], "cause" in result) == ("finished", False)
        status = "finished"
    else:
        with pytest.raises(RunFailed) as ended:
            run(config, db_path)
        result = ended.value.result
        assert str(ended.value) == (
            f"NumGen run {result['run_id']} degraded: 2 of 4 images have no count (2 for an error; "
            "50.0% > max_error_rate 2.0%)"
        )
        assert ended.value.run_id == result["run_id"] and result["status"] == "degraded"
        status = "degraded"
    assert (result["n"], result["errors"], result["accuracy"]) == (2, 2, 1.0)
    Store.close_all()
    assert query(db_path, "SELECT status, finished_at IS NOT NULL FROM numgen_runs") == [
        (status, True)
    ]
    assert query(db_path, "SELECT run_id, n, errors FROM numgen_leaderboard") == [
        (result["run_id"], 2, 2)
    ]


def test_an_error_that_a_stop_signal_caused_marks_the_run_interrupted(db_path, tmp_path):
    """A SIGINT in step 2 stored the run `failed` (seen once at 9 s into `numgen run`): the
    error the stop caused was taken for the generator's. Once a stop signal came, it is the
    stop: `interrupted`, and the error goes on to the command, which says it stopped."""
    from numerate.kernel import stopping

    config = {"generator": "callable:tests.numgen.test_flow:unreachable", "detector": "blobs",
              "images_dir": str(tmp_path), "prompts": {"per_number": 1, "n_max": 2}}  # fmt: skip
    stopping.ask()
    try:
        with pytest.raises(ConnectionError, match="image API unreachable"):
            run(config, db_path)
    finally:
        stopping._asked.clear()
    from numerate.store import Store

    Store.close_all()
    assert query(db_path, "SELECT status FROM numgen_runs") == [("interrupted",)]


def test_a_numgen_run_publishes_its_metrics_as_artifacts(db_path, tmp_path):
    from tests.numgen.conftest import latest_artifact as latest

    config = {"generator": "random", "images_dir": str(tmp_path), "prompts": {"per_number": 5}}
    run_id = run(config, db_path)["run_id"]
    table = asyncio.run(latest("numgen-random-none-results"))
    summary = asyncio.run(latest("numgen-random-none-summary"))
    assert table is not None and summary is not None
    rows = table.data if isinstance(table.data, list) else __import__("json").loads(table.data)
    assert rows[0]["generator"] == "random" and rows[0]["n"] == 50
    assert run_id in summary.data and "knower_level" in summary.data


def test_the_bar_says_which_of_the_two_steps_it_counts(db_path, tmp_path):
    """A NumGen bar counts each prompt twice (its image, then its count): it says so."""
    from numerate.kernel.progress import reporting_to
    from tests.flows.test_sweep import Shown

    config = {"generator": "synthetic", "detector": "blobs", "images_dir": str(tmp_path),
              "prompts": {"per_number": 1}}  # fmt: skip
    with reporting_to(Shown()) as progress:
        run(config, db_path)
    done_in = {step: done for step, _, done in progress.shown}
    assert done_in["step 1 of 2, images"] == 10 and done_in["step 2 of 2, counts"] == 20
    assert progress.shown[-1][0] == ""
