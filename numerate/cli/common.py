"""What every command shares: one-line errors, output formats, the database option, the
progress bar, and settling Prefect before exit.

Imports stay inside functions: `numerate --help` must answer fast and never load torch.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, cast

import typer

if TYPE_CHECKING:
    from numerate.kernel.files import Content
    from numerate.store.queries import Source
    from numerate.store.reader import Reader

from numerate.kernel.errors import ConfigError, NumerateError

Format = Literal["table", "csv", "json", "markdown"]
FORMATS: tuple[Format, ...] = ("table", "csv", "json", "markdown")

DB_HELP = "DuckDB results file (default: $NUMERATE_DB, else results/numerate.duckdb)."


def fail(message: str | BaseException, code: int = 2) -> NoReturn:
    """Print an error for the user and leave with `code`. Given an error rather than a
    message, a results database that stayed busy past the wait allowed leaves with 3 (the
    command failed for now: nothing is lost, and running it again goes on), like a failed
    run. Credentials are redacted (numerate.kernel.credentials): every error passes here."""
    from numerate.cli.server import ServerError
    from numerate.kernel import stopping
    from numerate.kernel.credentials import redact
    from numerate.store import Store, access

    if stopping.asked():  # an error the stop caused (pydantic wrapped the KeyboardInterrupt
        raise KeyboardInterrupt  # in its own: exit 2): the stop is the news, cli.stopped says
    if isinstance(message, ServerError):
        code = 3  # the machine's fault, not the input's: running it again may work
    if isinstance(message, access.DatabaseBusy):
        code = 3
        access.hurry(0)  # leaving: no wait on the busy database at exit (the journal keeps all)
        Store.stop_flushing()  # their warnings come before the error line, not after it
    text = redact(str(message), token_shapes=True)
    lines = text.splitlines() or [""]  # every line says it is an error
    with contextlib.suppress(OSError):  # a standard error that cannot be written (2>/dev/full):
        typer.echo("".join(f"error: {line}\n" for line in lines), err=True, nl=False)
    raise typer.Exit(code)  # the code says it all the same (it was 1, a traceback unseen)


def write_output(path: Path, content: Content) -> None:
    """Write a command's output file atomically (kernel.files.write_atomically, the one way
    numerate writes output files); a path that cannot be written (a folder, no permission, a
    full disk) is one error line and exit 2, and leaves nothing behind."""
    from numerate.kernel.files import OutputPathError, write_atomically

    try:
        write_atomically(path, content)
    except OutputPathError as error:
        fail(f"cannot write {path}: {error.reason}")
    except ConfigError as error:
        fail(error)
    except OSError as error:
        fail(f"cannot write {path}: {error.strerror or error}")


def a_path(text: str) -> Path:
    """The parser of every path option and argument: an empty or blank path is refused (as a
    Path it would be `.`, here), and the message shows it as given."""
    import typer

    if not text.strip():
        raise typer.BadParameter(f"{text!r}: give a path (an empty one would mean here)")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):  # messages would show it torn
        raise typer.BadParameter(f"{text!r}: a path with a control character (a newline?)")
    if not text.endswith("/"):
        return Path(text)
    if Path(text).exists() and not Path(text).is_dir():  # read as the file: `cat x/` refuses
        raise typer.BadParameter(
            f"{text}: a folder's name (it ends with /), and {text.rstrip('/')} is a file"
        )
    return _FolderPath(text)


class _FolderPath(type(Path())):  # type: ignore[misc]
    """A path given with a trailing `/`, which Path drops: a folder's name, never a file's
    (`--out dir.png/` wrote a file `dir.png`)."""


def path_option(help: str, *names: str) -> Any:
    """A typer option that is a path, parsed by `a_path` (an empty path refused)."""
    import typer

    return typer.Option(*names, help=help, parser=a_path)


def path_argument(help: str) -> Any:
    """A typer argument that is a path, parsed by `a_path` (an empty path refused)."""
    import typer

    return typer.Argument(help=help, parser=a_path)


def check_output(option: str, path: Path | str | None, suffixes: tuple[str, ...] = ()) -> None:
    """Refuse an output path before any work is done: one that cannot be a file (see
    kernel.files.output_target) or, given `suffixes`, whose suffix names a format the command
    does not write. Raises ConfigError naming `option`."""
    from numerate.kernel.files import OutputPathError, output_target

    if path is None:
        return
    if isinstance(path, _FolderPath) or str(path).endswith("/"):
        shown = f"{str(path).rstrip('/'):.200}/"
        raise ConfigError(f"{option} {shown}: a folder's name (it ends with /); give a file name")
    try:
        output_target(Path(path))
    except OutputPathError as error:
        raise ConfigError(f"{option} {path!s:.200}: {error.reason}") from None
    suffix = Path(path).suffix.lower()
    if suffixes and suffix not in suffixes:
        shown = f"no {suffix} output" if suffix else "no suffix"
        allowed = " or ".join(suffixes)
        raise ConfigError(f"{option} {path}: {shown}; give a {allowed} file name")


def results_db(db: str | None) -> str:
    """The database a command uses: its --db, else the one default rule (numerate.config)."""
    from numerate.config import results_database

    try:
        return results_database(db)
    except ConfigError as error:
        fail(error)


def open_reader(db: str | None, numerate_schema: bool = True) -> Reader:
    """The results database opened read-only (numerate.store.reader.Reader), waiting while a
    writer holds it."""
    from numerate.store.reader import Reader

    return Reader.open(results_db(db), numerate_schema)


def check_format(output: str, allowed: tuple[str, ...] = FORMATS) -> Format:
    """`--format` checked against the formats a command offers."""
    if output not in allowed:
        choices = ", ".join(allowed[:-1]) + f" or {allowed[-1]}"
        raise ConfigError(f"--format {output!r}: choose {choices}")
    return cast(Format, output)


def parse_assignments(assignments: list[str]) -> dict[str, Any]:
    """`key=value` pairs; values are read as JSON where they parse ("8", "0.5", "true",
    "\\"\\\\n\\""), else as plain strings ("ROMAN"); within the bounds of kernel.inputs
    (length, depth and digits)."""
    from numerate.kernel.errors import shorten
    from numerate.kernel.inputs import MAX_OPTION_CHARS, json_value

    values: dict[str, Any] = {}
    for assignment in assignments:
        try:
            assignment.encode("utf-8")
        except UnicodeEncodeError:
            shown = assignment.encode("utf-8", "backslashreplace").decode()
            raise ConfigError(f"--set {shown}: not valid text (undecodable bytes)") from None
        key, sep, raw = assignment.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {shorten(repr(assignment))}")
        if key.strip() in values:
            raise ConfigError(f"--set {shorten(key.strip())}: given twice; give it once")
        try:
            values[key.strip()] = json_value(raw, f"--set {shorten(key.strip())}", MAX_OPTION_CHARS)
        except json.JSONDecodeError:
            values[key.strip()] = raw
    return values


def terminal_progress(description: str) -> Any:
    """A rich progress bar on standard error (rich is imported only when a sweep runs)."""
    from rich.console import Console
    from rich.progress import BarColumn, TextColumn, TimeRemainingColumn
    from rich.progress import Progress as RichBar

    from numerate.progress import Progress

    class TerminalProgress(Progress):
        def __init__(self) -> None:
            super().__init__()
            self.bar = RichBar(
                TextColumn("[bold]{task.description}"),
                TextColumn("{task.fields[step]}"),
                BarColumn(),
                TextColumn("{task.completed:,}/{task.total:,}"),
                TextColumn("{task.fields[rate]:,.1f}/s"),
                TextColumn("{task.fields[errors]:,} errors"),
                TextColumn("{task.fields[retries]:,} retries"),
                TextColumn("{task.fields[cached]:,} cached"),
                TextColumn("{task.fields[limit]}"),
                TextColumn("{task.fields[open]}"),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            self.task_id = self.bar.add_task(
                description,
                total=0,
                rate=0.0,
                errors=0,
                retries=0,
                cached=0,
                limit="",
                open="",
                step="",
            )
            self.bar.start()

        def render(self) -> None:
            limit = self.in_flight_limit()
            self.bar.update(
                self.task_id, total=self.total, completed=self.done, rate=self.rate(),
                errors=self.errors, retries=self.retries, cached=self.cached,
                limit="" if limit is None else f"≤{limit} in flight",
                open=f"{points} points still sampling" if (points := self.open_points()) else "",
                step=self.step,
            )  # fmt: skip

        def note(self, message: str) -> None:
            self.bar.console.print(f"note: {message}", markup=False, highlight=False)

        def close(self) -> None:
            self.render()
            self.bar.stop()

    return TerminalProgress()


def notes_to_stderr() -> Any:
    """A progress that shows nothing but its notes, each one line on standard error (a wait
    for the results database before a flow runs: logged, it was a Prefect warning about a
    log without a flow run, then the note twice)."""
    from numerate.progress import Progress

    class Notes(Progress):
        def note(self, message: str) -> None:
            typer.echo(f"note: {message}", err=True)

    return Notes()


def settle_prefect() -> None:
    """Let a temporary Prefect server record the last task runs before the process exits.

    Without a PREFECT_API_URL, Prefect runs a server inside this process; exiting while it
    writes the last task-run events cancels those writes (lost history, tracebacks on exit).
    """
    import os
    import time

    if os.environ.get("PREFECT_API_URL"):
        return
    from prefect.events.worker import EventsWorker

    EventsWorker.drain_all(timeout=5)
    time.sleep(1.0)


def show(text: str) -> None:
    """Write a command's output (a table, CSV, JSON) to standard output as it is: typer.echo
    drops ANSI escape sequences when the output is not a terminal, which changed the data of a
    CSV or JSON written to a file (`chr(27)` in a value was lost)."""
    import sys

    sys.stdout.write(text)
    sys.stdout.flush()


def print_report(
    source: Source,
    run_id: str,
    output: Format,
    models: Sequence[str] = (),
    manifolds: Sequence[str] = (),
) -> None:
    """A run's summaries, per model and manifold, in the format asked for."""
    from numerate.report import render, run_summaries

    frame = run_summaries(source, run_id, models, manifolds)
    show(render(frame, output, title=f"run {run_id}"))


