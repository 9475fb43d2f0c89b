"""Issue 38, part 1: what reasoning models send beside the answer is stored: the reasoning
(the endpoint's `reasoning_content` or `reasoning` field, or the think block of the text) and
the reasoning tokens of the usage; an answer without them stores NULL, never "" or 0."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import duckdb
from typer.testing import CliRunner

from numerate.cli import app
from numerate.endpoints.answerers import read_completion
from numerate.kernel.answers import MAX_ANSWER_CHARS
from numerate.manifolds.grading import reasoning_part
from tests.cli.test_run import write_config
from tests.fake_openai import FakeOpenAI, Reply, prompt_of

runner = CliRunner()


def reasoning_reply(body) -> Reply:
    """By the prompt's hash: a reasoning field (either name), a think block in the text, none
    at all, or every token spent reasoning (cut at max_tokens, no answer text)."""
    kind = hashlib.sha256(prompt_of(body).encode()).digest()[0] % 4
    thought = "Let me count. " * (1 + kind)
    if kind == 0:
        return Reply("Answer: 3", reasoning=thought, reasoning_tokens=40)
    if kind == 1:
        return Reply("Answer: 3", reasoning=thought, reasoning_field="reasoning")
    if kind == 2:
        return Reply(f"<think>{thought}</think>\nAnswer: 3", reasoning_tokens=7)
    return Reply(None, finish_reason="length", reasoning=thought, reasoning_tokens=2048)


def test_a_sweep_stores_each_answers_reasoning_and_reasoning_tokens(tmp_path):
    db = tmp_path / "r.duckdb"
    with FakeOpenAI(reasoning_reply) as server:
        models = [{"name": "thinker", "model": "fake", "base_url": server.base_url}]
        config = write_config(tmp_path / "run.yaml", models,
                              [{"manifold": "objects", "count": 12}])  # fmt: skip
        done = runner.invoke(app, ["run", "--config", str(config), "--db", str(db)])
        expected = {}
        for request in server.requests:
            reply = reasoning_reply(request)
            thought = reply.reasoning
            if reply.reasoning is None:
                thought = reply.content.partition("</think>")[0] + "</think>"
            expected[prompt_of(request)] = (thought, reply.reasoning_tokens, reply.finish_reason)
    assert done.exit_code == 0, done.output
    with duckdb.connect(str(db), read_only=True) as con:
        stored = con.execute(
            "SELECT c.input, r.reasoning, r.reasoning_cut, k.reasoning_tokens, "
            "r.reasoning_tokens, r.finish_reason, r.outcome, r.raw_text FROM responses r "
            "LEFT JOIN completions k USING (request_hash) JOIN cases c USING (case_id)"
        ).fetchall()
    assert len(stored) == len(expected) >= 12
    kinds = set()
    for prompt, reasoning, cut, tokens, graded_tokens, finish, outcome, text in stored:
        thought, said_tokens, said_finish = next(v for k, v in expected.items() if prompt in k)
        assert (reasoning, cut, graded_tokens) == (thought, False, said_tokens)
        if said_finish == "length":  # all of max_tokens spent reasoning: truncated, kept
            assert (finish, outcome, text, tokens) == ("length", "truncated", "", None)
        else:  # the stored answer keeps its reasoning tokens too (reused by a later run)
            assert tokens == said_tokens
        kinds.add((said_tokens is None, said_finish, text.startswith("<think>")))
    assert len(kinds) == 4  # every kind of answer was served


def completion(content, **message):
    details = SimpleNamespace(reasoning_tokens=None)
    usage = SimpleNamespace(prompt_tokens=5, completion_tokens=9, completion_tokens_details=details)
    message = SimpleNamespace(content=content, **message)
    choice = SimpleNamespace(message=message, finish_reason="stop")
    return SimpleNamespace(choices=[choice], usage=usage)


def test_an_answer_without_reasoning_stores_none_and_a_long_one_is_cut():
    plain = read_completion(completion("Answer: 3"), "h", 1, 0.1, 0)
    assert (plain.reasoning, plain.reasoning_chars, plain.reasoning_tokens) == (None, None, None)
    blank = read_completion(completion("Answer: 3", reasoning_content="  "), "h", 1, 0.1, 0)
    assert blank.reasoning is None  # white space is no reasoning
    long = "why " * MAX_ANSWER_CHARS
    cut = read_completion(completion("Answer: 3", reasoning_content=long), "h", 1, 0.1, 0)
    assert len(cut.reasoning) == MAX_ANSWER_CHARS and cut.reasoning_chars == len(long)
    both = read_completion(
        completion("Answer: 3", reasoning_content="first", reasoning="second"), "h", 1, 0.1, 0
    )
    assert both.reasoning == "first"


def test_the_reasoning_block_of_a_text_is_what_the_grader_leaves_out():
    assert reasoning_part("<think>a\nb</think>\nAnswer: 3") == "<think>a\nb</think>"
    assert reasoning_part("<think>cut off in the middle") == "<think>cut off in the middle"
    assert reasoning_part("Answer: 3") is None
