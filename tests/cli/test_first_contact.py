"""The first-contact repros (issue: "First contact"): each misleading message or silent
success seen by a new user, as a test. One `error:` line per problem, exit 2, nothing
created."""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from numerate.cli import app

runner = CliRunner()


def one_error(result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) >= 1 and all(line.startswith("error: ") for line in lines), lines
    assert "Traceback" not in result.stderr
    return result.stderr


@pytest.mark.parametrize(
    "arguments",
    [
        ["run", "--db", ""],
        ["run", "--db", "   "],
        ["report", "--db", ""],
        ["runs", "--db", " "],
        ["upgrade", "--db", ""],
        ["ingest", ""],
        ["ingest", "  "],
        ["cache", "clear", "--db", ""],
    ],
)
def test_an_empty_path_never_means_here(tmp_path, monkeypatch, arguments):
    monkeypatch.chdir(tmp_path)
    text = one_error(runner.invoke(app, arguments))
    assert repr(arguments[-1]) in text  # the path as given, quoted: '' or '   '
    assert list(tmp_path.iterdir()) == []  # no ./results, no database


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--model", "baseline:oracle", "--db", "x.duckdb/"],
        ["numgen", "run", "--count", "1", "--db", "x.duckdb/"],
        ["numgen", "calibrate", "--detector", "blobs", "--count", "1", "--db", "new/c.duckdb/"],
        ["runs", "--db", "x.duckdb/"],
    ],
)
def test_a_database_path_ending_with_a_slash_is_refused_before_anything(
    tmp_path, monkeypatch, command
):
    """Corpus K: `run --db x.duckdb/` ran the whole run into `x.duckdb`, then ended in a
    97-line traceback (its journal is `x.duckdb/.journal`); `numgen run` stored its run in
    `x.duckdb`, then a traceback. A path ending with / names a folder: refused at once."""
    monkeypatch.chdir(tmp_path)
    assert "a folder's name (it ends with /)" in one_error(runner.invoke(app, command))
    assert list(tmp_path.iterdir()) == []


