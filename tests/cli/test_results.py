"""Reading results: `report` and `db` never write, keep every column, filter, and read a sweep
that is still writing."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from numerate.cli import app
from tests.cli.test_run import (
    ROOT,
    logged,
    numerate_env,
    one_error_line,
    slow_sweep,
    start_sweep,
    write_config,
)
from tests.waiting import wait_until

runner = CliRunner()


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A database with two finished runs of two baselines on two manifolds."""
    folder = tmp_path_factory.mktemp("results")
    db = str(folder / "numerate.duckdb")
    models = [{"name": "oracle", "model": "baseline:oracle"},
              {"name": "random", "model": "baseline:random"}]  # fmt: skip
    manifolds = [{"manifold": "objects", "count": 4}, {"manifold": "sequence", "count": 4}]
    for seed in (1, 2):
        config = write_config(folder / f"sweep{seed}.yaml", models, manifolds, seed=seed)
        result = runner.invoke(app, ["run", "--config", str(config), "--db", db])
        assert result.exit_code == 0, result.output
    return db


def run_ids(db):
    con = duckdb.connect(db, read_only=True)
    try:
        return [r[0] for r in con.execute("SELECT run_id FROM runs ORDER BY started_at").fetchall()]
    finally:
        con.close()


@pytest.mark.parametrize(
    "sql",
    [
        "COPY (SELECT 42) TO '{out}'",
        "EXPORT DATABASE '{out}'",
        "SELECT * FROM read_text('/etc/hostname')",
        "ATTACH '{out}' AS other",
        "CREATE TABLE x AS SELECT 1",
        "SET enable_external_access = true",
        "INSTALL httpfs",
        "CHECKPOINT",
        "SELECT * FROM query('SELECT 1')",
        "SET VARIABLE x = 1",
        "EXPLAIN ANALYZE COPY (SELECT 42) TO '{out}'",
        "FROM enable_logging(level='trace', storage='file', storage_path='{out}')",
    ],
)
def test_db_is_read_only_and_reaches_no_other_file(two_runs, tmp_path, sql):
    out = tmp_path / "written"
    line = one_error_line(runner.invoke(app, ["db", two_runs, sql.format(out=out)]))
    assert "Traceback" not in line
    assert not out.exists()


@pytest.mark.parametrize(
    "sql",
    [  # a review: names before a parenthesis were taken for calls, and refused
        "WITH query(n) AS (SELECT count(*) FROM runs) SELECT n FROM query",
        "SELECT c.x FROM (SELECT 1) AS checkpoint(x) JOIN (SELECT 1) AS c(x) USING (x)",
        "SELECT 'checkpoint()' AS query, count(*) OVER () AS n FROM runs LIMIT 1",
        "PRAGMA table_info('runs')",
    ],
)
def test_db_reads_what_only_reads(two_runs, sql):
    read = runner.invoke(app, ["db", two_runs, sql, "--format", "csv"])
    assert read.exit_code == 0 and read.stderr == "", read.output
    assert len(read.stdout.splitlines()) >= 2


def test_db_says_whose_a_function_of_an_extension_not_loaded_is(two_runs):
    """A hostile pass: DuckDB tried to install the extension and its first line ended at
    "...the required extension 'ducklake':" (the reason on a line not shown)."""
    read = runner.invoke(app, ["db", two_runs, "FROM ducklake_snapshots('lake')"])
    assert read.exit_code == 2, read.output
    assert read.stderr == (
        'error: Catalog Error: Table Function with name "ducklake_snapshots" is not in the '
        "catalog, but it exists in the ducklake extension.\n"
    )


