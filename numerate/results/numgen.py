"""NumGen's results as its commands read them: a run's metrics, the confusion matrix stored with
a run, and what a detector's calibration says of the error that is the detector's."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping

import numpy as np
import polars as pl

from numerate.kernel.errors import ConfigError, some_of
from numerate.kernel.stats import wilson_interval
from numerate.numgen.agreement import Agreement, agreement, most_apart
from numerate.numgen.metrics import ConfusionMatrix
from numerate.results.report import Format, render
from numerate.results.runs import refuse_blank
from numerate.store import queries
from numerate.store.queries import NUMGEN_METRIC_COLUMNS, Source

LEADERBOARD_COLUMNS = {
    "model": "Model",
    "accuracy": "Accuracy",
    "mwe": "MWE",
    "counting_level": "Counting Level",
    "webers_law": "Weber's Law",
}
"""The NumGen leaderboard's columns as the reference names them."""


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


def one_run(source: Source, text: str, option: str) -> str:
    """The NumGen run with metrics that `text` names (an id, a unique prefix of one, latest or
    previous of the benchmark runs); ConfigError naming `option` when it names none or
    several, or nothing (`numgen recount ""` took an empty prefix for every run's)."""
    refuse_blank(text, option)
    named = queries.numgen_runs_named(source, text)
    if len(named) > 1:
        raise ConfigError(
            f"{option} {text!r} is ambiguous: it starts {some_of(named, 5, whole=False)}; give more"
        )
    if not named:
        if text.strip() in ("latest", "previous"):  # of the benchmark runs only
            raise ConfigError(
                f"{option} {text!r}: no NumGen benchmark run ended with its metrics in "
                f"{source.path}{calibrations_only(source)}"
            )
        stored = queries.numgen_run_config(source, text.strip())
        if stored is not None:  # said as none: a run that failed, or was interrupted
            raise ConfigError(
                f"{option} {text!r}: that NumGen run has no metrics (its status: {stored[1]}; "
                "`numerate numgen report` lists the runs with them)"
            )
        raise ConfigError(f"{option} {text!r}: no NumGen run with metrics in {source.path} "
                          "(`numerate numgen report` lists them)")  # fmt: skip
    return named[0]


def run_confusion(source: Source, run_id: str | None) -> tuple[str, str, str, ConfusionMatrix]:
    """The confusion matrix stored with a NumGen run (`run_id`: as `one_run` takes it; None:
    the latest benchmark run), with the run's id, generator and detector."""
    run_id = one_run(source, "latest" if run_id is None else run_id, "--run")
    stored = queries.numgen_confusion(source, run_id)
    if stored is None:  # its metrics removed since `one_run` found them
        raise ConfigError(f"no NumGen run {run_id!r} with metrics")
    found, generator, detector, confusion = stored
    data = json.loads(confusion)
    counts = np.asarray(data["counts"], dtype=np.int64)
    return found, generator, detector, ConfusionMatrix(tuple(data["targets"]), counts)


def run_agreement(
    source: Source, run_id: str, limit: int = 10
) -> tuple[queries.CountedTwice, Agreement, pl.DataFrame] | None:
    """How the counter of run `run_id` agrees with the counter of the run whose images it
    counted: both counts, the agreement, and the `limit` images on which they differ most
    (prompt id, target, the source run's count `counted first`, this run's `counted again`,
    path); None for a run of its own."""
    twice = queries.numgen_counted_twice(source, run_id)
    if twice is None:
        return None
    found = agreement(twice.source_counts, twice.counts)
    where = {p: (t, path) for p, t, path in zip(twice.prompt_ids, twice.targets, twice.paths,
                                                strict=True)}  # fmt: skip
    apart = [
        {"prompt_id": key, "target": where[key][0], "counted first": first,
         "counted again": second, "path": where[key][1]}
        for key, first, second in most_apart(twice.prompt_ids, twice.source_counts, twice.counts,
                                             limit)
    ]  # fmt: skip
    return twice, found, pl.DataFrame(apart)


def agreement_frame(source: Source, run_ids: list[str]) -> pl.DataFrame:
    """One row per linked run: the two counters, the images both counted, exact agreement with
    its 95% interval, the weighted kappa, the images one left uncounted, and each counter's
    exact counts on synthetic images of known count (its calibration: which one to trust)."""
    shown = []
    for run_id in run_ids:
        found = run_agreement(source, run_id, 0)
        if found is None:
            continue
        twice, figures, _ = found
        shown.append({
            "run": run_id, "counts the images of": twice.source_run_id,
            "counter": twice.detector, "against": twice.source_detector, "n": figures.n,
            "agreement": figures.rate, "ci_low": figures.ci_low, "ci_high": figures.ci_high,
            "kappa": figures.kappa, "uncounted": figures.uncounted,
            "counter calibrated": _calibrated(source, twice.detector),
            "against calibrated": _calibrated(source, twice.source_detector),
        })  # fmt: skip
    return pl.DataFrame(shown)


