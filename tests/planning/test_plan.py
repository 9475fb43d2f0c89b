"""Planning: flat planned cases that agree with the cases they stand for; the collector setting
a sweep runs under."""

import dataclasses
import gc
import json
import pickle
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.config.env import FULL_PASS_EVERY, startup_objects_frozen
from numerate.config.sweep import parse_sweep_config
from numerate.kernel.errors import ConfigError
from numerate.kernel.inputs import MAX_CASE_DATA_CHARS, MAX_FIELD_CHARS, MAX_PROMPT_CHARS
from numerate.manifolds import registry
from numerate.planning.adaptive import Sampler
from numerate.planning.plan import (
    REPEATED,
    CaseRange,
    PlannedCase,
    PlannedPoint,
    PointFloor,
    case_json,
    case_row,
    first_case_ids,
    made_cases,
    plan_manifold,
    plan_points,
    stored_ids,
)
from tests.examples import examples

MANIFOLD_GRIDS = {
    "objects": {"length": [2, 7], "distractor_count": [0, 3]},
    "shuffle": {"length": [3, 5]},
    "sequence": {"seq_length": [1, 3]},
}


def planned(manifold, seed, count=3):
    config = parse_sweep_config(
        {
            "name": "t",
            "models": [{"name": "b", "model": "baseline:oracle"}],
            "manifolds": [{"manifold": manifold, "count": count, "grid": MANIFOLD_GRIDS[manifold]}],
        }
    )
    return plan_manifold(config.manifolds[0], seed)


def longest_shuffle_point():
    """The Shuffle Tracking point of the longest prompts a config may give: 200 swaps, 200
    other statements, each with an anchor prefix and suffix as long as the point's name (at
    most MAX_FIELD_CHARS) allows."""
    fixed = {"anchor": "NUMERIC", "max_depth": 200, "confounding_count": 200, "length": 4}
    filler = (MAX_FIELD_CHARS - 95) // 2  # the rest of the name: 89 characters
    config = parse_sweep_config({
        "name": "t",
        "models": [{"name": "b", "model": "baseline:oracle"}],
        "manifolds": [{"manifold": "shuffle", "count": 1, "grid": {
            **{name: [value] for name, value in fixed.items()},
            "anchor_prefix": ["p" * filler], "anchor_suffix": ["s" * filler],
        }}],
    })  # fmt: skip
    [(key, params)] = config.manifolds[0].points()
    return key, params


def test_the_longest_prompt_a_config_may_ask_for_is_within_what_a_case_may_hold():
    """Before: such a point's cases (about 4,000,000 characters of prompt) were stored by its
    run, then every ingest of the run's shards refused them (a bound of 200,000)."""
    key, params = longest_shuffle_point()
    assert MAX_FIELD_CHARS - 10 < len(key) <= MAX_FIELD_CHARS  # at its own bound
    spec = registry.get("shuffle")
    item = PlannedCase.of(spec.generate(params, 1, 0), PointFloor(0.25, 0.25), key, "v")
    assert 3_900_000 < len(item.input) <= MAX_PROMPT_CHARS
    assert len(item.data) <= MAX_CASE_DATA_CHARS


@pytest.mark.parametrize(
    ("field", "said"),
    [("input", "case 3's prompt is 8,000,001 characters, more than the 8,000,000"),
     ("target_categories", "case 3's own fields (its data, as JSON) is 200,")],
)  # fmt: skip
def test_a_case_beyond_what_a_case_may_hold_is_refused_as_it_is_made(field, said):
    """A registered manifold may make any case: one its run's shards could not carry is
    refused where it is made, naming its point and index, not stored."""
    spec = registry.get("objects")
    case = spec.generate(spec.params(), 7, 3)
    at_bound = {"input": "x" * MAX_PROMPT_CHARS, "target_categories": ["x" * 199_000]}
    assert PlannedCase.of(case.model_copy(update={field: at_bound[field]}),
                          PointFloor(0.1, 0.1), "length=4", "v")  # fmt: skip
    beyond = {"input": "x" * (MAX_PROMPT_CHARS + 1), "target_categories": ["x" * 200_000]}
    with pytest.raises(ConfigError, match=r"^objects grid point length=4: ") as error:
        PlannedCase.of(case.model_copy(update={field: beyond[field]}),
                       PointFloor(0.1, 0.1), "length=4", "v")  # fmt: skip
    assert said in str(error.value)


