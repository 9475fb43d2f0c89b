"""Object Counting: selective counting of the items of target categories among distractors.

Spec: shared/specs/objects.md. Pure code: no Prefect, no I/O.
"""

from __future__ import annotations

import functools
import random

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from numerate.kernel.inputs import Real, Whole
from numerate.manifolds.common import (
    AnchorFormat,
    CaseBase,
    ParamsBase,
    anchor_label,
    canonical_params,
    case_rng,
    check_anchor_text,
    indefinite_article,
    join_english,
    number_word,
)
from numerate.manifolds.grading import (
    AnswerSpan,
    Grade,
    Outcome,
    drop_parenthesised,
    find_answer,
    is_hedge,
    parse_numbers,
)

NAME = "objects"


class Item(BaseModel):
    """One vocabulary entry: its name and how to write one or many of it."""

    model_config = ConfigDict(frozen=True)

    name: str
    singular: str
    plural: str


def _items(*entries: str | tuple[str, str, str]) -> tuple[Item, ...]:
    """Vocabulary from plain nouns (regular plural '+s') or (name, singular, plural) triples."""
    out = []
    for entry in entries:
        if isinstance(entry, str):
            out.append(Item(name=entry, singular=entry, plural=entry + "s"))
        else:
            name, singular, plural = entry
            out.append(Item(name=name, singular=singular, plural=plural))
    return tuple(out)


class Category(BaseModel):
    """A semantic category: its key, the words a question uses for it, its vocabulary."""

    model_config = ConfigDict(frozen=True)

    key: str
    question_text: str
    items: tuple[Item, ...]


CATEGORIES: dict[str, Category] = {
    c.key: c
    for c in (
        Category(
            key="musical_instruments",
            question_text="musical instruments",
            items=_items(
                "accordion",
                "clarinet",
                "flute",
                "piano",
                "violin",
                "guitar",
                "trombone",
                "trumpet",
                "drum",
            ),
        ),
        Category(
            key="fruits",
            question_text="fruits",
            items=_items(
                "apple",
                "banana",
                "grape",
                "orange",
                ("strawberry", "strawberry", "strawberries"),
                "plum",
                ("peach", "peach", "peaches"),
                "pear",
                "nectarine",
                ("raspberry", "raspberry", "raspberries"),
            ),
        ),
        Category(
            key="vegetables",
            question_text="vegetables",
            items=_items(
                "cabbage",
                "carrot",
                ("broccoli", "head of broccoli", "heads of broccoli"),
                ("lettuce", "head of lettuce", "heads of lettuce"),
                ("potato", "potato", "potatoes"),
                "onion",
                ("cauliflower", "head of cauliflower", "heads of cauliflower"),
                ("celery", "stalk of celery", "stalks of celery"),
                "yam",
                ("garlic", "head of garlic", "heads of garlic"),
            ),
        ),
        Category(
            key="animals",
            question_text="animals",
            items=_items(
                "bear",
                "cat",
                "dog",
                "duck",
                "frog",
                ("mouse", "mouse", "mice"),
                "rabbit",
                "snake",
                "cow",
                "goat",
                "horse",
                "pig",
                "donkey",
                "chicken",
                "snail",
            ),
        ),
        Category(
            key="clothing",
            question_text="pieces of clothing",
            items=_items(
                "shirt",
                ("pants", "pair of pants", "pairs of pants"),
                ("dress", "dress", "dresses"),
                "jacket",
                "hat",
                "shoe",
                "tie",
                ("scarf", "scarf", "scarves"),
                "sweater",
                "sock",
                "coat",
            ),
        ),
        Category(
            key="tools",
            question_text="tools",
            items=_items(
                "hammer",
                "screwdriver",
                ("wrench", "wrench", "wrenches"),
                "saw",
                "drill",
                ("pliers", "pair of pliers", "pairs of pliers"),
                "chisel",
                "screw",
                "mallet",
                "tape measure",
            ),
        ),
        Category(
            key="sports_equipment",
            question_text="pieces of sports equipment",
            items=_items(
                "bat",
                "racket",
                "helmet",
                "glove",
                "puck",
                "paddle",
                "goal",
                "football",
                "skateboard",
            ),
        ),
        Category(
            key="books_media",
            question_text="books and media items",
            items=_items(
                "textbook",
                "magazine",
                "DVD",
                "CD",
                "comic book",
                "journal",
                "novel",
                "newspaper",
                "encyclopedia",
                "audiobook",
            ),
        ),
        Category(
            key="office_supplies",
            question_text="office supplies",
            items=_items(
                "pen",
                "pencil",
                "stapler",
                "paperclip",
                "folder",
                "calculator",
                "eraser",
                "ruler",
                "highlighter",
                "notepad",
            ),
        ),
        Category(
            key="toys",
            question_text="toys",
            items=_items(
                "doll",
                "puzzle",
                "board game",
                "toy car",
                "yo-yo",
                "kite",
                "teddy bear",
                "action figure",
                "marble",
                "spinning top",
            ),
        ),
        Category(
            key="jewelry",
            question_text="pieces of jewelry",
            items=_items(
                "ring",
                "necklace",
                "bracelet",
                "earring",
                "pendant",
                "chain",
                ("brooch", "brooch", "brooches"),
                "anklet",
                "locket",
            ),
        ),
    )
}

