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
from numerate.kernel.design import (
    as_stored,
    binomial,
    case_clustered,
    effective_size,
    point_mean,
)
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


def test_a_small_point_whose_answers_agree_does_not_weigh_half_the_mean_at_no_cost():
    # 5 answers all right beside 360 of 400: the small point's variance at its own accuracy
    # is 0, and the mean's interval was [0.924, 0.967], narrower than 400 answers alone give
    summary = point_mean([binomial(5, 5), binomial(360, 400)])
    assert summary.value == pytest.approx(0.95)
    assert summary.low < 0.85 and summary.effective < 50


@pytest.mark.parametrize(
    ("truths", "counts"), [((0.9, 0.9), (5, 400)), ((0.95,) * 4, (10, 10, 10, 400))]
)
def test_a_mean_over_points_of_very_unequal_counts_covers(truths, counts):
    # counting each point's variance at its own accuracy covered 37% and 74%
    rng = np.random.default_rng(24)
    truth = sum(truths) / len(truths)
    covered = 0
    for _ in range(2000):
        drawn = [binomial(int(rng.binomial(n, p)), n) for p, n in zip(truths, counts, strict=True)]
        summary = point_mean(drawn)
        covered += summary.low <= truth <= summary.high
    assert covered / 2000 >= 0.9, covered / 2000


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 50)), min_size=1, max_size=8))
def test_equal_counts_give_the_pooled_wilson_interval_or_a_wider_one(raw):
    # the pooled interval, unless a point's variance drawn toward the mean is larger than
    # its own (a point of 2 answers both wrong beside one of 2 both right): never narrower
    n = max(max(a, b) for a, b in raw) or 1
    counts = [min(a, n) for a, _ in raw]
    summary = point_mean([binomial(c, n) for c in counts])
    assert summary.value == pytest.approx(sum(counts) / (n * len(counts)))
    low, high = wilson_interval(sum(counts), n * len(counts))
    assert summary.low <= low + 1e-12 and summary.high >= high - 1e-12


def test_one_sample_per_case_is_the_plain_wilson_interval():
    estimate = case_clustered([(1, 1, 7), (0, 1, 5)])
    assert estimate.value == pytest.approx(7 / 12)
    assert (estimate.low, estimate.high) == pytest.approx(wilson_interval(7, 12))
    assert estimate.se == pytest.approx(math.sqrt(7 / 12 * 5 / 12 / 12))


def beta_cases(rng: np.random.Generator, cases: int) -> np.ndarray:
    """Cases of very unequal difficulty, accuracy 0.6 (Beta(0.6, 0.4): half the variance of
    an answer lies between cases)."""
    return rng.beta(0.6, 0.4, cases)


def hard_every_time(rng: np.random.Generator, cases: int) -> np.ndarray:
    """Accuracy 0.95: one case in 20 is answered wrong every time, the others right."""
    return (rng.random(cases) < 0.95).astype(float)


def multi_sample_coverage(
    cases: int, k: int, runs: int, seed: int, draw=beta_cases, truth: float = 0.6
) -> tuple[float, float]:
    """Coverage of the case-clustered interval and of the naive one (k answers as k
    independent ones), each case's chance drawn by `draw`."""
    rng = np.random.default_rng(seed)
    clustered = naive = 0
    for _ in range(runs):
        right = rng.binomial(k, draw(rng, cases))
        estimate = case_clustered([(int(c), k, 1) for c in right])
        clustered += estimate.low <= truth <= estimate.high
        low, high = wilson_interval(int(right.sum()), cases * k)
        naive += low <= truth <= high
    return clustered / runs, naive / runs


@pytest.mark.parametrize(("cases", "k"), [(50, 5), (40, 10)])
def test_multi_sample_interval_treats_the_case_as_the_unit(cases, k):
    clustered, naive = multi_sample_coverage(cases, k, runs=2000, seed=22)
    assert clustered >= 0.93, clustered
    assert naive < 0.80, naive  # what treating samples as independent answers gave


@pytest.mark.parametrize(("cases", "k"), [(50, 5), (40, 10)])
def test_the_interval_covers_where_most_runs_get_every_answer_right(cases, k):
    # a third of these runs or more get every answer right, where the answers say nothing
    # of how alike a case's answers are: counting the answers there covered 0.83-0.89
    clustered, _ = multi_sample_coverage(cases, k, 2000, 23, hard_every_time, truth=0.95)
    assert clustered >= 0.93, clustered


def test_every_answer_right_counts_the_cases_and_one_wrong_answer_moves_it_little():
    perfect = case_clustered([(10, 10, 20)])
    assert perfect.effective == 20
    assert (perfect.low, perfect.high) == pytest.approx(wilson_interval(20, 20))
    one_wrong = case_clustered([(10, 10, 19), (9, 10, 1)])
    assert 20 < one_wrong.effective < 200
    assert one_wrong.low < 0.9  # counting the answers gave 0.972, the cases 0.839


def test_answers_of_both_outcomes_bring_the_cluster_robust_figure():
    # 2,000 cases x 5 independent answers at 0.5: the cluster-robust design effect is about
    # 1 and the effective size near the answers; one answer of the prior among ~5,000
    rng = np.random.default_rng(5)
    right = rng.binomial(5, 0.5, 2000)
    estimate = case_clustered([(int(c), 5, 1) for c in right])
    p = right.sum() / 10_000
    cr0 = sum((c - p * 5) ** 2 for c in right) / 10_000**2
    assert estimate.effective == pytest.approx(min(10_000, p * (1 - p) / cr0), rel=0.01)
    # all alike, with both outcomes many times: the cases
    alike = case_clustered([(5, 5, 600), (0, 5, 400)])
    assert alike.effective == pytest.approx(1000, rel=0.01)


def test_a_mean_of_points_all_right_counts_their_cases():
    points = [case_clustered([(10, 10, 20)]), case_clustered([(10, 10, 30)])]
    mean = point_mean(points)
    assert mean.effective == 50 and mean.scored == 500
    assert (mean.low, mean.high) == pytest.approx(wilson_interval(50, 50))


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 40)), min_size=1, max_size=6))
def test_a_stored_point_gives_the_mean_what_its_estimate_did(raw):
    kinds = [(c, 6, w) for c, w in raw]
    estimate = case_clustered(kinds)
    assert estimate.value is not None and estimate.se is not None
    stored = as_stored(estimate.value, estimate.se, estimate.scored, 6)
    assert stored.effective == pytest.approx(estimate.effective)


def test_effective_size_edges():
    # where the variance says nothing (0, or an estimate of 0 or 1) the cap
    assert effective_size(0.5, 0.0, 40) == 40
    assert effective_size(1.0, 0.01, 40) == effective_size(0.0, 0.01, 40) == 40
    # a variance larger than binomial gives fewer answers; a smaller one never more than the cap
    assert effective_size(0.5, 0.25 / 10, 40) == pytest.approx(10)
    assert effective_size(0.5, 0.25 / 400, 40) == 40


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
