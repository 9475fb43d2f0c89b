"""How far two counters agree on the same images: exact agreement with its Wilson interval, the
confusion matrix of one counter against the other, Cohen's weighted kappa on the counts, and
the images on which they differ most. Pure: counts in, figures out.

Counts are compared as the confusion matrix records them (0..19, and 20 for 20 or more); an
image that either counter left without a count (an error, an unreadable answer) is left out
of every figure and counted in `uncounted`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from numerate.kernel.stats import wilson_interval
from numerate.numgen.metrics import COLUMNS, cap


@dataclass(frozen=True)
class Agreement:
    """Two counters on the same images."""

    n: int
    """Images both counted."""
    agreed: int
    """Images on which both gave the same count."""
    ci_low: float
    ci_high: float
    kappa: float | None
    """Cohen's kappa with quadratic weights on the counts (None when it is undefined: every
    image given one and the same count by both, or no image)."""
    matrix: np.ndarray
    """matrix[a, b]: images counted `a` by the first counter and `b` by the second (21 x 21:
    0..19 and 20+)."""
    uncounted: int
    """Images left out: one counter or both gave no count."""

    @property
    def rate(self) -> float | None:
        """The share of images counted alike (None without an image)."""
        return self.agreed / self.n if self.n else None

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "n": self.n,
            "agreed": self.agreed,
            "agreement": self.rate,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "kappa": self.kappa,
            "uncounted": self.uncounted,
        }


def weighted_kappa(matrix: np.ndarray) -> float | None:
    """Cohen's (1968) weighted kappa of a square agreement matrix with quadratic disagreement
    weights (i - j)^2: 1 - sum(w * observed) / sum(w * expected), where `expected` is the outer
    product of the margins over n. None when no disagreement is expected (all counts in one
    category, or an empty matrix): kappa is 0/0 there."""
    total = matrix.sum()
    if total == 0:
        return None
    size = matrix.shape[0]
    index = np.arange(size)
    weights = (index[:, None] - index[None, :]) ** 2
    expected = np.outer(matrix.sum(axis=1), matrix.sum(axis=0)) / total
    expected_disagreement = float((weights * expected).sum())
    if expected_disagreement == 0:
        return None
    return 1.0 - float((weights * matrix).sum()) / expected_disagreement


def agreement(first: Sequence[int | None], second: Sequence[int | None]) -> Agreement:
    """Agreement of two counters' counts of the same images, in the same order."""
    if len(first) != len(second):
        raise ValueError(f"{len(first)} counts against {len(second)}: not the same images")
    matrix = np.zeros((len(COLUMNS), len(COLUMNS)), dtype=np.int64)
    uncounted = 0
    for a, b in zip(first, second, strict=True):
        if a is None or b is None:
            uncounted += 1
            continue
        matrix[cap(a), cap(b)] += 1
    n = int(matrix.sum())
    agreed = int(np.trace(matrix))
    low, high = wilson_interval(agreed, n)
    return Agreement(n, agreed, low, high, weighted_kappa(matrix), matrix, uncounted)


def most_apart(
    keys: Sequence[str], first: Sequence[int | None], second: Sequence[int | None], limit: int = 10
) -> list[tuple[str, int, int]]:
    """The images on which the counters differ most: (key, first count, second count), the
    largest difference first (ties in the order given), at most `limit`; counted alike, or
    not counted by one of them, never."""
    apart = [
        (key, cap(a), cap(b))
        for key, a, b in zip(keys, first, second, strict=True)
        if a is not None and b is not None and cap(a) != cap(b)
    ]
    apart.sort(key=lambda item: -abs(item[1] - item[2]))
    return apart[:limit]
