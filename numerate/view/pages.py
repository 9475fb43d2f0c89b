"""What each page of `numerate view` shows, read from a results database (a `Source`) and
prepared for its template: runs, a run, a manifold, a grid point's cases, a case, a comparison.
No HTTP here (numerate.view.app) and no SQL (numerate.store.browse and queries).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import polars as pl

from numerate.figures.prepare import curve_points, grid_parameters, heatmap, level_label
from numerate.kernel.confined import LINK, Confined, LeadsOutside
from numerate.kernel.errors import ConfigError
from numerate.kernel.files import not_as_recorded, slug
from numerate.numgen.metrics import MAX_COUNT
from numerate.results import live
from numerate.results.compare import compare_stored, for_display, summary_line
from numerate.results.numgen import run_agreement
from numerate.results.runs import resolve_run
from numerate.results.tokens import budget_curves, budget_table
from numerate.store import browse, queries
from numerate.store.queries import POOLED, Source
from numerate.store.schema import RUN_STATUSES, DatabaseFault
from numerate.view.svg import PALETTE, budget_svg, curve_svg, heat_color

__all__ = [
    "PAGE_SIZE",
    "Links",
    "StaticLinks",
    "case",
    "cases",
    "comparison",
    "manifold",
    "run",
    "runs",
]

PAGE_SIZE = 50
"""Rows per page of every list."""

SHOWN_STATUSES = (*RUN_STATUSES, browse.STOPPED)
"""A run's statuses as the pages show them and their filter chooses them."""


class Links:
    """Addresses of the pages on the live server (`numerate view`); StaticLinks gives those of
    an export's files. Templates make every link through one."""

    static = False
    page_size = PAGE_SIZE
    numgen_pages = True

    def includes(self, run_id: str) -> bool:
        """Whether run `run_id` has pages here (an export of some runs has not every run's)."""
        return True

    def runs(self, **query: object) -> str:
        return "/" + _query(query)

    def run(self, run_id: str) -> str:
        return f"/run/{quote(run_id, safe='')}"

    def manifold(self, run_id: str, manifold: str) -> str:
        return f"{self.run(run_id)}/manifold/{quote(manifold, safe='')}"

    def cases(self, run_id: str, manifold: str, **query: object) -> str:
        return f"{self.run(run_id)}/cases/{quote(manifold, safe='')}" + _query(query)

    def case(self, run_id: str, model: str, case_id: str, manifold: str, point_key: str) -> str:
        return f"{self.run(run_id)}/case" + _query({"model": model, "id": case_id})

    def answer(self, run_id: str, model: str, case_id: str, sample: int) -> str:
        """The whole text of one answer, as a download."""
        query = {"model": model, "id": case_id, "sample": sample}
        return f"{self.run(run_id)}/answer" + _query(query)

    def compare(self, base: str, new: str, **query: object) -> str:
        return "/compare" + _query({"base": base, "new": new, **query})

    def numgen(self, run_id: str | None = None) -> str:
        return "/numgen" + (f"/{quote(run_id, safe='')}" if run_id else "")

    def numgen_cell(self, run_id: str, target: int, count: int | None) -> str:
        shown = "none" if count is None else count
        return f"{self.numgen(run_id)}/cell" + _query({"target": target, "count": shown})

    def image(self, run_id: str, prompt_id: str, annotated: bool) -> str:
        address = f"{self.numgen(run_id)}/image/{quote(prompt_id, safe='')}"
        return address + ("?annotated=1" if annotated else "")


