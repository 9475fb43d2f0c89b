"""Running a flow where it belongs: as its deployment on a work pool, or in this process."""

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Literal

from prefect import get_run_logger
from pydantic import BaseModel

from numerate.kernel.credentials import redact
from numerate.kernel.errors import NumerateError

Dispatch = Literal["auto", "local", "deployments"]
"""`deployments`: always send the step to its deployment; `local`: run it here; `auto`: send
it when it is deployed on the Prefect server this process talks to."""


class DispatchError(NumerateError):
    """A GPU step's deployment did not complete."""


async def deployed(name: str) -> bool:
    """Whether deployment `name` exists on a real Prefect server this process talks to."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        return False
    async with get_client() as client:
        try:
            await client.read_deployment_by_name(name)
        except ObjectNotFound:
            return False
    return True


def api_url() -> str:
    """The address of the Prefect API this process reports to (its user and password hidden)."""
    from prefect.settings import PREFECT_API_URL

    return redact(str(PREFECT_API_URL.value() or "(none set)"))


async def require_deployed(deployments: Sequence[str], dispatch: Dispatch) -> None:
    """DispatchError naming the first of `deployments` that is not on the Prefect server, when
    `dispatch` is `deployments` (before the run is recorded: nothing is written)."""
    if dispatch != "deployments":
        return
    for deployment in deployments:
        if not await deployed(deployment):
            raise DispatchError(
                f"deployment {deployment!r} is not on the Prefect server at {api_url()}: "
                "deploy it with `numerate deploy`, or use --dispatch local"
            )


async def run_step(
    deployment: str,
    local: Callable[..., Awaitable[int]],
    parameters: Mapping[str, BaseModel | str],
    dispatch: Dispatch,
) -> None:
    """Run a GPU step as its deployment (work pool `gpu`) or in this process. Its
    `parameters` go to a deployment as JSON (its flow validates them into their types)."""
    await require_deployed([deployment], dispatch)
    remote = dispatch == "deployments" or (dispatch == "auto" and await deployed(deployment))
    if not remote:
        await local(**parameters)
        return
    from prefect.deployments.flow_runs import arun_deployment

    get_run_logger().info("dispatching %s to its work pool", deployment)
    as_json = {
        name: value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        for name, value in parameters.items()
    }
    run = await arun_deployment(name=deployment, parameters=as_json, timeout=None)
    if run.state is None or not run.state.is_completed():
        state = run.state.name if run.state else "unknown"
        raise DispatchError(f"{deployment} run {run.name} ended {state}: see its logs")
