"""The query engine against the loopback endpoint: retries, outcomes, cache, concurrency."""

import asyncio
import base64
import contextlib
import dataclasses
import itertools
import random
import threading
import time
from collections import defaultdict

import pytest

from numerate.config.sweep import ModelConfig, Sampling, parse_sweep_config
from numerate.endpoints import answer_cases, backoff_s, check_endpoint, retry_after_s
from numerate.grading.judging import grade_response
from numerate.manifolds.grading import Outcome
from numerate.planning.plan import plan_manifold
from numerate.store import Store
from tests.fake_openai import Reply, hashed_answer, prompt_of


def planned_cases(count=6, manifold="objects"):
    config = parse_sweep_config(
        {
            "name": "t",
            "models": [{"name": "b", "model": "baseline:oracle"}],
            "manifolds": [{"manifold": manifold, "count": count}],
        }
    )
    return plan_manifold(config.manifolds[0], 1)


def endpoint(server, **overrides):
    values = {"name": "fake", "model": "fake-model", "base_url": server.base_url,
              "max_retries": 3, "timeout_s": 5.0, "concurrency": 4}  # fmt: skip
    values.update(overrides)
    return ModelConfig(**values)


def run_query(model, planned, db_path, run_id="run-1"):
    store = Store.open(db_path)
    answered = asyncio.run(answer_cases(model, planned, store, run_id, retry_base_s=0.01))
    return answered.completions


def grades(model, planned, completions, run_id="run-1"):
    return {p.case_id: grade_response(p, completions[p.case_id, 0], run_id, model) for p in planned}


# ---------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "100000"}, 300.0),  # capped
        ({"retry-after": "soon"}, None),
        # a hostile pass: `Retry-After: -5` was a wait of 0, every retry sent at once (118 in
        # 5 s against an overloaded server): a wait that is none is our own backoff's
        ({"retry-after": "-5"}, None),
        ({"retry-after": "0"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after-ms": "-1", "retry-after": "3"}, None),
        ({"retry-after-ms": "x", "retry-after": "3"}, 3.0),
        ({"retry-after": "Mon, 01 Jan 2001 00:00:00 GMT"}, None),  # gone by
        ({}, None),
        (None, None),
    ],
)
def test_retry_after(headers, seconds):
    assert retry_after_s(headers) == seconds


def test_retry_after_http_date():
    from email.utils import formatdate

    waited = retry_after_s({"retry-after": formatdate(time.time() + 30, usegmt=True)})
    assert 25 <= waited <= 31


def test_backoff_grows_with_jitter_and_a_cap():
    rng = random.Random(0)
    for attempt in range(1, 12):
        delay = backoff_s(attempt, 1.0, rng)
        nominal = min(60.0, 2 ** (attempt - 1))
        assert 0.5 * nominal <= delay <= 1.5 * nominal


# ---------------------------------------------------------------- against the endpoint


def test_every_outcome_is_recorded(fake_openai, db_path):
    planned = planned_cases(6)
    targets = {p.input: p.target for p in planned}
    inputs = list(targets)
    behaviour = {
        inputs[0]: lambda: Reply(content=f"Answer: {targets[inputs[0]]}"),  # correct
        inputs[1]: lambda: Reply(content="Answer: 999"),  # wrong
        inputs[2]: lambda: Reply(content="I would rather not count."),  # unparsed
        inputs[3]: lambda: Reply(content="Let me list them: 1, 2,", finish_reason="length"),
        inputs[4]: lambda: Reply(status=400, error_message="bad request"),  # error, no retry
        inputs[5]: lambda: Reply(status=500),  # error after retries
    }
    fake_openai.responder = lambda body: behaviour[prompt_of(body)]()
    model = endpoint(fake_openai)
    completions = run_query(model, planned, db_path)
    outcomes = {
        p.input: g["outcome"]
        for p, g in zip(planned, grades(model, planned, completions).values(), strict=True)
    }
    assert [outcomes[i] for i in inputs] == [
        "correct", "wrong", "unparsed", "truncated", "error", "error",
    ]  # fmt: skip
    sent = defaultdict(int)
    for prompt in fake_openai.prompts():
        sent[prompt] += 1
    assert sent[inputs[4]] == 1  # a 400 is never retried
    assert sent[inputs[5]] == 1 + model.max_retries
    errors = {p.input: completions[p.case_id, 0].error for p in planned}
    assert errors[inputs[4]].startswith("HTTP 400") and "bad request" in errors[inputs[4]]
    assert errors[inputs[5]].startswith("HTTP 500")
    # errors are not cached: only the four answered requests are stored
    assert Store.open(db_path).query("SELECT count(*) FROM completions")[0][0] == 4


def test_429_honours_retry_after_then_succeeds(fake_openai, db_path):
    planned = planned_cases(1)
    calls = []

    def responder(body):
        calls.append(time.monotonic())
        if len(calls) == 1:
            return Reply(status=429, headers={"Retry-After": "0.3"})
        return Reply(content=f"Answer: {planned[0].target}")

    fake_openai.responder = responder
    model = endpoint(fake_openai)
    completion = run_query(model, planned, db_path)[planned[0].case_id, 0]
    assert completion.error is None and completion.attempts == 2
    assert calls[1] - calls[0] >= 0.29
    assert (
        grades(model, planned, {(planned[0].case_id, 0): completion})[planned[0].case_id]["outcome"]
        == "correct"
    )


def test_timeouts_are_retried_then_recorded_as_errors(fake_openai, db_path):
    planned = planned_cases(1)
    fake_openai.responder = lambda body: Reply(delay_s=2.0)
    model = endpoint(fake_openai, timeout_s=0.2, max_retries=1)
    completion = run_query(model, planned, db_path)[planned[0].case_id, 0]
    assert completion.error == "timeout: no answer in time"
    assert completion.attempts == 2
    assert len(fake_openai.prompts()) == 2


def test_a_body_that_trickles_in_is_timed_out_as_a_whole(db_path):
    """A server that sends its headers at once, then its body a byte at a time: each read
    comes within the client's timeout, the whole answer never does. timeout_s bounds the
    whole request (0.5 s here, not the 20 s the body would take)."""
    import socket
    import threading
    import time

    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            listener.settimeout(0.2)
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 200\r\n\r\n")  # fmt: skip
                for _ in range(200):
                    if stop.wait(0.1):
                        break
                    with contextlib.suppress(OSError):
                        conn.sendall(b" ")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    model = ModelConfig(name="slow", model="m", base_url=base_url, timeout_s=0.5, max_retries=0)
    planned = planned_cases(1)
    started = time.monotonic()
    try:
        completion = run_query(model, planned, db_path)[planned[0].case_id, 0]
    finally:
        stop.set()
        thread.join()
        listener.close()
    assert completion.error == "timeout: no answer in time"
    assert time.monotonic() - started < 5


def test_a_rate_limit_asking_for_days_ends_within_the_throttle_budget(fake_openai, db_path):
    """Retry-After: 99999999999 (capped at 300 s) with throttle_budget_s 1: the request
    waits no longer than its budget, then ends as an error naming the refusal."""
    import time

    fake_openai.responder = lambda body: Reply(status=429, headers={"Retry-After": "99999999999"})
    model = endpoint(fake_openai, throttle_budget_s=1.0, max_retries=0)
    planned = planned_cases(1)
    started = time.monotonic()
    completion = run_query(model, planned, db_path)[planned[0].case_id, 0]
    assert time.monotonic() - started < 5
    assert "HTTP 429" in completion.error and "still refused" in completion.error