ADJECTIVES: tuple[str, ...] = (
    "big", "small", "large", "tiny", "green", "red", "blue", "yellow", "old", "new", "shiny",
    "rusty",
)  # fmt: skip

OBJECT_ANCHORS = (
    AnchorFormat.NONE,
    AnchorFormat.NUMERIC,
    AnchorFormat.ALPHA,
    AnchorFormat.ROMAN,
    AnchorFormat.REVERSE,
    AnchorFormat.HEX,
)

# Items a person could count in another category than their own: never a distractor when
# that category is asked about ("How many pieces of clothing?" next to two gloves).
COUNTABLE_AS: dict[str, frozenset[str]] = {
    "glove": frozenset({"clothing"}),
    "helmet": frozenset({"clothing"}),
    "bat": frozenset({"animals"}),
    "ruler": frozenset({"tools"}),
}

_SIZES = sorted(len(c.items) for c in CATEGORIES.values())
MAX_QUANTITY = 1000

ANSWER_INSTRUCTION = (
    'Give your final answer as a single whole number on the last line, in the form "Answer: N".'
)


def _fewest_items(categories: int) -> int:
    """Items in the `categories` smallest categories: what any draw of that many offers."""
    return sum(_SIZES[:categories])


class ObjectCountingGenerationParams(ParamsBase):
    """Parameters of an Object Counting grid point."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False
    )

    length: Whole = Field(4, ge=1)
    """Number of target items (from the target categories) in each case."""
    max_count: Whole = Field(5, ge=0, le=MAX_QUANTITY)
    """Largest quantity of one item (quantities are drawn from 0..max_count)."""
    distractor_count: Whole = Field(2, ge=0)
    """Number of distractor items from the other categories."""
    target_groups: Whole = Field(1, ge=1, le=len(CATEGORIES))
    """Number of target categories the question asks about."""
    prob_adjective: Real = Field(0.0, ge=0.0, le=1.0)
    """Probability that an item carries an irrelevant adjective."""
    anchor: AnchorFormat = AnchorFormat.NONE
    """Marker before each listed item: NONE, NUMERIC, ALPHA, ROMAN, REVERSE or HEX."""
    anchor_prefix: str = "\n"
    """Text before each marker (when anchor is not NONE)."""
    anchor_suffix: str = ". "
    """Text after each marker (when anchor is not NONE)."""

    @field_validator("anchor", mode="before")
    @classmethod
    def _object_anchor(cls, anchor: object) -> object:
        """Only Object Counting's formats, and only those named when one is not (a value
        none of the formats was refused naming every manifold's, ASCII among them)."""
        value = anchor.value if isinstance(anchor, AnchorFormat) else anchor
        allowed = [a.value for a in OBJECT_ANCHORS]
        if value not in allowed:
            shown = value if isinstance(value, str) else repr(value)
            raise ValueError(
                f"anchor {shown} is not an Object Counting format ({', '.join(allowed)})"
            )
        return anchor

    @model_validator(mode="after")
    def _enough_vocabulary(self) -> ObjectCountingGenerationParams:
        check_anchor_text(self)
        most_targets = _fewest_items(self.target_groups)
        if self.length > most_targets:
            raise ValueError(
                f"length={self.length} needs more distinct items than {self.target_groups} "
                f"target group(s) are sure to offer (at most {most_targets})"
            )
        others = len(CATEGORIES) - self.target_groups
        most_distractors = _fewest_items(others) - len(COUNTABLE_AS)
        if self.distractor_count > 0 and most_distractors <= 0:
            raise ValueError(
                f"distractor_count={self.distractor_count}: target_groups={self.target_groups} "
                f"leaves {others} categories, too few to draw distractors from; set "
                "distractor_count to 0 or take fewer target groups"
            )
        if 0 < most_distractors < self.distractor_count:
            raise ValueError(
                f"distractor_count={self.distractor_count} needs more distinct items than "
                f"{others} non-target categories are sure to offer (at most {most_distractors})"
            )
        return self


