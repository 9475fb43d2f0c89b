"""A corpus of real-looking responses and how they must be graded, plus invariants and timing.

Each row: (case builder, response, expected outcome, expected answer). The builders fix the
target: objects 14; sequence 6 12 18 (three terms); books "Pride and Prejudice" among four
titles; dancing "Lola"; balls "blue ball".
"""

import time

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from numerate.manifolds import registry
from numerate.manifolds.grading import Outcome
from tests.examples import examples

OBJECTS = registry.get("objects")
SEQUENCE = registry.get("sequence")
SHUFFLE = registry.get("shuffle")
C, W, U = Outcome.CORRECT, Outcome.WRONG, Outcome.UNPARSED


def objects_case():
    case = OBJECTS.generate(OBJECTS.params(), 1, 0)
    return case.model_copy(update={"target_count": 14, "target": "14"})


def sequence_case():
    case = SEQUENCE.generate(SEQUENCE.params(seq_length=3), 1, 0)
    return case.model_copy(update={"expected_next_terms": [6, 12, 18], "target": "6 12 18"})


def _shuffle_case(domain: str, items: list[str], target: str):
    case = SHUFFLE.generate(SHUFFLE.params(length=4), 1, 0)
    update = {"domain": domain, "items": items, "response_enum": items, "target": target}
    return case.model_copy(update=update)


def books_case():
    items = ["Pride and Prejudice", "Dracula", "The Pearl", "Moby Dick"]
    return _shuffle_case("BOOKS", items, "Pride and Prejudice")


def dancing_case():
    return _shuffle_case("DANCING", ["Patrick", "Jamie", "Lola", "Melissa"], "Lola")


def balls_case():
    items = ["bouncy red ball", "blue ball", "shiny green ball", "yellow ball"]
    return _shuffle_case("BALLS", items, "blue ball")


OBJECTS_CORPUS = [
    # the reported phrasings
    ("Answer: 14 (= 5 + 2 + 2 + 5)", C, "14"),
    ("Answer: 14\n\n(If pants counted, the answer is 17.)", C, "14"),
    ("[THINK]shirts 5, hats 2... so the answer is 12[/THINK]\n14", C, "14"),
    ("◁think▷Maybe the answer is 12?◁/think▷ 14", C, "14"),
    ("Answer: 14\n\nI hope this answer is helpful!", C, "14"),
    # reasoning wrappers
    ("<think>I count 12.</think>\n\nAnswer: 14", C, "14"),
    ("<thinking>Answer: 12</thinking>\n**Answer:** 14", C, "14"),
    ("<reasoning>12 or 13?</reasoning>The answer is 14.", C, "14"),
    ("<think>The answer is 14.</think>\nAnswer: 12", W, "12"),
    ("<think>Let me count the clothing... the answer is 14", U, None),
    ("Answer: 14\n<think>Wait, let me recount", U, None),
    # markdown, LaTeX, chat styles
    ("## Final Answer\n\n14", C, "14"),
    ("### Answer\n**14**", C, "14"),
    ("**Final Answer:** 14 pieces of clothing", C, "14"),
    ("The final answer is $\\boxed{14}$.", C, "14"),
    (
        "Shirts: 5\nHats: 2\nTies: 2\nScarves: 5\n\nTotal: 5 + 2 + 2 + 5 = 14\n\n\\boxed{14}",
        C,
        "14",
    ),
    ("\\boxed{12}\n\nWait, I missed the two ties.\n\n\\boxed{14}", C, "14"),
    ("\\[\\boxed{14 \\text{ pieces of clothing}}\\]", C, "14"),
    ("Answer: $14$", C, "14"),
    ("Answer: fourteen", C, "14"),
    ("Answer: Fourteen (14)", C, "14"),
    ("Answer: 14 = 5 + 2 + 2 + 5", C, "14"),
    ("Answer: 14.0", C, "14"),
    ("Answer: not 17 but 14", C, "14"),
    ("You have **14** pieces of clothing.", C, "14"),
    ("There are 14 pieces of clothing in total.", C, "14"),
    ("There are 14 pieces of clothing (5 shirts, 2 hats, 2 ties and 5 scarves).", C, "14"),
    ("Answer: 14\n\nLet me know if you need anything else!", C, "14"),
    ("14\n\nI hope this helps!", C, "14"),
    ("**Answer:**\n- Shirts: 5\n- Hats: 2\n- Ties: 2\n- Scarves: 5\n- Total: **14**", C, "14"),
    ("Counting:\n1. shirts: 5\n2. hats: 2\n3. ties: 2\n4. scarves: 5\n\n**Total: 14**", C, "14"),
    ("Here is my answer:\n\n14", C, "14"),
    # wrong values
    ("Answer: 17 (not 14)", W, "17"),
    ("Answer: 17", W, "17"),
    ("Answer: 14.5", W, "14.5"),
    ("Answer: 140", W, "140"),
    ("Answer: 14\n\nOn reflection I missed the socks.\nAnswer: 16", W, "16"),
    # hedges, refusals, no answer
    ("Answer: 14 or 15", U, None),
    ("Answer: 14-15", U, None),
    ("Answer: 14 to 15", U, None),
    ("Answer: between 14 and 15", U, None),
    ("Answer: either fourteen or fifteen", U, None),
    ("Answer: 14 (or maybe 15)", U, None),
    ("I'm sorry, but I can't help with that.", U, None),
    ("Answer: I cannot determine the count.", U, None),
    ("I hope this answer is helpful!", U, None),
    ("", U, None),
]

