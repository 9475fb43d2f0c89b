"""numerate.results.compare: paired comparisons of two runs, on hand-built answers."""

import duckdb
import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.kernel.power import minimum_detectable_drop
from numerate.kernel.stats import mcnemar_exact
from numerate.results.compare import (
    any_regression,
    compare_counts,
    compare_groups,
    compare_runs,
    compare_stored,
    detectable_line,
    for_display,
    summary_line,
)
from numerate.store.queries import compared_counts, counted_frames
from tests.examples import examples


def answers(correct, model="m", manifold="objects", point_key="p0", start=0, samples=1):
    """One answer per value of `correct`, on cases c{start}, c{start + 1}, ..."""
    rows = [
        {"model": model, "manifold": manifold, "point_key": point_key, "case_id": f"c{start + i}",
         "sample_index": s, "correct": value}
        for i, value in enumerate(correct)
        for s in range(samples)
    ]  # fmt: skip
    return pl.DataFrame(rows, schema={"model": pl.String, "manifold": pl.String,
                                      "point_key": pl.String, "case_id": pl.String,
                                      "sample_index": pl.Int32, "correct": pl.Boolean})  # fmt: skip


def only(frame, **keys):
    rows = frame.filter(**keys).to_dicts()
    assert len(rows) == 1, rows
    return rows[0]


def test_a_clearly_worse_new_run_is_a_regression():
    base = answers([True] * 50)
    new = answers([True] * 20 + [False] * 30)
    row = only(compare_runs(base, new), model="m", manifold="objects")
    assert (row["n"], row["lost"], row["gained"]) == (50, 30, 0)
    assert row["base_accuracy"] == pytest.approx(1.0)
    assert row["new_accuracy"] == pytest.approx(0.4)
    assert row["difference"] == pytest.approx(-0.6)
    assert row["difference_low"] <= -0.6 <= row["difference_high"] < 0
    assert row["base_low"] <= 1.0 <= row["base_high"]
    assert row["new_low"] <= 0.4 <= row["new_high"]
    assert row["p_value"] == pytest.approx(2 * 0.5**30, rel=1e-6)
    assert row["verdict"] == "regression" and row["note"] == ""
    assert any_regression(compare_runs(base, new))


def test_the_reverse_is_an_improvement():
    base = answers([True] * 20 + [False] * 30)
    new = answers([True] * 50)
    comparison = compare_runs(base, new)
    assert comparison["verdict"].to_list() == ["improvement"]
    assert not any_regression(comparison)


def test_identical_runs_change_nothing():
    base = answers([True, False, True, None, False] * 20)
    row = only(compare_runs(base, base), model="m")
    assert (row["lost"], row["gained"], row["difference"]) == (0, 0, 0.0)
    assert row["p_value"] == 1.0 and row["verdict"] == "no change"
    assert row["n"] == 80 and row["n_errors"] == 20


def test_a_small_difference_is_no_change():
    base = answers([True] * 30)
    new = answers([True] * 28 + [False] * 2)
    assert compare_runs(base, new)["verdict"].to_list() == ["no change"]


def test_holm_is_applied_across_all_groups():
    # 6 discordant pairs, all lost: exact p = 2 / 64 = 0.03125 < 0.05 alone, but not
    # after Holm over two groups (x 2 = 0.0625)
    lost_six = ([True] * 6 + [True] * 10, [False] * 6 + [True] * 10)
    base = pl.concat([answers(lost_six[0], manifold="a"), answers(lost_six[0], manifold="b")])
    new = pl.concat([answers(lost_six[1], manifold="a"), answers(lost_six[1], manifold="b")])
    comparison = compare_runs(base, new)
    assert comparison["p_value"].to_list() == pytest.approx([0.03125, 0.03125])
    assert comparison["p_holm"].to_list() == pytest.approx([0.0625, 0.0625])
    assert comparison["verdict"].to_list() == ["no change", "no change"]
    alone = compare_runs(answers(lost_six[0]), answers(lost_six[1]))
    assert alone["verdict"].to_list() == ["regression"]


