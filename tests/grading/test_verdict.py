"""How a model's part of a run is judged (numerate.grading.verdict): pure code."""

from hypothesis import given
from hypothesis import strategies as st

from numerate.config.sweep import ModelConfig
from numerate.grading.verdict import part_verdict, run_verdict

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