# The watchdog: a tiny process that outlives nothing. It waits for the CLI to end, however it
# ends (SIGKILL included), then stops Prefect's temporary server (TERM, then KILL).
_WATCHDOG = """
import os, signal, sys, time
parent, child = int(sys.argv[1]), int(sys.argv[2])
def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a process that ended and is not yet reaped (a zombie) is gone too
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True
while alive(parent) and alive(child):
    time.sleep(0.5)
for sig in (signal.SIGTERM, signal.SIGKILL):
    if not alive(child):
        break
    try:
        os.kill(child, sig)
    except OSError:
        break
    time.sleep(5)
"""


_SERVER_START = threading.Lock()


def quiet_run_logs(level: int = logging.WARNING) -> None:
    """A command that shows its own progress, and says itself how its run ended: Prefect's
    run log lines below `level` (INFO: each task run's state) are not printed beside them.
    Call it once Prefect is imported (its import sets its loggers' levels)."""
    import os

    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    for name in ("prefect.flow_runs", "prefect.task_runs"):
        logging.getLogger(name).setLevel(level)
    for name in ("prefect.flow_runs", "prefect.task_runs", "prefect.engine", "asyncio"):
        logging.getLogger(name).addFilter(_not_about_a_stop)


STOPPED_RUN_WORDS = (
    "Execution was cancelled by the runtime environment",
    "Execution was aborted by an interrupt signal",
    "Execution was aborted by a termination signal",
)
"""How Prefect's crash lines describe a run a signal stopped (prefect.states)."""


