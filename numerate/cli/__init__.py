"""The `numerate` command line: one module per command (`numgen` is a group), named after it;
what they share in `common`.

The only part of numerate/ that may import flows/. Imports stay inside the commands:
`numerate --help` must answer fast and never load torch.
"""

from __future__ import annotations

import errno
import importlib
import io
import sys
from typing import Any, NoReturn

import typer

from numerate.env import configure as _configure

_configure()  # before anything imports prefect (a command's early server start included)

from numerate.cli.app import app  # noqa: E402
from numerate.cli.numgen import app as numgen_app  # noqa: E402
from numerate.cli.server import server_app  # noqa: E402

# one module per command, named after it; each adds itself to the app, in this order
for _command in (
    "generate",
    "manifolds",
    "grade",
    "run",
    "report",
    "db",
    "regrade",
    "upgrade",
    "cache",
    "runs",
    "compare",
    "plot",
    "deploy",
    "ingest",
    "view",
):
    importlib.import_module(f"numerate.cli.{_command}")
app.add_typer(numgen_app, name="numgen")
app.add_typer(server_app, name="server")

__all__ = ["app", "main"]


def main() -> None:  # pragma: no cover - entry point
    """The console script: the app, then close any results database it opened. A command
    line that cannot be read is one line and exit 2, like any other bad input."""
    from typer._click.exceptions import ClickException, NoArgsIsHelpError

    from numerate.cli.common import stop_signals, stop_within

    _streams_that_exist()  # first: the file descriptors it fills are the lowest free ones
    stop_within()  # SIGINT, SIGTERM: every command ends within seconds
    import logging

    logging.raiseExceptions = False  # a log line that cannot be written (a closed pipe) is
    # dropped, not a `--- Logging error ---` traceback quoting what was being handled
    if sys.argv[1:2] == ["--version"] and len(sys.argv) > 2:  # click answers it at once
        print(f"error: --version takes nothing after it (got {sys.argv[2]!r})", file=sys.stderr)
        sys.exit(2)
    _refuse_undecodable(sys.argv[1:])
    try:
        code = app(standalone_mode=False)
        code = code if isinstance(code, int) else 0
        _close_stores(failed=code != 0)
        if stop_signals and code in (130, 143):
            stopped()
        leave(code)
    except NoArgsIsHelpError as error:  # `numerate generate` alone: its help, then why
        _needs_more(error.ctx)
    except ClickException as error:  # a command line that cannot be read
        ctx = getattr(error, "ctx", None)
        hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
        print(f"error: {error.format_message()}{hint}", file=sys.stderr)
        sys.exit(2)
    except SystemExit as leaving:  # click's answer to a closed pipe (`| head`): exit 1
        if leaving.code == 1 and isinstance(_output_lost(), BrokenPipeError):
            leave(0)  # the reader took what it wanted: nothing is wrong (as for `db`, which
        raise  # wrote all before the reader left)
    except (typer.Abort, EOFError, KeyboardInterrupt):
        stopped()
    except OSError:
        lost = _output_lost()
        if lost is None:
            raise
        print(f"error: cannot write the output: {lost.strerror or lost}", file=sys.stderr)
        sys.exit(2)
    except Exception:
        if not stop_signals:
            raise
        stopped()  # an interruption some library wrapped in its own error (pydantic, ...)
    finally:
        _close_stores(failed=True)  # after an exception; nothing left to close otherwise


def _refuse_undecodable(arguments: list[str]) -> None:
    """Leave with one line (exit 2) when an argument holds bytes that are no UTF-8 (Python
    keeps them as surrogates, which DuckDB, pydantic and JSON refuse: a run id, SQL or a
    sweep name gave tracebacks, or errors naming no option), naming the option it was given
    to."""
    import os

    for index, argument in enumerate(arguments):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            shown = os.fsencode(argument).decode("utf-8", "backslashreplace")  # \xff, as given
            before = arguments[index - 1] if index else ""
            given = f"{before} {shown}" if before.startswith("-") and "=" not in before else shown
            print(
                f"error: {given}: not valid text (undecodable bytes; numerate reads its "
                "arguments as UTF-8)",
                file=sys.stderr,
            )
            sys.exit(2)


