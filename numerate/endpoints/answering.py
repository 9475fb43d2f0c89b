"""Answering a batch of cases: stored answers where the cache policy allows, the rest from the
model, each graded the moment it arrives.

- One request per distinct request hash (endpoint, model id, revision, messages, sampling,
  sample), in a batch and in the batch beside it (`BeingAsked`); a stored answer stands in
  for it only as the model's cache policy allows.
- At most `concurrency` requests per model are being answered at once, and at most
  2 x `concurrency` are in flight (sent, or waiting to be retried).
- A fresh answer and its grade go to the process's journal on disk as soon as they arrive
  (numerate.store.Store.receive), in one write for all that arrive in one turn of the event
  loop (`Receipts`), before the request's slot is given to another: a process killed at any
  moment loses only the requests in flight (and the answers of the turn it was killed in),
  which a resumed run sends again; a stop signal loses only the requests in flight; readers
  see the graded answer within seconds.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from numerate.config.sweep import ModelConfig
from numerate.endpoints.answerers import answerer_for, storable
from numerate.endpoints.limits import model_limits
from numerate.grading.judging import Completion, grade_response
from numerate.kernel.answers import HEAD_CHARS, MAX_ANSWER_CHARS, TAIL_CHARS, cut_answer
from numerate.kernel.credentials import redact
from numerate.kernel.progress import current as current_progress
from numerate.planning.plan import PlannedCase, case_row, messages_for, request_hasher
from numerate.store import Store, now
from numerate.store.rows import CompletionRow, ResponseRow

Requests = dict[str, tuple[PlannedCase, list[dict[str, str]], int]]
"""Request hash -> (the case, its messages, the sample index)."""


def plan_requests(
    model: ModelConfig, planned: Sequence[PlannedCase]
) -> tuple[dict[tuple[str, int], str], Requests]:
    """The requests the cases need: every (case id, sample) -> its request hash, and each
    distinct request once (identical cases share one)."""
    by_answer: dict[tuple[str, int], str] = {}
    requests: Requests = {}
    hashers = [request_hasher(model, sample) for sample in range(model.sampling.samples)]
    for item in planned:
        messages = messages_for(model, item)
        for sample, hasher in enumerate(hashers):
            key = hasher(messages)
            by_answer[item.case_id, sample] = key
            requests.setdefault(key, (item, messages, sample))
    return by_answer, requests


async def stored_answers(
    model: ModelConfig, store: Store, requests: Requests, run_id: str,
    cases: Sequence[PlannedCase] = (),
) -> dict[str, Completion]:  # fmt: skip
    """The stored answers the model's cache policy lets stand in for these requests:
    `resume` those of this run, `reuse` those of any run, `off` none. `cases` are stored
    first (those not stored yet), in the same hold of the database."""

    def look_up() -> dict[str, CompletionRow]:
        with store.session():  # a stored case is not made into a row again (a re-run's)
            missing = store.missing_cases([case.case_id for case in cases]) if cases else set()
            store.put_cases([case_row(case) for case in cases if case.case_id in missing])
            if model.cache == "off":
                return {}
            only_run = run_id if model.cache == "resume" else None
            return store.get_completions(list(requests), only_run)

    stored = await asyncio.to_thread(look_up) if cases or model.cache != "off" else {}
    return {key: _reused(key, row, requests[key][2]) for key, row in stored.items()}


def _reused(key: str, row: CompletionRow, sample: int) -> Completion:
    """A stored answer standing in for a request: cut as numerate.kernel.answers stores it
    (one stored before answers were bounded is cut now), with the length it had."""
    text, cut_from = cut_answer(row["text"]) if row["text"] is not None else (None, None)
    return Completion(
        key,
        text,
        finish_reason=row["finish_reason"],
        prompt_tokens=row["prompt_tokens"],
        completion_tokens=row["completion_tokens"],
        latency_s=row["latency_s"],
        attempts=row["attempts"],
        fetched_by=row["run_id"],
        sample=sample,
        received_chars=row.get("text_chars") or cut_from,
        reasoning=row.get("reasoning"),
        reasoning_chars=row.get("reasoning_chars"),
        reasoning_tokens=row.get("reasoning_tokens"),
    )


@dataclass
class Answered:
    """A batch's answers, keyed by (case id, sample), and their graded `responses` rows in the
    batch's order (every sample of each case)."""

    completions: dict[tuple[str, int], Completion]
    responses: list[ResponseRow]


