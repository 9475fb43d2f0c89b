"""Naming runs and sweeps on the command line (numerate.results.runs)."""

import subprocess
import sys

import pytest

from numerate.kernel.errors import ConfigError
from numerate.results.runs import check_known_sweep, check_sweep_name, resolve_run
from numerate.store import Store
from numerate.store.reader import Reader


def test_a_run_id_that_begins_another_names_itself_and_a_shorter_prefix_is_ambiguous(db_path):
    store = Store.open(db_path)
    for run_id in ("abc", "abcd", "abce"):
        store.start_run(run_id, "s", "h", {}, "v")
    Store.close_all()
    with Reader.open(db_path) as reader:
        assert resolve_run(reader, "abc") == "abc"
        assert resolve_run(reader, " abcd\n") == "abcd"  # as pasted
        with pytest.raises(ConfigError, match="run 'ab' is ambiguous: it starts abc"):
            resolve_run(reader, "ab")


def test_a_numgen_run_named_where_a_sweep_s_or_metrics_are_wanted_is_said_to_be_one(db_path):
    """A hostile pass: `regrade --run numgen-...` said only that no run begins so, and
    `numgen recount` of a failed run that no NumGen run with metrics is there."""
    from numerate.results.numgen import one_run

    store = Store.open(db_path)
    store.start_numgen_run("numgen-failed", "benchmark", "synthetic", "blobs", {}, "v")
    store.set_run_status("numgen-failed", "failed", "numgen_runs")
    Store.close_all()
    with Reader.open(db_path) as reader:
        with pytest.raises(ConfigError, match="begins so; it is a NumGen run's: `numerate numg"):
            resolve_run(reader, "numgen-failed")
        with pytest.raises(ConfigError, match=r"that NumGen run has no metrics \(its status: fa"):
            one_run(reader, "numgen-failed", "RUN")
        with pytest.raises(ConfigError, match="no NumGen run with metrics in"):
            one_run(reader, "numgen-other", "RUN")


def test_names_past_those_an_error_lists_are_counted(db_path):
    """A hostile pass: `--sweep nope` listed 10 of 26 sweeps and an ambiguous prefix 5 of its
    runs, as if they were all."""
    store = Store.open(db_path)
    for n in range(12):
        store.start_run(f"run-{n:02d}", f"sweep-{n:02d}", "h", {}, "v")
    Store.close_all()
    with Reader.open(db_path) as reader:
        with pytest.raises(ConfigError, match=r"it starts run-09, .*, run-05 and more; give more"):
            resolve_run(reader, "run-0")  # newest first, read 6 at most
        with pytest.raises(ConfigError, match=r"sweep-09 and 2 more\)$"):
            check_known_sweep(reader, "nope")


@pytest.mark.parametrize("blank", ["", "  ", "\t"])
def test_a_blank_sweep_name_is_refused(blank):
    """A blank --sweep would mean every sweep (a mutation sweep: only '' was checked)."""
    with pytest.raises(ConfigError, match="give a sweep name, or leave it out"):
        check_sweep_name(blank)


def test_a_sweep_of_a_database_without_runs_is_said_so(db_path):
    Store.open(db_path)
    Store.close_all()
    with Reader.open(db_path) as reader:
        with pytest.raises(ConfigError, match=r"no run of that sweep \(it holds no sweep's run\)"):
            check_known_sweep(reader, "nightly")
        check_known_sweep(reader, None)


