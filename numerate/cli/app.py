"""The root `numerate` Typer app; each module of this package adds its commands to it."""

from __future__ import annotations

import inspect
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

app = typer.Typer(
    name="numerate",
    help="Evaluate language models on reasoning test manifolds and text-to-image models on NumGen.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    """`numerate --version`: the package version and the code version stored with each run."""
    if not value:
        return

    from numerate.config.provenance import code_version

    try:
        package = version("numerate")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout without install
        package = "unknown"
    typer.echo(f"numerate {package} (code {code_version()})")
    raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """Evaluate language models on reasoning test manifolds and text-to-image models on
    NumGen."""


def reflow_help(commands: typer.Typer) -> None:
    """Give each command of `commands` (and of its groups) its docstring as help, each
    paragraph one line: Typer keeps a docstring's line breaks after its first paragraph, and
    the terminal's own wrapping then left a word or two alone on a line."""
    for info in commands.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            paragraphs = inspect.cleandoc(info.callback.__doc__).split("\n\n")
            info.help = "\n\n".join(" ".join(p.split()) for p in paragraphs)
    for group in commands.registered_groups:
        if group.typer_instance is not None:
            reflow_help(group.typer_instance)