async def answer_cases(
    model: ModelConfig,
    planned: Sequence[PlannedCase],
    store: Store,
    run_id: str,
    retry_base_s: float = 1.0,
    store_cases: bool = False,
) -> Answered:
    """Answers for the cases, `model.sampling.samples` per case, each graded as it arrives;
    `store_cases`: the cases are stored first (those not stored yet).

    A stored answer stands in for a request only as the model's `cache` policy allows (see
    `stored_answers`): a resumed run sends only what it lacks. Their grades go to the
    store's journal at once (in the database with the next session: a session of their own
    cost each batch of a cached re-run an attach and a checkpoint). The rest are asked of
    the model; each complete answer and the grades of the cases it answers go to the
    store's journal when it arrives.
    """
    by_answer, requests = plan_requests(model, planned)
    cases = {p.case_id: p for p in planned}
    answers_of: dict[str, list[PlannedCase]] = {}  # the cases a request answers
    for (case_id, _), key in by_answer.items():
        answers_of.setdefault(key, []).append(cases[case_id])
    progress = current_progress()
    # claimed before the stored answers are looked up: an answer is then either claimed by
    # the batch beside this one (waited for) or found stored (BeingAsked)
    with BEING_ASKED.claimed(run_id, requests) as claims:
        mine = {key: request for key, request in requests.items() if key not in claims.beside}
        results = await stored_answers(model, store, mine, run_id, planned if store_cases else ())
        for key, completion in results.items():
            claims.settle(key, completion)
        graded: dict[tuple[str, int], ResponseRow] = {}

        def grade(key: str, completion: Completion) -> list[ResponseRow]:
            rows = [grade_response(p, completion, run_id, model) for p in answers_of[key]]
            graded_at = now()
            for row in rows:
                row["graded_at"] = graded_at
                graded[row["case_id"], completion.sample] = row
            return rows

        if results:
            rows = [row for key, completion in results.items() for row in grade(key, completion)]
            await asyncio.to_thread(store.receive, "responses", rows)
        answers_per_request = Counter(by_answer.values())
        earlier = sum(answers_per_request[k] for k, c in results.items() if c.fetched_by != run_id)
        progress.advance(sum(answers_per_request[k] for k in results), cached=earlier)

        pending = [key for key in mine if key not in results]
        if pending or claims.beside:  # all stored: no client (nor its import) is needed
            await _ask(model, requests, pending, store, run_id, retry_base_s, results, grade,
                       answers_per_request, claims)  # fmt: skip
        return Answered(
            completions={answer: results[key] for answer, key in by_answer.items()},
            responses=[graded[answer] for answer in by_answer],
        )


