"""Start-up of `numerate run` beside Inspect AI, whole process, against a zero-latency
loopback endpoint, in the same run.

- numerate, 60 requests (20 cases of each manifold):
  - first run: no Prefect server running (numerate starts its background server);
  - later run: the background server left by an earlier command;
  - temporary server (`NUMERATE_SERVER=temporary`: started and stopped by the command);
- numerate, a fully cached re-run of 3,000 cases (`cache: reuse`), background server running;
- Inspect AI 0.3.285, 60 samples (`inspect eval`, `openai-api/fake/fake-model`, 32
  connections), installed by this script in its own virtual environment (bench/.inspect-venv:
  Inspect is not a dependency of numerate).

Targets: first run <= Inspect's time; later run <= 0.6x Inspect's; cached re-run <= 3 s.
Each figure is the median of `--repeats` runs, the kinds taken in turn within each repeat so
that they share the machine's noise. Run with `make bench` or `python bench/startup.py`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
INSPECT_VENV = ROOT / "bench" / ".inspect-venv"
INSPECT_VERSION = "0.3.285"
INSPECT_TASK = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes
from inspect_ai.solver import generate


@task
def count():
    return Task(
        dataset=[Sample(input=f"How many apples are there in {i} bags of 7? Answer: N",
                        target="7") for i in range(60)],
        solver=generate(),
        scorer=includes(),
    )
"""


def config(path: Path, base_url: str, per_manifold: int, name: str, cache: str) -> Path:
    model = {"name": "fake", "model": "fake-model", "base_url": base_url, "cache": cache}
    manifolds = [{"manifold": m, "count": per_manifold} for m in ("objects", "shuffle", "sequence")]
    path.write_text(yaml.safe_dump({"name": name, "seed": 1, "models": [model],
                                    "manifolds": manifolds}))  # fmt: skip
    return path


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    cwd = env.get("BENCH_CWD", str(ROOT))
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return elapsed


def inspect_python() -> Path | None:
    """Inspect AI's own virtual environment, made on first use; None when it cannot be
    installed (no package registry)."""
    python = INSPECT_VENV / "bin" / "python"
    if not python.exists():
        print(f"installing Inspect AI {INSPECT_VERSION} into {INSPECT_VENV} (once) ...")
        subprocess.run([sys.executable, "-m", "venv", str(INSPECT_VENV)], check=True)
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", f"inspect-ai=={INSPECT_VERSION}",
             "openai"], capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            print(f"Inspect AI could not be installed: {done.stderr.strip()[-300:]}")
            return None
    return python


def inspect_command(python: Path, work: Path) -> list[str]:
    (work / "inspect_task.py").write_text(INSPECT_TASK)
    return [str(python.parent / "inspect"), "eval", "inspect_task.py",  # relative: Inspect's rule
            "--model", "openai-api/fake/fake-model", "--max-connections", "32",
            "--display", "none", "--log-dir", str(work / "inspect-logs")]  # fmt: skip


def free_port() -> int:
    from tests.prefect_server import free_port as any_free_port

    return any_free_port()


def measure(args: argparse.Namespace, work: Path, base_url: str) -> dict[str, list[float]]:
    env = dict(os.environ, PREFECT_HOME=str(work / "prefect"), DO_NOT_TRACK="1")
    env.update(PREFECT_SERVER_ANALYTICS_ENABLED="false", NUMERATE_SERVER="background")
    env["PREFECT_SERVER_API_PORT"] = str(free_port())  # never a server left on Prefect's 4200
    env.pop("PREFECT_API_URL", None)
    stop = [sys.executable, "-m", "numerate.cli", "server", "stop", "--force"]
    figures: dict[str, list[float]] = {}
    try:
        run_all(args, work, base_url, figures, env)
    finally:
        subprocess.run(stop, env=env, cwd=ROOT, capture_output=True)
    return figures


def run_all(
    args: argparse.Namespace,
    work: Path,
    base_url: str,
    figures: dict[str, list[float]],
    env: dict[str, str],
) -> None:
    numerate = [sys.executable, "-m", "numerate.cli"]
    run = [*numerate, "run", "--format", "json"]
    small = config(work / "small.yaml", base_url, 20, "small", "resume")
    cached = config(work / "cached.yaml", base_url, 1000, "cached", "reuse")
    stop = [*numerate, "server", "stop", "--force"]
    # a new Prefect home: its database is created (migrations), once per machine
    figures["new home"] = [timed([*run, "--config", str(small), "--db", str(work / "n.db")], env)]
    timed([*run, "--config", str(cached), "--db", str(work / "c.db")], env)  # fills the cache
    python = inspect_python()
    inspect_env = dict(env, FAKE_BASE_URL=base_url, FAKE_API_KEY="none", INSPECT_LOG_LEVEL="error",
                       BENCH_CWD=str(work))  # fmt: skip
    for i in range(args.repeats):
        timed(stop, env)
        kinds = {
            "first": ([*run, "--config", str(small), "--db", str(work / f"f{i}.db")], env),
            "later": ([*run, "--config", str(small), "--db", str(work / f"l{i}.db")], env),
            "cached": ([*run, "--config", str(cached), "--db", str(work / "c.db")], env),
            "temporary": ([*run, "--config", str(small), "--db", str(work / f"t{i}.db")],
                          dict(env, NUMERATE_SERVER="temporary")),
        }  # fmt: skip
        if python is not None:
            kinds["inspect"] = (inspect_command(python, work), inspect_env)
        for kind, (command, kind_env) in kinds.items():
            figures.setdefault(kind, []).append(timed(command, kind_env))


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from tests.fake_openai import spawn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="numerate-bench-startup-"))
    endpoint, base_url = spawn(work, "--fixed")
    try:
        figures = measure(args, work, base_url)
    finally:
        endpoint.kill()
    median = {name: statistics.median(times) for name, times in figures.items()}
    inspect = median.get("inspect")

    def versus(kind: str) -> str:
        return f"  {median[kind] / inspect:.2f}x Inspect's" if inspect else ""

    print(f"whole process, median of {args.repeats} (same machine, same run):")
    print(f"  numerate, 60 requests, first run (server started): {median['first']:5.2f} s"
          f"{versus('first')}  (target <= 1x)")  # fmt: skip
    print(f"  numerate, 60 requests, later run (server running): {median['later']:5.2f} s"
          f"{versus('later')}  (target <= 0.6x)")  # fmt: skip
    print(f"  numerate, 60 requests, temporary server:           {median['temporary']:5.2f} s"
          f"{versus('temporary')}")  # fmt: skip
    print(f"  numerate, 3,000 cached cases, server running:      {median['cached']:5.2f} s"
          "  (target <= 3 s)")  # fmt: skip
    print(f"  numerate, 60 requests, new Prefect home (once):    {median['new home']:5.2f} s")
    if inspect:
        print(f"  Inspect AI {INSPECT_VERSION}, 60 samples:                 {inspect:5.2f} s")


if __name__ == "__main__":
    main()
