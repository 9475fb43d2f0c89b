"""The one way a command runs a flow and stops: `numerate run` (a sweep) and `numerate numgen
run` alike. The flow runs with a progress bar; a stop signal while it runs records the run as
interrupted and says, once, what was kept; a signal that came as the run ended, stored, says
that it ended; a signal while its result is shown names the stored run."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from numerate.cli.common import quiet_run_logs, terminal_progress
from numerate.cli.process import PROCESS

if TYPE_CHECKING:
    from numerate.store import Store

Result = TypeVar("Result")


@dataclass(frozen=True)
class RunKind:
    """What a command's run is called, and what its user is told about it."""

    name: str
    """"run", "NumGen run"."""
    report: str
    """The command that shows a stored run ({run_id} is the run's id)."""
    kept: str
    """What a stop while it runs keeps, and how to go on."""
    not_started: str
    """What a stop before it began (while Prefect's server starts) leaves."""

    def shows(self, run_id: str) -> str:
        return self.report.format(run_id=run_id)

    def stored(self, run_id: str) -> str:
        return f"{self.name} {run_id} is stored; {self.shows(run_id)} shows it"

    def ended_as_the_signal_came(self, run_id: str) -> str:
        """Said of a run stored as ended when a stop signal came (not "run the same command
        again", which makes a new run)."""
        return (
            f"{self.name} {run_id} had ended as the signal came; its results are stored "
            f"({self.shows(run_id)} shows them)"
        )


def run_flow(
    kind: RunKind,
    db_path: str,
    label: str,
    flow: Callable[[], Coroutine[Any, Any, Result]],
    ended_since: Callable[[Store, datetime], str | None],
    run_id_of: Callable[[Result], str] = str,
    before: Callable[[], object] = lambda: None,
    context: contextlib.AbstractContextManager[Any] | None = None,
) -> Result:
    """Run `flow()` (after `before()`, in `context`) with a progress bar named `label`, and
    return what it returns. A stop signal meanwhile (also one Prefect's handler took, raised
    as its TerminationSignal) records the run as stopped (`ended_since(store, start)`: the
    run of this command that ended since it started, if any) and leaves with 130 or 143; past
    the deadline, the run is still recorded as stopped. An error (RunFailed: the run is stored
    all the same) is the caller's to say."""
    from prefect.exceptions import TerminationSignal

    from numerate.grading.verdict import RunFailed
    from numerate.kernel import stopping
    from numerate.kernel.progress import reporting_to
    from numerate.store import now

    quiet_run_logs(logging.CRITICAL)  # how the run ended is said once, by the command
    said = PROCESS.say_once(kind.kept)
    record = functools.partial(record_the_stop, kind, db_path, ended_since, now())
    PROCESS.on_hard_stop.extend([said, lambda: record(1)])
    try:
        before()
        with reporting_to(terminal_progress(label)), context or contextlib.nullcontext():
            result: Result = asyncio.run(_stops_not_swallowed(flow))
    except (KeyboardInterrupt, TerminationSignal) as stop:
        if isinstance(stop, TerminationSignal):  # Prefect's own handler took a SIGTERM
            PROCESS.came_as(signal.SIGTERM)
        said(record(3))  # "run the same command again" where it would resume, else what is so
        PROCESS.quiet_exit(PROCESS.stop_code())
    except RunFailed as failed:
        _ended(kind, failed.run_id)
        raise
    except Exception:
        if stopping.asked():  # an error the stop caused: the stop is the news
            said(record(3))
            PROCESS.quiet_exit(PROCESS.stop_code())
        left_by_an_error(db_path)
        raise
    _ended(kind, run_id_of(result))
    return result


async def _stops_not_swallowed(flow: Callable[[], Coroutine[Any, Any, Result]]) -> Result:
    """`flow()`, in an event loop that lets a stop signal through its callbacks (once: a
    copy that comes while the stop unwinds, as GNU `timeout` sends, leaves it be)."""
    asyncio.get_running_loop().set_exception_handler(_StopInACallback())
    return await flow()


class _StopInACallback:
    """During a flow, Prefect's SIGTERM handler raises its TerminationSignal wherever the main
    thread is. Raised in a callback of the event loop (a transport's, a turn's journal write),
    asyncio logged it as an error and went on: the run ran to its end, or to the deadline. The
    first is the stop: raised again as the KeyboardInterrupt asyncio lets through, the signal
    recorded as SIGTERM."""

    def __init__(self) -> None:
        self.stopped = False

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        from prefect.exceptions import TerminationSignal

        error = context.get("exception")
        if isinstance(error, TerminationSignal) and not self.stopped:
            self.stopped = True
            PROCESS.came_as(signal.SIGTERM)
            raise KeyboardInterrupt from error
        loop.default_exception_handler(context)


def _ended(kind: RunKind, run_id: str) -> None:
    """The run is stored as ended: a stop from now on keeps it whole. A signal that came as
    it ended (one a library swallowed: the run went on to its end) says so."""
    from numerate.kernel import stopping

    PROCESS.on_hard_stop.clear()
    if stopping.asked() and run_id:
        PROCESS.stopped_saying(kind.ended_as_the_signal_came(run_id))
    PROCESS.if_stopped_say(kind.stored(run_id) if run_id else None)  # a stop from here on


def record_the_stop(
    kind: RunKind,
    db_path: str,
    ended_since: Callable[[Store, datetime], str | None],
    started: datetime,
    seconds: float,
) -> str | None:
    """Mark the command's run interrupted, within `seconds`; what to say instead of what a
    stop keeps: that a run of it ended since `started` (the command's start), when the signal
    came as it ended, or that nothing was stored, when it came before the run began (the
    database made for it is removed; one that was there is said to hold nothing of it)."""
    from numerate.store import Store, StoreError, access

    access.hurry(seconds)  # within the seconds every command stops in (process.STOP_SECONDS)
    said = None
    with contextlib.suppress(StoreError):  # busy: the run stays 'running', resumable
        store = Store.open(db_path)
        store.mark_interrupted()
        ended = ended_since(store, started)
        if ended:
            said = kind.ended_as_the_signal_came(ended)
        elif store.discard_if_unused():
            said = f"{kind.not_started}, and {db_path} was not made"
        elif not store.claimed_runs():  # the flow had not begun (or resumed) a run
            said = kind.not_started
    Store.close_all()  # what cannot be written now stays in the journal
    return said


def left_by_an_error(db_path: str) -> None:
    """The run this command holds, ended by an error (its results database, this machine),
    is marked interrupted, as a stop marks it, within seconds: it stayed `running` (listed
    and shown as live) after its process had gone. Where it cannot be marked (the error was
    the database's), it stays `running`; either way the same command resumes it, and the
    error is what the user is told."""
    from numerate.store import Store, access

    with access.hurried(3), contextlib.suppress(Exception):  # the error is the news
        Store.open(db_path).mark_interrupted()


@contextlib.contextmanager
def shown_after_a_signal(kind: RunKind, run_id: str) -> Iterator[None]:
    """A signal while a stored run is shown names the run (a bare `interrupted` made it look
    lost, and running the command again makes another)."""
    try:
        yield
    except KeyboardInterrupt:
        PROCESS.stopped_saying(kind.stored(run_id))
