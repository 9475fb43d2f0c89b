"""Shuffle Tracking: who holds which item after a series of pairwise swaps.

Spec: shared/specs/shuffle.md. Pure code: no Prefect, no I/O.
"""

from __future__ import annotations

import random
from enum import StrEnum
from functools import lru_cache, partial
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

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
)
from numerate.manifolds.grading import (
    AnswerSpan,
    Grade,
    Outcome,
    drop_parenthesised,
    find_answer,
    find_phrases,
    normalise_phrase,
)

NAME = "shuffle"


class Domain(StrEnum):
    """Thematic contexts of the story."""

    DANCING = "DANCING"
    BOOKS = "BOOKS"
    SOCCER = "SOCCER"
    GIFTS = "GIFTS"
    BALLS = "BALLS"


class DomainText(BaseModel):
    """Vocabulary and sentence templates of one domain."""

    model_config = ConfigDict(frozen=True)

    items: tuple[str, ...]
    adjectives: tuple[str, ...]
    verb: str
    """The swap action: "{a} and {b} {verb}"."""
    item_suffix: str
    """Appended to each item in its display form ("red" -> "red ball")."""
    adjective_form: str
    """How an adjective joins an item: {adjective} and {core}."""
    article: Literal["always", "with_adjective", "never"]
    """When the story writes "a"/"an" before an item: "has a gold box", "gets a worn copy of
    Ulysses", "is playing striker"."""
    intro: str
    """Opening; {people} is the list of names."""
    assignment: str
    """One person's initial item: {person} and {item}."""
    transition: str
    question: str
    """{person} is the queried person."""


DOMAINS: dict[Domain, DomainText] = {
    Domain.DANCING: DomainText(
        items=(
            "Patrick",
            "Jamie",
            "Lola",
            "Melissa",
            "Rodrigo",
            "Karl",
            "Ophelia",
            "Sam",
            "Izzi",
            "Helga",
            "Jamal",
            "Margaret",
            "Nora",
            "Oscar",
            "Quentin",
            "Rachel",
            "Sophia",
            "Tyler",
        ),
        adjectives=("energetic", "graceful", "skilled", "experienced", "enthusiastic", "talented"),
        verb="switch partners",
        item_suffix="",
        adjective_form="{adjective} {core}",
        article="never",
        intro=(
            "{people} are dancers at a square dance. At the start of a song, they each have a "
            "partner: {assignments}."
        ),
        assignment="{person} is dancing with {item}",
        transition="Throughout the song, the dancers often trade partners.",
        question="At the end of the dance, who is {person} dancing with?",
    ),
    Domain.BOOKS: DomainText(
        items=(
            "Catch-22",
            "Frankenstein",
            "The Great Gatsby",
            "The Pearl",
            "Moby Dick",
            "Ulysses",
            "Lolita",
            "The Odyssey",
            "Hound of the Baskervilles",
            "The Fellowship of the Ring",
            "Don Quixote",
            "Pride and Prejudice",
            "Jane Eyre",
            "War and Peace",
            "The Catcher in the Rye",
            "Dracula",
            "Middlemarch",
            "Anna Karenina",
        ),
        adjectives=("thick", "thin", "worn", "new", "heavy", "light", "hardcover", "paperback"),
        verb="swap books",
        item_suffix="",
        adjective_form="{adjective} copy of {core}",
        article="with_adjective",
        intro=(
            "{people} are friends and avid readers who occasionally trade books. At the start "
            "of the semester, they each buy one new book: {assignments}."
        ),
        assignment="{person} gets {item}",
        transition="As the semester proceeds, they start trading around the new books.",
        question="At the end of the semester, which book does {person} have?",
    ),
    Domain.SOCCER: DomainText(
        items=(
            "goalkeeper",
            "striker",
            "midfielder",
            "benchwarmer",
            "defender",
            "fullback",
            "left winger",
            "right winger",
            "center back",
            "sweeper",
            "left back",
            "right back",
            "cherry picker",
            "attacking midfielder",
            "defensive midfielder",
            "center forward",
            "wing back",
            "second striker",
        ),
        adjectives=("starting", "backup", "primary", "secondary", "key", "veteran"),
        verb="trade positions",
        item_suffix="",
        adjective_form="{adjective} {core}",
        article="never",
        intro=(
            "{people} are on the same team in a soccer match. At the start of the match, they "
            "are each assigned to a position: {assignments}."
        ),
        assignment="{person} is playing {item}",
        transition="As the game progresses, pairs of players occasionally swap positions.",
        question="At the end of the match, what position is {person} playing?",
    ),
    Domain.GIFTS: DomainText(
        items=(
            "ball",
            "box",
            "vase",
            "toy",
            "sculpture",
            "scarf",
            "mug",
            "candle",
            "clock",
            "puzzle",
            "lamp",
            "teddy bear",
        ),
        adjectives=(
            "orange",
            "pink",
            "black",
            "gold",
            "green",
            "brown",
            "silver",
            "crystal",
            "wooden",
            "metal",
        ),
        verb="swap presents",
        item_suffix="",
        adjective_form="{adjective} {core}",
        article="always",
        intro=(
            "{people} are holding a white elephant gift exchange. At the start of the event, "
            "they are each holding a present: {assignments}."
        ),
        assignment="{person} has {item}",
        transition="As the event progresses, pairs of people swap presents.",
        question="At the end of the event, which present is {person} holding?",
    ),
    Domain.BALLS: DomainText(
        items=(
            "red",
            "black",
            "blue",
            "yellow",
            "purple",
            "green",
            "white",
            "orange",
            "pink",
            "brown",
            "gray",
            "gold",
            "silver",
            "teal",
            "maroon",
            "navy",
            "turquoise",
            "magenta",
        ),
        adjectives=(
            "round",
            "bouncy",
            "smooth",
            "textured",
            "inflated",
            "heavy",
            "lightweight",
            "shiny",
        ),
        verb="swap balls",
        item_suffix=" ball",
        adjective_form="{adjective} {core}",
        article="always",
        intro=(
            "{people} are playing a game. At the start of the game, they are each holding a "
            "ball: {assignments}."
        ),
        assignment="{person} has {item}",
        transition="As the game progresses, pairs of players trade balls.",
        question="At the end of the game, which ball is {person} holding?",
    ),
}

