"""Pipeline throughput against a zero-latency loopback endpoint, measured in one run.

1. Requests/s of a sweep (concurrency 32) versus a bare AsyncOpenAI loop sending the same
   requests at the same concurrency, and versus a bare httpx loop (no SDK: issue 36's
   reference): target ratio >= 0.9. All three go to one endpoint process;
   the median of `--repeats` alternating measurements is reported.
2. Wall time of a fully cached re-run of a 10,000-case sweep versus its cold run: target
   under 15%. Both runs share one process, after a warm-up flow, so the one-off start of
   Prefect's temporary server (reported separately) is in neither. Each run starts after a
   pause: back to back, Prefect's server is sometimes still recording the previous run in
   its SQLite database, answers 503, and its client waits 2 s before asking again (a fixed
   penalty that has nothing to do with the run measured).
3. Peak memory (max RSS) of the process after the sweeps.

Run with `make bench` (or `python bench/pipeline.py --cases 10000`; `--cached-repeats 0` measures
the throughput alone).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="numerate-bench-prefect-"))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
from numerate.config.env import configure  # noqa: E402

configure()


PAUSE_S = 3.0
"""Pause before each timed run of the cached measurement (see the module docstring)."""


def start_endpoint(workdir: Path, fixed: bool = True) -> tuple[subprocess.Popen[bytes], str]:
    """The loopback endpoint in its own process. `fixed`: the cheapest answers (unparsed
    requests, one precomputed response), so the endpoint takes as little of the machine's CPU
    as it can and the measurement is of the client side."""
    from tests.fake_openai import spawn

    return spawn(workdir, "--fixed") if fixed else spawn(workdir)


def sweep_config(base_url: str, cases: int, name: str) -> dict:
    per_manifold = cases // 3
    return {
        "name": name,
        "seed": 7,
        "batch_size": 1000,
        "models": [
            {
                "name": "loopback",
                "model": "fake-model",
                "base_url": base_url,
                "concurrency": 32,
                "cache": "reuse",
            }  # a re-run reuses answers: what the cached figure measures
        ],
        "manifolds": [
            {"manifold": "objects", "count": per_manifold // 4, "grid": {"length": [2, 4, 6, 8]}},
            {"manifold": "shuffle", "count": per_manifold // 4, "grid": {"length": [3, 4, 5, 6]}},
            {
                "manifold": "sequence",
                "count": per_manifold // 4,
                "grid": {"seq_length": [1, 2, 3, 4]},
            },
        ],
    }


async def bare_client(base_url: str, prompts: list[str], concurrency: int) -> float:
    """Requests/s of a plain AsyncOpenAI loop: the ceiling the sweep is compared with."""
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key="EMPTY", max_retries=0)
    slots = asyncio.Semaphore(concurrency)

    async def one(prompt: str) -> None:
        async with slots:
            await client.chat.completions.create(
                model="fake-model",
                messages=[{"role": "user", "content": prompt}],
                temperature=0.0,
                max_tokens=2048,
            )

    started = time.perf_counter()
    await asyncio.gather(*(one(p) for p in prompts))
    elapsed = time.perf_counter() - started
    await client.close()
    return len(prompts) / elapsed


async def bare_httpx(base_url: str, prompts: list[str], concurrency: int,
                     package: str = "httpx") -> float:  # fmt: skip
    """Requests/s of a plain httpx loop posting the same chat requests (the JSON read back,
    no SDK): issue 36's reference. `package`: `httpx`, or `httpx2`, the HTTP package of the
    openai client (3.x), which the sweep posts its requests with, and which is about twice as
    fast here (docs/benchmarks.md, "Requests posted as they are, and the long checkpoints
    (2026-11-28)")."""
    import importlib

    http = importlib.import_module(package)
    slots = asyncio.Semaphore(concurrency)
    limits = http.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with http.AsyncClient(base_url=base_url, limits=limits, timeout=60) as client:

        async def one(prompt: str) -> None:
            async with slots:
                response = await client.post("/chat/completions", json={
                    "model": "fake-model", "messages": [{"role": "user", "content": prompt}],
                    "temperature": 0.0, "max_tokens": 2048,
                })  # fmt: skip
                response.raise_for_status()
                response.json()

        started = time.perf_counter()
        await asyncio.gather(*(one(p) for p in prompts))
        return len(prompts) / (time.perf_counter() - started)


def timed_sweep(config: dict, db: str) -> float:
    from numerate.flows.sweep import sweep

    started = time.perf_counter()
    asyncio.run(sweep(config, db, fresh=True))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=10_000, help="cases per sweep")
    parser.add_argument("--repeats", type=int, default=3, help="throughput measurements")
    parser.add_argument("--cached-repeats", type=int, default=5,
                        help="fully cached re-runs (0: no cached measurement)")  # fmt: skip
    parser.add_argument(
        "--server",
        action="store_true",
        help="run flows against a separate `prefect server` process (as deployments do) "
        "instead of the temporary server Prefect starts inside this process",
    )
    parser.add_argument(
        "--parsing-endpoint",
        action="store_true",
        help="use the endpoint that parses each request (slower: it competes for the CPU)",
    )
    args = parser.parse_args()
    if args.cases < 12 or args.repeats < 1 or args.cached_repeats < 0:
        parser.error(
            "--cases must be at least 12, --repeats at least 1, --cached-repeats at least 0"
        )

    from numerate.config.sweep import parse_sweep_config
    from numerate.planning.plan import plan_manifold

    workdir = Path(tempfile.mkdtemp(prefix="numerate-bench-"))
    endpoint, base_url = start_endpoint(workdir, fixed=not args.parsing_endpoint)
    server = start_prefect_server() if args.server else None
    try:
        started = time.perf_counter()
        warmup = sweep_config(base_url, 12, "warmup")
        timed_sweep(warmup, str(workdir / "warmup.duckdb"))
        where = "first flow" if args.server else "Prefect temporary server start + first flow"
        print(f"{where}: {time.perf_counter() - started:.1f} s")

        rates_bare, rates_httpx, rates_httpx2, rates_sweep = [], [], [], []
        for repeat in range(args.repeats):
            # a new seed each repeat: every request is new to the sweep's cache
            config = sweep_config(base_url, args.cases, f"throughput{repeat}")
            config["seed"] = 100 + repeat
            planned = [
                p
                for m in parse_sweep_config(config).manifolds
                for p in plan_manifold(m, config["seed"])
            ]
            prompts = [p.input for p in planned]
            rates_bare.append(asyncio.run(bare_client(base_url, prompts, 32)))
            rates_httpx.append(asyncio.run(bare_httpx(base_url, prompts, 32)))
            rates_httpx2.append(asyncio.run(bare_httpx(base_url, prompts, 32, "httpx2")))
            db = str(workdir / f"throughput{repeat}.duckdb")
            rates_sweep.append(len(prompts) / timed_sweep(config, db))
        bare, ours = statistics.median(rates_bare), statistics.median(rates_sweep)
        plain = statistics.median(rates_httpx)
        plain2 = statistics.median(rates_httpx2)
        print(
            f"requests/s at concurrency 32 (median of {args.repeats}): bare AsyncOpenAI "
            f"{bare:,.0f}, sweep {ours:,.0f}, ratio {ours / bare:.2f} (target >= 0.90)"
        )
        print(
            f"against a bare httpx client (issue 36's reference), {plain:,.0f} requests/s: "
            f"ratio {ours / plain:.2f} (target >= 0.90)"
        )
        print(
            f"against a bare httpx2 client (the sweep's own HTTP package), {plain2:,.0f} "
            f"requests/s: ratio {ours / plain2:.2f}"
        )

        if args.cached_repeats:
            cached_rerun(base_url, args.cases, args.cached_repeats, workdir)
        peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"peak memory (max RSS of this process, Prefect's server included): {peak_mib:,.0f} MiB"
        )
    finally:
        endpoint.kill()
        endpoint.wait()
        if server is not None:
            from tests.prefect_server import stop

            stop(server)


