"""Design-independent accuracy: what a summary reports must not depend on how many cases each
grid point was given, and its interval must cover what it claims. Simulations are seeded; the
figures the docs quote (docs/statistics.md, "How summaries weigh grid points") are the ones
these compute."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.config.sweep import Precision
from numerate.kernel.design import binomial, case_clustered, design_interval, point_mean
from numerate.kernel.stats import wilson_interval
from numerate.planning.adaptive import decide

# bench/adaptive.py's profile: a model right about 100%, 95%, 75% and 50% of the time
PROFILE = (1.0, 0.95, 0.75, 0.5)
RULE = Precision(ci_width=0.10, min_count=20, max_count=400, step=20, min_scored=0.5)


def adaptive_count(draws: np.ndarray, rule: Precision = RULE) -> int:
    """How many of a point's answers the adaptive rule asks before it stops."""
    n = rule.min_count
    while True:
        correct = int(draws[:n].sum())
        reason, _ = decide(binomial(correct, n), n, n, n, rule)
        if reason is not None:
            return n
        n += rule.step


def simulate(profile, design: str, runs: int, seed: int):
    """Per simulated run: the summary Estimate and the old pooled accuracy."""
    rng = np.random.default_rng(seed)
    results = []
    for _ in range(runs):
        points, correct, asked = [], 0, 0
        for p in profile:
            draws = rng.random(RULE.max_count) < p
            n = 100 if design == "fixed" else adaptive_count(draws)
            c = int(draws[:n].sum())
            points.append(binomial(c, n))
            correct, asked = correct + c, asked + n
        results.append((point_mean(points), correct / asked))
    return results


@pytest.mark.parametrize("design", ["fixed", "adaptive"])
@pytest.mark.parametrize("profile", [PROFILE, (0.1, 0.3, 0.5, 0.7, 0.9), (0.02, 0.5, 0.98)])
def test_summary_interval_covers_the_mean_over_points(profile, design):
    truth = sum(profile) / len(profile)
    results = simulate(profile, design, runs=1000, seed=20)
    coverage = sum(e.low <= truth <= e.high for e, _ in results) / len(results)
    assert coverage >= 0.93, f"{design} {profile}: coverage {coverage:.3f}"


def test_adaptive_summary_reports_the_per_point_mean():
    results = simulate(PROFILE, "adaptive", runs=1000, seed=21)
    mean = float(np.mean([e.value for e, _ in results]))
    pooled = float(np.mean([p for _, p in results]))
    assert abs(mean - 0.800) <= 0.01, mean
    # the old pooled figure weighs points by the cases the sampler asked: far from 0.800
    assert pooled < 0.70, pooled


def test_fixed_counts_report_what_pooling_reported():
    # equal counts: the mean over points is the pooled accuracy, the interval its Wilson
    counts = [(40, 40), (38, 40), (30, 40), (20, 40)]
    summary = point_mean([binomial(c, n) for c, n in counts])
    assert summary.value == pytest.approx(128 / 160)
    assert (summary.low, summary.high) == pytest.approx(wilson_interval(128, 160))


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=8))
def test_equal_counts_give_the_pooled_wilson_interval(raw):
    n = max(max(a, b) for a, b in raw) or 1
    counts = [min(a, n) for a, _ in raw]
    summary = point_mean([binomial(c, n) for c in counts])
    low, high = wilson_interval(sum(counts), n * len(counts))
    assert summary.low == pytest.approx(low) and summary.high == pytest.approx(high)


def test_one_sample_per_case_is_the_plain_wilson_interval():
    estimate = case_clustered([(1, 1, 7), (0, 1, 5)])
    assert estimate.value == pytest.approx(7 / 12)
    assert (estimate.low, estimate.high) == pytest.approx(wilson_interval(7, 12))
    assert estimate.se == pytest.approx(math.sqrt(7 / 12 * 5 / 12 / 12))


def multi_sample_coverage(cases: int, k: int, runs: int, seed: int) -> tuple[float, float]:
    """Coverage of the case-clustered interval and of the naive one (k answers as k
    independent ones) for the population accuracy 0.6, cases of very unequal difficulty
    (Beta(0.6, 0.4): half the variance of an answer lies between cases)."""
    rng = np.random.default_rng(seed)
    clustered = naive = 0
    for _ in range(runs):
        right = rng.binomial(k, rng.beta(0.6, 0.4, cases))
        estimate = case_clustered([(int(c), k, 1) for c in right])
        clustered += estimate.low <= 0.6 <= estimate.high
        low, high = wilson_interval(int(right.sum()), cases * k)
        naive += low <= 0.6 <= high
    return clustered / runs, naive / runs


@pytest.mark.parametrize(("cases", "k"), [(50, 5), (40, 10)])
def test_multi_sample_interval_treats_the_case_as_the_unit(cases, k):
    clustered, naive = multi_sample_coverage(cases, k, runs=2000, seed=22)
    assert clustered >= 0.93, clustered
    assert naive < 0.80, naive  # what treating samples as independent answers gave


def test_design_interval_edges():
    assert design_interval(0.5, 0.0, 0) == (0.0, 1.0)
    assert design_interval(1.0, 0.0, 40) == pytest.approx(wilson_interval(40, 40))
    assert design_interval(0.0, 0.0, 40) == pytest.approx(wilson_interval(0, 40))
    # a variance larger than binomial widens; a smaller one never narrows below the cap
    assert design_interval(0.5, 0.25 / 10, 40) == pytest.approx(wilson_interval(5, 10))
    assert design_interval(0.5, 0.25 / 400, 40) == pytest.approx(wilson_interval(20, 40))


def test_points_without_a_scored_answer_are_left_out():
    summary = point_mean([binomial(3, 4), binomial(0, 0)])
    assert summary.value == pytest.approx(0.75) and summary.scored == 4
    assert point_mean([binomial(0, 0)]).value is None
    assert case_clustered([(0, 0, 1)]).value is None


def test_impossible_case_counts_raise():
    with pytest.raises(ValueError, match="correct <= scored"):
        case_clustered([(3, 2, 1)])


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 4)), max_size=8))
def test_cases_alike_given_with_their_number_are_those_cases_one_by_one(raw):
    kinds = [(min(c, s), s, w) for c, s, w in raw]
    one_by_one = [(c, s, 1) for c, s, w in kinds for _ in range(w)]
    grouped, single = case_clustered(kinds), case_clustered(one_by_one)
    assert grouped.scored == single.scored
    if single.value is None:
        assert grouped == single
    else:
        assert (grouped.value, grouped.se, grouped.low, grouped.high) == pytest.approx(
            (single.value, single.se, single.low, single.high), rel=1e-12, abs=1e-12
        )