class StaticLinks(Links):
    """Addresses of an export's files (`numerate view --export`), relative to the page `here`
    (a path inside the export): the folder opens from a file share, with no server. A page
    holds all its rows (no pagination); the filters run in the browser."""

    static = True
    page_size = 10**9

    def __init__(self, here: str, only: frozenset[str] | None = None) -> None:
        self.here = here
        self.only = only
        self.numgen_pages = only is None  # an export of some runs has no NumGen page

    def includes(self, run_id: str) -> bool:
        return self.only is None or run_id in self.only

    def _to(self, path: str) -> str:
        return posixpath.relpath(path, posixpath.dirname(self.here) or ".")

    def runs(self, **query: object) -> str:
        return self._to("index.html")

    def run(self, run_id: str) -> str:
        return self._to(f"runs/{slug(run_id)}/index.html")

    def manifold(self, run_id: str, manifold: str) -> str:
        return self._to(f"runs/{slug(run_id)}/{slug(manifold)}.html")

    def cases(self, run_id: str, manifold: str, **query: object) -> str:
        return self._to(cases_file(run_id, manifold, **query))

    def case(self, run_id: str, model: str, case_id: str, manifold: str, point_key: str) -> str:
        page = self.cases(run_id, manifold, model=model, point=point_key)
        return f"{page}#case-{slug(case_id)}"

    def answer(self, run_id: str, model: str, case_id: str, sample: int) -> str:
        return self._to(answer_file(run_id, model, case_id, sample))

    def compare(self, base: str, new: str, **query: object) -> str:
        return self._to(f"compare/{slug(base)}--{slug(new)}.html")

    def numgen(self, run_id: str | None = None) -> str:
        return self._to(f"numgen/{slug(run_id)}/index.html" if run_id else "numgen/index.html")

    def numgen_cell(self, run_id: str, target: int, count: int | None) -> str:
        return self._to(f"numgen/{slug(run_id)}/{target}-{'none' if count is None else count}.html")

    def image(self, run_id: str, prompt_id: str, annotated: bool) -> str:
        return self._to(image_file(run_id, prompt_id, annotated))


IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg",
               ".webp": "image/webp"}  # fmt: skip
"""The only files the viewer serves or exports besides its pages: NumGen images, by suffix."""


IMAGE_MAGIC = {".png": (b"\x89PNG\r\n\x1a\n",), ".jpg": (b"\xff\xd8\xff",),
               ".jpeg": (b"\xff\xd8\xff",), ".webp": (b"RIFF",)}  # fmt: skip
"""How each kind of image begins: a file that does not is not served as one."""

MAX_IMAGE_BYTES = 64 * 1024 * 1024
"""The largest image the viewer serves or exports (a generated image is a few MB at most)."""


def images_folder(source: Source, run_id: str) -> Confined | None:
    """The images folder of a NumGen run (`<images_dir>`), below which nothing it serves of
    the run may leave `images/` (numerate.kernel.confined: no link followed, `images`
    included), or None when the run recorded no image."""
    folder = browse.numgen_images_folder(source, run_id)
    return Confined(folder) if folder else None


def image_name(folder: Confined | None, recorded: str | None) -> str | None:
    """The name under the run's images folder of a recorded image the viewer may show: one
    with an image suffix (IMAGE_TYPES) that lies under the folder; None for anything else (a
    path the database was made to hold)."""
    if folder is None or not recorded or Path(recorded).suffix.lower() not in IMAGE_TYPES:
        return None
    return browse.image_below(str(folder.folder), recorded)


def image_problem(
    folder: Confined | None, recorded: str | None, sha256: str | None = None
) -> str | None:
    """Why a recorded image cannot be shown, in words (None: it can: a regular file under the
    run's images folder, reached through no symbolic link, which `image_bytes` reads, and
    the image the run made where its SHA-256 is given). An images folder that is a link to
    another disk is named as one, not called missing."""
    name = image_name(folder, recorded)
    if name is None or folder is None:
        return "no image file is recorded under the run's images folder"
    problem = folder.file_problem(name)
    if problem == "not there":
        return "the file is missing (the database records it; it was moved or removed)"
    if problem is not None and problem.endswith(LINK):  # its name below the run's folder
        return f"{problem}, which numerate view does not follow"  # only: an export may be
    if problem is not None:  # shared
        return problem
    try:  # read whole where its SHA-256 is known, else its first bytes
        shown = image_bytes(folder, recorded, sha256, head=not sha256)
    except (ReplacedImage, LeadsOutside) as refused:
        return f"{refused}, which numerate view does not show"
    if shown is None:
        kind = Path(name).suffix.lower().lstrip(".").upper()
        return (
            f"{name}: no {kind} image (replaced since it was made?), which numerate view does "
            "not show"
        )
    return None


class ReplacedImage(ValueError):
    """A recorded image whose file is no longer the image the run made (by its SHA-256): the
    viewer would show another image than the one the detector counted."""


