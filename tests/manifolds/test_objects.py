import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from numerate.manifolds import registry
from numerate.manifolds.common import AnchorFormat, point_seed
from numerate.manifolds.grading import Outcome
from numerate.manifolds.objects import (
    ADJECTIVES,
    CATEGORIES,
    OBJECT_ANCHORS,
    ObjectCountingGenerationParams,
    chance_level,
    generate,
    grade,
    quantity_phrase,
    render_items,
)
from tests.examples import examples

MANIFOLD = registry.get("objects")
WORD_VALUES = {
    w: i for i, w in enumerate("zero one two three four five six seven eight nine ten".split())
}
WORD_VALUES |= {"no": 0, "a": 1, "an": 1}
ITEM_BY_NAME = {item.name: item for c in CATEGORIES.values() for item in c.items}


def params_strategy():
    return st.builds(
        ObjectCountingGenerationParams,
        count=st.just(8),
        length=st.integers(1, 9),
        max_count=st.sampled_from([0, 1, 3, 10, 25]),
        distractor_count=st.integers(0, 8),
        target_groups=st.integers(1, 4),
        prob_adjective=st.sampled_from([0.0, 0.5, 1.0]),
        anchor=st.sampled_from(OBJECT_ANCHORS),
    )


# ---------------------------------------------------------------- the five standard tests


def test_too_many_items_for_the_vocabulary():
    with pytest.raises(ValidationError, match="length=10 needs more distinct items"):
        ObjectCountingGenerationParams(length=10, target_groups=1)
    with pytest.raises(ValidationError, match="distractor_count=200"):
        ObjectCountingGenerationParams(distractor_count=200)


def test_every_category_as_a_target_leaves_none_for_distractors():
    """With all 11 categories as targets, distractors cannot be drawn: said so (it said "at
    most -4"); without distractors the point is valid (it was refused) and generates."""
    with pytest.raises(ValidationError, match="target_groups=11 leaves 0 categories, too few"):
        ObjectCountingGenerationParams(target_groups=11, length=1, distractor_count=2)
    params = ObjectCountingGenerationParams(target_groups=11, length=30, distractor_count=0)
    cases = [generate(params, 5, index) for index in range(params.count)]
    assert all(case.target_count >= 1 and case.distractor_count == 0 for case in cases)


def test_unknown_param_is_rejected():
    with pytest.raises(ValidationError, match="colour"):
        ObjectCountingGenerationParams(colour="red")


@given(params_strategy(), st.integers(0, 2**62), st.integers(0, 10**6))
def test_same_seed_same_case(params, seed, index):
    assert generate(params, seed, index) == generate(params, seed, index)


@examples(400)
@given(params_strategy(), st.integers(0, 2**62))
def test_invariants_and_independent_answer(params, base_seed):
    seed = point_seed("objects", params, base_seed)
    for index in range(params.count):
        case = generate(params, seed, index)
        targets = [it for it in case.items if it.category in case.target_categories]
        distractors = [it for it in case.items if it.category not in case.target_categories]
        # recomputed from the metadata
        assert case.target_count == sum(it.quantity for it in targets) == int(case.target)
        assert len(targets) == params.length
        assert len(distractors) == params.distractor_count == case.distractor_count
        assert len(case.target_categories) == params.target_groups
        assert len({it.name for it in case.items}) == len(case.items)
        for it in case.items:
            assert it.name in {i.name for i in CATEGORIES[it.category].items}
            assert 0 <= it.quantity <= params.max_count
            assert it.adjective is None or it.adjective in ADJECTIVES
        if params.prob_adjective == 0.0:
            assert all(it.adjective is None for it in case.items)
        if params.prob_adjective == 1.0:
            assert all(it.adjective for it in case.items)
        # recomputed from the text a model sees
        assert read_quantities(case.input, params.anchor) == [
            (it.quantity, it.adjective, it.name) for it in case.items
        ]
        question = re.search(r"How many (.+) do I have\?", case.input).group(1)
        for key in case.target_categories:
            assert CATEGORIES[key].question_text in question
        assert grade(case, f"Answer: {case.target}").outcome is Outcome.CORRECT


def read_quantities(text: str, anchor: AnchorFormat) -> list[tuple[int, str | None, str]]:
    """Read (quantity, adjective, item name) back from a prompt, independently of the generator."""
    listing = text.split("I have", 1)[1].split("\n\nHow many", 1)[0].strip().rstrip(".")
    if anchor is AnchorFormat.NONE:
        entries = re.split(r", and |, | and ", listing)
    else:
        lines = [line.strip().rstrip(",") for line in listing.splitlines() if line.strip()]
        entries = [re.sub(r"^(and )?[^ ]+\. ", "", line) for line in lines]
    found = []
    for entry in entries:
        first, rest = entry.split(" ", 1)
        quantity = int(first) if first.isdigit() else WORD_VALUES[first]
        words = rest.split(" ", 1)
        adjective = words[0] if words[0] in ADJECTIVES and len(words) > 1 else None
        noun = words[1] if adjective else rest
        name = next(n for n, item in ITEM_BY_NAME.items() if noun in (item.singular, item.plural))
        expected_form = ITEM_BY_NAME[name].singular if quantity == 1 else ITEM_BY_NAME[name].plural
        assert noun == expected_form, entry
        found.append((quantity, adjective, name))
    return found


