"""What every registered manifold must do, whatever it generates."""

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from numerate.manifolds import registry
from numerate.manifolds.common import CaseBase, point_seed
from numerate.manifolds.grading import Outcome
from tests.examples import examples

NAMES = registry.names()


def test_the_three_spec_manifolds_are_registered():
    assert NAMES == ["objects", "sequence", "shuffle"]


def test_unknown_and_duplicate_names_raise_clear_errors():
    with pytest.raises(registry.UnknownManifoldError, match=r"'nope' \(known: objects, "):
        registry.get("nope")
    with pytest.raises(registry.DuplicateManifoldError, match="'objects' is already registered"):
        registry.register(registry.get("objects"))


@pytest.mark.parametrize("name", NAMES)
def test_registry_finds_the_manifold_and_its_parts(name):
    manifold = registry.get(name)
    case = manifold.generate(manifold.params(), 1, 0)
    assert manifold.name == name == case.manifold
    assert isinstance(case, manifold.case_model) and isinstance(case, CaseBase)


@pytest.mark.parametrize("name", NAMES)
def test_smaller_count_is_a_prefix_of_a_larger_one(name):
    manifold = registry.get(name)
    small = list(manifold.cases(manifold.params(count=32), 7))
    large = list(manifold.cases(manifold.params(count=128), 7))
    assert small == large[:32]
    assert len({c.input for c in large}) > 100  # and the cases differ from one another


@pytest.mark.parametrize("name", NAMES)
def test_same_point_same_cases_other_seed_other_cases(name):
    manifold = registry.get(name)
    params = manifold.params(count=20)
    assert list(manifold.cases(params, 3)) == list(manifold.cases(params, 3))
    assert [c.input for c in manifold.cases(params, 3)] != [
        c.input for c in manifold.cases(params, 4)
    ]
    assert all(c.seed == point_seed(name, params, 3) for c in manifold.cases(params, 3))


@pytest.mark.parametrize("name", NAMES)
def test_grader_gives_full_credit_to_the_cases_own_target(name):
    manifold = registry.get(name)
    for case in manifold.cases(manifold.params(count=300), 11):
        for output in (case.target, f"Answer: {case.target}", f"<think>hmm</think>{case.target}"):
            verdict = manifold.grade(case, output)
            assert verdict.outcome is Outcome.CORRECT, (case.target, output)


@pytest.mark.parametrize("name", NAMES)
def test_grader_never_calls_a_missing_answer_wrong(name):
    manifold = registry.get(name)
    case = manifold.generate(manifold.params(), 1, 0)
    for output in ("", "I don't know.", "<think>still working", "Answer:"):
        assert manifold.grade(case, output).outcome is Outcome.UNPARSED


@pytest.mark.parametrize("name", NAMES)
def test_cases_survive_a_json_round_trip(name):
    manifold = registry.get(name)
    for case in manifold.cases(manifold.params(count=20), 5):
        assert manifold.case_model.model_validate(json.loads(case.model_dump_json())) == case


@pytest.mark.parametrize("name", NAMES)
def test_chance_level_is_a_probability(name):
    manifold = registry.get(name)
    assert 0.0 <= manifold.chance_level(manifold.params()) <= 1.0


@pytest.mark.parametrize("name", NAMES)
@given(text=st.text(max_size=400))
@examples(200)
def test_grading_never_raises_on_arbitrary_text(name, text):
    manifold = registry.get(name)
    case = manifold.generate(manifold.params(), 1, 0)
    verdict = manifold.grade(case, text)
    assert verdict.outcome in (Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSED)


INVALID_PARAMS = [
    ("objects", "count", 0), ("objects", "length", 0), ("objects", "max_count", -1),
    ("objects", "distractor_count", -1), ("objects", "target_groups", 0),
    ("objects", "target_groups", 12), ("objects", "prob_adjective", 1.5),
    ("objects", "anchor", "ELEMENTS"), ("objects", "anchor", "SIDEWAYS"),
    ("shuffle", "count", 0), ("shuffle", "length", 2), ("shuffle", "length", 13),
    ("shuffle", "max_depth", 0), ("shuffle", "confounding_count", -1),
    ("shuffle", "adjective_prob", -0.1), ("shuffle", "anchor", "SIDEWAYS"),
    ("sequence", "count", 0), ("sequence", "seq_length", 0), ("sequence", "seq_length", 21),
    ("sequence", "num_rules", 0), ("sequence", "rule_enable", 0), ("sequence", "rule_enable", 8),
    ("sequence", "start_length", 1),
]  # fmt: skip


@pytest.mark.parametrize(("name", "field", "value"), INVALID_PARAMS)
def test_invalid_params_raise_naming_field_and_value(name, field, value):
    with pytest.raises(ValidationError) as info:
        registry.get(name).params(**{field: value})
    problem = info.value.errors()[0]
    assert problem["loc"] == (field,)
    assert problem["input"] == value


def test_every_manifold_has_invalid_param_cases():
    assert {name for name, _, _ in INVALID_PARAMS} == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_the_trivial_strategy_answers_in_the_response_space_and_is_measured(name):
    manifold = registry.get(name)
    params = manifold.params()
    prior = manifold.heuristic_prior_of(params, 5)
    for case in manifold.cases(manifold.params(count=50), 5):
        verdict = manifold.grade(case, f"Answer: {manifold.heuristic(case, prior)}")
        assert verdict.outcome in (Outcome.CORRECT, Outcome.WRONG)  # never unparsed
    level = manifold.heuristic_level(params, 5)
    assert 0.0 <= level <= 1.0
    assert level == manifold.heuristic_level(params, 5)  # deterministic
    # reference cases are never the point's own cases
    own = {c.input for c in manifold.cases(manifold.params(count=200), 5)}
    assert not own & {c.input for c in manifold.reference_cases(params, 5, 1)}
    # measured on the reference cases of part 1, not on those it learnt from (part 0)
    graded = []

    def grade(case, text):
        graded.append(case.input)
        return manifold.grade(case, text)

    dataclasses.replace(manifold, grade=grade).heuristic_level(params, 5)
    assert graded == [c.input for c in manifold.reference_cases(params, 5, 1)]


def test_the_trivial_strategies_beat_guessing_where_the_issue_measured_it():
    """Shuffle at length 7 with 2 swaps: starting items score far above 1/7 (about 0.5);
    objects at length 4, max_count 5: the most common total beats 1/21."""
    shuffle = registry.get("shuffle")
    params = shuffle.params(length=7, max_depth=2)
    assert shuffle.heuristic_level(params, 1) > 2 * shuffle.chance_level(params)
    objects = registry.get("objects")
    params = objects.params(length=4, max_count=5)
    assert objects.heuristic_level(params, 1) > 1.5 * objects.chance_level(params)
