"""The batch scheduler, without Prefect: two batches in flight, rounds opened as they are
graded, every case asked once, and a failing batch stopping the rest."""

import asyncio

import pytest

from numerate.config.sweep import ManifoldSweep, Precision
from numerate.planning.adaptive import Sampler
from numerate.planning.plan import plan_points
from numerate.planning.scheduler import IN_FLIGHT, ask_in_batches


def planned(count=60, lengths=(2, 3)):
    entry = ManifoldSweep(manifold="objects", count=count, grid={"length": list(lengths)})
    return plan_points(entry, 1, "test")


class Endpoint:
    """Answers batches after a short delay, all correct (or `outcome`); records how many
    batches were in flight at once and every case it was asked."""

    def __init__(self, outcome="correct", fail_on=None):
        self.outcome, self.fail_on = outcome, fail_on
        self.in_flight = self.most_in_flight = 0
        self.asked, self.firsts, self.cancelled = [], [], 0

    async def ask(self, ranges, first):
        cases = [case for part in ranges for case in part.cases()]
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        self.firsts.append(first)
        try:
            if self.fail_on is not None and first == self.fail_on:
                await asyncio.sleep(0.01)
                raise OSError("endpoint went away")
            await asyncio.sleep(0.01 if self.fail_on is None else 5)
            self.asked += [c.case_id for c in cases]
            return [
                {"manifold": c.manifold, "point_key": c.point_key, "case_id": c.case_id,
                 "sample_index": 0, "outcome": self.outcome}
                for c in cases
            ]  # fmt: skip
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1


def test_a_fixed_plan_is_asked_once_in_batches_two_at_a_time():
    points = planned(count=60)
    cases = [case for point in points for case in point.cases()]
    endpoint = Endpoint()
    asked = asyncio.run(ask_in_batches(Sampler([(None, points)]), 25, endpoint.ask))
    assert asked == len(cases) == 120
    assert sorted(endpoint.asked) == sorted(c.case_id for c in cases)
    assert endpoint.most_in_flight == IN_FLIGHT == 2
    assert endpoint.firsts == [0, 25, 50, 75, 100]  # each batch's place in the model's cases


def test_adaptive_rounds_open_as_earlier_rounds_are_graded():
    precision = Precision(ci_width=0.10, min_count=20, max_count=60, step=20)
    opened = []
    endpoint = Endpoint(outcome="correct")  # a perfect model: 40 answers reach the width
    sampler = Sampler([(precision, planned(count=60))])
    asked = asyncio.run(ask_in_batches(sampler, 15, endpoint.ask, opened.append))
    assert asked == 2 * 40  # two points, each asked min_count, then one step more
    assert sum(opened) == 2 * 20  # the second rounds, opened by grading the first
    assert {stop["reason"] for stop in sampler.stops()} == {"precision"}


def test_a_failing_batch_cancels_the_one_in_flight_and_raises():
    endpoint = Endpoint(fail_on=0)
    with pytest.raises(OSError, match="went away"):
        asyncio.run(ask_in_batches(Sampler([(None, planned(count=60))]), 25, endpoint.ask))
    assert endpoint.in_flight == 0  # nothing is left running
    assert endpoint.cancelled == 1  # the batch in flight beside it was cancelled, not awaited
    assert endpoint.firsts == [0, 25]  # no batch was asked after the failure
