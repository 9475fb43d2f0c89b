"""`numerate runs` and `numerate compare` on a real database of baseline runs."""

import csv
import io
import json
from datetime import datetime

import pytest
import yaml
from typer.testing import CliRunner

from numerate.cli import app
from numerate.results.compare import EXIT_REGRESSION

runner = CliRunner()

ORACLE, RANDOM = "baseline:oracle", "baseline:random"


def sweep(folder, name, models, grid=None, count=25):
    """A small sweep config: objects, one grid point, the same seed for every sweep."""
    manifold = {"manifold": "objects", "count": count, **({"grid": grid} if grid else {})}
    data = {"name": name, "seed": 1, "manifolds": [manifold],
            "models": [{"name": n, "model": m} for n, m in models.items()]}  # fmt: skip
    path = folder / f"{name}-{len(list(folder.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Five runs, oldest first: two one-model runs of sweep "solo" (oracle "o", random "g")
    on another grid point; then sweep "cmp" with models m and r: m the oracle, then a
    random guesser, then the oracle again (r guesses throughout)."""
    from numerate.store import Store

    folder = tmp_path_factory.mktemp("compare")
    db = str(folder / "results.duckdb")
    configs = [
        sweep(folder, "solo", {"o": ORACLE}, grid={"length": [3]}),
        sweep(folder, "solo", {"g": RANDOM}, grid={"length": [3]}),
        sweep(folder, "cmp", {"m": ORACLE, "r": RANDOM}),
        sweep(folder, "cmp", {"m": RANDOM, "r": RANDOM}),
        sweep(folder, "cmp", {"m": ORACLE, "r": RANDOM}),
    ]
    for config in configs:
        done = runner.invoke(app, ["run", "--config", str(config), "--db", db, "--format", "csv"])
        assert done.exit_code == 0, done.output
    Store.close_all()
    listed = runner.invoke(app, ["runs", "--db", db, "--format", "json"])
    assert listed.exit_code == 0, listed.output
    ids = [row["id"] for row in json.loads(listed.stdout)]
    assert len(ids) == 5
    yield db, ids[::-1]  # oldest first: solo_o, solo_g, oracle, guesser, oracle_again
    Store.close_all()


def compare(db, *arguments):
    return runner.invoke(app, ["compare", *arguments, "--db", db])


def unique_prefix(run_id, ids):
    for size in range(1, len(run_id) + 1):
        if sum(other.startswith(run_id[:size]) for other in ids) == 1:
            return run_id[:size]
    raise AssertionError(run_id)


def one_error_line(result):
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


def test_runs_lists_the_newest_first(results):
    db, ids = results
    done = runner.invoke(app, ["runs", "--db", db, "--format", "json", "--limit", "2"])
    assert done.exit_code == 0, done.output
    rows = json.loads(done.stdout)
    assert [row["id"] for row in rows] == [ids[4], ids[3]]
    assert rows[0]["models"] == "m, r" and rows[0]["n"] == 50
    assert rows[0]["sweep"] == "cmp" and rows[0]["status"] == "finished"
    assert rows[0]["started"] <= rows[0]["finished"]
    solo = runner.invoke(app, ["runs", "--db", db, "--sweep", "solo", "--format", "csv"])
    assert solo.stdout.splitlines()[0] == "id,sweep,models,status,started,finished,n"
    assert [line.split(",")[2] for line in solo.stdout.splitlines()[1:]] == ["g", "o"]
    # a first-contact review: CSV wrote 2026-12-01T03:54:30.000000+0000, JSON
    # 2026-12-01 03:54:30+00:00; both now write ISO 8601 as Python does
    both = runner.invoke(app, ["runs", "--db", db, "--format", "csv", "--limit", "2"])
    started = [row["started"] for row in csv.DictReader(io.StringIO(both.stdout))]
    assert started == [row["started"] for row in rows]
    assert datetime.fromisoformat(started[0]).isoformat() == started[0]
    assert started[0].endswith("+00:00") and "T" in started[0]
    table = runner.invoke(app, ["runs", "--db", db])
    assert table.exit_code == 0 and ids[0] in table.stdout
    none = runner.invoke(app, ["runs", "--db", db, "--sweep", "nope"])  # a typo: exit 0 before
    assert none.exit_code == 2
    assert none.stderr == "error: --sweep 'nope': no run of that sweep (its sweeps: cmp, solo)\n"


def test_a_model_that_got_worse_fails_the_gate(results):
    db, ids = results
    oracle, guesser = (unique_prefix(ids[i], ids) for i in (2, 3))
    done = compare(db, oracle, guesser, "--fail-on-regression")
    assert done.exit_code == EXIT_REGRESSION, done.output
    assert "regression" in done.stdout
    assert "1 regression, 0 improvements, 1 no change over 50 paired cases" in done.stdout
    assert done.stderr.strip() == "regression: m/objects"
    assert compare(db, oracle, guesser).exit_code == 0  # without the gate: a report


def test_the_reverse_is_an_improvement(results):
    db, _ = results
    done = compare(db, "previous", "latest", "--fail-on-regression")  # guesser -> oracle
    assert done.exit_code == 0, done.output
    assert "0 regressions, 1 improvement, 1 no change over 50 paired cases" in done.stdout
    # a first-contact review: in Markdown the summary lines went right under the table, which
    # makes them rows of it
    markdown = compare(db, "previous", "latest", "--format", "markdown").stdout
    table, _, after = markdown.rpartition("|\n")
    assert table.startswith("### ") and after.startswith("\n0 regressions, 1 improvement")


def test_identical_runs_change_nothing(results):
    db, ids = results
    done = compare(db, ids[2], ids[4], "--fail-on-regression", "--format", "json")
    assert done.exit_code == 0, done.output
    rows = json.loads(done.stdout)
    assert {(row["model"], row["verdict"]) for row in rows} == {
        ("m", "no change"), ("r", "no change"),
    }  # fmt: skip
    assert all(row["lost"] == row["gained"] == 0 for row in rows)
    assert "0 regressions, 0 improvements, 2 no change" in done.stderr  # stdout is JSON


def test_two_models_of_one_run(results):
    db, ids = results
    done = compare(db, ids[2], ids[2], "--base-model", "m", "--new-model", "r",
                   "--fail-on-regression", "--by", "point", "--format", "csv")  # fmt: skip
    assert done.exit_code == EXIT_REGRESSION, done.output
    header, row = done.stdout.splitlines()[:2]
    assert header.startswith("model,manifold,point_key,n,")
    assert row.startswith("m -> r,objects,")


def test_two_one_model_runs_pair_their_models(results):
    db, ids = results
    done = compare(db, "previous", "latest", "--sweep", "solo", "--model", "o")
    assert "--model 'o': run " + ids[1] + " has no such model (it has g)" in one_error_line(done)
    done = compare(db, "previous", "latest", "--sweep", "solo", "--fail-on-regression")
    assert done.exit_code == EXIT_REGRESSION, done.output
    assert "pairing model 'o' of BASE with 'g' of NEW" in done.stderr
    assert "o -> g" in done.stdout


def test_filters(results):
    db, ids = results
    done = compare(db, ids[2], ids[3], "--model", "r", "--manifold", "objects")
    assert done.exit_code == 0, done.output
    assert "0 regressions, 0 improvements, 1 no change over 25 paired cases" in done.stdout


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["nope", "latest"], "BASE: run 'nope': no run in"),
        (["latest", "nope"], "NEW: run 'nope': no run in"),
        (["latest", "previous", "--by", "weird"], "--by 'weird': choose manifold or point"),
        (["latest", "previous", "--format", "xml"], "--format 'xml'"),
        (["latest", "previous", "--base-model", "m"], "--base-model and --new-model go together"),
        (["latest", "previous", "--model", "m", "--base-model", "m", "--new-model", "r"],
         "--model cannot be combined"),
        (["latest", "previous", "--manifold", "shuffle"], "--manifold 'shuffle': run"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(results, arguments, message):
    db, _ = results
    assert message in one_error_line(compare(db, *arguments))


def test_runs_without_shared_cases_say_so(results):
    db, ids = results
    done = compare(db, ids[0], ids[2], "--base-model", "o", "--new-model", "m")
    line = one_error_line(done)
    assert f"runs {ids[0]} and {ids[2]} share no answered cases to compare" in line
    assert "different cases" in line
    line = one_error_line(compare(db, ids[0], ids[2]))  # one model vs two: nothing pairs
    assert "their models differ (o vs m, r)" in line
    assert "--base-model" in line


def test_an_ambiguous_prefix_and_a_missing_database(results, tmp_path):
    db, ids = results
    assert "is ambiguous" in one_error_line(compare(db, ids[2][:1], "latest"))
    missing = str(tmp_path / "none.duckdb")
    assert "no results database" in one_error_line(compare(missing, "previous", "latest"))
    listed = runner.invoke(app, ["runs", "--db", missing])
    assert "no results database" in one_error_line(listed)
    assert "--limit 0" in one_error_line(runner.invoke(app, ["runs", "--db", db, "--limit", "0"]))
    every = runner.invoke(app, ["runs", "--db", db, "--format", "json", "--limit", "9" * 20])
    assert every.exit_code == 0 and len(json.loads(every.stdout)) == len(ids), every.output


def test_a_run_stopped_before_any_answer_lists_the_models_it_was_asked(tmp_path):
    """Before: `runs` showed an empty models column for a run interrupted before its first
    answer (models were taken from answers and verdicts only)."""
    from numerate.store import Store

    db = str(tmp_path / "r.duckdb")
    store = Store.open(db)
    config = {"name": "s", "models": [{"name": "b-model"}, {"name": "a-model"}]}
    store.start_run("run-1", "s", "h", config, "v")
    Store.close_all()
    listed = runner.invoke(app, ["runs", "--db", db, "--format", "json"])
    assert listed.exit_code == 0, listed.output
    assert [(row["id"], row["models"]) for row in json.loads(listed.stdout)] == [
        ("run-1", "a-model, b-model")
    ]


def test_report_of_a_run_stopped_before_any_answer_says_so(tmp_path):
    """Before: an empty table and exit 0 (plot refused the same run)."""
    from numerate.store import Store

    db = str(tmp_path / "r.duckdb")
    store = Store.open(db)
    store.start_run("run-1", "s", "h", {"name": "s", "models": [{"name": "m"}]}, "v")
    store.set_run_status("run-1", "interrupted")
    Store.close_all()
    result = runner.invoke(app, ["report", "--db", db])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: run run-1 ended interrupted and holds no answer: nothing to report\n"
    )
    store = Store.open(db)
    store.start_run("run-2", "s", "h", {"name": "s", "models": [{"name": "m"}]}, "v")
    Store.close_all()  # killed before any answer: recorded running, its process gone
    killed = runner.invoke(app, ["report", "--db", db])  # an empty table, exit 0
    assert killed.exit_code == 2, killed.output
    assert killed.stderr.startswith("error: run run-2 stopped without ending (started ")
    assert killed.stderr.endswith(
        "the same command resumes it) and holds no answer: nothing to report\n"
    )


def test_a_sweep_that_is_none_or_chooses_nothing_is_refused(results):
    """Before: `compare ID ID --sweep nosuch` compared the two runs, exit 0, the --sweep
    ignored."""
    db, ids = results
    line = one_error_line(compare(db, ids[0], ids[1], "--sweep", "nosuch"))
    assert "--sweep 'nosuch': no run of that sweep (its sweeps: " in line
    line = one_error_line(compare(db, ids[0], ids[1], "--sweep", "solo"))
    assert "--sweep 'solo' chooses which runs latest and previous are" in line
    line = one_error_line(compare(db, "previous", "latest", "--sweep", ""))  # said as BASE's
    assert line == "error: --sweep '': give a sweep name, or leave it out for every sweep"


def test_only_one_model_each_under_two_names_is_paired_by_itself(tmp_path):
    """A fourth mutation sweep: pairing runs of as many models (two each, other names), and
    saying a pairing of one model under its own name, passed every test; so did naming the
    same model given as --base-model and --new-model `x -> x`."""
    from numerate.store import Store

    db = str(tmp_path / "pairs.duckdb")
    for models in ({"x": ORACLE}, {"x": RANDOM}, {"p": ORACLE, "q": RANDOM},
                   {"s": ORACLE, "t": RANDOM}):  # fmt: skip
        done = runner.invoke(app, ["run", "--config", str(sweep(tmp_path, "s", models)),
                                   "--db", db, "--format", "csv"])  # fmt: skip
        assert done.exit_code == 0, done.output
    Store.close_all()
    ids = [
        row["id"]
        for row in json.loads(runner.invoke(app, ["runs", "--db", db, "--format", "json"]).stdout)
    ]
    one_x, other_x, two, other_two = ids[::-1]
    same = compare(db, one_x, other_x, "--format", "csv")
    assert same.exit_code == 0, same.output
    assert "pairing model" not in same.stderr and same.stdout.splitlines()[1].startswith("x,")
    named = compare(db, one_x, other_x, "--base-model", "x", "--new-model", "x", "--format",
                    "csv")  # fmt: skip
    assert named.exit_code == 0 and named.stdout.splitlines()[1].startswith("x,objects,")
    apart = compare(db, two, other_two)
    assert "their models differ (p, q vs s, t); pair two with --base-model" in one_error_line(apart)
