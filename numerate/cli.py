"""The `numerate` command line.

Imports stay inside the commands: `numerate --help` must answer fast and never load torch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from numerate.errors import ConfigError, NumerateError

app = typer.Typer(
    name="numerate",
    help="Evaluate language models on reasoning test manifolds and text-to-image models on NumGen.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def fail(message: str, code: int = 2) -> None:
    """Print an error for the user and leave with `code`."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def parse_assignments(assignments: list[str]) -> dict[str, Any]:
    """`key=value` pairs; values are read as JSON where they parse ("8", "0.5", "true",
    "\\"\\\\n\\""), else as plain strings ("ROMAN")."""
    values: dict[str, Any] = {}
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {assignment!r}")
        try:
            values[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            values[key.strip()] = raw
    return values


@app.command()
def generate(
    manifold: Annotated[str, typer.Argument(help="Manifold name: objects, shuffle or sequence.")],
    count: Annotated[int, typer.Option(help="Cases to generate.")] = 10,
    seed: Annotated[int, typer.Option(help="Base seed of the grid point.")] = 42,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Generation parameter, key=value (repeatable)."),
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="JSON Lines file to write (default: standard output).")
    ] = None,
) -> None:
    """Generate test cases as JSON Lines, one case a line."""
    from pydantic import ValidationError

    from manifolds import registry
    from numerate.errors import describe_validation_error

    try:
        spec = registry.get(manifold)
        values = parse_assignments(set_ or [])
        values["count"] = count
        unknown = sorted(set(values) - set(spec.params_model.model_fields))
        if unknown:
            known = ", ".join(spec.params_model.model_fields)
            raise ConfigError(f"{manifold} has no parameter {unknown[0]!r} (parameters: {known})")
        try:
            params = spec.params(**values)
        except ValidationError as error:
            raise ConfigError(describe_validation_error(error, f"{manifold} parameters")) from None
    except (NumerateError, registry.UnknownManifoldError) as error:
        fail(str(error))
        return

    cases = spec.cases(params, seed)
    if out is None:
        for case in cases:
            sys.stdout.write(case.model_dump_json() + "\n")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with partial.open("w", encoding="utf-8") as handle:
        for case in cases:
            handle.write(case.model_dump_json() + "\n")
    partial.replace(out)  # a reader never sees half a file
    typer.echo(f"wrote {count} {manifold} cases to {out}", err=True)


@app.command()
def manifolds() -> None:
    """List the manifolds, their parameters, defaults and bounds."""
    from manifolds import registry

    for name in registry.names():
        spec = registry.get(name)
        typer.echo(f"{name}: {spec.description}")
        for field, info in spec.params_model.model_fields.items():
            bounds = " ".join(
                f"{k}={getattr(m, k)}"
                for m in info.metadata
                for k in ("gt", "ge", "lt", "le")
                if getattr(m, k, None) is not None
            )
            default = info.default.value if hasattr(info.default, "value") else info.default
            doc = (info.description or "").strip()
            typer.echo(f"  {field:<18} default={default!r:<8} {bounds:<14} {doc}")


def main() -> None:  # pragma: no cover - entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