# ---------------------------------------------------------------- vocabulary and chance


def test_eleven_categories_with_spec_sizes_and_no_shared_names():
    sizes = {key: len(c.items) for key, c in CATEGORIES.items()}
    assert sizes == {
        "musical_instruments": 9, "fruits": 10, "vegetables": 10, "animals": 15,
        "clothing": 11, "tools": 10, "sports_equipment": 9, "books_media": 10,
        "office_supplies": 10, "toys": 10, "jewelry": 9,
    }  # fmt: skip
    names = [item.name for c in CATEGORIES.values() for item in c.items]
    assert len(names) == len(set(names))
    surface = [
        form for c in CATEGORIES.values() for i in c.items for form in (i.singular, i.plural)
    ]
    assert len(surface) == len(set(surface))


def test_spec_examples_are_in_the_vocabulary():
    spec = {
        "musical_instruments": "accordion clarinet flute piano violin guitar",
        "fruits": "apple banana grape orange strawberry plum",
        "vegetables": "cabbage carrot broccoli lettuce potato onion",
        "animals": "bear cat dog duck frog mouse rabbit snake",
        "clothing": "shirt pants dress jacket hat shoe tie scarf",
        "tools": "hammer screwdriver wrench saw drill pliers",
        "sports_equipment": "bat racket helmet glove puck paddle goal",
        "books_media": "textbook magazine DVD CD journal",
        "office_supplies": "pen pencil stapler paperclip folder calculator",
        "toys": "doll puzzle kite",
        "jewelry": "ring necklace bracelet earring pendant chain",
    }
    for key, words in spec.items():
        names = {item.name for item in CATEGORIES[key].items}
        assert set(words.split()) <= names, key
    assert {"comic book", "board game", "toy car", "yo-yo"} <= {
        i.name for c in CATEGORIES.values() for i in c.items
    }


def test_question_texts_match_the_spec():
    assert CATEGORIES["clothing"].question_text == "pieces of clothing"
    assert CATEGORIES["sports_equipment"].question_text == "pieces of sports equipment"
    assert CATEGORIES["books_media"].question_text == "books and media items"
    assert CATEGORIES["jewelry"].question_text == "pieces of jewelry"


def test_chance_level_is_one_over_the_number_of_possible_totals():
    assert chance_level(ObjectCountingGenerationParams(length=4, max_count=5)) == 1 / 21
    assert chance_level(ObjectCountingGenerationParams(length=4, max_count=0)) == 1.0


# ---------------------------------------------------------------- goldens from the spec


@pytest.mark.parametrize(
    ("item", "quantity", "adjective", "phrases"),
    [
        ("apple", 0, None, {"zero apples", "no apples"}),
        ("apple", 1, None, {"an apple"}),
        ("apple", 1, "old", {"an old apple"}),
        ("orange", 1, "big", {"a big orange"}),
        ("carrot", 1, None, {"a carrot"}),
        ("orange", 10, None, {"ten oranges"}),
        ("orange", 11, None, {"11 oranges"}),
        ("mouse", 3, None, {"three mice"}),
        ("pants", 2, None, {"two pairs of pants"}),
        ("lettuce", 1, None, {"a head of lettuce"}),
        ("DVD", 1, "old", {"an old DVD"}),
    ],
)
def test_quantity_phrases(item, quantity, adjective, phrases):
    seen = {
        quantity_phrase(ITEM_BY_NAME[item], quantity, adjective, random.Random(s))
        for s in range(20)
    }
    assert seen == phrases


@pytest.mark.parametrize(
    ("anchor", "expected"),
    [
        (
            AnchorFormat.NUMERIC,
            "\n1. two apples,\n2. a hammer,\n3. three oranges,\nand 4. a screwdriver.",
        ),
        (
            AnchorFormat.ROMAN,
            "\nI. two apples,\nII. a hammer,\nIII. three oranges,\nand IV. a screwdriver.",
        ),
        (
            AnchorFormat.HEX,
            "\n0x01. two apples,\n0x02. a hammer,\n0x03. three oranges,\nand 0x04. a screwdriver.",
        ),
        (AnchorFormat.NONE, " two apples, a hammer, three oranges, and a screwdriver."),
    ],
)
def test_spec_anchor_examples(anchor, expected):
    phrases = ["two apples", "a hammer", "three oranges", "a screwdriver"]
    params = ObjectCountingGenerationParams(anchor=anchor)
    assert render_items(phrases, params) == expected


def test_spec_example_zero_quantity_challenge_grades():
    # "I have no cats, two dogs, a piano, three rabbits, zero mice, a violin, and four frogs."
    case = next(MANIFOLD.cases(ObjectCountingGenerationParams(count=1), 0))
    case = case.model_copy(update={"target_count": 9, "target": "9"})
    assert grade(case, "2 + 3 + 4 = 9\nAnswer: 9").outcome is Outcome.CORRECT


