"""One results database, many users at once, with real processes (docs/sharing.md, "Many users, one
database"): two sweeps of different configs, a NumGen run and an ingest write one database at
the same time while three readers poll `report`, `db` and a `numerate view` server every
second."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime

import duckdb
import pytest

from tests.contention import (
    GRADED_QUERY,
    NUMERATE,
    ROOT,
    Poll,
    Reader,
    environment,
    first_seen,
    lock_holds,
    start,
    sweep_config,
    wait_for_file,
)
from tests.fake_openai import spawn
from tests.view.conftest import start_view
from tests.waiting import wait_until

CASES = 45  # per sweep: at 0.25 s an answer, two at a time, about 6 s of asking
FETCH = "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=60).read()"
"""A page of `numerate view`, read as a browser would (exit 1 unless it is answered 200)."""


def wait_for_a_run(db, env, timeout_s=120):
    """Until a run has its first row (before, `report` says a run is starting: exit 2)."""
    deadline = time.monotonic() + timeout_s
    while True:
        done = subprocess.run([*NUMERATE, "report", "--db", str(db)], cwd=ROOT, env=env,
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode == 0:
            return
        # a lake has no file to announce a run with: not numerate's, until its tables are made
        assert "a run is starting" in done.stderr or str(db).startswith("ducklake:"), done.stderr
        assert time.monotonic() < deadline, "no run row appeared"
        time.sleep(0.2)


@pytest.fixture(params=["file", "lake"])
def shared(request, tmp_path):
    """The database they share: a file, or a new lake (tests/conftest.py)."""
    if request.param == "file":
        return tmp_path / "shared.duckdb"
    return request.getfixturevalue("lake")


def read_only(db):
    """A connection that reads the shared database, file or lake."""
    from numerate.store import lake

    return lake.read_only(db) if lake.is_lake(str(db)) else duckdb.connect(str(db), read_only=True)


def test_staleness_is_what_a_poll_proves_not_the_next_polls_start():
    """The bound the many-users test holds: an answer still invisible to a poll that started
    12 s after it was graded fails it, however fast the reader; one seen by the next poll,
    started long after because each poll took 6 s, proves only what the last poll missed."""

    def poll(started: float, *graded: float) -> Poll:
        rows = "".join(f"r,m,c{i},0,{datetime.fromtimestamp(g, UTC).isoformat()}\n"
                       for i, g in enumerate(graded))  # fmt: skip
        return Poll(started, 0, "run_id,model,case_id,sample_index,graded_at\n" + rows, "")

    slow_reader = first_seen([poll(100.0), poll(106.0, 100.5), poll(112.0, 100.5)])
    (only,) = slow_reader.values()
    assert only.seen - only.graded == pytest.approx(5.5)  # the next poll's start
    assert only.stale_at_least == 0.0  # the poll at 100 s started before it was graded
    stale = first_seen([poll(t) for t in (100.0, 103.0, 106.0, 109.0, 112.0)] +
                       [poll(115.0, 100.0)])  # fmt: skip
    assert next(iter(stale.values())).stale_at_least == pytest.approx(12.0)
    failed = first_seen([poll(100.0, 90.0)])  # seen by the first poll: nothing proven
    assert next(iter(failed.values())).stale_at_least == 0.0


@pytest.mark.slow
def test_two_sweeps_numgen_and_an_ingest_share_one_database_with_two_readers(tmp_path, shared):
    lock_log = tmp_path / "locks.jsonl"
    endpoint, base_url = spawn(tmp_path, "--delay", "0.25")
    env = environment(
        tmp_path / "prefect", os.environ["PREFECT_API_URL"], lock_log
    )  # the session's
    from numerate.store import lake

    db = shared
    in_a_file = not lake.is_lake(str(db))
    readers: list[Reader] = []
    view = None
    try:
        # a run made "elsewhere", published as Parquet shards for the ingest
        shards = tmp_path / "shards"
        elsewhere = tmp_path / "elsewhere.yaml"
        elsewhere.write_text(
            "name: elsewhere\nmodels: [{name: oracle, model: 'baseline:oracle'}]\n"
            f"manifolds: [{{manifold: sequence, count: 30}}]\nresults_dir: {shards}\n"
        )
        subprocess.run([*NUMERATE, "run", "--config", str(elsewhere), "--db",
                        str(tmp_path / "elsewhere.duckdb")], cwd=ROOT, env=env, check=True,
                       capture_output=True, timeout=300)  # fmt: skip

        configs = {
            name: sweep_config(tmp_path / f"{name}.yaml", name, base_url, manifold, CASES, 2)
            for name, manifold in (("sweep-a", "objects"), ("sweep-b", "shuffle"))
        }
        writers = {
            name: start(
                [*NUMERATE, "run", "--config", str(path), "--db", str(db)],
                env,
                tmp_path / f"{name}.log",
            )
            for name, path in configs.items()
        }
        if in_a_file:
            wait_for_file(db, 120)
        wait_for_a_run(db, env)
        view, address = start_view(db, env)
        readers = [
            Reader([*NUMERATE, "report", "--db", str(db)], env).start(),
            Reader([*NUMERATE, "db", str(db), GRADED_QUERY, "--format", "csv"], env).start(),
            Reader([sys.executable, "-c", FETCH, f"{address}/"], env).start(),
        ]
        writers["numgen"] = start(
            [*NUMERATE, "numgen", "run", "--generator", "synthetic", "--detector", "blobs",
             "--count", "2", "--db", str(db), "--images-dir", str(tmp_path / "images")],
            env, tmp_path / "numgen.log",
        )  # fmt: skip
        writers["ingest"] = start([*NUMERATE, "ingest", str(shards), "--db", str(db)], env,
                                  tmp_path / "ingest.log")  # fmt: skip
        ended: dict[str, float] = {}
        deadline = time.monotonic() + 400
        while len(ended) < len(writers):
            assert time.monotonic() < deadline, (
                f"writers still running: {set(writers) - set(ended)}"
            )
            for name, process in writers.items():
                if name not in ended and process.poll() is not None:
                    ended[name] = time.time()
            time.sleep(0.2)
        last = max(ended.values())  # a last poll of each reader after the writers:
        wait_until(lambda: all(any(p.started > last for p in r.polls) for r in readers), 60)
    finally:
        for reader in readers:
            reader.stop()
        if view is not None:
            view.terminate()
            view.wait(30)
        endpoint.kill()
        endpoint.wait()

    for name, process in writers.items():
        log = (tmp_path / f"{name}.log").read_text()
        assert process.returncode == 0, f"{name} exited {process.returncode}:\n{log[-3000:]}"
        assert "Traceback" not in log, f"{name}:\n{log[-3000:]}"

    con = read_only(db)
    try:
        runs = dict(con.execute("SELECT sweep_name, status FROM runs").fetchall())
        assert runs == {"sweep-a": "finished", "sweep-b": "finished", "elsewhere": "finished"}
        answered = dict(
            con.execute(
                "SELECT r.sweep_name, count(*) FROM responses s JOIN runs r USING (run_id) "
                "GROUP BY ALL"
            ).fetchall()
        )
        assert answered == {"sweep-a": CASES, "sweep-b": CASES, "elsewhere": 30}
        [(numgen_status, images)] = con.execute(
            "SELECT status, (SELECT count(*) FROM numgen_images i WHERE i.run_id = r.run_id) "
            "FROM numgen_runs r"
        ).fetchall()
        assert numgen_status == "finished" and images > 0
    finally:
        con.close()

    for reader in readers:
        assert reader.polls, "a reader never ran"
        bad = [f"{p.returncode}: {p.stderr.strip()[-300:]}" for p in reader.failures]
        assert not bad, f"{reader.command[3]} failed {len(bad)} of {len(reader.polls)}: {bad}"
    seen = first_seen(readers[1].polls)
    for name in ("sweep-a", "sweep-b"):
        live = [k for k, s in seen.items() if k[1] == name and s.seen < ended[name]]
        assert live, f"no graded answer of {name} was visible while it ran"
    # staleness that a poll proves (an answer still invisible to a poll that started that long
    # after it was graded), not the time until the next poll starts, which adds a poll's own
    # length: a process's start, over 5 s on a slow machine under the whole suite's load
    sightings = [s for k, s in seen.items() if k[1] != "oracle"]
    stale = max(s.stale_at_least for s in sightings)
    until_seen = max(s.seen - s.graded for s in sightings)
    assert stale < 10, (
        f"a graded answer was still invisible {stale:.1f} s after it was graded "
        f"(seen by a poll that started {until_seen:.1f} s after)"
    )
    if in_a_file:  # a lake's writers hold no lock: its transactions serve them
        holds = [h["held_s"] for h in lock_holds(lock_log) if h["kind"] == "write"]
        assert holds and max(holds) < 2.0, f"a writer held the database {max(holds):.2f} s"
    # A lake's reader opens a snapshot and waits for no writer: tests/store/test_lake.py
    # reads one while a writer's transaction is open. Its time to attach is no wait but
    # PostgreSQL's and the catalog's start-up, which took 1.12-1.14 s under the whole suite's
    # load here, so it is not bounded here.