def image_bytes(
    folder: Confined | None, recorded: str | None, sha256: str | None = None, head: bool = False
) -> bytes | None:
    """A recorded image's content, when it is one the viewer may show: under the run's
    images folder, read without following a link, no larger than MAX_IMAGE_BYTES and
    beginning as its kind of image does; None when it is not there or is no image.
    LeadsOutside when it, or a folder on its way, is a symbolic link (an image replaced by a
    link to /etc/passwd was served as one); ReplacedImage when its content is not what
    `sha256` (recorded as the run made it) says. With `head`, its first bytes only (what
    says its kind). No other file is ever read."""
    name = image_name(folder, recorded)
    if name is None or folder is None:
        return None
    try:
        content = folder.read_bytes(name, 16 if head else MAX_IMAGE_BYTES, head=head)
    except (OSError, ValueError):
        return None
    if not content.startswith(IMAGE_MAGIC[Path(name).suffix.lower()]):
        return None
    changed = not_as_recorded(content, sha256)
    if changed:
        raise ReplacedImage(f"{name}: not the image the run made ({changed})")
    return content


def image_file(run_id: str, prompt_id: str, annotated: bool) -> str:
    """The export's copy of a NumGen image."""
    kind = "annotated" if annotated else "images"
    return f"numgen/{slug(run_id)}/{kind}/{slug(prompt_id)}.png"


def answer_file(run_id: str, model: str, case_id: str, sample: int) -> str:
    """The export's file of an answer its pages show folded."""
    return f"runs/{slug(run_id)}/answers/{slug(model)}/{slug(case_id)}-{sample}.txt"


def cases_file(run_id: str, manifold: str, **query: object) -> str:
    """The export's file of a cases page: one per model and grid point (or curve point)."""
    keys = ("model", "point", "x", "v")
    digest = hashlib.sha256(json.dumps([manifold, *(query.get(k) for k in keys)]).encode())
    return (
        f"runs/{slug(run_id)}/cases/{slug(str(query.get('model')))}-{digest.hexdigest()[:12]}.html"
    )


def _query(values: dict[str, object]) -> str:
    """A query string of the values given (none for None or "", none for page 1)."""
    kept = {k: v for k, v in values.items() if v not in (None, "") and (k, v) != ("page", 1)}
    return "?" + urlencode(kept) if kept else ""


@dataclass(frozen=True)
class Pager:
    page: int
    pages: int
    total: int
    size: int = PAGE_SIZE

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.size


def pager(page: int, total: int, size: int = PAGE_SIZE) -> Pager:
    pages = max(1, math.ceil(total / size))
    return Pager(min(max(page, 1), pages), pages, total, size)


def paged(
    fetch: Callable[[int, int], tuple[pl.DataFrame, int]], page: int, size: int
) -> tuple[pl.DataFrame, Pager]:
    """`fetch(offset, size)`: page `page` of `size` rows, or the last page when there are
    fewer."""
    page = max(page, 1)
    frame, total = fetch((page - 1) * size, size)
    at = pager(page, total, size)
    if at.page != page:
        frame, total = fetch(at.offset, size)
    return frame, at


def rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    return list(frame.iter_rows(named=True))


def runs(
    source: Source, links: Links, page: int, sweep: str, status: str, text: str
) -> dict[str, Any]:
    """The runs, newest first, a page of them; `live`: some run is still going. A `status`
    that is none is a ConfigError (it listed no run, as if there were none)."""
    if status and status not in SHOWN_STATUSES:
        raise ConfigError(f"status {status!r}: choose {', '.join(SHOWN_STATUSES)}")
    fetch = functools.partial(
        browse.runs_page, source, sweep=sweep or None, status=status or None, text=text or None
    )
    frame, at = paged(fetch, page, links.page_size)
    listed = [row for row in rows(frame) if links.includes(row["id"])]
    if links.static:  # an export lists the runs it has pages of, all on one page
        at = pager(1, len(listed), links.page_size)
    for row in listed:
        row["link"] = links.run(row["id"])
    return {
        "runs": listed, "pager": at, "sweep": sweep, "status": status, "q": text,
        "statuses": SHOWN_STATUSES,
        "live": any(row["status"] == "running" for row in listed),
        "page_link": lambda page: links.runs(page=page, q=text, sweep=sweep, status=status),
    }  # fmt: skip