def test_a_readers_path_from_numerate_db_is_said_with_the_variable(tmp_path, monkeypatch):
    """A path the user did not type, said without the variable that gave it, sent them
    looking for a lost file (`no results database at ...`) or a folder: the variable is
    named (once, not once per path of the slash test above)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NUMERATE_DB", "env.duckdb/")
    said = one_error(runner.invoke(app, ["runs"]))
    assert "NUMERATE_DB env.duckdb/: a folder's name" in said
    monkeypatch.setenv("NUMERATE_DB", str(tmp_path))  # corpus L: the variable was not named
    said = one_error(runner.invoke(app, ["runs"]))
    assert f"NUMERATE_DB {tmp_path}: a folder; give the results database's file" in said
    missing = tmp_path / "nowhere.duckdb"
    monkeypatch.setenv("NUMERATE_DB", str(missing))
    for reading in (["runs"], ["report"], ["view", "--export", str(tmp_path / "pages")]):
        said = one_error(runner.invoke(app, reading))
        assert said.startswith(f"error: NUMERATE_DB: no results database at {missing}"), reading
    said = one_error(runner.invoke(app, ["runs", "--db", str(missing)]))
    assert said.startswith(f"error: no results database at {missing}")  # the path typed
    # a hostile pass: a newline in the variable made a second error line of its own, and
    # `run` began a flow run before it blamed `--db`
    monkeypatch.setenv("NUMERATE_DB", "a\nb.duckdb")
    for command in (["runs"], ["run"]):
        said = one_error(runner.invoke(app, command))
        expected = "error: NUMERATE_DB 'a\\nb.duckdb': a path with a control character"
        assert said == f"{expected} (a newline?)\n", command
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "command",
    [
        ["grade", "{file}/"],
        ["run", "--config", "{file}/"],
        ["numgen", "score", "--responses", "{file}/"],
    ],
)
def test_a_file_named_with_a_slash_after_it_is_refused_as_cat_refuses_it(tmp_path, command):
    """Corpus K: `grade resp.jsonl/` read `resp.jsonl` and exited 0 (`cat resp.jsonl/`: "Not
    a directory")."""
    import subprocess
    import sys

    file = tmp_path / "given"
    file.write_text("target,generated\n1,1\n")
    arguments = [part.format(file=file) for part in command]  # the parser's own error: as
    done = subprocess.run(
        [sys.executable, "-m", "numerate.cli", *arguments],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )  # the command prints it
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("error: ")
    assert f"{file}/: a folder's name (it ends with /), and {file} is a file" in done.stderr


@pytest.mark.parametrize("command", [["report"], ["runs"], ["upgrade"], ["regrade", "--run", "x"]])
def test_a_folder_given_as_a_database_is_one_line(tmp_path, command):
    folder = tmp_path / "folder.duckdb"
    folder.mkdir()
    text = one_error(runner.invoke(app, [*command, "--db", str(folder)]))
    assert "folder" in text
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("command", [["upgrade"], ["report"], ["runs"]])
def test_a_duckdb_file_of_something_else_is_refused_and_left_as_it_was(tmp_path, command):
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE inventory (item VARCHAR)")
    con.close()
    text = one_error(runner.invoke(app, [*command, "--db", str(other)]))
    assert "not" in text and "numerate" in text
    con = duckdb.connect(str(other), read_only=True)
    found = con.execute("SELECT table_name FROM information_schema.tables").fetchall()
    tables = [row[0] for row in found]
    con.close()
    assert tables == ["inventory"]  # no numerate table added beside it


def test_a_grade_line_of_the_wrong_shape_says_which_shape_in_one_line(tmp_path):
    half = tmp_path / "half.jsonl"
    half.write_text(json.dumps({"manifold": "objects", "index": 0, "response": "Answer: 3"}))
    text = one_error(runner.invoke(app, ["grade", str(half), "--out", str(tmp_path / "o.jsonl")]))
    assert len(text.strip().splitlines()) == 1
    assert "half.jsonl line 1" in text and "`numerate generate objects`" in text
    assert "items" in text
    assert not (tmp_path / "o.jsonl").exists()


def test_every_line_of_a_many_problem_error_has_the_prefix(tmp_path):
    config = tmp_path / "empty.yaml"
    config.write_text("name: x\nmanifolds: []\n")
    text = one_error(runner.invoke(app, ["run", "--config", str(config)]))
    assert "manifolds" in text and "models" in text
    assert len(text.strip().splitlines()) == 2


def test_artifacts_name_the_database_by_its_absolute_path(tmp_path, monkeypatch):
    from numerate.results.artifacts import absolute

    monkeypatch.chdir(tmp_path)
    assert absolute("reuse.duckdb") == str(tmp_path / "reuse.duckdb")
    assert absolute("s3://bucket/results") == "s3://bucket/results"
    assert absolute("/abs/r.duckdb") == "/abs/r.duckdb"


def oracle_sweep(folder, **fields):
    """s.yaml in `folder`: the oracle baseline on two objects cases, with `fields` added."""
    config = folder / "s.yaml"
    sweep = {
        "name": "s",
        "models": [{"name": "o", "model": "baseline:oracle"}],
        "manifolds": [{"manifold": "objects", "count": 2}],
    }
    config.write_text(json.dumps({**sweep, **fields}))
    return config


def test_a_database_no_file_can_be_at_is_refused_as_the_input_s_fault(tmp_path):
    """A hostile pass: `numgen run` and `numgen calibrate` said a `--db` whose name is too
    long for the file system as OSError's `[Errno 36]` line, exit 3 (the machine's fault),
    where the other commands said it as the input's, exit 2."""
    long = str(tmp_path / ("d" * 300))
    for command in (["numgen", "run", "--count", "1", "--images-dir", str(tmp_path / "i")],
                    ["numgen", "calibrate", "--detector", "blobs", "--count", "1"],
                    ["run"], ["report"]):  # fmt: skip
        line = one_error(runner.invoke(app, [*command, "--db", long]))
        assert "Errno" not in line and "File name too long" in line, line
    assert not (tmp_path / "i").exists()


def test_a_database_that_is_a_looping_link_or_truncated_is_one_line(tmp_path):
    """`--db` a symbolic link to itself, or a DuckDB file cut short: one error line naming
    the file, no traceback (RuntimeError and DuckDB's IOException before). A file cut short
    is said so when it is opened, by every command: a run failed only at its end (exit 3, a
    `.wal` left beside the file), a report said DuckDB's "Could not read enough bytes"."""
    (tmp_path / "loop.duckdb").symlink_to("loop.duckdb")
    config = oracle_sweep(tmp_path)
    sweep = ["run", "--config", str(config), "--format", "json"]
    looped = runner.invoke(app, [*sweep, "--db", str(tmp_path / "loop.duckdb")])
    assert "a symbolic link that loops" in one_error(looped)
    for reader in (["report", "--db"], ["db"]):  # "no results database at ..." before
        read = runner.invoke(app, [*reader, str(tmp_path / "loop.duckdb")])
        assert "loop.duckdb: a symbolic link that loops" in one_error(read)
    (tmp_path / "far.duckdb").symlink_to(tmp_path / "nowhere" / "z.duckdb")
    far = runner.invoke(app, [*sweep, "--db", str(tmp_path / "far.duckdb")])  # DuckDB's
    assert "far.duckdb: a symbolic link to " in one_error(far)  # IO Error named the link
    assert "whose folder does not exist" in far.stderr
    whole = tmp_path / "whole.duckdb"
    done = runner.invoke(app, [*sweep, "--db", str(whole)])
    assert done.exit_code == 0, done.output
    cut = tmp_path / "cut.duckdb"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size * 2 // 3])
    before = cut.read_bytes()
    pages = str(tmp_path / "pages")
    for command in (
        [*sweep, "--db", str(cut)], ["report", "--db", str(cut)], ["runs", "--db", str(cut)],
        ["upgrade", "--db", str(cut)], ["db", str(cut)],
        ["view", "--db", str(cut), "--export", pages],
    ):  # fmt: skip
        said = one_error(runner.invoke(app, command))
        # where DuckDB's version lays its metadata decides which: past what it reads to open
        # the file ("its tables need ..."), or inside it ("it ends at byte ...")
        assert f"{cut}: the file is cut short: " in said, said
    assert cut.read_bytes() == before  # nothing written: a run failed at its end (exit 3)
    from numerate.cli.run import announce_start

    assert announce_start(str(cut)) is None  # no journal beside it, not even for a moment
    journal = announce_start(str(whole))
    assert journal is not None
    journal.close()
    cut.write_bytes(whole.read_bytes()[:100_000])  # inside what DuckDB reads at open
    for command in ([*sweep, "--db", str(cut)], ["report", "--db", str(cut)], ["db", str(cut)]):
        said = one_error(runner.invoke(app, command))  # DuckDB's "Could not read enough bytes"
        assert f"{cut}: the file is cut short: it ends at byte 100,000, inside what" in said
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cut.duckdb", "far.duckdb", "loop.duckdb", "s.yaml", "whole.duckdb"]  # fmt: skip


def test_a_database_under_the_home_folder_s_tilde_is_the_home_folder_s(tmp_path, monkeypatch):
    """A hostile pass: `--db '~/t.duckdb'` (quoted, or `db: ~/t.duckdb` in a config) made the
    file in the home folder (DuckDB reads `~`), then numerate's own checks, looking for a
    folder named `~`, called it damaged: exit 2 with a database left behind."""
    home, here = tmp_path / "home", tmp_path / "here"
    home.mkdir()
    here.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(here)
    sweep = ["run", "--config", str(oracle_sweep(here)), "--format", "json"]
    assert runner.invoke(app, [*sweep, "--db", "~/t.duckdb"]).exit_code == 0
    configured = oracle_sweep(here, db="~/c.duckdb")
    assert runner.invoke(app, ["run", "--config", str(configured)]).exit_code == 0
    monkeypatch.setenv("NUMERATE_DB", "~/t.duckdb")
    listed = runner.invoke(app, ["runs", "--format", "json"])
    assert listed.exit_code == 0 and len(json.loads(listed.stdout)) == 1
    assert sorted(p.name for p in home.iterdir() if p.suffix == ".duckdb") == [
        "c.duckdb", "t.duckdb"]  # fmt: skip
    assert sorted(p.name for p in here.iterdir()) == ["s.yaml"]  # no folder named ~


def test_a_database_that_shrank_after_a_drop_is_not_taken_for_one_cut_short(tmp_path):
    """DuckDB's header keeps counting the blocks a dropped table freed once the file is
    truncated to the blocks in use: the check reads which blocks the tables use."""
    db = tmp_path / "r.duckdb"
    sweep = ["run", "--config", str(oracle_sweep(tmp_path)), "--format", "json", "--db", str(db)]
    assert runner.invoke(app, sweep).exit_code == 0
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE scratch AS SELECT range AS x, random() AS y FROM range(2000000)")
    con.execute("CHECKPOINT")
    grown = db.stat().st_size
    con.execute("DROP TABLE scratch")
    con.execute("CHECKPOINT")
    con.close()
    assert db.stat().st_size < grown  # the case in question
    assert runner.invoke(app, ["report", "--db", str(db)]).exit_code == 0
    assert runner.invoke(app, sweep).exit_code == 0


@pytest.mark.parametrize("where", ["{file}", "{file}/pages"])
def test_a_view_dir_that_cannot_be_a_folder_is_refused_before_the_run(tmp_path, where):
    """Before: a sweep whose view_dir was a file ran to the end, exit 0, and its pages were
    silently not written. Now the run is refused first: one line, nothing made."""
    planted = tmp_path / "planted"
    planted.write_text("a file")
    config = oracle_sweep(tmp_path, view_dir=where.replace("{file}", str(planted)))
    db = tmp_path / "r.duckdb"
    text = one_error(runner.invoke(app, ["run", "--config", str(config), "--db", str(db)]))
    assert text.startswith("error: view_dir ") and f"{planted}" in text
    assert "a file, not a folder" in text
    assert sorted(tmp_path.iterdir()) == [planted, config]  # no database


@pytest.mark.parametrize(
    "command",
    [["report"], ["runs"], ["upgrade"], ["cache", "clear"], ["regrade", "--run", "x"], ["run"]],
)
@pytest.mark.parametrize("kind", ["pipe", "device"])
def test_a_pipe_or_device_given_as_a_database_is_one_line_at_once(tmp_path, command, kind):
    """Before: "no results database at /dev/zero" (it exists), and `run --db` a named pipe
    waited for a writer until it was killed."""
    import os

    if kind == "pipe":
        db = tmp_path / "pipe.duckdb"
        os.mkfifo(db)
    else:
        db = "/dev/zero"
    extra = ["--config", str(oracle_sweep(tmp_path))] if command == ["run"] else []
    text = one_error(runner.invoke(app, [*command, *extra, "--db", str(db)]))
    assert f"{db}" in text and "not a regular file (a device, a pipe or a socket)" in text


def test_upgrade_reads_every_table_and_names_a_truncated_file(tmp_path):
    """Before: a DuckDB file with a damaged block opened, its schema table read, and
    `upgrade` said it was up to date (exit 0)."""
    whole = tmp_path / "whole.duckdb"
    sweep = ["run", "--config", str(oracle_sweep(tmp_path)), "--format", "json"]
    assert runner.invoke(app, [*sweep, "--db", str(whole)]).exit_code == 0
    assert runner.invoke(app, ["upgrade", "--db", str(whole)]).exit_code == 0
    damaged = tmp_path / "damaged.duckdb"
    con = duckdb.connect(str(whole), read_only=True)
    (block,) = con.execute(
        "SELECT max(block_id) FROM pragma_storage_info('cases') WHERE persistent"
    ).fetchone()
    (block_size,) = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()
    con.close()
    content = bytearray(whole.read_bytes())
    at = 3 * 4096 + block * block_size + 100  # in a block of `cases`: its checksum fails
    content[at : at + 64] = b"\xff" * 64
    damaged.write_bytes(content)
    text = one_error(runner.invoke(app, ["upgrade", "--db", str(damaged)]))
    assert f"results database {damaged}: table " in text
    assert "(a damaged or truncated file)" in text


def test_deploy_to_an_api_that_never_answers_says_so_within_seconds(monkeypatch):
    """Before: nothing for 60 s (Prefect's client timeout), per try."""
    import socket
    import time

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # connections are accepted by the kernel, never answered
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/api"
        monkeypatch.setenv("PREFECT_API_URL", url)
        started = time.monotonic()
        text = one_error(runner.invoke(app, ["deploy"]))
        took = time.monotonic() - started
    assert text == (
        f"error: PREFECT_API_URL {url}: Prefect's API cannot be reached (no answer within 5 s); "
        "start a server (prefect server start) or fix the URL\n"
    )
    assert took < 15, took


def test_deploy_to_a_server_that_is_no_prefect_says_so_not_pydantic_s_link(monkeypatch):
    """A server whose /health answers `true` and everything else other JSON: the error was
    the last line of Prefect's traceback, "For further information visit https://errors..."."""
    import http.server
    import threading

    class NotPrefect(http.server.BaseHTTPRequestHandler):
        def answer(self):
            body = b"true" if self.path.endswith("/health") else b'{"ok": 1}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_PATCH = answer

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotPrefect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{server.server_port}/api")
        text = one_error(runner.invoke(app, ["deploy"]))
    finally:
        server.shutdown()
    assert "creating the work pool cpu failed: PREFECT_API_URL answers what Prefect 3." in text
    assert "validation errors for WorkPool" in text and "errors.pydantic.dev" not in text


@pytest.mark.parametrize("value", ["0", "abc", "-5", "nan"])
def test_a_bad_flush_interval_is_refused_before_the_run(tmp_path, monkeypatch, value):
    """Before: the flush thread died with a traceback, and the run went on and exited 0."""
    monkeypatch.setenv("NUMERATE_FLUSH_SECONDS", value)
    db = tmp_path / "r.duckdb"
    result = runner.invoke(app, ["run", "--config", str(oracle_sweep(tmp_path)), "--db", str(db)])
    text = one_error(result)
    assert text == (
        f"error: NUMERATE_FLUSH_SECONDS={value!r}: expected seconds, more than 0 and at most 3600\n"
    )
    assert not db.exists()


@pytest.mark.parametrize(("value", "seconds"), [("", 2.0), ("  ", 2.0), ("0.5", 0.5)])
def test_a_blank_flush_interval_is_the_default(monkeypatch, value, seconds):
    """As every NUMERATE_* setting: a blank one counts as unset (it was refused)."""
    from numerate.store.writer import flush_seconds

    monkeypatch.setenv("NUMERATE_FLUSH_SECONDS", value)
    assert flush_seconds() == seconds


LONG = "a" * 300  # one name longer than the file system allows (255 bytes)


@pytest.mark.parametrize(
    "arguments",
    [
        ["generate", "objects", "--count", "1", "--out", f"{LONG}.jsonl"],
        ["runs", "--db", f"{LONG}.duckdb"],
        ["upgrade", "--db", f"{LONG}.duckdb"],
        ["cache", "clear", "--db", f"{LONG}.duckdb"],
        ["numgen", "report", "--db", f"{LONG}.duckdb"],
        ["numgen", "prompts", "--out", f"{LONG}.txt"],
        ["run", "--model", "baseline:oracle", "--db", f"{LONG}.duckdb"],
        ["numgen", "run", "--count", "1", "--db", "x.duckdb", "--images-dir", LONG],
    ],
)
def test_a_name_longer_than_the_file_system_allows_is_one_line(tmp_path, monkeypatch, arguments):
    """Before: an OSError traceback (File name too long) from every output and --db path."""
    monkeypatch.chdir(tmp_path)
    text = one_error(runner.invoke(app, arguments))
    assert "File name too long" in text and len(text.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"PREFECT_API_URL": "garbage"},
         "PREFECT_API_URL garbage is not a valid URL: it does not start with http:// or https://"),
        ({"PREFECT_API_URL": "http://127.0.0.1:9/api"}, "cannot be reached ([Errno 111]"),
        # Prefect's settings refused it first, naming `PREFECT={}`
        ({"PREFECT_API_URL": "http://[::1"},
         "PREFECT_API_URL http://[::1 is not a valid URL: Invalid IPv6 URL"),
        ({"NUMERATE_SERVER": "temporary", "PREFECT_HOME": "/dev/null"},
         "PREFECT_HOME '/dev/null': a device, a pipe or a socket, not a folder"),
        ({"NUMERATE_SERVER": "temporary", "PREFECT_HOME": "{file}"}, "a file, not a folder"),
        ({"NUMERATE_SERVER": "background", "PREFECT_HOME": "{file}"}, "a file, not a folder"),
    ],
)  # fmt: skip
def test_a_prefect_api_or_home_that_cannot_work_is_one_line_before_anything(
    tmp_path, monkeypatch, variables, message
):
    """Before: a RuntimeError traceback (Failed to reach API at garbage/), or 25 s of silence
    and a traceback for a PREFECT_HOME that is a file; an empty database was left each time."""
    planted = tmp_path / "planted"
    planted.write_text("a file")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value.replace("{file}", str(planted)))
    config = oracle_sweep(tmp_path)
    db = tmp_path / "r.duckdb"
    text = one_error(runner.invoke(app, ["run", "--config", str(config), "--db", str(db)]))
    assert message in text and len(text.strip().splitlines()) == 1
    assert sorted(tmp_path.iterdir()) == [planted, config]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"params": {"length": -5}}, "a.jsonl line 1: params: length = -5: Input should be"),
        ({"params": {"bogus": 1}}, "a.jsonl line 1: params: bogus = 1: Extra inputs are not"),
        ({"zz": "NaN"}, "a.jsonl line 1: NaN is not a JSON value (write a number or null)"),
    ],
)
def test_a_graded_line_no_generator_could_write_is_refused(tmp_path, change, message):
    """Before: graded, exit 0 (and a NaN was written back out: a line no JSON reader takes)."""
    made = runner.invoke(app, ["generate", "objects", "--count", "1"])
    case = {**json.loads(made.stdout), "response": "Answer: 3"}
    if "params" in change:
        case["params"] = {**case["params"], **change["params"]}
        line = json.dumps(case)
    else:
        line = json.dumps(case)[:-1] + ', "zz": NaN}'
    (tmp_path / "a.jsonl").write_text(line + "\n")
    out = tmp_path / "o.jsonl"
    text = one_error(runner.invoke(app, ["grade", str(tmp_path / "a.jsonl"), "--out", str(out)]))
    assert text.startswith("error: ") and message in text
    assert not out.exists()