PEOPLE: tuple[str, ...] = (
    "Alice", "Bob", "Claire", "Dave", "Eve", "Frank", "Gertrude", "Hank", "Ivy", "Judy", "Ken",
    "Lena",
)  # fmt: skip

CONFOUNDING_TEMPLATES: tuple[str, ...] = (
    # relationships
    "{person1} really likes {person2}",
    "{person1} and {person2} don't get along great",
    "{person1} is friends with {person2}",
    "{person1} has known {person2} for years",
    # professional dynamics
    "{person1} and {person2} work well together",
    "{person1} and {person2} are colleagues",
    "{person1} trusts {person2}",
    "{person1} and {person2} communicate effectively",
    # personal qualities
    "{person1} thinks {person2} is funny",
    "{person1} respects {person2}",
    "{person1} admires {person2}",
    "{person1} supports {person2}",
)

MAX_PEOPLE = min(len(PEOPLE), *(len(d.items) for d in DOMAINS.values()))

ANSWER_INSTRUCTION = (
    'Give your final answer on the last line, in the form "Answer: <item>", naming the item '
    "exactly as the story does."
)


class ShuffleGenerationParams(ParamsBase):
    """Parameters of a Shuffle Tracking grid point."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, allow_inf_nan=False
    )

    length: Whole = Field(4, ge=3, le=MAX_PEOPLE)
    """Number of people (and items)."""
    max_depth: Whole = Field(3, ge=1, le=200)
    """Number of swaps performed."""
    confounding_count: Whole = Field(0, ge=0, le=200)
    """Number of irrelevant statements inserted among the swaps."""
    anchor: AnchorFormat = AnchorFormat.NONE
    """Marker before each statement: NONE, NUMERIC, ASCII, ALPHA, ROMAN, SKIP_2, REVERSE, HEX
    or ELEMENTS."""
    adjective_prob: Real = Field(0.0, ge=0.0, le=1.0)
    """Probability that an item carries an adjective."""
    anchor_prefix: str = "\n"
    """Text before each marker (when anchor is not NONE)."""
    anchor_suffix: str = "."
    """Text after each marker (when anchor is not NONE)."""

    @model_validator(mode="after")
    def _anchor_text_with_an_anchor(self) -> ShuffleGenerationParams:
        check_anchor_text(self)
        return self


class ShuffleCase(CaseBase):
    """One Shuffle Tracking case."""

    domain: str
    """Domain of the story."""
    people: list[str]
    """The people, in order of introduction."""
    items: list[str]
    """Each person's initial item (with its adjective, if any), in the order of `people`."""
    swaps: list[tuple[str, str]]
    """The swaps, in order."""
    query_person: str
    """Whose item the question asks for."""
    response_enum: list[str]
    """Every possible answer: the items of the case."""
    confounding_indices: list[int]
    """0-based positions, in the list of statements after the transition, of the confounding
    statements (the other positions are swaps, in order)."""


