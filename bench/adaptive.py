"""Requests saved by adaptive sampling, against a fixed count with the same worst-case width.

A loopback endpoint answers Object Counting cases correctly with a probability that depends on
the grid point (the list length): about 100% at length 2, 95% at 4, 75% at 6, 50% at 8 (it
knows each case's target by its prompt and errs by one, deterministically per case). The same
sweep runs twice: with `precision: {ci_width: 0.10, min_count: 20, max_count: 400, step: 20}`,
and with `count: 400` (the fixed count whose 95% Wilson interval is at most 0.10 wide at any
accuracy: 382, rounded up to a whole step). Reported: requests of each, the saving, and the
widest interval of each.

Run with `make bench` or `python bench/adaptive.py`.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="numerate-bench-prefect-"))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
from numerate.config.env import configure  # noqa: E402

configure()

ACCURACY = {2: 1.0, 4: 0.95, 6: 0.75, 8: 0.5}
PRECISION = {"ci_width": 0.10, "min_count": 20, "max_count": 400, "step": 20}


def config(base_url: str, sampling: dict[str, Any], name: str) -> dict[str, Any]:
    model = {"name": "graded", "model": "fake-model", "base_url": base_url, "concurrency": 16}
    entry = {"manifold": "objects", "grid": {"length": list(ACCURACY)}, **sampling}
    return {"name": name, "seed": 11, "batch_size": 100, "models": [model], "manifolds": [entry]}


def answer_key() -> dict[str, tuple[str, int]]:
    """Prompt -> (target, list length) of every case the sweeps can ask."""
    from numerate.config.sweep import ManifoldSweep
    from numerate.planning.plan import plan_manifold

    entry = ManifoldSweep(manifold="objects", count=400, grid={"length": list(ACCURACY)})
    return {
        case.input: (case.target, int(case.point_key.removeprefix("length=")))
        for case in plan_manifold(entry, 11)
    }


def main() -> None:
    from numerate.flows.sweep import sweep
    from numerate.store import Store
    from tests.fake_openai import FakeOpenAI, Reply, prompt_of

    key = answer_key()

    def graded(body: dict[str, Any]) -> Reply:
        target, length = key[prompt_of(body)]
        draw = hashlib.sha256(prompt_of(body).encode()).digest()[0] / 256
        answer = target if draw < ACCURACY[length] else str(int(target) + 1)
        return Reply(content=f"Answer: {answer}")

    work = Path(tempfile.mkdtemp(prefix="numerate-bench-adaptive-"))
    figures = {}
    with FakeOpenAI(graded) as server:
        for name, sampling in (("adaptive", {"precision": PRECISION}), ("fixed", {"count": 400})):
            before = len(server.requests)
            db = str(work / f"{name}.duckdb")
            run_id = asyncio.run(sweep(config(server.base_url, sampling, name), db, fresh=True))
            rows = Store.open(db).query(
                "SELECT point_key, n, accuracy, ci_high - ci_low FROM points WHERE run_id = ? "
                "ORDER BY point_key",
                [run_id],
            )
            Store.close_all()
            figures[name] = (len(server.requests) - before, rows)
    adaptive, fixed = figures["adaptive"][0], figures["fixed"][0]
    print("point       adaptive: n  accuracy  width   | fixed: n  accuracy  width")
    for a, f in zip(figures["adaptive"][1], figures["fixed"][1], strict=True):
        left = f"{a[0]:<10} {a[1]:>11} {a[2]:>9.3f} {a[3]:>6.3f}"
        print(f"{left}   | {f[1]:>8} {f[2]:>9.3f} {f[3]:>6.3f}")
    widest = max(r[3] for r in figures["adaptive"][1]), max(r[3] for r in figures["fixed"][1])
    print(
        f"requests: adaptive {adaptive:,}, fixed {fixed:,}: {1 - adaptive / fixed:.0%} saved; "
        f"widest interval {widest[0]:.3f} vs {widest[1]:.3f}"
    )


if __name__ == "__main__":
    main()
