"""Adaptive sampling, pure: the stopping rule, rounds across points, resuming, and the coverage
of the reported interval under optional stopping (simulated against known p)."""

import functools
import hashlib
import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.config.sweep import Precision
from numerate.kernel.design import NOTHING, binomial, case_clustered
from numerate.kernel.stats import wilson_interval
from numerate.planning.adaptive import Sampler, decide, first_round
from numerate.planning.plan import plan_points
from tests.examples import examples

PRECISION = Precision(ci_width=0.10, min_count=20, max_count=400, step=20)


def cases(count=400, lengths=(2, 3)):
    """The grid points of an objects entry (a sampler generates their cases as it hands them
    out)."""
    return list(planned_points(count, lengths))


@functools.cache
def planned_points(count, lengths):
    """Planned once per process: planning measures each point's floor on reference cases,
    which a property test's every example would pay again (the points are immutable)."""
    from numerate.config.sweep import ManifoldSweep

    entry = ManifoldSweep(manifold="objects", count=count, grid={"length": list(lengths)})
    return tuple(plan_points(entry, 1, "test"))


def taken(sampler, size):
    """The cases of a batch the sampler hands out (ranges of its points' cases), made."""
    return [case for part in sampler.take(size) for case in part.cases()]


def answer(sampler, correct_of, size=50):
    """Take batches and grade them with `correct_of(case, sample) -> outcome` until done;
    returns every (case id, sample) handed out, in order."""
    handed = []
    while batch := taken(sampler, size):
        rows = [
            {"manifold": c.manifold, "point_key": c.point_key, "case_id": c.case_id,
             "sample_index": s, "outcome": correct_of(c, s)}
            for c in batch for s in range(sampler.points[(c.manifold, c.point_key)].samples)
        ]  # fmt: skip
        handed += [(c.case_id, 0) for c in batch]
        sampler.graded(rows)
    return handed


def test_decide_stops_for_precision_max_count_and_unscored():
    assert decide(binomial(40, 40), 40, 40, 40, PRECISION)[0] == "precision"  # width 0.088
    assert decide(binomial(20, 20), 20, 20, 20, PRECISION)[0] is None  # width 0.161: go on
    assert decide(binomial(200, 400), 400, 400, 400, PRECISION)[0] == "precision"  # width 0.097
    wide = Precision(ci_width=0.01, min_count=20, max_count=100, step=20)
    assert decide(binomial(50, 100), 100, 100, 100, wide)[0] == "max_count"
    assert decide(binomial(4, 20), 9, 20, 20, PRECISION)[0] == "unscored"  # 9 of 20 < half
    assert decide(binomial(5, 20), 10, 20, 20, PRECISION)[0] is None  # 10 of 20: enough
    assert decide(NOTHING, 0, 20, 20, PRECISION) == ("unscored", 1.0)


def test_a_perfect_model_stops_early_and_a_coin_flip_goes_on():
    perfect = Sampler([(PRECISION, cases())])
    answer(perfect, lambda c, s: "correct")
    assert {state.asked for state in perfect.points.values()} == {40}
    assert {stop["reason"] for stop in perfect.stops()} == {"precision"}

    flip = Sampler([(PRECISION, cases())])
    answer(flip, lambda c, s: "correct" if zlib.crc32(c.case_id.encode()) % 2 else "wrong")
    for state in flip.points.values():
        low, high = state.accuracy.low, state.accuracy.high
        assert state.reason in ("precision", "max_count")
        assert high - low <= 0.10 or state.asked == 400
        assert state.asked > 200


def test_a_round_handed_out_in_parts_is_decided_once_all_of_it_is_graded():
    sampler = Sampler([(PRECISION, cases(lengths=(2,)))])  # a round of 20 cases
    state = sampler.points[("objects", "length=2")]

    def grade(batch):
        return sampler.graded([
            {"manifold": c.manifold, "point_key": c.point_key, "case_id": c.case_id,
             "sample_index": 0, "outcome": "correct"}
            for c in batch
        ])  # fmt: skip

    assert grade(taken(sampler, 7)) == 0  # 7 of 20 graded: too early to decide
    assert (state.reason, state.asked, state.answered) == (None, 20, 7)
    assert grade(taken(sampler, 50)) == 20  # the round's last 13: the next round opens
    assert (state.asked, state.answered) == (40, 20)


def test_fixed_entries_open_every_case_and_never_stop():
    sampler = Sampler([(None, cases(count=7))])
    assert sampler.opened == 14 and sampler.open_points == 0
    assert len(answer(sampler, lambda c, s: "wrong")) == 14
    assert sampler.stops() == []


def test_a_point_without_scorable_answers_stops_unscored():
    sampler = Sampler([(PRECISION, cases(lengths=(2,)))])
    answer(sampler, lambda c, s: "truncated")
    [stop] = sampler.stops()
    assert (stop["reason"], stop["asked"]) == ("unscored", 20)


