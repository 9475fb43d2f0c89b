"""NumGen's results as its commands read them: a run's metrics, the confusion matrix stored with
a run, and what a detector's calibration says of the error that is the detector's."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping

import numpy as np
import polars as pl

from numerate.kernel.errors import ConfigError
from numerate.kernel.stats import wilson_interval
from numerate.numgen.metrics import ConfusionMatrix
from numerate.store import queries
from numerate.store.queries import NUMGEN_METRIC_COLUMNS, Source


def metrics_frame(row: Mapping[str, object]) -> pl.DataFrame:
    """One row of metrics (`NumGenScores.as_row()` or a `numgen_metrics` row), shown columns."""
    return pl.DataFrame([{name: row[name] for name in NUMGEN_METRIC_COLUMNS}])


def calibrations_only(source: Source) -> str:
    """What a database without a NumGen benchmark run holds of detector calibrations, as the
    end of a sentence: a finished calibration was said not to be there ("" when none is)."""
    count = queries.numgen_run_count(source, "calibration")
    if not count:
        return ""
    shown = queries.calibrations_shown(shlex.quote(source.path))
    return f"; it holds {count} detector calibration(s): {shown}"


def calibration_note(source: Source, detector: str) -> str:
    """How often the detector counted exactly on synthetic images of known count, or how to
    measure it."""
    correct, n = queries.detector_calibration(source, detector)
    if not n:
        return (
            f"detector {detector} is not calibrated: `numerate numgen calibrate --detector "
            f"{detector}` measures how much of the error is the detector's"
        )
    low, high = wilson_interval(correct, n)
    return (
        f"detector {detector}: {correct / n:.3f} [{low:.3f}, {high:.3f}] exact counts on {n} "
        f"synthetic images of known count (numgen_calibration)"
    )


def run_confusion(source: Source, run_id: str | None) -> tuple[str, str, str, ConfusionMatrix]:
    """The confusion matrix stored with a NumGen run (`run_id`: an id or a unique prefix of
    one; None: the latest), with the run's id, generator and detector."""
    if run_id is not None:
        named = queries.numgen_runs_named(source, run_id)
        if len(named) > 1:
            raise ConfigError(
                f"--run {run_id!r} is ambiguous: it starts {', '.join(named[:5])}; give more"
            )
        run_id = named[0] if named else run_id
    stored = queries.numgen_confusion(source, run_id)
    if stored is None:
        raise ConfigError(f"no NumGen run {run_id!r} with metrics")
    found, generator, detector, confusion = stored
    data = json.loads(confusion)
    counts = np.asarray(data["counts"], dtype=np.int64)
    return found, generator, detector, ConfusionMatrix(tuple(data["targets"]), counts)
