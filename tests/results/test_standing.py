"""Tiers that are a test, on constructed answers whose tiers are known, and the score of a
run as `rank` gives it."""

from __future__ import annotations

import itertools

import polars as pl
import pytest

from numerate.kernel.composite import PointCases
from numerate.results.standing import rank, tiers
from numerate.store.queries import POOLED


def built(answers: dict[str, dict[tuple[str, str], list[bool]]], chance: float = 0.0):
    """Each model's points and the pairs' counts per point, derived from every model's
    answers: a list of correct (True) or wrong per case, the same cases for every model."""
    points = {
        model: [
            PointCases(manifold, chance, [1, 0], [0, 0], [1, 1],
                       [max(sum(a), 0), len(a) - sum(a)])
            for (manifold, _), a in by_point.items()
        ]
        for model, by_point in answers.items()
    }  # fmt: skip
    for model, model_points in points.items():  # a category of no case is not a category
        points[model] = [
            PointCases(p.manifold, p.chance, *zip(*[
                (c, t, s, k) for c, t, s, k in zip(p.correct, p.truncated, p.scored, p.cases,
                                                   strict=True) if k
            ], strict=True))
            for p in model_points
        ]  # fmt: skip
    rows = []
    for base, new in itertools.combinations(sorted(answers), 2):
        for (manifold, point), a in answers[base].items():
            b = answers[new][(manifold, point)]
            rows.append({
                "base_model": base, "new_model": new, "manifold": manifold, "point_key": point,
                "n": len(a), "n_errors": 0, "base_correct": sum(a), "new_correct": sum(b),
                "lost": sum(x and not y for x, y in zip(a, b, strict=True)),
                "gained": sum(y and not x for x, y in zip(a, b, strict=True)),
            })  # fmt: skip
    return points, pl.DataFrame(rows)


def right(n: int, correct: int, offset: int = 0) -> list[bool]:
    """n cases, `correct` of them right, starting at case `offset` (wrapping)."""
    return [(i - offset) % n < correct for i in range(n)]


def test_the_greedy_tiers():
    differ = {frozenset("AC"), frozenset("BD"), frozenset("AD"), frozenset("CD")}
    assert tiers("ABCD", lambda a, b: frozenset((a, b)) in differ) == {
        "A": 1, "B": 1, "C": 2, "D": 3,
    }  # fmt: skip
    assert tiers("AB", lambda a, b: False) == {"A": 1, "B": 1}
    assert tiers([], lambda a, b: True) == {}


def test_models_that_answer_alike_share_a_tier_and_a_clear_gap_opens_one():
    """A and B answer every case alike (90%), C gets 40%: {A, B} then {C}, in every scope."""
    n = 100
    strong = {("objects", "p1"): right(n, 90), ("objects", "p2"): right(n, 90),
              ("shuffle", "p1"): right(n, 90)}  # fmt: skip
    weak = {key: right(n, 40) for key in strong}
    found = rank(*built({"A": strong, "B": dict(strong), "C": weak}))
    for scope in (POOLED, "objects", "shuffle"):
        placed = found.tiers.filter(pl.col("scope") == scope)
        assert dict(zip(placed["model"], placed["tier"], strict=True)) == {"A": 1, "B": 1, "C": 2}
    pairs = {(r["scope"], r["base_model"], r["new_model"]): r for r in found.pairs.to_dicts()}
    assert not pairs[(POOLED, "A", "B")]["differ"]
    assert pairs[(POOLED, "A", "B")]["difference"] == 0
    assert pairs[(POOLED, "A", "C")]["differ"] and pairs[(POOLED, "B", "C")]["differ"]
    assert pairs[(POOLED, "A", "C")]["difference"] == pytest.approx(-0.5)
    assert pairs[(POOLED, "A", "C")]["n"] == 3 * n
    # every pair of the family says what it could have seen
    assert found.pairs["detectable_difference"].is_not_null().all()


def test_a_gap_no_test_can_tell_is_no_tier():
    """Over one point of 60 cases: A 60%, B 52% (B is wrong where A is in 5 cases and never
    the other way: exact McNemar p = 2 / 2^5 = 0.0625, no difference), C 20%: {A, B}, {C}."""
    n = 60
    answers = {
        "A": {("m", "p"): right(n, 36)},
        "B": {("m", "p"): right(n, 31)},
        "C": {("m", "p"): right(n, 12)},
    }
    found = rank(*built(answers))
    placed = found.tiers.filter(pl.col("scope") == "m")
    assert placed["model"].to_list() == ["A", "B", "C"]
    assert placed["tier"].to_list() == [1, 1, 2]
    assert found.tiers.filter(pl.col("scope") == POOLED)["tier"].to_list() == [1, 1, 2]


def test_tiers_hold_no_two_models_that_differ():
    """Six models from 20% to 95% over two manifolds: whatever the tiers, no two models of
    one tier differ, and a tier never holds a model better than one of an earlier tier."""
    n = 80
    shares = {"m1": 0.95, "m2": 0.9, "m3": 0.75, "m4": 0.7, "m5": 0.4, "m6": 0.2}
    answers = {
        model: {(m, "p"): right(n, round(share * n), offset=i) for m in ("x", "y")}
        for i, (model, share) in enumerate(shares.items())
    }
    found = rank(*built(answers))
    differ = {
        (r["scope"], frozenset((r["base_model"], r["new_model"])))
        for r in found.pairs.to_dicts() if r["differ"]
    }  # fmt: skip
    for scope, rows in found.tiers.group_by("scope"):
        ordered = rows.to_dicts()
        for a, b in itertools.combinations(ordered, 2):
            if a["tier"] == b["tier"]:
                assert (scope[0], frozenset((a["model"], b["model"]))) not in differ
        tiers_in_order = [r["tier"] for r in ordered]
        assert tiers_in_order == sorted(tiers_in_order)
    overall = found.tiers.filter(pl.col("scope") == POOLED)
    assert overall["tier"].to_list()[0] == 1 and overall["tier"].max() >= 3


