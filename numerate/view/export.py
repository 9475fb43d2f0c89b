"""`numerate view --export DIR`: the viewer's pages written as a folder of files that opens
with no server (from a file share, or attached to a Prefect artifact): every run, its
manifolds, every grid point's and curve point's cases, and each run's comparison with the
previous run of its sweep. Links are relative; each page holds all its rows, filtered in the
browser; styles and script are inline, nothing is fetched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from numerate.kernel import stopping
from numerate.kernel.confined import Confined, LeadsOutside
from numerate.kernel.errors import NumerateError, first_line, is_a_stop
from numerate.numgen.metrics import MAX_COUNT
from numerate.store import browse, queries
from numerate.store.queries import Source
from numerate.store.schema import DatabaseFault
from numerate.view import pages
from numerate.view.app import problem_page, templates

__all__ = ["Exported", "export", "export_run"]

Page = tuple[str, str, Callable[[pages.Links], dict[str, Any]]]
"""A file of the export: its path in the folder, its template, and what it shows."""


@dataclass(frozen=True)
class Exported:
    """What an export wrote: how many files, and the pages that could not be shown (each says
    why in place of its content)."""

    paths: tuple[str, ...]
    """Every file written, relative to the folder."""
    unshown: tuple[str, ...] = ()

    @property
    def files(self) -> int:
        return len(self.paths)


def export(
    source: Source,
    folder: Path,
    environment: jinja2.Environment,
    progress: Callable[[str], None] = lambda path: None,
    only: Sequence[str] = (),
    between: Callable[[], object] = lambda: None,
    warn: Callable[[str], None] = lambda said: None,
    under: str = "",
) -> Exported:
    """Write every page of `source` under `folder` (only those of the runs `only` and their
    comparison, when given: no NumGen run then). `between` runs before each page (a reader
    lets waiting writers in there). A page that cannot be built from what is stored now (a
    live run's manifold before its first grid point is summed up) says so, as the server's
    page would; so does one that fails otherwise, and the export goes on. The database
    itself failing (gone, busy past the bound) stops it. Nothing is written through a link
    planted in the folder (numerate.kernel.confined): a link at a page's name is replaced,
    one at a folder's is LeadsOutside; an image that is a link is left out (`warn`). With
    `under`, the pages go into that folder of `folder`, reached through no link either."""
    folder.mkdir(parents=True, exist_ok=True)
    confined = Confined(folder)
    written: list[str] = []
    unshown: list[str] = []
    chosen = frozenset(only) or None
    named = Path(source.path).name  # pages that travel (a shared mount) name no folder of ours
    for path, template, build in _pages(source, chosen):
        between()
        links = pages.StaticLinks(path, chosen)
        try:
            shown = environment.get_template(template).render(
                db=named, links=links, exported=named, **build(links)
            )
        except LookupError as error:
            shown = problem_page(environment, links, str(error).strip("'\""), 404)
        except DatabaseFault as error:  # what this page reads is damaged: the page says so
            message = f"the results database could not answer this page: {error}"
            shown = problem_page(environment, links, message, 500)
            unshown.append(path)
        except NumerateError:  # the database itself (gone, busy past the bound)
            raise
        except BaseException as error:  # a polars panic too
            if is_a_stop(error):
                raise
            if stopping.asked():  # the stop interrupted its query ("Query interrupted"): the
                raise KeyboardInterrupt from error  # export is stopped, not a page unshown
            message = f"could not show this page: {first_line(error)}"
            shown = problem_page(environment, links, message, 500)
            unshown.append(path)
        confined.write(f"{under}/{path}" if under else path, shown.encode())
        written.append(path)
        progress(path)
    answers = write_answers(source, confined, under, chosen)
    images = copy_images(source, confined, warn) if chosen is None else []
    return Exported(tuple(written + answers + images), tuple(unshown))


def write_answers(
    source: Source, folder: Confined, under: str, only: frozenset[str] | None
) -> list[str]:
    """The whole text of each answer the pages show folded (browse.LIST_FOLD), where their
    links lead (pages.answer_file); the files written, relative to the folder."""
    written = []
    for run_id in queries.run_ids_starting(source, "", limit=10**9):
        if only is not None and run_id not in only:
            continue
        for model, case_id, sample in browse.folded_answers(source, run_id):
            text = browse.answer_text(source, run_id, model, case_id, sample)
            path = pages.answer_file(run_id, model, case_id, sample)
            folder.write(f"{under}/{path}" if under else path, (text or "").encode())
            written.append(path)
    return written


def _pages(source: Source, only: frozenset[str] | None) -> Iterator[Page]:
    yield "index.html", "runs.html", lambda links: pages.runs(source, links, 1, "", "", "")
    for run_id in queries.run_ids_starting(source, "", limit=10**9):
        if only is None or run_id in only:
            yield from _run_pages(source, run_id, only)
    if only is not None:
        return
    yield "numgen/index.html", "numgen_runs.html", lambda links: pages.numgen_runs(source, links)
    for run in browse.numgen_runs(source)["run_id"].to_list():
        yield from _numgen_pages(source, run)


def _numgen_pages(source: Source, run_id: str) -> Iterator[Page]:
    home = pages.StaticLinks("")
    yield (
        _file(home.numgen(run_id)), "numgen_run.html",
        lambda links: pages.numgen_run(source, links, run_id),
    )  # fmt: skip
    cells = sorted({(t, c) for t, c, _, _ in queries.numgen_counts(source, run_id)}, key=str)
    for target, count in cells:
        shown = count if count is None else min(count, MAX_COUNT)
        yield (
            _file(home.numgen_cell(run_id, target, shown)), "numgen_cell.html",
            _bind(pages.numgen_cell, source, run_id, target, shown, 1),
        )  # fmt: skip


def copy_images(
    source: Source, folder: Confined, warn: Callable[[str], None] = lambda said: None
) -> list[str]:
    """The images of every NumGen run (and their annotated copies) into the export, where its
    pages link to them (the files written, relative to the folder); an image whose file is
    gone, or that is no image (numerate.view.pages.image_bytes), is left out, and one that is
    a symbolic link, or no longer the image the run made (another image copied over it), is
    left out with a warning (`warn`)."""
    copied: list[str] = []
    for run_id in browse.numgen_runs(source)["run_id"].to_list():
        images = pages.images_folder(source, run_id)
        for prompt_id, *found_files in browse.numgen_image_files(source, run_id):
            for annotated, found in zip((False, True), found_files, strict=True):
                try:
                    content = pages.image_bytes(images, *found) if found else None
                except (LeadsOutside, pages.ReplacedImage) as refused:
                    warn(f"image not copied: {refused}")
                    continue
                if content is None:
                    continue
                name = pages.image_file(run_id, prompt_id, annotated)
                folder.write(name, content)
                copied.append(name)
    return copied


def _run_pages(source: Source, run_id: str, only: frozenset[str] | None) -> Iterator[Page]:
    home = pages.StaticLinks("")
    yield _file(home.run(run_id)), "run.html", lambda links: pages.run(source, links, run_id)
    previous = queries.previous_run(source, run_id)
    if previous is not None and (only is None or previous in only):
        yield (
            _file(home.compare(previous, run_id)), "compare.html",
            lambda links: pages.comparison(source, links, previous, run_id, 1, 1),
        )  # fmt: skip
    for name in queries.answered(source, run_id, "manifold"):
        yield (
            _file(home.manifold(run_id, name)),
            "manifold.html",
            _bind(pages.manifold, source, run_id, name),
        )
        for model in queries.answered(source, run_id, "model"):
            yield from _cases_pages(source, run_id, name, model)


def _cases_pages(source: Source, run_id: str, name: str, model: str) -> Iterator[Page]:
    for query in pages.case_pages(source, run_id, name, model):
        chosen = pages.CaseFilter(
            model=model, point=query.get("point"), parameter=query.get("x"), level=query.get("v")
        )
        path = pages.cases_file(run_id, name, **query)
        yield path, "cases.html", _bind(pages.cases, source, run_id, name, chosen)


def _bind(build: Callable[..., dict[str, Any]], source: Source, *args: Any) -> Any:
    return lambda links: build(source, links, *args)


def _file(link: str) -> str:
    return link.split("#", 1)[0]


def export_run(source: Source, run_id: str, folder: Path) -> Path:
    """A run's pages (and those of the run it is compared with, and their comparison) under
    folder/RUN_ID/, for its summary artifact; the file of the run's page."""
    previous = queries.previous_run(source, run_id)
    chosen = [run_id, *([previous] if previous else [])]
    export(source, folder, templates(), only=chosen, under=pages.slug(run_id))
    return folder / pages.slug(run_id) / pages.StaticLinks("").run(run_id)
