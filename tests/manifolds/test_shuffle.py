import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.manifolds import registry
from numerate.manifolds.common import AnchorFormat, point_seed
from numerate.manifolds.grading import Outcome
from numerate.manifolds.shuffle import (
    CONFOUNDING_TEMPLATES,
    DOMAINS,
    Domain,
    ShuffleGenerationParams,
    apply_swaps,
    chance_level,
    generate,
    grade,
)
from tests.examples import examples

MANIFOLD = registry.get("shuffle")


def params_strategy():
    return st.builds(
        ShuffleGenerationParams,
        count=st.just(8),
        length=st.integers(3, 12),
        max_depth=st.integers(1, 12),
        confounding_count=st.integers(0, 5),
        anchor=st.sampled_from(list(AnchorFormat)),
        adjective_prob=st.sampled_from([0.0, 0.5, 1.0]),
    )


# ---------------------------------------------------------------- the five standard tests


@given(params_strategy(), st.integers(0, 2**62), st.integers(0, 10**6))
def test_same_seed_same_case(params, seed, index):
    assert generate(params, seed, index) == generate(params, seed, index)


@examples(400)
@given(params_strategy(), st.integers(0, 2**62))
def test_invariants_and_independent_answer(params, base_seed):
    seed = point_seed("shuffle", params, base_seed)
    for index in range(params.count):
        case = generate(params, seed, index)
        domain = DOMAINS[Domain(case.domain)]
        assert len(case.people) == len(case.items) == params.length
        assert len(set(case.items)) == len(case.items)
        assert sorted(case.response_enum) == sorted(case.items)
        assert len(case.swaps) == params.max_depth
        assert all(a != b and {a, b} <= set(case.people) for a, b in case.swaps)
        # the same pair never twice in a row (it would undo itself)
        assert all({a, b} != {c, d} for (a, b), (c, d) in itertools.pairwise(case.swaps))
        assert case.query_person in case.people
        # independent simulation: positions of items, not a dict of holders
        order = list(case.items)
        for a, b in case.swaps:
            i, j = case.people.index(a), case.people.index(b)
            order[i], order[j] = order[j], order[i]
        assert case.target == order[case.people.index(case.query_person)]
        assert case.target in case.response_enum
        # the text: every swap in order, confounders where the indices say
        statements = statement_lines(case.input, params)
        assert len(statements) == params.max_depth + params.confounding_count
        swaps_in_text = [s for i, s in enumerate(statements) if i not in case.confounding_indices]
        assert len(case.confounding_indices) == params.confounding_count
        assert 0 not in case.confounding_indices  # confounders come after the first swap
        for sentence, (a, b) in zip(swaps_in_text, case.swaps, strict=True):
            assert f"{a} and {b} {domain.verb}" in sentence
        for i in case.confounding_indices:
            assert domain.verb not in statements[i]
            assert matches_a_template(statements[i])
        for person, item in zip(case.people, case.items, strict=True):
            assert person in case.input and item in case.input
        assert grade(case, f"Answer: {case.target}").outcome is Outcome.CORRECT


def statement_lines(text: str, params: ShuffleGenerationParams) -> list[str]:
    body = text.split("\n\n")[1]
    if params.anchor is AnchorFormat.NONE:
        _, rest = body.split(". ", 1)
        return [s for s in re.split(r"(?<=\.) ", rest)]
    lines = body.split("\n")[1:]
    return [line.split(" ", 1)[1] for line in lines]


def matches_a_template(statement: str) -> bool:
    statement = statement.rstrip(".")
    for template in CONFOUNDING_TEMPLATES:
        pattern = (
            re.escape(template).replace(r"\{person1\}", r"\w+").replace(r"\{person2\}", r"\w+")
        )
        if re.fullmatch(pattern, statement):
            return True
    return False


def test_grader_credits_the_cases_own_target():
    for case in MANIFOLD.cases(ShuffleGenerationParams(count=300, adjective_prob=0.5), 1):
        assert grade(case, case.target).outcome is Outcome.CORRECT
        assert grade(case, f"Answer: {case.target.upper()}").outcome is Outcome.CORRECT


# ---------------------------------------------------------------- vocabulary


def test_domains_and_templates_match_the_spec():
    sizes = {d.value: len(text.items) for d, text in DOMAINS.items()}
    assert sizes == {"DANCING": 18, "BOOKS": 18, "SOCCER": 18, "GIFTS": 12, "BALLS": 18}
    assert {d: t.verb for d, t in DOMAINS.items()} == {
        Domain.DANCING: "switch partners",
        Domain.BOOKS: "swap books",
        Domain.SOCCER: "trade positions",
        Domain.GIFTS: "swap presents",
        Domain.BALLS: "swap balls",
    }
    assert len(CONFOUNDING_TEMPLATES) == 12
    for text in DOMAINS.values():
        assert len(set(text.items)) == len(text.items)


def test_every_domain_appears():
    params = ShuffleGenerationParams(count=200)
    domains = {c.domain for c in MANIFOLD.cases(params, 3)}
    assert domains == {d.value for d in Domain}


def test_chance_level():
    assert chance_level(ShuffleGenerationParams(length=5)) == 0.2


# ---------------------------------------------------------------- goldens from the spec


def test_spec_example_books():
    people = ["Alice", "Bob", "Claire", "Dave"]
    items = ["Catch-22", "Frankenstein", "The Pearl", "Moby Dick"]
    swaps = [("Alice", "Claire"), ("Bob", "Dave"), ("Claire", "Bob")]
    assert apply_swaps(people, items, swaps) == {
        "Alice": "The Pearl", "Bob": "Catch-22", "Claire": "Moby Dick", "Dave": "Frankenstein",
    }  # fmt: skip