def apply_swaps(
    people: list[str], items: list[str], swaps: list[tuple[str, str]]
) -> dict[str, str]:
    """Who holds what after the swaps, starting from people[i] holding items[i]."""
    holder = dict(zip(people, items, strict=True))
    for a, b in swaps:
        holder[a], holder[b] = holder[b], holder[a]
    return holder


def _ordinal(i: int, total: int) -> str:
    if i == 0:
        return "First"
    return "Finally" if i == total - 1 else "Then"


def _draw_swaps(rng: random.Random, people: list[str], depth: int) -> list[tuple[str, str]]:
    """`depth` swaps of two people; the same pair twice in a row (it undoes itself) is drawn
    again."""
    swaps: list[tuple[str, str]] = []
    while len(swaps) < depth:
        a, b = rng.sample(people, 2)
        if not swaps or {a, b} != set(swaps[-1]):
            swaps.append((a, b))
    return swaps


def _statements(
    rng: random.Random, text: DomainText, people: list[str], swaps: list[tuple[str, str]],
    params: ShuffleGenerationParams,
) -> tuple[list[str], list[int]]:  # fmt: skip
    """The story's statements after the transition, and the positions of the confounding
    ones: they go between swaps (never before the first), at random places."""
    swap_sentences = [
        f"{_ordinal(i, len(swaps))}, {a} and {b} {text.verb}" for i, (a, b) in enumerate(swaps)
    ]
    statements = list(swap_sentences)
    for _ in range(params.confounding_count):
        person1, person2 = rng.sample(people, 2)
        template = rng.choice(CONFOUNDING_TEMPLATES)
        statements.insert(
            rng.randint(1, len(statements)), template.format(person1=person1, person2=person2)
        )
    confounding_indices = [i for i, s in enumerate(statements) if s not in swap_sentences]
    return statements, confounding_indices


def _anchored(statements: list[str], params: ShuffleGenerationParams) -> str:
    """The statements as one paragraph, or one anchored line each."""
    if params.anchor is AnchorFormat.NONE:
        return " " + " ".join(s + "." for s in statements)
    return "".join(
        f"{params.anchor_prefix}{anchor_label(params.anchor, i, len(statements))}"
        f"{params.anchor_suffix} {s}"
        for i, s in enumerate(statements)
    )


def generate(params: ShuffleGenerationParams, seed: int, index: int) -> ShuffleCase:
    """Case `index` of the grid point (params, seed): a pure function of its arguments."""
    rng = case_rng(seed, index)
    domain = rng.choice(list(Domain))
    text = DOMAINS[domain]
    people = list(PEOPLE[: params.length])
    cores = rng.sample(text.items, params.length)
    items = [
        display(
            text,
            core,
            rng.choice(text.adjectives) if rng.random() < params.adjective_prob else None,
        )
        for core in cores
    ]

    swaps = _draw_swaps(rng, people, params.max_depth)
    statements, confounding_indices = _statements(rng, text, people, swaps, params)
    query_person = rng.choice(people)

    holder = apply_swaps(people, items, swaps)

    assignments = join_english(
        [
            text.assignment.format(person=p, item=_with_article(domain, item))
            for p, item in zip(people, items, strict=True)
        ]
    )
    body = _anchored(statements, params)
    prompt = (
        text.intro.format(people=join_english(people), assignments=assignments)
        + "\n\n"
        + text.transition
        + body
        + "\n\n"
        + text.question.format(person=query_person)
        + "\n\n"
        + ANSWER_INSTRUCTION
    )
    target = holder[query_person]
    return ShuffleCase(
        manifold=NAME,
        index=index,
        seed=seed,
        params=canonical_params(params),
        input=prompt,
        target=target,
        domain=domain.value,
        people=people,
        items=items,
        swaps=swaps,
        query_person=query_person,
        response_enum=list(items),
        confounding_indices=confounding_indices,
    )


