"""What every command shares: one-line errors, output formats, the database option, the
progress bar, and settling Prefect before exit (the process itself: numerate.cli.process).

Imports stay inside functions: `numerate --help` must answer fast and never load torch.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, cast

import typer

if TYPE_CHECKING:
    from numerate.kernel.files import Content
    from numerate.store.queries import Source
    from numerate.store.reader import Reader

from numerate.kernel.errors import EXIT_FAILED_FOR_NOW, ConfigError, NumerateError, for_terminal

Format = Literal["table", "csv", "json", "markdown"]
FORMATS: tuple[Format, ...] = ("table", "csv", "json", "markdown")

DB_HELP = (
    "Results database: a DuckDB file, or a lake 'ducklake:postgres:<connection string>' "
    "(default: $NUMERATE_DB, else results/numerate.duckdb)."
)
RUN_HELP = "An id, a unique prefix of one, latest or previous."
"""How a command that takes a run names it (numerate.store.queries.resolve_run)."""
DB_OPTION = typer.Option(help=DB_HELP)
"""`--db`, as most commands take it."""
FORMAT_OPTION = typer.Option("--format", help="table, csv, json or markdown.")
"""`--format`, for a command that prints a table."""


def fail(message: str | BaseException, code: int | None = None) -> NoReturn:
    """Print an error for the user and leave with `code`: by default the error's own
    (NumerateError.exit_code: 2 for bad input, 3 where the machine failed for now, such as a
    results database that stayed busy past the wait, or a Prefect server that did not start),
    2 for a message. Credentials are redacted (numerate.kernel.credentials): every error
    passes here."""
    from numerate.kernel import stopping
    from numerate.kernel.credentials import redact
    from numerate.store import Store, access

    if stopping.asked():  # an error the stop caused (pydantic wrapped the KeyboardInterrupt
        raise KeyboardInterrupt  # in its own: exit 2): the stop is the news, cli says so
    if code is None:
        code = message.exit_code if isinstance(message, NumerateError) else 2
    if isinstance(message, access.DatabaseBusy):
        access.hurry(0)  # leaving: no wait on the busy database at exit (the journal keeps all)
        Store.stop_flushing()  # their warnings come before the error line, not after it
    text = redact(str(message), token_shapes=True)
    # lines are "\n"'s: any other separator in a value is escaped, not a line of its own
    lines = [for_terminal(line) for line in text.rstrip("\n").split("\n")]
    with contextlib.suppress(OSError):  # a standard error that cannot be written (2>/dev/full):
        typer.echo("".join(f"error: {line}\n" for line in lines), err=True, nl=False)
    raise typer.Exit(code)  # the code says it all the same (it was 1, a traceback unseen)


def write_output(path: Path, content: Content) -> None:
    """Write a command's output file atomically (kernel.files.write_atomically, the one way
    numerate writes output files); a path that cannot be written (a folder, no permission) is
    one error line and exit 2, a full disk one line and exit 3 (the machine's, not the
    path's), and either leaves nothing behind."""
    from numerate.kernel.files import OutputPathError, write_atomically

    try:
        write_atomically(path, content)
    except OutputPathError as error:
        fail(f"cannot write {path}: {error.reason}")
    except ConfigError as error:
        fail(error)
    except OSError as error:
        full = error.errno == errno.ENOSPC
        fail(f"cannot write {path}: {error.strerror or error}", EXIT_FAILED_FOR_NOW if full else 2)


def a_path(text: str) -> Path:
    """The parser of every path option and argument: an empty or blank path is refused (as a
    Path it would be `.`, here), and the message shows it as given."""
    from numerate.kernel.inputs import has_control_character

    if not text.strip():
        raise typer.BadParameter(f"{text!r}: give a path (an empty one would mean here)")
    if has_control_character(text):  # messages would show it torn
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
    return typer.Option(*names, help=help, parser=a_path)


def path_argument(help: str) -> Any:
    """A typer argument that is a path, parsed by `a_path` (an empty path refused)."""
    return typer.Argument(help=help, parser=a_path)


def check_output(option: str, path: Path | str | None, suffixes: tuple[str, ...] = ()) -> None:
    """Refuse an output path before any work is done: one that cannot be a file (see
    kernel.files.output_target) or, given `suffixes`, whose suffix names a format the command
    does not write. Raises ConfigError naming `option`."""
    from numerate.kernel.files import OutputPathError, check_suffix, output_target

    if path is None:
        return
    if isinstance(path, _FolderPath) or str(path).endswith("/"):
        shown = f"{str(path).rstrip('/'):.200}/"
        raise ConfigError(f"{option} {shown}: a folder's name (it ends with /); give a file name")
    try:
        output_target(Path(path))
    except OutputPathError as error:
        raise ConfigError(f"{option} {path!s:.200}: {error.reason}") from None
    if suffixes:
        check_suffix(option, path, suffixes)


def results_db(db: str | None) -> str:
    """The database a command uses: its --db, else the one default rule (numerate.config.sweep)."""
    from numerate.config.sweep import results_database

    try:
        return results_database(db)
    except ConfigError as error:
        fail(error)


def open_reader(db: str | None, numerate_schema: bool = True) -> Reader:
    """The results database opened read-only (numerate.store.reader.Reader), waiting while a
    writer holds it. A path that cannot be read is said with where it came from when that
    is $NUMERATE_DB (a path the user did not type: "no results database at ..." sent them
    looking for a lost file)."""
    from numerate.store.reader import Reader

    path = results_db(db)
    try:
        return Reader.open(path, numerate_schema)
    except ConfigError as error:
        if db is None and os.environ.get("NUMERATE_DB", "").strip():
            raise ConfigError(f"NUMERATE_DB: {error}") from None
        raise


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
    from numerate.kernel.errors import field_path, shorten
    from numerate.kernel.inputs import MAX_OPTION_CHARS, json_value

    values: dict[str, Any] = {}
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {shorten(repr(assignment))}")
        shown = f"--set {field_path([key.strip()])}"  # escaped and cut, as a config's keys
        if key.strip() in values:
            raise ConfigError(f"{shown}: given twice; give it once")
        try:
            values[key.strip()] = json_value(raw, shown, MAX_OPTION_CHARS)
        except json.JSONDecodeError:
            values[key.strip()] = raw
    return values


WIDE = 200
"""Columns of the progress bar where standard error is no terminal (a line of a log)."""


def terminal_progress(description: str, asks: bool = True) -> Any:
    """A rich progress bar on standard error (rich is imported only when a sweep runs).
    `asks`: the work sends requests, so its errors, retries, stored answers found and
    requests in flight are shown (not for `regrade`, which sends none)."""
    from rich.console import Console
    from rich.progress import BarColumn, TextColumn, TimeRemainingColumn
    from rich.progress import Progress as RichBar

    from numerate.kernel.progress import Progress

    console = Console(stderr=True)
    if not console.is_terminal:  # a log (a worker's, a pipe): rich's 80 columns cut the bar
        console = Console(stderr=True, width=WIDE)  # into "…" pieces

    asking = (
        TextColumn("{task.fields[errors]:,} errors"),
        TextColumn("{task.fields[retries]:,} retries"),
        TextColumn("{task.fields[cached]:,} cached"),
        TextColumn("{task.fields[limit]}"),
    )

    class TerminalProgress(Progress):
        def __init__(self) -> None:
            super().__init__()
            self.bar = RichBar(
                TextColumn("[bold]{task.description}"),
                TextColumn("{task.fields[step]}"),
                BarColumn(),
                TextColumn("{task.completed:,}/{task.total:,}"),
                TextColumn("{task.fields[rate]:,.1f}/s"),
                *(asking if asks else ()),
                TextColumn("{task.fields[open]}"),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=console,
                transient=False,
            )
            fields: dict[str, Any] = {"rate": 0.0, "errors": 0, "retries": 0, "cached": 0,
                                      "limit": "", "open": "", "step": ""}  # fmt: skip
            self.task_id = self.bar.add_task(description, total=0, **fields)
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
            said = f"note: {for_terminal(message)}"  # rich writes an ESC as it is
            self.bar.console.print(said, markup=False, highlight=False, soft_wrap=True)

        def close(self) -> None:
            self.render()
            self.bar.stop()

    return TerminalProgress()


def note(said: str) -> None:
    """A note for the user, one line on standard error."""
    typer.echo(f"note: {for_terminal(said)}", err=True)


def warn(said: str) -> None:
    """A warning for the user, one line on standard error (escaped and bounded, as errors)."""
    typer.echo(f"warning: {for_terminal(said)}", err=True)


def notes_to_stderr() -> Any:
    """A progress that shows nothing but its notes, each one line on standard error (a wait
    for the results database before a flow runs: logged, it was a Prefect warning about a
    log without a flow run, then the note twice)."""
    from numerate.kernel.progress import Progress

    class Notes(Progress):
        def note(self, message: str) -> None:
            note(message)

    return Notes()


def show(text: str) -> None:
    """Write a command's output (a table, CSV, JSON) to standard output as it is: typer.echo
    drops ANSI escape sequences when the output is not a terminal, which changed the data of a
    CSV or JSON written to a file (`chr(27)` in a value was lost)."""
    sys.stdout.write(text)
    sys.stdout.flush()


def print_report(source: Source, run_id: str, output: Format) -> None:
    """A run's summaries, per model and manifold, in the format asked for."""
    from numerate.results.report import render_tables, summary_table

    show(render_tables([summary_table(source, run_id)], output, keyed=False))


def quiet_run_logs(level: int = logging.WARNING) -> None:
    """A command that shows its own progress, and says itself how its run ended: Prefect's
    run log lines below `level` (INFO: each task run's state) are not printed beside them.
    Call it once Prefect is imported (its import sets its loggers' levels)."""
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
