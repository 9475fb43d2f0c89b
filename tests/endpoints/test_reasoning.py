"""Issue 38, part 1: what reasoning models send beside the answer is stored: the reasoning
(the endpoint's `reasoning_content` or `reasoning` field, or the think block of the text) and
the reasoning tokens of the usage; an answer without them stores NULL, never "" or 0."""

from __future__ import annotations

import hashlib
import json

import duckdb
import pytest
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


def swept(folder, responder, count: int):
    """A sweep of `count` objects cases against a fake answering `responder`: its database
    and the requests the fake received."""
    db = folder / "r.duckdb"
    with FakeOpenAI(responder) as server:
        models = [{"name": "thinker", "model": "fake", "base_url": server.base_url}]
        config = write_config(folder / "run.yaml", models,
                              [{"manifold": "objects", "count": count}])  # fmt: skip
        done = runner.invoke(app, ["run", "--config", str(config), "--db", str(db)])
    assert done.exit_code == 0, done.output
    return db, server.requests


def test_a_sweep_stores_each_answers_reasoning_and_reasoning_tokens(tmp_path):
    db, requests = swept(tmp_path, reasoning_reply, 12)
    expected = {}
    for request in requests:
        reply = reasoning_reply(request)
        thought = reply.reasoning
        if reply.reasoning is None:
            thought = reply.content.partition("</think>")[0] + "</think>"
        expected[prompt_of(request)] = (thought, reply.reasoning_tokens, reply.finish_reason)
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
            assert (finish, outcome, text) == ("length", "truncated", "")
        assert tokens == said_tokens  # the stored answer keeps its reasoning tokens too
        kinds.add((said_tokens is None, said_finish, text.startswith("<think>")))
    assert len(kinds) == 4  # every kind of answer was served


def completion(content, **message):
    """The JSON body of a chat completion answering `content` (and `message`'s fields)."""
    usage = {"prompt_tokens": 5, "completion_tokens": 9,
             "completion_tokens_details": {"reasoning_tokens": None}}  # fmt: skip
    return {"choices": [{"message": {"content": content, **message}, "finish_reason": "stop"}],
            "usage": usage}  # fmt: skip


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


def spender(body) -> Reply:
    """By the prompt's hash: a short answer (2 tokens), a longer one (6), or one truncated at
    max_tokens (5): the fake counts a completion's tokens as its words."""
    kind = hashlib.sha256(prompt_of(body).encode()).digest()[1] % 3
    if kind == 0:
        return Reply("Answer: 3", reasoning_tokens=1)
    if kind == 1:
        return Reply("Let me see now. Answer: 3", reasoning_tokens=4)
    return Reply("Let me see now and", finish_reason="length", reasoning_tokens=5)


def test_report_tokens_shows_efficiency_and_the_budget_as_computed_by_hand(tmp_path):
    db, _ = swept(tmp_path, spender, 30)
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT completion_tokens, reasoning_tokens, outcome FROM responses")
        rows = rows.fetchall()
    by_tokens = {t: [r for r in rows if r[0] == t] for t in (2, 5, 6)}
    assert sum(map(len, by_tokens.values())) == len(rows) == 30 and all(by_tokens.values())
    correct = sum(1 for _, _, outcome in rows if outcome == "correct")
    wrong = [t for t, _, outcome in rows if outcome != "correct"]  # truncated ones too
    spent = sum(t for t, _, _ in rows)
    shown = runner.invoke(app, ["report", "--db", str(db), "--tokens", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    found = json.loads(shown.stdout)
    [efficiency] = found["tokens"]
    assert int(efficiency["answers"]) == 30
    assert float(efficiency["mean_completion_tokens"]) == pytest.approx(spent / 30)
    assert float(efficiency["mean_reasoning_tokens"]) == pytest.approx(
        sum(r for _, r, _ in rows) / 30
    )
    assert int(efficiency["reasoning_reported"]) == 30
    assert float(efficiency["correct_per_1k_tokens"]) == pytest.approx(1000 * correct / spent)
    # a fresh-eyes review: truncated answers (the costliest) were left out of the wrong ones
    assert 5 in wrong
    assert float(efficiency["mean_tokens_wrong"]) == pytest.approx(sum(wrong) / len(wrong))
    # the budget by hand: answers at 2 tokens, truncated (censored) at 5, answers at 6
    short, cut = len(by_tokens[2]), len(by_tokens[5])
    survival_at_2 = 1 - short / 30
    median = 2.0 if survival_at_2 <= 0.5 else 6.0  # at 6 every case left has answered
    [values] = found["token_budget"]
    assert (int(values["answers"]), int(values["truncated"])) == (30, cut)
    assert float(values["median_tokens_to_answer"]) == median
    # a hostile pass: a count no answer can have (a database changed by hand) was a ValueError
    # (exit 1) in `report --tokens` and in every plot, a heatmap's too
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE responses SET completion_tokens = -7 WHERE completion_tokens = 2")
    refused = runner.invoke(app, ["report", "--db", str(db), "--tokens"])
    assert refused.exit_code == 2 and "ValueError" not in refused.stderr, refused.output
    assert "holds an answer of -7 completion tokens, a count no answer can have" in refused.stderr
    heatmap = ["plot", "--db", str(db), "--kind", "heatmap", "--out", str(tmp_path / "h.png")]
    assert runner.invoke(app, heatmap).exit_code == 0


LOOP = "Wait, let me recount the items one more time from the start. "


def looper(body) -> Reply:
    """A third of the cases loop (one sentence 40 times), the others reason once, briefly;
    a fifth are truncated, reasoning still."""
    digest = hashlib.sha256(prompt_of(body).encode()).digest()
    if digest[2] % 3 == 0:
        thought = LOOP * 40
    else:
        thought = f"There are {digest[3]} kinds of things here; I add up each kind in turn."
    if digest[4] % 5 == 0:
        return Reply(None, finish_reason="length", reasoning=thought)
    return Reply("Answer: 3", reasoning=thought)


def test_report_tokens_shows_which_reasoning_loops(tmp_path):
    import zlib

    db, _ = swept(tmp_path, looper, 30)
    with duckdb.connect(str(db), read_only=True) as con:
        stored = con.execute(
            "SELECT case_id, reasoning, reasoning_ratio, outcome FROM responses"
        ).fetchall()
    for _, reasoning, ratio, _ in stored:  # the definition: bytes over their zlib level 9
        data = reasoning.encode()
        assert ratio == pytest.approx(len(data) / len(zlib.compress(data, 9)))
    looped = {case for case, reasoning, _, _ in stored if reasoning == LOOP * 40}
    assert 0 < len(looped) < len(stored)
    shown = runner.invoke(app, ["report", "--db", str(db), "--tokens", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    found = json.loads(shown.stdout)
    listed = [row["case_id"] for row in found["most_repetitive"][: len(looped)]]
    assert set(listed) == looped  # the loops come first
    groups = found["loops"]
    expected = {}
    for _, _, ratio, outcome in stored:
        expected.setdefault(outcome, []).append(ratio)
    assert {g["outcome"]: g["answers"] for g in groups} == {k: len(v) for k, v in expected.items()}
    for group in groups:
        assert group["max_ratio"] == pytest.approx(max(expected[group["outcome"]]))
