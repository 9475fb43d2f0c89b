import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from numerate.manifolds import registry
from numerate.manifolds.common import point_seed
from numerate.manifolds.grading import Outcome
from numerate.manifolds.sequence import (
    BASE_RULES,
    INTERFERENCE_RULES,
    TERM_LIMIT,
    SequenceGenerationParams,
    chance_level,
    continue_sequence,
    generate,
    grade,
    is_prime,
    rule_text,
)
from tests.examples import examples

MANIFOLD = registry.get("sequence")
CATEGORY_BITS = {"skip": 1, "modulo": 2, "conditions": 4}


def params_strategy():
    return st.builds(
        SequenceGenerationParams,
        count=st.just(8),
        seq_length=st.integers(1, 8),
        rule_enable=st.integers(1, 7),
        start_length=st.integers(2, 5),
    ).flatmap(
        lambda p: st.builds(
            lambda n: p.model_copy(update={"num_rules": n}),
            st.integers(1, sum(1 for c, _, _ in INTERFERENCE_RULES.values() if c & p.rule_enable)),
        )
    )


def reference_term(specs, terms):
    """The spec's rule semantics, written out again independently of manifolds.sequence."""
    n, prev = len(terms) + 1, terms[-1]
    base = specs[0]
    value = {
        "arithmetic": lambda: prev + base.get("step", 0),
        "geometric": lambda: prev * base.get("multiplier", 1),
        "square": lambda: prev**2,
        "fibonacci": lambda: prev + terms[-2] - base.get("offset", 0),
    }[base["kind"]]()
    for r in specs[1:]:
        k = r["kind"]
        if k == "divisible" and value % r["divisor"] == 0:
            value = prev + r["amount"]
        elif k == "contains_digit" and str(r["digit"]) in str(abs(value)):
            value = value + r["amount"]
        elif k == "prime" and value > 1 and all(value % d for d in range(2, int(value**0.5) + 1)):
            value = value * r["factor"]
        elif k == "every_nth" and n % r["n"] == 0:
            value = value + r["amount"]
        elif k == "odd_position" and n % 2 == 1:
            value = value + r["amount"]
        elif k == "previous_even" and prev % 2 == 0:
            value = value + r["amount"]
        elif k == "previous_odd" and prev % 2 == 1:
            value = value * r["factor"]
        elif k == "threshold_wrap" and value > r["threshold"]:
            value = r["wrap_to"]
        elif k == "digit_sum" and sum(int(c) for c in str(abs(value))) > r["limit"]:
            value = value - r["amount"]
    return value


# ---------------------------------------------------------------- the five standard tests


def test_more_rules_than_the_mask_allows():
    with pytest.raises(ValidationError, match="num_rules=3 exceeds the 2 distinct rule kinds"):
        SequenceGenerationParams(num_rules=3, rule_enable=2)


@given(params_strategy(), st.integers(0, 2**62), st.integers(0, 10**6))
def test_same_seed_same_case(params, seed, index):
    assert generate(params, seed, index) == generate(params, seed, index)


DOCUMENTED = {
    "arithmetic": {"step": (2, 8)}, "geometric": {"multiplier": (2, 4)}, "square": {},
    "fibonacci": {"offset": (1, 3)}, "divisible": {"divisor": (3, 9), "amount": (1, 5)},
    "contains_digit": {"digit": (0, 9), "amount": (2, 9)}, "prime": {"factor": (2, 3)},
    "every_nth": {"n": (2, 4), "amount": (1, 5)}, "odd_position": {"amount": (-3, 3)},
    "previous_even": {"amount": (1, 5)}, "previous_odd": {"factor": (2, 3)},
    "threshold_wrap": {"threshold": (20, 99), "wrap_to": (1, 9)},
    "digit_sum": {"limit": (8, 15), "amount": (2, 9)},
}  # fmt: skip
"""Each rule's parameters and the ranges they are drawn from, as docs/manifolds.md lists
them (odd_position's amount: ±1..3)."""
START_MAX = {"arithmetic": 20, "fibonacci": 20, "geometric": 10, "square": 5}
"""The largest starting term under each base rule (docs/manifolds.md; the least is 1)."""