@pytest.mark.parametrize("command", [["runs"], ["upgrade"], ["run", "--model", "baseline:oracle"]])
@pytest.mark.parametrize("kind", ["sqlite", "text"])
def test_a_file_that_is_no_duckdb_database_is_named_for_what_it_is(tmp_path, command, kind):
    """Before: a SQLite file made DuckDB fetch its sqlite extension (a network wait; here
    "Loading external extensions is disabled"), and a text file gave DuckDB's IO Error."""
    import sqlite3

    db = tmp_path / "other.duckdb"
    if kind == "sqlite":
        con = sqlite3.connect(db)
        con.execute("CREATE TABLE a (x)")
        con.commit()
        con.close()
        said = "a SQLite database, not a DuckDB one"
    else:
        db.write_text("hello, this is no database at all\n")
        said = "not a DuckDB database file"
    before = db.read_bytes()
    text = one_error(runner.invoke(app, [*command, "--db", str(db)]))
    assert said in text and str(db) in text
    assert db.read_bytes() == before and sorted(tmp_path.iterdir()) == [db]


@pytest.mark.parametrize("command", [["runs"], ["report"]])
def test_a_reader_names_the_database_whose_block_fails_its_checksum(tmp_path, command):
    """A hostile sweep: `numerate runs` on a file with a damaged block said only DuckDB's
    `IO Error: Corrupt database file: ...`, naming no database."""
    whole = tmp_path / "whole.duckdb"
    sweep = ["run", "--config", str(oracle_sweep(tmp_path)), "--format", "json"]
    assert runner.invoke(app, [*sweep, "--db", str(whole)]).exit_code == 0
    table = "runs" if command == ["runs"] else "responses"
    con = duckdb.connect(str(whole), read_only=True)
    (block,) = con.execute(
        f"SELECT max(block_id) FROM pragma_storage_info('{table}') WHERE persistent"
    ).fetchone()
    (block_size,) = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()
    con.close()
    damaged = tmp_path / "damaged.duckdb"
    content = bytearray(whole.read_bytes())
    at = 3 * 4096 + block * block_size + 100  # in a block of the table: its checksum fails
    content[at : at + 64] = b"\xff" * 64
    damaged.write_bytes(content)
    text = one_error(runner.invoke(app, [*command, "--db", str(damaged)]))
    assert f"results database {damaged} cannot be read: " in text and "Corrupt database" in text
    assert f"`numerate upgrade --db {damaged}` names the table" in text