SEQUENCE_CORPUS = [
    # the reported phrasings
    ("Answer:\n- 6\n- 12\n- 18", C, "6 12 18"),
    ("Answer: 6 12 18, adding 6 each time", C, "6 12 18"),
    ("\\boxed{6}, \\boxed{12}, \\boxed{18}", C, "6 12 18"),
    # lists, labels, LaTeX, chat styles
    ("Answer:\n1. 6\n2. 12\n3. 18", C, "6 12 18"),
    ("**Answer:**\n* t4 = 6\n* t5 = 12\n* t6 = 18", C, "6 12 18"),
    ("Answer: 6, 12, 18", C, "6 12 18"),
    ("Answer: [6, 12, 18]", C, "6 12 18"),
    ("Answer: (6, 12, 18)", C, "6 12 18"),
    ("Answer: Term 4: 6, Term 5: 12, Term 6: 18", C, "6 12 18"),
    ("Answer: 6 → 12 → 18", C, "6 12 18"),
    ("Answer: six, twelve, eighteen", C, "6 12 18"),
    ("The next three terms are 6, 12 and 18.\n\nAnswer: 6 12 18", C, "6 12 18"),
    ("Answer: 6 12 18 (each term adds 6)", C, "6 12 18"),
    ("Answer: 6 12 18, not 6 12 24", C, "6 12 18"),
    ("Answer: The next three terms are 6, 12, 18.", C, "6 12 18"),
    ("$\\boxed{6, 12, 18}$", C, "6 12 18"),
    ("\\[\\boxed{6,\\ 12,\\ 18}\\]", C, "6 12 18"),
    ("### Final Answer\n6, 12, 18", C, "6 12 18"),
    ("<think>Rule 2 gives 24 at position 6?</think>\nAnswer: 6 12 18", C, "6 12 18"),
    ("Answer: 6 12 18\n\nI hope this answer is helpful!", C, "6 12 18"),
    ("The sequence continues 6, 12 and then 18.", C, "6 12 18"),
    ("6 12 18", C, "6 12 18"),
    # wrong values
    ("Answer: 6 12 24", W, "6 12 24"),
    ("Answer: 6 12", W, "6 12"),
    ("Answer:\n- 6\n- 12\n- 24", W, "6 12 24"),
    ("\\boxed{6}, \\boxed{12}, \\boxed{24}", W, "6 12 24"),
    # hedges, refusals, no answer
    ("Answer: 6 12 18 or 6 12 24", U, None),
    ("Answer: 6, 12, 18 (or possibly 6, 12, 24)", U, None),
    ("I cannot determine the pattern.", U, None),
    ("<think>6 12 18", U, None),
    ("The next 3 terms are 6, 12, 18.", U, None),  # a bare line with a fourth number
]

