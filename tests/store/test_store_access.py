"""Sharing one results database between processes (numerate.store: access, journal, writer):
bounded and visible lock waits, nothing lost when a process dies, runs claimed by one process,
migrations that two processes may try at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.store import DatabaseBusy, Store, StoreError
from numerate.store.access import connect, holder
from numerate.store.journal import (
    Journal,
    journal_dir,
    live_owners,
    orphans,
    parts,
    read_segment,
)
from numerate.store.migrations import MIGRATIONS
from numerate.store.schema import now
from tests.store.old_schema import database_at_version
from tests.waiting import wait_until, waits_for_the_database

ROOT = Path(__file__).resolve().parents[2]

HOLD = textwrap.dedent(
    """
    import sys, time, duckdb
    while True:  # a writer may hold the file this very moment: until it lets go
        try:
            con = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "ro")
            break
        except duckdb.IOException:
            time.sleep(0.01)
    print("holding", flush=True)
    time.sleep(float(sys.argv[3]))
    con.close()
    """
)


def hold(db: Path, seconds: float, read_only: bool = False) -> subprocess.Popen[str]:
    """Another process that holds the database file for `seconds`."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db), "ro" if read_only else "rw", str(seconds)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stdout is not None and process.stdout.readline().strip() == "holding"
    return process


def completion(request_hash: str, run_id: str = "r") -> dict:
    return {"request_hash": request_hash, "run_id": run_id, "base_url": None, "model_id": "m",
            "revision": None, "sample_index": 0, "text": "Answer: 1", "text_cut": False,
            "text_chars": None, "finish_reason": "stop", "prompt_tokens": 1,
            "completion_tokens": 1, "latency_s": 0.1, "attempts": 1,
            "created_at": now(), "reasoning": None, "reasoning_cut": None,
            "reasoning_chars": None, "reasoning_tokens": None, "reasoning_ratio": None}  # fmt: skip


def test_a_writer_waits_for_another_process_then_writes(tmp_path, db_path):
    from tests.draws import numerate_draws

    Store.open(db_path)
    Store.close_all()
    holder_process = hold(Path(db_path), 1.5)
    started = time.monotonic()
    with numerate_draws() as drawn:
        Store.open(db_path).put_completions([completion("h1")])
    assert time.monotonic() - started >= 1.0  # it waited for the other process
    assert drawn == []  # its pauses drew from no one else's random numbers
    holder_process.wait()
    assert Store.open(db_path).get_completions(["h1"]).keys() == {"h1"}


def test_past_the_bound_the_wait_ends_in_one_error_naming_the_other_process(db_path, monkeypatch):
    duckdb.connect(db_path).close()
    other = hold(Path(db_path), 30)
    monkeypatch.setenv("NUMERATE_LOCK_TIMEOUT", "0.5")
    try:
        with pytest.raises(DatabaseBusy) as raised:
            connect(db_path)
    finally:
        other.kill()
        other.wait()
    message = str(raised.value)
    assert f"PID {other.pid}" in message and "NUMERATE_LOCK_TIMEOUT" in message
    assert "nothing is lost" in message


def test_a_long_wait_is_said_with_the_process_that_holds_the_file(db_path, monkeypatch):
    from numerate.kernel.progress import reporting_to
    from tests.notes import Notes

    duckdb.connect(db_path).close()
    other = hold(Path(db_path), 1.6)
    with reporting_to(Notes()) as progress:
        connect(db_path).close()
    other.wait()
    assert len(progress.notes) == 1
    assert f"waiting for results database {db_path}, held by PID {other.pid}" in progress.notes[0]


