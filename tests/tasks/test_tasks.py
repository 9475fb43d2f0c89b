"""The tasks' own logic: which failures a batch retries (through Prefect's task engine), where a
GPU step runs, answering and grading a batch (called through `.fn`, without Prefect)."""

import asyncio

import pytest

from numerate.config.sweep import ModelConfig, parse_sweep_config
from numerate.endpoints.answerers import BaselineAnswerer
from numerate.kernel.errors import ConfigError
from numerate.kernel.progress import Progress, reporting_to
from numerate.planning.plan import CaseRange, PlannedPoint, plan_points
from numerate.store import Store, StoreError
from numerate.tasks.answer import answer_batch, retry_transient
from numerate.tasks.dispatch import require_deployed, run_step


def objects_point(count: int) -> PlannedPoint:
    """One grid point of `count` Object Counting cases."""
    config = parse_sweep_config(
        {"name": "t", "models": [{"name": "o", "model": "baseline:oracle"}],
         "manifolds": [{"manifold": "objects", "count": count}]}
    )  # fmt: skip
    [point] = plan_points(config.manifolds[0], 1)
    return point


@pytest.mark.parametrize(
    ("error", "retried"),
    [(OSError("disk"), True), (TimeoutError(), True), (ConfigError("bad"), False),
     (ValueError("bug"), False)],
)  # fmt: skip
def test_a_batch_is_retried_only_for_failures_that_can_pass(error, retried):
    """Through Prefect's task engine, as `answer_batch` is: the condition read the failed
    state with `State.result()`, which in an async task gives a coroutine (never awaited: a
    RuntimeWarning on the user's screen), so no batch was ever retried."""
    from prefect import flow, task

    tries = []

    @task(retries=1, retry_delay_seconds=0, retry_condition_fn=retry_transient)
    async def batch() -> str:
        tries.append(len(tries))
        if len(tries) == 1:
            raise error
        return "answered"

    @flow
    async def part() -> str:
        return await batch()

    assert answer_batch.retry_condition_fn is retry_transient and answer_batch.retries == 2
    if retried:
        assert asyncio.run(part()) == "answered" and tries == [0, 1]
    else:
        with pytest.raises(type(error)):
            asyncio.run(part())
        assert tries == [0]


