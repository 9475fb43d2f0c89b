"""How a sweep scales: wall time, cases per second and peak memory of whole sweeps of the
built-in oracle over the three manifolds, at 3,000, 30,000 and 300,000 cases (and 1,000,000
with `--full`), beside generating the same cases alone.

Each sweep runs in a process of its own (its peak RSS and CPU time are that process's, from
the kernel: "CPU µs each" is its user and system time over the cases it stored),
on a fresh database, against one `prefect server` the benchmark starts on 127.0.0.1 (as a
deployment's runs do; Prefect's own memory is not the sweep's). Targets (docs/benchmarks.md,
"Scale"): peak RSS at most 1 GiB at 1,000,000 cases and within 20% of the 30,000-case figure;
at least 10,000 cases per second end to end at 300,000 cases.

Run with `make bench`, or `python bench/scale.py [--full] [--sizes 3000 30000] [--samples K]`
(`--samples K`: each case answered K times, `sampling: {samples: K}`; the targets are for one
answer a case).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZES = (3_000, 30_000, 300_000)
FULL = 1_000_000
RSS_LIMIT_MIB = 1024
RSS_GROWTH = 0.20
"""Peak RSS at FULL cases may exceed the 30,000-case figure by at most this share."""
RATE_TARGET = 10_000
"""Cases per second end to end at 300,000 cases."""


def sweep_config(cases: int, samples: int = 1) -> dict:
    """`cases` cases (rounded down to a multiple of 12): a third per manifold, over four grid
    points each, answered `samples` times each by the oracle (nothing waits on a model: what
    is measured is the pipeline itself)."""
    count = cases // 12
    oracle = {"name": "oracle", "model": "baseline:oracle"}
    return {
        "name": f"scale-{cases}",
        "seed": 1,
        "models": [oracle | ({"sampling": {"samples": samples}} if samples > 1 else {})],
        "manifolds": [
            {"manifold": "objects", "count": count, "grid": {"length": [2, 4, 6, 8]}},
            {"manifold": "shuffle", "count": count, "grid": {"length": [3, 4, 5, 6]}},
            {"manifold": "sequence", "count": count, "grid": {"seq_length": [1, 2, 3, 4]}},
        ],
    }


def run_sweep(cases: int, db: str, samples: int) -> None:
    """In the child: the sweep, then what it stored (to check that every case was)."""
    from numerate.config.env import configure

    configure()
    from numerate.flows.sweep import sweep
    from numerate.store import Store

    asyncio.run(sweep(sweep_config(cases, samples), db, fresh=True, plot=False))
    stored = Store.open(db).query("SELECT count(*) FROM responses")[0][0]
    Store.close_all()
    print(json.dumps({"responses": stored}))


def generation_rate(cases: int) -> float:
    """Cases per second of planning and generating the sweep's cases alone, as a sweep makes
    them (numerate.planning.plan.PlannedPoint.cases), in this process."""
    from numerate.config.sweep import parse_sweep_config
    from numerate.planning.plan import plan_points

    config = parse_sweep_config(sweep_config(cases))
    started = time.perf_counter()
    made = 0
    for entry in config.manifolds:
        for point in plan_points(entry, config.seed):
            for start in range(0, point.count, 1000):  # a batch at a time, as a sweep does
                made += len(point.cases(start, start + 1000))
    return made / (time.perf_counter() - started)


def measured(cases: int, workdir: Path, samples: int) -> dict:
    """Wall time, peak RSS and CPU time (the kernel's, for that process alone: os.wait4) of
    one sweep in a child process."""
    db = workdir / f"scale-{cases}.duckdb"
    out, err = workdir / f"scale-{cases}.out", workdir / f"scale-{cases}.err"
    started = time.perf_counter()
    with out.open("w") as stdout, err.open("w") as stderr:
        child = subprocess.Popen(
            [sys.executable, __file__, "--child", str(cases), str(db), str(samples)],
            stdout=stdout, stderr=stderr,
        )  # fmt: skip
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"the {cases:,}-case sweep failed:\n{err.read_text()[-3000:]}")
    stored = json.loads(out.read_text().strip().splitlines()[-1])["responses"]
    cpu_us = (usage.ru_utime + usage.ru_stime) * 1e6 / stored  # a stored answer's CPU time
    return {"cases": cases, "stored": stored, "wall_s": wall, "rss_mib": usage.ru_maxrss / 1024,
            "cpu_us": cpu_us}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--full", action="store_true", help=f"also {FULL:,} cases")
    parser.add_argument("--sizes", type=int, nargs="*", help="cases per sweep, instead")
    parser.add_argument("--samples", type=int, default=1, help="answers a case (default 1)")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # cases, db, samples
    args = parser.parse_args()
    if args.child:
        run_sweep(int(args.child[0]), args.child[1], int(args.child[2]))
        return
    if args.samples < 1:
        parser.error(f"--samples {args.samples}: need at least 1")
    for cases in args.sizes or ():
        if cases < 12:  # a third per manifold over four grid points (sweep_config)
            parser.error(f"--sizes {cases}: need at least 12 cases a sweep")
    sizes = list(args.sizes or SIZES) + ([FULL] if args.full and not args.sizes else [])
    workdir = Path(tempfile.mkdtemp(prefix="numerate-bench-scale-"))
    home = workdir / "prefect"
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_LOGGING_LEVEL": "WARNING"}
    from tests.prefect_server import start_prefect_server, stop

    server, url = start_prefect_server(env)
    os.environ.update(PREFECT_HOME=str(home), PREFECT_API_URL=url, PREFECT_LOGGING_LEVEL="WARNING")
    print(f"machine: {os.cpu_count()} cores; one sweep per process, a fresh database each")
    unit = "cases" if args.samples == 1 else "answers"  # stored answers: cases x samples
    if args.samples > 1:
        print(f"each case answered {args.samples} times: the counts and rates are answers")
    head = f"{unit:>10} {'wall s':>8} {unit + '/s':>9} {'peak RSS MiB':>13} {'CPU µs each':>12}"
    print(f"{head} {'generation alone':>17}")
    results = []
    try:
        for cases in sizes:
            result = measured(cases, workdir, args.samples)
            result["generation_rate"] = generation_rate(cases)
            results.append(result)
            rate = result["stored"] / result["wall_s"]
            line = f"{result['stored']:>10,} {result['wall_s']:>8.1f} {rate:>9,.0f}"
            line += f" {result['rss_mib']:>13,.0f} {result['cpu_us']:>12,.0f}"
            print(f"{line} {result['generation_rate']:>15,.0f}/s")
            (workdir / f"scale-{cases}.duckdb").unlink(missing_ok=True)
    finally:
        stop(server)
    if args.samples == 1:  # the targets are for one answer a case
        verdicts(results)


def verdicts(results: list[dict]) -> None:
    by_size = {r["cases"]: r for r in results}
    if 300_000 in by_size:
        rate = by_size[300_000]["stored"] / by_size[300_000]["wall_s"]
        ok = "ok" if rate >= RATE_TARGET else "BELOW TARGET"
        print(f"300,000 cases: {rate:,.0f} cases/s end to end (target >= {RATE_TARGET:,}): {ok}")
        each, cores = by_size[300_000]["cpu_us"], os.cpu_count() or 1
        budget = cores / RATE_TARGET * 1e6
        made = 1e6 / by_size[300_000]["generation_rate"]
        print(f"  the sweep's process used {each:,.0f} µs of CPU a case; {cores} cores "
              f"at {RATE_TARGET:,} cases/s leave {budget:,.0f}, of which generating a case "
              f"alone takes {made:,.0f}")  # fmt: skip
    if FULL in by_size and 30_000 in by_size:
        full, base = by_size[FULL]["rss_mib"], by_size[30_000]["rss_mib"]
        ok = full <= RSS_LIMIT_MIB and full <= base * (1 + RSS_GROWTH)
        print(f"{FULL:,} cases: peak RSS {full:,.0f} MiB, {full / base - 1:+.0%} on 30,000 cases "
              f"(target <= {RSS_LIMIT_MIB:,} MiB and <= +{RSS_GROWTH:.0%}): "
              f"{'ok' if ok else 'ABOVE TARGET'}")  # fmt: skip


if __name__ == "__main__":
    main()