def test_a_run_whose_process_is_gone_is_listed_stopped_and_can_be_chosen_so(db_path):
    """`numerate runs` and `numerate view` listed a killed run as `running` for ever, while
    `report` said it had stopped without ending; and any live process writing the file made
    every run recorded running look live. A file's run is held by the live process whose
    journal its claim names (numerate.store.journal.claim_run)."""
    from numerate.results.runs import list_runs
    from numerate.store.browse import STOPPED, runs_page
    from numerate.store.journal import journal_dir

    store = Store.open(db_path)
    for run_id in ("gone", "ended", "killed", "old"):
        store.start_run(run_id, "s", "h", {}, "v")  # recorded running
    store.set_run_status("ended", "finished")
    Store.close_all()  # the process that ran them let its claims go: they stay running
    claims = journal_dir(db_path)
    claims.mkdir(exist_ok=True)  # each process removes it as it ends, when empty
    (claims / "run-killed.claim").write_text("host-1-deadbeef")  # a SIGKILL left it
    (claims / "run-old.claim").write_text("")  # an older numerate's claim names no journal

    def statuses(**chosen):
        with Reader.open(db_path) as reader:
            frame, total = runs_page(reader, 0, 10, **chosen)
        assert total == frame.height
        return dict(zip(frame["id"], frame["status"], strict=True))

    with Reader.open(db_path) as reader:
        listed = list_runs(reader)
    assert dict(zip(listed["id"], listed["status"], strict=True)) == {
        "gone": STOPPED, "ended": "finished", "killed": STOPPED, "old": STOPPED
    }  # fmt: skip
    assert statuses(status="running") == {}
    assert statuses(status="finished") == {"ended": "finished"}
    live = Store.open(db_path)
    live.start_run("live", "s", "h", {}, "v")  # this process runs it: its claim names its journal
    try:
        assert statuses() == {
            "gone": STOPPED, "ended": "finished", "killed": STOPPED, "live": "running",
            "old": "running",  # a claim without a name: held while any process writes the file
        }  # fmt: skip
        assert statuses(status="running") == {"live": "running", "old": "running"}
        assert statuses(status=STOPPED, text="i") == {"killed": STOPPED}
        assert statuses(status=STOPPED, sweep="other") == {}
    finally:
        Store.close_all()
    assert statuses(status=STOPPED).keys() == {"gone", "killed", "old", "live"}


def test_a_run_that_ends_as_it_is_probed_is_shown_as_it_ended(db_path, monkeypatch):
    """A review: a run read `running`, then probed once it had ended and let its claim go,
    was shown stopped without ending (`runs`, `report`, and a viewer page that then stopped
    reloading on that wrong status)."""
    import numerate.results.report as report
    import numerate.store.queries as queries
    import numerate.view.pages as pages
    from numerate.store.browse import runs_page

    store = Store.open(db_path)
    store.start_run("ending", "s", "h", {}, "v")

    def ends_as_probed(db, run_ids):  # it ends, then lets its claim go, as it is probed
        store.set_run_status("ending", "finished")
        return set(run_ids)

    monkeypatch.setattr(queries, "stopped_runs", ends_as_probed)  # the one probe of them all
    try:  # read through the writer (a reader of this process would hold the file meanwhile)
        assert runs_page(store, 0, 10)[0]["status"].to_list() == ["finished"]
        store.set_run_status("ending", "running")
        assert report.run_state(store, "ending") is None  # a finished run: nothing to say
        store.set_run_status("ending", "running")
        assert pages.require_run(store, "ending").status == "finished"
    finally:
        Store.close_all()


KILLED_HOLDER = """
import sys, time
from numerate.store import Store
Store.open(sys.argv[1]).start_run("killed", "s", "h", {}, "v")
print("ready", flush=True)
time.sleep(120)
"""


def test_a_killed_run_beside_a_live_writer_is_stopped_and_the_live_one_running(db_path):
    """A killed run was listed running for as long as any other process wrote the file (a
    live sweep beside it): its claim now names its own journal, whose lock died with it."""
    from numerate.store.browse import STOPPED, runs_page

    def statuses():
        with Reader.open(db_path) as reader:
            frame, _ = runs_page(reader, 0, 10)
        return dict(zip(frame["id"], frame["status"], strict=True))

    holder = subprocess.Popen([sys.executable, "-c", KILLED_HOLDER, str(db_path)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "ready"
        assert statuses() == {"killed": "running"}
    finally:
        holder.kill()  # SIGKILL: its claim file stays, naming its journal
        holder.wait()
    live = Store.open(db_path)
    live.start_run("live", "s", "h", {}, "v")  # a sweep of this process writes the file
    try:
        assert statuses() == {"killed": STOPPED, "live": "running"}
    finally:
        Store.close_all()


def test_a_report_asked_for_several_tables_is_one_object_whatever_came_back():
    """A review: `report --tiers --format json` of a run with nothing scored (no tier table)
    printed a bare array, where every other `--tiers` printed an object: a program reading
    `doc["scores"]` failed. The shape follows what was asked, not how many tables came."""
    import json

    import polars as pl

    from numerate.results.report import Table, render_tables

    summaries = Table("summaries", "run r", pl.DataFrame({"model": ["m"], "accuracy": [0.5]}))
    keyed = json.loads(render_tables([summaries], "json", keyed=True))
    assert keyed == {"summaries": [{"model": "m", "accuracy": 0.5}]}
    assert json.loads(render_tables([summaries], "json", keyed=False)) == keyed["summaries"]