def _not_about_a_stop(record: logging.LogRecord) -> bool:
    """False for a line about a stop: any, once a stop signal came (`prefect.engine -
    Finished in state Crashed(...)` followed a SIGTERM's `terminated`); one that says a signal
    crashed the run, or whose error is a signal's or a cancellation (asyncio's `Fatal write
    error` with Prefect's TerminationSignal), before the signal thread has seen it. How the
    run ended is the command's to say, in one line."""
    from numerate.kernel import stopping

    if stopping.asked():
        return False
    error = record.exc_info[1] if record.exc_info else None
    if error is not None and not isinstance(error, Exception):
        return False
    message = record.getMessage()
    return not any(words in message for words in STOPPED_RUN_WORDS)


def _quiet_prefect_server_lines(record: logging.LogRecord) -> bool:
    """False for Prefect's own lines about its temporary server (its address and a link, then
    its stop): numerate says what it starts in one line of its own."""
    message = record.getMessage()
    return not message.startswith(("Starting temporary server", "Stopping temporary server"))


def _in_a_session_of_its_own(server: Any) -> None:
    """Have Prefect start its temporary server (`server`, a SubprocessASGIServer) in a session
    of its own: Ctrl-C in a terminal reaches the whole process group, and the server, still
    importing, printed its own `Aborted!` or traceback under the command's `interrupted`.
    This process stops it all the same (Prefect at exit, stop_within's deadline, the
    watchdog). Prefect's launch is kept; only the `subprocess` it sees starts sessions."""
    import subprocess
    import types

    from prefect.server.api import server as prefect_server

    if "_run_uvicorn_command" in vars(server):
        return  # done for this server already
    launch = server._run_uvicorn_command
    log = temporary_server_log()

    def popen(*args: Any, **kwargs: Any) -> Any:  # its lines (a shutdown traceback when it is
        with open(log, "ab") as out:  # stopped while it starts) were the command's own
            options: dict[str, Any] = {"start_new_session": True, "stdin": subprocess.DEVNULL,
                                       "stdout": out, "stderr": out}  # fmt: skip
            return subprocess.Popen(*args, **kwargs, **options)  # type: ignore[call-overload]

    detached = types.SimpleNamespace(**{**vars(subprocess), "Popen": popen})

    def launch_detached() -> Any:
        prefect_server.subprocess = detached  # type: ignore[assignment]
        try:
            process = launch()
        finally:
            prefect_server.subprocess = subprocess
        _watch(process.pid)  # from its first moment: a signal during its start stopped this
        return process  # process before Prefect registered its stop, and the server stayed

    server._run_uvicorn_command = launch_detached


