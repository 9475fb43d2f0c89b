"""`numerate run`, `report` and `db`: errors users see, and a sweep killed with SIGKILL."""

import json
import os
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
from tests.fake_openai import Reply, spawn

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


def test_db_reports_bad_sql_in_one_line(tmp_path):
    path = tmp_path / "x.duckdb"
    duckdb.connect(str(path)).close()
    line = one_error_line(runner.invoke(app, ["db", str(path), "SELECT nope FROM nowhere"]))
    assert "nowhere" in line


# ---------------------------------------------------------------- real processes


def numerate_env(prefect_home):
    env = dict(os.environ)
    env.update({"PREFECT_HOME": str(prefect_home), "PYTHONUNBUFFERED": "1"})
    env.pop("PREFECT_API_URL", None)
    return env


def start_endpoint(tmp_path, delay):
    log = tmp_path / "requests.log"
    process, base_url = spawn(tmp_path, "--delay", str(delay), "--log", str(log))
    return process, base_url, log


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


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["generate", "objects", "--count", "ten"], "Invalid value for '--count'"),
        (["frobnicate"], "No such command 'frobnicate'"),
        (["generate", "objects", "--seed", "-1"], "--seed -1"),
        (["generate", "objects", "--set", "length=true"], "--set length=true"),
        (["generate", "objects", "--set", "anchor=\udcff"], "undecodable"),
        (["run", "--model", "m", "--base-url", "http://[::1:bad"], "is not a valid URL"),
        (["run", "--model", "baseline:oracle", "--db", "/proc/nonexistent/x.duckdb"],
         "cannot open results database /proc/nonexistent/x.duckdb"),
        (["numgen", "calibrate", "--detector", "blobs", "--count", "-1"],
         "prompts.per_number = -1"),
    ],
)  # fmt: skip
def test_garbage_on_the_command_line_is_one_line_and_exit_2(tmp_path, arguments, message):
    """Through the console script's own entry point, as a user runs it."""
    env = numerate_env(tmp_path / "prefect")
    done = subprocess.run(
        [sys.executable, "-m", "numerate.cli", *arguments], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=120, errors="surrogateescape",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and message in lines[0], done.stderr
    assert "Traceback" not in done.stderr


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
        cli = subprocess.Popen(command, cwd=ROOT, env=numerate_env(tmp_path / "prefect"),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 120
        while len(logged(log)) < 10:
            assert cli.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        servers = [p for p in psutil.Process(cli.pid).children(recursive=True)
                   if "uvicorn" in " ".join(p.cmdline())]  # fmt: skip
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
        (None, "model 'o': no global concurrency limit named '{name}' (create it: prefect gcl"),
    ],
)
def test_a_cli_run_checks_the_concurrency_limit_before_it_starts(tmp_path, limit, said):
    """The CLI and the flow share one preflight: a limit too small to hold the model's
    `concurrency` would make the run wait forever; it is one line and exit 2 instead."""
    import asyncio
    import uuid

    from prefect import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    name = f"cli-{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        async with get_client() as client:
            await client.create_global_concurrency_limit(
                GlobalConcurrencyLimitCreate(name=name, limit=limit)
            )

    if limit is not None:
        asyncio.run(create())
    model = {"name": "o", "model": "baseline:oracle", "concurrency": 4, "concurrency_limit": name}
    path = write_config(tmp_path / "s.yaml", [model])
    db = tmp_path / "r.duckdb"
    line = one_error_line(runner.invoke(app, ["run", "--config", str(path), "--db", str(db)]))
    assert said.format(name=name) in line
    assert not db.exists()  # refused before anything was written


# ---------------------------------------------------------------- secrets never leave


def no_secret_anywhere(result, secret, db=None):
    """Neither the output nor the database shows `secret`, and no traceback was printed."""
    assert secret not in result.stdout and secret not in result.stderr
    assert "Traceback" not in result.output
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
