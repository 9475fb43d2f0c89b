"""What a session's end costs as the `cases` table grows: the sweep's writes of cases alone.

Each session stores one batch of the scale benchmark's cases (bench/scale.py's sweep: a third
per manifold, four grid points each) in a fresh database file, as a sweep does (the batch's
missing ids, then `put_cases`), and lets the file go: DuckDB checkpoints it then. The benchmark
prints each session whose end took longer than `--long` seconds (with the rows stored by then
and the process's RSS), then the count and total time of the ends. A sweep's long checkpoints
are where its time and memory grow with its size (docs/benchmarks.md, "Scale").

Run with `make bench`, or `python bench/checkpoints.py [--cases 150000] [--batch 2000]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def rss_mib() -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS"))
    return int(line.split()[1]) // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=150_000, help="cases stored in all")
    parser.add_argument("--batch", type=int, default=2_000, help="cases per session")
    parser.add_argument("--long", type=float, default=0.4, help="seconds a long end takes")
    args = parser.parse_args()
    if args.cases < 12 or args.batch < 1 or args.long < 0:
        parser.error("--cases must be at least 12, --batch at least 1, --long at least 0")

    from scale import sweep_config  # bench/scale.py's sweep

    from numerate.config.sweep import parse_sweep_config
    from numerate.planning.plan import case_row, plan_points
    from numerate.store import Store

    config = parse_sweep_config(sweep_config(args.cases))
    points = [p for entry in config.manifolds for p in plan_points(entry, config.seed)]
    print(f"{args.cases:,} cases, {args.batch:,} a session; sessions whose end took over "
          f"{args.long} s:")  # fmt: skip
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="numerate-bench-") as folder:  # removed after
        store = Store.open(str(Path(folder) / "cases.duckdb"))
        ends: list[float] = []
        stored = 0
        for point in points:
            for start in range(0, point.count, args.batch):
                rows = [case_row(c) for c in point.cases(start, start + args.batch)]
                with store.session():  # as a sweep's batch stores its cases
                    missing = store.missing_cases([row["case_id"] for row in rows])
                    store.put_cases([row for row in rows if row["case_id"] in missing])
                    written = time.perf_counter()
                ends.append(time.perf_counter() - written)  # the session's end: the checkpoint
                stored += len(rows)
                if ends[-1] > args.long:
                    print(f"  after {stored:>9,} cases: {ends[-1]:5.2f} s, "
                          f"RSS {rss_mib():,} MiB")  # fmt: skip
        Store.close_all()
    print(f"{len(ends)} sessions in {time.perf_counter() - started:.1f} s; their ends took "
          f"{sum(ends):.1f} s in all, the longest {max(ends):.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
