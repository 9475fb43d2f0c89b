"""NumGen metrics: pure functions of (target, generated) pairs or of their confusion matrix.

Conventions (docs/numgen.md, "NumGen metrics", defines each metric in full):
- targets are 1..19; generated counts are 0..20, where 20 stands for "20 or more" (a count
  above 20 is recorded as 20+). 0 is a valid answer: the image holds none of the objects.
- the confusion matrix has one row per target of the design (n_min..n_max) and 21 columns,
  generated = 0, 1, ..., 19, 20+.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from numerate.kernel.stats import wilson_interval
from numerate.numgen.rows import ScoresRow, TargetRow

MAX_COUNT = 20
"""The last column of the confusion matrix: 20 or more."""
COLUMNS = tuple(range(MAX_COUNT + 1))
WEBER_FRACTION = 0.15
"""The human Weber fraction of the reference's estimation model."""
SUBITIZING_LIMIT = 4
"""Humans name 1..4 objects exactly (subitizing); the Weber model starts at 5."""
KNOWER_HIT_RATE = 0.67
"""An n-knower gives n when asked for n at least this often ..."""
KNOWER_FALSE_RATIO = 0.5
"""... and gives n for other targets at most this fraction as often."""
FIT_TOLERANCE = 1e-9
"""Relative size below which a regression's residuals are rounding noise (an exact fit)."""


def cap(count: int) -> int:
    """A detector's count as the matrix records it: above 20 becomes 20 (20+)."""
    if count < 0:
        raise ValueError(f"generated count must be >= 0, got {count}")
    return min(int(count), MAX_COUNT)


@dataclass(frozen=True)
class ConfusionMatrix:
    """Counts of generated numerosities (columns 0..20+) for each target (rows)."""

    targets: tuple[int, ...]
    counts: np.ndarray  # shape (len(targets), 21), integer counts

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    def row(self, target: int) -> np.ndarray:
        return self.counts[self.targets.index(target)]

    def probabilities(self) -> np.ndarray:
        """Each row divided by its total (a row without trials stays 0)."""
        totals = self.counts.sum(axis=1, keepdims=True)
        return np.divide(self.counts, totals, out=np.zeros(self.counts.shape), where=totals > 0)


def confusion_matrix(
    targets: Sequence[int], generated: Sequence[int], design: Iterable[int] | None = None
) -> ConfusionMatrix:
    """Count (target, generated) pairs.

    Args:
        targets: the number asked for, per image (1..19).
        generated: the number found, per image (>= 0; above 20 counts as 20+).
        design: the targets that make the rows (default: 1..max(targets), at least 1..10).
    """
    if len(targets) != len(generated):
        raise ValueError(
            f"targets and generated differ in length: {len(targets)} != {len(generated)}"
        )
    return counted_matrix(Counter(zip(targets, generated, strict=True)), design)


def counted_matrix(
    pairs: Mapping[tuple[int, int], int], design: Iterable[int] | None = None
) -> ConfusionMatrix:
    """The confusion matrix of (target, generated) pairs, each with how many times it was
    seen (a file of millions of responses is held as its few distinct pairs); `design` as
    for `confusion_matrix`."""
    targets = {t for t, _ in pairs}
    rows = tuple(design) if design is not None else tuple(range(1, max([10, *targets]) + 1))
    for t in rows:
        if not 1 <= t < MAX_COUNT:
            raise ValueError(f"target must be in 1..{MAX_COUNT - 1}, got {t}")
    counts = np.zeros((len(rows), len(COLUMNS)), dtype=np.int64)
    index = {t: i for i, t in enumerate(rows)}
    for (t, g), seen in pairs.items():
        if t not in index:
            raise ValueError(f"target must be one of {rows[0]}..{rows[-1]}, got {t}")
        counts[index[t], cap(g)] += seen
    return ConfusionMatrix(rows, counts)