@pytest.mark.parametrize("usage", [10**30, -3, "12", 7.5, None, True])
def test_token_counts_that_are_not_counts_are_stored_as_unknown(usage, fake_openai, db_path):
    """A server that reports nonsense token counts (1e30, negative, text): the answer is
    kept, its counts are unknown (NULL), and the run goes on."""
    from numerate.endpoints.answerers import read_completion, token_count

    assert token_count(usage) is None
    assert token_count(12) == 12
    body = {
        "choices": [{"message": {"content": "Answer: 3"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": usage, "completion_tokens": usage},
    }
    completion = read_completion(body, "r", 1, 0.1, 0)
    assert completion.text == "Answer: 3" and completion.prompt_tokens is None


def test_a_count_of_more_digits_than_python_reads_as_an_int_is_no_count(fake_openai, db_path):
    """A hostile pass: a usage of 4,400 digits (Python reads at most 4,300 as an int) made
    the body "not JSON", its answer thrown away and asked again; it is an answer whose
    token count is unknown, as a count of 30 digits is."""
    planned = planned_cases(1)
    body = ('{"choices": [{"message": {"content": "Answer: %s"}, "finish_reason": "stop"}], '
            '"usage": {"prompt_tokens": %s, "completion_tokens": -%s}}')  # fmt: skip
    huge = "9" * 4400
    fake_openai.responder = lambda _: Reply(raw_body=body % (planned[0].target, huge, huge))
    answer = run_query(endpoint(fake_openai, max_retries=0), planned, db_path)
    completion = answer[planned[0].case_id, 0]
    assert completion.error is None and completion.text == f"Answer: {planned[0].target}"
    assert (completion.prompt_tokens, completion.completion_tokens) == (None, None)


@pytest.mark.parametrize(
    ("reason", "stored"),
    [("stop", "stop"), ("length", "length"), ("content_filter", "content_filter"),
     ("\x1b[31m" + "w" * 100_000, None), ("w" * 65, None), ("", None), ("a\nb", None), (7, None)],
)  # fmt: skip
def test_a_finish_reason_is_stored_only_when_it_can_be_one(reason, stored):
    """A server's finish reason of any length, escape codes included, was stored as it came
    (and the run's shards could then not be ingested): one that is no short printable word
    is unknown, as one that is no text."""
    from numerate.endpoints.answerers import read_completion

    body = {"choices": [{"message": {"content": "Answer: 3"}, "finish_reason": reason}]}
    completion = read_completion(body, "r", 1, 0.1, 0)
    assert completion.text == "Answer: 3" and completion.finish_reason == stored


def test_with_cache_reuse_a_second_run_sends_nothing(fake_openai, db_path):
    planned = planned_cases(8)
    model = endpoint(fake_openai, cache="reuse")
    first = run_query(model, planned, db_path, run_id="run-1")
    assert len(fake_openai.prompts()) == 8
    second = run_query(model, planned, db_path, run_id="run-2")
    assert len(fake_openai.prompts()) == 8
    for p in planned:
        assert second[p.case_id, 0].text == first[p.case_id, 0].text
        assert second[p.case_id, 0].fetched_by == "run-1"
    rows = grades(model, planned, second, run_id="run-2")
    assert all(r["cached"] for r in rows.values())
    assert not any(r["cached"] for r in grades(model, planned, first).values())


def test_by_default_a_new_run_asks_again_and_a_resumed_run_does_not(fake_openai, db_path):
    planned = planned_cases(5)
    model = endpoint(fake_openai)
    assert model.cache == "resume"
    run_query(model, planned, db_path, run_id="night-1")
    run_query(model, planned, db_path, run_id="night-2")  # a new night measures again
    assert len(fake_openai.prompts()) == 10
    again = run_query(model, planned, db_path, run_id="night-2")  # resuming night 2
    assert len(fake_openai.prompts()) == 10
    assert {c.fetched_by for c in again.values()} == {"night-2"}
    assert not any(r["cached"] for r in grades(model, planned, again, "night-2").values())
    stored = Store.open(db_path).query("SELECT run_id, count(*) FROM completions GROUP BY 1")
    assert sorted(stored) == [("night-1", 5), ("night-2", 5)]


def test_an_answer_is_never_reused_for_another_server_or_revision(fake_openai, db_path):
    """Two servers serving the same model id: the second is asked, even with cache: reuse."""
    from tests.fake_openai import FakeOpenAI

    planned = planned_cases(4)
    fake_openai.responder = lambda body: Reply(content="Answer: 1")
    run_query(endpoint(fake_openai, cache="reuse"), planned, db_path, run_id="a")
    with FakeOpenAI() as other:
        other.responder = lambda body: Reply(content="Answer: 2")
        answers = run_query(endpoint(other, cache="reuse"), planned, db_path, run_id="b")
        assert len(other.prompts()) == 4
    assert {c.text for c in answers.values()} == {"Answer: 2"}
    revised = run_query(
        endpoint(fake_openai, cache="reuse", revision="ckpt-2"), planned, db_path, run_id="c"
    )
    assert len(fake_openai.prompts()) == 8
    assert {c.fetched_by for c in revised.values()} == {"c"}


def test_cache_off_never_reads_stored_answers(fake_openai, db_path):
    planned = planned_cases(3)
    model = endpoint(fake_openai, cache="off")
    run_query(model, planned, db_path, run_id="r")
    run_query(model, planned, db_path, run_id="r")
    assert len(fake_openai.prompts()) == 6


def test_samples_are_distinct_requests_each_graded(fake_openai, db_path):
    planned = planned_cases(3)
    model = endpoint(fake_openai, sampling=Sampling(temperature=0.8, samples=3, seed=10))
    answers = run_query(model, planned, db_path)
    assert len(fake_openai.requests) == 9
    assert sorted({body["seed"] for body in fake_openai.requests}) == [10, 11, 12]
    assert set(answers) == {(p.case_id, k) for p in planned for k in range(3)}
    assert len({c.request_hash for c in answers.values()}) == 9
    rows = [grade_response(p, answers[p.case_id, k], "run-1", model)
            for p in planned for k in range(3)]  # fmt: skip
    assert sorted({r["sample_index"] for r in rows}) == [0, 1, 2]


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Reply(content={"text": "7"}), "malformed answer: content of type dict, not text"),
        (Reply(content=[{"type": "text", "text": 7}]), "malformed answer: a text part whose"),
        (Reply(content="7", finish_reason=["stop"]), None),
        (Reply(choices=[]), "malformed answer: no choices"),
        (Reply(choices={"0": 1}), "malformed answer: not a chat completion"),
        (Reply(choices=[7]), "malformed answer: a choice without a message"),
        (
            Reply(raw_body="<html><body>502 Bad Gateway</body></html>"),
            "malformed answer: not JSON (text/html): '<html><body>502 Bad Gateway</body></html>'",
        ),
    ],
)
def test_malformed_answers_are_errors_and_never_cached(fake_openai, db_path, reply, error):
    planned = planned_cases(1)
    fake_openai.responder = lambda body: reply
    model = endpoint(fake_openai, cache="reuse", max_retries=0)
    first = run_query(model, planned, db_path, run_id="a")[planned[0].case_id, 0]
    if error is None:  # an answer, with a finish_reason that is none: unknown
        assert first.error is None and first.text == "7" and first.finish_reason is None
        return
    assert first.error is not None and first.error.startswith(error), first.error
    assert grade_response(planned[0], first, "a", model)["outcome"] == "error"
    assert Store.open(db_path).query("SELECT count(*) FROM completions")[0][0] == 0
    fake_openai.responder = lambda body: Reply(content=f"Answer: {planned[0].target}")
    second = run_query(model, planned, db_path, run_id="b")[planned[0].case_id, 0]
    assert second.text == f"Answer: {planned[0].target}"  # asked again, not cached
    assert len(fake_openai.prompts()) == 2


