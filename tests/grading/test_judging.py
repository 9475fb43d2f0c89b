"""numerate.grading.judging: what a completion stores of its reasoning."""

from numerate.grading.judging import Completion


def test_reasoning_cut_is_unknown_without_a_reasoning_and_says_whether_one_was_cut():
    """A mutation sweep: `reasoning_cut` stored as false for an answer with no reasoning
    (where nothing could be cut: null) passed every test."""
    plain = Completion("h", "Answer: 7").reasoning_columns()
    assert plain["reasoning"] is None and plain["reasoning_cut"] is None
    whole = Completion("h", "Answer: 7", reasoning="think").reasoning_columns()
    assert whole["reasoning_cut"] is False
    cut = Completion("h", "Answer: 7", reasoning="th…nk", reasoning_chars=9_000_000)
    assert cut.reasoning_columns()["reasoning_cut"] is True