def _target_and_generated(cm: ConfusionMatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Broadcast grids of target, generated and count for cell-wise sums."""
    t = np.asarray(cm.targets, dtype=float)[:, None]
    g = np.asarray(COLUMNS, dtype=float)[None, :]
    return t, g, cm.counts.astype(float)


def hits(cm: ConfusionMatrix) -> int:
    """Images with exactly the target count."""
    return sum(int(cm.counts[i, t]) for i, t in enumerate(cm.targets))


def accuracy(cm: ConfusionMatrix, refused: int = 0) -> float | None:
    """Share of images with exactly the target count, of those counted and the `refused` ones
    (not correct: see `score`); None without images."""
    asked = cm.n + refused
    return hits(cm) / asked if asked else None


def mean_weighted_error(cm: ConfusionMatrix) -> float | None:
    """MWE = mean(|G - T| / T). 0 enters as 0 (error 1); 20+ enters as 20, a lower bound."""
    if cm.n == 0:
        return None
    t, g, w = _target_and_generated(cm)
    return float((w * np.abs(g - t) / t).sum() / cm.n)


def knower_level(cm: ConfusionMatrix) -> int:
    """The largest n such that every k = 1..n passes both criteria (Le Corre & Carey, 2007):
    P(G = k | T = k) >= 0.67, and P(G = k | T != k) <= 0.5 * P(G = k | T = k), where
    P(G = k | T != k) pools every trial of the other targets. 0 when k = 1 fails; a k that is
    not in the design, or has no trials, ends the run of levels.
    """
    level = 0
    totals = cm.counts.sum(axis=1)
    for k in range(1, MAX_COUNT):
        if k not in cm.targets:
            break
        i = cm.targets.index(k)
        if totals[i] == 0:
            break
        hit = cm.counts[i, k] / totals[i]
        others = totals.sum() - totals[i]
        false = (cm.counts[:, k].sum() - cm.counts[i, k]) / others if others else 0.0
        if hit < KNOWER_HIT_RATE or false > KNOWER_FALSE_RATIO * hit:
            break
        level = k
    return level


def _normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def weber_matrix(targets: Sequence[int], w: float = WEBER_FRACTION) -> np.ndarray:
    """P(G = g | T = t) of the human estimation model, computed exactly (no sampling): t <= 4
    is named exactly; t >= 5 is a normal with mean t and sd w * t, rounded to the nearest
    integer and truncated to 1..20 (renormalised). Rows follow `targets`, columns 0..20."""
    if w <= 0:
        raise ValueError(f"Weber fraction must be > 0, got {w}")
    matrix = np.zeros((len(targets), len(COLUMNS)))
    for i, t in enumerate(targets):
        if t <= SUBITIZING_LIMIT:
            matrix[i, t] = 1.0
            continue
        sd = w * t
        for g in range(1, MAX_COUNT + 1):
            matrix[i, g] = _normal_cdf((g + 0.5 - t) / sd) - _normal_cdf((g - 0.5 - t) / sd)
        matrix[i] /= matrix[i].sum()
    return matrix


def uniform_matrix(targets: Sequence[int]) -> np.ndarray:
    """P(G = g | T = t) of a uniform random choice of 1..20, whatever the target."""
    matrix = np.zeros((len(targets), len(COLUMNS)))
    matrix[:, 1:] = 1.0 / MAX_COUNT
    return matrix


def matrix_correlation(cm: ConfusionMatrix, reference: np.ndarray) -> float | None:
    """Pearson correlation between the row-normalised confusion matrix and a reference matrix
    of the same shape, over every cell (columns 0..20+) of the targets that have trials.
    None when undefined (no trials, or one of the two is constant)."""
    has_trials = cm.counts.sum(axis=1) > 0
    if not has_trials.any():
        return None
    a = cm.probabilities()[has_trials].ravel()
    b = np.asarray(reference, dtype=float)[has_trials].ravel()
    if a.std() == 0 or b.std() == 0:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def human_correlation(cm: ConfusionMatrix, w: float = WEBER_FRACTION) -> float | None:
    """Likeness to human estimation without counting: correlation with `weber_matrix`."""
    return matrix_correlation(cm, weber_matrix(cm.targets, w))


def random_correlation(cm: ConfusionMatrix) -> float | None:
    """Correlation with a uniform random choice of 1..20 (`uniform_matrix`)."""
    return matrix_correlation(cm, uniform_matrix(cm.targets))


@dataclass(frozen=True)
class ScalarVariability:
    """log(sd) = intercept + slope * log(mean) over targets; scalar variability is slope = 1."""

    slope: float | None
    intercept: float | None
    r_squared: float | None
    slope_se: float | None
    p_slope_is_1: float | None
    """Two-sided p-value of the t-test of slope = 1 (df = points - 2)."""
    points: int
    """Targets that entered the fit (at least 2 trials, mean > 0 and sd > 0)."""

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "slope": self.slope,
            "intercept": self.intercept,
            "r_squared": self.r_squared,
            "slope_se": self.slope_se,
            "p_slope_is_1": self.p_slope_is_1,
            "points": self.points,
        }


def row_moments(cm: ConfusionMatrix) -> list[tuple[int, int, float, float]]:
    """(target, trials, mean, sample sd) of the generated counts, 20+ as 20, per target with
    at least 2 trials."""
    moments = []
    values = np.asarray(COLUMNS, dtype=float)
    for i, t in enumerate(cm.targets):
        w = cm.counts[i].astype(float)
        k = w.sum()
        if k < 2:
            continue
        mean = float((w * values).sum() / k)
        var = float((w * (values - mean) ** 2).sum() / (k - 1))
        moments.append((t, int(k), mean, math.sqrt(var)))
    return moments


def scalar_variability(cm: ConfusionMatrix) -> ScalarVariability:
    """Regression of log sd on log mean of the generated counts across targets (natural logs,
    ordinary least squares), with the t-test of slope = 1. Fields are None with fewer than
    3 usable targets (2 for the slope without its test)."""
    from scipy import stats

    points = [(m, s) for _, _, m, s in row_moments(cm) if m > 0 and s > 0]
    k = len(points)
    if k < 2:
        return ScalarVariability(None, None, None, None, None, k)
    x = np.log([m for m, _ in points])
    y = np.log([s for _, s in points])
    if np.ptp(x) == 0:
        return ScalarVariability(None, None, None, None, None, k)
    slope, intercept = np.polyfit(x, y, 1)
    fitted = intercept + slope * x
    ss_res = float(((y - fitted) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r_squared = 1.0 - ss_res / ss_tot if ss_tot > 0 else None
    if k < 3:
        return ScalarVariability(float(slope), float(intercept), r_squared, None, None, k)
    # Residuals at the level of floating-point rounding mean an exact fit: their size is
    # noise (it differs between BLAS builds), so the t statistic would be noise divided by
    # noise. Treat such a fit as exact and compare the slope with 1 within the same tolerance.
    noise = FIT_TOLERANCE * max(1.0, float(np.abs(y).max()))
    if math.sqrt(ss_res / (k - 2)) <= noise:
        slope, se = float(slope), 0.0
        p = 1.0 if abs(slope - 1) <= FIT_TOLERANCE else 0.0
    else:
        se = math.sqrt(ss_res / (k - 2) / float(((x - x.mean()) ** 2).sum()))
        p = float(2 * stats.t.sf(abs((slope - 1) / se), df=k - 2))
    return ScalarVariability(float(slope), float(intercept), r_squared, se, p, k)


@dataclass(frozen=True)
class NumGenScores:
    """Every NumGen metric of one confusion matrix."""

    n: int
    accuracy: float | None
    accuracy_ci: tuple[float, float]
    mwe: float | None
    knower_level: int
    human_correlation: float | None
    random_correlation: float | None
    scalar_variability: ScalarVariability
    zero_rate: float | None
    """Share of images in which no object was found."""
    overflow_rate: float | None
    """Share of images counted 20+."""

    def as_dict(self) -> dict[str, object]:
        return {
            "n": self.n,
            "accuracy": self.accuracy,
            "accuracy_ci_low": self.accuracy_ci[0],
            "accuracy_ci_high": self.accuracy_ci[1],
            "mwe": self.mwe,
            "knower_level": self.knower_level,
            "human_correlation": self.human_correlation,
            "random_correlation": self.random_correlation,
            "scalar_variability": self.scalar_variability.as_dict(),
            "zero_rate": self.zero_rate,
            "overflow_rate": self.overflow_rate,
        }

    def as_row(self) -> ScoresRow:
        """The metrics flat, named as the columns of `numgen_metrics`."""
        sv = self.scalar_variability
        return {
            "n": self.n,
            "accuracy": self.accuracy,
            "ci_low": self.accuracy_ci[0],
            "ci_high": self.accuracy_ci[1],
            "mwe": self.mwe,
            "knower_level": self.knower_level,
            "human_correlation": self.human_correlation,
            "random_correlation": self.random_correlation,
            "sv_slope": sv.slope,
            "sv_intercept": sv.intercept,
            "sv_r_squared": sv.r_squared,
            "sv_slope_se": sv.slope_se,
            "sv_p_slope_is_1": sv.p_slope_is_1,
            "sv_points": sv.points,
            "zero_rate": self.zero_rate,
            "overflow_rate": self.overflow_rate,
        }


def score(cm: ConfusionMatrix, refused: int = 0) -> NumGenScores:
    """All metrics of a confusion matrix. `refused`: images the generator's service declined
    to make, which accuracy counts as not correct (a refusal is the generator's answer, as an
    unparsed answer is a model's in a sweep: a generator that refuses its hardest prompts
    must not score higher for it); every other metric needs a count, so is of the counted."""
    n = cm.n
    return NumGenScores(
        n=n,
        accuracy=accuracy(cm, refused),
        accuracy_ci=wilson_interval(hits(cm), n + refused),
        mwe=mean_weighted_error(cm),
        knower_level=knower_level(cm),
        human_correlation=human_correlation(cm),
        random_correlation=random_correlation(cm),
        scalar_variability=scalar_variability(cm),
        zero_rate=float(cm.counts[:, 0].sum() / n) if n else None,
        overflow_rate=float(cm.counts[:, MAX_COUNT].sum() / n) if n else None,
    )


def per_target_accuracy(
    cm: ConfusionMatrix, refused: Mapping[int, int] | None = None
) -> list[TargetRow]:
    """Accuracy with its 95% Wilson interval for each target (detector calibration uses it),
    over its counted images and those the generator refused (`refused`: by target; not
    correct, as in `score`); its mean count over the counted."""
    rows: list[TargetRow] = []
    for i, t in enumerate(cm.targets):
        counted = int(cm.counts[i].sum())
        total = counted + (refused or {}).get(t, 0)
        hits = int(cm.counts[i, t])
        low, high = wilson_interval(hits, total)
        rows.append(
            {
                "target": t,
                "n": total,
                "correct": hits,
                "accuracy": hits / total if total else None,
                "ci_low": low,
                "ci_high": high,
                "mean_count": float((cm.counts[i] * np.asarray(COLUMNS)).sum() / counted)
                if counted
                else None,
            }
        )
    return rows
