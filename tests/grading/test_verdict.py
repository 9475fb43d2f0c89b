"""How a model's part of a run is judged (numerate.grading.verdict): pure code."""

from hypothesis import given
from hypothesis import strategies as st

from numerate.config.sweep import ModelConfig
from numerate.grading.verdict import PartVerdict, numgen_verdict, part_verdict, run_verdict

MODEL = ModelConfig(name="m", model="m", base_url="http://127.0.0.1:9/v1", max_error_rate=0.1)


def test_a_model_whose_every_request_failed_has_failed_even_before_the_breaker_stops_it():
    """One case, refused with HTTP 401: the model was called `degraded` ("1 of 1 requests
    failed"), as if some answers had come."""
    verdict = part_verdict(MODEL, 1, 1, None, "HTTP 401: bad key")
    assert verdict.status == "failed"
    assert (
        verdict.line()
        == "model 'm' failed: every request failed (1 of 1); most often: HTTP 401: bad key"
    )
    assert run_verdict([verdict])[0] == "failed"


def test_a_cause_is_one_line_whatever_the_server_said():
    """A hostile pass: a server's error with a line break split the run's one error line."""
    said = "HTTP 400: bad\nsecond line"
    for verdict in (part_verdict(MODEL, 2, 2, None, said), part_verdict(MODEL, 2, 2, said, None),
                    part_verdict(MODEL, 10, 5, None, said)):  # fmt: skip
        assert "\n" not in verdict.line() and "bad\\nsecond line" in verdict.line()


def test_some_errors_over_the_rate_are_degraded_and_under_it_ok():
    assert part_verdict(MODEL, 10, 2, None, "HTTP 500").status == "degraded"
    assert part_verdict(MODEL, 20, 3, None, "HTTP 500").status == "degraded"  # 15% > 10%
    assert part_verdict(MODEL, 10, 1, None, None).status == "ok"  # 10%: not over the rate


@given(n=st.integers(0, 500), data=st.data(), stopped=st.sampled_from([None, "breaker"]))
def test_failed_means_no_usable_answer_or_stopped(n, data, stopped):
    errors = data.draw(st.integers(0, n))
    verdict = part_verdict(MODEL, n, errors, stopped, "x")
    failed = stopped is not None or errors == n
    assert (verdict.status == "failed") == failed
    assert (verdict.status == "degraded") == (not failed and errors / n > MODEL.max_error_rate)


def test_a_run_fails_when_any_part_failed_and_names_only_the_parts_not_ok():
    """A mutation sweep: failing a run only when every part failed, or listing the parts that
    were ok too, passed every test (each case had a single part)."""
    ok = PartVerdict("a", "ok", None, 10, 0)
    degraded = PartVerdict("b", "degraded", "3 of 10 requests failed", 10, 3)
    failed = PartVerdict("c", "failed", "no answer was recorded", 0, 0)
    assert run_verdict([ok, degraded, failed]) == ("failed", f"{degraded.line()}; {failed.line()}")
    assert run_verdict([ok, degraded]) == ("degraded", degraded.line())
    assert run_verdict([ok, ok]) == ("finished", None)


def test_a_stopped_part_says_how_many_of_its_requests_failed_or_that_none_was_sent():
    """A mutation sweep: a part stopped after answers without errors said "nothing was sent",
    and one that recorded no answer said "every request failed (0 of 0)"; both passed."""
    model = ModelConfig(name="m", model="m", base_url="http://127.0.0.1:9/v1")
    stopped = part_verdict(model, 5, 0, "endpoint unreachable for 30 s", None)
    assert stopped.cause == "endpoint unreachable for 30 s; 0 of 5 requests failed"
    assert part_verdict(model, 0, 0, "refused key", None).cause == "refused key; nothing was sent"
    nothing = part_verdict(model, 0, 0, None, None)
    assert (nothing.status, nothing.cause, nothing.error_rate) == (
        "failed", "no answer was recorded", 0.0)  # fmt: skip


def test_a_numgen_run_is_degraded_above_its_share_of_images_without_a_count():
    assert numgen_verdict(100, 2, 0.02) is None  # exactly the share: not above it
    assert numgen_verdict(100, 3, 0.02) == (
        "3 of 100 images have no count (3 for an error; 3.0% > max_error_rate 2.0%)"
    )
    # a counter that says no number measures nothing: its run is no success (a first pass
    # of hostile answers: every image unparsed, `finished`, exit 0, a table of n = 0)
    assert numgen_verdict(2, 0, 0.02, unparsed=2) == (
        "2 of 2 images have no count (0 for an error, 2 with no count in the counter's "
        "answer; 100.0% > max_error_rate 2.0%)"
    )
    assert numgen_verdict(100, 1, 0.02, unparsed=1) is None
    assert numgen_verdict(0, 0, 0.0) is None  # a run of no image (a baseline's none failed)
    assert numgen_verdict(10, 1, 0.0) is not None and numgen_verdict(10, 0, 0.0) is None


@given(images=st.integers(1, 1000), data=st.data(), rate=st.floats(0, 1))
def test_more_errors_never_make_a_numgen_run_less_degraded(images, data, rate):
    errors = data.draw(st.integers(0, images - 1))
    assert numgen_verdict(images, 0, rate) is None
    if numgen_verdict(images, errors, rate) is not None:
        assert numgen_verdict(images, errors + 1, rate) is not None
    assert (numgen_verdict(images, images, rate) is None) == (rate == 1.0)