@pytest.mark.parametrize(
    ("reply", "text", "outcome"),
    [
        (Reply(content=None), "", "unparsed"),
        (Reply(content=""), "", "unparsed"),
        (Reply(content="  \n "), "  \n ", "unparsed"),
        (Reply(content=[1, {"type": "image"}]), "", "unparsed"),
        (Reply(content=None, finish_reason="content_filter"), "", "unparsed"),
        (  # OpenAI's refusal field: the model declined, in words kept as its answer
            Reply(content=None, reasoning="I can't help with that.", reasoning_field="refusal"),
            "I can't help with that.",
            "unparsed",
        ),
        (Reply(content=None, finish_reason="length"), "", "truncated"),
    ],
)
def test_an_empty_answer_is_the_models_graded_stored_and_not_asked_again(
    fake_openai, db_path, reply, text, outcome
):
    """A chat completion whose message holds no text is the model's answer: an empty one.
    It was an `error`, asked again up to `max_retries` times (at a temperature above 0, a
    new sample until one held text) and then left out of accuracy: a model that answered
    its hardest cases with nothing scored higher for it."""
    planned = planned_cases(1)
    fake_openai.responder = lambda body: reply
    model = endpoint(fake_openai, cache="resume", max_retries=3)
    first = run_query(model, planned, db_path)[planned[0].case_id, 0]
    assert first.error is None and first.text == text
    assert len(fake_openai.prompts()) == 1  # not asked again
    row = grade_response(planned[0], first, "run-1", model)
    assert (row["outcome"], row["answer"], row["error"]) == (outcome, None, None)
    stored = Store.open(db_path).query("SELECT text, finish_reason FROM completions")
    assert stored == [(text, reply.finish_reason)]
    fake_openai.responder = lambda body: Reply(content=f"Answer: {planned[0].target}")
    resumed = run_query(model, planned, db_path)[planned[0].case_id, 0]
    assert resumed.text == text and len(fake_openai.prompts()) == 1  # resumed: not paid again


def test_an_answer_in_content_parts_is_read_as_its_text(fake_openai, db_path):
    """Some servers send the content as a list of parts; before, its text was an "empty
    answer"."""
    planned = planned_cases(1)
    parts = [{"type": "text", "text": "Answer: "}, {"type": "text", "text": planned[0].target}]
    fake_openai.responder = lambda body: Reply(content=parts)
    answer = run_query(endpoint(fake_openai), planned, db_path)[planned[0].case_id, 0]
    assert answer.error is None and answer.text == f"Answer: {planned[0].target}"
    model = endpoint(fake_openai)
    assert grade_response(planned[0], answer, "run-1", model)["outcome"] == "correct"


def test_an_answer_holding_a_lone_surrogate_is_stored_with_a_replacement_character(
    fake_openai, db_path
):
    """JSON's "\\ud800" decodes to half a character no UTF-8 can encode: storing the answer
    ended the run in a UnicodeEncodeError traceback."""
    planned = planned_cases(1)
    fake_openai.responder = lambda body: Reply(content=f"\ud800 Answer: {planned[0].target}")
    answer = run_query(endpoint(fake_openai), planned, db_path)[planned[0].case_id, 0]
    assert answer.error is None and answer.text == f"\ufffd Answer: {planned[0].target}"
    stored = Store.open(db_path).query("SELECT text FROM completions")
    assert stored == [(f"\ufffd Answer: {planned[0].target}",)]


def test_identical_requests_are_sent_once(fake_openai, db_path):
    planned = planned_cases(3)
    duplicated = planned + [dataclasses.replace(p, case_id=p.case_id + "-copy") for p in planned]
    completions = run_query(endpoint(fake_openai), duplicated, db_path)
    assert len(fake_openai.prompts()) == 3
    assert len(completions) == 6


def test_a_request_the_batch_beside_is_asking_is_waited_for_not_sent_again(fake_openai, db_path):
    """A model's batches run two at a time (numerate.planning.scheduler.IN_FLIGHT), and each
    looks up the stored answers as it begins, before the other's have arrived: a case whose
    prompt the other batch was asking was paid for twice (26 of 30,000 requests in an oracle
    sweep). The second batch now waits for the first's answer, and grades its cases with it."""
    fake_openai.responder = lambda body: Reply(content="Answer: 7", delay_s=0.2)
    planned = planned_cases(3)
    copies = [dataclasses.replace(p, case_id=p.case_id + "-copy") for p in planned]
    model = endpoint(fake_openai)
    store = Store.open(db_path)

    async def two_batches():
        return await asyncio.gather(
            answer_cases(model, planned, store, "run-1", retry_base_s=0.01),
            answer_cases(model, copies, store, "run-1", retry_base_s=0.01),
        )

    first, second = asyncio.run(two_batches())
    assert len(fake_openai.prompts()) == 3
    assert sorted(case for case, _ in second.completions) == sorted(p.case_id for p in copies)
    assert {c.text for c in [*first.completions.values(), *second.completions.values()]} == {
        "Answer: 7"
    }
    assert [row["case_id"] for row in second.responses] == [p.case_id for p in copies]
    stored = store.query("SELECT (SELECT count(*) FROM completions), count(*) FROM responses")
    assert stored == [(3, 6)]  # one answer a request, a graded row a case


def test_a_batch_whose_request_the_stopped_batch_beside_was_asking_asks_it_itself(
    fake_openai, db_path, monkeypatch
):
    """The batch that was asking stops before its answer is kept: the one waiting for that
    answer sends the request, and loses no case."""
    from numerate.endpoints import answering

    fake_openai.responder = lambda body: Reply(delay_s=0.5)
    planned = planned_cases(3)
    copies = [dataclasses.replace(p, case_id=p.case_id + "-copy") for p in planned]
    model = endpoint(fake_openai)
    store = Store.open(db_path)
    waiting = threading.Event()
    claimed = answering.BEING_ASKED.claimed

    @contextlib.contextmanager
    def watched(run_id, keys):
        with claimed(run_id, keys) as claims:
            if claims.beside:  # the second batch: its requests are the first's
                waiting.set()
            yield claims

    monkeypatch.setattr(answering.BEING_ASKED, "claimed", watched)

    async def until(condition):
        while not condition():
            await asyncio.sleep(0.01)

    async def stopped_beside():
        first = asyncio.ensure_future(answer_cases(model, planned, store, "run-1"))
        await asyncio.wait_for(until(lambda: len(fake_openai.requests) == 3), 10)
        second = asyncio.ensure_future(answer_cases(model, copies, store, "run-1"))
        await asyncio.wait_for(until(waiting.is_set), 10)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        return await second

    second = asyncio.run(stopped_beside())
    assert len(fake_openai.prompts()) == 6  # the stopped batch's three, then the waiting one's
    assert sorted(case for case, _ in second.completions) == sorted(p.case_id for p in copies)
    assert all(c.error is None for c in second.completions.values())


def test_concurrency_limit_is_respected(fake_openai, db_path):
    fake_openai.responder = lambda body: Reply(delay_s=0.05)
    run_query(endpoint(fake_openai, concurrency=3), planned_cases(20), db_path)
    assert fake_openai.max_in_flight == 3


def test_sampling_and_system_prompt_are_sent(fake_openai, db_path):
    model = endpoint(fake_openai, system_prompt="Be brief.",
                     sampling=Sampling(temperature=0.7, max_tokens=64, seed=3))  # fmt: skip
    run_query(model, planned_cases(1), db_path)
    body = fake_openai.requests[0]
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.7, 64, 3)
    assert "top_p" not in body


@pytest.mark.parametrize("read", ["sk-test-secret", "sk-test-secret\n", "  sk-test-secret "])
def test_api_key_is_sent_from_the_environment_stripped(fake_openai, db_path, monkeypatch, read):
    """A key file's trailing newline (or stray spaces) is no part of the key."""
    fake_openai.api_key = "sk-test-secret"
    monkeypatch.setenv("FAKE_KEY", read)
    completion = run_query(endpoint(fake_openai, api_key_env="FAKE_KEY"), planned_cases(1), db_path)
    assert next(iter(completion.values())).error is None
    assert fake_openai.authorizations[-1] == "Bearer sk-test-secret"


