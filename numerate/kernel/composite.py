"""One score per model, with its interval (docs/statistics.md, "One score").

A grid point's score is its chance-adjusted accuracy less its truncation rate,
`(accuracy - chance) / (1 - chance) - truncated / scored` (a truncated answer is wrong, as
everywhere, and its rate is taken off again: it also spent the whole budget). A manifold's
score is the mean of its points' scores, each point weighing the same (as every summary); the
model's score is the geometric mean of its manifolds' scores, each floored at FLOOR (a manifold
at or below chance would make the product 0 or undefined; the floor keeps the failure visible
without erasing every other manifold).

The 95% interval is a percentile bootstrap that resamples cases within each point, as the run
sampled them: a point's cases are drawn again with replacement, keeping how many it had, so
the interval follows the sampling design (a point's weight never depends on its count). A
case's answers go together (with `samples: k` they are not independent). Cases that answered
alike are one category, so a resample is one multinomial draw per point: exact, and as fast
for a million cases as for a hundred. A point of one category (every case answered alike)
draws cases of the other outcome as `_alike` says, and the interval always holds the score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

FLOOR = 0.01
"""The least a manifold's score counts for in the geometric mean."""
RESAMPLES = 2000
SEED = 20261128
"""The bootstrap's seed: the same run shows the same interval every time."""


@dataclass(frozen=True)
class PointCases:
    """A grid point's cases, grouped by how they were answered: `cases[i]` cases each had
    `correct[i]` correct and `truncated[i]` truncated answers of `scored[i]` scored (errors
    left out; cases whose every answer was an error are not here)."""

    manifold: str
    chance: float
    correct: Sequence[int]
    truncated: Sequence[int]
    scored: Sequence[int]
    cases: Sequence[int]

    def __post_init__(self) -> None:
        lengths = {len(self.correct), len(self.truncated), len(self.scored), len(self.cases)}
        if len(lengths) != 1:
            raise ValueError("a point's categories must have one length")
        if not 0.0 <= self.chance <= 1.0:
            raise ValueError(f"chance={self.chance}: need 0 <= chance <= 1")
        for c, t, s, k in zip(self.correct, self.truncated, self.scored, self.cases, strict=True):
            if not (s > 0 and c >= 0 and t >= 0 and c + t <= s and k > 0):
                raise ValueError(f"a case with {c} correct, {t} truncated of {s} scored ({k})")


@dataclass(frozen=True)
class Composite:
    """A model's score, its 95% interval and its manifolds' scores (before the floor)."""

    score: float
    low: float
    high: float
    manifolds: dict[str, float]
    points: int


Value = TypeVar("Value", float, np.ndarray)


def point_score(correct: Value, truncated: Value, scored: Value, chance: Value) -> Value:
    """A point's chance-adjusted accuracy less its truncation rate (of numbers, or of numpy
    arrays element by element: a resample's every point at once)."""
    return (correct / scored - chance) / (1.0 - chance) - truncated / scored


def combine(manifold_scores: Sequence[float]) -> float:
    """The geometric mean of manifold scores, each floored at FLOOR."""
    return float(_geometric(np.asarray(manifold_scores, dtype=float)))


def _geometric(scores: np.ndarray) -> np.ndarray:
    """The geometric mean over the last axis, each score floored at FLOOR."""
    return np.exp(np.log(np.maximum(scores, FLOOR)).mean(axis=-1))


def _manifold_means(points: Sequence[PointCases], scores: np.ndarray) -> dict[str, np.ndarray]:
    """Each manifold's mean of its points' scores (the last axis of `scores` is the point)."""
    names = sorted({p.manifold for p in points})
    return {
        name: scores[..., [i for i, p in enumerate(points) if p.manifold == name]].mean(axis=-1)
        for name in names
    }


CHUNK_CELLS = 4_000_000
"""The most draws (resamples x points x categories) held at once: points go in chunks."""