def trust_frame(source: Source, first: str, second: str) -> pl.DataFrame:
    """Number by number, each counter's exact counts on its calibration (synthetic images of
    known count) and the one to trust there: the one whose 95% interval lies above the
    other's, else `either` (their intervals overlap: the calibration cannot tell). Empty
    unless both counters are calibrated."""
    ones, others = (queries.calibration_by_target(source, name) for name in (first, second))
    shown = []
    for target in sorted(set(ones) & set(others)):
        (a, n_a), (b, n_b) = ones[target], others[target]
        low_a, high_a = wilson_interval(a, n_a)
        low_b, high_b = wilson_interval(b, n_b)
        trust = first if low_a > high_b else second if low_b > high_a else "either"
        shown.append({"target": target, first: a / n_a, second: b / n_b, "trust": trust})
    return pl.DataFrame(shown)


def _calibrated(source: Source, detector: str) -> float | None:
    """A counter's exact-count rate on its latest calibration (None: not calibrated)."""
    correct, n = queries.detector_calibration(source, detector)
    return correct / n if n else None


def uncounted_line(result: Mapping[str, object]) -> str:
    """The images of a run without a count, by why: failed (not made, unreadable, the counter
    failed), refused by the generator's service, or an answer that held no count."""
    refused, unparsed = result.get("refused"), result.get("unparsed")
    return (
        f"images without a count: {result['errors']} failed"
        + (f", {refused} refused by the service" if refused else "")
        + (f", {unparsed} with no count in the counter's answer" if unparsed else "")
        + "\n"
    )


def run_text(source: Source, result: Mapping[str, object], generator: str, counter: str) -> str:
    """A run just made, as `numgen run` shows it: its metrics as stored, the images without a
    count, its heatmap and its counter's calibration."""
    row = queries.numgen_metrics(source, str(result["run_id"]))
    if row is None:
        raise ConfigError(f"run {result['run_id']} stored no metrics")
    title = f"{generator} / {counter}: run {result['run_id']}"
    shown = render(metrics_frame(row), "table", title=title) + uncounted_line(result)
    shown += f"confusion matrix heatmap: {result['heatmap']}\n"
    if counter not in ("none", "blobs"):
        shown += calibration_note(source, counter) + "\n"
    return shown


def recounts_text(source: Source, recounts: list[Mapping[str, object]]) -> str:
    """The runs that counted a run's images again: each one's metrics, then how the counters
    agree ("" without one)."""
    shown = ""
    for recount in recounts:
        row = queries.numgen_metrics(source, str(recount["run_id"])) or dict(recount)
        title = f"counted again by {recount['detector']}: run {recount['run_id']}"
        shown += render(metrics_frame(row), "table", title=title) + uncounted_line(recount)
    runs = [str(recount["run_id"]) for recount in recounts]
    if runs:
        shown += render(agreement_frame(source, runs), "table", title="agreement of the counters")
    return shown


def agreement_text(source: Source, fmt: Format) -> str:
    """The newest runs that counted another run's images: how their counters agree, and the
    images on which the newest pair differs most ("" when no run did)."""
    linked = queries.numgen_linked_runs(source, 10)
    if not linked:
        return ""
    shown = render(agreement_frame(source, linked), fmt, title="agreement of the counters")
    found = run_agreement(source, linked[0])
    if found and found[0].detector != found[0].source_detector:
        twice = found[0]
        trust = trust_frame(source, twice.source_detector, twice.detector)
        if trust.height:
            title = "which counter to trust, number by number (exact counts on calibration)"
            shown += render(trust, fmt, title=title)
    if found and found[2].height:
        twice = found[0]
        title = (f"images counted most apart: first by {twice.source_detector} (run "
                 f"{twice.source_run_id}), again by {twice.detector} "
                 f"(run {linked[0]})")  # fmt: skip
        shown += render(found[2], fmt, title=title)
    return shown


def agreement_markdown(source: Source, run_id: str) -> str:
    """A linked run's agreement with the run whose images it counted, as Markdown for its
    Prefect artifact ("" for a run of its own)."""
    found = run_agreement(source, run_id)
    if found is None:
        return ""
    twice, figures, apart = found
    kappa = "undefined" if figures.kappa is None else f"{figures.kappa:.3f}"
    rate = "-" if figures.rate is None else f"{figures.rate:.3f}"
    lines = [
        "", f"## Agreement with run `{twice.source_run_id}` ({twice.source_detector})", "",
        f"- exact agreement: {rate} [{figures.ci_low:.3f}, {figures.ci_high:.3f}] over "
        f"{figures.n} images both counted ({figures.uncounted} left out: one gave no count)",
        f"- weighted kappa (quadratic): {kappa}", "",
    ]  # fmt: skip
    if apart.height:
        lines.append(render(apart, "markdown", title="images counted most apart"))
    return "\n".join(lines) + "\n"
