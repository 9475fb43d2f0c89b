import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numerate.kernel.design import binomial, case_clustered, point_mean
from numerate.kernel.stats import wilson_interval
from numerate.results.aggregate import aggregate


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
    outcomes = ["correct"] * 3 + ["wrong", "unparsed", "truncated", "truncated", "error", "error"]
    tokens = [10, 20, 30, 40, 50, 60, 70, None, None]
    points, _ = aggregate(*frames(outcomes, [0.2] * 9, tokens=tokens))
    row = points.row(0, named=True)
    assert (row["n"], row["n_scored"]) == (9, 7)
    assert (row["correct"], row["wrong"], row["unparsed"], row["truncated"], row["error"]) == (
        3, 1, 1, 2, 2,
    )  # fmt: skip
    assert row["accuracy"] == pytest.approx(3 / 7)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(wilson_interval(3, 7))
    assert row["chance"] == pytest.approx(0.2)
    assert row["chance_adjusted"] == pytest.approx((3 / 7 - 0.2) / 0.8)
    assert row["unparsed_rate"] == pytest.approx(1 / 7)  # unlike the truncation rate
    assert row["truncation_rate"] == pytest.approx(2 / 7)
    assert row["error_rate"] == pytest.approx(2 / 9)
    assert row["mean_completion_tokens"] == pytest.approx(40.0)
    assert row["median_completion_tokens"] == pytest.approx(40.0)


def test_a_point_without_a_scored_answer_is_not_among_its_summary_s_points_nor_floors():
    responses, cases = frames(
        ["error", "error", "correct", "wrong"], [0.5, 0.5, 0.1, 0.1], points=["a", "a", "b", "b"]
    )
    _, summaries = aggregate(responses, cases)
    for row in summaries.iter_rows(named=True):  # the manifold's and the model's
        assert (row["n"], row["points"], row["accuracy"]) == (4, 1, 0.5), row
        assert row["chance"] == pytest.approx(0.1), row  # point b's alone
        assert row["chance_adjusted"] == pytest.approx((0.5 - 0.1) / 0.9), row
    assert summaries.height == 2


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


def test_a_point_s_params_are_its_cases_whatever_else_the_cases_carry():
    responses, cases = frames(["correct", "wrong", "correct"], [0.5, 0.5, 0.2],
                              points=["a", "a", "b"])  # fmt: skip
    cases = cases.with_columns(  # a `cases` row also has a manifold and the key it was stored by
        params=pl.Series(['{"length": 2}', '{"length": 2}', '{"length": 4}']),
        manifold=pl.lit("objects"), point_key=pl.lit("stored by another sweep"),
    )  # fmt: skip
    points, _ = aggregate(responses, cases)
    assert dict(zip(points["point_key"], points["params"], strict=True)) == {
        "a": '{"length": 2}', "b": '{"length": 4}',
    }  # fmt: skip
    assert points["chance"].to_list() == [0.5, 0.2]


def test_a_response_without_its_case_is_an_error():
    responses, cases = frames(["correct"], [0.1])
    with pytest.raises(ValueError, match="no stored case"):
        aggregate(responses, cases.filter(pl.col("case_id") == "nope"))


def test_a_case_without_its_floor_is_an_error():
    responses, cases = frames(["correct", "wrong"], [0.5, 0.5])
    cases = cases.with_columns(chance=pl.Series([0.5, None], dtype=pl.Float64))
    with pytest.raises(ValueError, match="response for case 'c1' has no stored case"):
        aggregate(responses, cases)


def test_a_case_given_twice_counts_once_in_every_figure():
    responses, cases = frames(["correct", "wrong", "correct"], [0.5, 0.5, 0.5])
    points, summaries = aggregate(responses, pl.concat([cases, cases.head(1)]))
    point = points.row(0, named=True)
    assert (point["n"], point["correct"], point["n_scored"]) == (3, 2, 3)
    assert point["accuracy"] == pytest.approx(2 / 3)
    model = summaries.filter(pl.col("level") == "model").row(0, named=True)
    assert (model["n"], model["correct"]) == (3, 2)