@pytest.mark.parametrize("command", [["upgrade"], ["run", "--model", "baseline:oracle"]])
def test_a_database_whose_blocks_fail_their_checksum_is_one_line(tmp_path, command):
    """Before: DuckDB's `Corrupt database file: computed checksum ...` as a traceback."""
    whole = tmp_path / "whole.duckdb"
    sweep = ["run", "--config", str(oracle_sweep(tmp_path)), "--format", "json"]
    assert runner.invoke(app, [*sweep, "--db", str(whole)]).exit_code == 0
    damaged = tmp_path / "damaged.duckdb"
    data = bytearray(whole.read_bytes())
    for block in range(1, (len(data) - 12288) // 262144):  # every block's content, not its header
        start = 12288 + 262144 * block + 50
        data[start : start + 64] = b"garbage!" * 8
    damaged.write_bytes(bytes(data))
    result = runner.invoke(app, [*command, "--db", str(damaged)])
    assert result.exit_code == 2 and "Traceback" not in result.output  # refused as it opens
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "Corrupt database file" in last, result.stderr


def test_a_prefect_api_that_says_headers_then_nothing_or_is_no_prefect_is_one_line(
    tmp_path, monkeypatch
):
    """Before: a server that sent its headers and then nothing passed the check, and the run
    hung in Prefect's client (60 s a try); a 404 at /health counted as an answer."""
    import http.server
    import threading
    import time

    class Odd(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if "/page/" in self.path:  # a web server, not Prefect: 200 and a page
                self.send_response(200)
                self.send_header("Content-Length", "15")
                self.end_headers()
                self.wfile.write(b"<html>hi</html>")
            elif "/hang/" in self.path:
                self.send_response(200)
                self.send_header("Content-Length", "1000")
                self.end_headers()
                self.wfile.flush()
                time.sleep(8)
            else:
                self.send_response(404)
                self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Odd)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    config = oracle_sweep(tmp_path)
    db = tmp_path / "r.duckdb"
    try:
        for url, said in (
            (f"{base}/hang/api", "cannot be reached (no answer within 5 s)"),
            (f"{base}/api", f"not a Prefect API (HTTP 404 at {base}/api/health)"),
            (
                f"{base}/page/api",
                f"not a Prefect API ({base}/page/api/health answers "
                "'<html>hi</html>', not Prefect's true)",
            ),  # a traceback before
        ):
            monkeypatch.setenv("PREFECT_API_URL", url)
            text = one_error(runner.invoke(app, ["run", "--config", str(config), "--db", str(db)]))
            assert said in text
    finally:
        server.shutdown()
    assert not db.exists()


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("PREFECT_LOGGING_LEVEL", "LOUD", "PREFECT_LOGGING_LEVEL='LOUD': Input should be 'DEBUG'"),
        ("PREFECT_API_REQUEST_TIMEOUT", "soon", "PREFECT_API_REQUEST_TIMEOUT='soon': Input should"),
        ("PREFECT_HOME", "", "PREFECT_HOME='': an empty path would mean here"),
        ("NUMERATE_LOCK_TIMEOUT", "forever", "NUMERATE_LOCK_TIMEOUT='forever': expected a number"),
        ("NUMERATE_LOCK_TIMEOUT", "1e308", "seconds from 0 to 604800 (a week)"),  # was taken
        # corpus L: a log that could not be written was silently none, exit 0
        ("NUMERATE_LOCK_LOG", "/", "NUMERATE_LOCK_LOG='/': cannot be written (Is a directory)"),
        ("NUMERATE_LOCK_LOG", "/nonexistent/x.log", "cannot be written (No such file or"),
        # a hostile pass: a named pipe kept every command waiting, with no word
        ("NUMERATE_LOCK_LOG", "a named pipe", "cannot be written (No such device or address)"),
    ],
)
def test_a_setting_in_the_environment_that_cannot_work_is_one_line(
    tmp_path, variable, value, message
):
    """Before: pydantic's traceback at Prefect's import; Prefect's database written in the
    current folder for an empty PREFECT_HOME; a NUMERATE_LOCK_TIMEOUT nobody checked until
    another process held the file."""
    import subprocess
    import sys

    from tests.cli.test_run import numerate_env

    if value == "a named pipe":
        os.mkfifo(value := str(tmp_path / "lock.fifo"))
    env = {**numerate_env(tmp_path / "prefect"), variable: value}
    config = oracle_sweep(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "numerate.cli", "run", "--config", str(config), "--db", "r.duckdb"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1
    assert message in done.stderr
    assert not (tmp_path / "r.duckdb").exists() and not (tmp_path / "prefect.db").exists()


def test_empty_values_that_meant_everything_are_refused(tmp_path):
    """`db PATH ''` listed the tables, `cache clear --model ''` removed nothing and said so,
    an object named twice dealt its prompts twice: each is one line now."""
    import duckdb

    path = tmp_path / "x.duckdb"
    duckdb.connect(str(path)).close()
    assert "SQL ' ': give a query" in one_error(runner.invoke(app, ["db", str(path), " "]))
    # the positional PATH was named `--db ''`; several statements showed the last one's rows,
    # comments alone printed nothing
    assert "PATH '': give a path" in one_error(runner.invoke(app, ["db", "", "select 1"]))
    # a newline in a path tore the message in two ("no results database at b.duckdb" and
    # "error:  (run ...)"), the file being there
    torn = runner.invoke(app, ["db", f"{path}\n", "select 1"])
    assert f"PATH '{path}\\n': a path with a control character" in one_error(torn)
    torn = runner.invoke(app, ["report", "--db", f"{path}\n"])
    assert f"--db '{path}\\n': a path with a control character" in one_error(torn)
    torn = runner.invoke(app, ["generate", "objects", "--out", "x\n.jsonl"])
    assert "'x\\n.jsonl': a path with a control character" in torn.stderr
    both = runner.invoke(app, ["db", str(path), "select 1; select 2"])
    assert "the SQL holds 2 statements as DuckDB reads it" in one_error(both)
    comment = runner.invoke(app, ["db", str(path), "/* a comment */ ;"])
    assert "the SQL holds no statement (only comments?)" in one_error(comment)
    assert runner.invoke(app, ["db", str(path), "select 1;"]).exit_code == 0
    cleared = runner.invoke(app, ["cache", "clear", "--db", str(path), "--model", ""])
    assert "--model '': give an endpoint model id" in one_error(cleared)
    twice = runner.invoke(app, ["numgen", "prompts", "--object", "dogs", "--object", "dogs"])
    assert "--object: 'dogs' is named twice" in one_error(twice)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--size", "64"], "error: --size 64: the synthetic generator with the blobs detector"),
        (["--object", ""], "error: --object: object 1 of 1 is an empty name"),
        # a hostile pass: these said the list as Python writes it (['a', 'A'])
        (["--object", "a", "--object", "A"], "error: --object: 'a' is named twice ('a', 'A')"),
        (["--detector", "blobs", "--detector", "blobs"],
         "error: --detector: 'blobs' is named twice (each counter"),
        (["--images-dir", "/dev/null"], "error: --images-dir '/dev/null': "),
        (["--generator", "random", "--detector", "blobs"],
         "error: --detector 'blobs': the random baseline answers counts itself"),
    ],
)  # fmt: skip
def test_a_numgen_option_checked_with_the_whole_config_is_named_as_given(tmp_path, options, said):
    """A hostile sweep: these said the config's fields (`numgen config: generation.height =
    64: ...`, `prompts: objects contains an empty name`), not the options the user typed."""
    images = [] if "--images-dir" in options else ["--images-dir", str(tmp_path / "imgs")]
    done = runner.invoke(app, ["numgen", "run", "--count", "1", "--db", str(tmp_path / "r.duckdb"),
                               *images, *options])  # fmt: skip
    assert said in one_error(done)
    assert not (tmp_path / "r.duckdb").exists()


