"""The command's process, owned in one place: the standard streams it writes (guarded: a
closed pipe or a full disk is one line, not a traceback), the stop signals (SIGINT,
SIGTERM) and the deadline they arm, what a stopped command says, and how it leaves with its
exit code. One object, `PROCESS`, holds all of it; nothing here reads or patches a private
name of Python or of a library.

How a stop goes (docs/architecture.md, "One process"): the first signal raises
KeyboardInterrupt in the main thread, records the stop (numerate.kernel.stopping: code below
the command line reads it) and arms a deadline of STOP_SECONDS; the command stores what it
has and says, once, what it kept (`stopped_saying`); a command still busy at the deadline
runs the `on_hard_stop` cleanups and ends with 130 (SIGINT) or 143 (SIGTERM).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import io
import logging
import os
import queue
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any, NoReturn

import typer

from numerate.kernel import stopping

STOP_SECONDS = 5.0
"""How long a stopped command has to end."""
SAME_SIGNAL_S = 1.0
"""A second signal this soon after the first is taken for a copy of it (see stop_within)."""
CLEANUP_SECONDS = 1.2
"""Of STOP_SECONDS, what the deadline leaves to `on_hard_stop`."""


class Process:
    """This process's lifecycle: its signals, its stop deadline, what it said of a stop, and
    its exit. One per process (`PROCESS`)."""

    def __init__(self) -> None:
        self.signals: list[int] = []
        """The SIGINT/SIGTERM this process's handler took, in order."""
        self.seen: list[int] = []
        """Those its signal thread saw, whichever handler took them (Prefect's, during a flow)."""
        self.on_hard_stop: list[Callable[[], object]] = []
        """Cleanups the deadline runs, each in a thread of its own, before it ends the process."""
        self.stop_note: str | None = None
        """What a stop that reaches `stopped()` means (`if_stopped_say`)."""
        self.said = threading.Event()
        """The command said how it stopped: the deadline says nothing more."""
        self.leaving_with: int | None = None
        """The exit code `leave` is leaving with (read by the last exit handler)."""
        self._armed = threading.Event()
        self._first_at: list[float] = []
        self._redelivering = False
        """An interrupt lost in a callback is on its way again (set and read in the main
        thread only, by the signal's handler and the unraisable hook: one store, no lock)."""

    # ------------------------------------------------------------------ starting

    def start(self) -> None:
        """At a command's start, in the main thread: streams that exist and are guarded, the
        stop signals handled, and the exit handler that ends the process once the others ran
        (registered first, it runs last)."""
        guard_streams()
        atexit.register(self._end_at_exit)
        self.stop_within()
        logging.raiseExceptions = False  # a log line that cannot be written (a closed pipe) is
        # dropped, not a `--- Logging error ---` traceback quoting what was being handled

    def stop_within(self) -> None:
        """Make SIGINT and SIGTERM stop this command within STOP_SECONDS, whatever it waits on.

        The first raises KeyboardInterrupt in the main thread and arms the deadline. A second
        signal handled in Python ends the process at once, unless it comes within
        SAME_SIGNAL_S of the first: GNU `timeout` sends its signal twice, to the command and
        to its process group, and the copy ended commands at once, unrecorded. A signal is
        also watched from a thread (`signal.set_wakeup_fd`): Python runs the handler only when
        the main thread is back in Python code, and one long call in C kept it away for 15 s."""
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda signum, frame: self._on_signal(signum))
        self._redeliver_lost_interrupts()
        wakeups, written = os.pipe()
        os.set_blocking(written, False)
        signal.set_wakeup_fd(written, warn_on_full_buffer=False)
        threading.Thread(target=self._watch_signals, args=(wakeups,), daemon=True,
                         name="numerate-signals").start()  # fmt: skip

    def _arm(self, code: int) -> None:
        if not self._armed.is_set():
            self._armed.set()
            threading.Thread(target=self._deadline, args=(code,), daemon=True).start()

    def _on_signal(self, signum: int) -> None:
        code = 143 if signum == signal.SIGTERM else 130
        if self._redelivering:  # the first one again: it was lost in a callback
            self._redelivering = False
            raise KeyboardInterrupt
        if self.signals and time.monotonic() - self._first_at[0] < SAME_SIGNAL_S:
            return  # the first one again (`timeout`): its KeyboardInterrupt is on its way
        if self.signals or self.leaving_with is not None:  # at once, and said (a death with
            how = "terminated" if code == 143 else "interrupted"  # no word left a run
            why = "by a second signal" if self.signals else "as it ended"  # `running`)
            with contextlib.suppress(OSError):  # os.write: no lock to wait on
                os.write(2, f"{how}: stopped at once {why}\n".encode())
            os._exit(code)
        stopping.ask()
        self.signals.append(signum)
        self._first_at.append(time.monotonic())
        self._arm(code)
        raise KeyboardInterrupt

    def _watch_signals(self, wakeups: int) -> None:
        """Arm the deadline the moment a signal arrives. A second signal is not judged here:
        during a flow, Prefect's own SIGTERM handler sends the signal again to the handler it
        replaced (ours), and counting that as the user's second one ended a run at once,
        unrecorded; the handler tells the two apart."""
        while True:
            for signum in os.read(wakeups, 64):
                if signum in (signal.SIGINT, signal.SIGTERM):
                    stopping.ask()  # what a run records, below the command line
                    self.seen.append(signum)  # also one a handler of Prefect's took
                    self._arm(143 if signum == signal.SIGTERM else 130)
                    warnings.filterwarnings(  # a connection attempt the stop cut short is
                        "ignore", "coroutine .* was never awaited", RuntimeWarning
                    )  # no news for the user (it was printed before `interrupted`)

    def _deadline(self, code: int) -> None:
        """End the process STOP_SECONDS after the signal at the latest: the cleanups first (a
        run recorded as stopped), each in a thread of its own, all at once within
        CLEANUP_SECONDS (the main thread may hold what they need), then one line unless a
        cleanup said how the command stopped."""
        busy = max(STOP_SECONDS - CLEANUP_SECONDS, 0.0)
        time.sleep(busy)
        until = time.monotonic() + CLEANUP_SECONDS
        workers = [
            threading.Thread(target=_quietly, args=(cleanup,), daemon=True)
            for cleanup in self.on_hard_stop
        ]
        for worker in workers:  # at once: one that hangs holds back no other
            worker.start()
        for worker in workers:
            worker.join(max(until - time.monotonic(), 0.0))
        if not self.said.is_set():
            with contextlib.suppress(OSError, ValueError):
                how = "terminated" if code == 143 else "interrupted"
                sys.stderr.write(f"{how}: still busy {busy:g} s after the signal: stopped now\n")
                sys.stderr.flush()
        os._exit(code)

    def _redeliver_lost_interrupts(self) -> None:
        """A KeyboardInterrupt raised where Python cannot pass it on (a weakref callback, a
        `__del__`, a garbage collector callback) is printed as "Exception ignored" and
        dropped: the command went on until the deadline. Such an interrupt is raised again
        from another thread 20 ms later, until it reaches code that can take it; the handler
        takes it as the first signal once more, not as the user's second. The thread that
        raises it is started here: the hook only hands it the interrupt, in one call a signal
        cannot cut (a hook that started a thread of its own waited for it, and a signal taken
        then was lost in the hook itself: the command ran to the deadline)."""
        passed_on = sys.unraisablehook
        lost: queue.SimpleQueue[None] = queue.SimpleQueue()

        def redeliver() -> None:
            while True:
                lost.get()
                time.sleep(0.02)
                signal.raise_signal(signal.SIGINT)

        threading.Thread(target=redeliver, name="numerate-redeliver", daemon=True).start()

        def hook(unraisable: Any) -> None:
            if self.signals and isinstance(unraisable.exc_value, KeyboardInterrupt):
                self._redelivering = True  # before it comes again: one store, no lock
                lost.put(None)  # one call in C: a signal comes before it or after it
            else:
                passed_on(unraisable)

        sys.unraisablehook = hook

    # ------------------------------------------------------------------ a stop

    def came_as(self, signum: int) -> None:
        """A stop signal some other handler took (Prefect's, uvicorn's) came: `signum`."""
        if not self.signals:
            self.signals.append(signum)
            self._first_at.append(time.monotonic())

    def stop_code(self) -> int:
        """The exit code of a command stopped by a signal: 143 after SIGTERM, else 130."""
        return 143 if signal.SIGTERM in (self.signals or self.seen) else 130

    def if_stopped_say(self, what: str | None) -> None:
        """From now on, a stop that reaches `stopped()` says `interrupted: <what>`; None: no
        more (the command says how it stopped in its own words from here)."""
        self.stop_note = what

    def say_once(self, what_is_kept: str) -> Callable[..., None]:
        """A function that says, the first time it is called, how a command stopped by a
        signal ended (`interrupted: <what_is_kept>`, or `terminated: ...`): called where the
        command catches the interruption and, for a command the deadline ends, from
        `on_hard_stop`."""
        said = threading.Event()

        def say(instead: str | None = None) -> None:
            """Say it, or `instead` of what was kept, what the command found."""
            if not said.is_set():
                said.set()
                self.said.set()
                how = "terminated" if self.stop_code() == 143 else "interrupted"
                what = instead or what_is_kept
                with contextlib.suppress(OSError, ValueError):
                    sys.stderr.write(f"{how}: {what}\n" if what else f"{how}\n")
                    sys.stderr.flush()

        return say

    def stopped_saying(self, what: str) -> NoReturn:
        """Leave a command a signal stopped, saying in one line what it left."""
        self.say_once("")(what)
        self.quiet_exit(self.stop_code())

    def quiet_exit(self, code: int) -> NoReturn:
        """Leave after an interruption, saying nothing more: what the user needs was said,
        and DuckDB's bindings would report the objects an interrupted run left alive."""
        sys.stderr.flush()
        sys.stdout.flush()
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        raise typer.Exit(code)

    def stopped(self, close: Callable[[], object]) -> NoReturn:
        """Leave after Ctrl-C (130) or SIGTERM (143) in one line, having run `close` (the
        results databases the command opened)."""
        self.say_once(self.stop_note or "")()  # the deadline, should it come, says no more
        close()
        self.leave(self.stop_code(), drain=False)

    # ------------------------------------------------------------------ leaving

    def leave(self, code: int, drain: bool = True) -> NoReturn:
        """Exit with `code`. Draining (the normal exit), Python waits for the threads (Prefect's
        log and event workers drain there) and runs the exit handlers (Prefect's, logging's);
        the last of them (`_end_at_exit`, registered first) then ends the process, once the
        streams are flushed, without freeing every module and object one by one: 0.3 s after
        a sweep that does nothing for the user. A stopped command (`drain=False`) waits for no
        thread: an executor's thread in an endpoint check that waits 30 s held it to the
        deadline; and freeing objects while a daemon thread held the standard error's lock
        aborted the process (SIGABRT). A stop signal while it leaves ends it at once, said:
        its work is done and stored."""
        self.leaving_with = code
        if drain:
            sys.exit(code)
        _end_now(code)

    def _end_at_exit(self) -> None:
        if self.leaving_with is not None:
            _end_now(self.leaving_with)
        for cleanup in stopping.exit_cleanups():  # an exit of Python's own (a traceback)
            _quietly(cleanup)


