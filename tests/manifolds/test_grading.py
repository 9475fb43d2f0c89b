import math
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numerate.manifolds.grading import (
    AnswerSpan,
    answer_spans,
    drop_parenthesised,
    find_answer,
    find_phrases,
    is_hedge,
    normalise_phrase,
    number_runs,
    parse_numbers,
    strip_reasoning,
)


def answer_span(output):
    """The first candidate span (rules 1 and 2), any text accepted: find_answer reading each
    span as itself."""
    return find_answer(output, lambda span: span)


@pytest.mark.parametrize(
    ("output", "span", "explicit"),
    [
        ("Answer: 7", "7", True),
        ("Let me count.\n3 + 4 = 7\nAnswer: 7", "7", True),
        ("**Answer:** 12", "12", True),
        ("**Answer: 12**", "12", True),
        ("The answer is 5.", "5", True),
        ("Final answer: The Pearl", "The Pearl", True),
        ("## Answer\n\n42\n", "42", True),
        ("so the total is $\\boxed{9}$.", "9", True),
        ("\\boxed{\\text{red ball}}", "red ball", True),
        ("<think>Answer: 3</think>\nAnswer: 4", "4", True),
        ("<think>long thought\nAnswer: 3", None, None),  # still thinking: no answer given
        ("reasoning the server left in</think>The answer is 8", "8", True),
        ("I counted carefully and the result is **11**", "11", True),
        ("Counting...\nThere are 6 fruits.", "There are 6 fruits", False),
        ("", None, None),
        ("   \n  ", None, None),
    ],
)
def test_answer_span(output, span, explicit):
    found = answer_span(output)
    if span is None:
        assert found is None
    else:
        assert found is not None
        assert (found.text, found.explicit) == (span, explicit)


def test_last_marker_wins():
    assert answer_span("Answer: 3\nWait, I missed one.\nAnswer: 4").text == "4"


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("7", [7]),
        ("seven apples", [7]),
        ("twenty-one", [21]),
        ("one hundred and five", [105]),
        ("a total of 1,234", [1, 234]),
        ("11, 14, 17", [11, 14, 17]),
        ("-3 and 4", [-3, 4]),
        ("−3", [-3]),
        ("3-4", [3, 4]),
        ("7.0", [7]),
        ("7.5", [7.5]),
        ("three four", [3, 4]),
        ("two million three thousand five", [2_003_005]),  # scales add up
        ("none", [0]),
        ("no numbers here", []),
    ],
)
def test_parse_numbers(text, numbers):
    assert parse_numbers(text) == numbers


def test_thousands_separators_only_when_asked():
    assert parse_numbers("1,234 items", thousands_separators=True) == [1234]


def test_phrases_prefer_the_longest_occurrence():
    aliases = {"striker": "striker", "second striker": "second striker"}
    assert find_phrases("She is the Second Striker.", aliases) == ["second striker"]
    assert find_phrases("striker, then second striker", aliases) == ["striker", "second striker"]


def test_normalise_phrase():
    assert normalise_phrase("**The Great Gatsby**!") == "great gatsby"
    assert normalise_phrase("Catch-22") == "catch 22"


@given(st.text())
def test_extraction_never_raises(text):
    span = answer_span(text)
    parse_numbers(text)
    if span is not None:
        parse_numbers(span.text)


# ---------------------------------------------------------------- reasoning, candidates, helpers


@pytest.mark.parametrize(
    ("output", "kept"),
    [
        ("<think>12</think>14", "14"),
        ("<THINKING>12</THINKING>14", "14"),
        ("<reasoning>12</reasoning>14", "14"),
        ("[THINK]12[/THINK]14", "14"),
        ("◁think▷12◁/think▷14", "14"),
        ("the server dropped the opening tag</think>14", "14"),
        ("<think>a<think>b</think>c</think>14", "14"),  # only what follows the last close
        ("<think>12", ""),  # still thinking: no answer
        ("Answer: 14\n<think>wait", ""),
        ("no reasoning at all", "no reasoning at all"),
    ],
)
def test_strip_reasoning(output, kept):
    assert strip_reasoning(output) == kept


