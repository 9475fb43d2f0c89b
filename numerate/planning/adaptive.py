"""Adaptive sampling: ask each grid point's cases in rounds until its interval is narrow enough.

A point's cases are a deterministic sequence (a smaller count is a prefix of a larger one), so
sampling "until precise" is only a question of how long a prefix to ask. Each (model, point)
starts with `min_count` cases; when every answer of its current round is graded, `decide`
either stops it or opens the next `step` cases. Points and models move independently: a
`Sampler` hands out batches of whatever cases are open, across points, so the endpoint stays
busy while some points wait for their round to finish.

Pure: no Prefect, no I/O. See docs/statistics.md, "Adaptive sampling" for the statistics.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from numerate.config.sweep import Precision
from numerate.kernel.design import Estimate, case_clustered
from numerate.planning.plan import CaseRange, PlannedPoint
from numerate.store.rows import PointStop, ResponseRow

__all__ = ["PointKey", "PointState", "Sampler", "StopReason", "decide", "first_round"]

StopReason = Literal["precision", "max_count", "unscored"]
PointKey = tuple[str, str]
"""(manifold, point key)."""


def decide(
    accuracy: Estimate, gradable: int, answered: int, asked: int, precision: Precision
) -> tuple[StopReason | None, float]:
    """Whether a point whose `asked` cases are all answered stops, and the full width of the
    95% interval of its `accuracy` (1.0 with nothing scored): the interval its figures report
    (numerate.kernel.design.case_clustered: every answer but an error scored, truncated and
    unparsed ones as not correct, the case as the unit).

    Stops with `unscored` when fewer than `min_scored` of the answers were `gradable`, graded
    correct or wrong (truncated, unparsed and error outcomes count as spent: a point whose
    answers cannot be read has an accuracy of 0 and a narrow interval, which says nothing of
    the model's reasoning); else with `precision` when the width is at most `ci_width`; else
    with `max_count` when no case is left to ask.
    """
    width = accuracy.high - accuracy.low
    if gradable < precision.min_scored * answered:
        return "unscored", width
    if accuracy.value is not None and width <= precision.ci_width:
        return "precision", width
    if asked >= precision.max_count:
        return "max_count", width
    return None, width


def first_round(precision: Precision, stored: int) -> int:
    """Cases a point asks first: `min_count`, or, when a run resumes, what it had already
    stored (rounded up to a whole round): they are answered from the store."""
    if stored <= precision.min_count:
        return precision.min_count
    rounds = -(-(stored - precision.min_count) // precision.step)
    return min(precision.max_count, precision.min_count + rounds * precision.step)


@dataclass
class PointState:
    """One (model, grid point): how far it got, how it stopped. Its cases are generated as
    they are handed out (numerate.planning.plan.PlannedPoint)."""

    point: PlannedPoint
    precision: Precision | None
    samples: int
    asked: int = 0
    answered: int = 0
    gradable: int = 0
    """Answers graded correct or wrong (not truncated, unparsed or an error)."""
    width: float = 1.0
    reason: StopReason | None = None
    pending: set[tuple[str, int]] = field(default_factory=set)
    """The answers of the open round not graded yet (adaptive points only: a fixed point never
    decides, so it keeps none)."""
    kinds: Counter[tuple[int, int]] = field(default_factory=Counter)
    """Its cases whose every sample is graded, by (correct, scored) answers (scored: all but
    errors): a few keys, whatever the number of cases."""
    partial: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    """Cases with a sample still to grade: (correct, scored, graded) so far."""

    def add(self, case_id: str, outcome: str) -> None:
        """One graded answer of the open round."""
        self.answered += 1
        self.gradable += outcome in ("correct", "wrong")
        correct, scored, graded = self.partial.pop(case_id, (0, 0, 0))
        case = (correct + (outcome == "correct"), scored + (outcome != "error"), graded + 1)
        if case[2] < self.samples:
            self.partial[case_id] = case
        else:
            self.kinds[case[:2]] += 1

    @property
    def accuracy(self) -> Estimate:
        """The accuracy of its cases graded so far, as its figures report it."""
        return case_clustered((c, s, w) for (c, s), w in self.kinds.items())


class Sampler:
    """The cases one model still has to answer, handed out in batches across points.

    Fixed entries (`precision` None) open all their cases at once and never stop early;
    adaptive ones open a round at a time (see `decide`). What is open is kept as ranges of a
    point's cases, generated a batch at a time by `take`: the memory a sampler holds follows
    its points and the rounds open, not the cases of the sweep.
    """

    def __init__(
        self,
        entries: Iterable[tuple[Precision | None, Sequence[PlannedPoint]]],
        samples: int = 1,
        stored: Mapping[PointKey, int] | None = None,
    ) -> None:
        self.points: dict[PointKey, PointState] = {}
        self.queue: deque[tuple[PointState, int, int]] = deque()
        self.opened = 0
        for precision, points in entries:
            for point in points:
                state = PointState(point, precision, samples)
                self.points[point.manifold, point.key] = state
                upto = (
                    point.count
                    if precision is None
                    else first_round(precision, (stored or {}).get((point.manifold, point.key), 0))
                )
                self._open(state, upto)

    def _open(self, state: PointState, upto: int) -> None:
        upto = min(upto, state.point.count)
        if upto > state.asked:
            self.queue.append((state, state.asked, upto))
            self.opened += upto - state.asked
            state.asked = upto

    def take(self, size: int) -> list[CaseRange]:
        """Up to `size` open cases not handed out yet (fewer, or none, while rounds run), as
        ranges of their points' cases: they are made where they are asked
        (numerate.planning.plan.made_cases: read back when stored, else generated)."""
        taken: list[CaseRange] = []
        count = 0
        while self.queue and count < size:
            state, start, stop = self.queue.popleft()
            end = min(stop, start + size - count)
            if end < stop:
                self.queue.appendleft((state, end, stop))
            part = CaseRange(state.point, start, end)
            if state.precision is not None:
                state.pending.update((i, s) for i in part.case_ids() for s in range(state.samples))
            taken.append(part)
            count += len(part)
        return taken

    def graded(self, rows: Iterable[ResponseRow]) -> int:
        """Take graded responses (`manifold`, `point_key`, `case_id`, `sample_index`,
        `outcome`); decide each adaptive point whose round is complete. Returns the cases
        opened."""
        before = self.opened
        touched = set()
        for row in rows:
            key = (row["manifold"], row["point_key"])
            state = self.points.get(key)
            if state is None or (row["case_id"], row["sample_index"]) not in state.pending:
                continue
            state.pending.discard((row["case_id"], row["sample_index"]))
            state.add(row["case_id"], row["outcome"])
            touched.add(key)
        for key in touched:
            self._settle(self.points[key])
        return self.opened - before

    def _settle(self, state: PointState) -> None:
        if state.pending or state.reason is not None or state.precision is None:
            return
        if any(queued is state for queued, _, _ in self.queue):
            return  # part of the round is not handed out yet
        reason, state.width = decide(
            state.accuracy, state.gradable, state.answered, state.asked, state.precision
        )
        if reason is None:
            self._open(state, min(state.asked + state.precision.step, state.precision.max_count))
        state.reason = reason

    @property
    def open_points(self) -> int:
        """Adaptive points that have not stopped."""
        return sum(1 for s in self.points.values() if s.precision and s.reason is None)

    def stops(self) -> list[PointStop]:
        """A row per adaptive point that stopped: manifold, point_key, asked, reason, width."""
        return [
            {"manifold": key[0], "point_key": key[1], "asked": state.asked,
             "reason": state.reason, "width": state.width}
            for key, state in self.points.items()
            if state.precision is not None and state.reason is not None
        ]  # fmt: skip