def temporary_server_log() -> Path:
    """Where Prefect's temporary servers write what they say: under PREFECT_HOME."""
    from prefect.settings import PREFECT_HOME

    folder = Path(PREFECT_HOME.value()).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "numerate-temporary-server.log"


def _watch(server_pid: int) -> None:
    """A watchdog process that stops the server `server_pid` when this process is gone,
    however it ended (SIGKILL leaves it no chance to clean up)."""
    import os
    import subprocess
    import sys

    subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(server_pid)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


class TemporaryServer:
    """Prefect's temporary server (when no PREFECT_API_URL is set), started in a thread so that
    the command checks its input and endpoints meanwhile; `wait()` before the first flow.

    It dies with this process: Prefect stops it at a normal exit, and a watchdog process stops
    it when this process is killed (SIGKILL leaves no chance to clean up)."""

    def __init__(self) -> None:
        from prefect.settings import PREFECT_API_URL

        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None
        if not PREFECT_API_URL.value():
            self.thread = threading.Thread(target=self._start, daemon=True)
            self.thread.start()

    def _start(self) -> None:
        from prefect.server.api.server import SubprocessASGIServer

        # One start at a time in a process: a command that stopped early (bad input) leaves its
        # start running, and a second one beside it would migrate the same SQLite database
        # concurrently ("index ... already exists"). The next one finds it running.
        prefect_logger = logging.getLogger("prefect")
        if _quiet_prefect_server_lines not in prefect_logger.filters:
            prefect_logger.addFilter(_quiet_prefect_server_lines)
        with _SERVER_START:
            try:
                server = SubprocessASGIServer()  # the one Prefect's client would start
                on_hard_stop.append(lambda: kill_child(server.server_process))
                _in_a_session_of_its_own(server)
                server.start()
            except BaseException as error:  # reported by wait(), in the command's thread
                self.error = error
                return

    def abandon(self) -> None:
        return None  # it stops with this process

    def wait(self, meanwhile: Callable[[], object] = lambda: None) -> None:
        """Until the server answers, doing `meanwhile` first when it does not yet; says why the
        command waits, when it does (a command that stops before, on bad input, says only why
        it stopped)."""
        if self.thread is not None:
            if self.thread.is_alive():
                typer.echo(
                    "starting Prefect's temporary server (about 8 s; NUMERATE_SERVER=background "
                    "keeps one running for later commands)",
                    err=True,
                )
                meanwhile()
            while self.thread.is_alive():  # not one join(): a signal that another thread
                self.thread.join(0.1)  # received is handled only when this one runs Python
        if isinstance(self.error, NumerateError | KeyboardInterrupt):
            raise self.error
        if self.error is not None:  # Prefect's own: it timed out, its process exited
            from numerate.cli.server import ServerError
            from numerate.kernel.errors import first_line

            raise ServerError(
                f"Prefect's temporary server did not start: {first_line(self.error)} (its log: "
                f"{temporary_server_log()})"
            )


