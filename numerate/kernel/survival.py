"""Kaplan-Meier survival curves: the share of cases still without an answer as tokens grow,
a truncated answer censored at its token count. Pure: numbers in, numbers out.

The variance is Greenwood's; the 95% interval of each point is the log-log one (it stays
within 0..1); the median's interval is where those bands cross one half (the band method:
the lower limit where the lower band falls to 0.5 or below, the upper limit where the upper
band does; None when it never does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from numerate.kernel.stats import Z_95


@dataclass(frozen=True)
class SurvivalCurve:
    """A Kaplan-Meier curve: at each time an event happened, the number at risk just before,
    the events then, the survival just after, its Greenwood standard error and 95% band."""

    times: tuple[float, ...]
    at_risk: tuple[int, ...]
    events: tuple[int, ...]
    survival: tuple[float, ...]
    se: tuple[float | None, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    n: int
    censored: int

    def _first_at_or_below(self, values: Sequence[float]) -> float | None:
        return next((t for t, s in zip(self.times, values, strict=True) if s <= 0.5), None)

    @property
    def median(self) -> float | None:
        """The first time the survival is 0.5 or below (None: it never falls that far)."""
        return self._first_at_or_below(self.survival)

    @property
    def median_interval(self) -> tuple[float | None, float | None]:
        """The median's 95% interval from the band: from the first time the lower band is 0.5
        or below to the first time the upper band is (None: a limit the data cannot place)."""
        return self._first_at_or_below(self.low), self._first_at_or_below(self.high)


def kaplan_meier(
    times: Sequence[float], observed: Sequence[bool], z: float = Z_95
) -> SurvivalCurve:
    """The Kaplan-Meier estimate of `times` (event or censoring times), `observed[i]` true
    when subject i's event was seen (false: censored then). At a time with both, the events
    come first (a subject censored at t was at risk at t), as is the convention."""
    if len(times) != len(observed):
        raise ValueError(f"{len(times)} times but {len(observed)} event flags")
    if any(not math.isfinite(t) or t < 0 for t in times):
        raise ValueError("times must be finite and 0 or more")
    pairs = sorted(zip(times, observed, strict=True))
    at_risk = len(pairs)
    survival, greenwood = 1.0, 0.0
    rows: list[tuple[float, int, int, float, float | None, float, float]] = []
    index = 0
    while index < len(pairs):
        time, end = pairs[index][0], index
        while end < len(pairs) and pairs[end][0] == time:
            end += 1
        same = [seen for _, seen in pairs[index:end]]
        died = sum(same)
        if died:
            survival *= 1 - died / at_risk
            greenwood = (
                greenwood + died / (at_risk * (at_risk - died)) if at_risk > died else math.inf
            )
            se = survival * math.sqrt(greenwood) if math.isfinite(greenwood) else None
            low, high = _log_log_band(survival, greenwood, z)
            rows.append((time, at_risk, died, survival, se, low, high))
        at_risk -= len(same)
        index += len(same)
    columns = list(zip(*rows, strict=True)) if rows else [()] * 7
    return SurvivalCurve(
        tuple(columns[0]), tuple(columns[1]), tuple(columns[2]), tuple(columns[3]),
        tuple(columns[4]), tuple(columns[5]), tuple(columns[6]),
        len(pairs), sum(1 for _, seen in pairs if not seen),
    )  # fmt: skip


def _log_log_band(survival: float, greenwood: float, z: float) -> tuple[float, float]:
    """The log-log 95% interval of a survival estimate (0 and 1 at the ends it cannot leave)."""
    if survival <= 0 or not math.isfinite(greenwood):
        return 0.0, 0.0 if survival <= 0 else 1.0
    if survival >= 1:
        return 1.0, 1.0
    log_s = math.log(survival)
    spread = z * math.sqrt(greenwood) / abs(log_s)
    return survival ** math.exp(spread), survival ** math.exp(-spread)