def test_db_reads_no_folder_duckdb_would_spill_to(two_runs, tmp_path, monkeypatch):
    """A hostile pass: DuckDB let a reader read its spill folder, `<db>.tmp` beside the file
    (or `.tmp` in the working directory), and a link there opened the folder it points to."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET")
    Path(f"{two_runs}.tmp").symlink_to(outside)
    monkeypatch.chdir(tmp_path)
    Path(".tmp").symlink_to(outside)
    allowed = runner.invoke(app, ["db", two_runs, "SELECT current_setting('allowed_directories')"
                                  " AS a, current_setting('temp_directory') AS t", "--format",
                                  "csv"])  # fmt: skip
    assert allowed.exit_code == 0 and allowed.stdout == 'a,t\n[],""\n', allowed.output
    for path in (f"{two_runs}.tmp/secret.txt", ".tmp/secret.txt"):
        read = runner.invoke(app, ["db", two_runs, f"SELECT * FROM read_text('{path}')"])
        assert read.exit_code == 2 and "Permission Error" in read.stderr, read.output
        assert "SECRET" not in read.output


def test_db_says_what_it_cannot_check_in_one_line(two_runs):
    """A hostile pass: a query nested 500 deep (DuckDB takes 1,000) was a RecursionError of
    numerate's (exit 1, a crash file); a PIVOT without its values, which DuckDB makes two
    statements of, was "2 statements" the user never wrote."""
    deep = "SELECT " + "abs(" * 500 + "1" + ")" * 500
    refused = runner.invoke(app, ["db", two_runs, deep])
    assert refused.exit_code == 2 and refused.stderr == (
        "error: numerate db only reads, and cannot tell which functions this query calls "
        "(nested hundreds deep?): give a simpler query\n"
    ), refused.output
    pivot = runner.invoke(app, ["db", two_runs, "PIVOT runs ON status USING count(*)"])
    assert pivot.exit_code == 2 and "a PIVOT without `IN (...)` is two" in pivot.stderr
    assert len(pivot.stderr.splitlines()) == 1, pivot.output


def test_db_cuts_a_long_json_value_as_text_in_its_table(two_runs):
    """A hostile pass: `numerate db "SELECT * FROM runs"` failed in the table ("Conversion
    Error: Malformed JSON at byte 1003"): a config of over 1,000 characters, cut, was cast
    back to JSON."""
    shown = runner.invoke(app, ["db", two_runs, "SELECT config FROM runs"])
    assert shown.exit_code == 0, shown.output
    assert '{"name": ' in shown.stdout and "..." in shown.stdout
    assert "texts longer than 1,000 characters are cut" in shown.stderr


def test_db_keeps_every_column_of_a_result_as_the_sql_names_it(two_runs):
    """A first-contact review: the table merged `ci_low` and `ci_high` into `accuracy [95%
    CI]` and renamed `chance_adjusted` and `error_rate`, the columns of the user's own SQL."""
    columns = ("rank", "model", "sweep_name", "run_id", "accuracy", "ci_low", "ci_high",
               "chance_adjusted", "error_rate")  # fmt: skip
    shown = runner.invoke(app, ["db", two_runs, f"SELECT {', '.join(columns)} FROM leaderboard"])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines()[1].split() == ["┃", *" ┃ ".join(columns).split(), "┃"]
    for run_id in run_ids(two_runs):
        assert run_id in shown.stdout  # both runs of the oracle are told apart


def test_db_takes_the_database_as_every_other_command_does_too(two_runs):
    """`numerate db --db X SQL` was "No such option: --db"; its SQL is its one argument."""
    sql = "SELECT count(*) AS runs FROM runs"
    positional = runner.invoke(app, ["db", two_runs, sql, "--format", "csv"])
    option = runner.invoke(app, ["db", "--db", two_runs, sql, "--format", "csv"])
    assert option.exit_code == 0 and option.stdout == positional.stdout == "runs\n2\n"
    tables = runner.invoke(app, ["db", "--db", two_runs, "--format", "csv"])
    assert tables.exit_code == 0 and "leaderboard" in tables.stdout
    twice = runner.invoke(app, ["db", "other.duckdb", sql, "--db", two_runs])
    assert twice.exit_code == 2 and "give the database once" in twice.stderr


def test_report_names_runs_by_prefix_latest_and_previous(two_runs):
    first, second = run_ids(two_runs)
    for name, expected in [(first[:6], first), ("previous", first), ("latest", second)]:
        shown = runner.invoke(app, ["report", "--db", two_runs, "--run", name, "--format", "json"])
        assert shown.exit_code == 0, shown.output
        assert f"run {expected}" not in shown.stderr
    line = one_error_line(runner.invoke(app, ["report", "--db", two_runs, "--run", "zzz"]))
    assert "'zzz'" in line


def test_report_filters_models_and_manifolds(two_runs):
    import json

    shown = runner.invoke(
        app,
        ["report", "--db", two_runs, "--model", "oracle", "--manifold", "objects",
         "--format", "json", "--points"],
    )  # fmt: skip
    assert shown.exit_code == 0, shown.output
    shown = json.loads(shown.stdout)  # one document (two, one after the other, before)
    summaries, points = shown["summaries"], shown["points"]
    assert {r["model"] for r in summaries} == {"oracle"}
    assert {r["manifold"] for r in summaries} == {"*", "objects"}
    assert {(r["model"], r["manifold"]) for r in points} == {("oracle", "objects")}
    line = one_error_line(runner.invoke(app, ["report", "--db", two_runs, "--model", "nope"]))
    assert "--model 'nope'" in line and "(it has oracle, random)" in line


@pytest.mark.parametrize("command", [["report"], ["numgen", "report"]])
def test_reports_do_not_touch_a_foreign_database(tmp_path, command):
    path = tmp_path / "other.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE mine AS SELECT 1 AS x")
    con.close()
    before = (path.read_bytes(), os.stat(path).st_mtime_ns)
    line = one_error_line(runner.invoke(app, [*command, "--db", str(path)]))
    assert "not a numerate results database" in line
    assert (path.read_bytes(), os.stat(path).st_mtime_ns) == before


