"""Figures of a case answered k times (`samples: k`): pass@k, majority vote, consistency.
Pure functions, one case at a time; a point's figure is their mean over its cases.

docs/statistics.md, "Several samples per case".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

__all__ = ["agrees", "majority_vote", "pass_at_k"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k answers drawn without replacement from a case's n
    answers is correct, c of them being correct: 1 - C(n - c, k) / C(n, k), the unbiased
    estimator of Chen et al. (2021), computed as their stable product.

    Args:
        n: answers of the case (scored ones), n >= 1.
        c: correct answers among them, 0 <= c <= n.
        k: answers a user would draw, 1 <= k <= n.
    """
    if n < 1 or not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def majority_vote(answers: Sequence[tuple[str | None, bool]]) -> float:
    """Whether the most common answer of a case's samples is correct (maj@k): each sample is
    (its answer as the grader read it, None when none was found; whether it was correct).

    Samples without an answer do not vote. A tie between the most common answers is broken at
    random, so the case scores the share of the tied answers that are correct (1/2 for a
    correct and a wrong answer given equally often); no answer at all scores 0.
    """
    votes = Counter(answer for answer, _ in answers if answer is not None)
    if not votes:
        return 0.0
    right = {answer for answer, correct in answers if answer is not None and correct}
    top = max(votes.values())
    leaders = [answer for answer, count in votes.items() if count == top]
    return sum(answer in right for answer in leaders) / len(leaders)


def agrees(answers: Sequence[str | None]) -> bool:
    """Whether a case's samples all gave the same answer (an answer that could not be read
    agrees with nothing)."""
    return bool(answers) and None not in answers and len(set(answers)) == 1
