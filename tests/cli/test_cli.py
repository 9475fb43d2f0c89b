import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from numerate.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()

COMMON = {"manifold", "index", "seed", "params", "input", "target"}
CONTRACT = {
    "objects": COMMON | {"target_categories", "target_count", "distractor_count", "items"},
    "shuffle": COMMON
    | {
        "domain",
        "people",
        "items",
        "swaps",
        "query_person",
        "response_enum",
        "confounding_indices",
    },
    "sequence": COMMON
    | {"starting_sequence", "rules", "rule_specs", "expected_next_terms", "seq_length", "depth"},
}


@pytest.mark.parametrize("manifold", sorted(CONTRACT))
def test_generate_writes_the_output_contract(manifold, tmp_path):
    out = tmp_path / "cases.jsonl"
    result = runner.invoke(
        app, ["generate", manifold, "--count", "5", "--seed", "3", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["index"] for r in rows] == [0, 1, 2, 3, 4]
    for row in rows:
        assert set(row) == CONTRACT[manifold]
        assert row["manifold"] == manifold
        assert "count" not in row["params"]
    assert not list(tmp_path.glob("*.partial"))


def test_objects_item_records():
    result = runner.invoke(
        app, ["generate", "objects", "--count", "3", "--set", "prob_adjective=1"]
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 3  # a record a case
    for line in lines:
        items = json.loads(line)["items"]
        assert items
        for item in items:
            assert set(item) == {"name", "category", "quantity", "adjective"}
            assert item["adjective"]  # prob_adjective=1: every item has one


def test_sequence_rule_specs_are_flat_objects():
    result = runner.invoke(app, ["generate", "sequence", "--count", "3", "--set", "num_rules=3"])
    row = json.loads(result.stdout.splitlines()[0])
    assert len(row["rule_specs"]) == len(row["rules"]) == 4
    assert row["rule_specs"][0]["category"] == "base"
    assert all({"category", "kind"} <= set(spec) for spec in row["rule_specs"])


def test_set_values_are_typed_and_same_seed_same_output():
    args = ["generate", "shuffle", "--count", "4", "--seed", "9", "--set", "anchor=ELEMENTS",
            "--set", "length=5", "--set", "adjective_prob=0.5"]  # fmt: skip
    first, second = runner.invoke(app, args), runner.invoke(app, args)
    assert first.exit_code == 0 and first.stdout == second.stdout
    assert json.loads(first.stdout.splitlines()[0])["params"]["length"] == 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["generate", "objects", "--set", "length=0"], "--set length=0: "),
        (["generate", "objects", "--set", "anchor=ELEMENTS"], "--set anchor=ELEMENTS: "),
        (["generate", "objects", "--set", "colour=red"], "no parameter 'colour'"),
        (["generate", "objects", "--set", "length"], "key=value"),
        (["generate", "objectz"], "unknown manifold 'objectz'"),
        (["generate", "sequence", "--set", "num_rules=5", "--set", "rule_enable=2"], "num_rules=5"),
        (["generate", "objects", "--set", "count=5"], "--set count=...: give the number of cases"),
        (["generate", "objects", "--count", "0"], "error: --count 0: Input should be greater"),
        (["generate", "objects", "--set", "length=3", "--set", "length=4"], "given twice"),
        (["generate", "objects", "--set", "length=true"], "--set length=true: Input should be a"),
        (["generate", "objects", "--set", 'length="3"'], '--set length="3": Input should be a'),
        (["generate", "objects", "--set", "length=[4,5]"], "--set length=[4,5]: Input should"),
        (["generate", "objects", "--seed", "9" * 120], "a seed is a whole number from 0 to"),
        (["generate", "objects", "--seed", "-1"], "a seed is a whole number from 0 to"),
    ],
)
def test_bad_input_gives_one_clear_error(args, message):
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert message in result.stderr
    assert result.stderr.startswith("error: ")