def test_check_endpoint_reports_clear_problems(fake_openai, monkeypatch):
    from numerate.endpoints import EndpointError
    from numerate.kernel.errors import ConfigError

    assert asyncio.run(check_endpoint(endpoint(fake_openai))) is None
    warning = asyncio.run(check_endpoint(endpoint(fake_openai, model="other-model")))
    assert "does not list 'other-model'" in warning
    fake_openai.api_key = "right"
    monkeypatch.setenv("FAKE_KEY", "wrong")
    with pytest.raises(EndpointError, match=r"refused the API key from \$FAKE_KEY: HTTP 401"):
        asyncio.run(check_endpoint(endpoint(fake_openai, api_key_env="FAKE_KEY")))
    monkeypatch.delenv("FAKE_KEY")
    with pytest.raises(ConfigError, match="environment variable FAKE_KEY is not set"):
        asyncio.run(check_endpoint(endpoint(fake_openai, api_key_env="FAKE_KEY")))
    monkeypatch.setenv("FAKE_KEY", "   ")  # set, but to nothing: not said to be unset
    with pytest.raises(ConfigError, match="environment variable FAKE_KEY is empty"):
        asyncio.run(check_endpoint(endpoint(fake_openai, api_key_env="FAKE_KEY")))


def test_unreachable_endpoint():
    from numerate.endpoints import EndpointError

    model = ModelConfig(name="gone", model="m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(EndpointError, match=r"cannot reach model 'gone' at http://127.0.0.1:9/v1"):
        asyncio.run(check_endpoint(model))


def test_baselines(db_path):
    planned = planned_cases(30, "shuffle")
    oracle = ModelConfig(name="o", model="baseline:oracle")
    completions = run_query(oracle, planned, db_path)
    assert all(
        grade_response(p, completions[p.case_id, 0], "run-1", oracle)["outcome"] == Outcome.CORRECT
        for p in planned
    )


@pytest.mark.parametrize("manifold", ["objects", "shuffle", "sequence"])
def test_the_heuristic_baseline_scores_its_measured_floor(manifold, db_path):
    """baseline:heuristic plays the trivial strategy; on the cases of a point it scores what
    the point's chance_heuristic says (measured on other reference cases), within noise."""
    planned = planned_cases(200, manifold)
    heuristic = ModelConfig(name="h", model="baseline:heuristic")
    answers = run_query(heuristic, planned, db_path)
    right = sum(
        grade_response(p, answers[p.case_id, 0], "run-1", heuristic)["outcome"] == "correct"
        for p in planned
    )
    level = planned[0].chance_heuristic
    assert abs(right / len(planned) - level) < 4 * max(0.02, (level * (1 - level) / 200) ** 0.5)
    assert planned[0].chance == max(planned[0].chance_random, level)


# ---------------------------------------------------------------- failing endpoints


def test_a_key_echoed_by_the_server_is_never_stored(fake_openai, db_path, monkeypatch):
    secret = "sk-live-0123456789abcdef"
    monkeypatch.setenv("ECHO_KEY", secret)
    fake_openai.responder = lambda body: Reply(
        status=401, error_message=f"Incorrect API key provided: {secret}. Bearer {secret}"
    )
    model = endpoint(fake_openai, api_key_env="ECHO_KEY", max_retries=0)
    answers = run_query(model, planned_cases(2), db_path)
    for completion in answers.values():
        assert secret not in completion.error and "***" in completion.error


def test_a_malformed_answer_is_asked_again_then_answered(fake_openai, db_path):
    planned = planned_cases(1)
    replies = iter([Reply(raw_body="<html>502 Bad Gateway</html>"), Reply(choices=[{}]),
                    Reply(content=f"Answer: {planned[0].target}")])  # fmt: skip
    fake_openai.responder = lambda body: next(replies)
    from numerate.kernel.progress import Progress, reporting_to

    with reporting_to(Progress()) as progress:  # the bar did not count these retries
        completion = run_query(endpoint(fake_openai), planned, db_path)[planned[0].case_id, 0]
    assert completion.error is None and completion.attempts == 3
    assert completion.text == f"Answer: {planned[0].target}"
    assert progress.retries == 2


def test_a_busy_endpoint_is_usable_not_refused(fake_openai):
    """A 429 to the check is a busy server, which the run paces itself for (Retry-After,
    throttle_budget_s); it was reported as "endpoint refused every request"."""
    fake_openai.models_status = 429
    fake_openai.responder = lambda body: Reply(status=429, headers={"Retry-After": "0"})
    assert asyncio.run(check_endpoint(endpoint(fake_openai))) is None


def test_an_endpoint_without_a_model_listing_is_probed(fake_openai):
    from numerate.endpoints import EndpointError

    fake_openai.models_status = 500  # transformers serve; LiteLLM without a database: 400
    assert asyncio.run(check_endpoint(endpoint(fake_openai))) is None  # the probe was answered
    fake_openai.responder = lambda body: Reply(status=400, error_message="Authentication Error")
    with pytest.raises(EndpointError, match=r"refused the request without an API key \(set api"):
        asyncio.run(check_endpoint(endpoint(fake_openai)))
    with_user = fake_openai.base_url.replace("http://", "http://user:pw@")
    with pytest.raises(EndpointError, match="refused the user and password in base_url: HTTP 400"):
        asyncio.run(check_endpoint(endpoint(fake_openai, base_url=with_user)))
    fake_openai.responder = lambda body: Reply(raw_body="<html>login</html>")
    with pytest.raises(EndpointError, match="is not an OpenAI-compatible endpoint"):
        asyncio.run(check_endpoint(endpoint(fake_openai)))


def test_the_breaker_trips_on_refusals_only_before_any_success():
    import httpx2 as httpx
    import openai

    from numerate.endpoints import Breaker

    def refusal(status):
        request = httpx.Request("POST", "http://x/v1/chat/completions")
        response = httpx.Response(status, request=request)
        return openai.APIStatusError("refused", response=response, body=None)

    model = ModelConfig(name="m", model="m", base_url="http://x/v1", breaker_after=3)
    breaker = Breaker(model)
    for _ in range(2):
        breaker.failure(refusal(404), "HTTP 404: no such model")
    assert not breaker.tripped
    breaker.failure(refusal(404), "HTTP 404: no such model")
    assert breaker.cause == "endpoint does not serve this model (HTTP 404: no such model)"
    working = Breaker(model)
    working.success()
    for _ in range(10):  # a model that answers: refusals of single requests (context too long)
        working.failure(refusal(400), "HTTP 400: context too long")
    assert not working.tripped


def test_answers_too_large_to_read_are_no_endpoint_down():
    """The HTTP client wraps an answer past the read bound as a connection error: an endpoint
    that answered too much for down_after_s was stopped as "endpoint unreachable"."""
    import httpx2 as httpx
    import openai

    from numerate.endpoints import Breaker
    from numerate.endpoints.retries import AnswerTooLarge

    request = httpx.Request("POST", "http://x/v1/chat/completions")
    breaker = Breaker(ModelConfig(name="m", model="m", base_url="http://x/v1"))
    for _ in range(3):
        try:
            raise openai.APIConnectionError(request=request) from AnswerTooLarge(2**26)
        except openai.APIConnectionError as wrapped:
            breaker.failure(wrapped, "answer body larger than 64 MiB: not read")
    assert breaker.unreachable_since is None and not breaker.tripped  # counted as nothing
    breaker.failure(openai.APIConnectionError(request=request), "connection error: refused")
    assert breaker.unreachable_since is not None  # a refused connection starts the clock


def rate_limited(server, most_in_flight, retry_after=True):
    """A server that refuses (429) every request beyond `most_in_flight` at once."""

    def responder(body):
        if server.in_flight > most_in_flight:
            headers = {"Retry-After": "0.05"} if retry_after else {}
            return Reply(status=429, headers=headers, error_message="rate limit")
        return Reply(content="Answer: 1", delay_s=0.02)

    return responder


@pytest.mark.parametrize("retry_after", [True, False])
def test_a_rate_limited_server_loses_no_case_and_few_requests_are_refused(fake_openai, db_path,
                                                                          retry_after):  # fmt: skip
    """A server that takes 4 requests at once, asked at concurrency 16: nothing is lost, and
    once refused the limit stays below the level refused, so 429s stay under a tenth of the
    requests (the first burst of 12 is most of them). Its time: bench/rate_limit.py."""
    fake_openai.responder = rate_limited(fake_openai, 4, retry_after)
    planned = planned_cases(300)
    model = endpoint(fake_openai, concurrency=16, max_retries=0, cache="off")
    answers = run_query(model, planned, db_path, run_id="c16")
    assert all(a.error is None for a in answers.values())  # max_retries 0: 429s spend none
    assert len(answers) == len(planned)
    sent = len(fake_openai.requests)
    refused = sent - len(planned)
    assert refused < 0.10 * sent, (refused, sent)


def test_the_adaptive_limit_drops_to_what_the_server_takes_and_grows_back():
    from numerate.endpoints.pacing import QUIET_ROUNDS, AdaptiveLimit

    limit = AdaptiveLimit(16, start=16)
    limit.in_flight = 15  # 16 sent, one refused (its slot given back)
    limit.throttled()
    assert limit.allowed == 14  # at least a tenth fewer
    limit.in_flight = 4  # the server took only four
    limit.throttled()
    assert limit.allowed == 4 and limit.throttles == 2 and limit.refused_at == 5
    limit.in_flight = 0
    for _ in range(QUIET_ROUNDS * 4 - 1):  # not yet a quiet spell: never back to 5
        limit.succeeded()
        assert limit.allowed == 4
    limit.succeeded()  # quiet for QUIET_ROUNDS rounds: probe one higher
    assert limit.refused_at == 6
    for _ in range(20):
        limit.succeeded()
    assert limit.allowed == 5
    for _ in range(20_000):
        limit.succeeded()
    assert limit.allowed == 16 and limit.refused_at is None  # never above the ceiling
    limit.in_flight = 0
    limit.throttled()
    assert limit.allowed == 1  # refused with nothing else in flight: one at a time


def test_the_limit_starts_small_and_doubles_each_round_until_refused():
    from numerate.endpoints.pacing import START, AdaptiveLimit

    limit = AdaptiveLimit(64)
    assert limit.allowed == START
    for _ in range(START):  # a round of answers
        limit.succeeded()
    assert limit.allowed == 2 * START
    limit.in_flight = 6
    limit.throttled()
    assert limit.allowed == 6 and limit.refused_at == 7 and not limit.starting
    assert AdaptiveLimit(3).allowed == 3


def test_a_refused_probe_doubles_the_wait_before_the_next():
    from numerate.endpoints.pacing import MAX_QUIET_ROUNDS, QUIET_ROUNDS, AdaptiveLimit

    limit = AdaptiveLimit(16, start=16)
    limit.in_flight = 4
    limit.throttled()  # the server takes 4
    limit.in_flight = 0
    waits, patience = [], []
    for _ in range(6):
        answered = 0
        while limit.refused_at == 5:  # answers until the probe
            limit.succeeded()
            answered += 1
        waits.append(answered)
        limit.in_flight = 4  # the probe at 5 is refused
        limit.throttled()
        limit.in_flight = 0
        assert limit.refused_at == 5 and limit.allowed <= 4
        patience.append(limit.patience)
    assert waits[0] == QUIET_ROUNDS * 4
    assert patience == [min(MAX_QUIET_ROUNDS, QUIET_ROUNDS * 2**i) for i in range(1, 7)]
    assert all(later > earlier for earlier, later in itertools.pairwise(waits[:4]))
    for _ in range(50_000):  # a probe answered: the wait is back to QUIET_ROUNDS
        limit.succeeded()
    assert limit.refused_at is None and limit.patience == QUIET_ROUNDS


def test_the_adaptive_limit_bounds_requests_in_flight():
    from numerate.endpoints.pacing import AdaptiveLimit

    limit = AdaptiveLimit(3)
    peak = 0

    async def one():
        nonlocal peak
        async with limit:
            peak = max(peak, limit.in_flight)
            await asyncio.sleep(0.001)

    async def main():
        await asyncio.gather(*(one() for _ in range(50)))

    asyncio.run(main())
    assert peak == 3 and limit.in_flight == 0


def test_an_endpoint_that_never_answers_is_reported_after_the_timeout(monkeypatch):
    import socket

    import numerate.endpoints as endpoints
    import numerate.endpoints.checks as checks
    from numerate.config.sweep import ModelConfig

    monkeypatch.setattr(checks, "CHECK_TIMEOUT_S", 0.2)
    with socket.socket() as silent:  # accepts connections, never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        model = ModelConfig.model_validate({"name": "mute", "model": "m", "base_url": url})
        with pytest.raises(endpoints.EndpointError) as raised:
            asyncio.run(check_endpoint(model))
    message = str(raised.value)
    assert (
        message == f"cannot reach model 'mute' at {url}: ReadTimeout: no answer within 0.2 s, twice"
    )


# ---------------------------------------------------------------- secrets and true messages


@pytest.mark.parametrize(
    ("chat_refusal", "said"),
    [
        ("Authentication Error, Invalid proxy server token passed.", "Authentication Error"),
        ("No connected db.", "a LiteLLM proxy without a database answers so"),  # as measured
    ],
)
def test_a_litellm_proxy_refusing_the_key_is_reported_by_its_chat_answer(
    fake_openai, monkeypatch, chat_refusal, said
):
    """LiteLLM answers a wrong key with HTTP 400 (not 401), and its listing answers 400 "No
    connected db." whatever the key: the chat request's refusal is the cause shown."""
    from numerate.endpoints import EndpointError

    fake_openai.api_key = "sk-master-key"
    fake_openai.mimic_litellm(chat_refusal)
    monkeypatch.setenv("PROXY_KEY", "sk-master-key")
    assert asyncio.run(check_endpoint(endpoint(fake_openai, api_key_env="PROXY_KEY"))) is None
    monkeypatch.setenv("PROXY_KEY", "sk-wrong-key-0000")
    with pytest.raises(EndpointError) as raised:
        asyncio.run(check_endpoint(endpoint(fake_openai, api_key_env="PROXY_KEY")))
    message = str(raised.value)
    assert "refused the API key from $PROXY_KEY: HTTP 400" in message and said in message
    assert "refused every request" not in message and "sk-wrong-key-0000" not in message
    if chat_refusal != "No connected db.":
        assert "No connected db." not in message  # the listing's answer is not the cause


def test_a_password_in_the_base_url_is_never_shown_nor_stored(fake_openai, db_path):
    from numerate.endpoints import EndpointError

    password = "pa55-w0rd-in-url"
    url = fake_openai.base_url.replace("http://", f"http://user:{password}@")
    token = base64.b64encode(f"user:{password}".encode()).decode()  # the basic-auth header's
    fake_openai.responder = lambda body: Reply(
        status=400, error_message=f"bad request to {url} (credentials {token})"
    )
    answers = run_query(endpoint(fake_openai, base_url=url, max_retries=0), planned_cases(2),
                        db_path)  # fmt: skip
    assert all(password not in a.error and token not in a.error
               and "http://***@127.0.0.1" in a.error for a in answers.values())  # fmt: skip
    fake_openai.responder = hashed_answer
    run_query(endpoint(fake_openai, base_url=url), planned_cases(2), db_path, run_id="ok")
    [(stored,)] = Store.open(db_path).query("SELECT DISTINCT base_url FROM completions")
    assert stored == fake_openai.base_url.replace("http://", "http://***@")
    gone = ModelConfig(name="gone", model="m", base_url=f"http://user:{password}@127.0.0.1:9/v1")
    with pytest.raises(EndpointError) as raised:
        asyncio.run(check_endpoint(gone))
    assert password not in str(raised.value) and "http://***@127.0.0.1:9/v1" in str(raised.value)


@pytest.mark.parametrize("key", ["sk-ключ-0123456789", "sk-abc\r\ndef-0123456789", "sk-\x7fdel"])
def test_a_key_no_header_can_carry_is_refused_without_showing_it(fake_openai, monkeypatch, key):
    from numerate.kernel.errors import ConfigError

    monkeypatch.setenv("ODD_KEY", key)
    with pytest.raises(ConfigError) as raised:
        asyncio.run(check_endpoint(endpoint(fake_openai, api_key_env="ODD_KEY")))
    message = str(raised.value)
    assert message.startswith("model 'fake': the API key in $ODD_KEY holds a")
    assert key.strip() not in message and "sk-" not in message
    assert fake_openai.authorizations == []  # nothing was sent


def test_a_key_the_server_quotes_in_its_answer_is_not_stored(fake_openai, db_path, monkeypatch):
    secret = "sk-quoted-0123456789abcdef"
    monkeypatch.setenv("QUOTED_KEY", secret)
    fake_openai.responder = lambda body: Reply(content=f"Your key is {secret}.\nAnswer: 7")
    answers = run_query(endpoint(fake_openai, api_key_env="QUOTED_KEY"), planned_cases(2),
                        db_path)  # fmt: skip
    assert {a.text for a in answers.values()} == {"Your key is ***.\nAnswer: 7"}
    store = Store.open(db_path)
    texts = store.query("SELECT raw_text FROM responses") + store.query(
        "SELECT text FROM completions"
    )
    assert len(texts) == 4 and not any(secret in text for (text,) in texts)


def test_a_slow_check_is_said_and_bounded_by_the_model_s_timeout(monkeypatch):
    """Before: 15 s twice whatever timeout_s said, and nothing said while it waited."""
    import socket

    import numerate.endpoints.checks as checks
    from numerate.config.sweep import ModelConfig
    from numerate.endpoints import check_endpoints

    monkeypatch.setattr(checks, "SLOW_CHECK_S", 0.1)
    said: list[str] = []
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        model = ModelConfig.model_validate(
            {"name": "mute", "model": "m", "base_url": url, "timeout_s": 0.3}
        )
        _warnings, unusable = asyncio.run(check_endpoints([model], slow=said.append))
    assert said == [
        f"model 'mute' at {url} has not answered the check yet (waiting up to 0.6 s; "
        "timeout_s bounds it)"
    ]
    assert "no answer within 0.3 s, twice" in unusable["mute"]


def test_a_body_nested_too_deep_is_a_malformed_answer():
    """It was recorded as Python's `RecursionError: maximum recursion depth exceeded ...`."""
    from numerate.endpoints.retries import describe_error

    deep = RecursionError("maximum recursion depth exceeded while decoding a JSON array")
    assert describe_error(deep) == "malformed answer: nested too deep to read"


def test_requests_waiting_for_a_slot_when_the_breaker_trips_send_nothing():
    """Corpus L: after the breaker tripped (a server that cut every answer short), requests
    that had waited for a slot still sent their attempts, and retried, for 44 s more: the
    docs say retries stop once it trips. Now the first attempt trips it, and the four others
    waiting for the one slot send nothing."""
    import httpx2 as httpx

    from numerate.endpoints.answerers import EndpointAnswerer

    model = ModelConfig(name="tripped-in-a-queue", model="m", base_url="http://x/v1", concurrency=1,
                        max_retries=3)  # fmt: skip
    breaker = None
    sent = []

    async def send():
        sent.append(1)
        breaker.cause = "endpoint unreachable for 30 s (cut short)"  # as it trips
        await asyncio.sleep(0.05)
        raise httpx.ConnectError("refused")

    client = failing_client(send)

    async def main():
        nonlocal breaker
        answerer = EndpointAnswerer(model, client, retry_base_s=0.01)
        breaker = answerer.breaker
        planned = planned_cases(5)
        return await asyncio.gather(*(
            answerer.answer(case, [{"role": "user", "content": "q"}], f"r{i}")
            for i, case in enumerate(planned)
        ))  # fmt: skip

    completions = asyncio.run(main())
    assert len(sent) == 1
    assert [c.error for c in completions[1:]] == [
        "not sent: endpoint unreachable for 30 s (cut short)"
    ] * 4


def test_requests_waiting_for_a_slot_when_a_stop_signal_comes_send_nothing(monkeypatch):
    """A SIGTERM as an answer arrived: the slot it freed sent one more request before the
    stop reached the flow (22 sent, 19 stored with concurrency 2, in
    tests/cli/test_run.py's stop test on a fresh clone). Once a stop signal came, requests
    waiting for a slot send nothing and record nothing (no error to count against the
    model): they wait for the stop to cut them short, and the resumed run sends them."""
    import httpx2 as httpx

    from numerate.endpoints.answerers import EndpointAnswerer
    from numerate.kernel import stopping

    monkeypatch.setattr(stopping, "_asked", threading.Event())  # this test's own stop
    model = ModelConfig(name="stopped-in-a-queue", model="m", base_url="http://x/v1",
                        concurrency=1)  # fmt: skip
    sent = []

    async def send():
        sent.append(1)  # before any await: a request sent is counted in the same loop turn
        stopping.ask()  # the signal comes while the first request is in flight
        await asyncio.sleep(0)
        body = {"choices": [{"message": {"content": "3"}, "finish_reason": "stop"}]}
        return httpx.Response(200, json=body)

    async def main():
        answerer = EndpointAnswerer(model, failing_client(send), retry_base_s=0.01)
        asked = [
            asyncio.create_task(answerer.answer(case, [{"role": "user", "content": "q"}], f"r{i}"))
            for i, case in enumerate(planned_cases(5))
        ]
        first = await asyncio.wait_for(asked[0], timeout=30)
        for _ in range(50):  # turns of the loop: a freed slot would send within a few
            await asyncio.sleep(0)
        waiting = [task for task in asked[1:] if not task.done()]
        for task in asked[1:]:
            task.cancel()  # the stop reaches the flow
        await asyncio.gather(*asked[1:], return_exceptions=True)
        return first, len(waiting)

    first, waiting = asyncio.run(main())
    assert len(sent) == 1
    assert (first.error, first.text) == (None, "3")  # the one in flight is kept
    assert waiting == 4  # none answered, none recorded as an error


def failing_client(send):
    """An endpoint client whose HTTP client's `send` is `send` (one that raises)."""
    import httpx2 as httpx

    from numerate.endpoints.limits import EndpointClient

    class Http(httpx.AsyncClient):
        async def send(self, request, **_):
            return await send()

    return EndpointClient(None, Http(), "http://x/v1/chat/completions", {})


def test_a_retry_waiting_out_its_backoff_stops_when_the_breaker_trips():
    """Corpus L: requests waiting out a backoff (up to 90 s) went on for 44 s after the
    breaker tripped, then said they stopped. The trip ends their wait."""
    import httpx2 as httpx

    from numerate.endpoints.answerers import EndpointAnswerer

    model = ModelConfig(name="tripped-in-a-backoff", model="m", base_url="http://x/v1",
                        max_retries=5)  # fmt: skip

    async def send():
        raise httpx.ConnectError("refused")

    client = failing_client(send)

    async def main():
        answerer = EndpointAnswerer(model, client, retry_base_s=60.0)  # a 30 to 90 s backoff
        asked = asyncio.ensure_future(
            answerer.answer(planned_cases(1)[0], [{"role": "user", "content": "q"}], "r0")
        )
        await asyncio.sleep(0.2)
        answerer.breaker.cause = "endpoint unreachable for 30 s (refused)"  # another's trip
        return await asyncio.wait_for(asked, 5)

    started = time.monotonic()
    completion = asyncio.run(main())
    assert time.monotonic() - started < 3
    assert completion.error == "stopped: endpoint unreachable for 30 s (refused)"


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (429, b'{"error": {"message": "slow down", "type": "rate_limit"}}',
         "HTTP 429: slow down (rate_limit)"),
        (502, b"<html>502 Bad Gateway</html>", "HTTP 502: <html>502 Bad Gateway</html>"),
        (500, b"", "HTTP 500: Internal Server Error (the answer said no more)"),
        (500, b'{"error": {"message": "upstream \\u001b[31mred\\u0085 failed"}}',
         "HTTP 500: upstream \\x1b[31mred\\x85 failed"),
        (429, b"{}", "HTTP 429: Too Many Requests (the answer said no more)"),
        (400, b'{"detail": "no such model"}',
         "HTTP 400: Error code: 400 - {'detail': 'no such model'}"),
    ],
)  # fmt: skip
def test_an_error_status_is_the_openai_clients_error_with_what_the_server_said(status, body, said):
    """Requests are posted with the client's HTTP client, not its request machinery
    (chat_body): an error status is still the openai client's APIStatusError, its `body` the
    server's error object, so retries and messages read it as before."""
    import httpx2 as httpx
    import openai

    from numerate.endpoints.answerers import status_error
    from numerate.endpoints.retries import describe_error, is_retryable, is_throttle

    request = httpx.Request("POST", "http://x/v1/chat/completions")
    error = status_error(httpx.Response(status, content=body, request=request))
    assert isinstance(error, openai.APIStatusError) and error.status_code == status
    assert describe_error(error) == said
    assert is_throttle(error) == (status == 429) and is_retryable(error) == (status != 400)


