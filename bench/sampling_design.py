"""The statistical figures the documentation (docs/statistics.md) quotes from simulation,
measured again.

- Summaries: on bench/adaptive.py's profile (points right 100%, 95%, 75%, 50% of the time),
  the adaptive and a fixed 100-per-point design: the mean summary accuracy, how often its 95%
  interval covers the mean over points (0.800), and the same for the old pooled figure.
- Several samples per case: coverage and width of the case-clustered interval and of the
  naive one (samples as independent answers) at 50 cases x 5 samples, 40 x 10 and 20 x 10:
  cases of very unequal difficulty; one case in 20 wrong every time (a third of the runs get
  every answer right or more); every answer independent (what assuming the worst where
  every answer is right costs).
- The nightly gate: 5 models x 3 manifolds, 200 pairs each. How often a night fails for no
  reason (a stochastic model: 30% of pairs differ by chance), and how often a drop of 5 or 10
  points in one group is caught, in that family and alone; at alpha 0.01, 0.05 and 0.10;
  and the minimum detectable drop numerate reports for each.

Seeded; run with `make bench` or `python bench/sampling_design.py` (about 30 s).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from numerate.config.sweep import Precision
from numerate.kernel.design import binomial, case_clustered, point_mean
from numerate.kernel.power import minimum_detectable_drop
from numerate.kernel.stats import holm_over_discordant, mcnemar_exact, wilson_interval
from numerate.planning.adaptive import decide

PROFILE = (1.0, 0.95, 0.75, 0.5)
RULE = Precision(ci_width=0.10, min_count=20, max_count=400, step=20, min_scored=0.5)


def summaries(design: str, runs: int = 2000, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    truth = sum(PROFILE) / len(PROFILE)
    means, pooled, covered, pooled_covered = [], [], 0, 0
    for _ in range(runs):
        points, correct, asked = [], 0, 0
        for p in PROFILE:
            draws = rng.random(RULE.max_count) < p
            n = 100 if design == "fixed" else RULE.min_count
            while (
                design != "fixed"
                and decide(binomial(int(draws[:n].sum()), n), n, n, n, RULE)[0] is None
            ):
                n += RULE.step
            c = int(draws[:n].sum())
            points.append(binomial(c, n))
            correct, asked = correct + c, asked + n
        summary = point_mean(points)
        means.append(summary.value)
        covered += summary.low <= truth <= summary.high
        pooled.append(correct / asked)
        low, high = wilson_interval(correct, asked)
        pooled_covered += low <= truth <= high
    print(
        f"  {design:>8}: mean over points {np.mean(means):.3f} (coverage {covered / runs:.3f});"
        f" pooled {np.mean(pooled):.3f} (coverage {pooled_covered / runs:.3f})"
    )


def samples(cases: int, k: int, chances, truth: float, runs: int = 4000, seed: int = 2) -> None:
    """Coverage and mean width of the case-clustered interval and of the naive one, each
    case's chance of a right answer drawn by `chances(rng, cases)`."""
    rng = np.random.default_rng(seed)
    clustered = naive = 0
    widths = [0.0, 0.0]
    for _ in range(runs):
        right = rng.binomial(k, chances(rng, cases))
        estimate = case_clustered([(int(c), k, 1) for c in right])
        clustered += estimate.low <= truth <= estimate.high
        low, high = wilson_interval(int(right.sum()), cases * k)
        naive += low <= truth <= high
        widths[0] += estimate.high - estimate.low
        widths[1] += high - low
    print(f"  {cases} cases x {k}: case as the unit {clustered / runs:.3f} "
          f"(width {widths[0] / runs:.3f}), naive {naive / runs:.3f} "
          f"(width {widths[1] / runs:.3f})")  # fmt: skip


PROFILES = {
    "population accuracy 0.6, Beta(0.6, 0.4) cases": (lambda r, n: r.beta(0.6, 0.4, n), 0.6),
    "accuracy 0.95, one case in 20 wrong every time": (
        lambda r, n: (r.random(n) < 0.95).astype(float), 0.95),
    "accuracy 0.99, every answer independent": (lambda r, n: np.full(n, 0.99), 0.99),
}  # fmt: skip


def gate(alpha: float, nights: int = 4000, seed: int = 3) -> None:
    rng = np.random.default_rng(seed)
    n, psi, groups = 200, 0.3, 15

    def regressed(counts: list[tuple[int, int]]) -> list[bool]:
        p = [mcnemar_exact(a, b) for a, b in counts]
        adjusted = holm_over_discordant(p, [a + b for a, b in counts])
        return [x < alpha and a > b for x, (a, b) in zip(adjusted, counts, strict=True)]

    def draw(drop: float) -> tuple[int, int]:
        share = max(psi, drop)
        lost, gained, _ = rng.multinomial(n, [(share + drop) / 2, (share - drop) / 2, 1 - share])
        return int(lost), int(gained)

    false = sum(any(regressed([draw(0.0) for _ in range(groups)])) for _ in range(nights))
    line = f"  alpha {alpha:.2f}: nights failing falsely {false / nights:.3f}"
    for drop in (0.05, 0.10):
        family = sum(regressed([draw(drop)] + [draw(0.0) for _ in range(groups - 1)])[0]
                     for _ in range(nights // 2)) / (nights // 2)  # fmt: skip
        alone = sum(regressed([draw(drop)])[0] for _ in range(nights // 2)) / (nights // 2)
        line += f"; {drop:.0%} drop caught {family:.2f} in the family, {alone:.2f} alone"
    in_family = minimum_detectable_drop(n, round(psi * n), alpha, groups)
    alone_drop = minimum_detectable_drop(n, round(psi * n), alpha, 1)
    print(line + f"; detectable drop {in_family:.3f} in the family, {alone_drop:.3f} alone")


if __name__ == "__main__":
    print("Summaries over points (profile 1.0, 0.95, 0.75, 0.5; truth 0.800):")
    for design in ("adaptive", "fixed"):
        summaries(design)
    for name, (chances, truth) in PROFILES.items():
        print(f"Several samples per case ({name}):")
        for cases, k in ((50, 5), (40, 10), (20, 10)):
            samples(cases, k, chances, truth)
    print("The nightly gate (15 groups of 200 pairs, 30% of pairs differing by chance):")
    for alpha in (0.01, 0.05, 0.10):
        gate(alpha)