@pytest.mark.parametrize(
    "given",
    ["k\x1b]0;owned\x07=1", "k" * 90_000 + "=1", "length=\x1b[31m", "length=" + "x" * 90_000],
)
def test_a_set_key_or_value_is_shown_escaped_and_cut(given):
    """`generate --set`: an unknown key of 90 KB came out whole on standard error, and a key
    or a value holding an escape sequence reached the terminal as it was."""
    result = runner.invoke(app, ["generate", "objects", "--set", given])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and len(result.stderr) < 400, result.stderr[:400]
    assert "\x1b" not in result.stderr
    twice = runner.invoke(app, ["generate", "objects", "--set", given, "--set", given])
    assert twice.exit_code == 2 and "given twice" in twice.stderr and "\x1b" not in twice.stderr


def imported(code: str, modules: set[str]) -> list[str]:
    """Which of `modules` a fresh Python process has imported once it ran `code`."""
    code += f"\nimport sys\nprint(sorted({modules!r} & set(sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def test_help_imports_nothing_heavy():
    code = "from numerate.cli import app\ntry:\n    app(['--help'])\nexcept SystemExit:\n    pass"
    heavy = {"torch", "prefect", "diffusers", "transformers", "duckdb", "polars", "numpy", "PIL"}
    assert imported(code, heavy) == []


def test_a_sweep_imports_neither_scipy_stats_nor_numgen():
    """What a sweep imports, its config checked as `numerate run --config` checks it: scipy's
    statistics (0.5-0.7 s, for the comparison's power alone) and NumGen's config (numpy and
    PIL, for a NumGen config's keys alone) were imported by every `numerate run`."""
    code = (
        "import numerate.flows.sweep, numerate.results.standing, numerate.tasks.artifacts\n"
        "from numerate.config.sweep import refuse_the_other_kind\n"
        "refuse_the_other_kind({'name': 'x', 'models': []}, 'x.yaml', 'sweep')"
    )
    assert imported(code, {"scipy.stats", "numerate.numgen.config"}) == []


