"""Results from several workers or machines: Parquet shards in a shared location.

DuckDB has one writing process. A run on another worker writes its own database, then
publishes its rows as Parquet files to a results location (a folder or any fsspec URL:
s3://..., gs://..., an NFS path); one ingest step loads every complete, not yet ingested run
into the central database. A run's folder is complete when its `_SUCCESS` marker exists: the
marker is written last, and every file is written under a temporary name and then renamed.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from kernel.errors import ConfigError
from numerate.schema import OPTIONAL_SHARD_TABLES, SHARD_TABLES
from numerate.store import Store

SUCCESS = "_SUCCESS"


def _filesystem(results_dir: str) -> tuple[Any, str]:
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(results_dir)
    except (ImportError, ValueError) as error:
        raise ConfigError(f"results location {results_dir!r}: {error}") from None
    return fs, root.rstrip("/")


def publish_run(store: Store, run_id: str, results_dir: str) -> str:
    """Export a run's rows to `<results_dir>/<run_id>/`; returns that folder."""
    fs, root = _filesystem(results_dir)
    folder = f"{root}/{run_id}"
    with tempfile.TemporaryDirectory(prefix="numerate-shards-") as local:
        files = store.export_run(run_id, local)
        fs.makedirs(folder, exist_ok=True)
        for path in files:
            name = Path(path).name
            fs.put_file(path, f"{folder}/{name}.partial")
            fs.mv(f"{folder}/{name}.partial", f"{folder}/{name}")
        fs.pipe_file(f"{folder}/{SUCCESS}", b"")
    return folder


def check_writable(results_dir: str) -> None:
    """Raise ConfigError unless shards can be published to `results_dir` (checked before a
    run starts, so that a finished run never fails to publish)."""
    fs, root = _filesystem(results_dir)
    probe = f"{root}/.numerate-write-check"
    try:
        fs.makedirs(root, exist_ok=True)
        fs.pipe_file(probe, b"")
        fs.rm(probe)
    except OSError as error:
        reason = error.strerror or str(error)
        raise ConfigError(f"results_dir {results_dir!r} cannot be written: {reason}") from None


def complete_runs(results_dir: str) -> list[str]:
    """Run ids whose shards are complete in the results location, sorted."""
    fs, root = _filesystem(results_dir)
    if not fs.exists(root):
        raise ConfigError(f"no results location at {results_dir}")
    if not fs.isdir(root):
        raise ConfigError(f"results location {results_dir} is a file, not a folder of run shards")
    runs = []
    for entry in fs.ls(root, detail=False):
        if fs.exists(f"{entry}/{SUCCESS}"):
            runs.append(PurePosixPath(entry).name)
    return sorted(runs)


@dataclass
class Ingested:
    """What an ingest did: the runs it loaded, and those it skipped with why."""

    loaded: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def ingest(store: Store, results_dir: str) -> Ingested:
    """Load every complete run not ingested yet. A run whose shards cannot be read (a file
    missing or truncated) is skipped, named with why, and the others are loaded; nothing of a
    skipped run is written, so the next ingest tries it again."""
    import duckdb

    fs, root = _filesystem(results_dir)
    done = Ingested()
    for run_id in complete_runs(results_dir):
        if store.ingested(run_id):
            continue
        with tempfile.TemporaryDirectory(prefix="numerate-ingest-") as local:
            try:
                for table in SHARD_TABLES:
                    shard = f"{root}/{run_id}/{table}.parquet"
                    if table in OPTIONAL_SHARD_TABLES and not fs.exists(shard):
                        continue  # published before the table existed
                    fs.get_file(shard, f"{local}/{table}.parquet")
                store.ingest_run(run_id, local, source=f"{results_dir.rstrip('/')}/{run_id}")
            except (OSError, duckdb.Error) as error:
                reason = str(error).splitlines()[0] if str(error) else type(error).__name__
                done.skipped.append((run_id, reason[:300]))
                continue
        done.loaded.append(run_id)
    return done