@examples(20)
@given(manifold=st.sampled_from(sorted(MANIFOLD_GRIDS)), seed=st.integers(0, 2**31))
def test_a_planned_case_carries_the_fields_of_the_case_it_stands_for(manifold, seed):
    for item in planned(manifold, seed):
        case = item.case
        fresh = registry.get(manifold).generate(
            registry.get(manifold).params(**case.params), case.seed, case.index
        )
        assert case == fresh
        model = registry.get(manifold).case_model
        assert (item.manifold, item.seed, item.index) == (case.manifold, case.seed, case.index)
        assert (item.input, item.target) == (case.input, case.target)
        assert item.chance == max(item.chance_random, item.chance_heuristic)  # the floor to beat
        assert json.loads(item.params) == case.params
        # its data is the rest of the case: no field twice, none lost
        data = json.loads(item.data)
        assert set(data) == set(fresh.model_dump()) - REPEATED
        assert data == {k: v for k, v in fresh.model_dump(mode="json").items() if k in data}
        row = case_row(item)
        assert row["params"] == json.dumps(case.params, sort_keys=True)
        assert (row["case_index"], row["data"]) == (case.index, item.data)
        whole = case_json(row["manifold"], row["case_index"], row["seed"], row["params"],
                          row["input"], row["target"], row["data"])  # fmt: skip
        assert model.model_validate_json(whole) == fresh  # the row's text round-trips
        bare = dataclasses.replace(item, parsed=None)
        assert bare.case == fresh  # parsed from its fields and its data
    # a data object holding nothing, written with space inside (a row of another writer)
    empty = json.loads(case_json("objects", 0, 1, "{}", "x", "3", "{ }"))
    assert empty == {"manifold": "objects", "index": 0, "seed": 1, "params": {}, "input": "x",
                     "target": "3"}  # fmt: skip


@examples(30)
@given(
    manifold=st.sampled_from(sorted(MANIFOLD_GRIDS)),
    seed=st.integers(0, 2**31),
    start=st.integers(0, 9),
    stop=st.integers(0, 12),
)
def test_a_points_cases_are_generated_from_any_index_as_the_whole_plan_has_them(
    manifold, seed, start, stop
):
    config = parse_sweep_config(
        {
            "name": "t",
            "models": [{"name": "b", "model": "baseline:oracle"}],
            "manifolds": [{"manifold": manifold, "count": 9, "grid": MANIFOLD_GRIDS[manifold]}],
        }
    )
    entry = config.manifolds[0]
    points = plan_points(entry, seed)
    whole = plan_manifold(entry, seed)
    assert [c for p in points for c in p.cases()] == whole
    assert len(whole) == 9 * len(points)
    for n, point in enumerate(points):
        assert point.cases(start, stop) == whole[n * 9 : (n + 1) * 9][start:stop]
        ids = [case.case_id for case in whole[n * 9 : (n + 1) * 9][start:stop]]
        assert point.case_ids(start, stop) == ids  # none past its count (stop up to 12)


def test_a_plan_of_a_million_cases_holds_its_points_not_its_cases():
    config = parse_sweep_config(
        {
            "name": "t",
            "models": [{"name": "b", "model": "baseline:oracle"}],
            "manifolds": [
                {"manifold": "sequence", "count": 250_000, "grid": {"seq_length": [1, 2, 3, 4]}}
            ],
        }
    )
    points = plan_points(config.manifolds[0], 1)
    sampler = Sampler([(None, points)])
    assert sampler.opened == 1_000_000
    assert len(sampler.queue) == len(points) == 4  # a range of cases per point
    first = sampler.take(1000)
    assert [(part.point, part.start, part.stop) for part in first] == [(points[0], 0, 1000)]
    assert [c.index for c in first[0].cases()] == list(range(1000))
    assert sampler.queue[0][1:] == (1000, 250_000)


def test_planned_cases_survive_pickling():
    cases = planned("objects", 5)
    assert pickle.loads(pickle.dumps(cases)) == cases


def test_a_planned_case_keeps_the_case_it_was_made_from_and_a_rebuilt_one_parses_its_json():
    item = planned("shuffle", 1, count=1)[0]
    assert item.case is item.case  # grading reads the generated case, not its JSON again
    rebuilt = dataclasses.replace(item, parsed=None)  # as from its fields alone
    assert rebuilt == item
    assert rebuilt.case is not rebuilt.case  # parsed at each call, never kept
    assert rebuilt.case == item.case
    assert not hasattr(item, "__dict__")


def test_a_case_whose_parameters_are_not_its_points_has_its_own_written():
    item = planned("objects", 3, count=1)[0]
    case = item.case
    point = (dict(case.params), item.params)
    assert PlannedCase.of(case, PointFloor(0.1, 0.2), "k", "v", point).params is item.params
    other = case.model_copy(update={"params": {**case.params, "extra": 1}})
    made = PlannedCase.of(other, PointFloor(0.1, 0.2), "k", "v", point)
    assert json.loads(made.params) == {**case.params, "extra": 1}
    assert made.params == json.dumps(other.params, sort_keys=True)