@examples(500)
@given(params_strategy(), st.integers(0, 2**62))
def test_invariants_and_independent_answer(params, base_seed):
    seed = point_seed("sequence", params, base_seed)
    for index in range(params.count):
        case = generate(params, seed, index)
        specs = case.rule_specs
        assert specs[0]["category"] == "base" and specs[0]["kind"] in BASE_RULES
        assert len(specs) == case.depth == params.num_rules + 1 == len(case.rules)
        kinds = [s["kind"] for s in specs[1:]]
        assert len(set(kinds)) == len(kinds)
        order = [list(CATEGORY_BITS).index(s["category"]) for s in specs[1:]]
        assert order == sorted(order)
        for s in specs[1:]:
            assert CATEGORY_BITS[s["category"]] & params.rule_enable
            assert INTERFERENCE_RULES[s["kind"]][0] == CATEGORY_BITS[s["category"]]
        for spec in specs:
            drawn = {k: v for k, v in spec.items() if k not in ("category", "kind")}
            ranges = DOCUMENTED[spec["kind"]]
            assert drawn.keys() == ranges.keys(), spec
            for key, value in drawn.items():  # zero only as a digit (odd_position: ±1..3)
                low, high = ranges[key]
                assert low <= value <= high and (value != 0 or key == "digit"), spec
        assert all(1 <= t <= START_MAX[specs[0]["kind"]] for t in case.starting_sequence)
        for spec, text in zip(specs, case.rules, strict=True):
            numbers = [int(x) for x in re.findall(r"\d+", text)]
            for key, value in spec.items():
                if key not in ("category", "kind"):
                    assert abs(value) in numbers, (key, text)
        terms = list(case.starting_sequence)
        for _ in range(params.seq_length):
            terms.append(reference_term(specs, terms))
        expected = terms[params.start_length :]
        assert case.expected_next_terms == expected
        assert case.target == " ".join(map(str, expected))
        assert all(abs(t) <= TERM_LIMIT for t in expected)
        assert len(case.starting_sequence) == params.start_length
        assert f"Starting sequence: {' '.join(map(str, case.starting_sequence))}" in case.input
        assert all(text in case.input for text in case.rules)
        assert grade(case, f"Answer: {case.target}").outcome is Outcome.CORRECT


def test_every_rule_kind_is_drawn():
    params = SequenceGenerationParams(count=400, num_rules=3)
    seen = {s["kind"] for c in MANIFOLD.cases(params, 5) for s in c.rule_specs}
    assert seen == set(BASE_RULES) | set(INTERFERENCE_RULES)


def test_chance_level_is_zero():
    assert chance_level(SequenceGenerationParams()) == 0.0


@pytest.mark.parametrize("n", range(-5, 200))
def test_is_prime_against_trial_division(n):
    assert is_prime(n) == (n > 1 and all(n % d for d in range(2, n)))


def test_is_prime_on_large_numbers():
    assert is_prime(999_983) and is_prime(1_000_000_007) and not is_prime(999_983 * 1_000_003)


# ---------------------------------------------------------------- goldens from the spec


def test_spec_example_1_skip():
    specs = [
        {"category": "base", "kind": "arithmetic", "step": 3},
        {"category": "skip", "kind": "divisible", "divisor": 6, "amount": 2},
    ]
    assert continue_sequence(specs, [2, 5, 8], 3) == [11, 14, 17]


def test_spec_example_2_modulo_and_conditions():
    specs = [
        {"category": "base", "kind": "geometric", "multiplier": 2},
        {"category": "modulo", "kind": "every_nth", "n": 3, "amount": 5},
        {"category": "conditions", "kind": "previous_even", "amount": 3},
    ]
    assert continue_sequence(specs, [1, 2, 4], 2) == [11, 22]


def test_spec_example_3_follows_the_stated_order():
    # The spec prints 17 24 2 9, but 21 contains the digit 1: DESIGN.md settles on 17 2 6 20.
    specs = [
        {"category": "base", "kind": "arithmetic", "step": 4},
        {"category": "skip", "kind": "contains_digit", "digit": 1, "amount": 7},
        {"category": "modulo", "kind": "every_nth", "n": 2, "amount": 3},
        {"category": "conditions", "kind": "threshold_wrap", "threshold": 25, "wrap_to": 2},
    ]
    assert continue_sequence(specs, [3, 6], 4) == [17, 2, 6, 20]


def test_spec_rule_interaction_example():
    specs = [
        {"category": "base", "kind": "arithmetic", "step": 3},
        {"category": "skip", "kind": "divisible", "divisor": 4, "amount": 1},
        {"category": "modulo", "kind": "every_nth", "n": 2, "amount": 2},
        {"category": "conditions", "kind": "previous_odd", "factor": 2},
    ]
    assert continue_sequence(specs, [2, 5], 1) == [12]


@pytest.mark.parametrize(
    ("spec", "numbers"),
    [
        ({"category": "base", "kind": "fibonacci", "offset": 1}, [1]),
        ({"category": "modulo", "kind": "odd_position", "amount": -2}, [2]),
        ({"category": "conditions", "kind": "digit_sum", "limit": 10, "amount": 8}, [10, 8]),
    ],
)
def test_rule_text_names_its_numbers(spec, numbers):
    assert [int(x) for x in re.findall(r"\d+", rule_text(spec))] == numbers