def test_a_file_with_a_byte_order_mark_is_read(tmp_path):
    """A JSON Lines file saved with a BOM was refused ("Unexpected UTF-8 BOM")."""
    made = runner.invoke(app, ["generate", "objects", "--count", "1"])
    line = json.dumps({**json.loads(made.stdout), "response": "Answer: 3"})
    (tmp_path / "a.jsonl").write_text("\ufeff" + line + "\n", encoding="utf-8")
    graded = runner.invoke(app, ["grade", str(tmp_path / "a.jsonl")])
    assert graded.exit_code == 0, graded.output
    assert json.loads(graded.stdout)["outcome"] in ("correct", "wrong")


def test_values_a_third_unseen_corpus_found_accepted_are_refused(tmp_path, monkeypatch):
    """`runs --sweep ''` listed every run, `compare latest latest` compared a run with itself,
    an empty NumGen singular passed validation and failed the run (KeyError), a baseline's
    system_prompt was ignored, HF_HUB_OFFLINE=maybe meant online."""
    db = tmp_path / "r.duckdb"
    sweep = ["run", "--config", str(oracle_sweep(tmp_path)), "--format", "json"]
    assert runner.invoke(app, [*sweep, "--db", str(db)]).exit_code == 0
    everything = runner.invoke(app, ["runs", "--db", str(db), "--sweep", ""])
    assert "--sweep '': give a sweep name" in one_error(everything)
    itself = runner.invoke(app, ["compare", "latest", "latest", "--db", str(db)])
    assert "BASE and NEW both name run" in one_error(itself)
    config = tmp_path / "n.yaml"
    config.write_text("prompts: {per_number: 1, singulars: {unicorns: ''}, objects: [unicorns]}\n")
    empty = runner.invoke(app, ["numgen", "run", "--config", str(config), "--db", str(db)])
    assert "the singular of 'unicorns' is empty" in one_error(empty)
    prompted = oracle_sweep(tmp_path, models=[{"name": "o", "model": "baseline:oracle",
                                              "system_prompt": "hi"}])  # fmt: skip
    unused = runner.invoke(app, ["run", "--config", str(prompted), "--db", str(db)])
    assert "system_prompt: model 'o' is baseline:oracle, which asks no endpoint" in one_error(
        unused
    )
    monkeypatch.setenv("HF_HUB_OFFLINE", "maybe")
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    hub = runner.invoke(app, ["numgen", "run", "--generator", "org/model", "--db", str(db)])
    assert "HF_HUB_OFFLINE='maybe': give 1 (offline) or 0 (online)" in one_error(hub)