def test_holm_leaves_out_groups_without_a_discordant_pair():
    # the six lost pairs again, beside a group where nothing changed: that group can never
    # reject, gets p = 1, and does not halve the other's chance
    lost_six = ([True] * 6 + [True] * 10, [False] * 6 + [True] * 10)
    same = answers([True] * 8 + [False] * 8, manifold="b")
    base = pl.concat([answers(lost_six[0], manifold="a"), same])
    new = pl.concat([answers(lost_six[1], manifold="a"), same])
    comparison = compare_runs(base, new)
    assert comparison["p_holm"].to_list() == pytest.approx([0.03125, 1.0])
    assert comparison["verdict"].to_list() == ["regression", "no change"]


def test_points_weigh_the_same_whatever_their_counts():
    # point p0: 100 pairs, 10 lost (-0.10); point p1: 20 pairs, 10 gained (+0.50).
    # Pooled, p0 would dominate ((10 - 10) / 120 = 0); the mean over points is +0.20.
    base = pl.concat([
        answers([True] * 100, point_key="p0"),
        answers([False] * 20, point_key="p1", start=100),
    ])  # fmt: skip
    new = pl.concat([
        answers([False] * 10 + [True] * 90, point_key="p0"),
        answers([True] * 10 + [False] * 10, point_key="p1", start=100),
    ])  # fmt: skip
    row = only(compare_runs(base, new), model="m")
    assert row["points"] == 2 and row["n"] == 120
    assert row["difference"] == pytest.approx((-0.10 + 0.50) / 2)
    assert row["base_accuracy"] == pytest.approx((1.0 + 0.0) / 2)
    assert row["new_accuracy"] == pytest.approx((0.9 + 0.5) / 2)
    assert row["difference_low"] < 0.20 < row["difference_high"]
    by_point = compare_runs(base, new, by="point")
    assert by_point["difference"].to_list() == pytest.approx([-0.10, 0.50])


def test_each_group_says_the_smallest_drop_it_would_catch():
    # three groups with 6, 0 and 2 discordant pairs: the family is the two with some
    groups = [("a", [True] * 6 + [True] * 94, [False] * 6 + [True] * 94),
              ("b", [True] * 100, [True] * 100),
              ("c", [True, False] + [True] * 98, [False, True] + [True] * 98)]  # fmt: skip
    base = pl.concat([answers(b, manifold=m) for m, b, _ in groups])
    new = pl.concat([answers(n, manifold=m) for m, _, n in groups])
    comparison = compare_runs(base, new)
    drops = dict(zip(comparison["manifold"], comparison["detectable_drop"], strict=True))
    assert drops["a"] == pytest.approx(minimum_detectable_drop(100, 6, 0.05, family=2))
    assert drops["c"] == pytest.approx(minimum_detectable_drop(100, 2, 0.05, family=2))
    # a group outside the family would join it with a drop
    assert drops["b"] == pytest.approx(minimum_detectable_drop(100, 0, 0.05, family=3))
    worst = max(drops.values())
    line = detectable_line(comparison)
    assert line.startswith(f"a drop of {round(100 * worst + 0.5)} points or more in any model")
    assert "(80% probability, alpha 0.05, 3 groups)" in line
    # the alpha as given, not rounded (a hostile pass: 0.9999999999999999 was said as 1)
    assert "alpha 0.9999999999999999, 3 groups" in detectable_line(comparison, 1 - 2**-53)


def test_a_drop_of_one_point_is_one_point():
    comparison = pl.DataFrame(
        {"model": ["m"], "manifold": ["objects"], "p_holm": [0.5], "detectable_drop": [0.004]}
    )
    assert detectable_line(comparison).startswith("a drop of 1 point or more in any model")


def test_a_tiny_group_says_no_drop_could_be_caught():
    comparison = compare_runs(answers([True] * 3), answers([True] * 3))
    assert comparison["detectable_drop"].to_list() == [None]
    assert detectable_line(comparison).startswith("too few pairs to catch any drop in m/objects")
    assert for_display(comparison)["detectable drop"].to_list() == ["none"]