SHUFFLE_CORPUS = [
    # the reported phrasings
    (books_case, "Answer: Pride & Prejudice", C, "Pride and Prejudice"),
    (books_case, "Dave has P&P (Alice has Dracula)", U, None),  # abbreviations are not guessed
    # parenthesised remarks, markdown, LaTeX
    (books_case, "Answer: Pride and Prejudice (Alice has Dracula)", C, "Pride and Prejudice"),
    (books_case, "Answer: *Pride and Prejudice*", C, "Pride and Prejudice"),
    (books_case, "Answer: PRIDE AND PREJUDICE", C, "Pride and Prejudice"),
    (books_case, "## Answer\n\n**Pride and Prejudice**", C, "Pride and Prejudice"),
    (
        books_case,
        "**Final Answer:** Dave ends up with *Pride and Prejudice*.",
        C,
        "Pride and Prejudice",
    ),
    (books_case, "\\boxed{\\text{Pride \\& Prejudice}}", C, "Pride and Prejudice"),
    (
        books_case,
        "Answer: Pride and Prejudice\n\nI hope this answer is helpful!",
        C,
        "Pride and Prejudice",
    ),
    (
        books_case,
        "<think>After swap 2 Dave has Dracula...</think>\nAnswer: Pride and Prejudice",
        C,
        "Pride and Prejudice",
    ),
    (books_case, "[THINK]Dracula?[/THINK]Pride and Prejudice", C, "Pride and Prejudice"),
    (
        books_case,
        "Swap 1: Dave gets Dracula.\nSwap 2: Dave gets Pride and Prejudice.\n\n"
        "The answer is: Pride and Prejudice",
        C,
        "Pride and Prejudice",
    ),
    # wrong values
    (books_case, "Answer: Dracula", W, "Dracula"),
    (books_case, "Answer: Dracula (not Pride and Prejudice)", W, "Dracula"),
    (books_case, "<think>Answer: Pride and Prejudice</think>\nAnswer: The Pearl", W, "The Pearl"),
    # hedges, unknown items, refusals
    (books_case, "Answer: either Dracula or Pride and Prejudice", U, None),
    (books_case, "Answer: War and Peace", U, None),  # not an item of this case
    (books_case, "Answer: P&P", U, None),
    (books_case, "I'm not able to determine which book Dave has.", U, None),
    (books_case, "<think>Answer: Pride and Prejudice", U, None),
    # partners and balls
    (dancing_case, "Answer: Lola", C, "Lola"),
    (dancing_case, "At the end of the dance, Alice is dancing with Lola.", C, "Lola"),
    (dancing_case, "Answer: Alice is dancing with **Lola**.", C, "Lola"),
    (dancing_case, "Answer: Lola (she started with Patrick)", C, "Lola"),
    (dancing_case, "Answer: Patrick", W, "Patrick"),
    (balls_case, "Answer: the blue ball", C, "blue ball"),
    (balls_case, "Answer: Blue", C, "blue ball"),
    (balls_case, "Answer: $\\boxed{\\text{blue}}$", C, "blue ball"),
    (balls_case, "Answer: red", W, "bouncy red ball"),
]

CORPUS = (
    [(OBJECTS, objects_case, *row) for row in OBJECTS_CORPUS]
    + [(SEQUENCE, sequence_case, *row) for row in SEQUENCE_CORPUS]
    + [(SHUFFLE, *row) for row in SHUFFLE_CORPUS]
)


@pytest.mark.parametrize(("manifold", "make_case", "output", "outcome", "answer"), CORPUS)
def test_corpus(manifold, make_case, output, outcome, answer):
    verdict = manifold.grade(make_case(), output)
    assert (verdict.outcome, verdict.answer) == (outcome, answer)


def test_the_corpus_is_large_and_covers_every_outcome():
    assert len(CORPUS) >= 60
    for manifold in (OBJECTS, SEQUENCE, SHUFFLE):
        outcomes = {row[3] for row in CORPUS if row[0] is manifold}
        assert outcomes == {C, W, U}, manifold.name


# ---------------------------------------------------------------- invariants

WRAPPERS = [
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<reasoning>", "</reasoning>"),
    ("[THINK]", "[/THINK]"),
    ("◁think▷", "◁/think▷"),
]
ANSWER_STYLES = [
    "Answer: {}",
    "**Answer:** {}",
    "The final answer is {}.",
    "## Answer\n\n{}",
    "Answer: {}\n\nI hope this answer is helpful!",
    "Answer: {}\n\n(If I misread a swap or a rule, the answer would differ.)",
    "\\boxed{{{}}}",
]
MANIFOLDS = [OBJECTS, SEQUENCE, SHUFFLE]


def a_wrong_value(case, shift: int) -> str:
    """A value that is not the case's answer, written the way an answer is."""
    if case.manifold == "objects":
        return str(case.target_count + shift)
    if case.manifold == "sequence":
        terms = list(case.expected_next_terms)
        terms[shift % len(terms)] += shift
        return " ".join(map(str, terms))
    others = [item for item in case.response_enum if item != case.target]
    return others[shift % len(others)]


