"""`numerate generate`: a manifold's cases, without asking any model."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, BinaryIO

import typer

from numerate.cli.app import app
from numerate.cli.common import check_output, fail, parse_assignments, path_option, write_output
from numerate.kernel.errors import ConfigError, NumerateError


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
        Path | None,
        path_option("JSON Lines file to write (default: standard output)."),
    ] = None,
) -> None:
    """Generate test cases as JSON Lines, one case a line."""
    from pydantic import ValidationError

    from numerate.config.sweep import too_long_for_a_point
    from numerate.kernel.errors import MAX_PART, describe_validation_error, shorten
    from numerate.kernel.inputs import MAX_SEED
    from numerate.manifolds import registry

    try:
        check_output("--out", out)
        spec = registry.get(manifold)
        if not 0 <= seed <= MAX_SEED:
            raise ConfigError(f"--seed {seed}: a seed is a whole number from 0 to {MAX_SEED}")
        values = parse_assignments(set_ or [])
        if "count" in values:
            raise ConfigError("--set count=...: give the number of cases with --count")
        values["count"] = count
        too_long = too_long_for_a_point(values, "--set ")
        if too_long:  # a case of it would be beyond what a run may ask
            raise ConfigError(too_long)
        unknown = sorted(set(values) - set(spec.params_model.model_fields))
        if unknown:
            known = ", ".join(f for f in spec.params_model.model_fields if f != "count")
            raise ConfigError(
                f"{manifold} has no parameter {shorten(repr(unknown[0]), MAX_PART)} "
                f"(parameters: {known})"
            )
        try:
            params = spec.params(**values)
        except ValidationError as error:
            given = {a.partition("=")[0].strip(): f"--set {shorten(a.strip())}" for a in set_ or []}
            given["count"] = "--count"
            raise ConfigError(
                describe_validation_error(error, f"{manifold} parameters", given)
            ) from None
    except (NumerateError, registry.UnknownManifoldError) as error:
        fail(error)
        return

    cases = spec.cases(params, seed)
    if out is None:
        for case in cases:
            sys.stdout.write(case.model_dump_json() + "\n")
        return

    def write(handle: BinaryIO) -> None:
        for case in cases:
            handle.write((case.model_dump_json() + "\n").encode("utf-8"))

    write_output(out, write)
    typer.echo(f"wrote {count} {manifold} cases to {out}", err=True)