def test_unequal_point_counts_test_the_effective_counts():
    # p0: 200 pairs, 20 lost; p1: 20 pairs, none discordant. The mean drop is 0.05; the
    # test sees the group's effective pairs, not 220 independent ones
    base = pl.concat([answers([True] * 200), answers([True] * 20, point_key="p1", start=200)])
    new = pl.concat([
        answers([False] * 20 + [True] * 180),
        answers([True] * 20, point_key="p1", start=200),
    ])  # fmt: skip
    row = only(compare_runs(base, new), model="m")
    assert row["difference"] == pytest.approx(-0.05)
    assert row["p_value"] > mcnemar_exact(20, 0)  # the pooled test would overstate it


def test_errors_are_dropped_and_unparsed_answers_are_wrong():
    base = answers([True, True, True, None])
    new = answers([None, False, True, True])
    row = only(compare_runs(base, new), model="m")
    assert (row["n"], row["n_errors"], row["lost"]) == (2, 2, 1)
    # stored: an unparsed or truncated answer is a wrong one, an error none at all
    outcomes = ["correct", "wrong", "unparsed", "truncated", "error"]
    source = Responses(
        [("r1", "m", "objects", "p0", f"c{i}", 0, "correct") for i in range(5)]
        + [("r2", "m", "objects", "p0", f"c{i}", 0, o) for i, o in enumerate(outcomes)]
        + [("r3", "m", "objects", "p0", f"c{i}", 0, "wrong") for i in range(5)]
    )
    row = only(compare_stored(source, ("r1", "r2")), model="m")
    assert (row["n"], row["n_errors"], row["lost"], row["new_correct"]) == (4, 1, 3, 1)
    row = only(compare_stored(source, ("r3", "r2")), model="m")
    assert (row["n"], row["gained"], row["base_correct"]) == (4, 1, 0)


def test_unknown_outcomes_are_refused():
    source = Responses([("r1", "m", "objects", "p0", "c0", 0, "maybe"),
                        ("r2", "m", "objects", "p0", "c0", 0, "correct")])  # fmt: skip
    with pytest.raises(duckdb.Error, match="unknown outcome maybe"):
        compare_stored(source, ("r1", "r2"))


def test_unshared_cases_are_counted_and_one_sided_groups_are_named():
    base = pl.concat([answers([True] * 10), answers([True] * 5, model="gone")])
    new = pl.concat([answers([True] * 8, start=2), answers([True] * 5, model="fresh")])
    comparison = compare_runs(base, new)
    shared = only(comparison, model="m")
    assert (shared["n"], shared["n_base_only"], shared["n_new_only"]) == (8, 2, 0)
    gone, fresh = only(comparison, model="gone"), only(comparison, model="fresh")
    assert gone["note"] == "only in the base run" and gone["verdict"] is None
    assert fresh["note"] == "only in the new run" and fresh["n_new_only"] == 5
    assert fresh["p_value"] is None and fresh["p_holm"] is None
    line = summary_line(comparison)
    assert line.startswith("0 regressions, 0 improvements, 1 no change over 8 paired cases")
    assert "2 group(s) not compared" in line and "12 case(s) without a partner" in line


def test_a_case_is_paired_once_by_its_first_answer():
    base = answers([True, False], samples=3)
    new = base.with_columns(correct=pl.when(pl.col("sample_index") > 0).then(
        ~pl.col("correct")).otherwise(pl.col("correct")))  # fmt: skip
    row = only(compare_runs(base, new), model="m")
    assert (row["n"], row["lost"], row["gained"], row["n_base_only"]) == (2, 0, 0, 0)


