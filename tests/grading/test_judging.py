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


def test_an_answer_cut_at_max_tokens_is_truncated_even_when_right_and_keeps_what_was_read():
    """docs/statistics.md: `truncated` whatever can be read from it (a fourth mutation sweep:
    a right one counted correct, or its answer dropped, passed every test)."""
    from numerate.grading.judging import judge
    from numerate.manifolds.grading import Outcome
    from tests.endpoints.test_endpoints import planned_cases

    case = planned_cases(1)[0]
    right = f"Answer: {case.target}"
    assert judge(case.manifold, case.case, right, "stop") == (Outcome.CORRECT, case.target)
    assert judge(case.manifold, case.case, right, "length") == (Outcome.TRUNCATED, case.target)
    assert judge(case.manifold, case.case, None, "length") == (Outcome.TRUNCATED, None)
    assert judge(case.manifold, case.case, right, "stop", "HTTP 500") == (Outcome.ERROR, None)


def test_an_answer_is_cached_only_when_another_run_fetched_it():
    """An error was fetched by no run: it is no cached answer (nor is this run's own)."""
    from numerate.config.sweep import ModelConfig
    from numerate.grading.judging import grade_response
    from tests.endpoints.test_endpoints import planned_cases

    case = planned_cases(1)[0]
    model = ModelConfig(name="m", model="baseline:oracle")
    for fetched_by, cached in ((None, False), ("r", False), ("earlier", True)):
        completion = Completion("h", "Answer: 1", fetched_by=fetched_by)
        assert grade_response(case, completion, "r", model)["cached"] is cached
