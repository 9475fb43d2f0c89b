"""What a line of numerate's says on a terminal (numerate.kernel.errors)."""

from hypothesis import given
from hypothesis import strategies as st

from numerate.kernel.errors import for_terminal


@given(st.text(), st.integers(min_value=8, max_value=300))
def test_a_line_for_the_terminal_holds_nothing_it_acts_on_and_is_bounded(line, limit):
    shown = for_terminal(line, limit)
    assert all(c.isprintable() or c == "\t" for c in shown)
    assert len(shown) <= limit  # escaped first, then cut


@given(st.text(st.characters(exclude_categories=["C", "Z"]), max_size=500))
def test_a_printable_line_within_the_bound_is_left_as_it_is(line):
    assert for_terminal(line, 500) == line


def test_a_long_line_keeps_its_head_and_its_end():
    shown = for_terminal("--run " + "k" * 90_000 + ": no such run", 2000)
    assert len(shown) == 2000
    assert shown.startswith("--run kkk") and shown.endswith("kk: no such run") and "…" in shown
    assert for_terminal("a\x1b]0;x\x07\u202eb") == "a\\x1b]0;x\\x07\\u202eb"
