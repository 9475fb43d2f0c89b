"""Running a flow where it belongs: as its deployment on a work pool, or in this process."""

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Literal
from uuid import UUID

import anyio
from prefect import get_run_logger
from pydantic import BaseModel

from numerate.kernel.credentials import redact
from numerate.kernel.errors import NumerateError

if TYPE_CHECKING:
    from prefect.client.schemas.objects import FlowRun

Dispatch = Literal["auto", "local", "deployments"]
"""`deployments`: always send the step to its deployment; `local`: run it here; `auto`: send
it when it is deployed on the Prefect server this process talks to and a worker polls its
work pool."""


class DispatchError(NumerateError):
    """A GPU step's deployment did not complete."""


async def _pool_of(name: str) -> tuple[str, bool] | None:
    """Deployment `name`'s work pool, and whether a worker polls it (the pool is ready), or
    None when it is not deployed on a real Prefect server this process talks to."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import WorkPoolStatus
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        return None
    async with get_client() as client:
        try:
            deployment = await client.read_deployment_by_name(name)
            pool = deployment.work_pool_name or ""
            return pool, bool(pool) and (
                (await client.read_work_pool(pool)).status == WorkPoolStatus.READY
            )
        except ObjectNotFound:
            return None


def api_url() -> str:
    """The address of the Prefect API this process reports to (its user and password hidden)."""
    from prefect.settings import PREFECT_API_URL

    return redact(str(PREFECT_API_URL.value() or "(none set)"))


async def require_deployed(deployments: Sequence[str], dispatch: Dispatch) -> list[str]:
    """What a step of each of `deployments` would meet under `dispatch`, said before the run
    is recorded (nothing is written): DispatchError naming the first that is not on the
    Prefect server when `dispatch` is `deployments`; a note for each whose work pool no
    worker polls (`_where`)."""
    notes = []
    for deployment in deployments if dispatch != "local" else ():
        _, note = await _where(deployment, dispatch)
        if note:
            notes.append(note)
    return notes


async def _where(deployment: str, dispatch: Dispatch) -> tuple[bool, str | None]:
    """Whether a step of `deployment` goes to its work pool under `dispatch` (`auto` or
    `deployments`), and what to say when no worker polls that pool: a run sent there waits,
    without a word, until one does (`auto` runs the step here instead).

    Raises:
        DispatchError: `dispatch` is `deployments` and it is not on the Prefect server.
    """
    found = await _pool_of(deployment)
    if found is None:
        if dispatch == "deployments":
            raise DispatchError(
                f"deployment {deployment!r} is not on the Prefect server at {api_url()}: "
                "deploy it with `numerate deploy`, or use --dispatch local"
            )
        return False, None
    pool, polled = found
    if polled:
        return True, None
    start = f"start one with `prefect worker start --pool {pool}`"
    if dispatch == "auto":
        return False, (
            f"{deployment} is deployed, but no worker polls its work pool {pool!r}: running "
            f"it here ({start}, or use --dispatch deployments to wait for one)"
        )
    return (
        True,
        f"no worker polls work pool {pool!r}: {deployment} waits there until one does ({start})",
    )


async def run_step(
    deployment: str,
    local: Callable[..., Awaitable[int]],
    parameters: Mapping[str, BaseModel | str],
    dispatch: Dispatch,
) -> None:
    """Run a GPU step as its deployment (work pool `gpu`) or in this process. Its
    `parameters` go to a deployment as JSON (its flow validates them into their types)."""
    remote, note = (False, None) if dispatch == "local" else await _where(deployment, dispatch)
    if note:
        get_run_logger().warning("%s", note)
    if not remote:
        await local(**parameters)
        return
    from prefect.deployments.flow_runs import arun_deployment

    get_run_logger().info("dispatching %s to its work pool", deployment)
    as_json = {
        name: value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        for name, value in parameters.items()
    }
    run = await arun_deployment(name=deployment, parameters=as_json, timeout=0)  # made, not run
    try:
        run = await _finished(run.id)
    except BaseException:  # a stop, or the server gone: the run is not left to a later worker
        await _cancel(run.id)
        raise
    if run.state is None or not run.state.is_completed():
        state = run.state.name if run.state else "unknown"
        raise DispatchError(f"{deployment} run {run.name} ended {state}: see its logs")


POLL_S = 5.0
"""How often a dispatched step's state is read while it runs (as Prefect's run_deployment)."""


async def _finished(run_id: UUID) -> "FlowRun":
    """Flow run `run_id` once its state is final."""
    from prefect.client.orchestration import get_client

    async with get_client() as client:
        while True:
            run = await client.read_flow_run(run_id)
            if run.state is not None and run.state.is_final():
                return run
            await asyncio.sleep(POLL_S)


async def _cancel(run_id: UUID) -> None:
    """Ask the server to cancel flow run `run_id`, as `prefect flow-run cancel` does (a run no
    worker has taken yet ends Cancelled at once; a worker stops one it runs), whatever
    cancelled the caller; a failure to reach the server is logged, not raised over why the
    caller stopped."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import State, StateType

    with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_WITHIN_S):
        try:
            async with get_client() as client:
                await client.set_flow_run_state(run_id, State(type=StateType.CANCELLING))
        except Exception as error:  # the server gone: said, the stop goes on
            get_run_logger().warning("could not cancel flow run %s: %s", run_id, error)


CANCEL_WITHIN_S = 2.0
"""How long a stopped step waits for the server to take its run's cancellation (a stopped
command ends within 5 s: numerate.cli.process.STOP_SECONDS)."""
