"""NumGen metrics on hand-computed matrices, and invariants over random ones."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.kernel.stats import wilson_interval
from numerate.numgen.baselines import random_counts, weber_counts
from numerate.numgen.metrics import (
    COLUMNS,
    ConfusionMatrix,
    accuracy,
    confusion_matrix,
    human_correlation,
    knower_level,
    mean_weighted_error,
    per_target_accuracy,
    random_correlation,
    scalar_variability,
    score,
    uniform_matrix,
    weber_matrix,
)
from tests.examples import examples


def matrix(rows: dict[int, dict[int, int]], design=range(1, 11)) -> ConfusionMatrix:
    """A confusion matrix from {target: {generated: count}}."""
    targets, generated = [], []
    for t, answers in rows.items():
        for g, k in answers.items():
            targets += [t] * k
            generated += [g] * k
    return confusion_matrix(targets, generated, design)


def test_the_matrix_counts_pairs_caps_at_20_and_keeps_zero():
    cm = confusion_matrix([1, 1, 2, 3, 3], [1, 0, 2, 25, 20], range(1, 4))
    assert cm.counts.shape == (3, 21)
    assert cm.row(1)[[0, 1]].tolist() == [1, 1]
    assert cm.row(3)[20] == 2  # 25 and 20 both land in 20+
    assert cm.n == 5


@given(st.lists(st.tuples(st.integers(1, 19), st.integers(0, 40)), max_size=60))
def test_the_matrix_of_counted_pairs_is_the_matrix_of_the_pairs_one_by_one(pairs):
    """`numgen score` holds a file's responses as its distinct pairs and their counts."""
    from collections import Counter

    from numerate.numgen.metrics import counted_matrix

    cm = counted_matrix(Counter(pairs))
    assert cm.targets == tuple(range(1, max([10, *(t for t, _ in pairs)]) + 1))
    for row, target in enumerate(cm.targets):
        for column in range(21):
            seen = sum(1 for t, g in pairs if t == target and min(g, 20) == column)
            assert cm.counts[row, column] == seen


def test_the_matrix_rejects_targets_outside_the_design_and_bad_counts():
    with pytest.raises(ValueError, match="got 11"):
        confusion_matrix([11], [3], range(1, 11))
    with pytest.raises(ValueError, match="got -1"):
        confusion_matrix([1], [-1], range(1, 11))
    with pytest.raises(ValueError, match="differ in length"):
        confusion_matrix([1, 2], [1], range(1, 11))


def test_accuracy_and_mwe_by_hand():
    # T=1 -> 1, 2; T=2 -> 2, 4; T=4 -> 0 (nothing found), 20+ (found 31)
    cm = matrix({1: {1: 1, 2: 1}, 2: {2: 1, 4: 1}, 4: {0: 1, 31: 1}})
    assert accuracy(cm) == 2 / 6
    # |G-T|/T: 0, 1, 0, 1, 1 (zero: all missed), 4 (20+ enters as 20: (20-4)/4)
    assert mean_weighted_error(cm) == pytest.approx((0 + 1 + 0 + 1 + 1 + 4) / 6)


def test_empty_matrix():
    cm = confusion_matrix([], [], range(1, 11))
    s = score(cm)
    assert (s.n, s.accuracy, s.mwe, s.knower_level) == (0, None, None, 0)
    assert s.human_correlation is None and s.scalar_variability.slope is None
    assert s.accuracy_ci == (0.0, 1.0)


def test_a_perfect_counter_knows_every_number_of_the_design():
    cm = matrix({t: {t: 5} for t in range(1, 11)})
    assert (accuracy(cm), mean_weighted_error(cm), knower_level(cm)) == (1.0, 0.0, 10)


def test_knower_level_needs_67_percent_hits():
    # 1: 3/3 hits, never given for 2 or 3. 2: 2/3 = 0.667 < 0.67 fails, so the level is 1
    # although 3 would pass.
    cm = matrix({1: {1: 3}, 2: {2: 2, 3: 1}, 3: {3: 3}}, range(1, 4))
    assert knower_level(cm) == 1