def test_a_resumed_point_takes_up_what_is_stored():
    assert first_round(PRECISION, 0) == 20
    assert first_round(PRECISION, 20) == 20
    assert first_round(PRECISION, 21) == 40
    assert first_round(PRECISION, 999) == 400
    sampler = Sampler([(PRECISION, cases())], stored={("objects", "length=2"): 57})
    assert sampler.points[("objects", "length=2")].asked == 60
    assert sampler.points[("objects", "length=3")].asked == 20


@examples(60)
@given(
    accuracy=st.floats(0, 1),
    samples=st.integers(1, 2),
    size=st.integers(1, 90),
    step=st.integers(1, 60),
)
def test_asked_cases_are_a_prefix_never_beyond_max_count_and_each_asked_once(
    accuracy, samples, size, step
):
    precision = Precision(ci_width=0.15, min_count=10, max_count=120, step=step)
    planned = cases(count=120)
    sampler = Sampler([(precision, planned)], samples=samples)
    threshold = int(accuracy * 256)

    def outcome(case, sample):
        digest = hashlib.sha256(f"{case.case_id}:{sample}".encode()).digest()
        return "correct" if digest[0] < threshold else "wrong"

    handed = answer(sampler, outcome, size)
    assert len(handed) == len(set(handed))  # nothing asked twice
    for point in planned:
        state = sampler.points[(point.manifold, point.key)]
        in_order = point.case_ids(0, point.count)
        assert state.asked <= 120 and state.reason is not None
        mine = set(in_order)
        asked = [h for h, _ in handed if h in mine]
        assert asked == in_order[: state.asked]  # the deterministic prefix