@pytest.mark.slow
def test_report_and_duckdb_read_a_sweep_while_it_runs(tmp_path):
    """A sweep that writes for a while: another process reads the database itself (no copy)
    while it runs, sees its graded answers marked running, and sees it finished after."""
    config, endpoint, log = slow_sweep(tmp_path, count=200, delay=0.05, batch_size=20)
    db = tmp_path / "live.duckdb"
    env = numerate_env(tmp_path / "prefect")
    report = [sys.executable, "-m", "numerate.cli", "report", "--db", str(db), "--format", "json"]
    sweep = start_sweep(config, db, env)
    try:  # a `report` (a process: 1 s of CPU) once answers come, not before
        wait_until(lambda: len(logged(log)) >= 10 or sweep.poll() is not None, 120, "answers")
        deadline = time.monotonic() + 120
        while True:
            assert sweep.poll() is None, "the sweep ended before it was read"
            assert time.monotonic() < deadline, "no live read succeeded"
            live = subprocess.run(report, cwd=ROOT, env=env, capture_output=True, text=True)
            if live.returncode == 0 and re.search(r"[1-9][\d,]* answers so far", live.stderr):
                break
            time.sleep(0.5)
        assert "still running" in live.stderr
        rows = json.loads(live.stdout)  # corpus K: an empty table, exit 0, while it ran
        assert rows and all(row["n"] > 0 for row in rows), (live.stdout, live.stderr)
        assert sweep.poll() is None  # read while the sweep was writing the file
        assert sweep.wait(timeout=300) == 0
    finally:
        sweep.kill()
        endpoint.kill()
        endpoint.wait()
    after = subprocess.run(report, cwd=ROOT, env=env, capture_output=True, text=True)
    assert after.returncode == 0, after.stderr
    assert "still running" not in after.stderr
    assert not list(tmp_path.glob("live.duckdb.*"))  # no journal, no copy left behind


def test_a_run_that_did_not_end_is_read_with_the_figures_its_end_would_store(two_runs, tmp_path):
    """Corpus K: `report` of an interrupted run with 18 graded answers showed an empty table
    (exit 0) and `plot` said nothing was graded: a run stores its points and summaries as it
    ends. Readers compute them from its answers; they are the ones its end stores, but for
    the score and tier, which only the end computes (docs/statistics.md, "One score")."""
    import shutil

    from numerate.results import live
    from numerate.store import queries
    from numerate.store.reader import Reader

    db = tmp_path / "copy.duckdb"
    shutil.copy(two_runs, db)
    reads = (
        lambda r, run: live.summaries(r, run),
        lambda r, run: live.summaries(r, run, ["random"], ["sequence"]),
        lambda r, run: live.points(r, run, ["oracle"]),
        lambda r, run: live.plotted_points(r, run),
        lambda r, run: live.summarised(r, run, "manifold"),
    )
    with Reader.open(str(db)) as reader:
        run = queries.latest_run_ids(reader, None)
        stored = [read(reader, run) for read in reads]
    con = duckdb.connect(str(db))
    con.execute("UPDATE runs SET status = 'interrupted' WHERE run_id = ?", [run])
    for table in ("points", "summaries"):
        con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run])
    con.close()
    with Reader.open(str(db)) as reader:
        live = [read(reader, run) for read in reads]
    for was, now in zip(stored, live, strict=True):
        if isinstance(was, list):
            assert now == was
            continue
        assert now.columns == was.columns and now.height == was.height > 0
        for column in was.columns:
            if column in ("score", "score_low", "score_high", "tier"):
                assert was[column].drop_nulls().len() > 0 and now[column].is_null().all()
                continue
            expected = was[column].to_list()
            if was[column].dtype.is_numeric():
                expected = pytest.approx(expected, nan_ok=True)
            assert now[column].to_list() == expected, column
    report = runner.invoke(app, ["report", "--db", str(db), "--format", "json"])
    assert report.exit_code == 0 and json.loads(report.stdout), report.output