@pytest.mark.parametrize(
    ("output", "span"),
    [
        ("\\boxed{\\boxed{3}}", "3"),
        ("\\boxed{1{,}234}", "1,234"),
        ("$\\boxed{\\text{Pride \\& Prejudice}}$", "Pride & Prejudice"),
        ("Answer: $14$", "14"),
        ("Answer: 14\n\n(If pants counted, the answer is 17.)", "14"),
        ("Answer: Answer: 7", "7"),
        ("reanswer: 5\nAnswer: 7", "7"),
    ],
)
def test_first_candidate_span(output, span):
    found = answer_span(output)
    assert found is not None and found.text == span


def test_a_bullet_list_after_a_marker_is_one_span_when_a_list_is_wanted():
    spans = list(answer_spans("Answer:\n- 6\n- 12\n- 18", many=True))
    assert spans[0] == AnswerSpan("6, 12, 18", True)
    spans = list(answer_spans("Answer:\n1. 6\n2. 12\n3. 18", many=True))
    assert spans[0] == AnswerSpan("6, 12, 18", True)
    # for one value, a multi-item list after the marker is not the answer span
    assert [s.text for s in answer_spans("Answer:\n- 6\n- 12")] == ["- 12"]


def test_every_boxed_value_when_a_list_is_wanted_the_last_otherwise():
    output = "\\boxed{6}, \\boxed{12}, \\boxed{18}"
    assert next(answer_spans(output, many=True)).text == "6, 12, 18"
    assert next(answer_spans(output)).text == "18"


def test_a_marker_with_no_value_falls_back_to_the_earlier_one():
    def number(span):
        numbers = parse_numbers(span.text)
        return numbers[0] if numbers else None

    assert find_answer("Answer: 14\n\nI hope this answer is helpful!", number) == 14
    assert find_answer("The answer is:\n(I count every item)\n14", number) == 14
    assert find_answer("I hope this answer is helpful!", number) is None


def test_candidates_are_tried_in_rule_order():
    output = "Answer: 3\nThe answer is **5**, I think"
    texts = [s.text for s in answer_spans(output)]
    assert texts == ["5**, I think", "3", "5", "The answer is **5**, I think"]


@pytest.mark.parametrize(
    ("text", "runs"),
    [
        ("6 12 18, adding 6 each time", [[6, 12, 18], [6]]),
        ("6, 12 and then 18", [[6, 12, 18]]),
        ("the next 3 terms are 6, 12, 18", [[3], [6, 12, 18]]),
        ("6 12 18, not 6 12 24", [[6, 12, 18]]),
        ("18 + 6 = 24", [[18], [6], [24]]),
        ("six, twelve, eighteen", [[6, 12, 18]]),
    ],
)
def test_number_runs(text, runs):
    assert number_runs(text) == runs


@pytest.mark.parametrize(
    ("text", "hedge"),
    [
        ("14 or 15", True),
        ("14 (or maybe 15)", True),
        ("either fourteen or fifteen", True),
        ("between 14 and 15", True),
        ("14 or 14", False),
        ("14 (not 17)", False),
        ("14 (2 shirts or 3 hats)", False),
        ("14 (= 5 + 2 + 2 + 5)", False),
        ("14-15", False),  # a range only when asked for
    ],
)
def test_is_hedge(text, hedge):
    assert is_hedge(text) is hedge


def test_ranges_and_list_hedges():
    assert is_hedge("14-15", ranges=True)
    assert is_hedge("14 to 15", ranges=True)
    assert not is_hedge("17 - 3 = 14", ranges=True)  # arithmetic, not a range
    assert is_hedge("1 2 1 or 1 1 1", width=3)
    assert not is_hedge("6 12 18 or 6 12 18", width=3)