def test_spec_example_soccer_with_confounding():
    people = ["Alice", "Bob", "Claire", "Dave", "Eve"]
    items = ["goalkeeper", "striker", "midfielder", "defender", "fullback"]
    swaps = [("Alice", "Bob"), ("Dave", "Eve"), ("Claire", "Alice")]
    assert apply_swaps(people, items, swaps)["Dave"] == "fullback"


def test_spec_example_gifts():
    people = ["Alice", "Bob", "Claire"]
    items = ["gold box", "silver vase", "wooden toy"]
    final = apply_swaps(people, items, [("Alice", "Bob"), ("Bob", "Claire")])
    assert final == {"Alice": "silver vase", "Bob": "wooden toy", "Claire": "gold box"}


def test_roman_anchor_renders_like_the_spec():
    params = ShuffleGenerationParams(length=3, max_depth=2, anchor=AnchorFormat.ROMAN, count=50)
    case = next(c for c in MANIFOLD.cases(params, 0) if c.domain == "GIFTS")
    assert "swap presents.\nI. First, " in case.input
    assert "\nII. Finally, " in case.input


# ---------------------------------------------------------------- grader over model outputs


def books_case():
    params = ShuffleGenerationParams(count=1, length=4, adjective_prob=0.0)
    case = next(MANIFOLD.cases(params, 0))
    return case.model_copy(
        update={
            "domain": "BOOKS",
            "items": ["Catch-22", "Frankenstein", "The Pearl", "Moby Dick"],
            "response_enum": ["Catch-22", "Frankenstein", "The Pearl", "Moby Dick"],
            "target": "The Pearl",
        }
    )


def balls_case():
    case = books_case()
    items = ["bouncy red ball", "blue ball", "shiny green ball", "yellow ball"]
    return case.model_copy(
        update={"domain": "BALLS", "items": items, "response_enum": items, "target": "blue ball"}
    )


def soccer_case():
    case = books_case()
    items = ["striker", "second striker", "veteran goalkeeper", "defender"]
    return case.model_copy(
        update={"domain": "SOCCER", "items": items, "response_enum": items, "target": "striker"}
    )


BOOKS_TABLE = [
    ("Answer: The Pearl", Outcome.CORRECT, "The Pearl"),
    ("Answer: the pearl", Outcome.CORRECT, "The Pearl"),
    ("Answer: Pearl", Outcome.CORRECT, "The Pearl"),
    ("Answer: *The Pearl*", Outcome.CORRECT, "The Pearl"),
    ("**Answer:** The Pearl.", Outcome.CORRECT, "The Pearl"),
    ("Final answer: Alice has The Pearl.", Outcome.CORRECT, "The Pearl"),
    (
        "After swap 1 Alice has The Pearl.\nAfter swap 3 she still has it.\nAnswer: The Pearl",
        Outcome.CORRECT,
        "The Pearl",
    ),
    (
        "<think>Alice starts with Catch-22...</think>\n\nAnswer: The Pearl",
        Outcome.CORRECT,
        "The Pearl",
    ),
    ("\\boxed{\\text{The Pearl}}", Outcome.CORRECT, "The Pearl"),
    ("Alice ends up with **The Pearl**", Outcome.CORRECT, "The Pearl"),
    ("The Pearl", Outcome.CORRECT, "The Pearl"),
    ("Answer: catch-22", Outcome.WRONG, "Catch-22"),
    ("Answer: Catch 22", Outcome.WRONG, "Catch-22"),
    ("Answer: Moby Dick", Outcome.WRONG, "Moby Dick"),
    ("Answer: FRANKENSTEIN", Outcome.WRONG, "Frankenstein"),
    (
        "Answer: Frankenstein\nActually, let me recheck.\nAnswer: The Pearl",
        Outcome.CORRECT,
        "The Pearl",
    ),
    ("Answer: War and Peace", Outcome.UNPARSED, None),  # not an item of this case
    ("Answer: either The Pearl or Moby Dick", Outcome.UNPARSED, None),
    ("", Outcome.UNPARSED, None),
    ("I cannot determine this.", Outcome.UNPARSED, None),
]
BALLS_TABLE = [
    ("Answer: blue ball", Outcome.CORRECT, "blue ball"),
    ("Answer: Blue", Outcome.CORRECT, "blue ball"),
    ("Answer: the blue ball", Outcome.CORRECT, "blue ball"),
    ("Answer: red ball", Outcome.WRONG, "bouncy red ball"),
    ("Answer: bouncy red ball", Outcome.WRONG, "bouncy red ball"),
    ("Answer: the red one", Outcome.WRONG, "bouncy red ball"),
    ("Answer: green", Outcome.WRONG, "shiny green ball"),
    ("Answer: purple ball", Outcome.UNPARSED, None),
]
SOCCER_TABLE = [
    ("Answer: striker", Outcome.CORRECT, "striker"),
    ("Answer: Striker.", Outcome.CORRECT, "striker"),
    ("Answer: second striker", Outcome.WRONG, "second striker"),
    ("Answer: goalkeeper", Outcome.WRONG, "veteran goalkeeper"),
    ("Answer: Veteran Goalkeeper", Outcome.WRONG, "veteran goalkeeper"),
    ("Dave is playing **defender**", Outcome.WRONG, "defender"),
]


@pytest.mark.parametrize(
    ("make_case", "output", "outcome", "answer"),
    [(books_case, *row) for row in BOOKS_TABLE]
    + [(balls_case, *row) for row in BALLS_TABLE]
    + [(soccer_case, *row) for row in SOCCER_TABLE],
)
def test_grader_on_model_outputs(make_case, output, outcome, answer):
    verdict = grade(make_case(), output)
    assert (verdict.outcome, verdict.answer) == (outcome, answer)
