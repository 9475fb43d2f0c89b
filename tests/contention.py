"""Many users of one results database at once, with real processes: sweeps, a NumGen run and an
ingest write it while readers poll `report` and `db`. Used by tests/store/test_many_users.py
(a short version) and bench/contention.py (a soak)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import yaml

ROOT = Path(__file__).resolve().parent.parent
NUMERATE = [sys.executable, "-m", "numerate.cli"]


def environment(prefect_home: Path, api_url: str | None, lock_log: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"PREFECT_HOME": str(prefect_home), "PYTHONUNBUFFERED": "1",
                "NUMERATE_LOCK_LOG": str(lock_log), "NUMERATE_SERVER": "temporary"})  # fmt: skip
    env.pop("PREFECT_API_URL", None)
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return env


def sweep_config(path: Path, name: str, base_url: str, manifold: str, count: int,
                 concurrency: int, **extra: Any) -> Path:  # fmt: skip
    """A one-model sweep against the loopback endpoint."""
    config = {
        "name": name,
        "batch_size": max(1, count // 3),  # several batches: graded rows arrive throughout
        "models": [
            {"name": name, "model": "fake-model", "base_url": base_url, "concurrency": concurrency}
        ],
        "manifolds": [{"manifold": manifold, "count": count}],
        **extra,
    }
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class Poll:
    """One reader command: when it ran, how it ended, what it said."""

    started: float
    returncode: int
    stdout: str
    stderr: str


@dataclass
class Reader:
    """A thread that runs a reader command every `every_s` seconds until stopped."""

    command: list[str]
    env: dict[str, str]
    every_s: float = 1.0
    polls: list[Poll] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Reader:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.time()
            done = subprocess.run(self.command, cwd=ROOT, env=self.env, capture_output=True,
                                  text=True, timeout=300)  # fmt: skip
            self.polls.append(Poll(started, done.returncode, done.stdout, done.stderr))
            self._stop.wait(max(0.0, self.every_s - (time.time() - started)))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=320)

    @property
    def failures(self) -> list[Poll]:
        return [p for p in self.polls if p.returncode != 0]


GRADED_QUERY = "SELECT run_id, model, case_id, sample_index, graded_at FROM responses"


class Sighting(NamedTuple):
    """When a graded answer was graded and first seen by a reader, as Unix times."""

    graded: float
    seen: float
    """The start of the first poll that saw it: an upper estimate of when it became visible,
    late by as much as a poll takes (a process's start: seconds on a loaded machine)."""
    unseen: float | None
    """The start of the last poll before that one, which did not see it (its query ran after
    it started): the answer was still invisible then. None: the first poll saw it."""

    @property
    def stale_at_least(self) -> float:
        """How long after it was graded the answer was still invisible, for certain: its
        staleness, less at most the time between two polls (0 when no poll proves any)."""
        return 0.0 if self.unseen is None else max(0.0, self.unseen - self.graded)


def first_seen(polls: list[Poll]) -> dict[tuple[str, ...], Sighting]:
    """Each graded answer a `db` reader saw (GRADED_QUERY as CSV): when it was graded, when
    the reader first saw it and when it last did not (Sighting)."""
    seen: dict[tuple[str, ...], Sighting] = {}
    previous: float | None = None
    for poll in polls:
        if poll.returncode != 0:
            continue
        for row in csv.DictReader(io.StringIO(poll.stdout)):
            key = (row["run_id"], row["model"], row["case_id"], row["sample_index"])
            if key not in seen:
                graded = datetime.fromisoformat(row["graded_at"]).timestamp()
                seen[key] = Sighting(graded, poll.started, previous)
        previous = poll.started
    return seen


def lock_holds(lock_log: Path) -> list[dict[str, Any]]:
    """The sessions the processes logged (numerate.store.access.held)."""
    if not lock_log.exists():
        return []
    return [json.loads(line) for line in lock_log.read_text().splitlines() if line.strip()]


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[Any]:
    """A writer process, its output in `log`."""
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=open(log, "w"),
                            stderr=subprocess.STDOUT)  # fmt: skip


def wait_for_file(path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear")
        time.sleep(0.1)