STOP_SECONDS = 5.0
SAME_SIGNAL_S = 1.0
"""A second signal this soon after the first is taken for a copy of it (see stop_within)."""
stop_signals: list[int] = []  # the SIGINT/SIGTERM this process received, in order
signals_seen: list[int] = []  # those its signal thread saw, whichever handler took them
on_hard_stop: list[Callable[[], object]] = []  # run before the deadline ends the process


def stop_within(seconds: float = STOP_SECONDS) -> None:
    """Make SIGINT and SIGTERM stop this command within `seconds`, whatever it waits on.

    The first raises KeyboardInterrupt in the main thread (each command stores what it has
    and says how to go on) and arms a deadline: a thread that ends the process with 130
    (SIGINT) or 143 (SIGTERM) when the command has not ended by then (a download thread, a
    network wait with no timeout of its own, an exit that waits for a thread). A second
    signal handled in Python ends it at once, unless it comes within SAME_SIGNAL_S of the
    first: GNU `timeout` sends its signal twice, to the command and to its process group, and
    the copy ended commands at once, unrecorded. Must be called in the main thread."""
    import os
    import signal
    import time

    from numerate.kernel import stopping

    armed = threading.Event()
    first_at: list[float] = []

    def arm(code: int) -> None:
        if not armed.is_set():
            armed.set()
            threading.Thread(target=_deadline, args=(seconds, code), daemon=True).start()

    def on_signal(signum: int, frame: Any) -> None:
        code = 143 if signum == signal.SIGTERM else 130
        if _redelivering.is_set():  # the first one again: it was lost in a callback
            _redelivering.clear()
            raise KeyboardInterrupt
        if stop_signals and time.monotonic() - first_at[0] < SAME_SIGNAL_S:
            return  # the first one again (`timeout`): its KeyboardInterrupt is on its way
        if stop_signals:  # at once, and said (a death with no word left a run `running`
            with contextlib.suppress(OSError):  # unexplained); os.write: no lock to wait on
                how = "terminated" if code == 143 else "interrupted"
                os.write(2, f"{how}: stopped at once by a second signal\n".encode())
            os._exit(code)
        stopping.ask()
        stop_signals.append(signum)
        first_at.append(time.monotonic())
        arm(code)
        raise KeyboardInterrupt

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    _redeliver_lost_interrupts()
    wakeups, written = os.pipe()
    os.set_blocking(written, False)
    signal.set_wakeup_fd(written, warn_on_full_buffer=False)
    watcher = threading.Thread(target=_watch_signals, args=(wakeups, arm), daemon=True)
    watcher.name = "numerate-signals"
    watcher.start()


def _watch_signals(wakeups: int, arm: Callable[[int], None]) -> None:
    """Arm the deadline the moment a signal arrives: Python runs the handler only when the
    main thread is back in Python code, and one long call in C (compressing a large result)
    kept it away for 15 s. A second signal is not judged here: during a flow, Prefect's own
    SIGTERM handler sends the signal again to the handler it replaced (`stop_within`'s), and
    counting that as the user's second one ended a run at once, unrecorded (status
    `running`); the handler tells the two apart."""
    import os
    import signal
    import warnings

    from numerate.kernel import stopping

    while True:
        for signum in os.read(wakeups, 64):
            if signum in (signal.SIGINT, signal.SIGTERM):
                stopping.ask()  # what a run records, below the command line
                signals_seen.append(signum)  # also one a handler of Prefect's took
                arm(143 if signum == signal.SIGTERM else 130)
                warnings.filterwarnings(  # a connection attempt the stop cut short is
                    "ignore", "coroutine .* was never awaited", RuntimeWarning
                )  # no news for the user (it was printed before `interrupted`)


CLEANUP_SECONDS = 1.2
"""Of the `seconds` a stopped command has, what the deadline leaves to `on_hard_stop`."""


