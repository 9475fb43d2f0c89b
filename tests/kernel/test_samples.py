import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.kernel.samples import agrees, majority_vote, pass_at_k


def by_enumeration(n: int, c: int, k: int) -> float:
    """pass@k by its definition: the share of k-subsets of the n answers with a correct one."""
    answers = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(answers[i] for i in subset) for subset in subsets) / len(subsets)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 0, 1, 0.0),
        (5, 1, 1, 0.2),  # pass@1 is the share of correct answers
        (5, 2, 5, 1.0),  # all five drawn: any correct one counts
        (10, 3, 2, 1 - math.comb(7, 2) / math.comb(10, 2)),  # 1 - 21/45 = 8/15
        (4, 1, 2, 0.5),
        (10, 10, 3, 1.0),
    ],
)
def test_pass_at_k_by_hand(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@given(
    st.integers(1, 10).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
    )
)
def test_pass_at_k_is_the_closed_form_and_the_definition(args):
    n, c, k = args
    closed = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(closed, abs=1e-12)
    assert pass_at_k(n, c, k) == pytest.approx(by_enumeration(n, c, k), abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (3, 4, 1), (3, 1, 0), (3, 1, 4)])
def test_pass_at_k_refuses_impossible_counts(n, c, k):
    with pytest.raises(ValueError, match=f"n={n}, c={c}, k={k}"):
        pass_at_k(n, c, k)


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        ([("7", True), ("7", True), ("8", False)], 1.0),
        ([("8", False), ("8", False), ("7", True)], 0.0),
        ([("7", True), ("8", False)], 0.5),  # a tie is broken at random
        ([("7", True), ("8", False), ("9", False)], 1 / 3),
        ([(None, False), (None, False), ("7", True)], 1.0),  # unread answers do not vote
        ([(None, False), (None, False)], 0.0),
    ],
)
def test_majority_vote(answers, expected):
    assert majority_vote(answers) == pytest.approx(expected)


def test_agreement():
    assert agrees(["7", "7", "7"])
    assert not agrees(["7", "8", "7"])
    assert not agrees(["7", None])
    assert not agrees([])
