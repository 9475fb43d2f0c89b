"""Accuracy that means the same under every sampling design. Pure functions.

A grid point's accuracy is a ratio over its scored answers; with `samples: k` a case gives k
answers that are not independent, so the point's standard error treats the case as the unit
(a cluster-robust, "CR0", variance). A summary over several points (a manifold, or `*`) is
the mean of the points' accuracies, each point weighing the same whatever number of cases a
fixed count or an adaptive rule gave it, with the variance of that mean: the points are
strata, sampled independently.

Every interval is a Wilson score interval with an effective sample size (Korn & Graubard
1998): the estimate's variance turned into the number of independent answers that would give
it, p(1 - p) / variance, capped at what its answers are worth: at a point its answers, over
the design effect of several samples a case; for a mean over points, the points' own summed
(the answers scored, with one sample a case). The cap keeps an interval from claiming more
precision than its answers would give as one simple random sample (it never binds with one
sample per case at a single point; with equal counts per point the summary interval is the
Wilson interval of the pooled counts, or a wider one where a point drawn toward the mean has
more variance than its own: `point_mean`). Wilson rather than Wald keeps the interval inside
[0, 1] and honest near 0 and 1, where a Wald interval collapses. docs/statistics.md, "How
summaries weigh grid points".

With several samples a case, how alike a case's answers are (their intraclass correlation)
is read from the answers of the rarer outcome; where there are none (every answer right, or
every one wrong) nothing is known of it, so the design effect assumes the worst (a case's
answers all alike: the cases are counted) and the answers of the rarer outcome move it
towards what they show (`case_clustered`). docs/statistics.md, "Several samples per case".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from numerate.kernel.stats import Z_95, wilson_bounds

__all__ = [
    "Estimate", "as_stored", "binomial", "case_clustered", "effective_size", "point_mean",
    "toward_mean",
]  # fmt: skip


@dataclass(frozen=True)
class Estimate:
    """An accuracy with its standard error and 95% interval; `value` is None with nothing
    scored (then the interval is (0, 1) and the standard error None)."""

    value: float | None
    se: float | None
    low: float
    high: float
    scored: int
    """Answers behind the estimate."""
    effective: float
    """The effective sample size of its interval: the independent answers it is worth (at
    most `scored`; the cases, where every answer of several samples a case agrees)."""


NOTHING = Estimate(None, None, 0.0, 1.0, 0, 0.0)

PRIOR_ANSWERS = 1.0
"""How many answers of the rarer outcome the assumption that a case's answers are all alike
weighs (`case_clustered`). At 1, 20 cases x 10 samples all right give the 20 cases' interval
[0.839, 1], and with one wrong answer [0.896, 0.9999] (cases counted in neither: [0.981, 1]
and [0.972, 0.9999]); coverage of the truth at least 0.92 in every profile simulated
(docs/statistics.md, "Several samples per case"), at up to three times the width where the
answers are in fact independent and almost all right (20 x 10 at 0.99: 0.033 -> 0.100)."""


def effective_size(estimate: float, variance: float, cap: float) -> float:
    """The independent answers that would give `estimate` its `variance`, p(1 - p) / variance,
    at most `cap` (and exactly `cap` where the variance says nothing: 0, or an estimate of 0
    or 1)."""
    if variance > 0.0 and 0.0 < estimate < 1.0:
        return min(cap, estimate * (1.0 - estimate) / variance)
    return cap


def case_clustered(cases: Iterable[tuple[int, int, int]], z: float = Z_95) -> Estimate:
    """A grid point's accuracy from its cases, each with its correct and scored answers over
    its samples: the ratio of all correct to all scored answers, with a standard error that
    treats the case as the unit, p(1 - p) x design effect / answers (`_design_effect`). With
    one sample per case it is the binomial p(1 - p) / n and the interval the plain Wilson
    interval.

    Args:
        cases: (correct answers, scored answers, how many cases had them): cases alike are
            given once, with their number (a point's million cases are a few such rows);
            cases with nothing scored add nothing.
    """
    kinds = list(cases)
    if any(not 0 <= c <= s or w < 0 for c, s, w in kinds):
        raise ValueError("need 0 <= correct <= scored for every case, and a count >= 0")
    scored = sum(s * w for _, s, w in kinds)
    if scored == 0:
        return NOTHING
    correct = sum(c * w for c, _, w in kinds)
    p = correct / scored
    effective = scored / _design_effect(kinds, scored, correct)
    variance = p * (1.0 - p) / effective
    low, high = wilson_bounds(p, effective, z)
    return Estimate(p, math.sqrt(variance), low, high, scored, effective)


def _design_effect(kinds: Sequence[tuple[int, int, int]], scored: int, correct: int) -> float:
    """1 + (m - 1) rho: m the cases' mean size (Kish's, sum s^2 / sum s: the samples a case
    where all were scored), rho how alike a case's answers are. rho is read from the
    cluster-robust (CR0) variance, (deff - 1) / (m - 1) at least 0, where deff is that
    variance over the binomial one; it is shrunk towards 1 (all alike) with the weight of
    PRIOR_ANSWERS against the x answers of the rarer outcome: (x rho + prior) / (x + prior).
    With every answer right, or every one wrong, x is 0 and the cases are counted; as wrong
    answers come, the design effect moves to the cluster-robust one, continuously."""
    size = sum(w * s * s for _, s, w in kinds) / scored
    if size <= 1.0:  # one answer a case: independent answers
        return 1.0
    p = correct / scored
    rarer = min(correct, scored - correct)
    rho = 0.0
    if rarer:
        variance = sum(w * (c - p * s) ** 2 for c, s, w in kinds) / (scored * scored)
        rho = max(0.0, (variance / (p * (1.0 - p) / scored) - 1.0) / (size - 1.0))
    shrunk = (rarer * rho + PRIOR_ANSWERS) / (rarer + PRIOR_ANSWERS)
    return 1.0 + (size - 1.0) * shrunk


TOWARD_MEAN_ANSWERS = 20.0
"""How many answers' worth a point's accuracy is drawn toward the mean over points, for the
variance of that mean (`toward_mean`)."""


def toward_mean(share: float, answers: float, mean: float) -> float:
    """A point's `share` (of its `answers`) drawn toward the `mean` over its points with the
    weight of TOWARD_MEAN_ANSWERS answers: the accuracy its variance is taken at in a mean
    over points. A point of 5 answers all right has a variance of 0 at its own accuracy, and
    beside one of 400 would weigh half the mean at no cost (such summaries covered their
    truth in 37% of simulated runs); drawn toward the mean it has the variance of 5 answers
    near it. A point of 400 answers hardly moves (5%)."""
    return (answers * share + TOWARD_MEAN_ANSWERS * mean) / (answers + TOWARD_MEAN_ANSWERS)


def _spread(value: float, answers: float, mean: float) -> float:
    """p(1 - p) of a point in a mean over points: at its accuracy, or at its accuracy drawn
    toward the mean (`toward_mean`) where that is larger (never smaller: a point far from
    the others keeps its own)."""
    drawn = toward_mean(value, answers, mean)
    return max(value * (1.0 - value), drawn * (1.0 - drawn))


def point_mean(points: Sequence[Estimate], z: float = Z_95) -> Estimate:
    """The mean of the points' accuracies, each point weighing the same, with the standard
    error of that mean (points are independent strata: the points' variances summed, over
    K^2). Points with nothing scored are left out of the mean (they have no accuracy).

    A point's variance is p(1 - p) over its effective size, p its accuracy or, where that
    gives more, its accuracy drawn toward the mean (`toward_mean`): a point whose answers all
    agree has a standard error of 0 however few they are. The mean's effective size is at
    most the points' own summed.
    """
    scored = [p for p in points if p.value is not None and p.effective > 0]
    if not scored:
        return NOTHING
    k = len(scored)
    mean = min(1.0, max(0.0, sum(p.value or 0.0 for p in scored) / k))
    variance = sum(_spread(p.value or 0.0, p.effective, mean) / p.effective for p in scored)
    variance /= k * k
    effective = effective_size(mean, variance, sum(p.effective for p in scored))
    low, high = wilson_bounds(mean, effective, z)
    return Estimate(mean, math.sqrt(variance), low, high, sum(p.scored for p in scored), effective)


def binomial(correct: int, n: int, z: float = Z_95) -> Estimate:
    """A proportion of n independent answers: correct / n, its binomial standard error and
    Wilson interval (case_clustered with one answer per case)."""
    if n < 0 or not 0 <= correct <= n:
        raise ValueError(f"need 0 <= correct <= n, got correct={correct}, n={n}")
    if n == 0:
        return NOTHING
    p = correct / n
    low, high = wilson_bounds(p, n, z)
    return Estimate(p, math.sqrt(p * (1 - p) / n), low, high, n, float(n))


def as_stored(value: float, se: float, scored: int, samples: int | None) -> Estimate:
    """A point's estimate from the figures stored of it (accuracy, standard error, answers
    scored, samples a case), for a mean over points (`point_mean`; the interval is left
    (0, 1)). Its effective sample size is p(1 - p) / se^2 as `case_clustered` made it; at an
    accuracy of 0 or 1, where that says nothing, the cases (answers over samples: fewer
    when some were errors, so the mean's interval errs wide)."""
    cap = scored / max(1, samples or 1)
    effective = effective_size(value, se * se, float(scored)) if 0.0 < value < 1.0 else cap
    return Estimate(value, se, 0.0, 1.0, scored, effective)