def _end_now(code: int) -> NoReturn:
    """The process's own last work (numerate.kernel.stopping.at_exit), then the logs and the
    standard streams flushed, then the end of the process with `code`."""
    for cleanup in stopping.exit_cleanups():
        _quietly(cleanup)
    logging.shutdown()  # its own exit handler was registered before `_end_at_exit`
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (`numerate … | head`)
            stream.flush()
    os._exit(code)


def _quietly(cleanup: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        cleanup()


PROCESS = Process()


# ---------------------------------------------------------------------- the streams


def guard_streams() -> None:
    """A standard stream the command was started without (`numerate ... >&-`): its file
    descriptor is /dev/null's, so that no file the command opens takes its number (a
    database written to by a stray print) and the processes it starts (Prefect's server)
    have one. Then the standard output and error are guarded (see Guarded)."""
    for number in (0, 1, 2):
        try:
            os.fstat(number)
        except OSError:  # closed: the lowest free number is this one
            null = os.open(os.devnull, os.O_RDWR)
            if null != number:
                os.dup2(null, number)
                os.close(null)
            os.set_inheritable(number, True)  # as a standard stream is
    if sys.stdout is None:
        sys.stdout = ClosedOutput()
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the process's life)
    sys.stdout = Guarded(sys.stdout)
    sys.stderr = Guarded(sys.stderr, forgives=True)


class ClosedOutput(io.TextIOBase):
    """The standard output of a command started without one: writing it fails."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            raise OSError(errno.EBADF, "the standard output is closed")
        return 0


class Guarded:
    """A standard stream that remembers the error a write or flush of it raised (a full disk,
    /dev/full, a closed pipe: `failed`), to say it in one line rather than a traceback. The
    standard error, whose lines are for the user, `forgives` it: the line is dropped and the
    command goes on."""

    def __init__(self, stream: Any, forgives: bool = False) -> None:
        self.stream = stream
        self.forgives = forgives
        self.failed: OSError | None = None

    def write(self, text: str) -> int:
        try:
            return int(self.stream.write(text))
        except OSError as error:
            self.failed = error
            if self.forgives:
                return len(text)
            raise

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as error:
            self.failed = error
            if not self.forgives:
                raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def output_lost() -> OSError | None:
    """The error writing the standard output raised, if it did; the output then goes to
    /dev/null, so that the exit's own flush does not fail again."""
    failed = getattr(sys.stdout, "failed", None)
    if failed is not None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (for the process's life)
    return failed
