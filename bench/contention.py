"""A soak of one results database under many users (docs/sharing.md, "Many users, one database").

Four writers share one database for a few minutes: three sweeps against a slow loopback endpoint
(each its own config, one of them started twice in a row so that a second process meets a run in
progress) and a stream of `numerate ingest` calls loading Parquet shards; two readers poll
`numerate report` and `numerate db` every second. It reports:

- answers lost: graded answers a sweep should have stored and did not (must be 0);
- reader errors: reader commands that failed (must be 0);
- the longest lock hold: the longest session any writer held the file (NUMERATE_LOCK_LOG);
- the longest reader staleness: the longest time between an answer being graded and a reader
  first seeing it (an upper bound: it includes the reader's poll interval and start-up), and
  the staleness a poll proves: until the start of the last poll that did not see it.

Run with `python bench/contention.py` (about 3 minutes; `--cases` and `--delay` scale it).
With `--lake`, the database is a DuckLake on a PostgreSQL the benchmark starts
(tests/postgres.py) instead of a file: its writers hold no lock, so it reports no lock holds.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.contention import (  # noqa: E402
    GRADED_QUERY,
    NUMERATE,
    Reader,
    environment,
    first_seen,
    lock_holds,
    start,
    sweep_config,
    wait_for_file,
)
from tests.fake_openai import spawn  # noqa: E402
from tests.prefect_server import start_prefect_server, stop  # noqa: E402


def make_shards(work: Path, env: dict[str, str], parts: int) -> Path:
    """`parts` small baseline runs published as shards, to be ingested during the soak."""
    shards = work / "shards"
    for part in range(parts):
        config = work / f"part-{part}.yaml"
        config.write_text(
            f"name: part-{part}\nmodels: [{{name: oracle, model: 'baseline:oracle'}}]\n"
            f"manifolds: [{{manifold: objects, count: 20}}]\nseed: {part}\n"
            f"results_dir: {shards}\n"
        )
        subprocess.run([*NUMERATE, "run", "--config", str(config), "--db",
                        str(work / f"part-{part}.duckdb")], cwd=ROOT, env=env, check=True,
                       capture_output=True, timeout=600)  # fmt: skip
    return shards


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=2400, help="cases per sweep")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds per answer")
    parser.add_argument("--shards", type=int, default=4, help="runs ingested during the soak")
    parser.add_argument("--lake", action="store_true", help="a DuckLake on PostgreSQL, not a file")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="numerate-contention-"))
    lock_log = work / "locks.jsonl"
    endpoint, base_url = spawn(work, "--delay", str(args.delay))
    server, api_url = start_prefect_server(environment(work / "prefect", None, lock_log))
    env = environment(work / "prefect", api_url, lock_log)
    postgres = None
    if args.lake:
        from tests import postgres as pg

        postgres = pg.start()
        postgres.create_database("soak")
        (work / "lake").mkdir()
        env["NUMERATE_LAKE_DATA"] = f"{work / 'lake'}/"
        env["NUMERATE_LAKE_JOURNALS"] = str(work / "journals")
    db = postgres.location("soak") if postgres else str(work / "shared.duckdb")
    readers: list[Reader] = []
    print(f"work folder: {work}", file=sys.stderr)
    try:
        shards = make_shards(work, env, args.shards)
        lock_log.unlink(missing_ok=True)  # only the soak's sessions count
        sweeps = {
            name: sweep_config(work / f"{name}.yaml", name, base_url, manifold, args.cases, 4)
            for name, manifold in (
                ("soak-a", "objects"),
                ("soak-b", "shuffle"),
                ("soak-c", "sequence"),
            )
        }
        started = time.time()
        writers = {
            name: start(
                [*NUMERATE, "run", "--config", str(path), "--db", str(db)],
                env,
                work / f"{name}.log",
            )
            for name, path in sweeps.items()
        }
        if not args.lake:
            wait_for_file(Path(db), 120)
        time.sleep(5)
        readers = [
            Reader([*NUMERATE, "report", "--db", str(db)], env).start(),
            Reader([*NUMERATE, "db", str(db), GRADED_QUERY, "--format", "csv"], env).start(),
        ]
        ingests: list[subprocess.CompletedProcess[str]] = []
        while any(w.poll() is None for w in writers.values()):
            # the fourth writer: an ingest every few seconds while the sweeps run
            ingest = [*NUMERATE, "ingest", str(shards), "--db", str(db)]
            ingests.append(
                subprocess.run(ingest, cwd=ROOT, env=env, capture_output=True, text=True)
            )
            time.sleep(3)
        elapsed = time.time() - started
        time.sleep(2)
    finally:
        for reader in readers:
            reader.stop()
        endpoint.kill()
        endpoint.wait()
        stop(server)

    import duckdb

    from numerate.store import lake

    con = lake.read_only(db) if args.lake else duckdb.connect(db, read_only=True)
    stored = dict(
        con.execute(
            "SELECT r.sweep_name, count(*) FROM responses s JOIN runs r USING (run_id) GROUP BY ALL"
        ).fetchall()
    )
    [(ingested,)] = con.execute("SELECT count(*) FROM ingested_shards").fetchall()
    con.close()
    if postgres:
        postgres.stop()
    lost = sum(max(0, args.cases - stored.get(name, 0)) for name in sweeps)
    failed_writers = [n for n, w in writers.items() if w.returncode != 0]
    failed_writers += [f"ingest ({i.returncode})" for i in ingests if i.returncode != 0]
    reader_errors = sum(len(r.failures) for r in readers)
    holds = [h["held_s"] for h in lock_holds(lock_log) if h["kind"] == "write"]
    waits = [h["waited_s"] for h in lock_holds(lock_log)]
    seen = first_seen(readers[1].polls)
    # the sweeps' answers only: an ingested run's were graded long before, elsewhere
    ours = [s for key, s in seen.items() if key[1] in sweeps]
    lags = [s.seen - s.graded for s in ours]
    proven = [s.stale_at_least for s in ours]

    print(f"soak: {elapsed:.0f} s, 3 sweeps x {args.cases} cases at {args.delay} s an answer, "
          f"{len(ingests)} ingests ({ingested} runs loaded), 2 readers every second")  # fmt: skip
    print(f"answers lost: {lost} (must be 0)")
    print(f"writers that failed: {len(failed_writers)} {failed_writers or ''}")
    print(f"reader errors: {reader_errors} of {sum(len(r.polls) for r in readers)} polls "
          "(must be 0)")  # fmt: skip
    if holds:
        print(f"lock holds: {len(holds)} sessions, median {statistics.median(holds) * 1000:.0f} "
              f"ms, longest {max(holds):.2f} s")  # fmt: skip
    else:
        print("lock holds: none (a lake's writers hold no lock: its transactions serve them)")
    print(  # a lake's: readers' opening of a snapshot (attaching the lake)
        f"lock waits: median {statistics.median(waits) * 1000:.0f} ms, longest {max(waits):.2f} s"
    )
    if lags:
        print(f"reader staleness: median {statistics.median(lags):.1f} s, longest "
              f"{max(lags):.1f} s over {len(lags)} answers (until the poll that saw it "
              f"started); at least {max(proven):.1f} s (a poll that started then did not "
              "see it)")  # fmt: skip
    return 0 if lost == 0 and reader_errors == 0 and not failed_writers else 1


if __name__ == "__main__":
    sys.exit(main())
