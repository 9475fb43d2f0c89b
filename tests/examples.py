"""How many examples a hypothesis property tries.

`make test` runs each property's own count, on the same examples every run (the `default`
profile of tests/conftest.py: derandomized, so a red suite is a bug, never a bad draw). The
counts are high where a property guards what the benchmark measures and has found bugs there
(generators' invariants, grading), modest elsewhere. `NUMERATE_HYPOTHESIS=nightly` (a nightly
job's, or before a release) multiplies every count by NIGHTLY_FACTOR and draws new examples
each time.
"""

from __future__ import annotations

import os

from hypothesis import settings

NIGHTLY_FACTOR = 10


def examples(count: int) -> settings:
    """The settings of a property that tries `count` examples (times NIGHTLY_FACTOR nightly)."""
    nightly = os.environ.get("NUMERATE_HYPOTHESIS", "").strip() == "nightly"
    return settings(max_examples=count * (NIGHTLY_FACTOR if nightly else 1))