def test_version_names_the_package_and_the_code():

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert re.fullmatch(r"numerate \S+ \(code \S+\)\n", result.stdout)
    extra = subprocess.run([sys.executable, "-m", "numerate.cli", "--version", "extra"],
                           capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert (extra.returncode, extra.stdout) == (2, ""), extra  # exit 0, `extra` ignored
    assert extra.stderr == "error: --version takes nothing after it (got 'extra')\n"


def test_every_table_and_column_is_documented(tmp_path):
    """docs/schema.md describes every table and column (every command and option: see
    tests/test_docs.py)."""
    from numerate.store import Store

    readme = (ROOT / "docs" / "schema.md").read_text()
    store = Store(str(tmp_path / "schema.duckdb"))
    columns = store.query(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_name <> 'schema_migrations'"
    )
    store.close()
    assert columns
    for table, column in columns:
        assert f"**`{table}`**" in readme, f"docs/schema.md does not describe table {table}"
        assert f"`{column}`" in readme, f"docs/schema.md does not describe {table}.{column}"


@pytest.mark.parametrize("group", [[], ["server"], ["numgen"], ["cache"]])
def test_a_group_of_commands_alone_shows_its_help_and_one_error_line(group):
    """Corpus I: the help, exit 2, and a blank line on the standard error, no `error:`."""
    done = subprocess.run([sys.executable, "-m", "numerate.cli", *group], capture_output=True,
                          text=True, cwd=ROOT)  # fmt: skip
    assert done.returncode == 2 and "Usage:" in done.stdout
    path = " ".join(["python -m numerate.cli", *group])  # `numerate ...` as a console script
    assert done.stderr == f"error: {path}: give it a command (its help is above)\n"


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["report", "--db", "a.duckdb", "--db", "b.duckdb"],
         "--db given twice ('a.duckdb', then 'b.duckdb')"),
        (["cache", "clear", "--db=a.duckdb", "--before", "2020-01-01", "--db", "a.duckdb"],
         "--db given twice ('a.duckdb', then 'a.duckdb')"),
        (["numgen", "report", "--run", "x", "--run", "y\x1b"],
         "--run given twice ('x', then 'y\\x1b')"),
        (["run", "-ca.yaml", "-c", "b.yaml"], "-c given twice ('a.yaml', then 'b.yaml')"),
        (["run", "--config=a.yaml", "-c=b.yaml"],
         "--config (as -c) given twice ('a.yaml', then '=b.yaml')"),
    ],
)  # fmt: skip
def test_an_option_of_one_value_given_twice_is_refused(tmp_path, arguments, said):
    """A review: click keeps the last value of an option given twice, unsaid: `report --db a
    --db b` read b alone, `cache clear --db a --db b` cleared b; short forms too (`-ca.yaml
    -c b.yaml`: click reads `-c=b.yaml` as the value "=b.yaml"). Refused in one line, before
    anything is read; an option's value that looks like an option is its value."""
    done = subprocess.run([sys.executable, "-m", "numerate.cli", *arguments], cwd=tmp_path,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and done.stderr == f"error: {said}: give it once\n"
    assert not list(tmp_path.iterdir())
    command = [sys.executable, "-m", "numerate.cli", "db", "--db", "x.duckdb", "--format", "--db"]
    sql = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert "given twice" not in sql.stderr  # `--db` is --format's value here
    for more in (["report", "--model", "--db=a", "--db", "b"],  # a repeatable option's value
                 ["report", "--db", "a", "--db", "b", "--help"]):  # the help first  # fmt: skip
        done = subprocess.run([sys.executable, "-m", "numerate.cli", *more], cwd=tmp_path,
                              capture_output=True, text=True)  # fmt: skip
        assert "given twice" not in done.stderr, more


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["runs", "--limit", "nan"], "Invalid value for '--limit': Input should be a valid "
         "integer, unable to parse string as an integer (got 'nan')"),
        (["view", "--port", "70000"], "Invalid value for '--port': Input should be less than "
         "or equal to 65535 (got '70000')"),
        (["db", "x.duckdb", "-- the runs\nselect 1"], "'-- the runs\\nselect 1' begins with "
         "'-', so it was read as an option: put -- before it (-- ends the options)"),
    ],
)  # fmt: skip
def test_a_value_an_options_type_refuses_is_quoted(arguments, said):
    """A hostile sweep: `--limit nan`, `--port 70000` said why and not what was given."""
    done = subprocess.run([sys.executable, "-m", "numerate.cli", *arguments], cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and done.stderr.startswith(f"error: {said} (see: "), done.stderr


def test_an_error_that_comes_once_a_stop_signal_came_is_the_stop(monkeypatch):
    """A SIGINT 1.1 s into `numgen run` ended in `error: Error calling function
    `_ser_model`: KeyboardInterrupt`, exit 2: pydantic wrapped the interrupt in an error of
    its own. Once a signal came, `fail` hands the stop on (PROCESS.stopped says it, 130)."""
    from numerate.cli import common

    with pytest.raises(typer.Exit):  # no signal: the error, exit 2
        common.fail(ValueError("Error calling function `_ser_model`"))
    from numerate.kernel import stopping

    monkeypatch.setattr(stopping, "_asked", __import__("threading").Event())
    stopping.ask()  # as the signal handler does (Prefect's for a SIGTERM in a flow included)
    with pytest.raises(KeyboardInterrupt):
        common.fail(ValueError("Error calling function `_ser_model`: KeyboardInterrupt"))


def test_prefect_s_run_lines_are_not_printed_once_a_stop_signal_came():
    """Corpus J: `prefect.engine - Finished in state Crashed(...)` followed `terminated` after
    a SIGTERM in `numgen calibrate`: how the run ended is the command's line to say."""
    import logging

    from numerate.cli.common import quiet_run_logs
    from numerate.kernel import stopping

    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    engine = logging.getLogger("prefect.engine")
    engine.addHandler(handler)
    try:
        quiet_run_logs()
        engine.error("Finished in state Failed('a generator failed')")
        engine.error("Crash detected! Execution was aborted by a termination signal.")  # corpus
        try:  # L: before the signal thread had seen the signal Prefect's handler took
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            engine.exception("Fatal write error on socket transport")
        stopping.ask()
        engine.error("Finished in state Crashed('Execution was aborted')")
    finally:
        stopping._asked.clear()
        engine.removeHandler(handler)
    assert seen == ["Finished in state Failed('a generator failed')"]


@pytest.mark.parametrize("stop", ["cancelled", "interrupt", "termination"])
def test_prefect_s_words_for_a_run_a_signal_crashed_are_those_numerate_knows(stop):
    """Prefect tells a run a signal crashed only in words (its Crashed state's message);
    numerate.cli.common.STOPPED_RUN_WORDS holds them: pinned on the Prefect installed."""
    import asyncio

    from prefect.exceptions import TerminationSignal
    from prefect.states import exception_to_crashed_state

    from numerate.cli.common import STOPPED_RUN_WORDS

    errors = {"cancelled": asyncio.CancelledError(), "interrupt": KeyboardInterrupt(),
              "termination": TerminationSignal(signal=15)}  # fmt: skip
    state = asyncio.run(exception_to_crashed_state(errors[stop]))
    assert any(words in state.message for words in STOPPED_RUN_WORDS), state.message
    failed = asyncio.run(exception_to_crashed_state(ValueError("a generator failed")))
    assert not any(words in failed.message for words in STOPPED_RUN_WORDS)


def test_an_output_file_on_a_full_disk_is_the_machine_s_failure_not_bad_input(
    tmp_path, monkeypatch
):
    """A hostile pass: `--out` on a full disk exited 2 (bad input: "nothing was run"), where
    the exit codes say 3 for a full disk. A path that cannot be written stays 2."""
    import errno
    import os

    from numerate.kernel import files

    def full(path, content):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files, "write_atomically", full)
    out = tmp_path / "g.jsonl"
    result = runner.invoke(app, ["generate", "objects", "--count", "2", "--out", str(out)])
    assert result.exit_code == 3, result.output
    assert f"cannot write {out}: No space left on device" in result.stderr
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "env", "shown"),
    [
        (
            ["runs"],
            {"NUMERATE_DB": "\x1b]0;owned\x07"},
            "NUMERATE_DB '\\x1b]0;owned\\x07': a path with a control character",
        ),
        (
            ["ingest", "\x1b]0;owned\x07\u202e"],
            {},
            "no results location at \\x1b]0;owned\\x07\\u202e",
        ),
        (["runs", "--db", "k" * 90_000], {}, "…"),
        # a hostile pass: bytes that are no UTF-8 were shown as Python's surrogate, \udcff
        (
            ["runs"],
            {"NUMERATE_DB": os.fsdecode(b"r\xff.duckdb")},
            "NUMERATE_DB r\\xff.duckdb: not valid text (undecodable bytes",
        ),
        # a review: splitlines() made each \u2028 of a value an error line of its own
        (["runs"], {"NUMERATE_DB": "x\u2028" * 5000 + "y\x85z"}, "x\\u2028x\\u2028"),
    ],
)
def test_every_error_line_is_escaped_and_bounded_whatever_it_quotes(tmp_path, args, env, shown):
    """A hostile pass: an error quoting an argument, a variable or DuckDB's own message (a
    value a database or a model put there) wrote an escape sequence raw (a terminal's title,
    its clipboard) and a 90 KB value whole. `fail`, which every error passes, now writes what
    a terminal acts on escaped and cuts a line to 2,000 characters, keeping its end."""
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 2, result.output
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr
    assert shown in result.stderr
    assert all(len(line) <= 2010 for line in result.stderr.splitlines())
    assert len(result.stderr.splitlines()) == 1