def test_objects_stay_frozen_and_full_passes_rare_until_the_outermost_block_ends():
    if gc.get_freeze_count():
        pytest.skip("something else froze objects in this process")
    # Frozen objects that something frees meanwhile (another test's thread) leave the count:
    # an inner block that unfroze would take it to 0, so half of it is the line to hold.
    before = gc.get_threshold()
    with startup_objects_frozen():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with startup_objects_frozen():
            assert gc.get_freeze_count() > frozen // 2
        assert gc.get_freeze_count() > frozen // 2
        assert gc.get_threshold() == (*before[:2], max(before[2], FULL_PASS_EVERY))
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


def test_an_error_inside_the_block_unfreezes():
    if gc.get_freeze_count():
        pytest.skip("something else froze objects in this process")
    with pytest.raises(RuntimeError), startup_objects_frozen():
        raise RuntimeError("boom")
    assert gc.get_freeze_count() == 0


_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)


@examples(60)
@given(
    base_url=st.sampled_from(["http://127.0.0.1:8000/v1", "https://api.example.com/v1/"]),
    revision=st.none() | _text.filter(str.strip),
    system=st.none() | _text.filter(str.strip),
    inputs=st.lists(_text, min_size=1, max_size=4),
    sampling=st.fixed_dictionaries(
        {"temperature": st.sampled_from([0.0, 0.7]), "samples": st.integers(1, 3)},
        optional={"top_p": st.sampled_from([0.5, 1.0]), "seed": st.integers(0, 2**31)},
    ),
)
def test_request_keys_hash_the_whole_request_in_sorted_json(
    base_url, revision, system, inputs, sampling
):
    """The key of a stored answer: SHA-256 of {endpoint, messages, model, revision, sample,
    sampling} as sorted, compact JSON. The serialised-once parts give exactly these bytes."""
    import hashlib

    from numerate.config.sweep import ModelConfig
    from numerate.planning.plan import request_hasher

    model = ModelConfig.model_validate({
        "name": "m", "model": "org/model", "base_url": base_url, "revision": revision,
        "system_prompt": system, "sampling": sampling,
    })  # fmt: skip
    for sample in range(model.sampling.samples):
        hasher = request_hasher(model, sample)
        for text in inputs:
            messages = [{"role": "user", "content": text}]
            if system:
                messages.insert(0, {"role": "system", "content": system})
            whole = json.dumps(
                {"endpoint": base_url, "model": "org/model", "revision": revision,
                 "messages": messages, "sampling": model.sampling.request_fields(sample),
                 "sample": sample},
                sort_keys=True, separators=(",", ":"),
            )  # fmt: skip
            expected = hashlib.sha256(whole.encode()).hexdigest()
            assert hasher(messages) == expected


def test_a_point_whose_floors_are_stored_takes_them_and_the_others_are_measured(monkeypatch):
    """A re-run does not measure again what its stored cases carry (2 x HEURISTIC_SAMPLE cases
    generated and graded a point, every run); a point not found is measured as before."""
    config = parse_sweep_config(
        {
            "name": "t",
            "models": [{"name": "b", "model": "baseline:oracle"}],
            "manifolds": [{"manifold": "objects", "count": 3, "grid": {"length": [2, 7]}}],
        }
    )
    entry = config.manifolds[0]
    measured = plan_points(entry, 5, "v1")
    first, second = first_case_ids(entry, 5, "v1")
    assert [first, second] == [point.cases(0, 1)[0].case_id for point in measured]
    spec = registry.get("objects")
    calls = []
    real = type(spec).heuristic_level

    def counted(self, params, seed):
        calls.append(seed)
        return real(self, params, seed)

    monkeypatch.setattr(type(spec), "heuristic_level", counted)
    stored = PointFloor(0.25, 0.5)
    points = plan_points(entry, 5, "v1", {first: stored, "objects-other-0": PointFloor(1, 1)})
    assert [point.floor for point in points] == [stored, measured[1].floor]
    assert calls == [measured[1].seed]  # the stored point was not measured