def test_a_database_of_an_older_schema_is_refused_by_readers_until_upgraded(two_runs, tmp_path):
    import shutil

    from numerate.store.schema import SCHEMA_VERSION

    old = tmp_path / "old.duckdb"
    shutil.copy(two_runs, old)
    con = duckdb.connect(str(old))
    # back to version 6: before se, samples and the multi-sample figures
    con.execute("DROP VIEW leaderboard")
    con.execute("DROP TABLE texts")  # before version 17
    for table, columns in (("completions", ("text_sha", "reasoning_sha")),
                           ("responses", ("raw_sha", "reasoning_sha"))):  # fmt: skip
        for column in columns:
            con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    for column in ("se", "samples", "pass_at_k", "maj_at_k", "consistency"):
        con.execute(f"ALTER TABLE points DROP COLUMN {column}")
    for column in ("se", "points", "samples", "pass_at_k", "maj_at_k", "consistency"):
        con.execute(f"ALTER TABLE summaries DROP COLUMN {column}")
    for table, columns in (
        ("completions", ("text_cut", "text_chars")),
        ("responses", ("raw_cut", "raw_chars")),  # before version 8
        ("numgen_runs", ("source_run_id",)),
        ("numgen_images", ("sha256", "refused")),
        ("numgen_detections", ("answer", "unparsed")),
        ("numgen_metrics", ("refused", "unparsed")),  # before version 11
        ("summaries", ("score", "score_low", "score_high", "tier")),  # before version 13
        *(
            (
                table,
                (
                    "reasoning",
                    "reasoning_cut",
                    "reasoning_chars",
                    "reasoning_tokens",
                    "reasoning_ratio",
                ),
            )
            for table in ("completions", "responses")
        ),
    ):
        for column in columns:
            con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.execute("DELETE FROM schema_migrations WHERE version >= 7")
    con.close()
    line = one_error_line(runner.invoke(app, ["report", "--db", str(old)]))
    assert "schema version 6" in line and f"numerate upgrade --db {old}" in line
    upgraded = runner.invoke(app, ["upgrade", "--db", str(old)])
    assert upgraded.exit_code == 0, upgraded.output
    assert f"schema version 6 -> {SCHEMA_VERSION}, every row kept" in upgraded.stdout
    shown = runner.invoke(app, ["report", "--db", str(old), "--points", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    assert (
        f"already has schema version {SCHEMA_VERSION}"
        in runner.invoke(app, ["upgrade", "--db", str(old)]).stdout
    )


def test_several_samples_per_case_report_pass_at_k_majority_and_consistency(tmp_path, fake_openai):
    import yaml

    from tests.fake_openai import Reply

    # sample k of a case is sent seed k and answers 3 + k: a case is right in at most one of
    # its samples, no two samples agree, and the majority is a three-way tie
    fake_openai.responder = lambda body: Reply(content=f"Answer: {3 + body['seed']}")
    config = tmp_path / "samples.yaml"
    config.write_text(yaml.safe_dump({
        "name": "samples", "seed": 1,
        "models": [{"name": "m", "model": "fake", "base_url": fake_openai.base_url,
                    "sampling": {"samples": 3, "seed": 0}}],
        "manifolds": [{"manifold": "objects", "count": 6}],
    }))  # fmt: skip
    db = tmp_path / "s.duckdb"
    args = ["run", "--config", str(config), "--db", str(db), "--format", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    shown = runner.invoke(app, ["report", "--db", str(db), "--format", "json"])
    assert shown.exit_code == 0, shown.output
    [row, _] = json.loads(shown.stdout)  # the model over every manifold, then objects
    assert row["samples"] == 3 and row["n"] == 18
    assert row["consistency"] == 0.0
    con = duckdb.connect(str(db), read_only=True)
    try:
        cases = con.execute(
            "SELECT case_id, sum((outcome = 'correct')::INT) FROM responses GROUP BY case_id"
        ).fetchall()
    finally:
        con.close()
    right = [c for _, c in cases]
    assert row["pass_at_k"] == pytest.approx(sum(c > 0 for c in right) / len(right))
    # a tie of three answers, one of them right: a third
    assert row["maj_at_k"] == pytest.approx(sum(c / 3 for c in right) / len(right))


def test_db_output_keeps_the_data_and_markdown_cells_stay_cells(tmp_path):
    """CSV lost an escape character (typer.echo strips ANSI sequences when not writing to a
    terminal); a `|` or a line break in a value broke a Markdown table, and an escape sequence
    in a Markdown cell reached the terminal as it was."""
    import duckdb

    path = tmp_path / "x.duckdb"
    duckdb.connect(str(path)).close()
    query = "SELECT chr(27) || '[31mred' AS x, 'a|b' AS y, 'l1' || chr(10) || 'l2' AS z"
    csv = runner.invoke(app, ["db", str(path), query, "--format", "csv"])
    assert csv.exit_code == 0 and csv.stdout.splitlines()[1].startswith("\x1b[31mred,a|b,")
    markdown = runner.invoke(app, ["db", str(path), query, "--format", "markdown"])
    # Markdown is read by people, on the terminal it is printed to as well: an escape character
    # is written as its escape, as in the table (a lone carriage return too: it is no line break)
    assert markdown.stdout.splitlines()[2] == "| \\x1b[31mred | a\\|b | l1<br>l2 |"
    odd = "SELECT 'a\\|' || chr(13) || 'b' || chr(13) || chr(10) || 'c' || chr(8238) AS x"
    markdown = runner.invoke(app, ["db", str(path), odd, "--format", "markdown"])
    assert markdown.stdout.splitlines()[2] == "| a\\\\\\|\\rb<br>c\\u202e |", markdown.stdout
    # a hostile pass: HTML in a value reached the Markdown as it was (a renderer that allows
    # HTML, MkDocs or pandoc, ran it); it is written as entities, which render as the text
    html = "SELECT '<script>alert(1)</script> & co' AS x"
    markdown = runner.invoke(app, ["db", str(path), html, "--format", "markdown"])
    assert markdown.stdout.splitlines()[2] == "| &lt;script&gt;alert(1)&lt;/script&gt; &amp; co |"
    # corpus H: the table, for a terminal, played an answer's escape sequences (a title set,
    # the screen cleared) and read `[b]` as rich markup: both are shown as written
    answer = "SELECT chr(27) || ']0;PWNED' || chr(7) || chr(27) || '[2J [b]x[/b]' AS answer"
    table = runner.invoke(app, ["db", str(path), answer])
    assert table.exit_code == 0 and "\x1b" not in table.stdout and "\x07" not in table.stdout
    assert "\\x1b]0;PWNED\\x07\\x1b[2J [b]x[/b]" in table.stdout, table.stdout
    # a bidi override (it turned what follows around on a terminal) is written escaped too
    bidi = runner.invoke(app, ["db", str(path), "SELECT 'a' || chr(8238) || 'b' AS x"])
    assert "a\\u202eb" in bidi.stdout and "\u202e" not in bidi.stdout


def test_db_json_of_a_nan_or_an_infinity_is_json(tmp_path):
    """Before: `NaN` and `Infinity` bare, which no JSON reader takes."""
    path = tmp_path / "x.duckdb"
    duckdb.connect(str(path)).close()
    query = "SELECT 'nan'::DOUBLE AS a, 'inf'::DOUBLE AS b, '-inf'::DOUBLE AS c, 0.5::DOUBLE AS d"
    done = runner.invoke(app, ["db", str(path), query, "--format", "json"])
    assert done.exit_code == 0, done.output
    rows = json.loads(done.stdout, parse_constant=lambda name: pytest.fail(f"bare {name}"))
    assert rows == [{"a": "NaN", "b": "Infinity", "c": "-Infinity", "d": 0.5}]


def test_db_shows_a_table_of_its_first_rows_and_writes_every_row_as_csv(tmp_path, monkeypatch):
    """A hostile pass: a table of a million rows (`numerate db`'s default format) had shown
    nothing after 120 s, at 2.6 GB; CSV wrote it in 1 s. A table now shows the first
    SHOWN_ROWS rows (the query reads no further) and says more follow. CSV, JSON and
    Markdown write every row, read and written PRINTED_ROWS at a time (they held them all:
    1.2 GB of a million rows as CSV, 2.8 GB as JSON)."""
    import numerate.cli.db as db
    import numerate.store.reader as reader

    monkeypatch.setattr(db, "SHOWN_ROWS", 5)
    monkeypatch.setattr(reader, "PRINTED_ROWS", 7)
    path = tmp_path / "x.duckdb"
    duckdb.connect(str(path)).close()
    query = "SELECT range AS n FROM range(50)"
    shown = runner.invoke(app, ["db", str(path), query])
    assert shown.exit_code == 0, shown.output
    assert " 4 " in shown.stdout and " 5 " not in shown.stdout
    assert "note: the first 5 rows are shown, and more follow: --format csv" in shown.stderr
    markdown = runner.invoke(app, ["db", str(path), query, "--format", "markdown"])
    rows = [f"| {n} |" for n in range(50)]  # a file's: every row
    assert markdown.stdout.splitlines() == ["| n |", "|---|", *rows] and not markdown.stderr
    exactly = runner.invoke(app, ["db", str(path), "SELECT range AS n FROM range(5)"])
    assert " 4 " in exactly.stdout and "more follow" not in exactly.stderr
    every = runner.invoke(app, ["db", str(path), query, "--format", "csv"])
    assert every.stdout.splitlines() == ["n", *map(str, range(50))] and not every.stderr
    records = runner.invoke(app, ["db", str(path), query, "--format", "json"])
    assert json.loads(records.stdout) == [{"n": n} for n in range(50)] and not records.stderr
    # a hostile pass: a table of 5,000 columns and 3,000 rows took 220 s and 11 GB
    monkeypatch.setattr(db, "SHOWN_COLUMNS", 3)
    wide = "SELECT 10 AS c0, 11 AS c1, 12 AS c2, 13 AS c3, 14 AS c4"
    shown = runner.invoke(app, ["db", str(path), wide])
    assert " c2 " in shown.stdout and "c3" not in shown.stdout and " 12 " in shown.stdout
    assert "note: the first 3 columns are shown, and more follow: --format csv" in shown.stderr
    every = runner.invoke(app, ["db", str(path), wide, "--format", "csv"])
    assert every.stdout.splitlines() == ["c0,c1,c2,c3,c4", "10,11,12,13,14"]


def test_db_shows_the_first_characters_of_a_long_text_and_writes_it_whole_as_csv(
    tmp_path, monkeypatch
):
    """A hostile pass: a table of 10,000 answers of 100,000 characters took 111 s and
    3.1 GB to show. A table shows the first SHOWN_CHARS characters of a text (cut in the
    query: the rest is never read into memory), of any type DuckDB says as text, and says
    so; CSV and JSON write them whole."""
    import numerate.cli.db as db

    monkeypatch.setattr(db, "SHOWN_CHARS", 12)
    path = tmp_path / "x.duckdb"
    duckdb.connect(str(path)).close()
    query = ("SELECT repeat('é', 13) AS long, repeat('a', 12) AS fits, [1, 2, 3, 4, 5] AS list, "
             "repeat('b', 13) AS n")  # fmt: skip
    shown = runner.invoke(app, ["db", str(path), query])
    assert shown.exit_code == 0, shown.output
    assert "é" * 12 + "..." in shown.stdout and "é" * 13 not in shown.stdout  # characters
    assert " " + "a" * 12 + " " in shown.stdout and "[1, 2, 3, 4,..." in shown.stdout
    assert "texts longer than 12 characters are cut (...): --format csv or json" in shown.stderr
    fitting = runner.invoke(app, ["db", str(path), "SELECT repeat('a', 12) AS fits"])
    assert " " + "a" * 12 + " " in fitting.stdout and not fitting.stderr
    whole = runner.invoke(app, ["db", str(path), query, "--format", "csv"])
    assert whole.stdout.splitlines()[1] == f'{"é" * 13},{"a" * 12},"[1, 2, 3, 4, 5]",{"b" * 13}'
    assert not whole.stderr


def test_report_shows_a_table_of_its_first_points_and_writes_every_one_as_json(
    two_runs, monkeypatch
):
    """A hostile sweep: `report --points` of a run of 200,000 grid points took 458 s and
    2.4 GB to lay its table out. A table shows the first SHOWN_ROWS rows, as `db` does, and
    says how many there are; JSON and Markdown write every one."""
    import json

    import numerate.cli.db as db

    run = run_ids(two_runs)[1]
    every = runner.invoke(app, ["report", "--db", two_runs, "--run", run, "--points",
                                "--format", "json"])  # fmt: skip
    points = json.loads(every.stdout)["points"]
    assert len(points) > 3 and not every.stderr
    monkeypatch.setattr(db, "SHOWN_ROWS", 3)
    shown = runner.invoke(app, ["report", "--db", two_runs, "--run", run, "--points"])
    assert shown.exit_code == 0, shown.output
    assert (
        f"note: grid points: the first 3 of {len(points)} rows are shown: --format json or "
        "markdown writes every row"  # not CSV: it holds one table, and --points adds one
    ) in shown.stderr.splitlines()
    alone = runner.invoke(app, ["report", "--db", two_runs, "--run", run])
    assert "rows are shown: --format csv, json or markdown writes every row" in alone.stderr
    table = shown.stdout.split("grid points")[1]
    assert {p["point_key"] for p in points} == {"default"}  # a row each: one a line
    assert table.count("default") == 3
    markdown = runner.invoke(app, ["report", "--db", two_runs, "--run", run, "--points",
                                   "--format", "markdown"])  # fmt: skip
    assert markdown.stdout.split("grid points")[1].count("default") == len(points)
    assert not markdown.stderr


def test_a_table_title_is_shown_escaped_and_as_written(tmp_path):
    """A hostile pass: a run id a database was made to hold (an escape sequence) came out raw
    in the title of `report`'s and `compare`'s tables; rich read `[b]` in it as markup."""
    import polars as pl

    from numerate.results.report import render

    shown = render(pl.DataFrame({"a": [1]}), "table", title="run \x1b]0;x\x07 [b]y[/b]")
    assert "\x1b" not in shown  # the title is wrapped to the table's width:
    assert "run\\x1b]0;x\\x07[b]y[/b]" in "".join(shown.split())


def test_db_shows_values_as_they_are_not_as_a_report_rounds_them(tmp_path):
    """A hostile pass: `db --format markdown` (documented as writing every row whole) wrote
    1e-10 as 0.000 and 0.123456789 as 0.123, true as True, and NULL as `-`, as the text `-`."""
    path = tmp_path / "x.duckdb"
    duckdb.connect(str(path)).close()
    query = "SELECT 1e-10::DOUBLE AS b, 0.123456789::DOUBLE AS a, true AS t, NULL AS n, '-' AS s"
    markdown = runner.invoke(app, ["db", str(path), query, "--format", "markdown"])
    assert markdown.stdout.splitlines()[2] == "| 1e-10 | 0.123456789 | true | NULL | - |"
    table = runner.invoke(app, ["db", str(path), query])
    assert re.search(r"1e-10 .* 0\.123456789 .* true .* NULL .* - ", table.stdout), table.stdout
    csv = runner.invoke(app, ["db", str(path), query, "--format", "csv"])
    assert csv.stdout.splitlines()[1] == "1e-10,0.123456789,true,,-"  # as before


def test_db_says_an_error_met_midway_leaves_what_it_wrote_incomplete(tmp_path):
    """A hostile pass: an error met after rows were written said only DuckDB's line, as if
    nothing had been. A statement without a table wrote an empty CSV line and a Markdown
    table of no column (`|  |`, `||`)."""
    path = tmp_path / "x.duckdb"
    duckdb.connect(str(path)).close()
    query = "SELECT CASE WHEN range = 500000 THEN error('boom') ELSE range END FROM range(1000000)"
    done = runner.invoke(app, ["db", str(path), query, "--format", "csv"])
    rows = len(done.stdout.splitlines()) - 1
    assert done.exit_code == 2 and 0 < rows < 500_000, done.stderr
    said = "(Invalid Input Error: boom|INTERRUPT Error: Interrupted!)"  # DuckDB says either
    assert re.fullmatch(  # (its query's other threads are stopped: a race of its own)
        f"error: {said} \\(met after {rows:,} rows were written: the output is incomplete\\)\n",
        done.stderr,
    ), done.stderr