# ---------------------------------------------------------------- grader over model outputs

GRADER_TABLE = [
    # (model output, expected outcome, expected parsed answer); the target is 7
    ("Answer: 7", Outcome.CORRECT, "7"),
    ("7", Outcome.CORRECT, "7"),
    ("Answer: seven", Outcome.CORRECT, "7"),
    ("answer: 7", Outcome.CORRECT, "7"),
    ("ANSWER: 7.", Outcome.CORRECT, "7"),
    ("**Answer:** 7", Outcome.CORRECT, "7"),
    ("**Answer: 7**", Outcome.CORRECT, "7"),
    ("Final answer: 7 fruits", Outcome.CORRECT, "7"),
    ("The answer is 7.", Outcome.CORRECT, "7"),
    ("Apples: 2\nBananas: 3\nGrapes: 2\nTotal: 2 + 3 + 2 = 7\n\nAnswer: 7", Outcome.CORRECT, "7"),
    ("<think>2 apples, 3 bananas... maybe 6?</think>\nAnswer: 7", Outcome.CORRECT, "7"),
    ("<think>Answer: 7</think>\nAnswer: 6", Outcome.WRONG, "6"),
    ("So the total is $\\boxed{7}$", Outcome.CORRECT, "7"),
    ("Total fruits = 2 + 3 + 2 = **7**", Outcome.CORRECT, "7"),
    ("## Answer\n7", Outcome.CORRECT, "7"),
    ("Answer: 3 + 4 = 7", Outcome.CORRECT, "7"),
    ("Answer: 7 (2 apples, 3 bananas and 2 grapes)", Outcome.CORRECT, "7"),
    ("You have 7 fruits in total.", Outcome.CORRECT, "7"),
    ("Answer: 6", Outcome.WRONG, "6"),
    ("Answer: six", Outcome.WRONG, "6"),
    ("Answer: 7.5", Outcome.WRONG, "7.5"),
    ("Answer: 0", Outcome.WRONG, "0"),
    ("Answer: none", Outcome.WRONG, "0"),
    ("Answer: 77", Outcome.WRONG, "77"),
    ("Answer: 6\n\nWait, I missed the grapes. Answer: 7", Outcome.CORRECT, "7"),
    ("Answer: 7\n\nHmm, rechecking: Answer: 8", Outcome.WRONG, "8"),
    ("", Outcome.UNPARSED, None),
    ("I'm not sure how to count these.", Outcome.UNPARSED, None),
    ("Answer: I cannot tell", Outcome.UNPARSED, None),
    ("<think>Let me count: 2 apples, 3 bananas", Outcome.UNPARSED, None),
    ("2 apples and 3 bananas and 2 grapes", Outcome.UNPARSED, None),  # three numbers, no marker
    ("Answer:", Outcome.UNPARSED, None),
    ("The answer is **7**.", Outcome.CORRECT, "7"),
    ("**7**", Outcome.CORRECT, "7"),
]


@pytest.mark.parametrize(("output", "outcome", "answer"), GRADER_TABLE)
def test_grader_on_model_outputs(output, outcome, answer):
    case = next(MANIFOLD.cases(ObjectCountingGenerationParams(count=1), 0))
    case = case.model_copy(update={"target_count": 7, "target": "7"})
    verdict = grade(case, output)
    assert (verdict.outcome, verdict.answer) == (outcome, answer)


def test_large_totals_with_thousands_separator():
    case = next(MANIFOLD.cases(ObjectCountingGenerationParams(count=1), 0))
    case = case.model_copy(update={"target_count": 1234, "target": "1234"})
    assert grade(case, "Answer: 1,234").outcome is Outcome.CORRECT


@examples(300)
@given(
    seed=st.integers(0, 2**32),
    index=st.integers(0, 1000),
    groups=st.integers(1, 3),
    distractors=st.integers(0, 30),
)
def test_no_distractor_could_be_counted_in_an_asked_category(seed, index, groups, distractors):
    from numerate.manifolds.objects import COUNTABLE_AS

    params = ObjectCountingGenerationParams(target_groups=groups, distractor_count=distractors,
                                            length=3)  # fmt: skip
    case = generate(params, seed, index)
    for item in case.items:
        if item.category not in case.target_categories:
            assert not COUNTABLE_AS.get(item.name, frozenset()) & set(case.target_categories)


@pytest.mark.parametrize("anchor", ["ASCII", "bogus", "SKIP_2"])
def test_an_anchor_objects_has_not_is_refused_naming_only_its_own(anchor):
    """Before: a value that is no format was refused naming every manifold's formats, ASCII
    among them, which objects then refused too."""
    with pytest.raises(ValidationError) as refused:
        ObjectCountingGenerationParams(anchor=anchor)
    said = str(refused.value)
    assert "is not an Object Counting format (NONE, NUMERIC, ALPHA, ROMAN, REVERSE, HEX)" in said
    assert "Input should be" not in said and "ELEMENTS" not in said