def test_a_connection_error_without_a_message_says_what_it_is():
    """A hostile pass: a connection reset in the middle of a body was stored as `connection
    error: ReadError:`, nothing after the colon."""
    import httpx2 as httpx
    import openai

    from numerate.endpoints.retries import describe_error

    request = httpx.Request("POST", "http://x/v1/chat/completions")
    for cause, said in ((httpx.ReadError(""), "ReadError: no reason given (the connection was "
                         "closed or reset)"), (httpx.ConnectError("[Errno 111] refused"),
                         "ConnectError: [Errno 111] refused")):  # fmt: skip
        error = openai.APIConnectionError(request=request)
        error.__cause__ = cause
        assert describe_error(error) == f"connection error: {said}"


def test_a_refusal_at_the_ceiling_holds_until_a_probe_passes_it():
    """A mutation sweep: forgetting a refusal once a probe reached the ceiling (`>=`), one
    probe early, passed every test: the limit grew back to the level the server refused."""
    from numerate.endpoints.pacing import QUIET_ROUNDS, AdaptiveLimit

    limit = AdaptiveLimit(8, start=8)
    limit.in_flight = 7  # 8 sent, the eighth refused
    limit.throttled()
    assert limit.refused_at == 8 and limit.top == 7
    limit.in_flight = 0
    while limit.refused_at == 8:  # a quiet spell: a probe one higher, past the ceiling
        limit.succeeded()
    assert limit.refused_at is None and limit.top == 8
    limit = AdaptiveLimit(8, start=8)
    limit.in_flight = 6
    limit.throttled()
    limit.in_flight = 0
    for _ in range(QUIET_ROUNDS * 10):
        limit.succeeded()
        if limit.refused_at == 8:  # probed up to the ceiling: 8 is still the level refused
            assert limit.top == 7
            break
    assert limit.refused_at == 8