def cached_rerun(base_url: str, cases: int, repeats: int, workdir: Path) -> None:
    """Wall time of a fully cached re-run of a `cases`-case sweep (the median of `repeats`)
    against its cold run, each after PAUSE_S."""
    from numerate.store import Store

    config = sweep_config(base_url, cases, "cached")
    db = str(workdir / "cached.duckdb")
    time.sleep(PAUSE_S)
    cold = timed_sweep(config, db)
    warm = []
    for _ in range(repeats):
        time.sleep(PAUSE_S)
        warm.append(timed_sweep(config, db))
    store = Store.open(db)
    sent = store.query("SELECT count(*) FROM completions")[0][0]
    graded = store.query("SELECT count(*) FROM responses")[0][0]
    Store.close_all()
    cached = statistics.median(warm)
    print(
        f"{cases:,}-case sweep: cold {cold:.2f} s, fully cached re-run {cached:.2f} s "
        f"(median of {len(warm)}; {min(warm):.2f}-{max(warm):.2f} s), ratio "
        f"{cached / cold:.1%} (target < 15%); {sent:,} requests sent for {graded:,} graded "
        f"responses over {1 + len(warm)} runs"
    )


def start_prefect_server() -> subprocess.Popen[bytes]:
    """`prefect server start` on 127.0.0.1, and PREFECT_API_URL pointing at it."""
    from tests.prefect_server import start_prefect_server as start

    server, url = start(dict(os.environ))
    os.environ["PREFECT_API_URL"] = url
    return server


if __name__ == "__main__":
    main()