def _close_stores(failed: bool) -> None:
    """Close the results databases the command opened; when it failed or was stopped, first
    remove each one it made that holds nothing (a run stopped while Prefect's server started
    left an empty database, and a later `report` on it said "no runs")."""
    import contextlib

    store = sys.modules.get("numerate.store")
    if store is None:
        return
    made = [opened for opened in store.Store.close_all() if opened.made_here]  # flushed first
    if failed and made:
        store.access.hurry(0)  # no wait: a database another process holds is in use, kept
        for opened in made:
            with contextlib.suppress(store.StoreError):
                opened.discard_if_unused()


def _needs_more(ctx: Any) -> NoReturn:
    """Leave a command line that names a group of commands, or a command, and nothing more:
    its help (a rich help is printed, not returned: a blank line was), then one error line."""
    help_text = ctx.get_help() if ctx is not None else ""
    if help_text.strip():
        print(help_text, file=sys.stderr)
    missing = (
        "a command" if hasattr(ctx, "command") and hasattr(ctx.command, "commands") else "arguments"
    )
    path = ctx.command_path if ctx is not None else "numerate"
    print(f"error: {path}: give it {missing} (its help is above)", file=sys.stderr)
    sys.exit(2)


def _streams_that_exist() -> None:
    """A standard stream the command was started without (`numerate ... >&-`): its file
    descriptor is /dev/null's, so that no file the command opens takes its number (a
    database written to by a stray print) and the processes it starts (Prefect's server,
    which died on a missing standard output) have one. Writing a closed standard output is
    an error said in one line (the output was lost, exit 0); the standard output, watched
    (see _Guarded)."""
    import os

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
        sys.stdout = _ClosedOutput()
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the process's life)
    sys.stdout = _Guarded(sys.stdout)
    sys.stderr = _Guarded(sys.stderr, forgives=True)


class _ClosedOutput(io.TextIOBase):
    """The standard output of a command started without one: writing it fails."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            raise OSError(errno.EBADF, "the standard output is closed")
        return 0


class _Guarded:
    """A standard stream that remembers the error a write or flush of it raised (a full disk,
    /dev/full, a closed pipe: `failed`), to say it in one line rather than a traceback. The
    standard error, whose lines are for the user, `forgives` it: the line is dropped and the
    command goes on (`run` ended with exit 1 before anything ran, at its first progress)."""

    def __init__(self, stream: Any, forgives: bool = False) -> None:
        self._stream = stream
        self._forgives = forgives
        self.failed: OSError | None = None

    def write(self, text: str) -> int:
        try:
            return int(self._stream.write(text))
        except OSError as error:
            self.failed = error
            if self._forgives:
                return len(text)
            raise

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as error:
            self.failed = error
            if not self._forgives:
                raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _output_lost() -> OSError | None:
    """The error writing the standard output raised, if it did; the output then goes to
    /dev/null, so that the exit's own flush does not fail again."""
    import os

    failed = getattr(sys.stdout, "failed", None)
    if failed is not None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (for the process's life)
    return failed


def stopped() -> NoReturn:
    """Leave after Ctrl-C (130) or SIGTERM (143), in one line (a command that said more has
    already sent its standard error to /dev/null: see common.quiet_exit)."""
    import contextlib

    from numerate.cli.common import said_how_it_stopped, stop_code, stop_notes

    code = stop_code()
    said_how_it_stopped()  # the deadline, should it come, says nothing more
    note = f": {stop_notes[-1]}" if stop_notes else ""
    with contextlib.suppress(OSError, ValueError):
        print(f"{'terminated' if code == 143 else 'interrupted'}{note}", file=sys.stderr)
    _close_stores(failed=True)
    leave(code, drain=False)  # not sys.exit: freeing every object while a daemon thread (a
    # server still starting) held the standard error's lock aborted the process (SIGABRT)


def leave(code: int, drain: bool = True) -> NoReturn:
    """Exit with `code` the way Python does, less its last step.

    Python's exit (Py_FinalizeEx) waits for the threads (running their exit hooks: Prefect's
    log and event workers drain there), runs the atexit handlers (Prefect stops its temporary
    server; logging flushes), then frees every module and object. That last step takes 0.3 s
    after a sweep (Prefect, pydantic, polars) and does nothing for the user, so we leave after
    the first two, once the standard streams are flushed (mypy leaves the same way). Where
    this Python has no `threading._shutdown`, the exit is the normal one. A stopped command
    (`drain=False`) waits for no thread: an executor's thread in an endpoint check that waits
    30 s held it to the stop deadline."""
    import atexit
    import contextlib
    import os
    import threading

    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is None:
        sys.exit(code)
    if drain:
        shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (`numerate … | head`)
            stream.flush()
    os._exit(code)