def multi_sample(cases, point="p", manifold="objects"):
    """Responses of k samples per case: `cases` maps a case id to its samples' (answer,
    outcome)."""
    rows = [
        {"run_id": "r", "model": "m", "manifold": manifold, "case_id": case, "point_key": point,
         "sample_index": i, "outcome": outcome, "answer": answer, "completion_tokens": 5,
         "latency_s": 0.1}
        for case, samples in cases.items()
        for i, (answer, outcome) in enumerate(samples)
    ]  # fmt: skip
    responses = pl.DataFrame(rows, schema_overrides={"completion_tokens": pl.Int32})
    ids = list(cases)
    frame = pl.DataFrame({"case_id": ids, "params": ["{}"] * len(ids), "chance": [0.1] * len(ids)})
    return responses, frame


def test_multi_sample_figures_by_hand():
    cases = {
        "a": [("7", "correct"), ("7", "correct"), ("7", "correct")],  # agree, pass, majority
        "b": [("7", "correct"), ("8", "wrong"), ("8", "wrong")],  # pass@3 = 1, majority wrong
        "c": [("8", "wrong"), (None, "unparsed"), ("9", "wrong")],  # nothing right
        "d": [("5", "correct"), ("6", "wrong"), (None, "error")],  # one sample not scored
    }
    points, summaries = aggregate(*multi_sample(cases))
    row = points.row(0, named=True)
    assert row["samples"] == 3 and (row["n"], row["n_scored"], row["correct"]) == (12, 11, 5)
    assert row["accuracy"] == pytest.approx(5 / 11)
    # pass@3 per case: 1, 1, 0, and d with two scored answers: pass@2 = 1
    assert row["pass_at_k"] == pytest.approx(3 / 4)
    # majority: a right, b wrong, c a three-way tie of wrong answers, d a tie of 5 and 6
    assert row["maj_at_k"] == pytest.approx((1 + 0 + 0 + 0.5) / 4)
    assert row["consistency"] == pytest.approx(1 / 4)  # only a's answers all agree
    clustered = case_clustered([(3, 3, 1), (1, 3, 1), (0, 3, 1), (1, 2, 1)])
    assert (row["ci_low"], row["ci_high"], row["se"]) == pytest.approx(
        (clustered.low, clustered.high, clustered.se)
    )
    model = summaries.filter(level="model").row(0, named=True)
    assert (model["samples"], model["pass_at_k"], model["points"]) == (3, 0.75, 1)


def test_one_sample_leaves_the_multi_sample_figures_empty():
    points, _ = aggregate(*frames(["correct", "wrong"], [0.5, 0.5]))
    row = points.row(0, named=True)
    assert row["samples"] == 1
    assert row["pass_at_k"] is row["maj_at_k"] is row["consistency"] is None


def test_summaries_weigh_points_equally_whatever_their_counts():
    # an adaptive run: point a stopped after 4 answers (all right), b after 16 (4 right)
    outcomes = ["correct"] * 4 + ["correct"] * 4 + ["wrong"] * 12
    points_of = ["a"] * 4 + ["b"] * 16
    responses, cases = frames(outcomes, [0.0] * 20, points=points_of)
    _, summaries = aggregate(responses, cases)
    manifold = summaries.filter(level="manifold").row(0, named=True)
    assert manifold["accuracy"] == pytest.approx((1.0 + 0.25) / 2)  # not 8 / 20
    assert (manifold["n"], manifold["correct"], manifold["points"]) == (20, 8, 2)
    expected = point_mean([binomial(4, 4), binomial(4, 16)])
    assert (manifold["ci_low"], manifold["ci_high"]) == pytest.approx((expected.low, expected.high))
    # `*` is the mean over every point of every manifold, not over manifolds
    responses, cases = frames(
        ["correct", "wrong", "correct", "correct"], [0.0] * 4, points=["a", "b", "c", "c"],
        manifolds=["objects", "objects", "shuffle", "shuffle"],
    )  # fmt: skip
    _, summaries = aggregate(responses, cases)
    model = summaries.filter(level="model").row(0, named=True)
    assert model["accuracy"] == pytest.approx((1.0 + 0.0 + 1.0) / 3)