async def _ask(model: ModelConfig, requests: Requests, pending: list[str], store: Store,
               run_id: str, retry_base_s: float, results: dict[str, Completion],
               grade: Any, answers_per_request: Counter[str], claims: Claims) -> None:  # fmt: skip
    """Ask the model for the `pending` requests, at most 2 x concurrency in flight, and wait
    for those the batch beside this one is asking (`claims.beside`)."""
    progress = current_progress()
    answerer = await answerer_for(model, retry_base_s)
    _, in_flight = model_limits(model)

    async def ask(key: str) -> None:
        try:
            await send(key)
        finally:
            claims.settle(key, results.get(key))

    async def wait(key: str, asked: concurrent.futures.Future[Completion | None]) -> None:
        completion = await asyncio.shield(asyncio.wrap_future(asked))
        if completion is None:  # the batch that asked it kept no answer (a stop, a full disk)
            await send(key)
            return
        try:  # that batch stored the answer: this one grades its own cases with it
            await asyncio.shield(receipts.keep([], grade(key, completion)))
        except Exception:  # the journal's: as for an answer received (below)
            return
        answered(key, completion)

    def answered(key: str, completion: Completion) -> None:
        results[key] = completion
        weight = answers_per_request[key]
        progress.advance(weight, errors=weight if completion.error is not None else 0)

    async def send(key: str) -> None:
        item, messages, sample = requests[key]
        async with in_flight:
            if receipts.failed is not None:  # never sent: the batch fails (below), and its
                return  # next try asks what it lacks
            # a tripped breaker: the answerer sends nothing ("not sent", a re-run sends it)
            completion = await answerer.answer(item, messages, key, sample)
            if completion.error is None:
                completion = dataclasses.replace(completion, fetched_by=run_id)
            if completion.received_chars is not None:
                said_cut(model.name, item.case_id, completion.received_chars)
            kept = [completion_row(model, completion, run_id)] if storable(completion) else []
            written = receipts.keep(kept, grade(key, completion))  # before a slot frees
        try:
            await asyncio.shield(written)  # a cancelled caller cancels no other's wait
        except Exception:  # the journal's, kept in Receipts.failed: raised once the answers
            return  # already asked for are in (paid for: they are kept); a stop is at once
        answered(key, completion)

    with Receipts(store) as receipts:
        beside = [wait(key, asked) for key, asked in claims.beside.items()]
        await asyncio.gather(*(ask(key) for key in pending), *beside)
        if receipts.failed is not None:
            raise receipts.failed


class BeingAsked:
    """The requests this process's batches are asking, by run and request hash. A model's
    batches run two at a time (numerate.planning.scheduler.IN_FLIGHT), and a batch that
    needs a request the other is asking waits for that answer instead of paying for it
    again. A batch claims its requests before it looks up the stored answers, and gives a
    claim up only once its answer is in the journal (or none will come): so an answer is
    either claimed or found stored, never neither (26 of 30,000 requests of an oracle sweep
    were sent twice). Holds the requests of the batches in flight only."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # batches may run on threads of their own
        self._asking: dict[tuple[str, str], concurrent.futures.Future[Completion | None] | None]
        self._asking = {}
        """The claimed requests: the future of their answer once a batch waits for it (None
        until then: few requests are waited for, and a future costs a lock)."""

    @contextlib.contextmanager
    def claimed(self, run_id: str, keys: Iterable[str]) -> Iterator[Claims]:
        """Claim for the block the requests `keys` that no other batch is asking; the block's
        claims are given up as it ends, those not settled with no answer."""
        claims = Claims(self, run_id)
        with self._lock:
            for key in keys:
                if (run_id, key) not in self._asking:
                    self._asking[run_id, key] = None
                    claims.open.add(key)
                    continue
                asked = self._asking[run_id, key]
                if asked is None:
                    asked = self._asking[run_id, key] = concurrent.futures.Future()
                claims.beside[key] = asked
        try:
            yield claims
        finally:
            for key in list(claims.open):
                claims.settle(key, None)

    def _settle(self, run_id: str, key: str, completion: Completion | None) -> None:
        with self._lock:
            asked = self._asking.pop((run_id, key))
        if asked is not None:
            asked.set_result(completion)


@dataclass
class Claims:
    """A batch's claims (BeingAsked.claimed): the requests it asks (`open` until settled), and
    the answers to wait for of those the batch beside it is asking (`beside`)."""

    asking: BeingAsked
    run_id: str
    open: set[str] = dataclasses.field(default_factory=set)
    beside: dict[str, concurrent.futures.Future[Completion | None]] = dataclasses.field(
        default_factory=dict
    )

    def settle(self, key: str, completion: Completion | None) -> None:
        """Give up the claim of `key`: its answer, stored or in the journal (None: no answer
        was kept, and a batch that waited for it asks it then). Once a claim."""
        if key in self.open:
            self.open.discard(key)
            self.asking._settle(self.run_id, key, completion)


BEING_ASKED = BeingAsked()


class Receipts:
    """The answers (completions rows) and grades (responses rows) that arrive in one turn of
    the event loop, journaled in one write at its end: a baseline answers a batch in one turn,
    a fast endpoint many answers, and a write each cost more than grading them.

    Rows are kept here until the journal has them. A stop signal raised in the middle of a
    turn's write (Python raises it wherever the main thread is) leaves them kept, and the
    block (`with Receipts(store) as receipts:`) journals them as the stop ends it: a signal
    loses no answer the process received."""

    def __enter__(self) -> Receipts:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self._journal()
            return
        with contextlib.suppress(Exception):  # what ends the block (a stop, an error) is the
            self._journal()  # news; a journal that fails now (a full disk) loses these rows
            # (the batch's next try asks for them again)

    def __init__(self, store: Store) -> None:
        self.store = store
        self.completions: list[CompletionRow] = []
        self.responses: list[ResponseRow] = []
        self.written: asyncio.Future[None] | None = None
        self.failed: Exception | None = None
        """The error of a write that failed (a full disk): the batch sends no more requests,
        and fails with it once those sent are answered."""

    def keep(
        self, completions: list[CompletionRow], responses: list[ResponseRow]
    ) -> asyncio.Future[None]:
        """Journal these rows at the end of this turn of the event loop; done once they are
        in the journal on disk, or with the journal's error (a full disk)."""
        self.completions += completions
        self.responses += responses
        if self.written is None:
            self.written = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(self._write)
        return self.written

    def _write(self) -> None:
        written, self.written = self.written, None
        assert written is not None
        try:
            self._journal()
        except Exception as error:
            # the journal's (a full disk): the batch fails with it. Its rows stay kept: a
            # later write of the batch (of the answers still arriving, or at its end) takes
            # them if the disk has room again, and its next try does not pay for them again
            self.failed = error
            written.set_exception(error)
            written.exception()  # said by every caller that waits; none left is no error
        except BaseException:  # a stop: the rows stay kept, a later write takes them
            written.cancel()
            raise
        else:
            written.set_result(None)

    def _journal(self) -> None:
        """Journal the rows kept; those a stop interrupted the writing of stay kept."""
        for table, rows in (("completions", self.completions), ("responses", self.responses)):
            if rows:
                self.store.receive(table, rows)
                rows.clear()