def test_every_commands_help_is_paragraphs_of_one_line_each():
    """Typer keeps a docstring's line breaks after its first paragraph, and the terminal's
    own wrapping then left a word alone on a line (`numerate runs --help`: "... is\\n listed
    \\n stopped: ..."). Each paragraph is one line, wrapped by the terminal alone."""

    def commands(group):
        yield from group.registered_commands
        for sub in group.registered_groups:
            yield from commands(sub.typer_instance)

    helped = list(commands(app))
    assert len(helped) > 20
    for info in helped:
        name = info.name or info.callback.__name__
        assert info.help, name
        assert all("\n" not in paragraph for paragraph in info.help.split("\n\n")), name
    shown = CliRunner().invoke(app, ["runs", "--help"], env={"COLUMNS": "100", "TERM": "dumb"})
    assert "is listed stopped: the same command resumes it" in " ".join(shown.stdout.split())


def test_manifolds_says_how_many_cases_is_set_where_it_is_set():
    """A first-contact review: `count default=10` was listed as a parameter of each manifold,
    while a sweep entry's count (default 20) is not a grid axis, and `--set count=` is
    refused."""
    from numerate.config.sweep import DEFAULT_COUNT

    listed = runner.invoke(app, ["manifolds"], env={"COLUMNS": ""})  # a line each
    assert listed.exit_code == 0, listed.output
    assert not any(line.split()[:1] == ["count"] for line in listed.stdout.splitlines())
    assert f"a sweep entry's `count` (default {DEFAULT_COUNT} a grid point)" in listed.stdout
    # a hostile pass: a description written over two lines began a line of its own
    assert all(line.startswith(" ") or ": " in line for line in listed.stdout.splitlines())


