"""How a run ended, told honestly: each model's part is ok, degraded or failed. Pure code.

A night that failed must look failed: the CLI exits non-zero, the Prefect flow run ends
Failed, and one line names the model, the cause and the counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from numerate.config.sweep import ModelConfig
from numerate.kernel.errors import EXIT_FAILED_FOR_NOW, NumerateError, printable
from numerate.store.rows import RunPartRow

PartStatus = Literal["ok", "degraded", "failed"]
RunStatus = Literal["finished", "degraded", "failed"]

EXIT_RUN_FAILED = EXIT_FAILED_FOR_NOW
"""Exit code of a run in which some model's part is degraded or failed (2 is bad input)."""


class RunFailed(NumerateError):
    """A run ended with a degraded or failed part; its results are stored all the same."""

    exit_code = EXIT_RUN_FAILED

    def __init__(self, message: str, run_id: str, result: object = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.result = result
        """What the run returns, when it ended (a degraded NumGen run's metrics), to show."""


@dataclass(frozen=True)
class PartVerdict:
    """How one model's part of a run ended."""

    model: str
    status: PartStatus
    cause: str | None
    n: int
    """Answers recorded for the model in this run."""
    errors: int
    """Of those, answers that ended as `error`."""

    @property
    def error_rate(self) -> float:
        return self.errors / self.n if self.n else 0.0

    def row(self, run_id: str, decided_at: datetime) -> RunPartRow:
        """The `run_models` row that stores this verdict."""
        return {"run_id": run_id, "model": self.model, "status": self.status,
                "cause": self.cause, "n": self.n, "errors": self.errors,
                "error_rate": self.error_rate, "decided_at": decided_at}  # fmt: skip

    def line(self) -> str:
        return f"model {self.model!r} {self.status}: {self.cause}"


def part_verdict(
    model: ModelConfig, n: int, errors: int, stopped: str | None, common_error: str | None
) -> PartVerdict:
    """The outcome of a model's part.

    Args:
        model: the model (its `max_error_rate` decides what is degraded).
        n: answers recorded; errors: how many of them are errors.
        stopped: why the model was stopped (breaker, endpoint check), if it was.
        common_error: the most frequent error text, to name the cause.

    The cause is one line: a line break in what a server said is written `\\n`.
    """
    stopped = printable(stopped) if stopped else stopped
    common_error = printable(common_error) if common_error else common_error
    if stopped:
        counts = f"{errors} of {n} requests failed" if n else "nothing was sent"
        return PartVerdict(model.name, "failed", f"{stopped}; {counts}", n, errors)
    if n == 0:
        return PartVerdict(model.name, "failed", "no answer was recorded", n, errors)
    if errors == n:  # fewer requests than it takes the breaker to stop the model: no answer
        cause = f"every request failed ({errors} of {n}); most often: {common_error}"
        return PartVerdict(model.name, "failed", cause, n, errors)
    rate = errors / n
    if rate > model.max_error_rate:
        cause = (
            f"{errors} of {n} requests failed ({rate:.1%} > max_error_rate "
            f"{model.max_error_rate:.1%}); most often: {common_error}"
        )
        return PartVerdict(model.name, "degraded", cause, n, errors)
    return PartVerdict(model.name, "ok", None, n, errors)


def numgen_verdict(
    images: int, errors: int, max_error_rate: float, unparsed: int = 0
) -> str | None:
    """Why a NumGen run that ended is degraded, or None when it is not: more than
    `max_error_rate` of its `images` are in none of its metrics, for an error (not made, or
    not read or counted) or a counter's answer that held no count (`unparsed`: a counter that
    never says a number measured nothing). A refused image is an outcome of its own (accuracy
    counts it not correct), as an unparsed answer is in a sweep."""
    without = errors + unparsed
    if not images or without / images <= max_error_rate:
        return None
    said = f", {unparsed} with no count in the counter's answer" if unparsed else ""
    return (
        f"{without} of {images} images have no count ({errors} for an error{said}; "
        f"{without / images:.1%} > max_error_rate {max_error_rate:.1%})"
    )


def run_verdict(verdicts: list[PartVerdict]) -> tuple[RunStatus, str | None]:
    """The run's status (failed if any part failed, degraded if any is degraded, else
    finished) and one line naming every part that is not ok."""
    bad = [o for o in verdicts if o.status != "ok"]
    if not bad:
        return "finished", None
    status: RunStatus = "failed" if any(o.status == "failed" for o in bad) else "degraded"
    return status, "; ".join(o.line() for o in bad)