cases = st.builds(
    lambda manifold, seed, index: manifold.generate(manifold.params(), seed, index),
    st.sampled_from(MANIFOLDS),
    st.integers(0, 10**6),
    st.integers(0, 1000),
)


@given(
    case=cases,
    wrapper=st.sampled_from(WRAPPERS),
    style=st.sampled_from(ANSWER_STYLES),
    shift=st.integers(1, 50),
)
@examples(300)
def test_a_decoy_inside_the_reasoning_never_counts(case, wrapper, style, shift):
    opening, closing = wrapper
    decoy = a_wrong_value(case, shift)
    reasoning = f"{opening}Let me work through it. The answer is {decoy}.\nAnswer: {decoy}{closing}"
    output = f"{reasoning}\n\n{style.format(case.target)}"
    verdict = registry.get(case.manifold).grade(case, output)
    assert verdict.outcome is Outcome.CORRECT, output


@given(case=cases, style=st.sampled_from(ANSWER_STYLES), shift=st.integers(1, 50))
@examples(300)
def test_a_different_value_is_never_correct(case, style, shift):
    wrong = a_wrong_value(case, shift)
    output = f"<think>The answer is {case.target}.</think>\n{style.format(wrong)}"
    verdict = registry.get(case.manifold).grade(case, output)
    assert verdict.outcome is Outcome.WRONG, output


@given(case=cases, shift=st.integers(1, 50))
@examples(200)
def test_offering_two_values_is_never_correct(case, shift):
    wrong = a_wrong_value(case, shift)
    assume(case.manifold != "shuffle" or wrong != case.target)
    for output in (f"Answer: {case.target} or {wrong}", f"Answer: {wrong} or {case.target}"):
        verdict = registry.get(case.manifold).grade(case, output)
        assert verdict.outcome is not Outcome.CORRECT, output


@given(case=cases, wrapper=st.sampled_from(WRAPPERS))
@examples(100)
def test_an_unclosed_reasoning_block_is_no_answer(case, wrapper):
    output = f"{wrapper[0]}Thinking... Answer: {case.target}"
    assert registry.get(case.manifold).grade(case, output).outcome is Outcome.UNPARSED


# ---------------------------------------------------------------- time

MB = 1_000_000


def repeated(unit: str, size: int = MB) -> str:
    return unit * (size // len(unit))


# Adversarial inputs of about 1 MB, then a final answer the grader must still find (True), or
# nothing the grader should accept (False).
ADVERSARIAL = {
    "open boxes": (repeated("\\boxed{"), True),
    "nested boxes then braces": ("\\boxed{" * 200 + repeated("{}", MB // 2), True),
    "deep braces": ("\\boxed{" + repeated("{", MB // 2) + repeated("}", MB // 2) + "}", True),
    "open think tags": (repeated("<think>") + "</think>", True),
    "unclosed think tags": (repeated("<think>"), False),
    "closing tags": (repeated("</think>"), True),
    "markers on one line": (repeated("Answer: "), True),
    "markers on their own lines": (repeated("Answer:\n"), True),
    "markers with no value": (repeated("Answer: x "), True),
    "bullet markers": (repeated("- Answer:\n"), True),
    "a line of digits": (repeated("7"), True),
    "a line of numbers": ("Answer: " + repeated("7 "), False),
    "open parentheses": (repeated("("), True),
    "remark lines": (repeated("(a remark)\n"), True),
    "bold markers": (repeated("**"), True),
    "blank lines": (repeated("\n"), True),
    "hedges": (repeated("1 or 2 "), True),
}


@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_grading_a_megabyte_is_fast_and_right(name):
    junk, then_answer = ADVERSARIAL[name]
    for manifold, make_case in [
        (OBJECTS, objects_case),
        (SEQUENCE, sequence_case),
        (SHUFFLE, books_case),
    ]:
        case = make_case()
        output = junk + (f"\nAnswer: {case.target}" if then_answer else "")
        start = time.perf_counter()
        verdict = manifold.grade(case, output)
        elapsed = time.perf_counter() - start
        # generous: about 0.03 s on a laptop; the old grader took 15 s for 40 KB of "\boxed{"
        assert elapsed < 1.0, (name, manifold.name, elapsed)
        expected = Outcome.CORRECT if then_answer else Outcome.UNPARSED
        assert verdict.outcome is expected, (name, manifold.name, verdict)