def test_manifolds_fits_the_columns_it_is_given_and_keeps_a_line_each_in_a_pipe():
    """A hostile pass: `COLUMNS=80 numerate manifolds` printed lines of 150 characters. Piped
    (no terminal, no COLUMNS), a parameter stays on one line, for grep."""
    narrow = runner.invoke(app, ["manifolds"], env={"COLUMNS": "80"})
    assert narrow.exit_code == 0, narrow.output
    lines = narrow.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert any(line.startswith("  length ") for line in lines)
    words = " ".join(narrow.stdout.split())
    assert "Number of target items (from the target categories) in each case." in words
    piped = runner.invoke(app, ["manifolds"], env={"COLUMNS": ""})
    line = next(line for line in piped.stdout.splitlines() if line.startswith("  length "))
    assert line.endswith("Number of target items (from the target categories) in each case.")


def test_progress_in_a_log_is_one_whole_line_and_notes_are_not_wrapped(capsys):
    """A first-contact review: with standard error no terminal (a worker's log, a pipe), rich
    drew the bar in 80 columns, cut into pieces (`0 retri… 0 cached ≤8 in flig…  E…`), and a
    note longer than that was wrapped over lines."""
    from numerate.cli.common import terminal_progress

    progress = terminal_progress("oracle")
    progress.add_total(100)
    progress.advance(100, errors=3, cached=7)
    progress.note("a long note " + "x" * 150)
    progress.close()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "note: a long note " + "x" * 150
    assert "100/100" in lines[-1] and "3 errors 0 retries 7 cached" in lines[-1]
    assert lines[-1].rstrip().endswith("ETA 0:00:00") and "…" not in lines[-1]


def test_deploy_with_a_prefect_api_url_that_is_no_url_says_one_line():
    """A hostile pass: `deploy` imported Prefect (to check its schedule) before it checked
    PREFECT_API_URL, and Prefect's import printed pydantic's three lines of it first."""
    env = {**os.environ, "PREFECT_API_URL": "http://[::1"}
    done = subprocess.run([sys.executable, "-m", "numerate.cli", "deploy"], env=env, cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2
    said = "error: PREFECT_API_URL http://[::1 is not a valid URL: Invalid IPv6 URL\n"
    assert done.stderr == said


def test_a_failure_numerate_did_not_foresee_is_one_line_and_a_file(tmp_path):
    """A hostile pass: a results database changed by hand in ways no check knows (a negative
    token count, an infinite start time: polars' panic is no Exception) gave Python's
    traceback. It is one line, naming the error and the file its traceback is in, exit 1;
    NUMERATE_TRACEBACK=1 prints the traceback instead."""
    import duckdb

    db = tmp_path / "x.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS a")
    failing = (  # an error no code of numerate's raises: any command may meet its like
        "import sys, numerate.store.reader as r\n"
        "def broken(*args, **kwargs): raise ZeroDivisionError('unforeseen')\n"
        "r.Reader.printable_frame = broken\n"
        "from numerate.cli import main\n"
        f"sys.argv = ['numerate', 'db', {str(db)!r}, 'select 1']\n"
        "main()\n"
    )
    env = dict(os.environ, NUMERATE_TRACEBACK="", TMPDIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", failing], env=env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, done.stderr
    said = done.stderr.strip()
    assert said.startswith("error: ZeroDivisionError: unforeseen (numerate did not foresee this")
    written = Path(said.rsplit(" in ", 1)[1].rstrip(")"))
    assert written.parent == tmp_path and "Traceback" in written.read_text()
    env["NUMERATE_TRACEBACK"] = "1"
    shown = subprocess.run([sys.executable, "-c", failing], env=env, capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert shown.returncode == 1 and "Traceback" in shown.stderr
