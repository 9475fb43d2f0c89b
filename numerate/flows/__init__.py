"""Prefect flows: wiring only."""

from numerate.env import configure as _configure

_configure()  # before anything imports prefect
