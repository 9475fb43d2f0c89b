"""Prefect flows: wiring only."""

from numerate.config.env import configure as _configure

_configure()  # before anything imports prefect
