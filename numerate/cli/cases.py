"""Cases: `numerate generate`, `numerate manifolds` and `numerate grade`."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from numerate.cli.app import app
from numerate.cli.common import fail, parse_assignments, write_output
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
        Path | None, typer.Option(help="JSON Lines file to write (default: standard output).")
    ] = None,
) -> None:
    """Generate test cases as JSON Lines, one case a line."""
    from pydantic import ValidationError

    from numerate.kernel.errors import describe_validation_error
    from numerate.manifolds import registry

    try:
        spec = registry.get(manifold)
        if seed < 0:
            raise ConfigError(f"--seed {seed}: a seed is a whole number, 0 or more")
        values = parse_assignments(set_ or [])
        for key, value in values.items():
            field = spec.params_model.model_fields.get(key)
            if isinstance(value, bool) and field is not None and field.annotation is not bool:
                raise ConfigError(
                    f"--set {key}={str(value).lower()}: expected a value, not true or false"
                )
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
        fail(error)
        return

    cases = spec.cases(params, seed)
    if out is None:
        for case in cases:
            sys.stdout.write(case.model_dump_json() + "\n")
        return

    def write(partial: Path) -> None:
        with partial.open("w", encoding="utf-8") as handle:
            for case in cases:
                handle.write(case.model_dump_json() + "\n")

    write_output(out, write)
    typer.echo(f"wrote {count} {manifold} cases to {out}", err=True)


@app.command()
def manifolds() -> None:
    """List the manifolds, their parameters, defaults and bounds."""
    from numerate.manifolds import registry

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


@app.command()
def grade(
    path: Annotated[Path, typer.Argument(help="JSON Lines: cases with a `response` field.")],
    out: Annotated[
        Path | None, typer.Option(help="File to write (default: standard output).")
    ] = None,
) -> None:
    """Grade answers from any source (JSON Lines of cases with their responses).

    Each line is a case as `numerate generate` writes it plus `response` (and optionally
    `finish_reason`); each is written back with `outcome` and `answer`.
    """
    from numerate.kernel.files import read_text
    from numerate.regrade import grade_lines

    try:
        graded = grade_lines(read_text(path).splitlines(), str(path))
    except NumerateError as error:
        fail(error)
        return
    lines = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in graded)
    if out is None:
        sys.stdout.write(lines)
        return
    write_output(out, lines)
    counts = Counter(r["outcome"] for r in graded)
    summary = ", ".join(f"{n} {o}" for o, n in sorted(counts.items()))
    typer.echo(f"graded {len(graded)} answers ({summary or 'none'}) -> {out}", err=True)
