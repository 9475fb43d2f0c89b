"""The composite score: the worked example of docs/statistics.md, its invariants, and the
coverage of its bootstrap interval by simulation."""

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerate.kernel.composite import FLOOR, PointCases, combine, composite, point_score

ROOT = Path(__file__).resolve().parents[2]


def one_sample(manifold: str, chance: float, correct: int, truncated: int, n: int) -> PointCases:
    """A point of n cases answered once each."""
    wrong = n - correct - truncated
    kinds = [(1, 0, k) for k in [correct] if k] + [(0, 1, k) for k in [truncated] if k]
    kinds += [(0, 0, k) for k in [wrong] if k]
    return PointCases(
        manifold, chance, [c for c, _, _ in kinds], [t for _, t, _ in kinds], [1] * len(kinds),
        [k for _, _, k in kinds],
    )  # fmt: skip


# docs/statistics.md, "One score": the worked example
EXAMPLE = [
    one_sample("objects", 0.2, 16, 2, 20),  # (0.8 - 0.2) / 0.8 - 0.1 = 0.65
    one_sample("objects", 0.2, 10, 0, 20),  # (0.5 - 0.2) / 0.8 = 0.375
    one_sample("shuffle", 1 / 3, 9, 0, 10),  # (0.9 - 1/3) / (2/3) = 0.85
    one_sample("shuffle", 1 / 3, 22, 4, 40),  # (0.55 - 1/3) / (2/3) - 0.1 = 0.225
]


def test_the_worked_example():
    result = composite(EXAMPLE)
    assert result.manifolds == pytest.approx({"objects": 0.5125, "shuffle": 0.5375})
    assert result.score == pytest.approx(math.sqrt(0.5125 * 0.5375))  # 0.5249
    assert result.points == 4
    assert result.low < result.score < result.high
    # the same bootstrap written the slow way: each resample draws every point's cases by
    # index (docs/statistics.md prints 0.36 to 0.66; two bootstraps of a few thousand resamples
    # agree to about 0.01 at the 2.5th percentile)
    rng = np.random.default_rng(1)
    shares = []
    for _ in range(4000):
        scores = []
        for point in EXAMPLE:
            c, t, n = _counts(point)
            cases = np.array([1] * c + [2] * t + [0] * (n - c - t))
            drawn = cases[rng.integers(0, n, n)]
            scores.append(point_score((drawn == 1).sum(), (drawn == 2).sum(), n, point.chance))
        shares.append(combine([np.mean(scores[:2]), np.mean(scores[2:])]))
    low, high = np.quantile(shares, [0.025, 0.975])
    assert result.low == pytest.approx(low, abs=0.02)
    assert result.high == pytest.approx(high, abs=0.02)
    assert (round(result.low, 2), round(result.high, 2)) == (0.36, 0.66)
    docs = " ".join((ROOT / "docs" / "statistics.md").read_text().split())
    assert f"√(0.5125 × 0.5375) = {result.score:.3f}" in docs
    assert f"interval {result.low:.2f} to {result.high:.2f}" in docs


def test_point_score_by_hand():
    assert point_score(16, 2, 20, 0.2) == pytest.approx(0.65)
    assert point_score(0, 0, 10, 0.5) == pytest.approx(-1.0)  # always wrong: below chance


def test_a_manifold_at_chance_pulls_the_score_to_the_floor_not_to_zero():
    assert combine([1.0, -0.3]) == pytest.approx(math.sqrt(FLOOR))
    assert combine([0.81, 0.64]) == pytest.approx(0.72)


def test_the_same_run_shows_the_same_interval():
    assert composite(EXAMPLE) == composite(EXAMPLE)


def test_several_samples_a_case_resample_as_one():
    """Five answers a case: a case of 5 correct and one of 0 are two categories; the interval
    is as wide as two cases' worth of evidence, far wider than ten independent answers."""
    clustered = PointCases("m", 0.0, [5, 0], [0, 0], [5, 5], [1, 1])
    independent = one_sample("m", 0.0, 5, 0, 10)
    wide, narrow = composite([clustered]), composite([independent])
    assert wide.score == pytest.approx(narrow.score) == pytest.approx(0.5)
    assert wide.high - wide.low > 1.5 * (narrow.high - narrow.low)