def stopped_intervals(p, precision, reps, rng):
    """The reported interval of each of `reps` points with true accuracy p under the
    stopping rule (every answer scored), vectorized over points."""
    checks = np.arange(precision.min_count, precision.max_count + 1, precision.step)
    hits = np.cumsum(rng.random((reps, precision.max_count)) < p, axis=1)[:, checks - 1]
    z2 = 1.959963984540054**2
    n = checks[None, :].astype(float)
    share = hits / n
    centre = (share + z2 / (2 * n)) / (1 + z2 / n)
    half = np.sqrt(z2) * np.sqrt(share * (1 - share) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    low = np.where(hits == 0, 0.0, np.maximum(0.0, centre - half))
    high = np.where(hits == n, 1.0, np.minimum(1.0, centre + half))
    stop = (high - low) <= precision.ci_width
    stop[:, -1] = True  # max_count
    first = stop.argmax(axis=1)
    rows = np.arange(reps)
    return low[rows, first], high[rows, first], checks[first]


def test_the_vectorized_interval_is_the_wilson_interval():
    rng = np.random.default_rng(0)
    low, high, n = stopped_intervals(0.3, PRECISION, 5, rng)
    for lo, hi, size in zip(low, high, n, strict=True):
        k = next(k for k in range(size + 1) if np.isclose(wilson_interval(k, size)[0], lo))
        assert wilson_interval(k, size) == pytest.approx((lo, hi), abs=1e-9)


@pytest.mark.parametrize("p", [0.0, 0.3, 0.5, 0.9, 1.0])
def test_the_vectorized_stopping_rule_stops_where_decide_does(p):
    """The coverage below is simulated in numpy: each point stops where numerate's `decide`
    stops it (every answer scored), or the simulation says nothing of numerate."""
    reps = 200
    _, _, stopped_at = stopped_intervals(p, PRECISION, reps, np.random.default_rng(7))
    hits = np.cumsum(np.random.default_rng(7).random((reps, PRECISION.max_count)) < p, axis=1)
    for row, stop in zip(hits, stopped_at, strict=True):
        asked = PRECISION.min_count
        while (
            decide(binomial(int(row[asked - 1]), asked), asked, asked, asked, PRECISION)[0] is None
        ):
            asked += PRECISION.step
        assert asked == stop


def test_coverage_of_the_reported_interval_under_this_stopping_rule():
    """For p over [0, 1], the 95% interval reported where sampling stopped still covers p in
    at least 93% of points (optional stopping inflates the error only slightly)."""
    rng = np.random.default_rng(20261122)
    coverages = {}
    for p in np.linspace(0, 1, 21):
        low, high, _ = stopped_intervals(p, PRECISION, 4000, rng)
        coverages[round(p, 2)] = float(np.mean((low <= p) & (p <= high)))
    assert min(coverages.values()) >= 0.93, coverages
    assert np.mean(list(coverages.values())) >= 0.945, coverages


def test_unscored_answers_are_counted_against_the_answers_and_never_stop_for_precision():
    """A second mutation sweep: these passed every test. A point with nothing scored stopped
    for `precision` when `ci_width` is 1 (its width is 1.0); and the unscored share was taken
    of the cases asked, not of the answers (with `samples: 2`, twice as many)."""
    loose = Precision(ci_width=1.0, min_count=20, max_count=400, step=20)
    assert decide(NOTHING, 0, 20, 20, loose) == ("unscored", 1.0)
    # a fresh-eyes review: once unparsed answers counted as not correct, 60 of them made an
    # accuracy of 0 whose interval (0.060 wide) stopped the point for `precision`
    unread = Precision(ci_width=0.1, min_count=60, max_count=400, step=20)
    assert decide(binomial(0, 60), 0, 60, 60, unread)[0] == "unscored"
    # 15 of 40 answers scored (20 cases x 2 samples): under half of the answers
    assert decide(binomial(10, 40), 15, 40, 20, PRECISION)[0] == "unscored"


def test_an_unparsed_answer_is_spent_not_scored():
    """A second mutation sweep: scoring unparsed answers passed every test (truncated ones
    were tested): a model whose answers cannot be read never stopped as `unscored`."""
    sampler = Sampler([(PRECISION, cases(lengths=(2,)))])
    answer(sampler, lambda c, s: "unparsed")
    [stop] = sampler.stops()
    assert stop["reason"] == "unscored"
    state = sampler.points[("objects", "length=2")]
    assert (state.gradable, state.answered, state.asked) == (0, 20, 20)


def test_a_round_waits_for_every_sample_and_later_rounds_add_a_step():
    """A second mutation sweep: deciding once sample 0 of each case was graded, or later
    rounds of `min_count` cases instead of `step`, passed every test (their min_count and
    step were equal)."""
    precision = Precision(ci_width=0.01, min_count=20, max_count=400, step=5)
    sampler = Sampler([(precision, cases(lengths=(2,)))], samples=2)
    first = taken(sampler, 100)
    assert len(first) == 20
    state = sampler.points[("objects", "length=2")]

    def rows(batch, sample):
        return [{"manifold": c.manifold, "point_key": c.point_key, "case_id": c.case_id,
                 "sample_index": sample, "outcome": "correct"} for c in batch]  # fmt: skip

    sampler.graded(rows(first, 0))
    assert state.reason is None and taken(sampler, 100) == []  # sample 1 not graded yet
    sampler.graded(rows(first, 1))
    assert (state.answered, state.gradable) == (40, 40)
    assert len(taken(sampler, 100)) == 5  # the next round: one step


def test_it_stops_on_the_interval_its_figures_report():
    """A fresh-eyes review: the rule judged the Wilson interval of correct over correct and
    wrong answers, all samples as independent answers, while the point reports correct over
    every answer but errors with the case as the unit. 200 right and 100 unparsed stopped at a
    width of 0.019 and stored 0.667 [0.612, 0.718], 0.106 wide; 80 cases of 5 samples, each
    all right or all wrong, stopped at 0.0975 and reported 0.214."""
    unparsed_too = binomial(200, 300)  # what the point reports: unparsed is not correct
    assert decide(unparsed_too, 200, 300, 300, PRECISION) == (None, pytest.approx(0.106, abs=1e-3))

    def all_or_nothing(case, sample):
        return "correct" if zlib.crc32(case.case_id.encode()) % 2 else "wrong"

    sampler = Sampler([(PRECISION, cases(count=400, lengths=(2,)))], samples=5)
    answer(sampler, all_or_nothing)
    [stop] = sampler.stops()
    state = sampler.points[("objects", "length=2")]
    point = state.point
    per_case = [5 * (all_or_nothing(c, 0) == "correct") for c in point.cases(0, state.asked)]
    reported = case_clustered([(c, 5, 1) for c in per_case])  # as numerate.results.aggregate
    assert stop["width"] == pytest.approx(reported.high - reported.low)
    assert stop["reason"] == "precision" and stop["width"] <= PRECISION.ci_width
    assert state.asked > 200  # as 1 sample a case would need: 5 alike answers are one case's


def test_a_round_with_unparsed_answers_stops_on_their_share_not_correct():
    sampler = Sampler([(PRECISION, cases(count=400, lengths=(2,)))])
    answer(sampler, lambda c, s: "correct" if zlib.crc32(c.case_id.encode()) % 3 else "unparsed")
    [stop] = sampler.stops()
    state = sampler.points[("objects", "length=2")]
    outcomes = ["correct" if zlib.crc32(c.case_id.encode()) % 3 else "unparsed"
                for c in state.point.cases(0, state.asked)]  # fmt: skip
    reported = binomial(outcomes.count("correct"), len(outcomes))
    assert stop["width"] == pytest.approx(reported.high - reported.low)
    assert stop["reason"] in ("precision", "max_count")
