"""`numerate manifolds`: the registered manifolds and their parameters."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap

import typer

from numerate.cli.app import app


@app.command()
def manifolds() -> None:
    """List the manifolds, their parameters, defaults and bounds."""
    from numerate.config.sweep import DEFAULT_COUNT
    from numerate.manifolds import registry

    width = listing_width()
    for name in registry.names():
        spec = registry.get(name)
        typer.echo(wrapped(f"{name}: {spec.description}", "", width))
        for field, info in spec.params_model.model_fields.items():
            if field == "count":  # how many cases, not what a case is: said once, below
                continue
            bounds = " ".join(
                f"{k}={getattr(m, k)}"
                for m in info.metadata
                for k in ("gt", "ge", "lt", "le")
                if getattr(m, k, None) is not None
            )
            default = info.default.value if hasattr(info.default, "value") else info.default
            doc = " ".join((info.description or "").split())  # one line, as written over two
            typer.echo(wrapped(doc, f"  {field:<18} default={default!r:<8} {bounds:<14} ", width))
    typer.echo(
        wrapped(
            f"every manifold: how many cases is no parameter of a case (nor a grid axis): a "
            f"sweep entry's `count` (default {DEFAULT_COUNT} a grid point), or `generate --count`",
            "",
            width,
        )
    )


def listing_width() -> int | None:
    """The columns to wrap the listing in: `COLUMNS` when set, else the terminal's; None (a
    line each, for grep) when the listing goes to a file or a pipe."""
    if os.environ.get("COLUMNS", "").strip().isdigit() or sys.stdout.isatty():
        return max(shutil.get_terminal_size().columns, 60)
    return None


def wrapped(text: str, head: str, width: int | None) -> str:
    """`head` then `text`, wrapped in `width` columns under an indent as wide as `head` (at
    least two spaces), or under `head` on lines of their own where it leaves fewer than 40
    columns; one line when `width` is None."""
    if width is None:
        return head + text
    if width - len(head) >= 40:
        indent = " " * max(len(head), 2)
        return textwrap.fill(text, width, initial_indent=head, subsequent_indent=indent)
    lines = textwrap.fill(text, width, initial_indent="      ", subsequent_indent="      ")
    return f"{head.rstrip()}\n{lines}"