def _deadline(seconds: float, code: int) -> None:
    """End the process `seconds` after the signal at the latest: the cleanups first (a
    temporary server still starting: no orphan; a run recorded as stopped), each in a thread
    of its own, all at once within CLEANUP_SECONDS (the main thread may hold what they need), then
    one line unless a cleanup said how the command stopped (it printed two, `error:` first)."""
    import os
    import time

    busy = max(seconds - CLEANUP_SECONDS, 0.0)
    time.sleep(busy)
    until = time.monotonic() + min(CLEANUP_SECONDS, seconds)
    workers = [threading.Thread(target=_quietly, args=(c,), daemon=True) for c in on_hard_stop]
    for worker in workers:  # at once: one that hangs holds back no other
        worker.start()
    for worker in workers:
        worker.join(max(until - time.monotonic(), 0.0))
    if not _said.is_set():
        with contextlib.suppress(OSError, ValueError):
            how = "terminated" if code == 143 else "interrupted"
            sys.stderr.write(f"{how}: still busy {busy:g} s after the signal: stopped now\n")
            sys.stderr.flush()
    os._exit(code)


_said = threading.Event()  # a command said how it stopped (say_once)


stop_notes: list[str] = []  # what a stop that reaches cli.stopped means, if anything


def if_stopped_say(what: str | None) -> None:
    """From now on, a stop that reaches `cli.stopped` says `interrupted: <what>` (a bare
    `interrupted` as a run's Prefect server started left its user to guess what was kept);
    None: no more (the command says how it stopped in its own words from here)."""
    stop_notes[:] = [what] if what else []


def said_how_it_stopped() -> None:
    """Tell the stop deadline that the command has said how it stopped (in its own words)."""
    _said.set()


_redelivering = threading.Event()  # set while a lost KeyboardInterrupt is raised again


def _redeliver_lost_interrupts() -> None:
    """A KeyboardInterrupt raised where Python cannot pass it on (a weakref callback, such as
    the one importlib runs when an import ends, a `__del__`, a garbage collector callback) is
    printed as "Exception ignored" and dropped: the command went on until the deadline
    ended it (`stopped now`) or, near its end, finished with exit 0. Such an interrupt is
    raised again from another thread 20 ms later (raised from here, it would be lost in this
    hook), until it reaches code that can take it; `on_signal` takes it as the first signal
    once more, not as the user's second."""
    import _thread

    passed_on = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if stop_signals and isinstance(unraisable.exc_value, KeyboardInterrupt):
            _redelivering.set()
            again = threading.Timer(0.02, _thread.interrupt_main)  # SIGINT: `on_signal`
            again.daemon = True
            again.start()
        else:
            passed_on(unraisable)

    sys.unraisablehook = hook


def _quietly(cleanup: Callable[[], object]) -> None:
    with contextlib.suppress(Exception):
        cleanup()


def stop_code() -> int:
    """The exit code of a command stopped by a signal: 143 after SIGTERM, else 130."""
    import signal

    return 143 if signal.SIGTERM in (stop_signals or signals_seen) else 130


def say_once(what_is_kept: str) -> Callable[..., None]:
    """A function that says, the first time it is called, how a command stopped by a signal
    ended (`interrupted: <what_is_kept>`, or `terminated: ...`): called where the command
    catches the interruption and, for a command the deadline ends, from `on_hard_stop`."""
    said = threading.Event()

    def say(instead: str | None = None) -> None:
        """Say it, or `instead` of what was kept, what the command found."""
        if not said.is_set():
            said.set()
            _said.set()
            by_term = stop_code() == 143
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(
                    f"{'terminated' if by_term else 'interrupted'}: {instead or what_is_kept}\n"
                )
                sys.stderr.flush()

    return say


def ended_as_the_signal_came(run: str, shows: str) -> str:
    """What a command says of its `run` ("run X", "NumGen run X") that had been stored as
    ended when a stop signal came (not "run the same command again", which makes a new run)."""
    return f"{run} had ended as the signal came; its results are stored ({shows} shows them)"


def said_to_have_ended(run: str, shows: str) -> NoReturn:
    """Leave a command whose `run` ended, stored, though a stop signal came (one a library
    swallowed: the command went on and exited 0), saying so in one line: 130 or 143."""
    say_once("")(ended_as_the_signal_came(run, shows))
    quiet_exit(stop_code())


def kill_child(process: Any) -> None:
    if process is not None:
        process.kill()


def quiet_exit(code: int) -> NoReturn:
    """Leave after an interruption, saying nothing more: what the user needs was said, and
    DuckDB's bindings would report the objects an interrupted run left alive at exit."""
    import os
    import sys

    sys.stderr.flush()
    sys.stdout.flush()
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    raise typer.Exit(code)