def test_a_fraction_of_a_request_is_not_allowed():
    """A mutation sweep: rounding the limit (2.6 allowing 3) passed every test."""
    from numerate.endpoints.pacing import AdaptiveLimit

    limit = AdaptiveLimit(8)
    limit.limit = 2.6
    assert limit.allowed == 2


@pytest.mark.parametrize(
    ("status", "retried", "throttle"), [(408, True, False), (409, True, False),
                                        (429, True, True), (503, True, True), (501, True, False),
                                        (404, False, False)],
)  # fmt: skip
def test_which_statuses_are_asked_again_and_which_slow_the_run(status, retried, throttle):
    """A mutation sweep: 409 (a conflict, as a busy backend says) no longer retried, or 503
    (overloaded) no longer slowing the run down, passed every test."""
    import httpx2 as httpx

    from numerate.endpoints.answerers import status_error
    from numerate.endpoints.retries import is_retryable, is_throttle

    request = httpx.Request("POST", "http://x/v1/chat/completions")
    error = status_error(httpx.Response(status, content=b"{}", request=request))
    assert (is_retryable(error), is_throttle(error)) == (retried, throttle)


def test_a_key_may_hold_a_space_but_no_control_or_non_ascii_character():
    """A second mutation sweep: refusing a space inside a key, or calling DEL non-ASCII,
    passed every test; and no test read where a Secret block's key is said to come from."""
    from numerate.endpoints.keys import checked_key, key_source
    from numerate.kernel.errors import ConfigError

    model = ModelConfig(name="m", model="m", base_url="http://127.0.0.1:9/v1",
                        api_key_env="KEY")  # fmt: skip
    assert checked_key(model, "  Bearer-ish key 42  ") == "Bearer-ish key 42"
    for raw, kind in (("ab\x7fcd", "a control"), ("ab\tcd", "a control"), ("abé", "a non-ASCII")):
        with pytest.raises(ConfigError, match=f"holds {kind} character"):
            checked_key(model, raw)
    assert key_source(model) == "$KEY"
    held = ModelConfig(name="m", model="m", base_url="http://127.0.0.1:9/v1",
                       api_key_secret="lab-key")  # fmt: skip
    assert "lab-key" in key_source(held) and "Secret" in key_source(held)