def test_bad_points_are_refused():
    with pytest.raises(ValueError, match="no grid point"):
        composite([])
    with pytest.raises(ValueError, match="chance"):
        one_sample("m", 1.5, 1, 0, 2)
    with pytest.raises(ValueError, match="chance below 1"):  # a point where guessing wins
        composite([one_sample("m", 1.0, 1, 0, 2)])
    assert composite([*EXAMPLE, one_sample("x", 1.0, 0, 0, 9)]) == composite(EXAMPLE)
    with pytest.raises(ValueError, match="3 correct, 0 truncated of 2 scored"):
        PointCases("m", 0.0, [3], [0], [2], [1])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 30), st.integers(0, 30), st.integers(0, 30), st.integers(1, 5)),
        min_size=1,
        max_size=4,
    )
)
def test_a_point_weighs_the_same_whatever_its_count(points):
    """Every point counted `factor` times over (the same shares): the score does not move,
    and it stays within [FLOOR, 1]."""
    built = [
        one_sample(f"m{i % 2}", 0.25, c, t, c + t + w) for i, (c, t, w, _) in enumerate(points)
        if c + t + w > 0
    ]  # fmt: skip
    if not built:
        return
    scaled = [
        one_sample(p.manifold, 0.25, *(f * x for x in _counts(p)))
        for p, (*_, f) in zip(built, [q for q in points if sum(q[:3]) > 0], strict=True)
    ]
    assert composite(scaled, resamples=50).score == pytest.approx(
        composite(built, resamples=50).score
    )
    assert FLOOR - 1e-12 <= composite(built, resamples=50).score <= 1.0 + 1e-12


def _counts(point: PointCases) -> tuple[int, int, int]:
    correct = sum(c * k for c, k in zip(point.correct, point.cases, strict=True))
    truncated = sum(t * k for t, k in zip(point.truncated, point.cases, strict=True))
    return correct, truncated, sum(point.cases)


def test_the_interval_covers_the_true_score_in_at_least_93_percent_of_runs():
    """Seeded simulation: two manifolds of three points, unequal counts (as adaptive sampling
    leaves them), truncation at some points; the true score from the true probabilities."""
    design = [  # manifold, chance, P(correct), P(truncated), cases
        ("a", 0.2, 0.90, 0.00, 40), ("a", 0.2, 0.70, 0.05, 120), ("a", 0.2, 0.55, 0.10, 200),
        ("b", 0.5, 0.95, 0.00, 40), ("b", 0.5, 0.80, 0.02, 80), ("b", 0.5, 0.70, 0.10, 200),
    ]  # fmt: skip
    truth = combine([
        np.mean([(p - c) / (1 - c) - q for m, c, p, q, _ in design if m == name])
        for name in ("a", "b")
    ])  # fmt: skip
    rng = np.random.default_rng(7)
    runs, covered = 400, 0
    for run in range(runs):
        points = []
        for manifold, chance, p, q, n in design:
            correct, truncated, _ = rng.multinomial(n, [p, q, 1 - p - q])
            points.append(one_sample(manifold, chance, correct, truncated, n))
        result = composite(points, resamples=1000, seed=run)
        covered += result.low <= truth <= result.high
    assert covered / runs >= 0.93
    docs = " ".join((ROOT / "docs" / "statistics.md").read_text().split())
    assert f"covers the true score in {100 * covered / runs:.1f}% of {runs} simulated" in docs


def test_points_answered_alike_leave_the_interval_a_width_that_holds_the_score():
    """A hostile review: 3 points of 20 cases all right scored 1.000 [1.000, 1.000], and
    at a true 0.99 such intervals covered the true score in 43% of runs."""
    alike = [one_sample("a", 0.2, 20, 0, 20)] * 3
    result = composite(alike)
    assert result.score == 1.0 and result.high == 1.0 and 0.8 < result.low < 0.95
    # beside a manifold all wrong (at the floor, where every resample of it stays), the
    # other's cases all right still move the score
    wrong = composite([one_sample("a", 0.2, 0, 0, 20), one_sample("b", 0.2, 20, 0, 20)])
    assert wrong.low < wrong.score == wrong.high
    rng = np.random.default_rng(11)
    truth = (0.99 - 0.2) / 0.8
    covered = sum(
        composite(
            [one_sample("a", 0.2, int(rng.binomial(20, 0.99)), 0, 20) for _ in range(3)],
            resamples=500, seed=run,
        ).low <= truth
        for run in range(200)
    )  # fmt: skip
    assert covered / 200 >= 0.9, covered