def named_run(source: Source, text: str) -> str | None:
    """The full id of the sweep run `text` names as the commands take it (`latest`,
    `previous`, a unique prefix of an id), when that is not `text` itself; None when `text`
    is an id. LookupError, in the commands' words, when it names no run or several (a prefix
    that several runs begin with was "no run", as if they were gone)."""
    try:
        found = resolve_run(source, text)
    except ConfigError as error:
        raise LookupError(str(error)) from None
    return found if found != text else None


def require_run(source: Source, run_id: str) -> queries.RunRecord:
    """The run's record, its status as it is now (queries.current_run); LookupError when
    there is no such run."""
    record = queries.current_run(source, run_id)
    if record is None:
        raise LookupError(f"no run {run_id!r} in {source.path}")
    return record


def run(source: Source, links: Links, run_id: str) -> dict[str, Any]:
    """A run: its leaderboard (models x manifolds, pooled first), each model's part, and, while
    it is going, its answers so far by outcome."""
    record = require_run(source, run_id)
    previous = queries.previous_run(source, run_id)
    summary = rows(live.summaries(source, run_id))
    manifolds = sorted({row["manifold"] for row in summary if row["manifold"] != POOLED})
    board: dict[str, dict[str, Any]] = {}
    for row in summary:
        board.setdefault(row["model"], {})[row["manifold"]] = row
    counts = rows(browse.outcome_counts(source, run_id))
    if not manifolds:
        manifolds = sorted({row["manifold"] for row in counts})
    so_far: dict[tuple[str, str], dict[str, int]] = {}
    for row in counts:
        so_far.setdefault((row["model"], row["manifold"]), {})[row["outcome"]] = row["n"]
    models = sorted(set(board) | {model for model, _ in so_far})
    return {
        "record": record, "manifolds": manifolds, "models": models, "board": board,
        "tokens": tokens_panel(source, links, run_id),
        "pooled": POOLED, "parts": queries.run_parts(source, run_id), "so_far": so_far,
        "outcomes": browse.OUTCOMES, "live": record.status == "running",
        "manifold_links": {m: links.manifold(run_id, m) for m in manifolds},
        "previous": previous if previous and links.includes(previous) else None,
    }  # fmt: skip


def manifold(source: Source, links: Links, run_id: str, name: str) -> dict[str, Any]:
    """A manifold of a run: accuracy by each grid parameter (a curve per model, with intervals)
    and the heatmap of every grid point; each point and cell links to its cases."""
    record = require_run(source, run_id)
    points = live.plotted_points(source, run_id).filter(pl.col("manifold") == name)
    if points.is_empty():
        raise LookupError(f"run {run_id} has no grid point of manifold {name!r} (yet)")
    grid = grid_parameters(points).get(name, [])
    models = sorted(set(points["model"]))
    colors = {model: PALETTE[i % len(PALETTE)] for i, model in enumerate(models)}
    curves = []
    for parameter in grid:
        curve = curve_points(points, {name: parameter})

        def link(model: str, level: str, parameter: str = parameter) -> str:
            return links.cases(run_id, name, model=model, x=parameter, v=level)

        curves.append({"parameter": parameter, "svg": curve_svg(curve, parameter, colors, link)})
    prepared = heatmap(points, grid)
    cells = {}
    for model in prepared.models:
        for key in prepared.keys:
            accuracy, _correct, scored = prepared.cells.get((model, key), (None, 0, 0))
            cells[(model, key)] = {
                "accuracy": accuracy, "color": heat_color(accuracy), "n": scored,
                "link": links.cases(run_id, name, model=model, point=key),
            }  # fmt: skip
    return {
        "record": record, "manifold": name, "grid": grid, "curves": curves, "colors": colors,
        "models": prepared.models, "keys": prepared.keys, "cells": cells,
        "run_link": links.run(run_id), "tokens": tokens_panel(source, links, run_id, name, colors),
    }  # fmt: skip