def test_knower_level_rejects_a_number_given_for_everything():
    # "1" hits 4/4 when asked for 1 and is given in 3 of the 8 other trials: 0.375 <= 0.5 * 1.0,
    # so 1 passes; 2 then fails (2/4 hits).
    passes = matrix({1: {1: 4}, 2: {1: 2, 2: 2}, 3: {1: 1, 3: 3}}, range(1, 4))
    assert knower_level(passes) == 1
    # 1 given in 5 of the 8 other trials: 0.625 > 0.5, so not even a one-knower.
    fails = matrix({1: {1: 4}, 2: {1: 3, 2: 1}, 3: {1: 2, 3: 2}}, range(1, 4))
    assert knower_level(fails) == 0


def test_knower_level_stops_at_a_number_without_trials():
    cm = matrix({1: {1: 2}, 3: {3: 2}}, range(1, 4))
    assert knower_level(cm) == 1


def test_knower_level_five_reads_the_column_of_five():
    """The reference reads the wrong column for level 5; here a perfect 1..5 counter that
    answers 7 for 6..10 is exactly a five-knower (7 is not among its known numbers)."""
    rows = {t: {t: 4} for t in range(1, 6)} | {t: {7: 4} for t in range(6, 11)}
    assert knower_level(matrix(rows)) == 5


def test_weber_matrix_by_hand():
    w = weber_matrix([1, 4, 5, 10])
    assert np.allclose(w.sum(axis=1), 1.0)
    assert w[0, 1] == w[1, 4] == 1.0  # subitizing range: exact
    # t = 5: sd 0.75; P(4.5 < X < 5.5) = 2 * Phi(0.5 / 0.75) - 1 = 0.49501 (tables), the mass
    # beyond 1..20 being below 1e-8
    assert w[2, 5] == pytest.approx(0.49501, abs=1e-4)
    assert w[3, 9] == pytest.approx(w[3, 11])  # symmetric about the target
    assert w[:, 0].sum() == 0  # humans never answer 0


def test_uniform_matrix():
    u = uniform_matrix(range(1, 11))
    assert u[:, 0].sum() == 0 and np.allclose(u[:, 1:], 1 / 20)


def test_correlations_of_the_reference_models_with_themselves():
    # 10,000 trials per target in the exact proportions of the Weber model
    weber = (weber_matrix(range(1, 11)) * 10_000).round().astype(np.int64)
    cm = ConfusionMatrix(tuple(range(1, 11)), weber)
    assert human_correlation(cm) == pytest.approx(1.0, abs=1e-6)
    uniform = ConfusionMatrix(tuple(range(1, 11)), np.tile([0] + [7] * 20, (10, 1)))
    assert random_correlation(uniform) == pytest.approx(1.0)
    assert random_correlation(cm) < 0.5


def test_scalar_variability_by_hand():
    # sd proportional to the mean: T=2 -> {1, 3}, T=4 -> {2, 6}, T=8 -> {4, 12}: slope exactly 1
    cm = matrix({2: {1: 1, 3: 1}, 4: {2: 1, 6: 1}, 8: {4: 1, 12: 1}})
    sv = scalar_variability(cm)
    assert sv.slope == pytest.approx(1.0) and sv.points == 3
    assert sv.intercept == pytest.approx(math.log(math.sqrt(2) / 2))
    assert sv.p_slope_is_1 == 1.0
    # constant sd: slope 0, and slope = 1 is rejected when the fit is tight
    flat = matrix({2: {1: 1, 3: 1}, 5: {4: 1, 6: 1}, 9: {8: 1, 10: 1}, 12: {11: 1, 13: 1}},
                  range(1, 13))  # fmt: skip
    sv = scalar_variability(flat)
    assert sv.slope == pytest.approx(0.0, abs=1e-12) and sv.p_slope_is_1 < 1e-9


@examples(200)
@given(
    scale=st.floats(0.05, 20.0),
    exponent=st.sampled_from([0.0, 0.5, 1.0, 1.5]),
    means=st.lists(st.floats(0.5, 18.0), min_size=3, max_size=8, unique=True).filter(
        lambda m: max(m) - min(m) > 0.1
    ),
)
def test_an_exact_fit_is_judged_on_its_slope_not_on_rounding_noise(scale, exponent, means):
    """sd = scale * mean^exponent exactly: the fit is exact whatever the BLAS, so p is 1 for
    slope 1 and 0 for any other slope (never an arbitrary value from noise / noise)."""
    cm = ConfusionMatrix((1,), np.zeros((1, 21), dtype=int))  # replaced by the moments below
    moments = [(i + 1, 2, m, scale * m**exponent) for i, m in enumerate(sorted(means))]
    import numerate.numgen.metrics as metrics

    original = metrics.row_moments
    metrics.row_moments = lambda _cm: moments
    try:
        sv = scalar_variability(cm)
    finally:
        metrics.row_moments = original
    assert sv.slope == pytest.approx(exponent, abs=1e-9)
    assert sv.slope_se == 0.0
    assert sv.p_slope_is_1 == (1.0 if exponent == 1.0 else 0.0)


