"""Task run names that say what a task does: `query oracle/objects 1–500`."""

from collections.abc import Callable


def batch_run_name(verb: str) -> Callable[[], str]:
    """A `task_run_name` for a task over a batch of cases (parameter `ranges`: ranges of grid
    points' cases): the verb, the model, the batch's manifolds and its place in the model's
    cases (parameter `first`)."""

    def name() -> str:
        from prefect.runtime import task_run

        params = task_run.parameters
        ranges = params.get("ranges") or []
        ranges = ranges.unquote() if hasattr(ranges, "unquote") else ranges
        model = getattr(params.get("model"), "name", "?")  # a ModelConfig
        manifolds = "+".join(sorted({part.point.manifold for part in ranges})) or "-"
        first = int(params.get("first") or 0)
        return f"{verb} {model}/{manifolds} {first + 1}–{first + sum(map(len, ranges))}"

    return name