def tokens_panel(
    source: Source, links: Links, run_id: str, name: str | None = None,
    colors: dict[str, str] | None = None,
) -> dict[str, Any] | None:  # fmt: skip
    """What the answers spent (docs/statistics.md, "Tokens"), of a run or one manifold
    (`name`, with its budget curve drawn in `colors`): token efficiency, the median tokens to
    an answer, and the answers whose reasoning repeats itself most, each linked to its case.
    None when no answer has a token count."""
    efficiency = queries.token_efficiency(source, run_id)
    curves = budget_curves(source, run_id)
    if name is not None:
        efficiency = efficiency.filter(pl.col("manifold") == name)
        curves = {key: curve for key, curve in curves.items() if key[1] == name}
    if efficiency.is_empty() or efficiency["mean_completion_tokens"].is_null().all():
        return None
    loops = rows(queries.most_repetitive(source, run_id, manifold=name))
    for row in loops:
        row["link"] = links.case(
            run_id, row["model"], row["case_id"], row["manifold"], row["point_key"]
        )
    svg = None
    if name is not None:
        by_model = {model: curve for (model, _), curve in curves.items()}
        svg = budget_svg(by_model, colors or {}, f"token budget of {name}")
    return {"efficiency": rows(efficiency), "budget": rows(budget_table(curves)),
            "loops": loops, "svg": svg}  # fmt: skip


@dataclass(frozen=True)
class CaseFilter:
    model: str
    point: str | None = None
    parameter: str | None = None
    level: str | None = None
    outcome: str | None = None
    text: str | None = None
    page: int = 1

    def query(self, **changes: object) -> dict[str, object]:
        values: dict[str, object] = {
            "model": self.model, "point": self.point, "x": self.parameter, "v": self.level,
            "outcome": self.outcome, "q": self.text, "page": self.page,
        }  # fmt: skip
        return values | changes


def cases(
    source: Source, links: Links, run_id: str, name: str, chosen: CaseFilter
) -> dict[str, Any]:
    """A model's answers at a grid point (or a curve's point: a parameter's value), a page of
    them, filtered by outcome and by text."""
    record = require_run(source, run_id)
    if chosen.outcome and chosen.outcome not in browse.OUTCOMES:
        raise ConfigError(f"outcome {chosen.outcome!r}: choose {', '.join(browse.OUTCOMES)}")
    if bool(chosen.parameter) != bool(chosen.level):  # one without the other chose nothing
        raise ConfigError("a curve's point needs both x=PARAMETER and v=VALUE")
    level = (chosen.parameter, chosen.level) if chosen.parameter and chosen.level else None
    if level is not None:
        check_level(*level)
    args = (source, run_id, chosen.model, name, chosen.point, chosen.outcome, chosen.text)
    fetch = functools.partial(browse.point_cases, *args, level=level)
    frame, at = paged(fetch, chosen.page, links.page_size)
    if at.total == 0 and not (chosen.outcome or chosen.text) and record.status != "running":
        _require_answers(source, run_id, name, chosen)  # a typo is not "no case"
    listed = folded(rows(frame), links, run_id, chosen.model)
    for row in listed:
        row["link"] = links.case(run_id, chosen.model, row["case_id"], name, row["point_key"])
    where = chosen.point or (
        f"{chosen.parameter} = {level_label(chosen.level)}"
        if level and chosen.level
        else "every point"
    )
    return {
        "record": record, "manifold": name, "filter": chosen, "where": where, "cases": listed,
        "pager": at, "outcomes": browse.OUTCOMES,
        "manifold_link": links.manifold(run_id, name), "run_link": links.run(run_id),
        "page_link": lambda **changes: links.cases(run_id, name, **chosen.query(**changes)),
    }  # fmt: skip


def _require_answers(source: Source, run_id: str, name: str, chosen: CaseFilter) -> None:
    """LookupError (404) naming what a finished run has no answers of: the model on this
    manifold, or the grid point."""
    if browse.point_cases(source, run_id, chosen.model, name, None, None, None, 0, 0)[1] == 0:
        raise LookupError(f"run {run_id} has no answers of model {chosen.model!r} on {name}")
    if chosen.point is not None:
        raise LookupError(f"run {run_id} has no grid point {chosen.point!r} of {name}")
    if chosen.parameter and chosen.level:
        raise LookupError(
            f"run {run_id} has no grid point of {name} where {chosen.parameter} = {chosen.level}"
        )