def case_answers(rng, share_right, samples, model="m"):
    """A run's answers: each case answered `samples` times, right with its own probability."""
    right = rng.random((len(share_right), samples)) < share_right[:, None]
    rows = [(model, "objects", "p0", f"c{i}", s, bool(right[i, s]))
            for i in range(len(share_right)) for s in range(samples)]  # fmt: skip
    return pl.DataFrame(rows, orient="row", schema={
        "model": pl.String, "manifold": pl.String, "point_key": pl.String,
        "case_id": pl.String, "sample_index": pl.Int64, "correct": pl.Boolean})  # fmt: skip


def test_samples_of_a_case_are_not_independent_pairs():
    """A fresh-eyes review: two equally good models (each case's chance of a right answer
    drawn from Beta(0.3, 0.3): some cases easy, some hard), 50 cases x 5 samples. Pairing
    every sample said "regression" or "improvement" in 26% of comparisons at alpha 0.05.
    Each night is a model of its own, so that one count of all the nights' answers (as
    compare_runs counts them) serves 120 comparisons, each compared alone."""
    rng = np.random.default_rng(2)
    nights = [f"night {i}" for i in range(120)]
    base, new = (pl.concat([case_answers(rng, rng.beta(0.3, 0.3, 50), 5, night)
                            for night in nights]) for _ in range(2))  # fmt: skip
    each = [f.with_columns(case_id=pl.format("{}-{}", "case_id", "sample_index"),
                           sample_index=pl.lit(0, pl.Int64)) for f in (base, new)]  # fmt: skip

    def verdicts(counts):
        return sum(compare_counts(counts.filter(model=night), "manifold", 0.05)["verdict"].item()
                   != "no change" for night in nights)  # fmt: skip

    said, naive = verdicts(counted_frames(base, new)), verdicts(counted_frames(*each))
    assert said / len(nights) <= 0.06, said
    assert naive / len(nights) >= 0.15, naive  # each sample taken for a case of its own


def test_grouping_by_point():
    base = pl.concat([answers([True] * 10, point_key="p0"),
                      answers([True] * 10, point_key="p1", start=10)])  # fmt: skip
    new = pl.concat([answers([True] * 10, point_key="p0"),
                     answers([False] * 10, point_key="p1", start=10)])  # fmt: skip
    by_point = compare_runs(base, new, by="point")
    assert by_point["point_key"].to_list() == ["p0", "p1"]
    assert by_point["verdict"].to_list() == ["no change", "regression"]
    assert compare_runs(base, new)["n"].to_list() == [20]


def test_two_models_pair_once_relabelled():
    source = Responses(
        [("r", "a", "objects", "p0", f"c{i}", 0, "correct") for i in range(20)]
        + [("r", "b", "objects", "p0", f"c{i}", 0, "wrong") for i in range(20)]
        + [("r", "c", "objects", "p0", f"c{i}", 0, "correct") for i in range(20)]
    )
    comparison = compare_stored(source, ("r", "r"), pairing=("a", "b", "a -> b"))
    assert comparison["model"].to_list() == ["a -> b"]
    assert comparison["verdict"].to_list() == ["regression"]
    assert comparison["n"].to_list() == [20]  # c is paired with nothing


def test_nothing_to_compare_is_an_empty_frame():
    empty = answers([])
    comparison = compare_runs(empty, empty)
    assert comparison.is_empty() and "verdict" in comparison.columns
    assert summary_line(comparison).endswith("over 0 paired cases")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"by": "weird"}, "by='weird'"), ({"alpha": 0.0}, "alpha=0.0"), ({"alpha": 1.5}, "alpha")],
)
def test_bad_options_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        compare_runs(answers([True]), answers([True]), **kwargs)


def test_missing_columns_and_duplicates_are_refused():
    with pytest.raises(ValueError, match="new answers lack column"):
        compare_runs(answers([True]), answers([True]).drop("correct"))
    twice = pl.concat([answers([True]), answers([False])])
    with pytest.raises(ValueError, match="appears twice"):
        compare_runs(twice, answers([True]))


def test_display_puts_each_estimate_with_its_interval():
    comparison = compare_runs(answers([True] * 50), answers([True] * 20 + [False] * 30))
    row = for_display(comparison).to_dicts()[0]
    assert row["new - base [95% CI]"].startswith("-0.600 [")
    assert row["verdict"] == "regression"
    assert "base only" not in row  # shown only where some group has unpaired answers


