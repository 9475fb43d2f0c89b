"""Process settings applied before Prefect is imported (numerate.config.env)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_line_of_ours_logged_outside_a_flow_comes_without_prefects_warning(tmp_path):
    """The journal's thread said an error after a failed run, outside any flow: Prefect's API
    log handler (our logger is one of its extra loggers) printed a UserWarning with a source
    line, 'Logger 'numerate' attempted to send logs to the API without a flow run id', before
    our own line. Logs to the API are sent from flows; outside one, only our line is shown."""
    script = (
        "from numerate.config import env\n"
        "env.configure()\n"
        "import logging\n"
        "from prefect.logging.configuration import setup_logging\n"
        "setup_logging()\n"
        "logging.getLogger('numerate').warning('the journal could not be written')\n"
    )
    environment = dict(os.environ, PREFECT_HOME=str(tmp_path), PREFECT_LOGGING_LEVEL="INFO",
                       PREFECT_LOGGING_TO_API_ENABLED="true",
                       PREFECT_API_URL="http://127.0.0.1:9/api")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "the journal could not be written" in done.stderr
    assert "Warning" not in done.stderr and "flow run id" not in done.stderr, done.stderr
