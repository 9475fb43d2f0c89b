"""`numerate run`, `report` and `db`: errors users see, and a sweep killed with SIGKILL."""

import base64
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
import yaml
from typer.testing import CliRunner

from numerate.cli import app
from numerate.cli.process import SAME_SIGNAL_S
from tests.fake_openai import Reply, spawn
from tests.prefect_server import migrated_database
from tests.waiting import cpu_seconds, holds_open, wait_until

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def write_config(path, models, manifolds=None, **extra):
    data = {"name": "cli", "seed": 1, "models": models,
            "manifolds": manifolds or [{"manifold": "objects", "count": 3}], **extra}  # fmt: skip
    path.write_text(yaml.safe_dump(data))
    return path


def one_error_line(result, code=2):
    """One line on standard error naming the problem, and the exit code: 2 for bad input,
    3 for a run that could not be done."""
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("name: x\nmodels: [\n", "not valid YAML"),
        ("- just\n- a list\n", "expected a mapping"),
        ("name: x\nmodels: []\nmanifolds: [{manifold: objects}]\n", "models"),
        (
            "name: x\nmodels: [{name: a, model: baseline:random, concurrency: 0}]\n"
            "manifolds: [{manifold: objects}]\n",
            "models.0.concurrency = 0",
        ),
        (
            "name: x\nmodels: [{name: a, model: baseline:random}]\n"
            "manifolds: [{manifold: objects, grid: {length: [0, 4]}}]\n",
            "grid.length = 0",
        ),
        (
            "name: x\nmodels: [{name: a, model: baseline:random}]\n"
            "manifolds: [{manifold: objectz}]\n",
            "unknown manifold 'objectz'",
        ),
        (
            "name: x\nmodels: [{name: a, model: served-id}]\nmanifolds: [{manifold: objects}]\n",
            "needs a base_url",
        ),
    ],
)
def test_a_bad_config_gives_one_clear_error_line(tmp_path, content, message):
    path = tmp_path / "sweep.yaml"
    path.write_text(content)
    line = one_error_line(runner.invoke(app, ["run", "--config", str(path)]))
    assert message in line and str(path) in line


def test_missing_config_file(tmp_path):
    line = one_error_line(runner.invoke(app, ["run", "--config", str(tmp_path / "nope.yaml")]))
    assert "cannot read sweep config" in line


