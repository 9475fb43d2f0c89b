"""The `numerate` command line: one module per command group, what they share in `common`.

The only part of numerate/ that may import flows/. Imports stay inside the commands:
`numerate --help` must answer fast and never load torch.
"""

from __future__ import annotations

import importlib
import sys

from numerate.cli.app import app
from numerate.cli.numgen import app as numgen_app

for _group in ("cases", "run", "results", "operations"):  # each adds its commands, in order
    importlib.import_module(f"numerate.cli.{_group}")
app.add_typer(numgen_app, name="numgen")

__all__ = ["app", "main"]


def main() -> None:  # pragma: no cover - entry point
    """The console script: the app, then close any results database it opened."""
    try:
        app()
    finally:
        store = sys.modules.get("numerate.store")
        if store is not None:
            store.Store.close_all()