def test_a_refusal_of_the_key_is_named_for_403_and_a_litellm_proxy_without_a_database():
    """A third mutation sweep: 403, and LiteLLM's "No connected db.", were untested."""
    from numerate.endpoints.limits import refusal_cause

    assert refusal_cause(403, "HTTP 403: Forbidden") == (
        "endpoint refused the key (HTTP 403: Forbidden)"
    )
    assert refusal_cause(400, "HTTP 400: No connected db.") == (
        "endpoint refused the key (HTTP 400: No connected db.); a LiteLLM proxy without a "
        "database answers so to any key but its master key"
    )
    assert refusal_cause(400, "HTTP 400: bad request") == (
        "endpoint refused every request (HTTP 400: bad request)"
    )


def test_cache_off_still_stores_the_cases_once(fake_openai, db_path, monkeypatch):
    """`cache: off` reads no stored answer, but a batch's cases are stored all the same (a
    third mutation sweep: they were not), and a case already stored is not made a row again."""
    planned = planned_cases(3)
    model = endpoint(fake_openai, cache="off")
    store = Store.open(db_path)
    put = []
    monkeypatch.setattr(store, "put_cases", lambda rows: put.append(len(rows)) or
                        Store.put_cases(store, rows))  # fmt: skip
    for _ in range(2):
        asyncio.run(answer_cases(model, planned, store, "r", store_cases=True))
    assert put == [3, 0]
    assert store.query("SELECT count(*) FROM cases") == [(3,)]
    assert len(fake_openai.prompts()) == 6


