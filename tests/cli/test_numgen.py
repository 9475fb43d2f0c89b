"""`numerate numgen ...` from the user's side."""

import json
import re
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from numerate.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def write_csv(path, rows, header="target,generated"):
    path.write_text(header + "\n" + "".join(f"{t},{g}\n" for t, g in rows))
    return path


def test_score_prints_every_metric_as_json(tmp_path):
    rows = [(t, t) for t in range(1, 11)] * 2 + [(3, 0), (9, "20+")]
    result = runner.invoke(
        app,
        ["numgen", "score", "--responses", str(write_csv(tmp_path / "r.csv", rows)),
         "--format", "json", "--heatmap", str(tmp_path / "cm.png")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    for key in ("accuracy", "mwe", "knower_level", "human_correlation", "random_correlation",
                "scalar_variability"):  # fmt: skip
        assert key in metrics
    assert metrics["n"] == 22 and metrics["accuracy"] == pytest.approx(20 / 22)
    assert metrics["mwe"] == pytest.approx((1 + 11 / 9) / 22)  # 0 -> error 1; 20+ as 20
    assert metrics["zero_rate"] == pytest.approx(1 / 22)
    assert (tmp_path / "cm.png").stat().st_size > 0
    assert result.stderr == f"heatmap: {tmp_path / 'cm.png'}\n"  # said, as report says it


def test_score_as_a_table(tmp_path):
    path = write_csv(tmp_path / "r.csv", [(1, 1), (2, 3)])
    result = runner.invoke(app, ["numgen", "score", "--responses", str(path)])
    assert result.exit_code == 0, result.output
    header, row = result.stdout.splitlines()[2], result.stdout.splitlines()[4]
    assert "┃ n ┃    accuracy [95% CI] ┃   mwe ┃" in header  # a table, as every `table`
    assert "│ 2 │ 0.500 [0.095, 0.905] │ 0.250 │" in row  # (before: Markdown)
    markdown = runner.invoke(app, ["numgen", "score", "--responses", str(path), "--format", "x"])
    assert markdown.exit_code == 2 and "--format 'x'" in markdown.stderr


@pytest.mark.parametrize(
    ("content", "message"),
    [("target,count\n1,1\n", "missing generated"),
     ("target,generated\n1,1\n2,many\n", "line 3: generated = 'many' is not a count"),
     ("target,generated\n1,-2\n", "line 2: generated = -2 is negative"),
     ("target,generated\n1,\u0663\n", "line 2: generated = '\u0663' is not a count"),  # Arabic 3
     ("target,generated\n1,+1\n", "line 2: generated = '+1' is not a count"),
     ("target,generated\n1_0,1\n", "line 2: target = '1_0' is not a whole number"),
     ("target,generated\n0,1\n", "line 2: target = 0 is outside 1..19"),
     ("target,generated\n", "holds no responses"),
     ("target,generated\n3,3\n4\n", "line 3: 1 field(s); the header has 2"),
     ("target,generated\n3,3,9\n", "line 2: 3 field(s); the header has 2"),
     ("target,generated,target\n3,3,4\n", "the column 'target' appears twice"),
     ("target,target\n3,3\n", "the column 'target' appears twice"),  # corpus J: "missing"
     ("", "bad.csv is empty; it needs a header target,generated"),  # corpus J: "missing"
     ("\n\n3,3\n", "bad.csv has no header on its first line"),
     (",\n3,3\n", "bad.csv has no header on its first line")],
)  # fmt: skip
def test_score_names_the_bad_line_and_value(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    result = runner.invoke(app, ["numgen", "score", "--responses", str(path)])
    assert result.exit_code == 2
    assert message in result.stderr and result.stderr.startswith("error: ")


def test_score_quotes_a_bad_value_of_any_size_in_a_short_line(tmp_path):
    """A hostile pass: a 100,000-character value was quoted in 2,000 characters."""
    path = tmp_path / "bad.csv"
    path.write_text("target,generated\n1," + "a" * 100_000 + "\n")
    result = runner.invoke(app, ["numgen", "score", "--responses", str(path)])
    assert result.exit_code == 2 and "line 2: generated = 'aaa" in result.stderr
    assert len(result.stderr) < 400


def test_score_reads_a_spreadsheet_s_byte_order_mark(tmp_path):
    """A CSV saved by a spreadsheet starts with a BOM: it said the target column was missing."""
    path = tmp_path / "bom.csv"
    path.write_text("\ufefftarget,generated\n3,3\n4,5\n", encoding="utf-8")
    result = runner.invoke(app, ["numgen", "score", "--responses", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n"] == 2


def test_prompts_export(tmp_path):
    out = tmp_path / "prompts.txt"
    result = runner.invoke(
        app, ["numgen", "prompts", "--count", "2", "--object", "apples", "--format", "txt",
              "--out", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    assert len(lines) == 20 and lines[0] == "An image with 1 apple"
    bad = runner.invoke(app, ["numgen", "prompts", "--object", "bananas"])
    assert bad.exit_code == 2, bad.output  # before: "add singulars", an option it lacks
    assert "--object 'bananas' is none of the objects numerate knows (apples, " in bad.stderr
    assert "`numgen run --config` takes others" in bad.stderr


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["run", "--count", "0"], "error: --count 0: Input should be greater than or equal to 1"),
        (["run", "--seed", "-4"], "error: --seed -4: Input should be greater than or equal to 0"),
        (["run", "--generator", "hf/x", "--steps", "0"], "error: --steps 0: Input should be"),
        (["run", "--generator", "hf/x", "--batch-size", "0"], "error: --batch-size 0: Input"),
        (["prompts", "--count", "0"], "error: --count 0: Input should be greater than or equal"),
        (["calibrate", "--detector", "blobs", "--count", "0"], "error: --count 0: Input"),
    ],
)
def test_a_bad_run_option_is_one_clear_line_naming_the_option(tmp_path, options, said):
    """An option's bad value was named by the config field it sets (`prompts.per_number = 0`
    for `--count 0`): the user never wrote that name."""
    db = [] if options[0] == "prompts" else ["--db", str(tmp_path / "x.db")]  # it stores none
    result = runner.invoke(app, ["numgen", *options, *db])
    assert result.exit_code == 2
    assert result.stderr.startswith(said), result.stderr
    assert not (tmp_path / "x.db").exists()


def test_a_bad_config_value_is_named_by_its_field(tmp_path):
    """The same value from a config file is named by its field (no option was given)."""
    config = tmp_path / "n.yaml"
    config.write_text("prompts: {per_number: 0}\n")
    result = runner.invoke(app, ["numgen", "run", "-c", str(config)])
    assert result.exit_code == 2
    assert "numgen config: prompts.per_number = 0" in result.stderr


@pytest.mark.usefixtures("prefect_harness")
def test_run_then_report(tmp_path, db_path):
    images = str(tmp_path / "images")
    result = runner.invoke(
        app, ["numgen", "run", "--count", "2", "--db", db_path, "--images-dir", images,
              "--dispatch", "local"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "│ 20 │ 1.000 [0.839, 1.000] │" in result.stdout and "confusion.png" in result.stdout
    baseline = runner.invoke(
        app, ["numgen", "run", "--generator", "random", "--count", "5", "--db", db_path,
              "--format", "json", "--dispatch", "local", "--images-dir", images],
    )  # fmt: skip
    assert baseline.exit_code == 0, baseline.output
    assert json.loads(baseline.stdout)["knower_level"] == 0
    heatmap = tmp_path / "latest.png"
    report = runner.invoke(app, ["numgen", "report", "--db", db_path, "--heatmap", str(heatmap)])
    assert report.exit_code == 0, report.output
    header = report.stdout.splitlines()[2]
    for column in ("Model", "Accuracy", "MWE", "Counting Level", "Weber's Law"):
        assert column in header
    assert "│ synthetic │ blobs    │    1.000 │" in report.stdout  # a table (Markdown before)
    markdown = runner.invoke(app, ["numgen", "report", "--db", db_path, "--format", "markdown"])
    assert "| synthetic | blobs | 1.000 |" in markdown.stdout
    # a first-contact review: JSON keys were the table's labels ("Counting Level")
    listed = json.loads(runner.invoke(app, ["numgen", "report", "--db", db_path,
                                            "--format", "json"]).stdout)  # fmt: skip
    columns = ["model", "detector", "accuracy", "ci_low", "ci_high", "mwe", "counting_level",
               "webers_law", "n", "refused", "errors"]  # fmt: skip
    assert len(listed) == 2 and list(listed[0]) == columns
    assert heatmap.exists()
    # --run as every other --run takes it (before: "no NumGen run 'latest' with metrics")
    random_id = json.loads(baseline.stdout)["run_id"]
    [(first_id,)] = (
        duckdb.connect(db_path, read_only=True)
        .sql("SELECT run_id FROM numgen_runs WHERE run_id <> ?", params=[random_id])
        .fetchall()
    )
    for named, shown in (
        ("latest", random_id),
        ("previous", first_id),
        (random_id[:12], random_id),
    ):
        drawn = runner.invoke(app, ["numgen", "report", "--db", db_path, "--heatmap",
                                    str(heatmap), "--run", named])  # fmt: skip
        assert drawn.exit_code == 0, drawn.output
        said = drawn.stderr.strip().splitlines()[-1]
        assert said.startswith(f"heatmap of run {shown}"), said
    # corpus J: `report` and `runs` said the database held no run, and not where its runs are
    where = f"it holds 2 finished NumGen runs: `numerate numgen report --db {db_path}` shows them"
    for command in ("report", "runs", "plot"):
        told = runner.invoke(app, [command, "--db", db_path])
        assert told.stderr.strip().endswith(where), told.output
    # a first-contact review: after a calibration, `latest` (the default) drew the
    # calibration's heatmap, not the leaderboard's latest run, and `recount latest` recounted it
    calibrated = runner.invoke(app, ["numgen", "calibrate", "--detector", "blobs", "--count", "1",
                                     "--db", db_path, "--images-dir", images])  # fmt: skip
    assert calibrated.exit_code == 0, calibrated.output
    for named, shown in (([], random_id), (["--run", "latest"], random_id),
                         (["--run", "previous"], first_id)):  # fmt: skip
        drawn = runner.invoke(app, ["numgen", "report", "--db", db_path, "--heatmap",
                                    str(heatmap), *named])  # fmt: skip
        assert drawn.stderr.strip().splitlines()[-1].startswith(f"heatmap of run {shown}")
    # a hostile pass: figures no run can have (a database changed by hand) were shown
    with duckdb.connect(db_path) as con:
        con.execute("UPDATE numgen_metrics SET knower_level = -7 WHERE run_id = ?", [random_id])
    refused = runner.invoke(app, ["numgen", "report", "--db", db_path])
    assert refused.exit_code == 2 and refused.stderr == (
        f"error: NumGen run {random_id} holds counting_level -7, figures no run can have (the "
        "database was changed?)\n"
    ), refused.output


@pytest.mark.usefixtures("prefect_harness")
def test_a_generator_failing_everywhere_is_one_error_line(tmp_path, db_path):
    result = runner.invoke(
        app, ["numgen", "run", "--generator", "callable:tests.numgen.test_flow:unreachable",
              "--detector", "blobs", "--count", "1", "--db", db_path, "--dispatch", "local",
              "--images-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 3  # a failed run, as `numerate run` says it
    last = result.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        r"error: NumGen run numgen-[0-9a-f]+ failed: ConnectionError: image API unreachable", last
    ), last


@pytest.mark.usefixtures("prefect_harness")
def test_a_run_degraded_by_its_failed_images_is_shown_then_exits_3(tmp_path, db_path):
    """A run with a tenth of its images failed exited 0, as a success; a sweep with a degraded
    part exits 3. Its metrics are shown first (stored all the same), then why it is degraded."""
    result = runner.invoke(
        app, ["numgen", "run", "--generator", "callable:tests.numgen.test_flow:fails_at_two",
              "--detector", "blobs", "--count", "2", "--db", db_path, "--dispatch", "local",
              "--images-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    assert "fails_at_two / blobs: run numgen-" in result.stdout  # the run's table
    last = result.stderr.strip().splitlines()[-1]
    assert re.fullmatch(
        r"error: NumGen run numgen-[0-9a-f]+ degraded: 2 of 20 images have no count \(2 for an "
        r"error; 10\.0% > max_error_rate 2\.0%\)",
        last,
    ), last


def returns_nothing(prompt, seed):
    return None


def leaves(prompt, seed):
    raise SystemExit(0)


def quotes_a_key(prompt, seed):
    raise RuntimeError("boom sk-CALLBACKSECRET0123456789")


def hangs(prompt, seed):
    import os
    import time

    Path(os.environ["NUMGEN_TEST_CALLED"]).touch()
    time.sleep(600)  # never returns, as a stuck download or a deadlocked pipeline


NOTHING_RECORDED_IN_TIME = """
import asyncio, sys
import numerate.flows.numgen as flows
async def never(*args, **kwargs):  # a Prefect API too loaded to run the flow's own record of
    await asyncio.Event().wait()  # the stop (a task) before the command's deadline
flows.finish_numgen_run = never
from numerate.cli import main
sys.argv = ["numerate", *sys.argv[1:]]
main()
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signal_name", "code", "flow_records"),
    [("SIGINT", 130, True), ("SIGTERM", 143, True), ("SIGTERM", 143, False)],
)
def test_a_signal_while_a_generator_hangs_records_and_says_an_interruption(
    tmp_path, signal_name, code, flow_records
):
    """Before: the 5 s deadline ended it (`stopped now`) with no `interrupted` line, and the
    run was stored as `failed`. Under load (issue 35), the flow's own record of the stop, a
    Prefect task, had not run when the deadline ended the command, and the run stayed
    `running`: the command records it itself, as `numerate run` does."""
    import signal
    import subprocess
    import sys

    from tests.cli.test_run import numerate_env
    from tests.waiting import wait_until

    called = tmp_path / "called"
    env = numerate_env(tmp_path / "prefect") | {"NUMGEN_TEST_CALLED": str(called)}
    db = tmp_path / "r.duckdb"
    arguments = ["numgen", "run", "--generator", "callable:tests.cli.test_numgen:hangs",
                 "--detector", "blobs", "--count", "1", "--db", str(db), "--dispatch", "local",
                 "--images-dir", str(tmp_path / "i")]  # fmt: skip
    start = ["-m", "numerate.cli"] if flow_records else ["-c", NOTHING_RECORDED_IN_TIME]
    process = subprocess.Popen([sys.executable, *start, *arguments], env=env,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_until(lambda: called.exists() or process.poll() is not None, 90, "the generator")
        assert called.exists(), "the generator was never called"
        process.send_signal(getattr(signal, signal_name))
        sent = time.monotonic()
        _, err = process.communicate(timeout=20)
    finally:
        process.kill()
    assert time.monotonic() - sent < 5.5  # corpus H: 5.12 s, two lines (`error:` first)
    assert process.returncode == code, err
    said = "terminated" if code == 143 else "interrupted"
    assert f"{said}: the images made so far are kept" in err and "Traceback" not in err
    assert "stopped now" not in err and "error:" not in err, err
    status = duckdb.connect(str(db), read_only=True).sql("SELECT status FROM numgen_runs")
    assert status.fetchall() == [("interrupted",)]


def test_a_generator_error_quoting_a_key_is_shown_without_it(tmp_path):
    """Before: the warning that a batch failed showed the generator's error as it was; only
    the last line was redacted."""
    result = runner.invoke(
        app, ["numgen", "run", "--generator", "callable:tests.cli.test_numgen:quotes_a_key",
              "--detector", "blobs", "--count", "1", "--db", str(tmp_path / "r.duckdb"),
              "--dispatch", "local", "--images-dir", str(tmp_path / "images")],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    assert "CALLBACKSECRET" not in result.output and "sk-***" in result.stderr


@pytest.mark.parametrize(
    ("generator", "said"),
    [
        ("returns_nothing", "a generator must return a path, PIL image, numpy array"),
        ("leaves", "failed: SystemExit: 0"),
    ],
)
def test_a_generator_that_returns_no_image_or_exits_is_a_failed_run(tmp_path, generator, said):
    """Before: an image that is none (ImageError) was exit 2, "nothing was run or written",
    beside a failed run stored; a generator's SystemExit(0) ended the command with exit 0 and
    nothing said."""
    db = tmp_path / "r.duckdb"
    result = runner.invoke(
        app, ["numgen", "run", "--generator", f"callable:tests.cli.test_numgen:{generator}",
              "--detector", "blobs", "--count", "1", "--db", str(db), "--dispatch", "local",
              "--images-dir", str(tmp_path / "images")],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: NumGen run numgen-") and said in last, last
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT status FROM numgen_runs").fetchall() == [("failed",)]
    con.close()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--run", ""], "--run '': give a NumGen run id (or leave it out for the latest)"),
        (["--run", "numgen-1"], "--run numgen-1: it chooses the run for --heatmap; give --heatmap"),
    ],
)
def test_numgen_report_refuses_a_run_it_would_ignore(tmp_path, arguments, message):
    """Before: an empty --run meant the latest, and --run without --heatmap was ignored."""
    db = str(tmp_path / "none.duckdb")
    result = runner.invoke(app, ["numgen", "report", "--db", db, *arguments])
    assert result.exit_code == 2 and result.stderr == f"error: {message}\n"


@pytest.mark.usefixtures("prefect_harness")
def test_dispatch_to_deployments_that_are_not_there_says_which(tmp_path, db_path, monkeypatch):
    """Before: `NumGen run failed: ObjectNotFound: None`."""
    from prefect.settings import PREFECT_API_URL

    command = ["numgen", "run", "--count", "1", "--db", db_path, "--dispatch", "deployments",
               "--images-dir", str(tmp_path)]  # fmt: skip
    monkeypatch.delenv("PREFECT_API_URL")  # no server: the command would start its own
    own = runner.invoke(app, command)  # corpus H: a server started for 7 s, then "not on the
    assert own.exit_code == 2, own.output  # server (PREFECT_API_URL)", which was not set
    assert own.stderr.startswith("error: --dispatch deployments: NUMERATE_SERVER=temporary runs")
    url = str(PREFECT_API_URL.value())
    monkeypatch.setenv("PREFECT_API_URL", url)  # the harness's server, with no deployment
    result = runner.invoke(app, command)
    assert result.exit_code == 2, result.output
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"error: deployment 'numgen-generate/numgen-generate' is not on the Prefect server at {url}"
    )
    assert "`numerate deploy`, or use --dispatch local" in last
    assert not Path(db_path).exists()  # said before the database is made (a failed run before)


def test_report_without_results(tmp_path):
    result = runner.invoke(app, ["numgen", "report", "--db", str(tmp_path / "none.duckdb")])
    assert result.exit_code == 2 and "no results database" in result.stderr


def test_score_refuses_a_file_that_is_not_utf8(tmp_path):
    responses = tmp_path / "r.csv"
    responses.write_bytes(b"target,generated\n3,\xff\n")
    result = runner.invoke(app, ["numgen", "score", "--responses", str(responses)])
    assert result.exit_code == 2 and "is not UTF-8 text" in result.stderr


@pytest.mark.parametrize(
    "arguments",
    [["numgen", "prompts", "--out"], ["numgen", "score", "--responses", "{csv}", "--heatmap"]],
)
def test_an_output_path_that_is_a_folder_is_one_error_line(tmp_path, arguments):
    responses = tmp_path / "r.csv"
    responses.write_text("target,generated\n3,3\n4,5\n")
    args = [a.replace("{csv}", str(responses)) for a in arguments] + [str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and f"{tmp_path}: a folder; give a file name" in result.stderr
    assert sorted(tmp_path.iterdir()) == [responses]  # no stray temporary file


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"generator: synthetic\xff\n", "numgen config"),
        (b"a: &a [1]\nprompts: {objects: *a}\n", "YAML aliases (*name) are not allowed"),
        (b"- a list\n", "expected a mapping of settings"),
        (b"generator: synthetic\ncolour: red\n", "colour = 'red': Extra inputs are not"),
        (b"prompts: {per_number: 2, colour: red}\n", "prompts.colour = 'red': Extra inputs"),
        (b"generation: {stepz: 4}\n", "generation.stepz = 4: Extra inputs are not"),
        (b"detection: {min_scor: 0.3}\n", "detection.min_scor = 0.3: Extra inputs are not"),
        (b"prompts: {per_number: true}\n", "prompts.per_number = true: Input should be a valid"),
        (b"prompts: {seed: '2'}\n", "prompts.seed = '2': Input should be a valid integer"),
        (b"task_batch: 2.0\n", "task_batch = 2.0: Input should be a valid integer"),
        (b"generator: random\ndetector: blobs\n", "the random baseline answers counts itself"),
        (b"generation: {device: cpu}\n", "generation.device 'cpu': the synthetic generator with"),
        (b"generation: {steps: 5}\n", "generation.steps = 5: the synthetic generator with"),
        (b"annotate: 'yes'\n", "annotate = 'yes': Input should be a valid boolean"),
        (b"generator: weber\ngeneration: {dtype: float16}\n", "the weber baseline makes no use of"),
        (b"generator: weber\ngeneration: {device: cpu}\n", "the weber baseline runs on no device"),
        (b"generation: {guidance: .nan}\n", "generation.guidance = nan: Input should be a finite"),
        (b"images_dir: ''\n", "images_dir = '': give the folder for the images"),
        (
            b"detection: {min_score: 0.9}\n",  # synthetic images, counted by blobs
            "detection.min_score = 0.9: the synthetic generator with the blobs detector makes no",
        ),
        (b"generator: weber\ndetection: {batch_size: 2}\n", "detection.batch_size = 2: the weber"),
        (
            b"prompts: {objects: [apples], singulars: {apples: apple, dgos: dog}}\n",
            "singulars: 'dgos' is not one of the objects asked (apples)",
        ),
        (b"generator: synthetic\ngenerator: random\n", "the key 'generator' appears twice"),
    ],
)
def test_a_bad_numgen_config_is_one_error_line(tmp_path, content, message):
    path = tmp_path / "numgen.yaml"
    path.write_bytes(content)
    result = runner.invoke(app, ["numgen", "run", "--config", str(path)])
    assert result.exit_code == 2 and message in result.stderr
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--images-dir", "{file}"], "--images-dir '{file}': a file, not a folder"),
        (["--images-dir", "{file}/sub"], "--images-dir '{file}/sub': {file} is a file, not a"),
        (["--images-dir", ""], "--images-dir '': give the folder for the images"),
        # a hostile pass: accepted, then printed raw in the run's last line
        (["--images-dir", "{file}-i\x1b[2J\nx"], "{file}-i\\x1b[2J\\nx': a path with a control"),
        # a NumGen run began, then failed (exit 3) on FileNotFoundError
        (
            ["--images-dir", "/proc/numerate-images"],
            "--images-dir '/proc/numerate-images' cannot be written: No such file or directory",
        ),
        (["--size", "0"], "--size 0: Input should be greater than or equal to 8"),
        (["--size", "12"], "--size 12: Input should be a multiple of 8"),
        (["--size", "-1"], "(pixels on each side: a multiple of 8 from 8 to 4096)"),
        (["--seed", str(2**63)], "--seed 9223372036854775808: Input should be less"),
    ],
)
def test_a_bad_images_folder_or_size_is_one_line_before_anything_is_made(
    tmp_path, arguments, message
):
    """Before: an images folder that is a file ended in a traceback after the database was
    made and the flow started; --size 0 gave two lines (height and width)."""
    planted = tmp_path / "planted"
    planted.write_text("not a folder")
    db = tmp_path / "r.duckdb"
    args = [a.replace("{file}", str(planted)) for a in arguments]
    command = ["numgen", "run", "--generator", "synthetic", "--count", "1", "--db", str(db)]
    result = runner.invoke(app, [*command, *args])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert message.replace("{file}", str(planted)) in lines[0]
    assert sorted(tmp_path.iterdir()) == [planted]  # no database, no images


@pytest.mark.parametrize(
    ("planted", "link"), [("runs", True), ("images/synthetic", True), ("images", False)]
)
def test_a_link_where_the_run_writes_below_its_images_folder_is_refused_before_it_runs(
    tmp_path, planted, link
):
    """A hostile pass: with `runs` a link out of the images folder, every image was made and
    counted, then the run failed (its counts lost); with `images/synthetic` one, the run
    stored ten errors. Refused now before the database is made, as a file there is."""
    images, elsewhere, db = tmp_path / "images-dir", tmp_path / "elsewhere", tmp_path / "r.duckdb"
    elsewhere.mkdir()
    (images / planted).parent.mkdir(parents=True, exist_ok=True)
    if link:
        (images / planted).symlink_to(elsewhere, target_is_directory=True)
    else:
        (images / planted).write_text("a file")
    command = ["numgen", "run", "--generator", "synthetic", "--count", "1", "--db", str(db)]
    result = runner.invoke(app, [*command, "--images-dir", str(images)])
    assert result.exit_code == 2 and result.stdout == "", result.output
    why = f"a symbolic link; numerate follows no link out of {images}" if link else "not a folder"
    assert result.stderr == f"error: images_dir {str(images)!r}: {images / planted}: {why}\n"
    assert not db.exists() and not any(elsewhere.iterdir())


def test_a_link_at_a_second_counter_s_annotated_folder_is_refused_before_it_runs(tmp_path):
    """The folders the run's own counter draws in were checked before the run; those of a
    second counter, which draws in a linked run once the first has counted, were not (a
    review of 492abba): that run failed after every image was made and counted."""
    from numerate.kernel.errors import ConfigError
    from numerate.numgen.batches import annotated_folder, check_folders
    from numerate.numgen.config import NumGenConfig
    from tests.numgen.tiny_models import TINY_GROUNDING_DINO

    images, elsewhere = tmp_path / "images-dir", tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = NumGenConfig.model_validate(
        {"generator": "synthetic", "detector": ["blobs", TINY_GROUNDING_DINO],
         "images_dir": str(images)}
    )  # fmt: skip
    check_folders(config)  # nothing planted: nothing refused
    own, second = (annotated_folder(config.for_counter(c)) for c in config.counters)
    assert own is not None and second is not None and own.parent == second.parent != own
    second.parent.mkdir(parents=True)
    second.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ConfigError) as refused:
        check_folders(config)
    assert str(refused.value).endswith(f"{second}: a symbolic link; numerate follows no link "
                                       f"out of {images}")  # fmt: skip
    # a hosted counter says a number and draws nothing: no folder of its own
    hosted = config.for_counter("blobs").model_copy(update={"detector": "vlm:fake-vision"})
    assert annotated_folder(hosted) is None


@pytest.mark.parametrize(
    ("generator", "message"),
    [
        ("callable:nosuchmod:fn", "generator callable 'nosuchmod:fn' cannot be loaded: No module"),
        ("callable:", "generator callable must be 'module:function', got ''"),
        ("callable:os:no_such_function", "cannot be loaded: module 'os' has no attribute"),
        ("callable:os:sep", "generator callable 'os:sep' is not callable"),
    ],
)
def test_a_generator_callable_that_cannot_be_had_is_one_line_before_the_run(
    tmp_path, generator, message
):
    """Before: found inside the flow, with Prefect's tracebacks and a database holding a
    failed run."""
    db = tmp_path / "r.duckdb"
    result = runner.invoke(
        app, ["numgen", "run", "--generator", generator, "--detector", "blobs", "--count", "1",
              "--db", str(db), "--images-dir", str(tmp_path / "images")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_numgen_refuses_a_database_of_something_else_before_any_image(tmp_path):
    import duckdb

    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE inventory (item VARCHAR)")
    con.close()
    result = runner.invoke(
        app, ["numgen", "run", "--count", "1", "--db", str(other),
              "--images-dir", str(tmp_path / "images")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "a DuckDB database of something else (tables inventory)" in result.stderr
    assert sorted(tmp_path.iterdir()) == [other]  # no image made


class Silent:
    """A local server that accepts connections and never answers (a hub behind a dead
    route, a proxy that swallows requests)."""

    def __enter__(self) -> str:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def asked(self) -> bool:
        """Whether a connection waits to be accepted (a client is waiting for an answer)."""
        import select

        return bool(select.select([self.sock], [], [], 0)[0])


def numgen_command(tmp_path, endpoint, **env_extra):
    import os
    import sys

    env = dict(os.environ, HF_ENDPOINT=endpoint, PREFECT_HOME=str(tmp_path / "prefect"))
    env.pop("HF_HUB_OFFLINE", None)  # as on a GPU machine with no route to the hub
    env.update(env_extra)
    command = [sys.executable, "-m", "numerate.cli", "numgen", "run", "--generator",
               "nosuch-org/nosuch-model", "--count", "1", "--db", str(tmp_path / "x.duckdb"),
               "--images-dir", str(tmp_path / "images")]  # fmt: skip
    return command, env


@pytest.mark.slow
def test_a_model_id_the_hub_cannot_give_fails_fast_in_one_line(tmp_path):
    import subprocess
    import time

    with Silent() as endpoint:
        command, env = numgen_command(tmp_path, endpoint, NUMERATE_HUB_TIMEOUT="1")
        started = time.monotonic()
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
        took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: generator 'nosuch-org/nosuch-model'")
    assert str(tmp_path / "prefect") not in lines[0]
    assert "huggingface" in lines[0] and "did not answer within 1 s" in lines[0]
    # the variable that chose the hub is named: a mistyped one read as the hub's own fault
    assert f"the hub (HF_ENDPOINT={env['HF_ENDPOINT']!r}) did not answer" in lines[0]
    assert took < 20
    assert not (tmp_path / "x.duckdb").exists() and not (tmp_path / "images").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("signal_name", "code"), [("SIGTERM", 143), ("SIGINT", 130)])
def test_a_signal_stops_a_command_stuck_on_the_network_within_5_s(tmp_path, signal_name, code):
    import signal
    import subprocess
    import time

    from tests.waiting import wait_until

    with (silent := Silent()) as endpoint:
        command, env = numgen_command(tmp_path, endpoint, NUMERATE_HUB_TIMEOUT="60")
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: silent.asked() or process.poll() is not None, 60, "the hub check")
        assert process.poll() is None  # in the hub check: it waits up to 60 s for an answer
        sent = time.monotonic()
        process.send_signal(getattr(signal, signal_name))
        try:
            _, err = process.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            raise AssertionError(f"{signal_name} did not stop the command") from None
        took = time.monotonic() - sent
    assert process.returncode == code
    assert took < 5.5
    assert "Traceback" not in err


def test_a_hub_that_sends_headers_then_nothing_is_unreachable(monkeypatch):
    """Before: the headers counted as an answer, and loading the model then hung in the hub
    client; a NUMERATE_HUB_TIMEOUT that is no number was silently the default."""
    import http.server
    import threading
    import time

    from numerate.numgen.torch_utils import ModelLoadError, probe_hub

    class Mute(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.flush()
            time.sleep(5)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mute)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("NUMERATE_HUB_TIMEOUT", "0.5")
    try:
        started = time.monotonic()
        why = probe_hub(endpoint)
        assert why is not None and "did not answer within 0.5 s" in why
        assert time.monotonic() - started < 4
    finally:
        server.shutdown()
    for garbage in ("abc", "nan", "0", "1e9"):
        monkeypatch.setenv("NUMERATE_HUB_TIMEOUT", garbage)
        with pytest.raises(ModelLoadError, match=f"NUMERATE_HUB_TIMEOUT='{garbage}': give seconds"):
            probe_hub(endpoint)


def test_a_numgen_run_on_a_busy_database_says_so_in_one_note_and_one_error(tmp_path):
    """Corpus I: a Prefect warning about a log without a flow run, then the note twice."""
    import subprocess
    import sys

    from tests.cli.test_run import numerate_env
    from tests.store.test_store_access import hold

    db = tmp_path / "r.duckdb"
    duckdb.connect(str(db)).close()
    holder = hold(db, 60)
    try:
        env = numerate_env(tmp_path / "prefect") | {"NUMERATE_LOCK_TIMEOUT": "2"}
        done = subprocess.run(
            [sys.executable, "-m", "numerate.cli", "numgen", "run", "--count", "1", "--db",
             str(db), "--images-dir", str(tmp_path / "i")],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        holder.kill()
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.splitlines() if not line.startswith("starting Prefect")]
    assert [line.split(":")[0] for line in lines] == ["note", "error"], done.stderr


def test_a_sweep_config_given_to_numgen_run_is_one_line_saying_so(tmp_path):
    """Corpus J: five lines, one per key of the sweep config, none saying what it was."""
    config = ROOT / "deployments" / "sweeps" / "small.yaml"
    result = runner.invoke(
        app, ["numgen", "run", "--config", str(config), "--db", str(tmp_path / "r.duckdb")]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"error: numgen config {config} is a sweep config (db, manifolds, models, name, ...), "
        "not a NumGen config: `numerate run --config` takes it\n"
    )
    assert list(tmp_path.iterdir()) == []
