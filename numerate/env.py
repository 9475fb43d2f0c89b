"""Process defaults set before Prefect is imported: offline, quiet, our logger captured."""

from __future__ import annotations

import os

PREFECT_DEFAULTS = {
    # Prefect must never try to reach the internet (analytics, telemetry).
    "DO_NOT_TRACK": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    # Progress lines of the `numerate` logger go to Prefect's run logs on workers.
    "PREFECT_LOGGING_EXTRA_LOGGERS": "numerate",
}


def configure() -> None:
    """Apply the defaults; a variable the user already set wins."""
    for name, value in PREFECT_DEFAULTS.items():
        os.environ.setdefault(name, value)