def test_fibonacci_and_negative_terms():
    specs = [
        {"category": "base", "kind": "fibonacci", "offset": 1},
        {"category": "modulo", "kind": "odd_position", "amount": -3},
    ]
    # positions 3, 4, 5: 1+2-1-3=-1, 2-1-1=0, -1+0-1-3=-5
    assert continue_sequence(specs, [1, 2], 3) == [-1, 0, -5]


# ---------------------------------------------------------------- grader over model outputs

SEQUENCE_TABLE = [
    ("Answer: 11 14 17", Outcome.CORRECT, "11 14 17"),
    ("Answer: 11, 14, 17", Outcome.CORRECT, "11 14 17"),
    ("Answer: 11,14,17", Outcome.CORRECT, "11 14 17"),
    ("Answer: [11, 14, 17]", Outcome.CORRECT, "11 14 17"),  # brackets are the list itself
    ("**Answer:** 11 14 17", Outcome.CORRECT, "11 14 17"),
    ("The next 3 terms are 11, 14, 17.", Outcome.UNPARSED, None),  # bare line, 4 numbers
    ("Answer: The next 3 terms are 11, 14, 17.", Outcome.CORRECT, "11 14 17"),
    ("Term 4: 8 + 3 = 11\nTerm 5: 14\nTerm 6: 17\n\nAnswer: 11 14 17", Outcome.CORRECT, "11 14 17"),
    ("<think>8+3=11, not divisible by 6...</think>Answer: 11 14 17", Outcome.CORRECT, "11 14 17"),
    ("\\boxed{11, 14, 17}", Outcome.CORRECT, "11 14 17"),
    ("Answer: 11 14 17 (each term adds 3)", Outcome.CORRECT, "11 14 17"),
    ("Answer: 2 5 8 11 14 17", Outcome.CORRECT, "11 14 17"),  # echoes the start, then the terms
    ("Answer: eleven fourteen seventeen", Outcome.CORRECT, "11 14 17"),
    ("11 14 17", Outcome.CORRECT, "11 14 17"),
    ("Final answer: **11 14 17**", Outcome.CORRECT, "11 14 17"),
    ("Answer: 11 14 18", Outcome.WRONG, "11 14 18"),
    ("Answer: 11 16 17", Outcome.WRONG, "11 16 17"),
    ("Answer: 11 14", Outcome.WRONG, "11 14"),  # too few terms
    ("Answer: 17 14 11", Outcome.WRONG, "17 14 11"),
    ("Answer: 11.5 14 17", Outcome.WRONG, "11.5 14 17"),
    ("Answer: 11 14 17\nHmm, rule 2 applies at 12.\nAnswer: 11 13 17", Outcome.WRONG, "11 13 17"),
    ("", Outcome.UNPARSED, None),
    ("I am unable to continue the sequence.", Outcome.UNPARSED, None),
    ("Answer: unknown", Outcome.UNPARSED, None),
    ("<think>Let me apply rule 1: 8 + 3 = 11", Outcome.UNPARSED, None),
    ("The sequence continues with 11 then 14", Outcome.UNPARSED, None),  # bare line, 2 numbers
    ("**11 14 17**", Outcome.CORRECT, "11 14 17"),
    ("The answer is 11 14 17.", Outcome.CORRECT, "11 14 17"),
    ("## Answer\n11 14 17", Outcome.CORRECT, "11 14 17"),
    ("Answer: t1=11 t2=14 t3=17", Outcome.CORRECT, "11 14 17"),
]


@pytest.mark.parametrize(("output", "outcome", "answer"), SEQUENCE_TABLE)
def test_grader_on_model_outputs(output, outcome, answer):
    case = next(MANIFOLD.cases(SequenceGenerationParams(count=1, seq_length=3), 0))
    case = case.model_copy(update={"expected_next_terms": [11, 14, 17], "target": "11 14 17"})
    verdict = grade(case, output)
    assert (verdict.outcome, verdict.answer) == (outcome, answer)


def test_negative_terms_are_read():
    case = next(MANIFOLD.cases(SequenceGenerationParams(count=1, seq_length=3), 0))
    case = case.model_copy(update={"expected_next_terms": [-1, 0, -5], "target": "-1 0 -5"})
    assert grade(case, "Answer: -1 0 -5").outcome is Outcome.CORRECT
    assert grade(case, "Answer: −1, 0, −5").outcome is Outcome.CORRECT


def test_a_parenthesised_list_is_the_answer_not_a_remark():
    case = next(MANIFOLD.cases(SequenceGenerationParams(count=1, seq_length=3), 0))
    case = case.model_copy(update={"expected_next_terms": [11, 14, 17], "target": "11 14 17"})
    assert grade(case, "Answer: (11, 14, 17)").outcome is Outcome.CORRECT
