"""Start-up of `numerate run`, whole process, against a zero-latency loopback endpoint.

1. A small run (60 requests: 20 cases of each manifold) with Prefect's temporary server
   (`NUMERATE_REUSE_SERVER=0`), and with a `prefect server` already running on this machine
   (found on its port, no PREFECT_API_URL set). Target with a running server: under 4 s.
2. A fully cached re-run of 3,000 cases (`cache: reuse`) with the running server. Target:
   under 3 s.

Each figure is the median of `--repeats` runs of the `numerate` command (wall time of the
process, from outside). Run with `make bench` or `python bench/startup.py`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def config(path: Path, base_url: str, per_manifold: int, name: str, cache: str) -> Path:
    model = {"name": "fake", "model": "fake-model", "base_url": base_url, "cache": cache}
    manifolds = [{"manifold": m, "count": per_manifold} for m in ("objects", "shuffle", "sequence")]
    path.write_text(yaml.safe_dump({"name": name, "seed": 1, "models": [model],
                                    "manifolds": manifolds}))  # fmt: skip
    return path


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    from tests.fake_openai import spawn
    from tests.prefect_server import start_prefect_server, stop

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="numerate-bench-startup-"))
    env = dict(os.environ, PREFECT_HOME=str(work / "prefect"), DO_NOT_TRACK="1")
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_SERVER_UI_ENABLED="false")
    env.pop("PREFECT_API_URL", None)
    endpoint, base_url = spawn(work, "--fixed")
    numerate = [sys.executable, "-m", "numerate.cli", "run", "--format", "json"]
    small = config(work / "small.yaml", base_url, 20, "small", "resume")
    cached = config(work / "cached.yaml", base_url, 1000, "cached", "reuse")
    figures: dict[str, list[float]] = {"temporary": [], "running": [], "cached": []}
    server, url = start_prefect_server(env)
    port = url.rstrip("/").removesuffix("/api").rsplit(":", 1)[1]
    try:
        reuse = dict(env, PREFECT_SERVER_API_PORT=port)
        timed([*numerate, "--config", str(cached), "--db", str(work / "c.duckdb")], reuse)
        for i in range(args.repeats):
            db = ["--db", str(work / f"s{i}.duckdb")]
            temporary = dict(env, NUMERATE_REUSE_SERVER="0")
            figures["temporary"].append(timed([*numerate, "--config", str(small), *db], temporary))
            db = ["--db", str(work / f"r{i}.duckdb")]
            figures["running"].append(timed([*numerate, "--config", str(small), *db], reuse))
            db = ["--db", str(work / "c.duckdb")]
            figures["cached"].append(timed([*numerate, "--config", str(cached), *db], reuse))
    finally:
        stop(server)
        endpoint.kill()
    median = {name: statistics.median(times) for name, times in figures.items()}
    print(f"numerate run, whole process, median of {args.repeats}:")
    print(f"  60 requests, temporary Prefect server:    {median['temporary']:5.2f} s")
    print(f"  60 requests, running local server:        {median['running']:5.2f} s  (< 4 s)")
    print(f"  3,000 cached cases, running local server: {median['cached']:5.2f} s  (< 3 s)")


if __name__ == "__main__":
    main()