class CountedItem(BaseModel):
    """An item as it appears in the problem."""

    model_config = ConfigDict(frozen=True)

    name: str
    category: str
    quantity: int
    adjective: str | None


class ObjectCountingCase(CaseBase):
    """One Object Counting case."""

    target_categories: list[str]
    """Keys of the categories the question asks about."""
    target_count: int
    """Total quantity of the items of the target categories (the answer)."""
    distractor_count: int
    """Number of items from other categories."""
    items: list[CountedItem]
    """Every item in order of appearance."""


def quantity_phrase(item: Item, quantity: int, adjective: str | None, rng: random.Random) -> str:
    """'no red apples', 'an old apple', 'three apples', '12 heads of lettuce'."""
    if quantity == 1:
        noun = f"{adjective} {item.singular}" if adjective else item.singular
        return f"{indefinite_article(noun)} {noun}"
    noun = f"{adjective} {item.plural}" if adjective else item.plural
    if quantity == 0:
        return f"{rng.choice(('zero', 'no'))} {noun}"
    amount = number_word(quantity) if quantity <= 10 else str(quantity)
    return f"{amount} {noun}"


def render_items(phrases: list[str], params: ObjectCountingGenerationParams) -> str:
    """The item list after "I have": inline with commas and "and", or one anchored line each."""
    if params.anchor is AnchorFormat.NONE:
        return " " + join_english(phrases) + "."
    total = len(phrases)
    parts = []
    for i, phrase in enumerate(phrases):
        last = i == total - 1
        label = anchor_label(params.anchor, i, total) + params.anchor_suffix
        conjunction = "and " if last and total > 1 else ""
        parts.append(f"{params.anchor_prefix}{conjunction}{label}{phrase}{'.' if last else ','}")
    return "".join(parts)


@functools.lru_cache(maxsize=4096)
def _pool(category_keys: tuple[str, ...], asked: frozenset[str]) -> tuple[tuple[str, Item], ...]:
    """The (category, item) pairs a draw picks from, in a stable order: every item of the
    categories, less those a person could count in an `asked` category."""
    return tuple(
        (key, item)
        for key in category_keys
        for item in CATEGORIES[key].items
        if not COUNTABLE_AS.get(item.name, frozenset()) & asked
    )


