"""Cases generated per second, per manifold, on one core: the median of repeats.

Run with `make bench`. Each repeat generates a fresh grid point (the default parameters, with a
new base seed) so no cache helps. Target: at least 20,000 cases/s per manifold.
"""

from __future__ import annotations

import argparse
import statistics
import time

from numerate.manifolds import registry

TARGET = 20_000


def cases_per_second(name: str, count: int, base_seed: int) -> float:
    manifold = registry.get(name)
    params = manifold.params(count=count)
    start = time.perf_counter()
    for _ in manifold.cases(params, base_seed):
        pass
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=20_000, help="cases per repeat")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'manifold':<10} {'median cases/s':>15} {'min':>10} {'max':>10}  target {TARGET:,}")
    for name in registry.names():
        rates = [cases_per_second(name, args.count, seed) for seed in range(args.repeats)]
        median = statistics.median(rates)
        verdict = "ok" if median >= TARGET else "BELOW TARGET"
        print(f"{name:<10} {median:>15,.0f} {min(rates):>10,.0f} {max(rates):>10,.0f}  {verdict}")


if __name__ == "__main__":
    main()
