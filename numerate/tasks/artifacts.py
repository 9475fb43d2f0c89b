"""Prefect artifacts of a run: results table, summary, plot link, and progress while it runs."""

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import (
    acreate_link_artifact,
    acreate_markdown_artifact,
    acreate_progress_artifact,
    acreate_table_artifact,
    aupdate_progress_artifact,
)
from prefect.cache_policies import NO_CACHE

from numerate.figures.plots import run_figure_png
from numerate.kernel.confined import LeadsOutside
from numerate.kernel.files import write_atomically
from numerate.kernel.progress import LogProgress
from numerate.kernel.progress import current as current_progress
from numerate.numgen.rows import NumGenResult
from numerate.results.artifacts import (
    artifact_key,
    comparison_lines,
    find_regressions,
    numgen_markdown,
    previous_run,
    results_table,
    run_markdown,
)
from numerate.results.live import plotted_points
from numerate.results.numgen import agreement_markdown
from numerate.store import Store
from numerate.store.queries import run_record


def _draw_plot(store: Store, run_id: str, db: str) -> str | None:
    """The run's plot as a PNG beside the database (plots/<run id>.png), or None when the run
    has no grid point or the database is no file (a lake, `:memory:`: nothing is beside it,
    and the folder the process runs in is no place to write; `numerate plot` draws it)."""
    if store.kept:
        return None
    points = plotted_points(store, run_id)
    if points.is_empty():
        return None
    path = Path(db).resolve().parent / "plots" / f"{run_id}.png"
    write_atomically(path, run_figure_png(points, run_id))
    return str(path)


def _export_view(store: Store, run_id: str, view_dir: str | None) -> str | None:
    """The run's pages of `numerate view` under view_dir/RUN_ID/ (the file of its page), or
    None without a view_dir or when they cannot be written (a convenience, like the plot:
    said in a note, and the run goes on)."""
    if not view_dir:
        return None
    from numerate.view.export import export_run  # jinja2: pages only

    try:
        return str(export_run(store, run_id, Path(view_dir).expanduser().resolve()))
    except (OSError, LeadsOutside) as error:  # LeadsOutside: a link planted at the run's folder
        why: object = error
        if isinstance(error, OSError) and error.strerror:  # the path too: which one failed
            why = f"{error.filename}: {error.strerror}" if error.filename else error.strerror
        current_progress().note(f"run {run_id}: its pages were not written under {view_dir}: {why}")
        return None


def _build(
    run_id: str, db: str, draw: bool, view_dir: str | None, alpha: float
) -> tuple[str, list[dict[str, Any]], str, str | None, str | None]:
    store = Store.open(db)
    run = run_record(store, run_id)
    if run is None:
        raise ValueError(f"no run {run_id!r} in {db}")
    base = previous_run(store, run_id)
    comparison = comparison_lines(store, base, run_id, alpha) if base else []
    try:
        plot = _draw_plot(store, run_id, db) if draw else None
    except OSError:
        plot = None  # a plot is a convenience: the results are stored all the same
    view = _export_view(store, run_id, view_dir)
    return (
        run.sweep,
        results_table(store, run_id),
        run_markdown(store, run_id, db, comparison, plot, view),
        plot,
        view,
    )


@task(cache_policy=NO_CACHE, task_run_name="publish artifacts")
async def publish_run_artifacts(
    run_id: str, db: str, draw: bool = True, view_dir: str | None = None, alpha: float = 0.05
) -> None:
    """The run's results table and summary (with the comparison against the previous run of
    the sweep, at family-wise `alpha`) as Prefect artifacts keyed by the sweep's name, a link
    to its plot (when `draw`), and to its pages of `numerate view` (written under `view_dir`,
    when given)."""
    sweep, table, markdown, plot, view = await asyncio.to_thread(
        _build, run_id, db, draw, view_dir, alpha
    )
    description = f"run {run_id}"
    await acreate_table_artifact(
        table=table, key=artifact_key(sweep, "results"), description=description
    )
    await acreate_markdown_artifact(
        markdown=markdown, key=artifact_key(sweep, "summary"), description=description
    )
    for kind, path in (("plot", plot), ("view", view)):
        if path:
            await acreate_link_artifact(
                link=Path(path).as_uri(), link_text=path, key=artifact_key(sweep, kind),
                description=description,
            )  # fmt: skip


@task(cache_policy=NO_CACHE, task_run_name="publish artifacts")
async def publish_numgen_artifacts(
    run_id: str, db: str, generator: str, detector: str, metrics: NumGenResult
) -> None:
    """A NumGen run's metrics table and summary (with its agreement, when it counted another
    run's images), keyed by generator and detector."""
    agreement = await asyncio.to_thread(agreement_markdown, Store.open(db), run_id)
    table, markdown = numgen_markdown(run_id, db, generator, detector, metrics, agreement)
    name = f"numgen-{generator}-{detector}"
    description = f"NumGen run {run_id}"
    await acreate_table_artifact(
        table=table, key=artifact_key(name, "results"), description=description
    )
    await acreate_markdown_artifact(
        markdown=markdown, key=artifact_key(name, "summary"), description=description
    )


@task(cache_policy=NO_CACHE)
async def regressions(run_id: str, db: str, alpha: float = 0.05) -> list[str]:
    """The model x manifold groups of `run_id` significantly worse than in the previous run of
    its sweep (numerate.results.compare, McNemar with Holm at `alpha`), one line each, after a log
    line saying what the comparison could see; [] without a previous run."""

    def find() -> tuple[str | None, list[str], str]:
        store = Store.open(db)
        base = previous_run(store, run_id)
        return (base, *find_regressions(store, base, run_id, alpha)) if base else (None, [], "")

    base, found, seen = await asyncio.to_thread(find)
    if base:
        get_run_logger().info("regression gate against %s: %s", base, seen)
    return found


@contextlib.asynccontextmanager
async def progress_artifact(name: str, every_s: float = 5.0) -> AsyncIterator[None]:
    """A progress artifact of the flow run, updated every `every_s` seconds from
    numerate.kernel.progress; where no terminal shows progress (a worker), each update is also a
    line in the flow run's log. Its share counts what was planned and done since the block
    began: a process that ran flows before (a notebook, a test session) reports to the same
    progress, and a run that ended short of its total left every later run's artifact short of
    100%. Runs at once in one process (the parts of a distributed sweep) still share one count."""
    logger = get_run_logger()
    artifact = await acreate_progress_artifact(
        progress=0.0, key=artifact_key(name, "progress"), description=f"{name}: requests done"
    )
    earlier = current_progress()
    done_before, total_before = earlier.done, earlier.total

    async def update() -> None:
        progress = current_progress()
        done, total = progress.done, progress.total
        if progress is earlier:
            done, total = done - done_before, total - total_before
        share = 100.0 * done / total if total else 0.0
        await aupdate_progress_artifact(artifact, progress=min(share, 100.0))
        if isinstance(progress, LogProgress) and progress.total:
            logger.info("progress: %s", progress.line())

    async def watch() -> None:
        while True:
            await asyncio.sleep(every_s)
            with contextlib.suppress(Exception):  # progress must never stop the run
                await update()

    watcher = asyncio.create_task(watch())
    try:
        yield
    finally:
        watcher.cancel()
        with contextlib.suppress(BaseException):
            await watcher
        with contextlib.suppress(Exception):
            await update()
