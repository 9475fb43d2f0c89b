"""Which of numerate's modules draw from the random module's shared generator.

A process's other threads draw from it too (Prefect's clients, an HTTP client's retries), so
a test cannot ask that the generator's state stay the same while numerate waits: a fresh
clone's suite saw it change under `test_a_writer_waits_for_another_process_then_writes`.
It asks instead who drew from it.
"""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import Callable, Iterator
from typing import Any

DRAWS = ("random", "getrandbits")
"""What every function of a generator draws through (`uniform` through `random`, `randint`
and `choice` through `getrandbits`)."""


@contextlib.contextmanager
def numerate_draws() -> Iterator[list[str]]:
    """While the block runs: each draw from the shared generator (the one behind the random
    module's functions, however they were imported) made by numerate's code, as
    `module: random.draw`."""
    shared = random.random.__self__
    calls: list[str] = []
    own = {name: vars(random.Random).get(name) for name in DRAWS}

    def watched(name: str, draw: Callable[..., Any]) -> Callable[..., Any]:
        def call(self: random.Random, *args: Any) -> Any:
            if self is shared:
                frame = sys._getframe(1)
                while frame is not None and frame.f_globals.get("__name__") == "random":
                    frame = frame.f_back  # past uniform, randint, ... to their caller
                module = str(frame.f_globals.get("__name__", "")) if frame else ""
                if module.split(".")[0] == "numerate":
                    calls.append(f"{module}: random.{name}")
            return draw(self, *args)

        return call

    for name in DRAWS:
        setattr(random.Random, name, watched(name, getattr(random.Random, name)))
    try:
        yield calls
    finally:
        for name, kept in own.items():
            if kept is None:
                delattr(random.Random, name)  # the C base class's, as before
            else:
                setattr(random.Random, name, kept)
