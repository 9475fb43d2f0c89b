"""The `numerate` command line: one module per command group, what they share in `common`.

The only part of numerate/ that may import flows/. Imports stay inside the commands:
`numerate --help` must answer fast and never load torch.
"""

from __future__ import annotations

import importlib
import sys

import typer

from numerate.cli.app import app
from numerate.cli.numgen import app as numgen_app

# each adds its commands, in order
for _group in ("cases", "run", "results", "compare", "plot", "operations"):
    importlib.import_module(f"numerate.cli.{_group}")
app.add_typer(numgen_app, name="numgen")

__all__ = ["app", "main"]


def main() -> None:  # pragma: no cover - entry point
    """The console script: the app, then close any results database it opened. A command
    line that cannot be read is one line and exit 2, like any other bad input."""
    from typer._click.exceptions import ClickException, NoArgsIsHelpError

    try:
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except NoArgsIsHelpError as error:  # `numerate generate` alone: its help
        print(error.ctx.get_help() if error.ctx else error.format_message(), file=sys.stderr)
        sys.exit(2)
    except ClickException as error:  # a command line that cannot be read
        ctx = getattr(error, "ctx", None)
        hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
        print(f"error: {error.format_message()}{hint}", file=sys.stderr)
        sys.exit(2)
    except (typer.Abort, EOFError):
        sys.exit(130)
    finally:
        store = sys.modules.get("numerate.store")
        if store is not None:
            store.Store.close_all()