def test_a_noisy_fit_still_gets_a_t_test():
    # sd roughly proportional to the mean, with scatter: a real p-value strictly inside (0, 1)
    cm = matrix({2: {1: 1, 3: 1}, 4: {2: 1, 5: 1}, 8: {4: 1, 12: 1}, 9: {6: 1, 12: 1}})
    sv = scalar_variability(cm)
    assert sv.slope_se > 1e-6 and 0.0 < sv.p_slope_is_1 < 1.0


def test_scalar_variability_needs_three_targets_for_its_test():
    sv = scalar_variability(matrix({2: {1: 1, 3: 1}, 4: {2: 1, 6: 1}}))
    assert sv.slope == pytest.approx(1.0) and sv.p_slope_is_1 is None and sv.points == 2


def test_the_random_baseline_agrees_with_the_reference_leaderboard():
    """Reference: random row accuracy 0.04, MWE 2.293, level 0, Weber -0.019. Uniform choice of
    1..20 for targets 1..10 has expected accuracy 0.05 and MWE 2.3004 (sum by hand below);
    a 10,000-image run must sit within 4 standard errors of both, and so must the reference's
    figures for a run of the reference's size (110 images: 11 objects x 10 numbers)."""
    expected_mwe = sum(sum(abs(g - t) for g in range(1, 21)) / 20 / t for t in range(1, 11)) / 10
    assert expected_mwe == pytest.approx(2.3004, abs=1e-4)
    targets = [t for t in range(1, 11) for _ in range(1000)]
    cm = confusion_matrix(targets, random_counts(targets, seed=7), range(1, 11))
    answers, asked = np.asarray(COLUMNS[1:])[None, :], np.arange(1, 11)[:, None]
    sd_mwe = float((np.abs(answers - asked) / asked).std())  # per-image sd of |G - T| / T
    assert abs(accuracy(cm) - 0.05) < 4 * math.sqrt(0.05 * 0.95 / cm.n)
    assert abs(mean_weighted_error(cm) - expected_mwe) < 4 * sd_mwe / math.sqrt(cm.n)
    assert abs(0.04 - 0.05) < 4 * math.sqrt(0.05 * 0.95 / 110)
    assert abs(2.293 - expected_mwe) < 4 * sd_mwe / math.sqrt(110)
    assert knower_level(cm) == 0
    assert abs(human_correlation(cm)) < 0.1


def test_the_weber_observer_is_human_like_and_knows_up_to_four():
    targets = [t for t in range(1, 11) for _ in range(500)]
    cm = confusion_matrix(targets, weber_counts(targets, seed=3), range(1, 11))
    assert knower_level(cm) == 4  # exact up to 4; 5 is hit about half the time
    assert human_correlation(cm) > 0.99
    sv = scalar_variability(cm)
    assert sv.slope == pytest.approx(1.0, abs=0.25)  # scalar variability, by construction


responses = st.lists(st.tuples(st.integers(1, 10), st.integers(0, 40)), min_size=1, max_size=200)


@examples(150)
@given(responses)
def test_metric_invariants(pairs):
    targets, generated = zip(*pairs, strict=True)
    cm = confusion_matrix(targets, generated, range(1, 11))
    s = score(cm)
    assert 0.0 <= s.accuracy <= 1.0
    assert s.accuracy_ci[0] <= s.accuracy <= s.accuracy_ci[1]
    assert s.mwe >= 0.0
    assert (s.mwe == 0.0) == (s.accuracy == 1.0)
    assert 0 <= s.knower_level <= 10
    for r in (s.human_correlation, s.random_correlation):
        assert r is None or -1.0 - 1e-9 <= r <= 1.0 + 1e-9
    assert cm.counts.sum() == len(pairs)


def matrix_of(rows: dict[int, dict[int, int]], targets=range(1, 11)) -> ConfusionMatrix:
    """A confusion matrix written out: {target: {count found: images}}."""
    counts = np.zeros((len(targets), len(COLUMNS)), dtype=np.int64)
    for i, t in enumerate(targets):
        for found, images in rows.get(t, {}).items():
            counts[i, found] = images
    return ConfusionMatrix(tuple(targets), counts)