def test_planning_tells_its_caller_after_each_point_and_the_flow_says_it_with_the_time_left(
    monkeypatch,
):
    """A grid of 1,620 points planned for minutes under a bar that said "0/0" and nothing of
    the points (a hostile sweep): each point planned is now told, and the progress line says
    how many of the entry's are planned and, past 2 s, about how long the rest will take."""
    from numerate.flows import sweep as flow
    from numerate.kernel.progress import Progress, reporting_to

    config = parse_sweep_config(
        {
            "name": "t",
            "models": [{"name": "b", "model": "baseline:oracle"}],
            "manifolds": [{"manifold": "objects", "count": 1, "grid": {"length": [2, 3, 4]}}],
        }
    )
    told: list[tuple[int, int]] = []
    plan_points(config.manifolds[0], 5, "v1", planned=lambda *point: told.append(point))
    assert told == [(1, 3), (2, 3), (3, 3)]

    clock = iter([0.0, 0.1, 3.0, 3.1])  # started; then as each point is planned
    monkeypatch.setattr(flow, "time", types.SimpleNamespace(monotonic=lambda: next(clock)))
    steps: list[str] = []
    monkeypatch.setattr(Progress, "doing", lambda self, step: steps.append(step))
    with reporting_to(Progress()):
        said = flow.planning_said(config.manifolds[0], 1, 2)
        for done in (1, 2, 3):
            said(done, 3)
    head = "planning objects grid points (1/2)"
    # the first point came within half a second of the start: not said
    assert steps == [f"{head}: 0 of 3", f"{head}: 2 of 3, about 2 s left", f"{head}: 3 of 3"]


@pytest.mark.parametrize("manifold", sorted(MANIFOLD_GRIDS))
def test_stored_cases_are_read_back_as_the_cases_their_generator_makes(manifold, monkeypatch):
    config = parse_sweep_config(
        {
            "name": "t",
            "models": [{"name": "b", "model": "baseline:oracle"}],
            "manifolds": [{"manifold": manifold, "count": 6, "grid": MANIFOLD_GRIDS[manifold]}],
        }
    )
    point = dataclasses.replace(plan_points(config.manifolds[0], 9, "v1")[0], stored=True)
    generated = point.cases()
    rows = {case.case_id: case_row(case) for case in generated}
    ranges = [CaseRange(point, 0, 2), CaseRange(point, 2, 6)]
    assert stored_ids(ranges) == [case.case_id for case in generated]
    with monkeypatch.context() as patched:
        patched.setattr(PlannedPoint, "cases", lambda *_: pytest.fail("generated"))
        read = made_cases(ranges, rows)
    assert read == generated  # every field (`parsed` aside)
    assert [case.case for case in read] == [case.case for case in generated]

    del rows[generated[3].case_id]  # a range with a case not stored is generated
    old = generated[0].case_id  # a row stored before the two floors were
    rows[old] = {**rows[old], "chance_random": None}
    assert made_cases(ranges, rows) == generated
    not_ours = (
        {"data": "{not json"},
        # a row stored whole before schema 14 whose JSON is not the case its columns say
        {"data": generated[1].case.model_dump_json(), "input": "other"},
        {"generator_version": "0123456789abcdef"},  # ingested under the same id
        {"seed": point.seed + 1},
    )
    for damaged in not_ours:
        one = {generated[1].case_id: {**rows[generated[1].case_id], **damaged}}
        assert made_cases([CaseRange(point, 1, 2)], one) == generated[1:2]  # generated instead
    whole = {  # stored whole before schema 14, and what its columns say: read back
        generated[1].case_id: {
            **rows[generated[1].case_id],
            "data": generated[1].case.model_dump_json(),
        }
    }
    with monkeypatch.context() as patched:
        patched.setattr(PlannedPoint, "cases", lambda *_: pytest.fail("generated"))
        [back] = made_cases([CaseRange(point, 1, 2)], whole)
    assert back.case == generated[1].case

    dirty = dataclasses.replace(point, generator_version="v1+dirty")
    stored_elsewhere = {  # stored by a sweep whose grid named another axis: the same case
        i: {**row, "point_key": "length=2,max_count=5"} for i, row in rows.items()
    }
    with monkeypatch.context() as patched:
        patched.setattr(PlannedPoint, "cases", lambda *_: pytest.fail("generated"))
        [again] = made_cases([CaseRange(dirty, 2, 3)], stored_elsewhere)
    assert again.point_key == point.key  # the point's own key, which its run reads
    assert again == generated[2]
    unstored = dataclasses.replace(point, stored=False)
    assert stored_ids([CaseRange(unstored, 0, 6)]) == []


def test_a_zero_written_minus_zero_is_the_point_of_zero():
    """A hostile pass: `prob_adjective: [-0.0]` made other cases than `[0.0]` (the point's
    seed hashed `-0.0`), although the docs call them one value."""

    def planned(zero):
        entry = {"manifold": "objects", "count": 2, "grid": {"prob_adjective": [zero]}}
        models = [{"name": "o", "model": "baseline:oracle"}]
        sweep = parse_sweep_config({"name": "z", "models": models, "manifolds": [entry]})
        [entry] = sweep.manifolds
        return first_case_ids(entry, sweep.seed, "v")

    assert planned(-0.0) == planned(0.0)
