"""Which of numerate's modules draw from the random module's shared generator.

A process's other threads draw from it too (Prefect's clients, an HTTP client's retries), so
a test cannot ask that the generator's state stay the same while numerate waits: a fresh
clone's suite saw it change under `test_a_writer_waits_for_another_process_then_writes`.
It asks instead who called it.
"""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import Iterator

FUNCTIONS = (
    "random", "uniform", "randint", "randrange", "choice", "choices", "shuffle", "sample",
    "gauss", "normalvariate", "expovariate", "triangular", "betavariate", "getrandbits",
    "randbytes",
)  # fmt: skip
"""The random module's functions of its shared generator."""


@contextlib.contextmanager
def numerate_draws() -> Iterator[list[str]]:
    """While the block runs: each call of numerate's code (a module whose name begins with
    `numerate`) to a function of the shared generator, as `module: random.function`."""
    calls: list[str] = []
    originals = {name: getattr(random, name) for name in FUNCTIONS}

    def watched(name: str, function: object) -> object:
        def call(*args: object, **kwargs: object) -> object:
            module = str(sys._getframe(1).f_globals.get("__name__", ""))
            if module.split(".")[0] == "numerate":
                calls.append(f"{module}: random.{name}")
            return function(*args, **kwargs)  # type: ignore[operator]

        return call

    for name, function in originals.items():
        setattr(random, name, watched(name, function))
    try:
        yield calls
    finally:
        for name, function in originals.items():
            setattr(random, name, function)