def test_scores_come_with_the_overall_tier():
    n = 50
    answers = {"A": {("x", "p"): right(n, 45)}, "B": {("x", "p"): right(n, 10)}}
    found = rank(*built(answers, chance=0.2))
    scores = found.scores.to_dicts()
    assert [s["model"] for s in scores] == ["A", "B"]
    assert scores[0]["score"] == pytest.approx((0.9 - 0.2) / 0.8)  # one manifold, one point
    assert scores[1]["score"] == pytest.approx(0.01)  # below chance: the floor
    assert [s["tier"] for s in scores] == [1, 2]
    assert scores[0]["ci_low"] < scores[0]["score"] < scores[0]["ci_high"]


def test_a_single_model_is_tier_one_with_no_pairs():
    points, _ = built({"A": {("x", "p"): right(10, 7)}})
    found = rank(points, pl.DataFrame())
    assert found.tiers["tier"].to_list() == [1, 1] and found.pairs.is_empty()


def test_a_model_joins_a_tier_only_if_it_differs_from_none_of_its_members():
    """A fourth mutation sweep: comparing with the tier's first member only, or keeping the
    closed tier's members in the next, passed every test."""
    assert tiers("ABC", lambda a, b: frozenset((a, b)) == frozenset("BC")) == {
        "A": 1, "B": 1, "C": 2,
    }  # fmt: skip
    differ = {frozenset("AB"), frozenset("AC")}
    assert tiers("ABC", lambda a, b: frozenset((a, b)) in differ) == {"A": 1, "B": 2, "C": 2}


def test_each_scope_is_its_own_family_and_a_score_takes_the_pooled_tier():
    """A and B answer manifold `a` far apart and `b` alike: they differ in `a` and pooled,
    not in `b`; the score's tier is the pooled one, whatever the last manifold says. The
    better model sorts last by name (an improvement differs as a regression does)."""
    n = 100
    weak = {("a", "p"): right(n, 20), ("b", "p"): right(n, 90)}
    strong = {("a", "p"): right(n, 95), ("b", "p"): right(n, 90)}
    found = rank(*built({"A": weak, "Z": strong}))
    placed = {(r["scope"], r["model"]): r["tier"] for r in found.tiers.to_dicts()}
    assert placed == {(POOLED, "Z"): 1, (POOLED, "A"): 2, ("a", "Z"): 1, ("a", "A"): 2,
                      ("b", "A"): 1, ("b", "Z"): 1}  # fmt: skip
    pairs = {r["scope"]: r for r in found.pairs.to_dicts()}
    assert (pairs["a"]["base_model"], pairs["a"]["new_model"]) == ("A", "Z")
    assert pairs["a"]["difference"] > 0 and pairs["a"]["differ"] and not pairs["b"]["differ"]
    assert {s["model"]: s["tier"] for s in found.scores.to_dicts()} == {"Z": 1, "A": 2}


def test_summaries_take_each_model_s_score_its_interval_and_tier():
    """The run's summaries as stored (a fourth mutation sweep: the interval's two ends
    swapped passed every test)."""
    from numerate.results.aggregate import with_standing

    n = 50
    found = rank(*built({"A": {("x", "p"): right(n, 45)}, "B": {("x", "p"): right(n, 10)}},
                        chance=0.2))  # fmt: skip
    summaries = pl.DataFrame({"model": ["A", "A", "B"], "manifold": [POOLED, "x", POOLED]})
    rows = {(r["model"], r["manifold"]): r for r in with_standing(summaries, found).to_dicts()}
    scores = {s["model"]: s for s in found.scores.to_dicts()}
    for model in ("A", "B"):
        row, score = rows[model, POOLED], scores[model]
        assert (row["score"], row["score_low"], row["score_high"], row["tier"]) == (
            score["score"],
            score["ci_low"],
            score["ci_high"],
            score["tier"],
        )
    assert (
        rows["A", POOLED]["score_low"]
        < rows["A", POOLED]["score"]
        < rows["A", POOLED]["score_high"]
    )
    assert rows["A", "x"]["score"] == scores["A"]["x"] and rows["A", "x"]["score_low"] is None
    assert rows["A", "x"]["tier"] == 1


def test_a_model_without_a_score_is_listed_last():
    """Every point of its at chance 1 (nothing to score): after the scored models, whatever
    its name (a fourth mutation sweep: first passed every test)."""
    import dataclasses

    points, counts = built({"A": {("x", "p"): right(20, 5)}, "B": {("x", "p"): right(20, 15)}},
                           chance=0.2)  # fmt: skip
    points["A"] = [dataclasses.replace(p, chance=1.0) for p in points["A"]]
    scores = rank(points, counts).scores.to_dicts()
    assert [s["model"] for s in scores] == ["B", "A"] and scores[1].get("score") is None