def check_level(parameter: str, value: str) -> None:
    """ConfigError unless `value` is a grid parameter's value as JSON (a curve's point)."""
    try:
        if len(parameter) > 100 or len(value) > 200:
            raise ValueError("too long")
        json.loads(value)
    except ValueError:
        raise ConfigError(
            f"x={parameter[:100]!r}, v={value[:100]!r}: not a grid parameter's value"
        ) from None


def case_pages(source: Source, run_id: str, name: str, model: str) -> list[dict[str, str]]:
    """The cases pages of a model on a manifold that other pages link to (their `cases` query):
    all its answers, each grid point it answered, each point of its curves."""
    found = [{"model": model}]
    answered = queries.cases_answered_per_point(source, run_id, model)
    found += [{"model": model, "point": key} for m, key in sorted(answered) if m == name]
    try:
        points = live.plotted_points(source, run_id)
    except DatabaseFault:  # figures no run can have: the manifold's page says so, and the
        return found  # pages of its answers stay
    points = points.filter((pl.col("manifold") == name) & (pl.col("model") == model))
    if points.is_empty():
        return found
    for parameter in grid_parameters(points).get(name, []):
        for level in sorted(set(curve_points(points, {name: parameter})["x"])):
            found.append({"model": model, "x": parameter, "v": level})
    return found


def folded(
    answers: list[dict[str, Any]], links: Links, run_id: str, model: str
) -> list[dict[str, Any]]:
    """Answers as browse shows them (a long one as its beginning `raw_text` and its end
    `raw_tail`), each folded one with how many characters are not shown (`hidden`) and the
    address of its whole text (`whole`)."""
    for answer in answers:
        if answer["raw_tail"] is not None:
            shown = len(answer["raw_text"]) + len(answer["raw_tail"])
            answer["hidden"] = answer["raw_length"] - shown
            answer["whole"] = links.answer(run_id, model, answer["case_id"], answer["sample_index"])
    return answers


def case(source: Source, links: Links, run_id: str, model: str, case_id: str) -> dict[str, Any]:
    """One case of a run and every answer the model gave to it."""
    record = require_run(source, run_id)
    answers = folded(
        rows(browse.case_answers(source, run_id, model, case_id)), links, run_id, model
    )
    if not answers:
        raise LookupError(f"run {run_id} has no answer of model {model!r} to case {case_id!r}")
    first = answers[0]
    return {
        "record": record, "model": model, "case": first, "answers": answers,
        "params": json.loads(first["params"] or "{}"),
        "run_link": links.run(run_id), "manifold_link": links.manifold(run_id, first["manifold"]),
        "point_link": links.cases(run_id, first["manifold"], model=model, point=first["point_key"]),
    }  # fmt: skip


def comparison(
    source: Source, links: Links, base: str, new: str, lost_page: int, gained_page: int
) -> dict[str, Any]:
    """Two runs compared case by case (`numerate compare`'s table and verdicts), and the cases
    lost and gained, a page of each."""
    records = require_run(source, base), require_run(source, new)
    if base == new:  # as `numerate compare` says: every case would be "no change"
        raise ConfigError(f"run {base!r} compared with itself: give two runs")
    compared = compare_stored(source, (base, new))
    changed = {}
    for kind, page in (("lost", lost_page), ("gained", gained_page)):
        fetch = functools.partial(browse.changed_cases, source, base, new, kind == "lost")
        frame, at = paged(fetch, page, links.page_size)
        listed = rows(frame)
        for row in listed:
            where = (row["model"], row["case_id"], row["manifold"], row["point_key"])
            row["base_link"], row["new_link"] = links.case(base, *where), links.case(new, *where)
        changed[kind] = {"cases": listed, "pager": at}
    return {
        "base": records[0], "new": records[1], "table": rows(for_display(compared)),
        "summary": summary_line(compared), "changed": changed,
        "page_link": lambda **pages: links.compare(base, new, **pages),
    }  # fmt: skip


def numgen_runs(source: Source, links: Links) -> dict[str, Any]:
    """Every NumGen run with its headline metrics."""
    listed = rows(browse.numgen_runs(source))
    for row in listed:
        row["link"] = links.numgen(row["run_id"])
    return {"runs": listed, "live": any(row["status"] == "running" for row in listed)}


