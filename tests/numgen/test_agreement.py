"""Agreement of two counters: a worked example, and invariants over random counts."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.kernel.stats import wilson_interval
from numerate.numgen.agreement import agreement, most_apart, weighted_kappa

counts = st.lists(st.one_of(st.none(), st.integers(0, 30)), min_size=0, max_size=60)


def test_a_worked_example_by_hand():
    # pairs (first, second): (0,0) x2, (0,1), (1,1) x2, (2,1), (2,2); n = 7, 5 alike.
    # Quadratic weights: observed disagreement 1 + 1 = 2; margins 3,2,2 and 2,4,1 give an
    # expected disagreement of 54/7; kappa = 1 - 2 / (54/7) = 20/27.
    first = [0, 0, 0, 1, 1, 2, 2]
    second = [0, 0, 1, 1, 1, 1, 2]
    found = agreement(first, second)
    assert (found.n, found.agreed, found.uncounted) == (7, 5, 0)
    assert found.kappa == pytest.approx(20 / 27)
    assert (found.ci_low, found.ci_high) == pytest.approx(wilson_interval(5, 7))
    assert found.matrix[0, 1] == 1 and found.matrix[2, 1] == 1 and found.matrix.sum() == 7


def test_uncounted_images_are_left_out_and_counts_above_20_are_20_plus():
    found = agreement([3, None, 25, 4], [3, 2, 21, None])
    assert (found.n, found.agreed, found.uncounted) == (2, 2, 2)  # 25 and 21 are both 20+
    assert found.rate == 1.0


def test_kappa_is_undefined_when_nothing_could_disagree():
    assert agreement([5, 5, 5], [5, 5, 5]).kappa is None  # one category: 0 / 0
    assert agreement([], []).kappa is None
    assert agreement([], []).rate is None


def test_counts_of_other_images_are_refused():
    with pytest.raises(ValueError, match="not the same images"):
        agreement([1, 2], [1])


def test_the_images_most_apart_come_first_and_alike_ones_never():
    keys = ["a", "b", "c", "d", "e"]
    apart = most_apart(keys, [1, 5, 3, None, 30], [1, 2, 4, 7, 2], limit=3)
    assert apart == [("e", 20, 2), ("b", 5, 2), ("c", 3, 4)]


@given(counts, counts)
def test_agreement_is_symmetric_and_adds_up(first, second):
    size = min(len(first), len(second))
    first, second = first[:size], second[:size]
    one, other = agreement(first, second), agreement(second, first)
    assert (one.n, one.agreed, one.uncounted) == (other.n, other.agreed, other.uncounted)
    assert one.n + one.uncounted == size
    assert (one.matrix == other.matrix.T).all()
    if one.kappa is None:
        assert other.kappa is None
    else:
        assert one.kappa == pytest.approx(other.kappa)
        assert one.kappa <= 1 + 1e-12


@given(st.lists(st.integers(0, 20), min_size=2, max_size=50))
def test_a_counter_agrees_with_itself(values):
    found = agreement(values, values)
    assert found.rate == 1.0
    assert found.kappa is None if len(set(values)) == 1 else math.isclose(found.kappa, 1.0)


def test_weighted_kappa_of_independent_margins_is_zero():
    import numpy as np

    matrix = np.outer([1, 2, 1], [2, 1, 1])  # observed = expected: no agreement beyond chance
    assert weighted_kappa(matrix) == pytest.approx(0.0)
