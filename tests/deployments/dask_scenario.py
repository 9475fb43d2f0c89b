"""The Dask scale-out scenario, run in its own process by test_e2e.py (Dask leaves threads and
state behind that a test process's Prefect harness would then wait on at exit).

Usage: python -m tests.deployments.dask_scenario WORK_DIR (with PREFECT_API_URL set)
Prints one JSON line: the run ids, the Dask workers, and whether the parts ran on Dask.
"""

from __future__ import annotations

import asyncio
import json
import sys


def main() -> None:
    from distributed import LocalCluster
    from prefect_dask import DaskTaskRunner

    from numerate.flows.distributed import CONFIG_EXAMPLE, distributed_sweep

    work_dir = sys.argv[1]
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
        host="127.0.0.1",
    ) as cluster:  # fmt: skip
        flow = distributed_sweep.with_options(
            task_runner=DaskTaskRunner(address=cluster.scheduler_address)
        )
        run_ids = asyncio.run(flow(CONFIG_EXAMPLE, f"{work_dir}/central.duckdb", work_dir))
        result = {
            "run_ids": run_ids,
            "workers": len(cluster.scheduler_info["workers"]),
            "ran_on_dask": any("evaluate_part" in p for p in cluster.scheduler.task_prefixes),
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