def display(text: DomainText, core: str, adjective: str | None) -> str:
    """An item as the story names it: "red ball", "bouncy red ball", "worn copy of Ulysses"."""
    named = text.adjective_form.format(adjective=adjective, core=core) if adjective else core
    return named + text.item_suffix


def _with_article(domain: Domain, item: str) -> str:
    """ "a gold box" where the domain writes an article; "a worn copy of X" for books."""
    text = DOMAINS[domain]
    has_adjective = item != display(text, _CORE_OF[domain, item], None)
    if text.article == "always" or (text.article == "with_adjective" and has_adjective):
        return f"{indefinite_article(item)} {item}"
    return item


# Every display form of every domain, mapped to its bare item: graders accept either.
_CORE_OF: dict[tuple[Domain, str], str] = {
    (domain, display(text, core, adjective)): core
    for domain, text in DOMAINS.items()
    for core in text.items
    for adjective in (None, *text.adjectives)
}


def chance_level(params: ShuffleGenerationParams) -> float:
    """Probability that a uniform guess among the case's `length` items is right."""
    return 1.0 / params.length


def guess(case: ShuffleCase, rng: random.Random) -> str:
    """A uniform guess among the case's items."""
    return rng.choice(case.response_enum)


def item_aliases(case: ShuffleCase) -> dict[str, str]:
    """Normalised phrases naming each item of the case -> the item: its full name, its name
    without adjective, and the bare item (for balls, the colour alone)."""
    return dict(_aliases(case.domain, tuple(case.items)))


@lru_cache(maxsize=1024)
def _aliases(domain_name: str, items: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """item_aliases of a domain's items (cases share them: grading asks once per set)."""
    domain = Domain(domain_name)
    text = DOMAINS[domain]
    aliases: dict[str, str] = {}
    for item in items:
        core = _CORE_OF[domain, item]
        for phrase in (item, display(text, core, None), core):
            aliases.setdefault(normalise_phrase(phrase), item)
    return tuple(aliases.items())


def _read_item(aliases: dict[str, str], span: AnswerSpan) -> str | None:
    """The item an answer span names, or None when it names none or several."""
    text = drop_parenthesised(span.text)
    if not normalise_phrase(text):
        text = span.text  # "(Dracula)"
    # Outside its parentheses the span must name the item: "P&P (Alice has Dracula)" names none.
    found = find_phrases(text, aliases)
    return found[0] if len(found) == 1 else None


def parse_answer(case: ShuffleCase, output: str) -> str | None:
    """The item a response names, or None when it names none or several of them.

    Parenthesised text is left out when anything remains ("Dracula (Alice has Emma)"), and "&"
    reads as "and". Abbreviations are not guessed.
    """
    return find_answer(output, partial(_read_item, item_aliases(case)))


def grade(case: ShuffleCase, output: str) -> Grade:
    """Judge a response to a Shuffle Tracking case."""
    answer = parse_answer(case, output)
    if answer is None:
        return Grade(Outcome.UNPARSED, None)
    return Grade(Outcome.CORRECT if answer == case.target else Outcome.WRONG, answer)


# What the registry reads (manifolds.registry.Manifold.from_module).
DESCRIPTION = "Shuffle Tracking: who holds which item after a series of swaps"
PARAMS = ShuffleGenerationParams
CASE = ShuffleCase


# The trivial strategy a benchmark must beat (baseline:heuristic): ignore the swaps.
HEURISTIC = "the queried person's starting item"


def heuristic_prior(reference: list[ShuffleCase]) -> None:
    """The strategy learns nothing from other cases."""
    return None


def heuristic(case: ShuffleCase, prior: None) -> str:
    """The answer of the trivial strategy: what the queried person held before any swap."""
    return case.items[case.people.index(case.query_person)]