def _alike(
    arrays: tuple[np.ndarray, ...], chance: float, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """The resampled scores of a point whose cases were all answered alike (all right, all
    wrong: one category). Drawn again as they are, every resample is the point itself and
    the interval has no width: "1.000 [1.000, 1.000]" for 3 points of 20 cases all right,
    covering a true 0.99 in 43% of simulated runs. So each resample draws how many of its n
    cases answer otherwise from the binomial of a chance drawn from Jeffreys' Beta(1/2,
    n + 1/2): what n answers alike leave possible, mostly nothing."""
    c, t, s, k = (float(a[0]) for a in arrays)
    cases = round(k)
    other = rng.binomial(cases, rng.beta(0.5, cases + 0.5, resamples))
    opposite = s if 2 * c < s else 0.0  # a case of the other outcome: all right, or none
    same = cases - other
    each = np.ones(resamples)
    return point_score(same * c + other * opposite, same * t, each * cases * s, each * chance)


def _resampled(
    arrays: list[tuple[np.ndarray, ...]], chance: np.ndarray, resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:  # fmt: skip
    """Each point's score in each resample (resamples x points): every point's cases drawn
    again, as many as it had (a multinomial draw over its categories), points in chunks; a
    point with one category as `_alike` draws it."""
    out = np.empty((resamples, len(arrays)))
    several = [i for i, a in enumerate(arrays) if len(a[3]) > 1]
    for i in (i for i, a in enumerate(arrays) if len(a[3]) == 1):
        out[:, i] = _alike(arrays[i], float(chance[i]), resamples, rng)
    if several:
        out[:, several] = _multinomial(
            [arrays[i] for i in several], chance[several], resamples, rng
        )
    return out


def _multinomial(
    arrays: list[tuple[np.ndarray, ...]], chance: np.ndarray, resamples: int,
    rng: np.random.Generator,
) -> np.ndarray:  # fmt: skip
    """`_resampled` for points of several categories."""
    out = np.empty((resamples, len(arrays)))
    width = max(len(a[0]) for a in arrays)
    step = max(1, CHUNK_CELLS // (resamples * width))
    for start in range(0, len(arrays), step):
        chunk = arrays[start : start + step]
        counts = np.zeros((len(chunk), width, 3))  # correct, truncated, scored a category
        probabilities = np.zeros((len(chunk), width))
        for j, (c, t, s, k) in enumerate(chunk):
            counts[j, : len(c)] = np.column_stack([c, t, s])
            probabilities[j, : len(k)] = k / k.sum()
        cases = np.array([int(k.sum()) for *_, k in chunk])
        last = np.array([len(k) - 1 for *_, k in chunk])  # a point's own last category
        # the multinomial as a chain of binomials, each over every resample and point at once:
        # category i takes Bin(cases left, p_i / mass left), a point's last one all that is left
        left = np.broadcast_to(cases, (resamples, len(chunk))).copy()
        mass = np.ones(len(chunk))
        correct, truncated, scored = (np.zeros((resamples, len(chunk))) for _ in range(3))
        for i in range(width):
            ending = i >= last
            share = np.clip(probabilities[:, i] / np.where(ending, 1.0, mass), 0.0, 1.0)
            if ending.all():  # every point's remainder: nothing left to draw
                drawn = left
            else:
                drawn = np.where(ending, left, rng.binomial(left, np.where(ending, 0.0, share)))
            correct += drawn * counts[:, i, 0]
            truncated += drawn * counts[:, i, 1]
            scored += drawn * counts[:, i, 2]
            left = left - drawn
            mass = mass - probabilities[:, i]
        out[:, start : start + step] = point_score(
            correct, truncated, scored, chance[start : start + step]
        )
    return out


def composite(
    points: Sequence[PointCases], resamples: int = RESAMPLES, seed: int = SEED
) -> Composite:
    """A model's score over its points, with the percentile bootstrap's 95% interval. A point
    whose chance is 1 (the trivial strategy always right) measures nothing and is left out.

    ValueError when no point is left (no scored answer)."""
    points = [p for p in points if p.chance < 1.0]
    if not points:
        raise ValueError("no grid point with a scored answer and a chance below 1")
    arrays = [
        tuple(np.asarray(a, dtype=np.int64) for a in (p.correct, p.truncated, p.scored, p.cases))
        for p in points
    ]
    chance = np.array([p.chance for p in points])
    observed = np.array([
        point_score(float(c @ k), float(t @ k), float(s @ k), p.chance)
        for (c, t, s, k), p in zip(arrays, points, strict=True)
    ])  # fmt: skip
    resampled = _resampled(arrays, chance, resamples, np.random.default_rng(seed))
    means = {name: float(value) for name, value in _manifold_means(points, observed).items()}
    boot = np.column_stack(list(_manifold_means(points, resampled).values()))
    low, high = np.quantile(_geometric(boot), [0.025, 0.975])
    score = combine(list(means.values()))
    return Composite(
        score=score,
        low=min(float(low), score),  # points answered alike are resampled no better than
        high=max(float(high), score),  # they are (`_alike`): the score may be a bound
        manifolds=means,
        points=len(points),
    )