def test_the_lost_and_gained_lists_are_the_cases_the_test_counts():
    """A fresh-eyes review: the viewer's lists of lost and gained cases (and their counts)
    joined every sample after the comparison's table paired each case by its first answer:
    with 5 samples a case they said about 5 times the table's `lost`."""
    from numerate.store.browse import changed_cases

    sides = [("r1", lambda i: "correct"), ("r2", lambda i: "wrong" if i < 2 else "correct")]
    rows = [(run, "m", "objects", "p0", f"c{i}", s, outcome(i))
            for i in range(4) for s in range(5) for run, outcome in sides]  # fmt: skip
    source = Responses(rows)
    source.query = lambda sql, params=None: source.con.execute(sql, params or []).fetchall()
    lost, total = changed_cases(source, "r1", "r2", lost=True, offset=0, limit=50)
    [row] = compare_stored(source, ("r1", "r2")).to_dicts()
    assert total == row["lost"] == 2 and lost["sample_index"].to_list() == [0, 0]
    source.con.close()


class Responses:
    """A stand-in source: a DuckDB `responses` table of two runs, read like a Reader."""

    def __init__(self, rows):
        import duckdb

        self.con = duckdb.connect()
        self.con.execute(
            "CREATE TABLE responses (run_id VARCHAR, model VARCHAR, manifold VARCHAR, "
            "point_key VARCHAR, case_id VARCHAR, sample_index INTEGER, outcome VARCHAR)"
        )
        if rows:
            self.con.executemany("INSERT INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)", rows)

    def frame(self, sql, params=None):
        return self.con.sql(sql, params=params).pl()


@pytest.fixture
def two_nights():
    last = [("r1", "m", "objects", "p0", f"c{i}", 0, "correct") for i in range(30)]
    tonight = [("r2", "m", "objects", "p0", f"c{i}", 0, "wrong" if i < 20 else "correct")
               for i in range(30)]  # fmt: skip
    other = [("r3", "m", "objects", "p0", f"x{i}", 0, "correct") for i in range(3)]
    source = Responses(last + tonight + other)
    yield source
    source.con.close()


def test_the_summary_s_compare_command_gives_the_alpha_as_given(two_nights):
    """A review: the artifact's `numerate compare ... --alpha` wrote 0.9999999999999999 as
    1, a command that `--alpha` refuses."""
    from numerate.results.artifacts import comparison_lines

    [said, *_] = comparison_lines(two_nights, "r1", "r2", 1 - 2**-53)
    assert "(`numerate compare r1 r2 --alpha 0.9999999999999999`)" in said


def test_two_stored_runs_are_compared_with_their_filters(two_nights):
    row = only(compare_stored(two_nights, ("r1", "r2")), model="m")
    assert (row["n"], row["lost"], row["new_correct"], row["verdict"]) == (
        30, 20, 10, "regression"
    )  # fmt: skip
    assert compare_stored(two_nights, ("r1", "r2"), models=["other"]).is_empty()
    assert compare_stored(two_nights, ("r1", "r2"), manifolds=["objects"])["n"].to_list() == [30]
    assert compare_stored(two_nights, ("r1", "r2"), manifolds=["shuffle"]).is_empty()
    alone = only(compare_stored(two_nights, ("r1", "nope")), model="m")
    assert (alone["n_base_only"], alone["note"]) == (30, "only in the base run")


def reference_counts(base, new):
    """Each grid point's counts written out a pair at a time: what compared_counts must give."""
    counts = {}
    for key in sorted(k for k in set(base) | set(new) if k[4] == 0):  # a case's first answer
        point = counts.setdefault(key[:3], dict.fromkeys(
            ["n", "n_base_only", "n_new_only", "n_errors", "base_correct", "new_correct",
             "lost", "gained"], 0))  # fmt: skip
        if key not in new:
            point["n_base_only"] += 1
        elif key not in base:
            point["n_new_only"] += 1
        elif base[key] is None or new[key] is None:
            point["n_errors"] += 1
        else:
            was, now = base[key], new[key]
            point["n"] += 1
            point["base_correct"] += was
            point["new_correct"] += now
            point["lost"] += was and not now
            point["gained"] += now and not was
    return [{"model": k[0], "manifold": k[1], "point_key": k[2], **v} for k, v in counts.items()]


