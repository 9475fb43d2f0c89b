"""Adaptive concurrency against a rate-limited server, measured in one run.

A loopback endpoint (20 ms per answer) refuses with 429 every request beyond 4 in flight. The
same 1,000 requests are asked at concurrency 4 and at concurrency 16, alternately, `--repeats`
times (with and without Retry-After). Target: concurrency 16 loses no case, takes at most 1.1x
the wall time of concurrency 4, and fewer than a tenth of its requests get a 429 (after a 429
the limit stays below the level refused until the server has been quiet a while:
numerate.endpoints.pacing). Ratios are measured within one run; figures are medians over
the repeats.

Run with `make bench` (or `python bench/rate_limit.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from numerate.endpoints import answer_cases, endpoints_in_use
    from numerate.store import Store
    from tests.endpoints.test_endpoints import endpoint, planned_cases, rate_limited
    from tests.fake_openai import FakeOpenAI

    planned = planned_cases(args.cases)
    store = Store.open(os.path.join(tempfile.mkdtemp(prefix="numerate-bench-"), "r.duckdb"))
    with FakeOpenAI() as server:
        for retry_after in (True, False):
            server.responder = rate_limited(server, 4, retry_after)
            times: dict[int, list[float]] = {4: [], 16: []}
            refused = []
            for repeat in range(args.repeats):
                for concurrency in (4, 16):
                    sent = len(server.requests)
                    model = endpoint(server, concurrency=concurrency, max_retries=0, cache="off")

                    async def ask(model=model, run_id=f"{retry_after}-{repeat}-{concurrency}"):
                        started = time.monotonic()
                        async with endpoints_in_use():  # closed as the loop ends: ids are reused
                            answers = await answer_cases(model, planned, store, run_id)
                        return time.monotonic() - started, answers.completions

                    elapsed, answers = asyncio.run(ask())
                    lost = sum(a.error is not None for a in answers.values())
                    assert lost == 0, f"{lost} cases lost at concurrency {concurrency}"
                    times[concurrency].append(elapsed)
                    if concurrency == 16:
                        total = len(server.requests) - sent
                        refused.append((total - len(planned)) / total)
            c4, c16 = median(times[4]), median(times[16])
            print(
                f"Retry-After {'sent' if retry_after else 'absent'}: concurrency 4 {c4:.2f} s, "
                f"16 {c16:.2f} s: ratio {c16 / c4:.2f} (target <= 1.10); 429s "
                f"{median(refused):.1%} of requests at 16 (target < 10%); no case "
                f"lost (median of {args.repeats})"
            )
    Store.close_all()


def median(values: list[float]) -> float:
    import statistics

    return statistics.median(values)


if __name__ == "__main__":
    main()