def test_the_holder_s_command_line_is_shown_without_its_secrets():
    """Before: the lock-wait note showed the holder's command line as it was, an API key
    given as an option and a URL's password included."""
    from numerate.store.access import _command_line

    other = subprocess.Popen(
        [sys.executable, "-c", "print(1,flush=1);input()", "http://u:hunter2PW@h/v1",
         "--api-key", "sk-LEAKKEY1234567890abcdef"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert other.stdout.readline().strip() == "1"
        shown = _command_line(other.pid)
    finally:
        other.kill()
    assert shown is not None and "http://***@h/v1 --api-key ***" in shown, shown
    assert "LEAKKEY" not in shown and "hunter2PW" not in shown


def test_holder_reads_the_pid_duckdb_names():
    assert holder("Conflicting lock is held in /usr/bin/python3 (PID 1)").startswith("PID 1")
    assert holder("IO Error: something else") is None


def test_a_process_killed_while_holding_the_file_blocks_no_one(db_path):
    duckdb.connect(db_path).close()
    other = hold(Path(db_path), 60)
    other.send_signal(signal.SIGKILL)
    other.wait()
    started = time.monotonic()
    Store.open(db_path).put_completions([completion("h1")])
    assert time.monotonic() - started < 2


def test_an_answer_received_and_not_written_yet_is_a_stored_answer(db_path):
    """A session that begins inside another's hold (a batch's look-up while the journal is
    being written, or beside another batch) does not write the journal first: its answers
    are found in the journal, so a batch never pays again for an answer this process has."""
    store = Store.open(db_path)
    store.put_completions([completion("h1", run_id="before")])
    with store.session():  # held: the sessions below begin inside it
        store.receive("completions", [completion("h1"), completion("h2")])
        assert store.query("SELECT count(*) FROM completions") == [(1,)]  # not written yet
        assert sorted(store.get_completions(["h1", "h2", "h3"], "r")) == ["h1", "h2"]
        assert store.get_completions(["h2"], "other run") == {}
        latest = store.get_completions(["h1"])  # of any run: the newest, this process's
        assert latest["h1"]["run_id"] == "r"
    Store.close_all()


KILLED_RUN = textwrap.dedent(
    """
    import os, signal, sys
    from numerate.store import Store
    from tests.store.test_store_access import completion
    store = Store.open(sys.argv[1])
    store.receive("completions", [completion(f"h{i}") for i in range(50)])
    os.kill(os.getpid(), signal.SIGKILL)  # before the journal is written to the database
    """
)


def test_answers_of_a_killed_process_are_written_by_the_next_one(db_path):
    env = {**os.environ, "NUMERATE_FLUSH_SECONDS": "3600"}
    killed = subprocess.run([sys.executable, "-c", KILLED_RUN, db_path], cwd=ROOT, env=env)
    assert killed.returncode == -signal.SIGKILL
    assert any(journal_dir(db_path).glob("*.jsonl"))  # left behind
    stored = Store.open(db_path).get_completions([f"h{i}" for i in range(50)])
    assert len(stored) == 50
    assert not any(journal_dir(db_path).glob("*.jsonl"))  # replayed once, then removed


def test_a_journal_line_cut_short_is_left_out(tmp_path):
    segment = tmp_path / "x.000001.jsonl"
    whole = json.dumps(["completions", {"request_hash": "a", "created_at": "2026-11-24T00:00:00"}])
    segment.write_text(whole + "\n" + whole[:20])
    [(table, row)] = read_segment(segment)
    assert table == "completions" and row["created_at"].year == 2026


class FullDiskOnce:
    """A journal file whose write number `failing` puts part of its text on disk (a line and
    a bit of the next), then fails."""

    def __init__(self, file, failing: int = 2) -> None:
        self.file, self.name, self.writes, self.failing = file, file.name, 0, failing

    def write(self, text: bytes) -> None:
        self.writes += 1
        if self.writes == self.failing:
            self.file.write(text[: text.index(b"\n") + 20])
            self.file.flush()
            raise OSError(28, "No space left on device")
        self.file.write(text)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()

    @property
    def closed(self) -> bool:
        return self.file.closed


def test_a_journal_write_that_fails_leaves_every_line_written_readable(db_path, monkeypatch):
    """Half a line on disk, then the next rows: they made one line that is no row, and a
    process that died then had its whole journal file refused."""
    next_file, opened = Journal._next_file, []

    def first_one_full(self):
        opened.append(next_file(self))
        return FullDiskOnce(opened[-1]) if len(opened) == 1 else opened[-1]

    monkeypatch.setattr(Journal, "_next_file", first_one_full)
    journal = Journal(db_path)
    journal.append("completions", [completion("h1")])
    with pytest.raises(OSError, match="No space"):
        journal.append("completions", [completion("h2"), completion("h3")])
    journal.append("completions", [completion("h4")])
    files = sorted(journal_dir(db_path).glob("*.jsonl"))
    on_disk = [row["request_hash"] for file in files for _, row in read_segment(file)]
    assert on_disk == ["h1", "h2", "h4"]  # h3's line, cut short, is left out
    held = [row["request_hash"] for segment in journal.take() for _, row in segment.rows]
    assert held == ["h1", "h4"]  # the rows of a failed append are the caller's to keep
    journal.close()


def test_a_failed_write_in_a_segment_of_no_rows_leaves_nothing_once_closed(db_path, monkeypatch):
    """The segment was kept as one to write: with no rows, nothing wrote it, and the journal
    was left behind at close (its owner file, two segments), for the next process."""
    next_file = Journal._next_file
    monkeypatch.setattr(Journal, "_next_file", lambda self: FullDiskOnce(next_file(self), 1))
    journal = Journal(db_path)
    with pytest.raises(OSError, match="No space"):
        journal.append("completions", [completion("h1"), completion("h2")])
    assert journal.pending == 0 and journal.take() == []
    journal.close()
    assert not journal_dir(db_path).exists()


def test_a_live_journal_is_no_orphan_and_a_closed_empty_one_leaves_nothing(db_path):
    journal = Journal(db_path)
    journal.append("completions", [completion("h1")])
    with orphans(db_path) as found:
        assert found == []  # its owner is alive (this process)
    assert live_owners(db_path) == 1
    for segment in journal.take():
        journal.written(segment)
    journal.close()
    assert live_owners(db_path) == 0
    assert not journal_dir(db_path).exists()


CLAIM = textwrap.dedent(
    """
    import sys, time
    from numerate.store import Store
    store = Store.open(sys.argv[1])
    print(store.claim_run("run-1"), flush=True)
    time.sleep(30)
    """
)


def test_a_run_is_held_by_one_process_at_a_time(db_path):
    Store.open(db_path)
    other = subprocess.Popen([sys.executable, "-c", CLAIM, db_path], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "True"
        assert Store.open(db_path).claim_run("run-1") is False
        assert Store.open(db_path).claim_run("run-2") is True
    finally:
        other.kill()
        other.wait()
    assert Store.open(db_path).claim_run("run-1") is True  # its holder died


MIGRATE = textwrap.dedent(
    """
    import sys
    from numerate.store import Store
    print(Store.open(sys.argv[1]).found_version, flush=True)
    """
)


def test_two_processes_upgrading_one_old_database_at_once_migrate_it_once(db_path):
    database_at_version(db_path, 3).close()
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", MIGRATE, db_path],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    found = sorted(int(p.communicate(timeout=120)[0]) for p in processes)
    assert [p.returncode for p in processes] == [0, 0]
    assert found == [3, len(MIGRATIONS)]  # one migrated, the other found it done
    con = duckdb.connect(db_path, read_only=True)
    versions = [
        v for (v,) in con.execute("SELECT version FROM schema_migrations ORDER BY 1").fetchall()
    ]
    con.close()
    assert versions == list(range(1, len(MIGRATIONS) + 1))


def numerate(*args: str, env: dict[str, str] | None = None, **options):
    return subprocess.run([sys.executable, "-m", "numerate.cli", *args], cwd=ROOT,
                          env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          **options)  # fmt: skip


@pytest.mark.parametrize(
    "command",
    [["cache", "clear"], ["report"], ["upgrade"], ["regrade", "--run", "x"], ["db", "{db}"]],
)
def test_a_database_busy_past_the_wait_is_one_line_and_exit_3(db_path, command):
    Store.open(db_path)
    Store.close_all()
    other = hold(Path(db_path), 60)
    try:
        args = [a.replace("{db}", db_path) for a in command]
        db_option = [] if command[0] == "db" else ["--db", db_path]
        done = numerate(*args, *db_option, env={"NUMERATE_LOCK_TIMEOUT": "1"}, timeout=60)
    finally:
        other.kill()
        other.wait()
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert lines[-1].startswith(f"error: results database {db_path} stayed busy")
    assert f"PID {other.pid}" in lines[-1] and "nothing is lost" in lines[-1]


def test_ctrl_c_stops_a_command_waiting_for_the_database_at_once(db_path):
    Store.open(db_path)
    Store.close_all()
    other = hold(Path(db_path), 60)
    try:
        waiting = subprocess.Popen(
            [sys.executable, "-m", "numerate.cli", "cache", "clear", "--db", db_path],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        waits = lambda: waits_for_the_database(db_path, waiting.pid)  # noqa: E731
        wait_until(lambda: waits() or waiting.poll() is not None, what="the command waits")
        assert waiting.poll() is None  # waiting (the default wait is 600 s)
        started = time.monotonic()
        waiting.send_signal(signal.SIGINT)
        _, stderr = waiting.communicate(timeout=30)
        assert time.monotonic() - started < 5
    finally:
        other.kill()
        other.wait()
    assert waiting.returncode == 130
    assert "Traceback" not in stderr


CLAIMED_RUN = textwrap.dedent(
    """
    import sys, time
    from numerate.store import Store
    store = Store.open(sys.argv[1])
    store.claim_run(sys.argv[2])
    print("holding", flush=True)
    time.sleep(60)
    """
)


def test_a_run_another_process_runs_is_not_resumed_a_new_run_starts(db_path, prefect_harness):
    import asyncio

    from numerate.config.sweep import parse_sweep_config
    from numerate.tasks.database import open_run

    config = parse_sweep_config(
        {"name": "twice", "models": [{"name": "o", "model": "baseline:oracle"}],
         "manifolds": [{"manifold": "objects", "count": 2}]}
    )  # fmt: skip
    first = asyncio.run(open_run.fn(config, db_path))
    Store.close_all()  # this process lets go of it: like a first process still running it
    other = subprocess.Popen([sys.executable, "-c", CLAIMED_RUN, db_path, first], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "holding"
        from prefect import flow

        @flow
        async def second_process() -> str:
            return await open_run(config, db_path)

        second = asyncio.run(second_process())
    finally:
        other.kill()
        other.wait()
    assert second != first  # never two processes on one run
    Store.close_all()
    assert asyncio.run(open_run.fn(config, db_path)) in (first, second)  # resumable again


@pytest.mark.slow
def test_a_run_past_the_wait_fails_in_one_line_and_the_same_command_resumes_it(tmp_path):
    from tests.cli.test_run import logged, numerate_env, slow_sweep

    config, endpoint, log = slow_sweep(tmp_path, count=60, delay=0.1, batch_size=10)
    db = tmp_path / "r.duckdb"
    command = [sys.executable, "-m", "numerate.cli", "run", "--config", str(config),
               "--db", str(db)]  # fmt: skip
    env = {**numerate_env(tmp_path / "prefect"), "NUMERATE_LOCK_TIMEOUT": "2"}
    other = None
    try:
        run = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 120
        while len(logged(log)) < 10:
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        other = hold(db, 120)  # an analyst's client that keeps the file open
        _, stderr = run.communicate(timeout=120)
        assert run.returncode == 3, stderr
        assert "Traceback" not in stderr
        assert stderr.strip().splitlines()[-1].startswith(f"error: results database {db} stayed")
        sent = len(logged(log))
        other.kill()
        other.wait()
        again = subprocess.run(command, cwd=ROOT, env=numerate_env(tmp_path / "prefect"),
                               capture_output=True, text=True, timeout=300)  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert "resuming run" in again.stderr
    finally:
        if other is not None:
            other.kill()
        endpoint.kill()
        endpoint.wait()
    con = duckdb.connect(str(db), read_only=True)
    [(runs, responses)] = con.execute(
        "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM responses)"
    ).fetchall()
    con.close()
    assert (runs, responses) == (1, 60)  # one run, resumed, with every answer
    # nothing asked twice but what was in flight when the first process stopped
    assert len(logged(log)) - 60 <= 4, f"{len(logged(log))} requests for 60 cases ({sent} first)"


def test_a_row_without_a_column_is_refused_where_it_is_received(db_path):
    row = completion("h1")
    del row["revision"]
    with pytest.raises(StoreError, match="a completions row has no column 'revision'"):
        Store.open(db_path).receive("completions", [row])
    assert Store.open(db_path).get_completions(["h1"]) == {}  # nothing half-written


def test_a_journal_of_an_earlier_version_is_replayed_with_null_for_a_newer_column(db_path):
    """A journal a process of an earlier version left behind (its rows lack a column added
    since) is still written by the next process: the missing column is NULL."""
    Store.open(db_path)
    Store.close_all()
    row = {k: v for k, v in completion("old").items() if k != "revision"}
    dead_segment(db_path, journal_line(row) + "\n")
    stored = Store.open(db_path).get_completions(["old"])
    assert stored["old"]["revision"] is None and stored["old"]["text"] == "Answer: 1"


def dead_journal(db_path, request_hash, after):
    """The journal of a process that died, holding one good completion and then `after`."""
    Store.open(db_path)
    Store.close_all()
    return dead_segment(db_path, journal_line(completion(request_hash)) + after)


def journal_line(row: dict) -> str:
    """A completion as a journal line (without its newline)."""
    return json.dumps(["completions", row | {"created_at": row["created_at"].isoformat()}])


def dead_segment(db_path, text: str) -> Path:
    """The segment of a journal whose process died, holding `text`."""
    folder = journal_dir(db_path)
    folder.mkdir(exist_ok=True)
    (folder / "dead.owner").write_text("")
    segment = folder / "dead.000001.jsonl"
    segment.write_text(text)
    return segment


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('["evil_table", {"a": 1}]', "line 2: 'evil_table' is no table a journal holds"),
        ('["responses", "str"]', "line 2: a responses row that is no mapping"),
        ('["completions", {"colour": 1}]', "line 2: 'colour' is no column of completions"),
        ('["completions", {"created_at": "soon"}]', "line 2: created_at = 'soon' is no time"),
        ("[1, 2, 3]", "line 2: not a [table, row] pair"),
        # a hostile pass: a planted row of 5,000,000 characters was stored whole (of 30,000,000,
        # every writer ran out of memory, naming no file)
        (
            '["completions", {"text": "' + "x" * 300_000 + '"}]',
            "line 2: text holds 300,000 characters, more than numerate stores of a value (262,144)",
        ),
        ("not json", "line 2: not a [table, row] pair"),  # not the last line: no cut
        ('["responses", {}]', "cannot be written (Constraint Error: NOT NULL constraint"),
        ('["responses", {"sample_index": "x"}]', "cannot be written (Conversion Error"),
    ],
)
def test_a_journal_line_numerate_did_not_write_is_one_error_naming_the_file(db_path, line, said):
    """Before: a KeyError, an AttributeError, Arrow's or DuckDB's error (its first one hidden
    behind "Current transaction is aborted") ended every later writer in a traceback. Now one
    StoreError names the file (and line) and how to go on; nothing is written."""
    segment = dead_journal(db_path, "good", "\n" + line + "\n")
    with pytest.raises(StoreError) as refused:
        Store.open(db_path)
    assert f"journal {segment}" in str(refused.value) and said in str(refused.value)
    assert "move the file out of" in str(refused.value)
    Store.close_all()
    segment.unlink()
    assert Store.open(db_path).get_completions(["good"]) == {}  # the good line neither


def test_a_journal_segment_that_cannot_be_read_is_one_error_naming_it(db_path):
    """Before: IsADirectoryError's traceback (then, once sessions began inside the store's
    error words, "results database ...: Is a directory", naming the wrong file)."""
    Store.open(db_path)
    Store.close_all()
    folder = journal_dir(db_path)
    folder.mkdir(exist_ok=True)
    (folder / "dead.owner").write_text("")
    (folder / "dead.000001.jsonl").mkdir()
    with pytest.raises(StoreError) as refused:
        Store.open(db_path)
    said = str(refused.value)
    assert said.startswith(f"journal {folder / 'dead.000001.jsonl'} cannot be read: ")
    assert "move it out of" in said and "\n" not in said


def test_a_journal_s_answer_of_a_run_the_database_lacks_is_refused(db_path):
    """Before: written as an answer of no run (a journal of another database, or edited),
    which no report counts and nothing removes."""
    answer = {
        "run_id": "nosuch-run", "model": "m", "model_id": "m", "manifold": "objects",
        "case_id": "c", "sample_index": 0, "point_key": "default", "request_hash": "good",
        "raw_text": "1", "answer": "1", "outcome": "correct", "error": None,
        "finish_reason": "stop", "prompt_tokens": 1, "completion_tokens": 1, "latency_s": 0.1,
        "cached": False,
    }  # fmt: skip
    segment = dead_journal(db_path, "good", "\n" + json.dumps(["responses", answer]) + "\n")
    with pytest.raises(StoreError) as refused:
        Store.open(db_path)
    said = str(refused.value)
    assert f"journal {segment}: answers of run 'nosuch-run', which this database holds no " in said
    assert "move the file out of" in said
    Store.close_all()
    segment.unlink()
    store = Store.open(db_path)  # nothing of the file was written
    assert store.get_completions(["good"]) == {}
    assert store.query("SELECT count(*) FROM responses") == [(0,)]


def test_a_last_journal_line_cut_short_is_left_out_and_the_rest_written(db_path):
    dead_journal(db_path, "kept", '\n["compl')
    assert Store.open(db_path).get_completions(["kept"])["kept"]["text"] == "Answer: 1"


def test_a_numgen_run_scored_again_keeps_only_its_new_scores(db_path):
    """Metrics and per-target rows are typed (numerate.numgen.rows) and written together; a
    second scoring over a smaller design leaves no target of the first behind, and a metrics
    row without a column is refused with nothing written."""
    from numerate.numgen.metrics import confusion_matrix, per_target_accuracy, score

    def scored(targets, counts, design):
        cm = confusion_matrix(targets, counts, design)
        metrics = {**score(cm).as_row(), "run_id": "ng-1", "generator": "g", "detector": "d",
                   "errors": 0, "refused": 0, "unparsed": 0, "confusion": "{}"}  # fmt: skip
        return metrics, [{**row, "run_id": "ng-1"} for row in per_target_accuracy(cm)]

    store = Store.open(db_path)
    store.put_numgen_scores(*scored([1, 2, 3, 3], [1, 2, 3, 4], range(1, 4)))
    store.put_numgen_scores(*scored([1, 2], [1, 1], range(1, 3)))
    rows = store.query("SELECT target, n, correct FROM numgen_targets ORDER BY target")
    assert rows == [(1, 1, 1), (2, 1, 0)]
    [(accuracy, n)] = store.query("SELECT accuracy, n FROM numgen_metrics")
    assert (accuracy, n) == (0.5, 2)
    metrics, targets = scored([1], [1], range(1, 2))
    del metrics["mwe"]
    with pytest.raises(StoreError, match="a numgen_metrics row has no column 'mwe'"):
        store.put_numgen_scores(metrics, targets)
    assert store.query("SELECT count(*) FROM numgen_targets") == [(2,)]


WRITE_TEN_TIMES = textwrap.dedent(
    """
    import sys, time
    from numerate.store.access import connect
    waits = []
    for _ in range(10):
        started = time.monotonic()
        con = connect(sys.argv[1])
        waits.append(time.monotonic() - started)
        con.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
        con.execute("INSERT INTO t VALUES (1)")
        con.close()
        time.sleep(0.05)
    print(max(waits), flush=True)
    """
)


def test_readers_in_turn_never_keep_a_writer_out(tmp_path, db_path):
    """Four threads that open the database, read and close it, without a pause between (a
    viewer's pages, pollers): a writer in another process still gets the file each of ten
    times (it knocks, and readers about to open let it go first). Without the knock it
    waited 8.1 s; with it, under 1 s on a quiet machine and 2.0 s once with both cores
    busy beside the suite (a fresh clone's CI run), so the bound is 4 s, not 1."""
    import threading

    from numerate.store.reader import Reader

    Store.open(db_path)
    Store.close_all()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            with Reader.open(db_path) as reader:
                reader.query("SELECT count(*) FROM runs")
                time.sleep(0.02)

    readers = [threading.Thread(target=read) for _ in range(4)]
    for thread in readers:
        thread.start()
    try:
        done = subprocess.run([sys.executable, "-c", WRITE_TEN_TIMES, db_path], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    finally:
        stop.set()
        for thread in readers:
            thread.join()
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 4.0
    assert not Path(f"{db_path}.waiting").exists()  # every knock removed


WRITE_WITHOUT_A_PAUSE = textwrap.dedent(
    """
    import os, sys, time
    import duckdb
    from numerate.store.access import attach, detach
    con = duckdb.connect()
    sessions = 0
    while os.path.exists(sys.argv[2]):
        attach(con, sys.argv[1])
        if not sessions:
            print("writing", flush=True)
        con.execute("INSERT INTO t VALUES (1)")
        time.sleep(0.25)  # a session's work
        detach(con)  # and the next session at once, as a fast sweep's follow each other
        sessions += 1
    print(sessions, flush=True)
    """
)


def test_a_writer_whose_sessions_follow_each_other_never_keeps_a_reader_out(tmp_path, db_path):
    """A first-contact review: beside a fast sweep, whose sessions follow each other within a
    few milliseconds, `numerate runs` waited 14 s for the file (a reader's pauses seldom fell
    in a gap). A writer about to begin a session lets a reader that waits go first."""
    import duckdb

    from numerate.store.reader import Reader

    with duckdb.connect(db_path) as con:
        con.execute("CREATE TABLE t (x INTEGER)")
    going = tmp_path / "going"
    going.touch()
    writer = subprocess.Popen([sys.executable, "-c", WRITE_WITHOUT_A_PAUSE, db_path, str(going)],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert writer.stdout.readline() == "writing\n"
        waits = []
        for _ in range(5):
            started = time.monotonic()
            with Reader.open(db_path, numerate_schema=False) as reader:
                waits.append(time.monotonic() - started)
                reader.query("SELECT count(*) FROM t")
            time.sleep(0.1)
    finally:
        going.unlink()
        sessions = int(writer.communicate(timeout=60)[0])
    assert writer.returncode == 0
    assert max(waits) < 1.5, waits
    assert sessions >= 3  # the writer went on between the reads


@pytest.mark.parametrize("kind", ["file", "link"])
def test_something_else_at_the_journal_folder_s_name_is_one_error(tmp_path, kind):
    """Before: a file at `<db>.journal` ended `run` in a FileExistsError traceback (and other
    writers went on); a link had journals written, claimed and removed where it points."""
    db = str(tmp_path / "r.duckdb")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if kind == "file":
        journal_dir(db).write_text("x")
    else:
        journal_dir(db).symlink_to(elsewhere)
    with pytest.raises(StoreError, match=r"r\.duckdb\.journal is (not a folder|a link), where"):
        Store.open(db)
    assert not Path(db).exists() and not any(elsewhere.iterdir())


def test_a_link_at_the_write_ahead_log_s_name_is_refused_by_writers_and_readers(tmp_path):
    """A hostile pass: with `<db>.wal` a link to another results database, `run` and
    `regrade` wrote DuckDB's log through it (the other database, 3.9 MB, became 4 KB of log,
    its runs lost)."""
    from numerate.kernel.errors import ConfigError
    from numerate.store.reader import Reader

    db = str(tmp_path / "r.duckdb")
    Store.open(db)
    Store.close_all()
    other = tmp_path / "other.duckdb"
    other.write_bytes(b"another database" * 1000)
    Path(f"{db}.wal").symlink_to(other)
    said = r"r\.duckdb\.wal is a link, where DuckDB keeps the database's write-ahead log: move"
    with pytest.raises(StoreError, match=said):
        Store.open(db)
    with pytest.raises(ConfigError, match=said):
        Reader.open(db)
    assert other.read_bytes() == b"another database" * 1000


def test_a_results_database_is_never_written_under_another_one_s_write_ahead_log_name(
    tmp_path,
):
    """A hostile pass: `run --db w.duckdb.wal` stored a run there, and the next `run --db
    w.duckdb` took that file for w.duckdb's write-ahead log and removed it, the run with it.
    Writers refuse the name; a reader may still read what such a file holds."""
    from numerate.store.reader import Reader

    db = tmp_path / "w.duckdb"
    log_name = tmp_path / "w.duckdb.wal"
    said = (
        r"w\.duckdb\.wal: a name DuckDB keeps for the write-ahead log of the database .*w\.duckdb"
    )
    with pytest.raises(StoreError, match=said):
        Store.open(str(log_name))
    assert not log_name.exists() and not db.exists()
    made_before = tmp_path / "kept.duckdb"  # one made under that name by an earlier version
    Store.open(str(made_before))
    Store.close_all()
    made_before.rename(log_name)
    with pytest.raises(StoreError, match=r"w-results\.duckdb"):  # where to move it
        Store.open(str(log_name))
    Reader.open(str(log_name)).close()
    assert log_name.is_file()
    # a fresh-eyes review: opening w.duckdb to write still removed it
    with pytest.raises(StoreError, match=r"w\.duckdb\.wal is a results database, where DuckDB"):
        Store.open(str(db))
    assert log_name.is_file() and not db.exists()


def test_a_link_at_the_waiting_folder_s_name_is_never_followed(tmp_path, db_path):
    """A hostile pass: with `<db>.waiting` a link to a folder, `numerate runs` (any reader)
    removed each file there whose name holds `.write.` (a `thesis.write.docx`), taking it for
    the knock of a writer no longer alive; a waiting writer wrote its knock there."""
    from numerate.store import access
    from numerate.store.reader import Reader

    elsewhere = tmp_path / "documents"
    elsewhere.mkdir()
    (elsewhere / "thesis.write.docx").write_text("a year of work")
    (elsewhere / "1.write.x").write_text("no process 1's")
    Store.open(db_path)
    Store.close_all()
    Path(f"{db_path}.waiting").symlink_to(elsewhere)
    assert access.waiting_writers(db_path) == 0
    with Reader.open(db_path) as reader, access._knock(db_path, "write"):
        reader.query("SELECT count(*) FROM runs")
        assert access.waiting_writers(db_path) == 0
    assert sorted(p.name for p in elsewhere.iterdir()) == ["1.write.x", "thesis.write.docx"]
    # in a folder of its own, a dead process's knock is removed and a live one's counted
    Path(f"{db_path}.waiting").unlink()
    Path(f"{db_path}.waiting").mkdir()
    dead = Path(f"{db_path}.waiting") / "999999999.write.ab"
    dead.write_text("")
    with access._knock(db_path, "write"), access._knock(db_path, "read"):
        assert access.waiting_writers(db_path) == 1
    assert not dead.exists() and not Path(f"{db_path}.waiting").exists()


HUNGRY = (
    "SELECT count(*) FROM (SELECT i, repeat('x', 200) AS s FROM range(2000000) t(i) "
    "ORDER BY s, i DESC)"
)
"""A sort that needs far more than 16 MB."""


def bounded(monkeypatch, spill: str = "", memory: str = "16MB") -> None:
    """This test's stores open with DuckDB bounded to `memory`, spilling to `spill` ("":
    DuckDB never spills)."""
    from numerate.store import writer

    monkeypatch.setattr(
        writer, "writer_settings", lambda: {"memory_limit": memory, "temp_directory": spill}
    )


@pytest.mark.parametrize("spill", ["none", "unmakeable"])
def test_duckdb_past_its_memory_bound_is_a_store_error_naming_the_database(
    tmp_path, monkeypatch, spill
):
    """DuckDB's "Out of Memory Error" (its bound reached, no disk to spill to) is said in one
    line naming the database and the bound, as a StoreError (a run stops, resumable), never
    a traceback; a spill folder it cannot make is said as such, not as a damaged file."""
    from numerate.store import Store, StoreError, writer

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    folder = "" if spill == "none" else str(blocked / "spill")  # "": DuckDB never spills
    bounded(monkeypatch, folder)
    store = Store.open(str(tmp_path / "bounded.duckdb"))
    try:
        with pytest.raises(StoreError) as refused:
            store.query(HUNGRY)
    finally:
        Store.close_all()
    said = str(refused.value)
    assert "bounded.duckdb" in said and writer.WRITER_MEMORY in said, said
    assert folder in said and "damaged" not in said and "\n" not in said, said


LARGE = 8_000
"""Answers of about 4 KB each: writing them needs far more than 16 MB."""


def large_answers() -> list[dict]:
    return [completion(f"h{i}") | {"text": f"{i} " + "x" * 4_000} for i in range(LARGE)]


def test_answers_past_duckdb_s_bound_wait_in_the_journal_and_nothing_is_lost(db_path, monkeypatch):
    """Writing the journal ran out of DuckDB's bound: before, a raw OutOfMemoryException (a
    traceback at the end of `numerate run`, and a second one as the store closed). Now the
    store's one-line error; the answers stay journaled as the store closes, and the next
    process writes them."""
    bounded(monkeypatch)
    store = Store.open(db_path)
    store.receive("completions", large_answers())
    with pytest.raises(StoreError) as refused:
        store.flush()
    said = str(refused.value)
    assert "results.duckdb: DuckDB needed more than" in said and "\n" not in said, said
    Store.close_all()  # no error: what could not be written stays in the journal
    monkeypatch.undo()
    stored = Store.open(db_path).get_completions([f"h{i}" for i in range(LARGE)])
    assert len(stored) == LARGE and stored["h7"]["text"].startswith("7 x")


def test_a_backlog_larger_than_duckdb_s_bound_is_written_a_part_at_a_time(
    db_path, monkeypatch, tmp_path
):
    """A journal whose rows DuckDB cannot hold in one transaction (its MERGE keeps them in
    memory until it commits) is written in parts of journal.PART_BYTES: before, every flush
    tried the whole backlog again, and it never fitted. Here 32 MB of answers at a 48 MB
    bound, in parts of 1 MB; this process's journal and a dead one's."""
    from numerate.store import journal

    bounded(monkeypatch, str(tmp_path / "spill"), "48MB")  # as the store spills
    monkeypatch.setattr(journal, "PART_BYTES", 1_000_000)
    store = Store.open(db_path)
    store.receive("completions", large_answers())
    store.flush()
    counted = "SELECT count(DISTINCT request_hash) FROM completions WHERE request_hash LIKE ?"
    assert store.query(counted, ["h%"]) == [(LARGE,)]
    Store.close_all()
    lines = [journal_line(r | {"request_hash": "d" + r["request_hash"]}) for r in large_answers()]
    dead = dead_segment(db_path, "\n".join(lines) + "\n")
    assert Store.open(db_path).query(counted, ["dh%"]) == [(LARGE,)] and not dead.exists()


def test_rows_put_past_duckdb_s_bound_are_written_a_part_at_a_time(db_path, monkeypatch, tmp_path):
    """A hostile pass: a sweep of 20 cases with 3,600,000-character prompts (the built-in
    shuffle manifold's longest is about 4,100,000) failed every time at its first batch, the
    batch's cases in one write past the 128 MB bound. Rows put (cases, stored answers) are
    written in parts of journal.PART_BYTES, as a journal's rows are. Here 32 MB of answers at
    a 48 MB bound, in parts of 1 MB."""
    from numerate.store import journal

    bounded(monkeypatch, str(tmp_path / "spill"), "48MB")
    monkeypatch.setattr(journal, "PART_BYTES", 1_000_000)
    store = Store.open(db_path)
    store.put_completions(large_answers())
    counted = "SELECT count(DISTINCT request_hash) FROM completions WHERE request_hash LIKE ?"
    assert store.query(counted, ["h%"]) == [(LARGE,)]
    Store.close_all()


@given(
    st.lists(st.tuples(st.sampled_from(["completions", "responses"]),
                       st.dictionaries(st.sampled_from(["text", "raw_text", "n"]),
                                       st.one_of(st.text(max_size=40), st.integers())))),
    st.integers(1, 100),
)  # fmt: skip
def test_a_journal_s_parts_are_its_rows_in_order_each_within_its_bound_and_full(rows, most):
    """In order, none empty, none past `most` bytes of text unless it is one row, and each as
    full as the bound allows (the next part's first row would not have fitted)."""
    chunks = list(parts(rows, most))
    assert [entry for chunk in chunks for entry in chunk] == rows

    def size(entries):
        return sum(
            len(v.encode()) for _, row in entries for v in row.values() if isinstance(v, str)
        )

    for chunk, after in zip(chunks, [*chunks[1:], []], strict=False):
        assert chunk and (size(chunk) <= most or len(chunk) == 1)
        assert not after or size(chunk) + size(after[:1]) > most


def test_a_dead_process_s_journal_past_duckdb_s_bound_is_kept_not_refused(db_path, monkeypatch):
    """Replaying a dead process's journal ran out of DuckDB's bound: before, it was said as
    rows the table refuses, with the advice to move the file away (the answers then lost).
    Now it is the bound's error, and the next process with room writes them."""
    Store.open(db_path)
    Store.close_all()
    dead_segment(db_path, "\n".join(journal_line(r) for r in large_answers()) + "\n")
    bounded(monkeypatch)
    with pytest.raises(StoreError) as refused:
        Store.open(db_path)
    said = str(refused.value)
    assert "DuckDB needed more than" in said and "move the file" not in said, said
    Store.close_all()
    monkeypatch.undo()
    stored = Store.open(db_path).get_completions([f"h{i}" for i in range(LARGE)])
    assert len(stored) == LARGE


@pytest.mark.parametrize("planted", ["a pipe", "a link to /dev/zero", "a link to a file"])
def test_a_journal_segment_that_is_no_file_of_numerate_s_is_refused_not_read(
    db_path, tmp_path, planted
):
    """A hostile pass: a segment of a dead process's journal that was a named pipe hung every
    command that writes (no output), a link to /dev/zero took 10 GB in 30 s, and a link to a
    file elsewhere was read through. Each is now refused in one line naming it."""
    folder = journal_dir(db_path)
    folder.mkdir()
    (folder / "h-1-aaaa.owner").touch()  # its process is gone: no lock held
    segment = folder / "h-1-aaaa.000001.jsonl"
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text('["completions", {}]\n')
    if planted == "a pipe":
        os.mkfifo(segment)
    else:
        os.symlink("/dev/zero" if "zero" in planted else elsewhere, segment)
    what = "not a regular file" if planted == "a pipe" else "a symbolic link; numerate follows no"
    with pytest.raises(StoreError, match=f"journal .*h-1-aaaa.000001.jsonl cannot be read: {what}"):
        Store.open(db_path)
    Store.close_all()
    assert elsewhere.read_text() == '["completions", {}]\n'


def test_a_journal_line_longer_than_any_row_is_refused_not_read_whole(db_path, monkeypatch):
    import numerate.store.journal as journal

    monkeypatch.setattr(journal, "MAX_LINE", 1000)
    folder = journal_dir(db_path)
    folder.mkdir()
    segment = folder / "h-1-aaaa.000001.jsonl"
    segment.write_text("x" * 5000)  # no end of line: the whole file would be one line
    with pytest.raises(StoreError, match="line 1: longer than 1,000 characters"):
        read_segment(segment)


def test_owner_files_that_are_links_or_pipes_are_not_numerate_s_and_hang_nothing(db_path, tmp_path):
    """An owner file that is a pipe kept `open` waiting for a writer (every command that
    writes hung); one that is a link was locked, and counted, through it."""
    folder = journal_dir(db_path)
    folder.mkdir()
    os.mkfifo(folder / "h-1-aaaa.owner")
    os.symlink(tmp_path / "elsewhere.owner", folder / "h-2-bbbb.owner")
    (tmp_path / "elsewhere.owner").touch()
    with orphans(db_path) as found:
        assert found == []
    assert live_owners(db_path) == 0
    assert (tmp_path / "elsewhere.owner").exists()


def test_a_run_claim_is_never_made_through_a_link_at_its_name(db_path, tmp_path):
    """`open(claim, "a")` made the file a planted link names, elsewhere."""
    store = Store.open(db_path)
    folder = journal_dir(db_path)
    folder.mkdir(exist_ok=True)
    os.symlink(tmp_path / "made-elsewhere", folder / "run-r.claim")
    with pytest.raises(StoreError, match=r"run-r\.claim cannot be made: a symbolic link"):
        store.claim_run("r")
    assert not (tmp_path / "made-elsewhere").exists()
    Store.close_all()


def test_a_run_id_changed_by_hand_to_a_path_is_never_a_claim_outside_the_journal(db_path, tmp_path):
    """A hostile sweep: a run id edited to `x/../../../victim/notes` (with a folder `run-x`
    in the journal's folder) made `regrade` truncate `victim/notes.claim` as its claim and
    remove it as it let go. A run id that is no name numerate makes is refused, said."""
    from numerate.kernel.errors import ConfigError

    store = Store.open(db_path)
    folder = journal_dir(db_path)
    (folder / "run-x").mkdir(parents=True)
    victim = Path(folder, "run-x", *[".."] * 3, "victim", "notes.claim").resolve()
    victim.parent.mkdir(parents=True, exist_ok=True)
    victim.write_text("precious")
    hostile = f"x/{os.path.relpath(victim.with_suffix(''), folder / 'run-x')}"
    with pytest.raises(ConfigError, match=r"run_id 'x/\.\./.*cannot be held, resumed or"):
        store.claim_run(hostile)
    # nor is it the run a sweep resumes: every later run of the sweep would fail (a review)
    store.start_run("s-1", "s", "h", {}, "v")
    store.start_run("s-2", "s", "h", {}, "v")  # the latest, its id then changed by hand
    store.write(lambda con: con.execute("UPDATE runs SET run_id = ? WHERE run_id = 's-2'",
                                        [hostile]))  # fmt: skip
    assert store.unfinished_run("s", "h") == "s-1"
    Store.close_all()
    assert victim.read_text() == "precious"


# ---------------------------------------------------------------- letting go (a third mutation
# sweep: each test below passed with the code it checks removed)


def test_a_file_made_here_is_removed_only_while_no_one_holds_or_wrote_it(tmp_path, monkeypatch):
    """`_remove_if_untouched`: the file and its `.wal` go; a file another process holds, or
    wrote between this process's look at it and its lock, stays."""
    from numerate.store import writer

    db = tmp_path / "made.duckdb"
    duckdb.connect(str(db)).close()
    wal = Path(f"{db}.wal")
    wal.write_bytes(b"wal")
    assert writer._remove_if_untouched(db)
    assert not db.exists() and not wal.exists()
    duckdb.connect(str(db)).close()
    other = hold(db, 30)
    try:
        assert not writer._remove_if_untouched(db) and db.exists()
    finally:
        other.kill()
        other.wait()
    real = writer.fcntl

    class WrittenMeanwhile:
        LOCK_EX, LOCK_NB = real.LOCK_EX, real.LOCK_NB

        @staticmethod
        def lockf(handle, flags):
            with open(db, "ab") as written:  # another process's write, just before the lock
                written.write(b"rows")
            real.lockf(handle, flags)

    monkeypatch.setattr(writer, "fcntl", WrittenMeanwhile)
    assert not writer._remove_if_untouched(db) and db.exists()


@pytest.mark.parametrize("rows", [0, 1])
def test_a_file_that_another_process_made_meanwhile_stays_when_it_holds_rows(
    tmp_path, monkeypatch, rows
):
    """This process's making of a new database is stopped; another process made the file
    meanwhile: it is removed (with the folder made for it) only while it holds no row."""
    db = tmp_path / "new" / "r.duckdb"

    def made_elsewhere(store):
        con = duckdb.connect(str(db))
        con.execute(f"CREATE TABLE answers AS SELECT 1 AS x LIMIT {rows}")
        con.close()
        raise KeyboardInterrupt

    monkeypatch.setattr(Store, "session", made_elsewhere)
    with pytest.raises(KeyboardInterrupt):
        Store.open(str(db))
    assert db.exists() == bool(rows) and db.parent.exists() == bool(rows)


def test_a_stop_while_the_journal_is_written_lets_the_file_go_and_loses_nothing(
    db_path, monkeypatch
):
    from numerate.store import writer

    store = Store.open(db_path)
    store.receive("completions", [completion("h1")])

    def stopped(*_, **__):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(writer, "insert_rows", stopped)
        with pytest.raises(KeyboardInterrupt):
            store.flush()
    opened = subprocess.run(  # another process opens it at once: it was let go
        [sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1]).close()", db_path],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert opened.returncode == 0, opened.stderr[-300:]
    store.flush()
    assert store.query("SELECT request_hash FROM completions") == [("h1",)]


def test_a_closed_store_leaves_no_journal_and_no_claim_behind(db_path, monkeypatch):
    """Rows received are written as the store closes (not left for the next process), the
    segments written leave the journal, a journal made beside the store's is closed, and a
    run's claim is given up."""
    monkeypatch.setenv("NUMERATE_FLUSH_SECONDS", "3600")  # no writes but the store's own
    store = Store.open(db_path)
    assert store.claim_run("r")
    mine = store.adopt(None)
    beside = Journal(db_path)
    assert store.adopt(beside) is mine and beside.closed
    store.receive("completions", [completion("h1")])
    store.flush()
    assert mine is not None and mine.pending == 0
    store.receive("completions", [completion("h2")])
    Store.close_all()
    assert not journal_dir(db_path).exists()
    con = duckdb.connect(db_path, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM completions").fetchone() == (2,)
    finally:
        con.close()
    assert Store.open(db_path).claim_run("r")  # the claim was given up
    Store.close_all()


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [("", 600.0), ("  ", 600.0), ("0", 0.0), ("2.5", 2.5), ("604800", 604800.0),
     ("604801", None), ("inf", None), ("nan", None), ("-1", None), ("ten", None)],
)  # fmt: skip
def test_the_lock_timeout_is_from_0_to_a_week_and_blank_is_the_default(monkeypatch, raw, seconds):
    from numerate.store import access

    monkeypatch.setenv("NUMERATE_LOCK_TIMEOUT", raw)
    if seconds is not None:
        assert access.lock_timeout_s() == seconds
        return
    with pytest.raises(StoreError, match=f"NUMERATE_LOCK_TIMEOUT={raw!r}: expected a number"):
        access.lock_timeout_s()


CONFLICT = 'IO Error: Could not set lock on file "r.duckdb": Conflicting lock is held (PID 1)'


class Contended:
    """Opens `db` after `times` lock conflicts, noting the writers waiting as each comes."""

    def __init__(self, db: str, times: int, error: str = CONFLICT) -> None:
        self.db, self.left, self.error = db, times, error
        self.calls, self.waiting = 0, []

    def __call__(self) -> str:
        from numerate.store import access

        self.calls += 1
        self.waiting.append(access.waiting_writers(self.db))
        if self.left:
            self.left -= 1
            raise duckdb.IOException(self.error)
        return "opened"


@pytest.mark.parametrize("kind", ["write", "read"])
def test_a_wait_knocks_once_as_what_it_waits_for_with_pauses_of_at_most_a_fifth_of_a_second(
    db_path, monkeypatch, kind
):
    import types

    from numerate.store import access

    pauses = []
    monkeypatch.setattr(access, "time", types.SimpleNamespace(
        monotonic=time.monotonic, sleep=pauses.append))  # fmt: skip
    monkeypatch.setattr(access, "KNOCK_AFTER_S", 0.0)
    contended = Contended(db_path, 12)
    assert access._when_free(db_path, contended, kind) == "opened"
    assert contended.waiting == [0, *[1 if kind == "write" else 0] * 12]
    assert len(pauses) == 12 and max(pauses) <= 0.2 * 1.5 and pauses[-1] >= 0.1
    assert not Path(f"{db_path}.waiting").exists()  # the knock is gone with the wait


def test_an_error_that_is_no_lock_conflict_is_raised_at_once(db_path, monkeypatch):
    from numerate.store import access

    monkeypatch.setenv("NUMERATE_LOCK_TIMEOUT", "1")
    denied = Contended(db_path, 1, 'IO Error: Cannot open file "r.duckdb": Permission denied')
    with pytest.raises(duckdb.IOException, match="Permission denied"):
        access._when_free(db_path, denied, "write")
    assert denied.calls == 1


def test_a_hurried_block_ends_its_waits_and_later_waits_are_whole_again(db_path, monkeypatch):
    import types

    from numerate.store import access

    monkeypatch.setattr(access, "time", types.SimpleNamespace(
        monotonic=time.monotonic, sleep=lambda _: None))  # fmt: skip
    with access.hurried(0), pytest.raises(DatabaseBusy, match="stayed busy for 0 s"):
        access._when_free(db_path, Contended(db_path, 3), "write")
    assert access._when_free(db_path, Contended(db_path, 3), "write") == "opened"


def test_a_knock_of_another_user_s_live_process_is_counted_and_kept(db_path, monkeypatch):
    """Signalling another user's process is refused (EPERM): it is alive, not dead."""
    waiting = Path(f"{db_path}.waiting")
    waiting.mkdir()
    knock = waiting / "4242.write.ab"
    knock.write_text("")

    def refused(pid, signal_number):
        raise PermissionError(1, "Operation not permitted")

    from numerate.store import access

    monkeypatch.setattr(os, "kill", refused)
    assert access.waiting_writers(db_path) == 1 and knock.exists()


def test_a_knock_that_cannot_be_made_keeps_no_file_descriptor(db_path, monkeypatch):
    import types
    import uuid

    from numerate.store import access

    monkeypatch.setattr(access, "uuid", types.SimpleNamespace(uuid4=lambda: uuid.UUID(int=0)))
    waiting = Path(f"{db_path}.waiting")
    waiting.mkdir()
    (waiting / f"{os.getpid()}.write.00000000").write_text("")  # its name is taken
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(3):
        with access._knock(db_path, "write"):
            pass
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_lock_log_that_cannot_be_written_is_said_once(tmp_path, monkeypatch):
    from numerate.kernel.progress import reporting_to
    from numerate.store import access
    from tests.notes import Notes

    log = tmp_path / "no-folder" / "locks.jsonl"
    monkeypatch.setenv("NUMERATE_LOCK_LOG", str(log))
    monkeypatch.setattr(access, "_LOG_LOST", [])
    with reporting_to(Notes()) as progress:
        for _ in range(3):
            with access.held(str(tmp_path / "r.duckdb"), "write", 0.0):
                pass
    assert len(progress.notes) == 1 and str(log) in progress.notes[0]


def test_the_turn_a_writer_gives_waiting_readers_ends_with_a_stopping_command(db_path):
    """A review: a stopping command (`hurry`, a few seconds in all) still gave a waiting
    reader its whole 2 s turn before each of its last sessions."""
    from numerate.store import access

    waiting = Path(f"{db_path}.waiting")
    waiting.mkdir()
    (waiting / f"{os.getpid()}.read.00000000").write_text("")  # a live reader waits
    started = time.monotonic()
    access.let_go_first(db_path, "read", 0.3)
    assert time.monotonic() - started >= 0.3  # the turn, as long as asked
    started = time.monotonic()
    with access.hurried(0.05):
        access.let_go_first(db_path, "read")
    assert time.monotonic() - started < 1.0


def test_a_reader_lets_the_writers_that_waited_before_it_in_however_long_that_takes(db_path):
    """Readers share the file, so a writer needs them all out: readers that each held it 3 s,
    one after another, each letting a waiting writer go first for 2 s only, kept it out
    until it gave up (25 s). A reader now waits until the writers that waited when it came
    are in, or its own wait's bound; those that knock later wait their turn (two writers in
    turn never keep a reader out)."""
    import threading

    from numerate.store import access

    waiting = Path(f"{db_path}.waiting")
    waiting.mkdir()
    first = waiting / f"{os.getpid()}.write.00000001"  # a live writer waits
    first.write_text("")
    later = waiting / f"{os.getpid()}.write.00000002"
    # timed from before the timers start, so the first is in TURN_S + 1 s after it at the
    # earliest (timed from after them, a fresh clone's run measured 2.9975 s)
    started = time.monotonic()
    threading.Timer(0.5, later.write_text, [""]).start()  # another, after the reader came
    threading.Timer(access.TURN_S + 1.0, first.unlink).start()  # the first is in
    access.let_go_first(db_path, "write", 30.0)
    waited = time.monotonic() - started
    assert access.TURN_S + 1.0 <= waited < 10.0, waited  # past a turn; not the later one's
    assert later.exists() and access.waiting_writers(db_path) == 1


def test_a_reader_waits_for_a_writer_that_waited_before_it_and_says_so(db_path):
    """`Reader.open` gives a waiting writer more than a turn of 2 s: until it is in, said
    past the turn with the process it waits for."""
    import threading

    from numerate.kernel.progress import reporting_to
    from numerate.store import access
    from numerate.store.reader import Reader
    from tests.notes import Notes

    Store.open(db_path).close()
    waiting = Path(f"{db_path}.waiting")
    waiting.mkdir()
    knock = waiting / f"{os.getpid()}.write.00000001"  # this process, alive, waits to write
    knock.write_text("")
    threading.Timer(access.TURN_S + 1.0, knock.unlink).start()
    started = time.monotonic()
    with reporting_to(Notes()) as progress, Reader.open(db_path):
        waited = time.monotonic() - started
    assert waited >= access.TURN_S + 1.0, waited
    [said] = progress.notes
    assert f"PID {os.getpid()}" in said and "(waiting to write it) goes first" in said, said