def test_a_database_under_a_file_and_a_bad_cron_say_what_they_are(tmp_path, monkeypatch):
    """`--db FILE/x.duckdb` said "File exists"; `deploy --cron 'not a cron'` without
    PREFECT_API_URL named the missing variable, not the bad option."""
    planted = tmp_path / "planted"
    planted.write_text("a file")
    config = oracle_sweep(tmp_path)
    under = runner.invoke(app, ["run", "--config", str(config), "--db", f"{planted}/x.duckdb"])
    assert f"cannot open results database in {planted}: a file, not a folder" in one_error(under)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    cron = runner.invoke(app, ["deploy", "--cron", "not a cron"])
    assert "--cron 'not a cron' is not a valid cron expression" in one_error(cron)
    # a hostile sweep: Prefect takes both, and the nightly sweep never ran, or ran 60 times
    never = runner.invoke(app, ["deploy", "--cron", "0 0 30 2 *"])
    assert "--cron '0 0 30 2 *': no date matches it (" in one_error(never)
    seconds = runner.invoke(app, ["deploy", "--cron", "0 2 * * * *"])
    assert "--cron '0 2 * * * *': give five fields, minute hour day" in one_error(seconds)
    nightly = runner.invoke(app, ["deploy", "--cron", "0 2 * * *"])
    assert "PREFECT_API_URL is not set" in one_error(nightly)  # the schedule is taken
    # a hostile pass: zones Python knows and Prefect's schedules do not were said as the
    # cron's fault; a cron of 100 KB was taken, stored and echoed whole
    for zone in ("right/UTC", "Factory"):
        refused = runner.invoke(app, ["deploy", "--timezone", zone])
        assert f"--timezone '{zone}' is not a time zone Prefect's schedules take" in one_error(
            refused
        )
    long = runner.invoke(app, ["deploy", "--cron", ",".join(["1"] * 600) + " * * * *"])
    assert "1,207 characters, more than the 200 a schedule may have" in one_error(long)
    assert len(long.stderr) < 400