def test_an_unreachable_endpoint_gives_one_clear_error_line(tmp_path):
    gone = {"name": "gone", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    path = write_config(tmp_path / "s.yaml", [gone])
    db = tmp_path / "r.duckdb"
    line = one_error_line(
        runner.invoke(app, ["run", "--config", str(path), "--db", str(db)]), code=3
    )
    assert "cannot reach model 'gone' at http://127.0.0.1:9/v1" in line
    assert not db.exists()  # no model could run: nothing was written
    assert not (tmp_path / "r.duckdb.journal").exists()  # nor left behind


def test_a_wrong_api_key_gives_one_clear_error_line(tmp_path, fake_openai, monkeypatch):
    fake_openai.api_key = "right-key"
    monkeypatch.setenv("SWEEP_KEY", "wrong-key")
    path = write_config(tmp_path / "s.yaml", [{"name": "fake", "model": "fake-model",
                        "base_url": fake_openai.base_url, "api_key_env": "SWEEP_KEY"}])  # fmt: skip
    line = one_error_line(runner.invoke(app, ["run", "--config", str(path)]), code=3)
    assert "refused the API key from $SWEEP_KEY: HTTP 401" in line
    assert "wrong-key" not in line


def test_run_model_reads_its_key_from_api_key_env_and_is_named_after_the_model(
    tmp_path, fake_openai, monkeypatch
):
    fake_openai.api_key = "right-key"
    monkeypatch.setenv("MY_KEY", "right-key")
    db = tmp_path / "r.duckdb"
    args = ["run", "--model", "fake-model", "--base-url", fake_openai.base_url,
            "--api-key-env", "MY_KEY", "--db", str(db), "--format", "json"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert set(fake_openai.authorizations) == {"Bearer right-key"}
    con = duckdb.connect(str(db), read_only=True)
    try:
        [(sweep, run_id)] = con.execute("SELECT sweep_name, run_id FROM runs").fetchall()
    finally:
        con.close()
    assert sweep == "fake-model" and run_id.startswith("fake-model-")
    line = one_error_line(runner.invoke(app, ["run", "--api-key-env", "MY_KEY"]))
    assert "--api-key-env needs --model" in line


def test_base_url_without_model(tmp_path):
    assert "--base-url needs --model" in one_error_line(
        runner.invoke(app, ["run", "--base-url", "http://127.0.0.1:1/v1"])
    )


def test_report_and_db_on_a_missing_database(tmp_path):
    missing = str(tmp_path / "none.duckdb")
    assert "no results database" in one_error_line(runner.invoke(app, ["report", "--db", missing]))
    assert "no results database" in one_error_line(runner.invoke(app, ["db", missing]))


def test_db_runs_sql_given_alone_on_the_database_every_command_takes(tmp_path, monkeypatch):
    """A hostile pass: with NUMERATE_DB set, `numerate db "select 1"` said "no results
    database at select 1", and later that the database comes first, although `numerate db`
    alone lists NUMERATE_DB's tables."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NUMERATE_DB", str(tmp_path / "x.duckdb"))
    assert "no results database at" in one_error_line(runner.invoke(app, ["db", "select 1"]))
    duckdb.connect(str(tmp_path / "x.duckdb")).close()
    result = runner.invoke(app, ["db", "select 41 + 1 AS answer", "--format", "csv"])
    assert result.exit_code == 0 and result.stdout.splitlines() == ["answer", "42"]
    line = one_error_line(runner.invoke(app, ["db", "select 1", "x.duckdb"]))  # turned round
    assert line == (
        "error: PATH 'select 1': no such database; it reads as SQL, which comes after the "
        "database: numerate db DATABASE SQL (or --db DATABASE SQL)"
    )


def test_db_reports_bad_sql_in_one_line(tmp_path):
    path = tmp_path / "x.duckdb"
    duckdb.connect(str(path)).close()
    line = one_error_line(runner.invoke(app, ["db", str(path), "SELECT nope FROM nowhere"]))
    assert "nowhere" in line


# ---------------------------------------------------------------- real processes


def numerate_env(prefect_home, own_server=False, migrated=True):
    """The environment of a `numerate` the test starts as a process: a Prefect home of its
    own, reporting to the session's Prefect server (tests/conftest.py). `own_server`: to no
    server, so that the command starts one itself (Prefect's temporary server, unless the
    test asks NUMERATE_SERVER=background), for the tests of that start; in a home whose
    Prefect database is already migrated, unless not `migrated` (a new home's first start)."""
    env = dict(os.environ)
    env.update({"PREFECT_HOME": str(prefect_home), "PYTHONUNBUFFERED": "1"})
    if own_server:
        env.pop("PREFECT_API_URL", None)
        if migrated:
            migrated_database(Path(prefect_home))
    return env


class Console(list):
    """Arguments whose refusal the console script words (the command-line parser's own
    errors, an argument that is no UTF-8): `refusal` runs them as a user runs them."""


def refusal(arguments, cwd):
    """How `numerate <arguments>`, run in `cwd`, refused them: its exit code, standard output
    and standard error. In this process (Typer's runner: a command's refusal is its own,
    however it is started) unless the arguments are `Console`'s: through the console script
    (`python -m numerate.cli`), which words the parser's errors and checks the arguments."""
    if isinstance(arguments, Console):
        done = subprocess.run(
            [sys.executable, "-m", "numerate.cli", *arguments], cwd=cwd,
            env=numerate_env(Path(cwd) / "prefect"), capture_output=True, text=True,
            timeout=120, errors="surrogateescape",
        )  # fmt: skip
        return done.returncode, done.stdout, done.stderr
    with contextlib.chdir(cwd):
        result = runner.invoke(app, list(arguments))
    return result.exit_code, result.stdout, result.stderr


def start_endpoint(tmp_path, delay):
    log = tmp_path / "requests.log"
    process, base_url = spawn(tmp_path, "--delay", str(delay), "--log", str(log))
    return process, base_url, log


def slow_sweep(tmp_path, count, delay, batch_size):
    """A sweep of one fake model that answers after `delay` seconds, two requests at a time:
    its config file, the endpoint's process and its request log."""
    endpoint, base_url, log = start_endpoint(tmp_path, delay=delay)
    config = write_config(
        tmp_path / "sweep.yaml",
        [{"name": "fake", "model": "fake-model", "base_url": base_url, "concurrency": 2}],
        [{"manifold": "objects", "count": count}],
        batch_size=batch_size,
    )
    return config, endpoint, log


def start_sweep(config, db, env):
    """`numerate run --config CONFIG --db DB` in its own process, its output discarded."""
    return subprocess.Popen(
        [sys.executable, "-m", "numerate.cli", "run", "--config", str(config), "--db", str(db)],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def logged(log):
    return log.read_text().split() if log.exists() else []


def final_table(db):
    con = duckdb.connect(str(db), read_only=True)
    try:
        runs = con.execute("SELECT run_id, status FROM runs").fetchall()
        rows = con.execute(
            "SELECT model, manifold, case_id, point_key, request_hash, raw_text, answer, outcome, "
            "error, finish_reason, prompt_tokens, completion_tokens, cached "
            "FROM responses ORDER BY model, case_id"
        ).fetchall()
        points = con.execute(
            "SELECT model, manifold, point_key, n, correct, accuracy FROM points ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()
    return runs, rows, points


@pytest.mark.slow
def test_a_sweep_killed_with_sigkill_resumes_to_the_same_result(tmp_path):
    concurrency = 4
    endpoint, base_url, log = start_endpoint(tmp_path, delay=0.02)
    try:
        config = write_config(
            tmp_path / "sweep.yaml",
            [{"name": "fake", "model": "fake-model", "base_url": base_url,
              "concurrency": concurrency}],
            [{"manifold": "objects", "count": 150, "grid": {"length": [2, 3]}},
             {"manifold": "sequence", "count": 100}],
            batch_size=100,
        )  # fmt: skip
        total = 150 * 2 + 100
        env = numerate_env(tmp_path / "prefect")
        command = [sys.executable, "-m", "numerate.cli", "run", "--config", str(config)]

        killed_db = tmp_path / "killed.duckdb"
        victim = subprocess.Popen(
            [*command, "--db", str(killed_db)], cwd=ROOT, env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while len(logged(log)) < 120:
            assert victim.poll() is None, "the sweep ended before it could be killed"
            assert time.monotonic() < deadline, "the sweep sent too few requests"
            time.sleep(0.01)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        time.sleep(0.2)
        before_kill = logged(log)
        assert len(before_kill) < total
        # a hostile pass: `report` said the killed run was still running (its journal's
        # owner was dead); it is said to have stopped, and how to go on
        from numerate.store import Store

        told = runner.invoke(app, ["report", "--db", str(killed_db)])
        listed = runner.invoke(app, ["runs", "--db", str(killed_db), "--format", "json"])
        Store.close_all()
        assert [run["status"] for run in json.loads(listed.stdout)] == ["stopped"]  # as said
        stopped = r"run cli-\S+ stopped without ending \(started .*; its process is gone"
        assert re.search(stopped, told.stderr), told.stderr
        assert "still running" not in told.stderr

        resumed = subprocess.run(
            [*command, "--db", str(killed_db), "--format", "json"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        assert "resuming run cli-" in resumed.stderr  # it says so, and how much is stored
        after_resume = logged(log)[len(before_kill) :]
        resent = set(after_resume) & set(before_kill)
        # in flight = sent, or answered but not yet committed: at most 2 x concurrency
        assert len(resent) <= 2 * concurrency, f"{len(resent)} requests were sent twice"
        assert len(set(before_kill) | set(after_resume)) == total

        clean_db = tmp_path / "clean.duckdb"
        clean = subprocess.run(
            [*command, "--db", str(clean_db), "--format", "json"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert clean.returncode == 0, clean.stderr
    finally:
        endpoint.kill()
        endpoint.wait()

    killed_runs, killed_rows, killed_points = final_table(killed_db)
    _, clean_rows, clean_points = final_table(clean_db)
    assert [status for _, status in killed_runs] == ["finished"]  # one run, resumed
    assert len(killed_rows) == len({r[2] for r in killed_rows}) == total
    assert killed_rows == clean_rows
    assert killed_points == clean_points
    summary = json.loads(resumed.stdout)
    assert summary[0]["model"] == "fake" and summary[0]["n"] == total


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stop", "code", "said"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
def test_ctrl_c_and_sigterm_stop_cleanly_and_keep_every_answer(tmp_path, stop, code, said):
    endpoint, base_url, log = start_endpoint(tmp_path, delay=0.05)
    try:
        config = write_config(
            tmp_path / "sweep.yaml",
            [{"name": "fake", "model": "fake-model", "base_url": base_url, "concurrency": 2}],
            [{"manifold": "shuffle", "count": 200}],
        )
        env = numerate_env(tmp_path / "prefect")
        command = [sys.executable, "-m", "numerate.cli", "run", "--config", str(config),
                   "--db", str(tmp_path / "r.duckdb")]  # fmt: skip
        sweep = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while len(logged(log)) < 20:
            assert sweep.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        sweep.send_signal(stop)
        _, stderr = sweep.communicate(timeout=60)
        assert sweep.returncode == code, stderr
        lines = [line for line in stderr.splitlines() if line.strip()]
        # the progress bar, then one line: no traceback, no crash or leak noise
        assert lines[-1] == (
            f"{said}: every answer received so far is stored; run the same command again to resume"
        ), stderr
        assert not any(word in stderr for word in ("Traceback", "Crash", "leaked", "ERROR"))
        sent = len(logged(log))

        con = duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True)
        stored = con.execute("SELECT count(*) FROM completions").fetchone()[0]
        status = con.execute("SELECT status FROM runs").fetchall()
        con.close()
        assert status == [("interrupted",)]
        assert sent - 2 <= stored <= sent  # only requests cut off in flight are missing

        resumed = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=300)  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        assert "resuming run cli-" in resumed.stderr  # it says so, and how much is stored
        assert len(logged(log)) - sent <= 200 - stored + 2
    finally:
        endpoint.kill()
        endpoint.wait()


def test_a_night_with_a_dead_endpoint_exits_3_after_storing_the_rest(tmp_path):
    gone = {"name": "gone", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    oracle = {"name": "oracle", "model": "baseline:oracle"}
    path = write_config(tmp_path / "s.yaml", [gone, oracle])
    db = tmp_path / "r.duckdb"
    result = runner.invoke(app, ["run", "--config", str(path), "--db", str(db)])
    assert result.exit_code == 3, result.output
    assert "oracle" in result.stdout  # the report of what was measured
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: run cli-") and "model 'gone' failed: cannot reach" in last
    assert "Traceback" not in result.output
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT status FROM runs").fetchall() == [("failed",)]
    con.close()


def test_a_run_ended_by_an_error_is_marked_interrupted_and_resumes(tmp_path, monkeypatch):
    """Its results database failing as the run is aggregated (out of memory, a full disk):
    one line, exit 3, and the run stayed `running` (listed and shown as live) after the
    process had gone. The same command resumes it."""
    import numerate.tasks.aggregate as aggregate
    from numerate.store import StoreError

    real = aggregate.aggregate_stored_run

    def out_of_memory(store, run_id):
        raise StoreError("DuckDB needed more than the 128MB numerate lets it hold in memory")

    monkeypatch.setattr(aggregate, "aggregate_stored_run", out_of_memory)
    path = write_config(tmp_path / "s.yaml", [{"name": "oracle", "model": "baseline:oracle"}])
    command = ["run", "--config", str(path), "--db", str(tmp_path / "r.duckdb")]
    ended = runner.invoke(app, command)
    assert ended.exit_code == 3 and "Traceback" not in ended.output, ended.output
    assert ended.stderr.strip().splitlines()[-1] == (
        "error: DuckDB needed more than the 128MB numerate lets it hold in memory"
    )
    con = duckdb.connect(str(tmp_path / "r.duckdb"))
    assert con.execute("SELECT status FROM runs").fetchall() == [("interrupted",)]
    # one of its 3 answers an error: asked again, and so not counted as kept (a hostile
    # pass: "3 answers already stored are not asked again", then 3 requests sent again)
    con.execute("UPDATE responses SET outcome = 'error', error = 'HTTP 500: x' WHERE case_id = "
                "(SELECT min(case_id) FROM responses)")  # fmt: skip
    con.close()
    monkeypatch.setattr(aggregate, "aggregate_stored_run", real)
    resumed = runner.invoke(app, command)
    assert resumed.exit_code == 0, resumed.output
    [said] = [line for line in resumed.stderr.splitlines() if "resuming" in line]
    assert said.startswith("resuming run cli-") and said.endswith(
        ": 2 answers already stored are not asked again (errors are asked again; --fresh "
        "starts a new run)"
    ), said
    con = duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FILTER (WHERE outcome = 'correct') FROM responses"
                       ).fetchall() == [(3,)]  # fmt: skip
    con.close()


def test_a_failed_run_exits_3_when_prefect_s_api_answers_its_end_as_a_repeat(tmp_path, monkeypatch):
    """Issue 35's flake: under load, Prefect's client sent the run's end (its Failed state)
    again after an answer that did not come; the API took the second for a repeat of the
    first and answered with its own copy of the state, without the error the flow had put in
    it, and `numerate run` ended in Prefect's bare FailedRun (exit 1, a traceback) instead of
    exit 3. The flow raises the run's failure now: it reaches the command from this process,
    whatever the API answers. Here the API's answer to the end is that repeat's."""
    from prefect.client.orchestration import PrefectClient
    from prefect.client.schemas.responses import (
        OrchestrationResult,
        SetStateStatus,
        StateRejectDetails,
    )

    sent = PrefectClient.set_flow_run_state

    async def answered_as_a_repeat(self, flow_run_id, state, force=False):
        answer = await sent(self, flow_run_id, state, force=force)
        if not state.is_failed():
            return answer
        repeat = StateRejectDetails(reason="This run has already made this state transition.")
        return OrchestrationResult(state=answer.state, status=SetStateStatus.REJECT,
                                   details=repeat)  # fmt: skip

    monkeypatch.setattr(PrefectClient, "set_flow_run_state", answered_as_a_repeat)
    gone = {"name": "gone", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    path = write_config(tmp_path / "s.yaml", [gone, {"name": "oracle", "model": "baseline:oracle"}])
    result = runner.invoke(app, ["run", "--config", str(path), "--db", str(tmp_path / "r.duckdb")])
    assert result.exit_code == 3, result.output
    assert result.stderr.strip().splitlines()[-1].startswith("error: run cli-")
    assert "model 'gone' failed: cannot reach" in result.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (Console(["generate", "objects", "--count", "ten"]), "Invalid value for '--count'"),
        (Console(["frobnicate"]), "No such command 'frobnicate'"),
        (["generate", "objects", "--seed", "-1"], "--seed -1"),
        (["generate", "objects", "--set", "length=true"], "--set length=true: Input should be"),
        (["generate", "objects", "--set", "length=1e400"], "--set length=1e400: Input should"),
        (Console(["generate", "objects", "--set", "anchor=\udcff"]),
         "error: --set anchor=\\xff: not valid text (undecodable"),
        # corpus L: a traceback (regrade, db), DuckDB's or pydantic's words, or two lines
        (Console(["regrade", "--run", "\udcff"]),
         "error: --run \\xff: not valid text (undecodable"),
        (Console(["db", "x.duckdb", "select '\udcff'"]), "error: select '\\xff': not valid text"),
        (Console(["run", "--model", "\udcff", "--base-url", "http://127.0.0.1:9/v1"]),
         "error: --model \\xff: not valid text"),
        (Console(["numgen", "run", "--generator=\udcff"]),
         "error: --generator=\\xff: not valid text"),
        (["run", "--model", "m", "--base-url", "http://[::1:bad"], "is not a valid URL"),
        (["run", "--model", "baseline:oracle", "--db", "/proc/nonexistent/x.duckdb"],
         "cannot open results database /proc/nonexistent/x.duckdb"),
        (["numgen", "calibrate", "--detector", "blobs", "--count", "-1"],
         "--count -1: Input should be greater than or equal to 1"),
        (Console(["generate", "objects", "--out", ""]), "'--out': '': give a path (an empty one"),
        (["run", "--model", " ", "--base-url", "http://127.0.0.1:9/v1"], "--model ' ': give a"),
        (["run", "--name", "foo"], "--name needs --model"),
        (["run", "--model", "baseline:oracle", "--name", ""], "--name '': give a label"),
        (["run", "--model", "baseline:oracle", "--base-url", "http://h/v1"], "asks no endpoint"),
        # corpus K: each said `--model/--base-url: models.0...`, naming the wrong option
        (["run", "--model", "baseline:oracle", "--name", "bad name"],
         "error: --name 'bad name': not a name numerate takes (1 to 200 of ASCII letters, digits "
         "and _ . : /"),
        (["run", "--model", "a\x1b]8;;x\x07b", "--base-url", "http://127.0.0.1:9/v1"],
         "error: --model 'a\\x1b]8;;x\\x07b': not a name numerate takes (1 to 200 characters, "
         "no space, control"),
        (["run", "--model", "baseline:oracle", "--api-key-env", "KEY"],
         "error: --api-key-env: model 'baseline:oracle' is baseline:oracle, which asks no"),
        (["run", "--model", "m", "--base-url", "ftp://x"],
         "error: --base-url 'ftp://x' must start with http:// or https://"),
        (Console(["grade", ""]), "'path': '': give a path"),
        (Console(["plot", "--out", ""]), "'--out': '': give a path"),
        (Console(["run", "--config", ""]), "'--config' / '-c': '': give a path"),
        (Console(["numgen", "run", "--config", " "]), "'--config' / '-c': ' ': give a path"),
        (Console(["numgen", "score", "--responses", ""]), "'--responses': '': give a path"),
        (Console(["numgen", "report", "--heatmap", ""]), "'--heatmap': '': give a path"),
    ],
)  # fmt: skip
def test_garbage_on_the_command_line_is_one_line_and_exit_2(tmp_path, arguments, message):
    """What the command-line parser refuses, through the console script, as a user runs it;
    what a command refuses, in this process (see `refusal`)."""
    code, _, stderr = refusal(arguments, tmp_path)
    assert code == 2, stderr
    lines = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and message in lines[0], stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"name: x\xff\n", "is not UTF-8 text"),
        (b"a: &a [1, 2]\nb: [*a, *a]\n", "YAML aliases (*name) are not allowed"),
        (
            b"name: x\nmodels: [{name: a, model: baseline:random}]\nmanifolds:\n"
            b"  - {manifold: objects, grid: {length: ["
            + b",".join(b"%d" % i for i in range(1, 400))
            + b"], max_count: ["
            + b",".join(b"%d" % i for i in range(400))
            + b"]}}\n",
            "= 159,600 grid points, more than 100,000",
        ),
        (
            b"name: x\nmax_cases: 1000\nmodels: [{name: a, model: baseline:random}]\n"
            b"manifolds: [{manifold: objects, count: 600, grid: {length: [2, 3]}}]\n",
            "1 model(s) x 1,200 cases (with their samples) = 1,200 answers, more than max_cases",
        ),
    ],
)  # fmt: skip
def test_a_hostile_config_is_refused_at_once(tmp_path, content, message):
    path = tmp_path / "sweep.yaml"
    path.write_bytes(content)
    db = tmp_path / "r.duckdb"
    started = time.monotonic()
    result = runner.invoke(app, ["run", "--config", str(path), "--db", str(db)])
    assert time.monotonic() - started < 10
    assert message in one_error_line(result)
    assert not db.exists()


def test_an_unwritable_results_dir_is_refused_before_the_run(tmp_path):
    path = write_config(tmp_path / "s.yaml", [{"name": "o", "model": "baseline:oracle"}],
                        results_dir="/proc/forbidden/shards")  # fmt: skip
    db = tmp_path / "r.duckdb"
    line = one_error_line(runner.invoke(app, ["run", "--config", str(path), "--db", str(db)]))
    assert "results_dir '/proc/forbidden/shards' cannot be written" in line
    assert not db.exists()


@pytest.mark.parametrize("command", ["run", "numgen"])
def test_a_run_says_what_it_does_in_numerate_s_words_only(tmp_path, command):
    """At Prefect's default level (INFO) and without the variables that turn Prefect's
    telemetry off in the environment: no line of Prefect's own about its temporary server
    (its address, a link, its stop), no task run's state, no telemetry attempt (its error
    and traceback where the internet cannot be reached) beside the command's progress."""
    config = write_config(tmp_path / "s.yaml", [{"name": "o", "model": "baseline:oracle"}])
    arguments = {
        "run": ["run", "--config", str(config), "--format", "json"],
        "numgen": ["numgen", "run", "--generator", "synthetic", "--detector", "blobs",
                   "--count", "1", "--images-dir", str(tmp_path / "images")],
    }[command]  # fmt: skip
    env = numerate_env(tmp_path / "prefect", own_server=True)
    env["PREFECT_LOGGING_LEVEL"] = "INFO"
    for name in ("DO_NOT_TRACK", "PREFECT_SERVER_ANALYTICS_ENABLED"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-m", "numerate.cli", *arguments, "--db", str(tmp_path / "r.duckdb")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    said = done.stderr.replace("Prefect's temporary server (", "")
    for unwanted in ("temporary server", "Task run", "telemetry", "Traceback"):
        assert unwanted not in said, done.stderr
    home = tmp_path / "prefect"  # its server stopped before it exited, its folder removed
    assert not _servers_of(home) and not any((home / "numerate-server" / "temporary").iterdir())


def test_a_missing_secret_block_is_one_line_and_leaves_no_server_behind(tmp_path):
    """Reading a Secret block needs Prefect's API: the check waits for the command's own
    temporary server (Prefect's client started a second one beside it, which outlived the
    command and held its output open: `numerate run ... | tail` never returned)."""
    model = {"name": "m", "model": "m", "base_url": "http://127.0.0.1:9/v1",
             "api_key_secret": "no-such-block"}  # fmt: skip
    config = write_config(tmp_path / "s.yaml", [model])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "numerate.cli",
            "run",
            "--config",
            str(config),
            "--db",
            str(tmp_path / "r.duckdb"),
        ],
        cwd=ROOT,
        env=numerate_env(tmp_path / "prefect", own_server=True),
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip  (capture_output: an orphan holding the pipes would hang this call)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == "error: model 'm': no Prefect Secret block named 'no-such-block'"
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_prefect_s_temporary_server_dies_with_a_killed_cli(tmp_path):
    psutil = pytest.importorskip("psutil")
    endpoint, base_url, log = start_endpoint(tmp_path, delay=0.05)
    try:
        config = write_config(
            tmp_path / "sweep.yaml",
            [{"name": "fake", "model": "fake-model", "base_url": base_url, "concurrency": 2}],
            [{"manifold": "objects", "count": 300}],
        )
        command = [sys.executable, "-m", "numerate.cli", "run", "--config", str(config),
                   "--db", str(tmp_path / "r.duckdb")]  # fmt: skip
        cli = subprocess.Popen(command, cwd=ROOT,
                               env=numerate_env(tmp_path / "prefect", own_server=True),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 120
        while len(logged(log)) < 10:
            assert cli.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        servers = [p for p in psutil.Process(cli.pid).children(recursive=True)
                   if "serverd" in " ".join(p.cmdline())]  # fmt: skip
        assert servers, "Prefect's temporary server is not a child of the CLI"
        cli.kill()  # SIGKILL: the CLI can clean nothing up itself
        cli.wait()
        _, alive = psutil.wait_procs(servers, timeout=20)
        assert not alive, f"still running after the CLI was killed: {alive}"
    finally:
        endpoint.kill()
        endpoint.wait()


def test_a_model_that_cannot_be_loaded_offline_is_refused_before_the_run(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    db = tmp_path / "n.duckdb"
    result = runner.invoke(
        app, ["numgen", "run", "--generator", "acme/not-a-model", "--db", str(db)]
    )
    assert "generator 'acme/not-a-model' is not in the Hugging Face cache" in one_error_line(result)
    assert not db.exists()


@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize(
    ("limit", "said"),
    [
        (2, "model 'o': concurrency 4 exceeds the 2 slots of limit '{name}'"),
        (
            None,
            "model 'o': no global concurrency limit named '{name}' (create it: prefect gcl "
            "create '{name}' --limit 4)",
        ),
    ],
)
def test_a_cli_run_checks_the_concurrency_limit_before_it_starts(tmp_path, limit, said):
    """The CLI and the flow share one preflight: a limit too small to hold the model's
    `concurrency` would make the run wait forever; it is one line and exit 2 instead. The
    command that creates a missing one is quoted for the shell (a name may hold a space)."""
    import asyncio
    import uuid

    from prefect import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    name = f"cli {uuid.uuid4().hex[:8]}"

    async def create() -> None:
        async with get_client() as client:
            await client.create_global_concurrency_limit(
                GlobalConcurrencyLimitCreate(name=name, limit=limit)
            )

    if limit is not None:
        asyncio.run(create())
    model = {"name": "o", "model": "m", "base_url": "http://127.0.0.1:9/v1", "concurrency": 4,
             "concurrency_limit": name}  # checked before the endpoint is asked  # fmt: skip
    path = write_config(tmp_path / "s.yaml", [model])
    db = tmp_path / "r.duckdb"
    line = one_error_line(runner.invoke(app, ["run", "--config", str(path), "--db", str(db)]))
    assert said.format(name=name) in line
    assert not db.exists()  # refused before anything was written


# ---------------------------------------------------------------- secrets never leave


def no_secret_anywhere(result, secret, db=None):
    """Neither the output, the database nor Prefect's own files (its database: flow run
    parameters, task runs, artifacts) show `secret`, and no traceback was printed."""
    assert secret not in result.stdout and secret not in result.stderr
    assert "Traceback" not in result.output
    files = [p for p in Path(os.environ["PREFECT_HOME"]).rglob("*") if p.is_file()]
    leaked = [str(p) for p in files if secret.encode(errors="surrogateescape") in p.read_bytes()]
    assert not leaked
    if db is not None and db.exists():
        con = duckdb.connect(str(db), read_only=True)
        try:
            for table in ("runs", "completions", "responses", "run_models"):
                dumped = con.execute(f"SELECT * FROM {table}").fetchall()
                assert secret not in repr(dumped), table
        finally:
            con.close()


def test_a_password_in_the_base_url_is_never_printed_nor_stored(tmp_path, fake_openai):
    password = "url-pa55word"
    url = fake_openai.base_url.replace("http://", f"http://user:{password}@")
    db = tmp_path / "r.duckdb"
    result = runner.invoke(app, ["run", "--model", "fake-model", "--base-url", url,
                                 "--db", str(db), "--format", "json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    basic = "Basic " + base64.b64encode(f"user:{password}".encode()).decode()
    assert set(fake_openai.authorizations) == {basic}  # the endpoint got the password
    no_secret_anywhere(result, password, db)
    con = duckdb.connect(str(db), read_only=True)
    [(stored,)] = con.execute("SELECT DISTINCT base_url FROM completions").fetchall()
    con.close()
    assert stored == fake_openai.base_url.replace("http://", "http://***@")
    gone = f"http://user:{password}@127.0.0.1:9/v1"
    result = runner.invoke(app, ["run", "--model", "m", "--base-url", gone, "--db", str(db)])
    assert "cannot reach model 'm' at http://***@127.0.0.1:9/v1" in one_error_line(result, 3)
    no_secret_anywhere(result, password, db)


@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("sk-wrong-key-with-newline\n", "refused the API key from $SWEEP_KEY: HTTP 401"),
        ("sk-ключ-0123456789", "the API key in $SWEEP_KEY holds a non-ASCII character"),
        # a byte that is no UTF-8 (`SWEEP_KEY=$'sk-\xff...'`): hiding it was a traceback
        ("sk-\udcff-0123456789", "the API key in $SWEEP_KEY holds a non-ASCII character"),
        ("sk-a\nb-0123456789", "the API key in $SWEEP_KEY holds a control character"),
    ],
)
def test_a_bad_key_is_one_line_that_never_shows_it(tmp_path, fake_openai, monkeypatch, key, said):
    fake_openai.api_key = "right-key"
    monkeypatch.setenv("SWEEP_KEY", key)
    path = write_config(tmp_path / "s.yaml", [{"name": "fake", "model": "fake-model",
                        "base_url": fake_openai.base_url, "api_key_env": "SWEEP_KEY"}])  # fmt: skip
    result = runner.invoke(app, ["run", "--config", str(path), "--db", str(tmp_path / "r.db")])
    line = one_error_line(result, code=3 if "refused" in said else 2)
    assert said in line
    for part in key.split():
        no_secret_anywhere(result, part)


@pytest.mark.parametrize("where", ["key", "password"])
def test_a_system_prompt_that_holds_a_credential_is_refused_before_anything_is_sent(
    tmp_path, fake_openai, monkeypatch, where
):
    """A key pasted into the prompt was sent with every request, stored with every answer and
    shown in the Prefect flow run's parameters (which only redact the base URL)."""
    secret = "sk-pasted-0123456789"
    monkeypatch.setenv("SWEEP_KEY", secret)
    model = {"name": "fake", "model": "fake-model", "system_prompt": f"Use {secret} to answer."}
    if where == "key":
        model |= {"base_url": fake_openai.base_url, "api_key_env": "SWEEP_KEY"}
    else:
        model["base_url"] = fake_openai.base_url.replace("http://", f"http://me:{secret}@")
    db = tmp_path / "r.db"
    path = write_config(tmp_path / "s.yaml", [model])
    result = runner.invoke(app, ["run", "--config", str(path), "--db", str(db)])
    assert "model 'fake': system_prompt holds an API key or password" in one_error_line(result, 2)
    assert fake_openai.requests == [] and not db.exists()
    no_secret_anywhere(result, secret)


def test_a_litellm_proxy_with_a_wrong_key_says_the_key_was_refused(tmp_path, fake_openai,
                                                                   monkeypatch):  # fmt: skip
    fake_openai.api_key = "sk-master"
    fake_openai.mimic_litellm()
    monkeypatch.setenv("PROXY_KEY", "sk-not-the-master-key")
    path = write_config(tmp_path / "s.yaml", [{"name": "proxy", "model": "fake-model",
                        "base_url": fake_openai.base_url, "api_key_env": "PROXY_KEY"}])  # fmt: skip
    result = runner.invoke(app, ["run", "--config", str(path), "--db", str(tmp_path / "r.db")])
    line = one_error_line(result, code=3)
    assert "refused the API key from $PROXY_KEY: HTTP 400: Authentication Error" in line
    assert "No connected db." not in line
    no_secret_anywhere(result, "sk-not-the-master-key")


def test_a_key_the_server_quotes_is_not_stored(tmp_path, fake_openai, monkeypatch):
    secret = "sk-quoted-by-the-server-0123"
    monkeypatch.setenv("QUOTED_KEY", secret)
    fake_openai.responder = lambda body: Reply(content=f"Key {secret} seen.\nAnswer: 7")
    db = tmp_path / "r.duckdb"
    args = ["run", "--model", "fake-model", "--base-url", fake_openai.base_url,
            "--api-key-env", "QUOTED_KEY", "--db", str(db), "--format", "json"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    no_secret_anywhere(result, secret, db)
    con = duckdb.connect(str(db), read_only=True)
    texts = {text for (text,) in con.execute("SELECT raw_text FROM responses").fetchall()}
    con.close()
    assert texts == {"Key *** seen.\nAnswer: 7"}


# ------------------------------------------- hostile input: one line, exit 2, nothing written

DIGITS = "1" * 5000
DEEP_JSON = "[" * 5000 + "]" * 5000
FOLDER, FIFO, LINK = object(), object(), "link:"  # a file's content, a folder, a pipe, a link


def _plant(tmp_path, files):
    for name, content in files.items():
        path = tmp_path / name
        if content is FOLDER:
            path.mkdir()
        elif content is FIFO:  # never a device: an older numerate replaced /dev/null
            os.mkfifo(path)
        elif isinstance(content, str) and content.startswith(LINK):
            path.symlink_to(content.removeprefix(LINK))
        else:
            path.write_bytes(content if isinstance(content, bytes) else content.encode())


def _contents(tmp_path):
    """Every path under tmp_path with its bytes (links and folders by kind)."""
    found = {}
    for path in sorted(tmp_path.rglob("*")):
        if path.relative_to(tmp_path).parts[0] == "prefect":
            continue
        if path.is_fifo():
            found[path] = ("fifo",)
        elif path.is_symlink():
            found[path] = ("link", os.readlink(path))
        elif path.is_dir():
            found[path] = ("folder",)
        else:
            found[path] = path.read_bytes()
    return found


HOSTILE = [
    # output paths: no name, a folder, a device, a link loop, a "folder" that is a file, a
    # format the command does not write, a link planted at the old temporary name
    ({}, Console(["generate", "objects", "--out", ""]), "'--out': '': give a path"),
    ({"taken": FOLDER}, ["generate", "objects", "--out", "taken"], "--out taken: a folder"),
    ({"taken": FOLDER}, ["grade", "none.jsonl", "--out", "taken"], "--out taken: a folder"),
    ({"taken.png": FOLDER}, ["plot", "--out", "taken.png", "--db", "none.duckdb"],
     "--out taken.png: a folder"),
    ({"fifo": FIFO}, ["generate", "objects", "--out", "fifo"], "not a regular file"),
    ({"loop": LINK + "loop"}, ["generate", "objects", "--out", "loop"], "leads nowhere"),
    ({"file.txt": "x"}, ["numgen", "prompts", "--out", "file.txt/p.jsonl"],
     "file.txt is a file, not a folder"),
    ({"r.csv": "target,generated\n3,3\n"},
     ["numgen", "score", "--responses", "r.csv", "--heatmap", "h.svg"],
     "--heatmap h.svg: no .svg output; give a .png file name"),
    ({"r.csv": "target,generated\n3,3\n"},
     ["numgen", "score", "--responses", "r.csv", "--heatmap", "heatmap"], "no suffix"),
    ({"r.csv": "target,generated\n3,3\n", "h.png": FOLDER},
     ["numgen", "score", "--responses", "r.csv", "--heatmap", "h.png"], "a folder"),
    ({}, ["numgen", "report", "--heatmap", "h.jpg", "--db", "none.duckdb"], "no .jpg output"),
    ({}, ["plot", "--out", "p.svg", "--db", "none.duckdb"], "no .svg output"),
    ({"victim": "keep", "c.jsonl.partial": LINK + "victim", "c.jsonl": FOLDER},
     ["generate", "objects", "--out", "c.jsonl"], "a folder"),
    # values the command cannot use
    ({"e.duckdb": ""}, ["report", "--db", "e.duckdb"], "e.duckdb: an empty file, not a DuckDB"),
    ({"e.duckdb": ""}, ["run", "--model", "baseline:oracle", "--db", "e.duckdb"],
     "cannot open results database e.duckdb: an empty file, not a DuckDB database"),
    ({}, Console(["compare", "latest", "previous", "--alpha", "1e-400", "--db", "x.duckdb"]),
     "'--alpha': 1e-400: need 0 < alpha < 1 (too small to tell from 0)"),  # not "0.0"
    ({}, Console(["compare", "latest", "previous", "--alpha", "nan", "--db", "x.duckdb"]),
     "'--alpha': nan: need 0 < alpha < 1"),
    ({}, ["numgen", "run", "--device", "tpu", "--db", "x.duckdb"], "--device 'tpu'"),
    ({}, ["numgen", "run", "--device", "cuda:x", "--db", "x.duckdb"], "cuda, cuda:N or mps"),
    ({}, ["numgen", "calibrate", "--detector", "blobs", "--device", "xla", "--db", "x.duckdb"],
     "--device 'xla'"),
    ({}, ["numgen", "run", "--dtype", "int8", "--db", "x.duckdb"], "--dtype 'int8'"),
    # input beyond the bounds: digits, depth, size, in every place input is parsed
    ({}, ["generate", "objects", "--set", f"length={DIGITS}"],
     "--set length: a whole number of 5,000 digits"),
    ({}, ["generate", "objects", "--set", f"length=-{DIGITS[:101]}"], "of 101 digits"),
    ({}, ["generate", "objects", "--set", f"length={DEEP_JSON}"],
     "--set length: nested more than 64 levels deep"),
    ({}, ["generate", "objects", "--set", "length=" + '{"a":' * 70 + "1" + "}" * 70],
     "nested more than 64 levels deep"),
    ({}, ["generate", "objects", "--set", "x" * 100_000], "--set expects key=value"),
    ({"a.jsonl": f'\n{{"manifold": "objects", "seed": {DIGITS}}}\n'},
     ["grade", "a.jsonl"], "a.jsonl line 2: a whole number of 5,000 digits"),
    ({"a.jsonl": f'{{"manifold": {DIGITS}}}\n'}, ["grade", "a.jsonl"], "line 1: a whole number"),
    ({"a.jsonl": DEEP_JSON + "\n"}, ["grade", "a.jsonl"], "line 1: nested more than 64 levels"),
    ({"a.jsonl": '{"a":' * 100_000 + "}" * 100_000}, ["grade", "a.jsonl"], "nested more than"),
    ({"s.yaml": "name: x\nseed: " + DIGITS}, ["run", "--config", "s.yaml", "--db", "x.duckdb"],
     "s.yaml (line 2, column 7): not valid YAML: a whole number of more than 100 digits"),
    ({"s.yaml": "name: x\nseed: 0x" + "f" * 300},  # its value cut short in the line
     ["run", "--config", "s.yaml", "--db", "x.duckdb"], "…' is no number as written: write"),
    ({"s.yaml": "a: " + "[" * 100_000}, ["run", "--config", "s.yaml", "--db", "x.duckdb"],
     "(line 1, column 67): not valid YAML: nested more than 64 levels deep"),
    ({"s.yaml": "a:\n" + "".join(" " * i + "- \n" for i in range(100))},
     ["run", "--config", "s.yaml", "--db", "x.duckdb"], "nested more than 64 levels deep"),
    ({"s.yaml": "name: x\nwhen: 2024-13-45\n"}, ["run", "--config", "s.yaml", "--db", "x.duckdb"],
     "not valid YAML: month must be in 1..12"),
    ({"s.yaml": "a: [" + "1, " * 1_500_000 + "1]"},
     ["run", "--config", "s.yaml", "--db", "x.duckdb"], "larger than 4,194,304 bytes"),
    ({"n.yaml": "count: " + DIGITS}, ["numgen", "run", "--config", "n.yaml", "--db", "x.duckdb"],
     "numgen config n.yaml (line 1, column 8): not valid YAML: a whole number"),
    ({"n.yaml": "prompts: " + "[" * 1000}, ["numgen", "run", "--config", "n.yaml",
     "--db", "x.duckdb"], "nested more than 64 levels deep"),
    ({"r.csv": f"target,generated\n{DIGITS},3\n"}, ["numgen", "score", "--responses", "r.csv"],
     "r.csv line 2: target: a whole number of 5,000 digits"),
    ({"r.csv": f"target,generated\n3,-{DIGITS}\n"}, ["numgen", "score", "--responses", "r.csv"],
     "r.csv line 2: generated: a whole number of 5,000 digits"),
    ({"r.csv": "target,generated\n" + "9" * 200_000 + ",3\n"},
     ["numgen", "score", "--responses", "r.csv"], "field larger than field limit"),
]  # fmt: skip


@pytest.mark.parametrize(("files", "arguments", "message"), HOSTILE)
def test_hostile_input_is_one_line_exit_2_and_writes_nothing(tmp_path, files, arguments, message):
    """Output paths, unknown values and input beyond the bounds of kernel.inputs: one `error:`
    line, exit 2, nothing on stdout, no file created or changed (a link planted at a temporary
    name included)."""
    _plant(tmp_path, files)
    before = _contents(tmp_path)
    code, stdout, stderr = refusal(arguments, tmp_path)
    assert code == 2, stderr[-2000:]
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr[-2000:]
    assert message in lines[0], lines[0]
    assert len(lines[0]) < 400  # the input is named, not repeated
    assert stdout == ""
    assert _contents(tmp_path) == before


DUCKDB_VALUES = [
    "INTERVAL 1 DAY", "union_value(a := 1)::UNION(a INTEGER, b VARCHAR)", "MAP([1], ['x'])",
    "{'a': 1, 'b': [2]}", "[1, 2]", "[[1], NULL]", "[1, 2]::INTEGER[2]", "'ab'::BLOB",
    "170141183460469231731687303715884105727::HUGEINT", "1::UHUGEINT", "1::VARINT",
    "'12:00:00+02'::TIMETZ", "'a'::ENUM('a', 'b')", "'0101'::BIT",
    "'d9d3c1c4-3b0c-4f87-9c5e-5a7e6c3f1b2a'::UUID", "12345678901234567890.5::DECIMAL(38, 1)",
    "'infinity'::TIMESTAMP", "'-infinity'::DATE", "'2024-01-01 12:00:00+00'::TIMESTAMPTZ",
    "'{\"a\": [1]}'::JSON", "'nan'::DOUBLE", "NULL",
]  # fmt: skip


@pytest.mark.parametrize("output", ["table", "csv", "json", "markdown"])
def test_db_prints_every_duckdb_type_in_every_format(tmp_path, output):
    path = tmp_path / "x.duckdb"
    duckdb.connect(str(path)).close()
    sql = "SELECT 1 AS a, 2 AS a, " + ", ".join(
        f"{value} AS c{i}" for i, value in enumerate(DUCKDB_VALUES)
    )
    result = runner.invoke(app, ["db", str(path), sql, "--format", output])
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    if output == "table":  # its cells are cut to the terminal's width
        return
    for shown in ("1 day", "{1=x}", "0101", "d9d3c1c4", "infinity", "12345678901234567890.5"):
        assert shown in result.stdout, (shown, result.stdout)


def _wait_until_the_query_runs(process, path):
    """Until the process has used half a CPU second with the database open: nothing it does
    between opening the file and running the query takes that long, so the query runs. (A
    fixed 5 CPU seconds, more than starting ever took, was spent on every run.) Fails when
    the process ends first or the query is not seen running within 90 s."""
    opened_at: list[float] = []

    def query_runs() -> bool:
        assert process.poll() is None, "the command ended before its query ran"
        if not opened_at:
            if holds_open(process.pid, path):
                opened_at.append(cpu_seconds(process.pid))
            return False
        return cpu_seconds(process.pid) >= opened_at[0] + 0.5

    wait_until(query_runs, 90, "the query runs (the database open, half a CPU second spent)")


STUCK_IN_C = """
import hashlib, sys, threading
from numerate.cli.process import PROCESS
PROCESS.stop_within()
PROCESS.on_hard_stop.append(threading.Event().wait)  # a cleanup that never ends: bounded
PROCESS.on_hard_stop.append(lambda: print("recorded", flush=True))  # a run recorded as stopped
print("ready", flush=True)
hashlib.pbkdf2_hmac("sha256", b"p", b"s", 10**9)  # minutes in C, no Python code in between
"""


@pytest.mark.parametrize(("stop", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_a_command_stuck_in_one_long_call_in_c(stop, code):
    """Python runs a signal handler only between two steps of Python code: a command inside
    one long C call (compressing a large result took 15 s) still ends within 5 s."""
    stuck = subprocess.Popen([sys.executable, "-c", STUCK_IN_C], cwd=ROOT, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert stuck.stdout.readline().strip() == "ready"
        ready = cpu_seconds(stuck.pid)  # in the C call once it spends CPU after "ready"
        wait_until(lambda: cpu_seconds(stuck.pid) > ready + 0.1, what="the long call runs")
        stuck.send_signal(stop)
        sent = time.monotonic()
        out, err = stuck.communicate(timeout=30)
    finally:
        stuck.kill()
    assert time.monotonic() - sent < 5.5  # 3.8 s, then 1.2 s for every cleanup at once
    how = "terminated" if code == 143 else "interrupted"  # one line (it was `error:` first)
    assert stuck.returncode == code, err
    assert err.splitlines() == [f"{how}: still busy 3.8 s after the signal: stopped now"], err
    assert out.strip() == "recorded"  # the cleanups ran, the one that hangs did not hold it


def _servers_of(prefect_home):
    """Pids of Prefect servers running with `prefect_home` (their environment says so)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            args = (proc / "cmdline").read_bytes()
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if b"serverd" in args and f"PREFECT_HOME={prefect_home}".encode() in environ:
            found.append(int(proc.name))
    return found


STARTING = {
    "run": (["run", "--model", "baseline:oracle"], "the run"),
    "numgen": (["numgen", "run", "--count", "1"], "the NumGen run"),
}
"""A command that starts a run, and how its stop before the run began names the run."""


SLOW_SERVER_START = """
import os, time
if b"serverd" in open("/proc/self/cmdline", "rb").read():  # the server, on a slow machine:
    parent, until = os.getppid(), time.monotonic() + 30  # it starts in 30 s, unless the
    while time.monotonic() < until and os.getppid() == parent:  # command that started it is
        time.sleep(0.05)  # gone (then it ends as it starts: it watches the command)
"""
"""A sitecustomize for the tests that need the temporary server to start slowly: they
signal the command while it waits for it, whatever the speed of this machine."""


def _run_starting_its_server(tmp_path, home, which="run", slow=False):
    """A `run` (or `numgen run`) of its own process group, once it says it starts Prefect's
    temporary server (its standard error read up to that line); `slow`: a server that takes
    30 s to start (SLOW_SERVER_START)."""
    command = [sys.executable, "-m", "numerate.cli", *STARTING[which][0],
               "--db", str(tmp_path / "r.duckdb")]  # fmt: skip
    env = numerate_env(home, own_server=True)
    if slow:
        (tmp_path / "slow").mkdir()
        (tmp_path / "slow" / "sitecustomize.py").write_text(SLOW_SERVER_START)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path / "slow"),
                                                          env.get("PYTHONPATH")]))  # fmt: skip
    started = subprocess.Popen(command, cwd=ROOT, env=env, text=True, stderr=subprocess.PIPE,
                               start_new_session=True)  # fmt: skip
    for line in started.stderr:
        if line.startswith("starting Prefect's temporary server"):
            break
    return started


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
@pytest.mark.parametrize(("which", "after_s"), [("run", 0.2), ("run", 3.0), ("numgen", 1.0)])
def test_ctrl_c_to_the_process_group_while_the_temporary_server_starts(tmp_path, which, after_s):
    """Ctrl-C in a terminal signals the whole process group: the temporary server, still
    importing, printed click's `Aborted!` (or a KeyboardInterrupt traceback), and the command
    waited in one uninterruptible join on the thread starting it, so that the signal (taken
    by another thread) was handled only by the 5 s deadline: `stopped now`, the run left
    `running`. Now: `interrupted` within seconds, saying the run had not started (corpus J:
    a bare `interrupted`), nothing else said, no server left."""
    home = tmp_path / "prefect"
    started = _run_starting_its_server(tmp_path, home, which, slow=True)
    try:
        time.sleep(after_s)  # in the imports the wait does meanwhile, or in the wait itself
        os.killpg(started.pid, signal.SIGINT)
        sent = time.monotonic()
        _, stderr = started.communicate(timeout=30)
    finally:
        started.kill()
    assert time.monotonic() - sent < 5, stderr
    assert started.returncode == 130, stderr
    db = tmp_path / "r.duckdb"  # made for the run, then left empty ("run ... again to resume")
    said = f"interrupted: {STARTING[which][1]} had not started; nothing was stored"
    assert stderr.strip().splitlines()[-1] in (said, f"{said}, and {db} was not made"), stderr
    assert not db.exists()
    assert not any(word in stderr for word in ("Aborted", "Traceback", "stopped now")), stderr
    deadline = time.monotonic() + 10  # the server watches the command, its parent
    while _servers_of(home) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _servers_of(home)


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")
def test_a_command_killed_while_its_temporary_server_starts_leaves_no_server(tmp_path):
    """A watchdog started once the server answered (about 8 s) let a command stopped in the
    seconds before, by a signal or SIGKILL, leave the server running (seen once in 8 tries
    of Ctrl-C at 3 s). The server watches the command from its first moment now, and a
    command that ended but is not yet reaped (a zombie, as here until `wait`) is gone: the
    server has another parent at once."""
    home = tmp_path / "prefect"
    started = _run_starting_its_server(tmp_path, home)
    try:
        deadline = time.monotonic() + 30
        while not _servers_of(home) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _servers_of(home), "no server was started"
        started.kill()  # the server is starting, not yet answering
        deadline = time.monotonic() + 15
        while _servers_of(home) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _servers_of(home)
    finally:
        started.kill()
        started.wait()
        for pid in _servers_of(home):
            os.kill(pid, signal.SIGKILL)


ENDS_THEN_INTERRUPTED = """
import sys
import numerate.flows.sweep as flows
real = flows.sweep
async def ends_then_interrupted(*args, **kwargs):
    await real(*args, **kwargs)
    raise KeyboardInterrupt  # Ctrl-C as the run ends: stored `finished`
flows.sweep = ends_then_interrupted
from numerate.cli import main
sys.argv = ["numerate", "run", "--model", "baseline:oracle", "--db", sys.argv[1]]
main()
"""


SIGNALLED_AS_IT_SHOWS = """
import os, signal, sys, time
import numerate.cli.{module} as command
def signalled(*args, **kwargs):
    os.kill(os.getpid(), signal.{signal})  # the run is stored `finished`: its output follows
    time.sleep(2)
command.{shows} = signalled
from numerate.cli import main
sys.argv = ["numerate", {command}, "--db", sys.argv[1]]
main()
"""
"""A command whose run is stored, signalled as it shows it (its report or table)."""

TERMINATED_AS_IT_REPORTS = SIGNALLED_AS_IT_SHOWS.format(
    module="run", shows="print_report", signal="SIGTERM",
    command='"run", "--model", "baseline:oracle"',
)  # fmt: skip


def test_a_sigterm_as_a_stored_run_is_reported_names_the_run(tmp_path):
    """Corpus H: a bare `terminated`, no report, for a run stored as finished."""
    done, run_id = _stopped_as_it_ends(tmp_path, TERMINATED_AS_IT_REPORTS, "runs")
    assert done.returncode == 143, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"terminated: run {run_id} is stored; numerate report --run {run_id} shows it"
    )


NUMGEN_INTERRUPTED_AS_IT_SHOWS = SIGNALLED_AS_IT_SHOWS.format(
    module="numgen", shows="_show_run", signal="SIGINT",
    command='"numgen", "run", "--count", "1"',
)  # fmt: skip


def test_ctrl_c_as_a_stored_numgen_run_is_shown_names_the_run(tmp_path):
    """Corpus I: a bare `interrupted`, no table, for a NumGen run stored as finished."""
    done, run_id = _stopped_as_it_ends(tmp_path, NUMGEN_INTERRUPTED_AS_IT_SHOWS, "numgen_runs")
    assert done.returncode == 130, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"interrupted: NumGen run {run_id} is stored; numerate numgen report shows it"
    )


NUMGEN_TERMINATED_IN_PREFECT = """
import sys
from prefect.exceptions import TerminationSignal
import numerate.flows.numgen as flows
async def terminated(*args, **kwargs):
    raise TerminationSignal(signal=15)  # Prefect's SIGTERM handler, during the flow
flows.numgen = terminated
from numerate.cli import main
sys.argv = ["numerate", "numgen", "run", "--count", "1", "--db", sys.argv[1]]
main()
"""


def test_a_sigterm_prefect_takes_during_a_numgen_run_is_one_line_and_143(tmp_path):
    """Corpus J: Prefect's TerminationSignal traceback, exit 1, no `terminated` line."""
    env = {**numerate_env(tmp_path / "prefect"), "NUMERATE_SERVER": "temporary"}
    done = subprocess.run([sys.executable, "-c", NUMGEN_TERMINATED_IN_PREFECT,
                           str(tmp_path / "r.duckdb")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=180)  # fmt: skip
    assert done.returncode == 143 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("terminated: "), done.stderr


def _stopped_as_it_ends(tmp_path, script, runs_table):
    """`script` run with a database path; what it printed, and the id of its one run, which
    is stored as finished."""
    db = tmp_path / "r.duckdb"
    env = {**numerate_env(tmp_path / "prefect"), "NUMERATE_SERVER": "temporary"}
    done = subprocess.run([sys.executable, "-c", script, str(db)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=180)  # fmt: skip
    (run_id, status), = duckdb.connect(str(db), read_only=True).sql(
        f"SELECT run_id, status FROM {runs_table}").fetchall()  # fmt: skip
    assert status == "finished", done.stderr
    return done, run_id


SIGNAL_SWALLOWED = """
import os, signal, sys, time
import numerate.flows.sweep as flows
real = flows.sweep
async def swallowed(*args, **kwargs):
    ended = await real(*args, **kwargs)
    signal.signal(signal.SIGTERM, lambda *_: None)  # as a library's handler that takes it
    os.kill(os.getpid(), signal.SIGTERM)  # (asyncio's transport took Prefect's signal)
    time.sleep(0.2)  # the signal thread sees it
    return ended
flows.sweep = swallowed
from numerate.cli import main
sys.argv = ["numerate", "run", "--model", "baseline:oracle", "--db", sys.argv[1]]
main()
"""


@pytest.mark.parametrize(
    ("script", "said", "code"),
    [("ENDS_THEN_INTERRUPTED", "interrupted", 130), ("SIGNAL_SWALLOWED", "terminated", 143)],
)
def test_a_signal_as_a_run_ends_says_it_ended_not_to_resume_it(tmp_path, script, said, code):
    """Before: `interrupted: ... run the same command again to resume` for a run stored as
    finished; the advice then resumed an older interrupted run of the same sweep. Corpus L: a
    SIGTERM as the flow started went to asyncio's transport, which logged a TerminationSignal
    traceback and went on: the run finished, its report was printed, exit 0."""
    done, run_id = _stopped_as_it_ends(tmp_path, globals()[script], "runs")
    assert done.returncode == code, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"{said}: run {run_id} had ended as the signal came; its results are stored "
        f"(numerate report --run {run_id} shows them)"
    )


TERMINATED_IN_A_CALLBACK = """
import asyncio, os, signal, sys, time
import numerate.flows.sweep as flows
real = flows.open_run
def terminated():  # SIGTERM while the loop runs a callback: Prefect's handler raises there
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(1)
async def open_run(*args, **kwargs):
    run_id = await real(*args, **kwargs)
    asyncio.get_running_loop().call_soon(terminated)
    await asyncio.sleep(0.5)
    return run_id
flows.open_run = open_run
from numerate.cli import main
sys.argv = ["numerate", "run", "--model", "baseline:oracle", "--db", sys.argv[1]]
main()
"""


def test_a_sigterm_raised_in_a_callback_of_the_event_loop_stops_the_run(tmp_path):
    """Prefect's SIGTERM handler raises its TerminationSignal wherever the main thread is;
    in a callback of the event loop, asyncio logged it and the run went on to its end
    (`terminated: run ... had ended as the signal came`)."""
    env = {**numerate_env(tmp_path / "prefect"), "NUMERATE_SERVER": "temporary"}
    done = subprocess.run([sys.executable, "-c", TERMINATED_IN_A_CALLBACK,
                           str(tmp_path / "r.duckdb")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=180)  # fmt: skip
    assert done.returncode == 143, done.stderr
    assert "Traceback" not in done.stderr and "ERROR" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "terminated: every answer received so far is stored; run the same command again to resume"
    )
    status = duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True).sql(
        "SELECT status FROM runs").fetchall()  # fmt: skip
    assert status == [("interrupted",)]


def test_the_first_sigterm_raised_in_a_callback_is_the_stop_and_its_copies_are_not(monkeypatch):
    """The stop is recorded as SIGTERM (143 at once, not at the deadline); a copy that comes
    while the stop unwinds (GNU `timeout` sends two) must not abandon asyncio's teardown,
    where the other batches journal what they kept."""
    import asyncio

    from prefect.exceptions import TerminationSignal

    from numerate.cli import running
    from numerate.cli.process import Process

    process = Process()
    monkeypatch.setattr(running, "PROCESS", process)
    handler = running._StopInACallback()
    logged = []
    loop = asyncio.new_event_loop()
    monkeypatch.setattr(loop, "default_exception_handler", logged.append)
    try:
        first = {"message": "Exception in callback", "exception": TerminationSignal(signal=15)}
        with pytest.raises(KeyboardInterrupt):
            handler(loop, first)
        assert process.signals == [signal.SIGTERM] and process.stop_code() == 143
        copy = {"message": "Exception in callback", "exception": TerminationSignal(signal=15)}
        handler(loop, copy)  # logged as asyncio would, not raised
        other = {"message": "Exception in callback", "exception": ValueError("x")}
        handler(loop, other)
        assert logged == [copy, other]
    finally:
        loop.close()


STOPPED_BEFORE_ITS_RUN = """
import sys
import numerate.flows.sweep as flows
async def stopped(*args, **kwargs):
    raise KeyboardInterrupt  # as the flow starts, before it begins (or resumes) a run
flows.sweep = stopped
from numerate.cli import main
sys.argv = ["numerate", "run", "--model", "baseline:oracle", "--db", sys.argv[1], "--fresh"]
main()
"""


def test_a_stop_before_the_run_began_in_a_database_of_other_runs_says_nothing_was_stored(
    tmp_path,
):
    """Corpus L: `terminated: every answer received so far is stored; run the same command
    again to resume`, when the flow had begun no run (the database held earlier runs)."""
    _stopped_as_it_ends(tmp_path, ENDS_THEN_INTERRUPTED, "runs")  # a run stored before
    env = {**numerate_env(tmp_path / "prefect"), "NUMERATE_SERVER": "temporary"}
    stopped = subprocess.run([sys.executable, "-c", STOPPED_BEFORE_ITS_RUN,
                              str(tmp_path / "r.duckdb")], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=180)  # fmt: skip
    assert stopped.returncode == 130, stopped.stderr
    assert stopped.stderr.strip().splitlines()[-1] == (
        "interrupted: the run had not started; nothing was stored"
    )


STOPPED_AT = """
import importlib, signal, sys
module, name = sys.argv[1].rsplit(".", 1)
def stop(*args, **kwargs):
    signal.raise_signal(signal.SIGINT)  # Ctrl-C as it is called
setattr(importlib.import_module(module), name, stop)
from numerate.cli import main
sys.argv = ["numerate", *sys.argv[2:]]
main()
"""


@pytest.mark.parametrize(
    ("where", "command", "said"),
    [("numerate.cli.run.run_flow", ["run", "--model", "baseline:oracle", "--fresh"],
      "the run had not started; nothing was stored"),
     ("numerate.cli.ingest.results_db", ["ingest", "{tmp}"],
      "no run was loaded; run the same command again to load them"),
     ("numerate.results.regrade.regrade_run", ["regrade", "--run", "latest"],
      "the answers graded again so far are stored; run the same command again to grade the "
      "rest")],
    ids=["run", "ingest", "regrade"],
)  # fmt: skip
def test_a_stop_in_a_command_s_first_seconds_says_what_it_left(tmp_path, where, command, said):
    """A hostile pass: Ctrl-C 1.5 to 3 s into `ingest`, `regrade` or `run` (a run in the
    imports of its flow, after its checks) said a bare `interrupted`, nothing of what was
    kept or how to go on."""
    db = tmp_path / "r.duckdb"
    if command[0] == "regrade":  # a run to grade again
        config = write_config(tmp_path / "s.yaml", [{"name": "o", "model": "baseline:oracle"}])
        assert runner.invoke(app, ["run", "--config", str(config), "--db", str(db)]).exit_code == 0
    args = [a.format(tmp=tmp_path) for a in command]
    stopped = subprocess.run(
        [sys.executable, "-c", STOPPED_AT, where, *args, "--db", str(db)], cwd=ROOT,
        env={**numerate_env(tmp_path / "prefect"), "NUMERATE_SERVER": "temporary"},
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert stopped.returncode == 130, stopped.stderr
    assert stopped.stderr.strip().splitlines()[-1] == f"interrupted: {said}", stopped.stderr


NUMGEN_ENDS_THEN_TERMINATED = """
import os, signal, sys, time
import numerate.flows.numgen as flows
real = flows.numgen
async def ends_then_terminated(*args, **kwargs):
    result = await real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGTERM)  # as the run ends: stored `finished`
    time.sleep(2)
    return result
flows.numgen = ends_then_terminated
from numerate.cli import main
sys.argv = ["numerate", "numgen", "run", "--count", "1", "--db", sys.argv[1]]
main()
"""


def test_a_sigterm_as_a_numgen_run_ends_says_it_ended_not_to_run_it_again(tmp_path):
    """Before: `terminated: the images made so far are kept; run the same command again`
    for a NumGen run stored as finished (the same command makes a new run)."""
    done, run_id = _stopped_as_it_ends(tmp_path, NUMGEN_ENDS_THEN_TERMINATED, "numgen_runs")
    assert done.returncode == 143, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"terminated: NumGen run {run_id} had ended as the signal came; its results are stored "
        "(numerate numgen report shows them)"
    )


RELAYED = """
import os, signal, sys, time
from numerate.cli.process import PROCESS
PROCESS.stop_within()
ours = signal.getsignal(signal.SIGTERM)
def prefects(signum, frame):  # as Prefect's flow engine does: the signal, sent again to the
    signal.signal(signum, ours)  # handler it replaced, while its own exception unwinds
    os.kill(os.getpid(), signum)
    time.sleep(0.3)
signal.signal(signal.SIGTERM, prefects)
try:
    print("ready", flush=True)
    while True:
        time.sleep(0.01)
except KeyboardInterrupt:
    time.sleep(0.5)  # storing what was received
    print("stopped cleanly", flush=True)
    sys.exit(PROCESS.stop_code())
"""


def test_a_sigterm_relayed_by_prefect_is_not_taken_for_a_second_one():
    """During a flow, Prefect's SIGTERM handler sends the signal again to the one it replaced:
    counted as the user's second signal, it ended a run at once, with no line said and the
    run left `running`."""
    relayed = subprocess.Popen([sys.executable, "-c", RELAYED], cwd=ROOT, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert relayed.stdout.readline().strip() == "ready"
        relayed.send_signal(signal.SIGTERM)
        out, err = relayed.communicate(timeout=30)
    finally:
        relayed.kill()
    assert relayed.returncode == 143 and out.strip() == "stopped cleanly", (out, err)


LOST_IN_A_CALLBACK = """
import os, sys, time, weakref
from numerate.cli.process import PROCESS
PROCESS.stop_within()
class Thing:
    pass
sent = []
def callback(ref):  # as importlib's module lock callback: an exception raised here is lost
    if not sent and time.monotonic() > start + 0.3:
        sent.append(time.monotonic())
        os.kill(os.getpid(), int(sys.argv[1]))  # the signal comes, and is handled, in here
        while time.monotonic() < sent[0] + 0.01:
            pass
start = time.monotonic()
try:
    while True:
        thing = Thing()
        ref = weakref.ref(thing, callback)
        del thing
except KeyboardInterrupt:
    print(f"stopped cleanly in {time.monotonic() - sent[0]:.3f} s", flush=True)
    sys.exit(PROCESS.stop_code())
"""


@pytest.mark.parametrize(("stop", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_that_comes_during_a_weakref_callback_still_stops_the_command(stop, code):
    """Python drops a KeyboardInterrupt raised in a weakref callback ("Exception ignored"):
    a Ctrl-C that came while importlib ran one left a command to the 5 s deadline (`stopped
    now`, a flaky CI failure); the interruption is raised again, so it stops as any other."""
    done = subprocess.run([sys.executable, "-c", LOST_IN_A_CALLBACK, str(int(stop))], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stdout[:15]) == (code, "stopped cleanly"), done.stderr
    assert float(done.stdout.split()[-2]) < 1, done.stdout
    assert "Exception ignored" not in done.stderr


CLEANING_UP = """
import sys, time
from numerate.cli.process import PROCESS
PROCESS.stop_within()
try:
    print("ready", flush=True)
    while True:
        time.sleep(0.01)
except KeyboardInterrupt:
    print("cleaning up", flush=True)
    time.sleep(3)  # the second signal comes here
    print("cleaned", flush=True)
"""


def test_a_second_signal_ends_the_command_at_once_and_says_so():
    """Corpus I: a command that died at once (exit 130 within 0.02 s) said nothing, and its
    run was left `running` with no word of why."""
    busy = subprocess.Popen([sys.executable, "-c", CLEANING_UP], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert busy.stdout.readline().strip() == "ready"
        busy.send_signal(signal.SIGINT)
        assert busy.stdout.readline().strip() == "cleaning up"
        time.sleep(SAME_SIGNAL_S + 0.2)  # a copy of the first comes sooner (see below)
        busy.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _, err = busy.communicate(timeout=30)
    finally:
        busy.kill()
    assert busy.returncode == 130 and time.monotonic() - sent < 1
    assert err == "interrupted: stopped at once by a second signal\n"


LEAVING_WHILE_A_THREAD_DRAINS = """
import threading, time
from numerate.cli.process import PROCESS
PROCESS.start()
threading.Thread(target=time.sleep, args=(20,)).start()  # a worker draining at exit
print("leaving", flush=True)
PROCESS.leave(0)  # the work is done: Python waits for the thread before it exits
"""


@pytest.mark.parametrize(
    ("stop", "code", "how"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")],
)
def test_a_signal_while_the_command_leaves_ends_it_at_once_and_says_so(stop, code, how):
    """Ctrl-C while the exit waits for Prefect's workers to drain: the exit went on (the
    interruption was lost inside Python's own shutdown) and ended with 0, saying nothing."""
    leaving = subprocess.Popen(
        [sys.executable, "-c", LEAVING_WHILE_A_THREAD_DRAINS], cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert leaving.stdout.readline().strip() == "leaving"
        time.sleep(0.5)  # in the wait for the thread (it sleeps 20 s)
        leaving.send_signal(stop)
        sent = time.monotonic()
        _, err = leaving.communicate(timeout=30)
    finally:
        leaving.kill()
    assert leaving.returncode == code and time.monotonic() - sent < 2, err
    assert err == f"{how}: stopped at once as it ended\n"


AFTER_PREFECT_S_SIGTERM = """
import os, signal, time
from numerate.cli.process import PROCESS
PROCESS.stop_within()
PROCESS.came_as(signal.SIGTERM)  # Prefect's handler took it (its TerminationSignal)
time.sleep(1.5)
os.kill(os.getpid(), signal.SIGINT)  # the user's second one
time.sleep(5)
"""


def test_a_second_signal_after_one_another_handler_took_ends_the_command_at_once():
    """A signal Prefect's handler took is the first one: a second signal (here during the
    stop's own recording) raised IndexError, and the stop was neither recorded nor said."""
    done = subprocess.run([sys.executable, "-c", AFTER_PREFECT_S_SIGTERM], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert (done.returncode, done.stderr) == (
        130,
        "interrupted: stopped at once by a second signal\n",
    ), done.stderr


def test_a_copy_of_the_first_signal_lets_the_command_stop_as_it_does():
    """Corpus I #5, J: `timeout -s INT` sends its signal to the command and then to its
    process group; when the copy came after Python had handled the first, the command
    ended at once (`stopped at once by a second signal`) with its run left unrecorded."""
    busy = subprocess.Popen([sys.executable, "-c", CLEANING_UP], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        assert busy.stdout.readline().strip() == "ready"
        busy.send_signal(signal.SIGINT)
        assert busy.stdout.readline().strip() == "cleaning up"  # the first is handled
        busy.send_signal(signal.SIGINT)  # the copy: within SAME_SIGNAL_S
        out, err = busy.communicate(timeout=30)
    finally:
        busy.kill()
    assert out == "cleaned\n" and "second signal" not in err, (out, err)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize(("stop", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_stops_a_long_db_query_quietly_with_130(tmp_path, stop, code):
    path = tmp_path / "x.duckdb"
    duckdb.connect(str(path)).close()
    query = "SELECT count(*) FROM range(100000000) a, range(100000000) b"
    command = [sys.executable, "-m", "numerate.cli", "db", str(path), query]
    env = numerate_env(tmp_path / "prefect")
    query_runs = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_until_the_query_runs(query_runs, path)
        query_runs.send_signal(stop)
        sent = time.monotonic()
        out, err = query_runs.communicate(timeout=30)
    finally:
        query_runs.kill()
    assert time.monotonic() - sent < 5
    assert query_runs.returncode == code, err.decode()
    assert b"Traceback" not in err and b"Error" not in err and out == b""
    said = "terminated" if stop == signal.SIGTERM else "interrupted"  # nothing said before
    assert err.decode().splitlines()[-1:] == [said], err.decode()
