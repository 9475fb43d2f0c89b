"""What a line of numerate's says on a terminal (numerate.kernel.errors)."""

import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from numerate.kernel.errors import fixed, for_terminal, printable

ACTED_ON = "\x1b\x07\x00\x7f\x9b\u2028\u2029\u202e\u2066\u200f"


def acted_on(character: str) -> bool:
    category = unicodedata.category(character)
    return (
        category in ("Cc", "Zl", "Zp", "Cs")
        or character in "\u061c\u200e\u200f"
        or ("\u202a" <= character <= "\u202e" or "\u2066" <= character <= "\u2069")
    )


@given(st.text(), st.integers(min_value=8, max_value=300))
def test_a_line_for_the_terminal_holds_nothing_it_acts_on_and_is_bounded(line, limit):
    shown = for_terminal(line, limit)
    assert not any(acted_on(c) and c != "\t" for c in shown)
    assert len(shown) <= limit  # escaped first, then cut


@given(st.text(st.characters(exclude_categories=["Cc", "Zl", "Zp", "Cs"]), max_size=500))
def test_what_a_terminal_shows_as_it_is_stays_as_it_is(line):
    """A wide space, a no-break space, an emoji's joiner, a soft hyphen: text, not escaped."""
    bidi = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    if not bidi & set(line):
        assert for_terminal(line, 500) == line


def test_ordinary_text_stays_and_what_a_terminal_acts_on_is_escaped():
    for text in (
        "日本\u3000語",
        "a\xa0b",
        "👨\u200d👩\u200d👧",
        "10.00.00\u202fAM.png",
        "soft\xadhyphen",
    ):
        assert printable(text) == text
    assert for_terminal("a\x1b]0;x\x07\u202eb") == "a\\x1b]0;x\\x07\\u202eb"
    assert printable("l1\nl2\tx\x1b", keep="\n\t") == "l1\nl2\tx\\x1b"
    assert all(printable(c) != c for c in ACTED_ON)


def test_a_long_line_keeps_its_head_and_its_end():
    shown = for_terminal("--run " + "k" * 90_000 + ": no such run", 2000)
    assert len(shown) == 2000
    assert shown.startswith("--run kkk") and shown.endswith("kk: no such run") and "…" in shown


def test_a_note_while_work_goes_on_is_escaped_as_an_error_is(caplog):
    """A review: notes of a run in progress (a batch's error quoting an endpoint's words)
    reached the log and the terminal's progress as they were."""
    from numerate.kernel.progress import Progress

    with caplog.at_level("WARNING"):
        Progress().note("the endpoint said \x1b]0;owned\x07")
    assert "\x1b" not in caplog.text and "said \\x1b]0;owned\\x07" in caplog.text


@given(st.floats(), st.integers(min_value=0, max_value=6))
def test_a_figure_is_short_whatever_its_size(value, digits):
    """A latency of 1e300 s from a shard was shown with 300 digits; a figure under 10^15 is
    shown with its decimals as before, and none is longer than its decimals and 22 more."""
    shown = fixed(value, digits)
    assert len(shown) <= digits + 22
    if not abs(value) >= 1e15:  # NaN too
        assert shown == f"{value:.{digits}f}"
    else:  # infinity: "inf" either way
        assert shown == f"{value:.{digits}e}"