_cuts_said: Counter[str] = Counter()

CUTS_SAID = 5
"""Cut answers said in the log per model (and process); the rest are counted by SQL."""


def said_cut(model: str, case_id: str, received: int) -> None:
    """Say in the run's log that an answer was stored cut (numerate.kernel.answers): the
    first CUTS_SAID of a model, then where to count the others."""
    _cuts_said[model] += 1
    if _cuts_said[model] <= CUTS_SAID:
        current_progress().note(
            f"model {model}, case {case_id}: an answer of {received:,} characters is stored "
            f"cut to {MAX_ANSWER_CHARS:,} (its first {HEAD_CHARS:,} and last {TAIL_CHARS:,}), "
            "and graded on what is kept"
        )
    if _cuts_said[model] == CUTS_SAID:
        current_progress().note(
            f"model {model}: further cut answers are not said here (`raw_cut` marks them: "
            "docs/schema.md, 'Answers of any size')"
        )


def completion_row(model: ModelConfig, completion: Completion, run_id: str) -> CompletionRow:
    """The `completions` row of an answer this run received."""
    return {
        "request_hash": completion.request_hash,
        "run_id": run_id,
        "base_url": redact(model.base_url) if model.base_url else None,  # no password
        "model_id": model.model_id,
        "revision": model.revision,
        "sample_index": completion.sample,
        "text": completion.text,
        "text_cut": completion.received_chars is not None,
        "text_chars": completion.received_chars,
        "finish_reason": completion.finish_reason,
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "latency_s": completion.latency_s,
        "attempts": completion.attempts,
        "created_at": now(),
        **completion.reasoning_columns(),
    }
