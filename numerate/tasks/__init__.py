"""Prefect tasks: thin wrappers over the pure code in `manifolds` and `numerate`, plus I/O."""

from numerate.config.env import configure as _configure

_configure()  # before anything imports prefect