def test_without_a_server_a_gpu_step_runs_in_this_process(monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    calls = []

    async def local(**parameters):
        calls.append(parameters)

    with temporary_settings(updates={PREFECT_API_URL: None}):
        assert asyncio.run(require_deployed(["numgen-generate/numgen-generate"], "auto")) == []
        asyncio.run(run_step("numgen-generate/numgen-generate", local, {"a": 1}, "auto"))
        asyncio.run(run_step("numgen-generate/numgen-generate", local, {"a": 2}, "local"))
    assert calls == [{"a": 1}, {"a": 2}]


async def deployed_where_no_worker_polls() -> tuple[str, str]:
    """A work pool of its own that no worker polls, and a deployment of a GPU step to it."""
    import uuid

    from prefect import get_client
    from prefect.client.schemas.actions import WorkPoolCreate

    pool, name = f"idle-{uuid.uuid4().hex[:8]}", "numgen-generate"
    async with get_client() as client:
        await client.create_work_pool(WorkPoolCreate(name=pool, type="process"))
        flow_id = await client.create_flow_from_name(name)
        await client.create_deployment(flow_id=flow_id, name=pool, work_pool_name=pool)
    return pool, f"{name}/{pool}"


def test_a_step_deployed_to_a_pool_no_worker_polls_runs_here_and_says_so(caplog, monkeypatch):
    """A hostile pass: with the steps deployed (`numerate deploy`) and no worker on pool
    `gpu`, `numgen run` (dispatch auto) sent its images there and waited at 0/20, without a
    word, for as long as it was let. `auto` now runs such a step here, and says why; with
    `deployments` it is sent, and the wait is said."""
    import logging

    from numerate.tasks import dispatch

    pool, deployment = asyncio.run(deployed_where_no_worker_polls())
    calls = []

    async def local(**parameters):
        calls.append(parameters)

    notes = asyncio.run(require_deployed([deployment], "auto"))
    assert notes == [
        f"{deployment} is deployed, but no worker polls its work pool {pool!r}: running it "
        f"here (start one with `prefect worker start --pool {pool}`, or use --dispatch "
        "deployments to wait for one)"
    ]
    waits = asyncio.run(require_deployed([deployment], "deployments"))
    assert waits == [f"no worker polls work pool {pool!r}: {deployment} waits there until one "
                     f"does (start one with `prefect worker start --pool {pool}`)"]  # fmt: skip
    monkeypatch.setattr(dispatch, "get_run_logger", lambda: logging.getLogger("a-flow-run"))
    with caplog.at_level(logging.WARNING, logger="a-flow-run"):  # as a flow run's log says it
        asyncio.run(run_step(deployment, local, {"a": 1}, "auto"))
    assert calls == [{"a": 1}]
    assert notes[0] in caplog.text


def test_a_step_sent_to_its_pool_and_stopped_while_it_waits_is_cancelled_there(monkeypatch):
    """A hostile pass: a `numgen run` stopped while its steps waited on pool `gpu` left their
    runs Scheduled on the server, for a worker started later to run. The stop now cancels the
    run it was waiting for."""
    import logging

    from prefect import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    from numerate.tasks import dispatch

    monkeypatch.setattr(dispatch, "get_run_logger", lambda: logging.getLogger("a-flow-run"))
    pool, deployment = asyncio.run(deployed_where_no_worker_polls())

    async def runs(client):
        named = DeploymentFilter(name=DeploymentFilterName(any_=[pool]))
        return await client.read_flow_runs(deployment_filter=named)

    async def stopped_while_waiting():
        step = asyncio.create_task(
            run_step(deployment, lambda **_: None, {"a": "1"}, "deployments")
        )
        async with get_client() as client:
            for _ in range(500):  # the run is made at once: at most 10 s on a loaded machine
                if await runs(client):
                    break
                await asyncio.sleep(0.02)
            step.cancel()  # as a stop cancels the flow's task
            with pytest.raises(asyncio.CancelledError):
                await step
            return [run.state.type.value for run in await runs(client)]

    assert asyncio.run(stopped_while_waiting()) in (["CANCELLED"], ["CANCELLING"])


def test_a_batch_is_answered_and_graded_every_sample_of_every_case(db_path):
    point = objects_point(3)
    planned = point.cases()
    model = ModelConfig(name="m", model="baseline:oracle", sampling={"samples": 2})
    rows = asyncio.run(answer_batch.fn(model, [CaseRange(point, 0, 3)], "run", db_path)).unquote()
    assert [(r["case_id"], r["sample_index"], r["outcome"]) for r in rows] == [
        (p.case_id, k, "correct") for p in planned for k in range(2)
    ]
    stored = Store.open(db_path).query(
        "SELECT case_id, sample_index FROM responses ORDER BY ALL"
    )  # every graded answer is written (the session writes the journal first)
    assert stored == sorted((r["case_id"], r["sample_index"]) for r in rows)


@pytest.mark.usefixtures("prefect_harness")
def test_a_flow_run_keeps_no_trace_of_each_answer_a_batch_returns(db_path):
    """Prefect links a task's result, and each item one level into it, to the task run for
    the rest of the flow run: a batch's graded rows left an entry per answer (a 1,000,000-case
    sweep grew by about 130 MB)."""
    from prefect import flow
    from prefect.context import FlowRunContext

    point = objects_point(60)
    model = ModelConfig(name="m", model="baseline:oracle")

    @flow
    async def two_batches() -> tuple[int, int]:
        answered = 0
        for start in (0, 30):
            graded = await answer_batch(model, [CaseRange(point, start, start + 30)], "run",
                                        db_path)  # fmt: skip
            answered += len(graded.unquote())
        context = FlowRunContext.get()
        assert context is not None
        return answered, len(context.run_results)

    answered, tracked = asyncio.run(two_batches())
    assert answered == 60
    assert tracked <= 4  # each batch's result: the wrapper and its list, not each row


@pytest.mark.usefixtures("prefect_harness")
def test_a_batch_of_images_that_fails_counts_as_retries_then_errors():
    """Before: the NumGen bar said `0 errors 0 retries` while every image failed (a batch
    whose generator fails raises; nothing was counted)."""
    from prefect import flow, task

    from numerate.tasks.numgen import BATCH_RETRIES, counted_if_failing

    class Counted(Progress):
        def render(self):
            pass

    @task(retries=BATCH_RETRIES)
    def batch():
        with counted_if_failing(10):
            raise RuntimeError("the model is broken")

    @flow
    def images():
        batch()

    with reporting_to(Counted()) as progress, pytest.raises(RuntimeError, match="broken"):
        images()
    assert (progress.done, progress.retries, progress.errors) == (0, 10 * BATCH_RETRIES, 10)


class FullDisk:
    """The journal's disk full from its `first` write (the first try's) until `until()`,
    and the requests of a baseline answered a turn of the event loop each, as an endpoint's
    arrive (`asked`: the requests sent)."""

    def __init__(self, monkeypatch, first: int, until) -> None:
        self.asked: list[None] = []
        self.writes = 0
        self.sent_when_full: int | None = None
        answer, receive = BaselineAnswerer.answer, Store.receive

        async def a_turn_each(answerer, *args, **kwargs):
            self.asked.append(None)
            for _ in self.asked[1:]:
                await asyncio.sleep(0)
            return await answer(answerer, *args, **kwargs)

        def full(store, table, rows):
            if table == "completions":
                self.writes += 1
            if self.writes >= first and not until():
                if self.sent_when_full is None:
                    self.sent_when_full = len(self.asked)
                raise OSError(28, "No space left on device")
            return receive(store, table, rows)

        monkeypatch.setattr(BaselineAnswerer, "answer", a_turn_each)
        monkeypatch.setattr(Store, "receive", full)


def ask_a_batch(db_path, n: int, notes: list[str]) -> tuple[int, Progress]:
    """A batch of `n` cases asked of the oracle through Prefect's task engine (retried at
    once): how many graded rows it returned, and the progress counted; `notes` gets the
    notes said."""
    from prefect import flow

    point = objects_point(n)
    model = ModelConfig(name="m", model="baseline:oracle")

    class Noted(Progress):
        def note(self, message: str) -> None:
            notes.append(message)

    @flow
    async def part() -> int:
        batch = answer_batch.with_options(retry_delay_seconds=0)
        graded = await batch(model, [CaseRange(point, 0, n)], "run", db_path)
        return len(graded.unquote())

    with reporting_to(Noted()) as progress:
        return asyncio.run(part()), progress


def test_a_batch_tried_again_asks_and_counts_each_answer_once(db_path, monkeypatch):
    """A try that fails after some answers were journaled (a full disk) and is tried again.
    - It sends nothing more once one failed: each request it sent into the full disk is
      lost (paid for, not stored) and asked again by the next try. Before, the requests
      waiting for a slot (a baseline has 32) were sent all the same.
    - The next try finds the answers stored and counts them, so the failed try's count is
      taken back: the bar showed more requests done than the run has (20 of 12 in a first
      version of this test), the more so as the requests of the failed try went on
      answering and counting beside the next.
    - The user is told of the failure and the retry."""
    notes: list[str] = []
    disk = FullDisk(monkeypatch, first=3, until=lambda: bool(notes))
    returned, progress = ask_a_batch(db_path, 40, notes)
    assert returned == 40
    assert notes == [
        "model m: a batch failed ([Errno 28] No space left on device); it is tried again in a "
        "few seconds (try 2 of 3), asking what is not stored"
    ]  # the run paused for a retry without a word
    assert disk.sent_when_full is not None and disk.sent_when_full < 40  # some waited
    first_try = len(disk.asked) - (40 - 2)  # the next asked all but the first two answers
    assert first_try == disk.sent_when_full  # none sent once the disk was full
    assert (progress.done, progress.errors, progress.cached) == (40, 0, 0)
    stored = Store.open(db_path).query("SELECT count(*) FROM responses")
    assert stored == [(40,)]


def test_answers_a_full_disk_refused_once_are_journaled_by_a_later_write(db_path, monkeypatch):
    """The disk full for one write only: the batch fails (its next try is the one that
    answers), but the answers of that write were dropped, and the next try paid for them
    again. They are written with the batch's next write now: no request is asked twice."""
    disk = FullDisk(monkeypatch, first=3, until=lambda: disk.writes > 3)
    returned, progress = ask_a_batch(db_path, 40, [])
    assert returned == 40 and disk.sent_when_full is not None  # the write did fail
    assert len(disk.asked) == 40
    assert (progress.done, progress.errors, progress.cached) == (40, 0, 0)


def test_a_batch_that_fails_every_try_is_one_error_line(db_path, monkeypatch):
    """A disk full through the three tries: the batch's OSError reached the command, which
    ended in its traceback (exit 1). It is the store's one-line error now (the run stops,
    resumable: exit 3)."""
    notes: list[str] = []
    FullDisk(monkeypatch, first=1, until=lambda: False)
    with pytest.raises(StoreError) as raised:
        ask_a_batch(db_path, 5, notes)
    assert str(raised.value) == (
        "model m: a batch failed 3 time(s): [Errno 28] No space left on device; the answers "
        "stored before are kept, and the same command resumes the run"
    )
    assert raised.value.exit_code == 3
    assert [note.split(";")[1] for note in notes] == [
        " it is tried again in a few seconds (try 2 of 3), asking what is not stored",
        " it is tried again in a few seconds (try 3 of 3), asking what is not stored",
    ]


class Stop(BaseException):
    """A stop raised in a request's own task, as Prefect raises its TerminationSignal on
    SIGTERM wherever the main thread is."""


def test_a_stop_in_a_request_ends_its_batch_at_once(db_path, monkeypatch):
    """Before: the stop was gathered as one request's outcome, and the batch went on sending
    every request it held before raising it; a stopped run went on for seconds, until the
    deadline that ends it cut answers off (9 lost in a run of the suite)."""
    answer, asked = BaselineAnswerer.answer, []

    async def stopped_at_the_third(answerer, *args, **kwargs):
        place = len(asked)
        asked.append(place)
        for _ in range(place):
            await asyncio.sleep(0)
        if place == 2:
            raise Stop
        return await answer(answerer, *args, **kwargs)

    monkeypatch.setattr(BaselineAnswerer, "answer", stopped_at_the_third)
    model = ModelConfig(name="m", model="baseline:oracle")  # 32 requests in flight
    with pytest.raises(Stop):
        asyncio.run(answer_batch.fn(model, [CaseRange(objects_point(40), 0, 40)], "run", db_path))
    assert len(asked) < 40  # those waiting for a slot were never sent