def test_a_tripped_breaker_sends_nothing_and_says_why(fake_openai, db_path):
    """Requests not yet sent when a model's breaker trips stay unsent: each is an error that
    names the cause, fetched by no run (a re-run sends them)."""
    from numerate.endpoints.limits import endpoints_in_use, model_breaker

    model = endpoint(fake_openai)
    planned = planned_cases(3)
    store = Store.open(db_path)

    async def tripped():
        async with endpoints_in_use():
            model_breaker(model).cause = "endpoint refused the key (HTTP 401)"
            return await answer_cases(model, planned, store, "r")

    answered = asyncio.run(tripped())
    assert fake_openai.requests == []
    assert {c.error for c in answered.completions.values()} == {
        "not sent: endpoint refused the key (HTTP 401)"
    }
    assert {(c.attempts, c.fetched_by) for c in answered.completions.values()} == {(0, None)}
    assert store.query("SELECT count(*) FROM completions") == [(0,)]


def test_progress_counts_every_case_an_answer_serves_and_its_errors(fake_openai, db_path):
    """Two cases that share a request are two answers done, stored or asked; an error counts
    for each case it fails (a third mutation sweep: both were counted once a request)."""
    from numerate.kernel.progress import Progress, reporting_to

    def responder(body):  # about half the requests refused
        answer = hashed_answer(body)
        return Reply(status=400, error_message="no") if answer.content[-1] < "5" else answer

    fake_openai.responder = responder
    planned = planned_cases(12)
    twice = planned + [dataclasses.replace(p, case_id=p.case_id + "-copy") for p in planned]
    model = endpoint(fake_openai, max_retries=0, breaker_after=100)
    store = Store.open(db_path)
    with reporting_to(Progress()) as first:
        asked = asyncio.run(answer_cases(model, twice, store, "r")).completions
    failed = sum(c.error is not None for c in asked.values())
    assert 0 < failed < len(twice) and failed % 2 == 0
    assert (first.done, first.errors, first.cached) == (24, failed, 0)
    with reporting_to(Progress()) as resumed:  # the answers stored: errors are asked again
        asyncio.run(answer_cases(model, twice, store, "r"))
    assert (resumed.done, resumed.errors, resumed.cached) == (24, failed, 0)
    reused = endpoint(fake_openai, max_retries=0, breaker_after=100, cache="reuse")
    with reporting_to(Progress()) as later:  # another run's answers stand in: cached
        asyncio.run(answer_cases(reused, twice, store, "r2"))
    assert (later.done, later.errors, later.cached) == (24, failed, 24 - failed)


def test_an_answer_stored_whole_before_answers_were_bounded_is_cut_with_its_length():
    from numerate.endpoints.answering import _reused
    from numerate.kernel.answers import MAX_ANSWER_CHARS

    text = "x" * (MAX_ANSWER_CHARS + 10)
    row = {"text": text, "finish_reason": "stop", "prompt_tokens": 1, "completion_tokens": 2,
           "latency_s": 0.1, "attempts": 1, "run_id": "old"}  # fmt: skip
    completion = _reused("k", row, 0)
    assert len(completion.text) < len(text) and completion.received_chars == len(text)
    assert _reused("k", {**row, "text_chars": 7}, 0).received_chars == 7
    assert _reused("k", {**row, "text": "Answer: 3"}, 0).received_chars is None


def test_a_loop_s_clients_limits_and_breakers_last_until_its_last_run_ends():
    """Two runs in one event loop share a model's client, limits and breaker; the first to
    end leaves them to the other, the last closes the client and drops them all, so a tripped
    breaker does not outlive its runs (a third mutation sweep: each of the three passed)."""
    from numerate.endpoints.limits import (
        endpoints_in_use,
        model_breaker,
        model_limits,
        shared_client,
        stopped_cause,
    )
    from numerate.kernel.progress import LogProgress, reporting_to

    model = ModelConfig(name="m", model="m", base_url="http://127.0.0.1:9/v1")
    slower = model.model_copy(update={"timeout_s": model.timeout_s * 2})

    async def runs():
        async with endpoints_in_use():
            client, limits = await shared_client(model), model_limits(model)
            breaker = model_breaker(model)
            breaker.cause = "endpoint refused the key (HTTP 401)"
            other = await shared_client(slower)  # its own timeout: a client of its own
            assert other is not client and other.http.timeout.read == slower.timeout_s
            async with endpoints_in_use():
                assert await shared_client(model) is client
            assert await shared_client(model) is client and not client.http.is_closed
            assert model_limits(model) is limits and model_breaker(model) is breaker
        assert client.http.is_closed and other.http.is_closed
        async with endpoints_in_use():
            assert await shared_client(model) is not client
            assert model_limits(model) is not limits
            assert not model_breaker(model).tripped
            # another sweep of the process names another endpoint, or model, alike: the
            # key it was refused with there stopped this one's model too
            elsewhere = model.model_copy(update={"base_url": "http://127.0.0.1:10/v1"})
            served = ModelConfig(name="m", model="other", base_url=model.base_url)
            keyed = model.model_copy(update={"api_key_env": "ANOTHER_KEY"})
            model_breaker(model).cause = "endpoint refused the key (HTTP 401)"
            assert stopped_cause(model) == "endpoint refused the key (HTTP 401)"
            for other_model in (elsewhere, served, keyed):
                assert not model_breaker(other_model).tripped
                assert stopped_cause(other_model) is None
                assert model_limits(other_model) is not model_limits(model)
        with reporting_to(LogProgress()) as progress:  # each model's limit counts once
            async with endpoints_in_use():
                ours, theirs = model_limits(model)[0], model_limits(elsewhere)[0]
                model_limits(model)  # again: the same limit
                assert progress.in_flight_limit() == ours.allowed + theirs.allowed

    asyncio.run(runs())


def test_the_breaker_trips_after_down_after_s_without_an_answer(monkeypatch):
    """The clock starts at the first connection refused, a success stops it, a timeout (a
    slow answer) neither starts nor trips it, and a 429 is no refusal of the endpoint."""
    import types

    import httpx2 as httpx
    import openai

    from numerate.endpoints import Breaker, limits

    clock = [100.0]
    monkeypatch.setattr(limits, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    refused = openai.APIConnectionError(request=request)
    slow = openai.APITimeoutError(request=request)
    breaker = Breaker(ModelConfig(name="m", model="m", base_url="http://x/v1",
                                  down_after_s=30, breaker_after=2))  # fmt: skip
    breaker.failure(slow, "timed out")
    assert breaker.unreachable_since is None
    breaker.failure(refused, "connection error: refused")
    clock[0] = 129.9
    breaker.failure(refused, "connection error: refused")
    breaker.success()  # an answer: the clock stops
    assert breaker.unreachable_since is None and not breaker.tripped
    clock[0] = 131.0
    breaker.failure(refused, "connection error: refused")  # starts again here
    clock[0] = 160.9
    breaker.failure(slow, "timed out")
    breaker.failure(refused, "connection error: refused")
    assert not breaker.tripped
    clock[0] = 500.0  # nothing in between: no answer for 369 s
    breaker.failure(refused, "connection error: refused")
    assert breaker.cause == "endpoint unreachable for 30 s (connection error: refused)"
    throttled = Breaker(ModelConfig(name="m", model="m", base_url="http://x/v1", breaker_after=2))
    response = httpx.Response(429, request=request)
    for _ in range(5):
        throttled.failure(openai.RateLimitError("slow down", response=response, body=None),
                          "HTTP 429: slow down")  # fmt: skip
    assert not throttled.tripped and throttled.refusals == 0
