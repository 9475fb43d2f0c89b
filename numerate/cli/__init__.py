"""The `numerate` command line: one module per command (`numgen` is a group), named after it;
what they share in `common`.

The only part of numerate/ that may import flows/. Imports stay inside the commands:
`numerate --help` must answer fast and never load torch.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import tempfile
import traceback
from typing import Any, NoReturn

import typer

from numerate.config.env import configure as _configure
from numerate.kernel.errors import for_terminal, undecodable

_configure()  # before anything imports prefect (a command's early server start included)

from numerate.cli.app import app, reflow_help  # noqa: E402
from numerate.cli.numgen import app as numgen_app  # noqa: E402
from numerate.cli.server import server_app  # noqa: E402

# one module per command, named after it; each adds itself to the app, in this order
for _command in ("generate", "manifolds", "grade", "run", "report", "db", "regrade", "upgrade",
                 "cache", "runs", "compare", "plot", "deploy", "ingest", "view"):  # fmt: skip
    importlib.import_module(f"numerate.cli.{_command}")
app.add_typer(numgen_app, name="numgen")
app.add_typer(server_app, name="server")
reflow_help(app)

__all__ = ["app", "main"]


def main() -> None:  # pragma: no cover - entry point
    """The console script: the app, then close any results database it opened. A command
    line that cannot be read is one line and exit 2, like any other bad input."""
    from numerate.cli.process import PROCESS, output_lost
    from numerate.kernel.errors import EXIT_FAILED_FOR_NOW, first_line

    PROCESS.start()  # first: the file descriptors it fills are the lowest free ones
    if sys.argv[1:2] == ["--version"] and len(sys.argv) > 2:  # click answers it at once
        print(f"error: --version takes nothing after it (got {sys.argv[2]!r})", file=sys.stderr)
        sys.exit(2)
    _refuse_undecodable(sys.argv[1:])
    command = typer.main.get_command(app)  # what app() builds and runs (it is built once)
    _refuse_repeated(command, sys.argv[1:])
    try:
        code = command(standalone_mode=False)
        code = code if isinstance(code, int) else 0
        _close_stores(failed=code != 0)
        if PROCESS.signals and code in (130, 143):
            PROCESS.stopped(close=lambda: _close_stores(failed=True))
        PROCESS.leave(code)
    except SystemExit as leaving:  # click's answer to a closed pipe (`| head`): exit 1
        ours = PROCESS.leaving_with is not None  # the command's own code, leaving
        if not ours and leaving.code == 1 and isinstance(output_lost(), BrokenPipeError):
            PROCESS.leave(0)  # the reader took what it wanted: nothing is wrong (as for
        raise  # `db`, which wrote all before the reader left)
    except (typer.Abort, EOFError, KeyboardInterrupt):
        PROCESS.stopped(close=lambda: _close_stores(failed=True))
    except Exception as error:
        lost = output_lost() if isinstance(error, OSError) else None
        if lost is not None:
            print(f"error: cannot write the output: {lost.strerror or lost}", file=sys.stderr)
            sys.exit(2)
        if _is_a_refused_command_line(error):
            _refused(error)
        if PROCESS.signals:  # an interruption some library wrapped in its own error
            PROCESS.stopped(close=lambda: _close_stores(failed=True))  # (pydantic, ...)
        if not isinstance(error, OSError):
            _crashed(error)
        # this machine's, where no command said it better (a full disk, a folder that
        # cannot be written): one line, as every error (a run it held is marked interrupted)
        print(f"error: {for_terminal(first_line(error))}", file=sys.stderr)
        sys.exit(EXIT_FAILED_FOR_NOW)
    except BaseException as error:  # a Rust library's panic (polars') is no Exception
        if isinstance(error, SystemExit | GeneratorExit):
            raise
        _crashed(error)
    finally:
        _close_stores(failed=True)  # after an exception; nothing left to close otherwise


def _crashed(error: BaseException) -> NoReturn:
    """Leave on an error numerate did not foresee (a bug, or a database changed by hand in a
    way no check knows) with one line that names it and the file holding its traceback, not
    the traceback (exit 1); NUMERATE_TRACEBACK=1 (as the tests set) prints the traceback."""
    from numerate.kernel.errors import first_line

    if os.environ.get("NUMERATE_TRACEBACK") == "1":
        raise error
    where = ""
    with contextlib.suppress(OSError):
        fd, path = tempfile.mkstemp(prefix="numerate-error-", suffix=".txt")
        with os.fdopen(fd, "w") as file:
            file.write("".join(traceback.format_exception(error)))
        where = f"; what it met is written in {path}"
    said = for_terminal(first_line(error), 300)
    print(f"error: {type(error).__name__}: {said} (numerate did not foresee this: a bug, or a "
          f"results database changed by hand{where})", file=sys.stderr)  # fmt: skip
    sys.exit(1)


def _is_a_refused_command_line(error: Exception) -> bool:
    """Whether `error` is the command-line parser's refusal: click's ClickException, which
    Typer keeps in a module of its own that is not public, is known by what click documents
    of it, `format_message()` and `exit_code` (typer.Exit has no message)."""
    return callable(getattr(error, "format_message", None)) and isinstance(
        getattr(error, "exit_code", None), int
    )


def _refused(error: Exception) -> NoReturn:
    """Leave a command line that cannot be read in one line, exit 2; one that names a group
    of commands or a command and nothing more (click's NoArgsIsHelpError): its help first."""
    ctx = getattr(error, "ctx", None)
    if type(error).__name__ == "NoArgsIsHelpError":
        _needs_more(ctx)
    hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
    message = error.format_message()  # type: ignore[attr-defined]
    name = getattr(error, "option_name", None)  # click's NoSuchOption
    if isinstance(name, str) and len(name.split()) > 1:  # SQL after its `-- comment`: no option
        message = (f"{for_terminal(repr(name), 60)} begins with '-', so it was read as an "
                   "option: put -- before it (-- ends the options)")  # fmt: skip
    given = _value_refused(error)
    if given is not None:  # "Invalid value for '--limit': Input should be a valid integer"
        message = f"{message} (got {for_terminal(repr(given), 200)})"
    print(f"error: {message}{hint}", file=sys.stderr)
    sys.exit(2)


def _refuse_undecodable(arguments: list[str]) -> None:
    """Leave with one line (exit 2) when an argument holds bytes that are no UTF-8 (Python
    keeps them as surrogates, which DuckDB, pydantic and JSON refuse: a run id, SQL or a
    sweep name gave tracebacks, or errors naming no option), naming the option it was given
    to."""
    for index, argument in enumerate(arguments):
        shown = undecodable(argument)  # \xff, as given
        if shown is not None:
            before = arguments[index - 1] if index else ""
            given = f"{before} {shown}" if before.startswith("-") and "=" not in before else shown
            print(
                f"error: {given}: not valid text (undecodable bytes; numerate reads its "
                "arguments as UTF-8)",
                file=sys.stderr,
            )
            sys.exit(2)


def _value_refused(error: Exception) -> object | None:
    """The value an option's type refused, where Typer's check of it (a pydantic validation:
    `--limit nan`, `--port -5`) said why and not what; None where it is not known."""
    from pydantic import ValidationError

    cause = error.__cause__
    if isinstance(cause, ValidationError) and cause.errors():
        return cause.errors()[0].get("input")
    return None


def _refuse_repeated(command: Any, arguments: list[str]) -> None:
    """Leave with one line (exit 2) when an option that takes one value is given twice:
    click keeps the last one unsaid (`report --db a --db b` read b alone, `cache clear --db
    a --db b` cleared b), where a key of `--set` given twice is refused. Read from the
    command's own options (click documents `commands`, `params` and their `opts`)."""
    index = 0
    while index < len(arguments) and isinstance(getattr(command, "commands", None), dict):
        token = arguments[index]
        index += 1
        if token in command.commands:
            command = command.commands[token]
        elif not token.startswith("-"):
            return  # no such command: click says so
    if "--help" in arguments:
        return  # the help, whatever else is given
    takes = {  # the options that take a value (those that may repeat too: values skipped)
        opt: param
        for param in getattr(command, "params", [])
        if param.param_type_name == "option" and not (param.is_flag or param.count)
        for opt in param.opts
    }
    given: dict[str, list[tuple[str, str]]] = {}
    while index < len(arguments) and arguments[index] != "--":
        token = arguments[index]
        index += 1
        if token.startswith("--"):  # `--db a` or `--db=a`
            opt, equals, value = token.partition("=")
        else:  # `-c a` or `-ca` (click reads `-c=a` as the value "=a")
            opt, value = token[:2], token[2:]
            equals = "=" if value else ""
        if opt not in takes:
            continue
        if not equals:
            value = arguments[index] if index < len(arguments) else ""
            index += 1  # its value, whatever it looks like (`--q --db` looks for "--db")
        if not takes[opt].multiple:
            given.setdefault(takes[opt].name, []).append((opt, value))
    for (opt, first), (again, second) in (both[:2] for both in given.values() if len(both) > 1):
        named = opt if opt == again else f"{opt} (as {again})"
        print(
            f"error: {named} given twice ({for_terminal(repr(first), 200)}, then "
            f"{for_terminal(repr(second), 200)}): give it once",
            file=sys.stderr,
        )
        sys.exit(2)


def _close_stores(failed: bool) -> None:
    """Close the results databases the command opened (numerate.store.Store.close_all); none
    when it opened none (the store is not even imported then)."""
    store = sys.modules.get("numerate.store")
    if store is not None:
        store.Store.close_all(failed)


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