def run_against(handler, db):
    """`numerate run --model m` against an endpoint that `handler` (an http.server request
    handler) answers, on 127.0.0.1, stopped after: its base_url and the command's result."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        return base_url, runner.invoke(
            app, ["run", "--model", "m", "--base-url", base_url, "--db", str(db)]
        )
    finally:
        server.shutdown()


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_an_endpoint_that_redirects_is_named_with_where_it_points(tmp_path, status):
    """Before: the check's chat request followed the redirect and the run said it `cannot
    reach model 'm' at <base_url>` (which had answered), naming the target's DNS error; to a
    live host, a POST turned into a GET by a 302 came back a 404. Nothing said base_url was
    the wrong address. Now the check names the redirect's target, and nothing is written."""
    import http.server

    class Moved(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(status)
            self.send_header("Location", "https://api.example.invalid/v1/models")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET

        def log_message(self, *args):
            pass

    db = tmp_path / "r.duckdb"
    base_url, result = run_against(Moved, db)
    text = one_error(result, code=3)
    assert f"redirects {base_url}/models to 'https://api.example.invalid/v1/models'" in text
    assert f"(HTTP {status}): give base_url as the address it points to" in text
    assert not db.exists()


def test_an_answer_that_redirects_is_not_followed_nor_stored(tmp_path):
    """A hostile pass: the endpoint check refused a redirect of the model list, but each chat
    request followed a 307 (its body sent again) to wherever it pointed (169.254.169.254, a
    private address), and what answered there was stored as the endpoint's answer."""
    import http.server

    followed = []

    class Redirecting(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.answer(200, {"object": "list", "data": [{"id": "m", "object": "model"}]})

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path.startswith("/followed"):
                followed.append(self.path)
                message = {"role": "assistant", "content": "FOLLOWED Answer: 3"}
                self.answer(200, {"choices": [{"message": message, "finish_reason": "stop"}]})
                return
            self.send_response(307)
            self.send_header(
                "Location", f"http://127.0.0.1:{self.server.server_address[1]}/followed"
            )
            self.send_header("Content-Length", "0")
            self.end_headers()

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    db = tmp_path / "r.duckdb"
    _, result = run_against(Redirecting, db)
    assert result.exit_code == 3, result.output
    assert "a redirect to 'http://127.0.0.1:" in result.output
    assert "numerate follows no redirect" in result.output
    assert followed == [] and "FOLLOWED" not in result.output
    if db.exists():
        con = duckdb.connect(str(db), read_only=True)
        assert con.sql("SELECT count(*) FROM completions").fetchall() == [(0,)]
        con.close()


@pytest.mark.skipif(not __import__("os").path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize(
    "command", [["manifolds"], ["--version"], ["generate", "objects", "--count", "3"], ["--help"]]
)
def test_an_output_that_cannot_be_written_is_one_line_not_a_traceback(tmp_path, command):
    """Before: `> /dev/full` (a full disk) ended in an OSError traceback, and a closed
    standard output (`>&-`) in an AttributeError on None."""
    import subprocess
    import sys

    full = subprocess.run(
        [sys.executable, "-m", "numerate.cli", *command], stdout=open("/dev/full", "w"),  # noqa: SIM115
        stderr=subprocess.PIPE, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert full.returncode == 2, full.stderr
    assert full.stderr == "error: cannot write the output: No space left on device\n"
    closed = subprocess.run(
        [sys.executable, "-m", "numerate.cli", *command], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, timeout=120, cwd=tmp_path,
        preexec_fn=lambda: __import__("os").close(1),
    )  # fmt: skip
    assert closed.returncode == 2, closed.stderr  # exit 0: the output silently lost
    assert closed.stderr == "error: cannot write the output: the standard output is closed\n"


UNSAID_OSERROR = """
import sys
from numerate.manifolds import registry
where = sys.argv[1]
def full():
    raise OSError(28, "No space left on device", where)
registry.names = full
from numerate.cli import main
sys.argv = ["numerate", "manifolds"]
main()
"""


def test_an_oserror_no_command_said_is_one_line_not_a_traceback(tmp_path):
    """This machine's error where no command turns it into its own (a full disk under a
    store, a manifest or a plot): the command ended in the OSError's traceback, exit 1."""
    import subprocess
    import sys

    where = str(tmp_path / "a file")
    done = subprocess.run([sys.executable, "-c", UNSAID_OSERROR, where], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert done.stderr == f"error: [Errno 28] No space left on device: '{where}'\n"


def test_a_reader_that_stops_reading_or_an_unwritable_error_keep_the_exit_code(tmp_path):
    """Corpus H: `generate | head -c 10` exited 1 (click's answer to a closed pipe), and an
    error line that could not be written (`2>/dev/full`) turned exit 2 into 1."""
    import subprocess
    import sys

    for command in (["generate", "objects", "--count", "20000"],
                    ["numgen", "prompts", "--count", "2000", "--format", "txt"]):  # fmt: skip
        # a hostile pass: `numgen prompts | head -1` exited 1 (its lines written at once)
        generate = subprocess.Popen([sys.executable, "-m", "numerate.cli", *command],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    cwd=tmp_path)  # fmt: skip
        assert len(generate.stdout.read(10)) == 10
        generate.stdout.close()  # as `head -c 10` does
        assert generate.wait(timeout=120) == 0 and generate.stderr.read() == b"", command
    if Path("/dev/full").exists():
        report = [sys.executable, "-m", "numerate.cli", "report", "--db", "none.duckdb"]
        with open("/dev/full", "w") as full:
            unwritable = subprocess.run(report, stderr=full, cwd=tmp_path, timeout=120)
        assert unwritable.returncode == 2
        written = [sys.executable, "-m", "numerate.cli", "generate", "objects", "--count", "2",
                   "--out", "g.jsonl"]  # fmt: skip
        with open("/dev/full", "w") as full:  # corpus I: its `wrote ...` line ended it, exit 1
            done = subprocess.run(written, stderr=full, cwd=tmp_path, timeout=120)
        assert done.returncode == 0 and len((tmp_path / "g.jsonl").read_text().splitlines()) > 0


def test_a_run_without_a_standard_output_runs_and_says_its_output_was_lost(tmp_path):
    """Prefect's temporary server inherits the command's standard output: a closed one made it
    die at start (uvicorn's traceback, then `did not start`, exit 3, an empty database)."""
    import subprocess
    import sys

    from tests.cli.test_run import numerate_env

    db = tmp_path / "r.duckdb"
    env = {**numerate_env(tmp_path / "prefect", own_server=True), "NUMERATE_SERVER": "temporary"}
    closed = subprocess.run(
        [sys.executable, "-m", "numerate.cli", "run", "--model", "baseline:oracle", "--db",
         str(db)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=180,
        cwd=tmp_path, env=env, preexec_fn=lambda: __import__("os").close(1),
    )  # fmt: skip
    assert "Traceback" not in closed.stderr and "did not start" not in closed.stderr
    assert closed.returncode == 2, closed.stderr
    assert closed.stderr.splitlines()[-1] == (
        "error: cannot write the output: the standard output is closed"
    )
    assert duckdb.connect(str(db), read_only=True).sql("SELECT status FROM runs").fetchall() == [
        ("finished",)
    ]


@pytest.mark.parametrize(
    "command",
    [
        ["generate", "objects", "--count", "1", "--out", "dl/g.jsonl"],
        ["numgen", "prompts", "--count", "1", "--out", "dl/p.json"],
        ["numgen", "score", "--responses", "{csv}", "--heatmap", "dl/h.png"],
        ["view", "--db", "{db}", "--export", "dl/sub"],
    ],
)
def test_an_output_under_a_link_that_leads_nowhere_is_refused(tmp_path, monkeypatch, command):
    """Corpus L: `--out dl/g.jsonl`, `dl` a link to a folder that does not exist, made that
    folder (/nonexistent/dir) and wrote there, exit 0; `view --export dl/sub` said
    "cannot write there (File exists)". A link named in the path itself was refused."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dl").symlink_to(tmp_path / "gone" / "dir")
    (tmp_path / "r.csv").write_text("target,generated\n1,1\n")
    from numerate.store import Store

    Store.open(str(tmp_path / "r.duckdb"))
    Store.close_all()
    values = {"csv": str(tmp_path / "r.csv"), "db": str(tmp_path / "r.duckdb")}
    said = one_error(runner.invoke(app, [part.format(**values) for part in command]))
    assert f"dl is a symbolic link to {tmp_path / 'gone' / 'dir'}, which does not exist" in said
    assert not (tmp_path / "gone").exists()


def test_a_sweep_a_database_without_sweep_runs_holds_no_run_of_is_an_error(tmp_path):
    """Corpus M: `runs --sweep x` on a database of NumGen runs only (or none) said it held no
    runs of sweep 'x', exit 0; with other sweeps' runs it was an error."""
    from numerate.store import Store

    db = tmp_path / "r.duckdb"
    Store.open(str(db))
    Store.close_all()
    for command in (["runs"], ["compare", "latest", "previous"]):
        said = one_error(runner.invoke(app, [*command, "--db", str(db), "--sweep", "x"]))
        assert "--sweep 'x': no run of that sweep (it holds no sweep's run)" in said


def test_readers_log_their_sessions_and_refuse_a_log_that_cannot_be_written(tmp_path, monkeypatch):
    """Corpus M: readers wrote no NUMERATE_LOCK_LOG line (the docs say every session does)
    and took a log that cannot be written silently, exit 0."""
    import json

    from numerate.store import Store

    db = tmp_path / "r.duckdb"
    Store.open(str(db))
    Store.close_all()
    log = tmp_path / "locks.jsonl"
    monkeypatch.setenv("NUMERATE_LOCK_LOG", str(log))
    assert runner.invoke(app, ["db", str(db), "SELECT 1"]).exit_code == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(line["kind"], line["db"]) for line in lines] == [("read", str(db))]
    monkeypatch.setenv("NUMERATE_LOCK_LOG", str(tmp_path))
    said = one_error(runner.invoke(app, ["runs", "--db", str(db)]))
    assert "NUMERATE_LOCK_LOG=" in said and "cannot be written (Is a directory)" in said


@pytest.mark.parametrize("named", ["", ".wal", ".journal/x.log"])
def test_a_lock_log_that_is_a_file_of_the_database_is_refused(tmp_path, monkeypatch, named):
    """A hostile pass: NUMERATE_LOCK_LOG naming the database (or its write-ahead log) had its
    lines appended to the database file; naming a new database, it was made an empty file
    first, and the run then refused that file as no database."""
    from numerate.store import Store, StoreError

    db = tmp_path / "r.duckdb"
    Store.open(str(db))
    Store.close_all()
    size = db.stat().st_size
    monkeypatch.setenv("NUMERATE_LOCK_LOG", f"{db}{named}")
    said = one_error(runner.invoke(app, ["db", str(db), "SELECT 1"])).strip()
    assert said == (
        f"error: NUMERATE_LOCK_LOG='{db}{named}': a file of the results database {db} (the "
        "database, its write-ahead log, journal or waiting folder); give another file, or unset it"
    )
    assert db.stat().st_size == size and not Path(f"{db}.wal").exists()
    new = tmp_path / "new.duckdb"
    monkeypatch.setenv("NUMERATE_LOCK_LOG", str(new))
    with pytest.raises(StoreError, match="a file of the results database"):
        Store.open(str(new))
    assert not new.exists()


@pytest.mark.parametrize("kind", ["folder", "text"])
def test_a_database_path_that_is_no_database_gets_no_journal_beside_it(tmp_path, kind):
    """Issue 41, found from outside: `run --db` at a folder or a text file was refused in one
    good line, but its journal folder was first made beside it (and removed)."""
    from numerate.cli.run import announce_start

    db = tmp_path / "x.duckdb"
    if kind == "folder":
        db.mkdir()
    else:
        db.write_text("not a database\n")
    assert announce_start(str(db)) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.duckdb"]
    fresh = tmp_path / "new.duckdb"  # where no database is yet: a run is announced
    journal = announce_start(str(fresh))
    assert journal is not None
    journal.close()
