"""The root `numerate` Typer app; each module of this package adds its commands to it."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="numerate",
    help="Evaluate language models on reasoning test manifolds and text-to-image models on NumGen.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