def numgen_run(source: Source, links: Links, run_id: str) -> dict[str, Any]:
    """A NumGen run: its metrics, its accuracy per number, and its confusion matrix (asked
    number x counted number), each cell a link to its images."""
    runs = [row for row in rows(browse.numgen_runs(source)) if row["run_id"] == run_id]
    if not runs:
        raise LookupError(f"no NumGen run {run_id!r} in {source.path}")
    found = queries.numgen_confusion(source, run_id)
    matrix = json.loads(found[3]) if found else {"targets": [], "counts": []}
    uncounted: dict[int, int] = {}
    without = {"errors": 0, "refused": 0, "unparsed": 0}  # images without a count, by why
    for target, count, refused, unparsed in queries.numgen_counts(source, run_id):
        if count is None:
            uncounted[target] = uncounted.get(target, 0) + 1
            without["refused" if refused else "unparsed" if unparsed else "errors"] += 1
    columns = [*range(MAX_COUNT), MAX_COUNT]
    table = []
    for target, counts in zip(matrix["targets"], matrix["counts"], strict=True):
        total = sum(counts) or 1
        cells = [
            {"n": n, "color": heat_color(n / total if n else None), "dark": n / total > 0.55,
             "link": links.numgen_cell(run_id, target, count) if n else None}
            for count, n in zip(columns, counts, strict=True)
        ]  # fmt: skip
        missing = uncounted.get(target, 0)
        none = {"n": missing, "link": links.numgen_cell(run_id, target, None) if missing else None}
        table.append({"target": target, "cells": cells, "none": none})
    return {
        "run": runs[0], "metrics": queries.numgen_metrics(source, run_id) or {},
        "targets": rows(queries.numgen_targets(source, run_id)), "columns": columns,
        "max_count": MAX_COUNT, "table": table, "agreement": _agreement(source, links, run_id),
        "without": without,
        "home": links.numgen(),
    }  # fmt: skip


def _agreement(source: Source, links: Links, run_id: str) -> dict[str, Any] | None:
    """How a run that counted another run's images agrees with it, and the images they
    counted most apart (each with both counts and its image); None for a run of its own."""
    found = run_agreement(source, run_id)
    if found is None:
        return None
    twice, figures, apart = found
    folder = images_folder(source, run_id)
    images = rows(apart)
    made = dict(zip(twice.prompt_ids, twice.shas, strict=True))  # each image's SHA-256
    for row in images:  # the image's page, never its path on disk
        shown = image_problem(folder, row.pop("path"), made[row["prompt_id"]]) is None
        row["image"] = links.image(run_id, row["prompt_id"], False) if shown else None
    return {
        **figures.as_dict(), "source": twice.source_run_id, "apart": images,
        "source_link": links.numgen(twice.source_run_id), "first": twice.source_detector,
        "again": twice.detector,
    }  # fmt: skip


def numgen_cell(
    source: Source, links: Links, run_id: str, target: int, count: int | None, page: int
) -> dict[str, Any]:
    """The images of a NumGen run asked for `target` objects where the detector counted
    `count`, with the boxes it drew."""
    fetch = functools.partial(browse.numgen_cell, source, run_id, target, count)
    frame, at = paged(fetch, page, links.page_size)
    listed = rows(frame)
    if not listed and at.total == 0:
        raise LookupError(f"NumGen run {run_id} has no image of {target} counted as {count}")
    folder = images_folder(source, run_id)
    for row in listed:
        image, annotated = row.pop("path"), row.pop("annotated_path")
        row["why"] = image_problem(folder, image, row.pop("sha256"))
        row["image"] = links.image(run_id, row["prompt_id"], False) if not row["why"] else None
        shown = image_problem(folder, annotated) is None
        row["annotated"] = links.image(run_id, row["prompt_id"], True) if shown else None
    return {
        "run_id": run_id, "target": target, "count": count, "images": listed, "pager": at,
        "run_link": links.numgen(run_id), "home": links.numgen(),
        "page_link": lambda page: links.numgen_cell(run_id, target, count) + (
            f"&page={page}" if not links.static else ""
        ),
    }  # fmt: skip