RIGHT = {"correct": True, "wrong": False, "unparsed": False, "truncated": False, "error": None}
ANSWER = st.tuples(
    st.sampled_from(["a", "b"]), st.sampled_from(["p0", "p1", "p2"]), st.integers(0, 6),
    st.integers(0, 1),
)  # fmt: skip


@examples(40)
@given(
    base=st.dictionaries(ANSWER, st.sampled_from(sorted(RIGHT)), max_size=30),
    new=st.dictionaries(ANSWER, st.sampled_from(sorted(RIGHT)), max_size=30),
)
def test_stored_and_given_answers_are_counted_as_written_out(base, new):
    """The counts the statistics read, from a database (compared_counts: outcomes, two runs)
    and from frames (counted_frames), against the same counts written out a pair at a time."""

    def key(answer):
        model, point, case, sample = answer
        return model, "objects", point, f"{point}-c{case}", sample

    rows = [(run, *key(a), o) for run, side in (("r1", base), ("r2", new)) for a, o in side.items()]
    source = Responses(rows)
    sides = [{key(a): RIGHT[o] for a, o in side.items()} for side in (base, new)]
    expected = reference_counts(*sides)
    stored = compared_counts(source, ("r1", "r2"))
    assert stored.to_dicts() == expected
    frames = [
        pl.DataFrame([(*k, v) for k, v in side.items()], orient="row", schema={
            "model": pl.String, "manifold": pl.String, "point_key": pl.String,
            "case_id": pl.String, "sample_index": pl.Int64, "correct": pl.Boolean})
        for side in sides
    ]  # fmt: skip
    assert counted_frames(*frames).to_dicts() == expected
    source.con.close()


def test_a_small_point_that_changed_weighs_its_own_size_in_the_test():
    """p0: 200 pairs, none discordant; p1: 20 pairs, 4 lost. The mean of the per-point
    differences is -0.1 with variance ((4/20 - 0.2**2) / 20 + 0.000045) / 2**2 = 0.00201
    (p0's share of lost drawn toward the group's 0.1, to 1/110: (1/110 - 1/110**2) / 200
    = 0.000045) and spread 0.1 - 0.1**2 = 0.09: 0.09 / 0.00201 = 44.7 effective pairs, not
    220 (a fourth mutation sweep: the 220 passed every test)."""
    base = pl.concat([answers([True] * 200), answers([True] * 20, point_key="p1", start=200)])
    new = pl.concat([
        answers([True] * 200),
        answers([False] * 4 + [True] * 16, point_key="p1", start=200),
    ])  # fmt: skip
    row = only(compare_runs(base, new), model="m")
    assert row["n"] == 220 and row["difference"] == pytest.approx(-0.1)
    assert row["p_value"] == pytest.approx(mcnemar_exact(round(0.1 * 45), 0))  # 4 lost of 45


def test_a_point_of_one_pair_does_not_weigh_half_the_difference_at_no_cost():
    # p0: 400 pairs, 60 lost and 60 gained; p1: one pair, lost. Its variance at its own
    # shares is 0, so the group's difference of -0.5 was tested as 231 effective pairs
    # (p = 1e-39, "regression"): drawn toward the group's shares it is worth about one
    base = pl.concat([
        answers([True] * 60 + [False] * 60 + [True] * 280),
        answers([True], point_key="p1", start=400),
    ])  # fmt: skip
    new = pl.concat([
        answers([False] * 60 + [True] * 60 + [True] * 280),
        answers([False], point_key="p1", start=400),
    ])  # fmt: skip
    row = only(compare_runs(base, new), model="m")
    assert row["difference"] == pytest.approx(-0.5)
    assert row["p_value"] > 0.2 and row["verdict"] == "no change"


