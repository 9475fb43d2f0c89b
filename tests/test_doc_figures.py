"""The statistical figures the documentation quotes (docs/, the README), recomputed: each test
finds its figure in the text, so a figure that drifts from what the code computes fails here.

Exact where the figure allows it (binomial sums over every outcome; the adaptive rule's
stopping distribution by dynamic programming over its rounds), seeded simulation otherwise.
"""

import math
import re
from pathlib import Path

import numpy as np
import polars as pl
from scipy import stats

from numerate.config.sweep import Precision, load_sweep_config
from numerate.kernel.design import binomial
from numerate.kernel.stats import wilson_interval
from numerate.manifolds import registry
from numerate.manifolds.common import point_seed
from numerate.manifolds.registry import HEURISTIC_SAMPLE
from numerate.planning.adaptive import decide
from numerate.results.compare import compare_runs, for_display

ROOT = Path(__file__).resolve().parents[1]
DOCS = " ".join(
    " ".join(path.read_text().split())
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
)
"""The README and every docs page, with line breaks as spaces: a figure may wrap."""
RULE = Precision(ci_width=0.10, min_count=20, max_count=400, step=20, min_scored=0.5)
GRID = np.linspace(0.0, 1.0, 41)
"""The docs' grid of true accuracies: 0, 0.025, ..., 1."""


def quoted(pattern: str) -> list[str]:
    """The docs' figures where `pattern` (a regex with one group) matches."""
    found = re.findall(pattern, DOCS)
    assert found, f"the docs no longer say {pattern!r}"
    return found


def fixed_coverage(p: float, n: int) -> float:
    counts = np.arange(n + 1)
    weights = stats.binom.pmf(counts, n, p)
    covered = [low <= p <= high for low, high in (wilson_interval(int(c), n) for c in counts)]
    return float(np.sum(weights[covered]))


def adaptive_stops(p: float, rule: Precision = RULE) -> list[tuple[int, int, float]]:
    """Every way the adaptive rule can stop at true accuracy p (every answer scored), as
    (correct, asked, probability): its rounds walked exactly, one binomial step at a time."""
    alive = stats.binom.pmf(np.arange(rule.min_count + 1), rule.min_count, p)
    asked, stopped = rule.min_count, []
    step = stats.binom.pmf(np.arange(rule.step + 1), rule.step, p)
    while True:
        for correct, mass in enumerate(alive):
            if mass and decide(binomial(correct, asked), asked, asked, asked, rule)[0] is not None:
                stopped.append((correct, asked, float(mass)))
                alive[correct] = 0.0
        if not alive.any() or asked >= rule.max_count:
            return stopped
        alive, asked = np.convolve(alive, step), asked + rule.step


def covers(interval: tuple[float, float], p: float) -> bool:
    return interval[0] <= p <= interval[1]


def adaptive_coverage(p: float) -> float:
    return sum(m for c, n, m in adaptive_stops(p) if covers(wilson_interval(c, n), p))


def adaptive_bias(p: float) -> float:
    return sum(m * c / n for c, n, m in adaptive_stops(p)) - p


def pct(value: float) -> str:
    return f"{100 * value:.2f}%"


def width(interval: tuple[float, float]) -> float:
    return interval[1] - interval[0]


def test_answers_a_wilson_interval_needs_at_50_percent():
    # exactly 50%: n / 2 correct of an even n
    needed = next(n for n in range(2, 2000, 2) if width(wilson_interval(n // 2, n)) <= 0.10)
    assert quoted(r"needs (\d+) answers to be 0\.10 wide") == [str(needed)]


def test_coverage_of_a_fixed_count_and_of_the_adaptive_rule():
    fixed = [fixed_coverage(p, 400) for p in GRID]
    adaptive = [adaptive_coverage(p) for p in GRID]
    figures = quoted(
        r"covers the true p in at least ([\d.]+%) of runs at every p, ([\d.]+%) on "
        r"average, against ([\d.]+%) and ([\d.]+%) for a fixed count of 400"
    )
    expected = (pct(min(adaptive)), pct(np.mean(adaptive)), pct(min(fixed)), pct(np.mean(fixed)))
    assert figures == [expected]


def test_bias_of_the_adaptive_estimate():
    low, high = adaptive_bias(0.05), adaptive_bias(0.9)
    figures = quoted(
        r"biased toward the nearer extreme: ([−+][\d.]+) at p = 0\.05 and ([−+][\d.]+) at p = 0\.9"
    )
    assert figures == [(f"{low:+.4f}".replace("-", "−"), f"{high:+.4f}".replace("-", "−"))]


def comparison_row(base_correct: int, lost: int, gained: int, n: int, manifold: str):
    """One group of n pairs with these counts, through numerate.results.compare."""
    base = [True] * base_correct + [False] * (n - base_correct)
    new = list(base)
    right = [i for i, v in enumerate(base) if v]
    wrong = [i for i, v in enumerate(base) if not v]
    for i in right[:lost]:
        new[i] = False
    for i in wrong[:gained]:
        new[i] = True

    def frame(values):
        return pl.DataFrame({
            "model": "llama-3.1-8b", "manifold": manifold, "point_key": "p",
            "case_id": [f"c{i}" for i in range(n)], "sample_index": 0, "correct": values,
        })  # fmt: skip

    return frame(base), frame(new)


def test_the_compare_example_is_what_compare_prints():
    groups = [
        comparison_row(731, 71, 28, 900, "objects"),
        comparison_row(388, 52, 60, 900, "sequence"),
    ]
    base = pl.concat([b for b, _ in groups])
    new = pl.concat([n for _, n in groups])
    shown = for_display(compare_runs(base, new))
    for row in shown.iter_rows():
        cells = [str(c) for c in row]
        pattern = r"\s+".join(re.escape(c) for c in cells)
        assert re.search(pattern, DOCS), f"the docs' compare example lacks {cells}"


def test_the_shuffle_trivial_strategy_and_guessing_on_the_nightly_grid():
    config = load_sweep_config(ROOT / "deployments" / "sweeps" / "nightly.yaml")
    entry = next(e for e in config.manifolds if e.manifold == "shuffle")
    shuffle = registry.get("shuffle")
    trivial, guess = [], []
    for _, params in entry.points():
        trivial.append(shuffle.heuristic_level(params, point_seed("shuffle", params, config.seed)))
        guess.append(shuffle.chance_level(params))
    figures = quoted(
        r"starting item scores ([\d.]+) on the nightly shuffle grid where guessing "
        r"scores ([\d.]+)"
    )
    assert figures == [(f"{np.mean(trivial):.2f}", f"{np.mean(guess):.3f}")]


def test_the_standard_error_bound_of_the_trivial_strategy():
    bound = f"{math.sqrt(0.25 / HEURISTIC_SAMPLE):.4f}"
    assert quoted(r"Its standard error is at most ([\d.]+)") == [bound]
    source = (ROOT / "numerate" / "manifolds" / "registry.py").read_text()
    assert f"at most {bound}" in source