@pytest.mark.parametrize("rows", [1, 3, 100_000])
def test_case_sets_are_hashed_as_their_ids_stream_past(rows):
    """A group's case set is the SHA-256 of its sorted distinct ids joined by commas, whether
    its ids come in one batch or straddle many (a batch of `rows` rows), and a model's
    whether its manifolds' ids sort one after the other (m1, m2) or not (m3: a manifold's
    ids before the one's before it; m4: an id in two manifolds)."""
    import hashlib

    import duckdb

    from numerate.store.reductions import case_sets

    ids = {("m1", "objects"): ["c3", "c1", "c2", "c1"], ("m1", "shuffle"): ["s9", "s10"],
           ("m1", "zz"): ["z1"], ("m2", "objects"): ["c2", "c5", "c4", "c3", "c1"],
           ("m3", "objects"): ["x2", "x1"], ("m3", "shuffle"): ["a1", "y"],
           ("m4", "objects"): ["c1", "c2"], ("m4", "shuffle"): ["c2", "c3"]}  # fmt: skip
    listed = [("r", model, manifold, case) for (model, manifold), cases in ids.items()
            for case in cases]  # fmt: skip
    given = pl.DataFrame(listed, schema=["run_id", "model", "manifold", "case_id"], orient="row")
    sorts = []
    with duckdb.connect() as con:
        con.register("given", given.to_arrow())

        def stream(sql):
            sorts.append(sql)
            return con.sql(sql).to_arrow_reader(rows)

        found = case_sets(lambda sql: con.sql(sql).pl(), stream, "given")
    # one sort a model and manifold, and one more for each model whose ids are sorted alone:
    # a model's own sort is what the manifolds' spare (its memory)
    assert len(sorts) == len(ids) + 2
    for keys, frame in zip((3, 2), found, strict=True):
        expected: dict[tuple[str, ...], set[str]] = {}
        for (model, manifold), cases in ids.items():
            expected.setdefault(("r", model, manifold)[:keys], set()).update(cases)
        assert {tuple(row[:-1]): row[-1] for row in frame.iter_rows()} == {
            key: hashlib.sha256(",".join(sorted(cases)).encode()).hexdigest()[:12]
            for key, cases in expected.items()
        }


OUTCOMES = ["correct", "wrong", "unparsed", "truncated", "error"]


def answered(samples):
    """Cases of a run, each (point, manifold, chance, its samples' (answer, outcome))."""
    return st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["objects", "shuffle"]),
                  st.sampled_from([0.0, 0.1, 0.25, 0.5]),
                  st.lists(st.tuples(st.sampled_from([None, "1", "2", "3"]),
                                     st.sampled_from(OUTCOMES)), min_size=1, max_size=samples)),
        min_size=1, max_size=30,
    )  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(answered(samples=4))
def test_every_figure_is_what_each_case_s_answers_give(cases):
    """Whatever its answers (one a case or several, unread ones, errors, tied votes), every
    point and summary of a run is what the whole-frame aggregation of 3a9c61d
    (tests/results/reference_aggregate.py), which figures each point from a list entry per
    case through numerate.kernel's majority_vote and agrees, gives (floats to 1e-12)."""
    assert_as_from_case_lists(cases)