def test_small_points_beside_large_ones_keep_false_verdicts_near_alpha():
    # no change anywhere, 30% of pairs discordant by chance; three points of 200 pairs and
    # one of a single pair: 32% of such comparisons said "regression" or "improvement".
    # The statistics alone, on counted points (compare_runs counts them as above)
    rng = np.random.default_rng(7)
    verdicts = 0
    for _ in range(300):
        points = []
        for n in (200, 200, 200, 1):
            changed = int(rng.binomial(n, 0.3))
            lost = int(rng.binomial(changed, 0.5))
            alike = int(rng.binomial(n - changed, 0.5))  # concordant pairs right in both runs
            points.append({"n": n, "n_base_only": 0, "n_new_only": 0, "n_errors": 0,
                           "base_correct": alike + lost, "new_correct": alike + changed - lost,
                           "lost": lost, "gained": changed - lost})  # fmt: skip
        [row] = compare_groups({("m", "objects"): points}, ["model", "manifold"], 0.05)
        verdicts += row["verdict"] != "no change"
    assert verdicts / 300 <= 0.08, verdicts


def test_a_group_outside_the_family_would_join_it_to_be_flagged():
    """Beside one group with discordant pairs (a family of one), a group without any says
    the drop it would catch joining the family (of two): a larger one than alone."""
    changed = answers([True] * 6 + [True] * 94, manifold="a")
    same = answers([True] * 100, manifold="b")
    alone = only(compare_runs(same, same), manifold="b")["detectable_drop"]
    both = compare_runs(pl.concat([changed, same]), pl.concat([
        answers([False] * 6 + [True] * 94, manifold="a"), same]))  # fmt: skip
    beside = only(both, manifold="b")["detectable_drop"]
    assert beside == pytest.approx(minimum_detectable_drop(100, 0, 0.05, family=2))
    assert beside > alone == pytest.approx(minimum_detectable_drop(100, 0, 0.05, family=1))


def test_effective_counts_rounded_past_the_effective_pairs_still_say_a_drop():
    """p0: one pair, gained; p1: two pairs, both lost. Rounded, the effective counts are 2
    lost and 2 gained of 3 effective pairs: the drop it would catch is asked of 3 discordant
    pairs of 3 (asked of 4, a ValueError ended the comparison; a fourth mutation sweep)."""
    base = pl.concat([answers([False]), answers([True, True], point_key="p1", start=1)])
    new = pl.concat([answers([True]), answers([False, False], point_key="p1", start=1)])
    row = only(compare_runs(base, new), model="m")
    assert row["p_value"] == pytest.approx(mcnemar_exact(2, 2))
    assert row["detectable_drop"] is None  # too few pairs for any


@pytest.mark.parametrize(
    ("difference", "p_holm", "verdict"),
    [(-0.2, 0.05, "no change"), (-0.2, 0.0499, "regression"), (0.2, 0.01, "improvement"),
     (0.0, 0.01, "no change"), (None, 0.01, None), (-0.2, None, None)],
)  # fmt: skip
def test_a_verdict_needs_a_difference_and_p_holm_below_alpha(difference, p_holm, verdict):
    from numerate.results.compare import _verdict

    assert _verdict(difference, p_holm, 0.05) == verdict


def test_the_line_quotes_the_largest_drop_that_would_have_been_caught():
    comparison = pl.DataFrame({"model": ["m", "m"], "manifold": ["a", "b"], "p_holm": [0.5, 0.5],
                               "detectable_drop": [0.05, 0.195]})  # fmt: skip
    assert detectable_line(comparison).startswith("a drop of 20 points or more in any model")


def test_alpha_is_between_0_and_1_excluded():
    for alpha in (0.0, 1.0):
        with pytest.raises(ValueError, match=rf"^alpha={alpha}: need 0 < alpha < 1$"):
            compare_runs(answers([True]), answers([True]), alpha=alpha)