def generate(params: ObjectCountingGenerationParams, seed: int, index: int) -> ObjectCountingCase:
    """Case `index` of the grid point (params, seed): a pure function of its arguments."""
    rng = case_rng(seed, index)
    keys = list(CATEGORIES)
    target_keys = rng.sample(keys, params.target_groups)
    other_keys = [k for k in keys if k not in target_keys]

    def draw(category_keys: list[str], n: int, asked: frozenset[str]) -> list[tuple[str, Item]]:
        return rng.sample(_pool(tuple(category_keys), asked), n)

    chosen = [(key, item, True) for key, item in draw(target_keys, params.length, frozenset())]
    distractors = draw(other_keys, params.distractor_count, frozenset(target_keys))
    chosen += [(key, item, False) for key, item in distractors]
    rng.shuffle(chosen)  # distractors anywhere in the list, no positional cue

    items: list[CountedItem] = []
    phrases: list[str] = []
    for key, item, _ in chosen:
        quantity = rng.randint(0, params.max_count)
        adjective = rng.choice(ADJECTIVES) if rng.random() < params.prob_adjective else None
        items.append(
            CountedItem(name=item.name, category=key, quantity=quantity, adjective=adjective)
        )
        phrases.append(quantity_phrase(item, quantity, adjective, rng))

    total = sum(
        it.quantity for it, (_, _, is_target) in zip(items, chosen, strict=True) if is_target
    )
    question = join_english([CATEGORIES[k].question_text for k in target_keys])
    text = f"I have{render_items(phrases, params)}\n\nHow many {question} do I have?\n\n"
    return ObjectCountingCase(
        manifold=NAME,
        index=index,
        seed=seed,
        params=canonical_params(params),
        input=text + ANSWER_INSTRUCTION,
        target=str(total),
        target_categories=target_keys,
        target_count=total,
        distractor_count=params.distractor_count,
        items=items,
    )


def chance_level(params: ObjectCountingGenerationParams) -> float:
    """Probability that a uniform guess over the possible totals 0..length*max_count is right."""
    return 1.0 / (params.length * params.max_count + 1)


def guess(case: ObjectCountingCase, rng: random.Random) -> str:
    """A uniform guess over the totals the case's grid point allows."""
    return str(rng.randint(0, case.params["length"] * case.params["max_count"]))


def _read_count(span: AnswerSpan) -> int | float | None:
    """The count an answer span holds, or None."""
    if is_hedge(span.text, thousands_separators=True, ranges=True):
        return None  # "14 or 15", "14-15": two answers are none
    text = drop_parenthesised(span.text)  # "14 (= 5 + 2 + 2 + 5)", "17 (not 14)"
    if not parse_numbers(text, thousands_separators=True):
        text = span.text  # "(14)"
    parts = [
        parse_numbers(part, thousands_separators=True, skip_negated=True)
        for part in text.split("=")
    ]
    if not span.explicit:
        return parts[-1][0] if len(parts[-1]) == 1 else None
    alone = [numbers for numbers in parts if len(numbers) == 1]
    numbers = alone[-1] if alone else parts[-1]
    return numbers[0] if numbers else None


def parse_answer(output: str) -> int | float | None:
    """The count a response gives, or None (see docs/manifolds.md, "How answers are extracted").

    Parenthesised text is dropped ("14 (= 5 + 2 + 2 + 5)"). Of the parts an "=" separates,
    the last that holds a single number wins ("3 + 4 = 7", "14 = 5 + 2 + 2 + 5"); otherwise the
    first number ("7 fruits, 3 apples and 4 pears"). A number after "not" does not count; two
    different numbers offered as alternatives ("14 or 15") are no answer. A bare last line
    counts only when it (after its last "=") holds exactly one number.
    """
    return find_answer(output, _read_count)


def grade(case: ObjectCountingCase, output: str) -> Grade:
    """Judge a response to an Object Counting case."""
    answer = parse_answer(output)
    if answer is None:
        return Grade(Outcome.UNPARSED, None)
    outcome = Outcome.CORRECT if answer == case.target_count else Outcome.WRONG
    return Grade(outcome, str(answer))


# What the registry reads (manifolds.registry.Manifold.from_module).
DESCRIPTION = "Object Counting: count the items of target categories among distractors"
PARAMS = ObjectCountingGenerationParams
CASE = ObjectCountingCase


# The trivial strategy a benchmark must beat (baseline:heuristic): the grid point's most common
# total, learnt from reference cases of the same point. It needs no reading of the case.
HEURISTIC = "the most common total of the grid point"


def heuristic_prior(reference: list[ObjectCountingCase]) -> int:
    """The most common target total among reference cases of a grid point (ties: smallest)."""
    totals: dict[int, int] = {}
    for case in reference:
        totals[case.target_count] = totals.get(case.target_count, 0) + 1
    return min(totals, key=lambda total: (-totals[total], total)) if totals else 0


def heuristic(case: ObjectCountingCase, prior: int) -> str:
    """The answer of the trivial strategy: the point's most common total, whatever the case."""
    return str(prior)