def test_a_correlation_reads_only_the_targets_with_images():
    """A mutation sweep: correlating every row, those without an image included, passed
    every test (the docstring: over the targets that have trials)."""
    cm = matrix_of({1: {1: 8, 2: 2}, 2: {2: 5, 3: 5}, 3: {2: 1, 3: 6, 4: 3}})
    reference = weber_matrix(cm.targets)
    rows = cm.counts[:3] / cm.counts[:3].sum(axis=1, keepdims=True)
    by_hand = np.corrcoef(rows.ravel(), reference[:3].ravel())[0, 1]
    assert human_correlation(cm) == pytest.approx(by_hand, abs=1e-12)


def test_scalar_variability_s_slope_test_has_k_minus_2_degrees_of_freedom():
    """A mutation sweep: k - 1 degrees of freedom passed every test. Against scipy's own
    regression of the same points."""
    from scipy import stats

    cm = matrix_of({
        2: {1: 3, 2: 10, 3: 2}, 4: {3: 4, 4: 9, 5: 4, 6: 1},
        6: {4: 2, 5: 4, 6: 8, 7: 3, 9: 1}, 9: {6: 2, 8: 5, 9: 6, 10: 4, 13: 2},
    })  # fmt: skip
    found = scalar_variability(cm)
    values = np.asarray(COLUMNS, dtype=float)
    means, sds = [], []
    for row in cm.counts[[1, 3, 5, 8]]:
        mean = (row * values).sum() / row.sum()
        means.append(mean)
        sds.append(math.sqrt((row * (values - mean) ** 2).sum() / (row.sum() - 1)))
    fit = stats.linregress(np.log(means), np.log(sds))
    p = 2 * stats.t.sf(abs((fit.slope - 1) / fit.stderr), df=len(means) - 2)
    assert (found.slope, found.p_slope_is_1) == (pytest.approx(fit.slope), pytest.approx(p))


def test_each_target_s_mean_count_is_over_its_own_images():
    """A mutation sweep: dividing by every image of the run passed every test."""
    from numerate.numgen.metrics import per_target_accuracy

    rows = per_target_accuracy(matrix_of({1: {1: 3, 2: 1}, 2: {2: 4, 3: 2, 20: 2}}))
    assert [(r["target"], r["n"], r["mean_count"]) for r in rows[:2]] == [
        (1, 4, pytest.approx(5 / 4)), (2, 8, pytest.approx((8 + 6 + 40) / 8))]  # fmt: skip


def test_a_hit_rate_of_exactly_two_thirds_rounded_is_known():
    """The knower level's rule is "at least 0.67 of a target's images": 67 of 100 passes (a
    mutation sweep: `<=` there passed every test)."""
    assert knower_level(matrix_of({1: {1: 67, 3: 33}, 2: {1: 0, 2: 10, 5: 90}})) == 1
    assert knower_level(matrix_of({1: {1: 66, 3: 34}})) == 0


def test_the_twenty_plus_column_is_no_target():
    """Targets are 1 to 19: 20 is the 20+ column, whose hits are any count from 20 up."""
    with pytest.raises(ValueError, match=r"target must be in 1\.\.19, got 20"):
        confusion_matrix([20], [20], design=range(1, 21))


def test_images_the_generator_refused_count_against_its_accuracy_only():
    """A fresh-eyes review: a hosted model that refused its hardest prompts scored higher, its
    refusals left out of every metric. They are its answers: accuracy counts them as not
    correct; the metrics that need a count (MWE, knower level, ...) are of the counted."""
    cm = matrix({1: {1: 4}, 2: {2: 4}}, range(1, 3))
    plain, refusing = score(cm), score(cm, refused=4)
    assert (plain.accuracy, refusing.accuracy) == (1.0, pytest.approx(8 / 12))
    assert refusing.accuracy_ci == pytest.approx(wilson_interval(8, 12))
    assert (refusing.n, refusing.mwe, refusing.knower_level) == (plain.n, plain.mwe, 2)
    [one, two] = per_target_accuracy(cm, {2: 4})
    assert (one["n"], one["accuracy"], two["n"], two["accuracy"]) == (4, 1.0, 8, 0.5)
    assert two["mean_count"] == 2.0  # of the counted images
    assert score(matrix({}, range(1, 3)), refused=3).accuracy == 0.0