@settings(max_examples=25, deadline=None)
@given(answered(samples=1))
def test_one_answer_a_case_is_figured_as_from_its_cases(cases):
    """The same with one answer a case, which numerate reduces without a group per case: its
    kinds of case are those of the general form, every column."""
    import duckdb

    from numerate.store.reductions import _statements, completed

    responses, stored = assert_as_from_case_lists(cases)
    responses, stored = completed(responses, stored)
    with duckdb.connect() as con:
        con.register("r", responses.to_arrow())
        con.register("c", stored.to_arrow())
        sql = _statements("r", "c")
        general, one = (con.sql(f"{sql[form]} ORDER BY ALL").pl()
                        for form in ("kinds", "one_answer_kinds"))  # fmt: skip
    assert general.rows() == one.rows()


def assert_as_from_case_lists(cases):
    """Every point and summary as the reference gives them; the answers and cases, as frames."""
    from polars.testing import assert_frame_equal

    from tests.results.reference_aggregate import aggregate as from_case_lists

    rows = [
        {"run_id": "r", "model": "m", "manifold": manifold, "case_id": f"c{i}",
         "point_key": point, "sample_index": s, "outcome": outcome, "answer": answer,
         "completion_tokens": 10 + s, "latency_s": 0.5}
        for i, (point, manifold, _, samples) in enumerate(cases)
        for s, (answer, outcome) in enumerate(samples)
    ]  # fmt: skip
    responses = pl.DataFrame(rows, schema_overrides={"completion_tokens": pl.Int32,
                                                     "answer": pl.String})  # fmt: skip
    stored = pl.DataFrame({"case_id": [f"c{i}" for i in range(len(cases))],
                           "params": ["{}"] * len(cases),
                           "chance": [chance for _, _, chance, _ in cases]})  # fmt: skip
    got = aggregate(responses, stored)
    expected = from_case_lists(responses, stored)
    orders = [["manifold", "point_key"], ["level", "manifold"]]  # points, summaries
    for mine, theirs, keys in zip(got, expected, orders, strict=True):
        theirs = theirs.select([c for c in mine.columns if c in theirs.columns]).sort(keys)
        assert_frame_equal(mine.select(theirs.columns).sort(keys), theirs, check_dtypes=False,
                           rel_tol=1e-12, abs_tol=1e-12)  # fmt: skip
    return responses, stored


def test_what_reaches_python_follows_the_kinds_of_case_not_the_cases():
    """A point's cases answered alike are one row with their number, so a million cases
    reach Python as a few rows: here 300 cases of three kinds."""
    from numerate.store.reductions import of_frames

    kinds = [
        [("7", "correct"), ("7", "correct"), ("8", "wrong")],  # majority right, disagree
        [("7", "correct"), ("8", "wrong"), (None, "unparsed")],  # a tie: majority 1/2
        [("8", "wrong"), ("8", "truncated"), ("8", "error")],  # two scored votes, agree
    ]
    cases = {f"c{i}": kinds[i % 3] for i in range(300)}
    found = of_frames(*multi_sample(cases)).kinds.sort("case_correct")
    assert found.select("case_answers", "case_scored", "case_correct", "case_truncated",
                        "case_majority", "case_agrees", "cases").rows() == [
        (3, 2, 0, 1, 0.0, True, 100), (3, 3, 1, 0, 0.5, False, 100),
        (3, 3, 2, 0, 1.0, False, 100),
    ]  # fmt: skip


def test_a_case_given_twice_counts_once_as_its_first_row():
    """As the store keeps it ("first"): a mutation sweep's `keep="last"` passed every test."""
    from numerate.store.reductions import completed

    responses = pl.DataFrame({"case_id": ["c1"], "outcome": ["correct"]})
    cases = pl.DataFrame({"case_id": ["c1", "c1", "c2"], "chance": [0.1, 0.9, 0.5]})
    _, kept = completed(responses, cases)
    assert kept.select("case_id", "chance").rows() == [("c1", 0.1), ("c2", 0.5)]