def test_drop_parenthesised():
    assert drop_parenthesised("14 (= 5 + (2 + 2) + 5)").strip() == "14"
    assert drop_parenthesised("(11, 14) (each adds 3)", remarks_only=True).strip() == "(11, 14)"
    assert drop_parenthesised("(" * 10) == "(" * 10


def test_numbers_never_round_to_a_wrong_integer():
    assert parse_numbers("14.000000000000000001") != [14]
    assert parse_numbers("9" * 40) == [math.inf]
    assert parse_numbers("not 17 but 14", skip_negated=True) == [14]


def test_a_number_after_not_is_left_out_when_asked_whatever_punctuation_comes_between():
    for said in ("17, not (14)", "17, not: 14", '17, not "14"'):
        assert parse_numbers(said, skip_negated=True) == [17]
        assert parse_numbers(said) == [17, 14]


def test_ampersand_reads_as_and():
    assert normalise_phrase("Pride & Prejudice") == "pride and prejudice"
    assert find_phrases("P&P", {"pride and prejudice": "x"}) == []


def test_find_phrases_is_fast_on_many_occurrences():
    aliases = {"striker": "striker", "second striker": "second striker"}
    start = time.perf_counter()
    assert find_phrases("second striker " * 50_000, aliases) == ["second striker"]
    assert time.perf_counter() - start < 1.0


ASIDES = ["(I count every item)", "(each one once)", "(twice checked)", "(and again)"]


@pytest.mark.parametrize("asides", [3, 4])
def test_a_marker_s_value_is_found_past_three_asides_and_no_more(asides):
    """A fourth mutation sweep: stopping at the third aside passed every test."""
    output = "\n".join(["Answer:", *ASIDES[:asides], "7", "That is all."])
    spans = [(s.text, s.explicit) for s in answer_spans(output)]
    assert spans == ([("7", True)] if asides == 3 else []) + [("That is all", False)]


def test_a_marker_on_the_line_after_a_marker_is_read_as_its_own_span_once():
    """The line after `The answer is:` holds a marker: its value is the span, not the line
    with its marker (which was a second, wrong candidate)."""
    spans = [(s.text, s.explicit) for s in answer_spans("The answer is:\nAnswer: 5\nThat is all.")]
    assert spans == [("5", True), ("That is all", False)]


def test_of_two_bold_values_on_the_last_line_the_last_is_the_answer():
    spans = [(s.text, s.explicit) for s in answer_spans("First **3**, no, **5** in all")]
    assert spans[0] == ("5", True)


def test_edges_of_reading_an_answer():
    """A fourth mutation sweep: each of these passed every test with the rule changed."""
    assert next(answer_spans("\\boxed{\\textbf{\\text{7}}}")).text == "7"  # nested
    assert next(answer_spans("Answer:\n14. That is all.")).text == "14. That is all"  # no list
    assert is_hedge("between 14 15") and is_hedge("between 14 and 15")
    assert normalise_phrase("an apple") == normalise_phrase("the apple") == "apple"
    asides = "\n".join(ASIDES[:3])
    assert [s.text for s in answer_spans(f"so:\n7\n{asides}")] == ["7"]  # three passed over
    assert parse_numbers("9" * 18) == [int("9" * 18)] and parse_numbers("9" * 19) == [math.inf]


@pytest.mark.parametrize("extra", [0, 1])
def test_a_span_of_exactly_the_longest_length_is_read_and_one_longer_is_not(extra):
    from numerate.manifolds.grading import MAX_SPAN_CHARS

    value = "7" * (MAX_SPAN_CHARS + extra)
    boxed = [s.text for s in answer_spans(f"\\boxed{{{value}}}\n")]
    last = [s.text for s in answer_spans(f"so:\n{value}")]
    assert (value in boxed, value in last) == (not extra, not extra)
