"""`numerate manifolds`: the registered manifolds and their parameters."""

from __future__ import annotations

import typer

from numerate.cli.app import app


@app.command()
def manifolds() -> None:
    """List the manifolds, their parameters, defaults and bounds."""
    from numerate.config.sweep import DEFAULT_COUNT
    from numerate.manifolds import registry

    for name in registry.names():
        spec = registry.get(name)
        typer.echo(f"{name}: {spec.description}")
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
            typer.echo(f"  {field:<18} default={default!r:<8} {bounds:<14} {doc}")
    typer.echo(
        f"every manifold: how many cases is no parameter of a case (nor a grid axis): a sweep "
        f"entry's `count` (default {DEFAULT_COUNT} a grid point), or `generate --count`"
    )
