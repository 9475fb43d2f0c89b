import pytest
from hypothesis import given
from hypothesis import strategies as st

from manifolds.grading import answer_span, find_phrases, normalise_phrase, parse_numbers


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
