import polars as pl
import pytest

from numerate.aggregate import aggregate
from numerate.kernel.stats import wilson_interval


def frames(outcomes, chances, points=None, manifolds=None, tokens=None):
    n = len(outcomes)
    responses = pl.DataFrame(
        {
            "run_id": ["r"] * n,
            "model": ["m"] * n,
            "manifold": manifolds or ["objects"] * n,
            "case_id": [f"c{i}" for i in range(n)],
            "point_key": points or ["p"] * n,
            "outcome": outcomes,
            "completion_tokens": tokens or [10] * n,
            "latency_s": [0.5] * n,
        },
        schema_overrides={"completion_tokens": pl.Int32},
    )
    cases = pl.DataFrame(
        {"case_id": [f"c{i}" for i in range(n)], "params": ["{}"] * n, "chance": chances}
    )
    return responses, cases


def test_point_aggregates_by_hand():
    outcomes = ["correct"] * 3 + ["wrong", "unparsed", "truncated", "error", "error"]
    points, _ = aggregate(*frames(outcomes, [0.2] * 8, tokens=[10, 20, 30, 40, 50, 60, None, None]))
    row = points.row(0, named=True)
    assert (row["n"], row["n_scored"]) == (8, 6)
    assert (row["correct"], row["wrong"], row["unparsed"], row["truncated"], row["error"]) == (
        3, 1, 1, 1, 2,
    )  # fmt: skip
    assert row["accuracy"] == pytest.approx(3 / 6)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(wilson_interval(3, 6))
    assert row["chance"] == pytest.approx(0.2)
    assert row["chance_adjusted"] == pytest.approx((0.5 - 0.2) / 0.8)
    assert row["unparsed_rate"] == row["truncation_rate"] == pytest.approx(1 / 6)
    assert row["error_rate"] == pytest.approx(2 / 8)
    assert row["mean_completion_tokens"] == pytest.approx(35.0)
    assert row["median_completion_tokens"] == pytest.approx(35.0)


def test_all_errors_leave_accuracy_undefined():
    points, _ = aggregate(*frames(["error", "error"], [0.5, 0.5]))
    row = points.row(0, named=True)
    assert row["n_scored"] == 0 and row["accuracy"] is None and row["chance_adjusted"] is None
    assert (row["ci_low"], row["ci_high"]) == (0.0, 1.0)
    assert row["error_rate"] == 1.0 and row["chance"] == 0.5


def test_summaries_pool_points_and_manifolds():
    outcomes = ["correct", "wrong", "correct", "correct"]
    responses, cases = frames(
        outcomes, [0.5, 0.5, 0.0, 0.0], points=["a", "a", "b", "b"],
        manifolds=["shuffle", "shuffle", "sequence", "sequence"],
    )  # fmt: skip
    points, summaries = aggregate(responses, cases)
    assert points.height == 2
    by = {(r["level"], r["manifold"]): r for r in summaries.iter_rows(named=True)}
    assert by["manifold", "shuffle"]["accuracy"] == 0.5
    assert by["manifold", "sequence"]["accuracy"] == 1.0
    model = by["model", "*"]
    assert (model["n"], model["correct"], model["accuracy"]) == (4, 3, 0.75)
    assert model["chance"] == pytest.approx(0.25)  # mean chance of the scored cases
    assert model["chance_adjusted"] == pytest.approx((0.75 - 0.25) / 0.75)


def test_a_response_without_its_case_is_an_error():
    responses, cases = frames(["correct"], [0.1])
    with pytest.raises(ValueError, match="no stored case"):
        aggregate(responses, cases.filter(pl.col("case_id") == "nope"))
