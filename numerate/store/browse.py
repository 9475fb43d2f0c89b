"""The reads of `numerate view`: pages of runs, of a grid point's cases, of one case's answers,
and of the cases two runs disagree on. Every list is a page (`offset`, `limit`) with its total,
so that a page costs the same on a database of a million answers as on one of a hundred.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from numerate.kernel.confined import Confined
from numerate.numgen.metrics import MAX_COUNT
from numerate.store import queries
from numerate.store.queries import STOPPED, Source
from numerate.store.texts import whole_texts

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "OUTCOMES",
    "STOPPED",
    "case_answers",
    "changed_cases",
    "image_below",
    "numgen_cell",
    "numgen_image",
    "numgen_image_files",
    "numgen_runs",
    "outcome_counts",
    "point_cases",
    "runs_page",
]

OUTCOMES = ("correct", "wrong", "unparsed", "truncated", "error")
"""Every outcome a graded answer can have."""

_SHOWN_STATUS = (
    f"CASE WHEN status = 'running' AND list_contains(?::VARCHAR[], run_id) THEN '{STOPPED}' "
    "ELSE status END AS status"
)
"""A run's status as shown, given the runs recorded running that no live process held when
they were probed (one that has ended since is shown as it ended)."""

_SHOWN_RUNS = f"""
WITH shown AS (
    SELECT * REPLACE ({_SHOWN_STATUS}) FROM runs
),
chosen AS (
    SELECT * FROM shown {{where}}
)"""

_RUNS = (
    _SHOWN_RUNS
    + """,
page AS (
    SELECT * FROM chosen ORDER BY started_at DESC, run_id LIMIT ? OFFSET ?
),
models AS (
    SELECT DISTINCT run_id, model FROM responses WHERE run_id IN (SELECT run_id FROM page)
    UNION
    SELECT run_id, model FROM run_models WHERE run_id IN (SELECT run_id FROM page)
    UNION  -- those it was asked to evaluate: a run stopped before any answer names them too
    SELECT run_id, unnest(json_extract_string(config, '$.models[*].name')) FROM page
),
answered AS (
    SELECT run_id, count(*) AS n FROM responses
    WHERE run_id IN (SELECT run_id FROM page) GROUP BY run_id
)
SELECT p.run_id AS id, p.sweep_name AS sweep,
       coalesce((SELECT string_agg(m.model, ', ' ORDER BY m.model) FROM models m
                 WHERE m.run_id = p.run_id), '') AS models,
       p.status,
       date_trunc('second', p.started_at) AS started,
       date_trunc('second', p.finished_at) AS finished,
       coalesce(a.n, 0) AS n,
       (SELECT count(*) FROM chosen) AS total
FROM page p LEFT JOIN answered a USING (run_id)
ORDER BY p.started_at DESC, p.run_id
"""
)


def runs_page(
    source: Source,
    offset: int,
    limit: int,
    sweep: str | None = None,
    status: str | None = None,
    text: str | None = None,
) -> tuple[pl.DataFrame, int]:
    """The runs, newest first, `limit` of them from `offset` (id, sweep, models, status,
    started, finished, n: answers stored), and how many there are; only a sweep's, a status's,
    or those whose id or sweep contains `text`, when given. A run's status is as it is now:
    STOPPED for one recorded `running` that no live process holds."""
    conditions: list[str] = []
    params: list[object] = []
    for condition, value in (
        ("sweep_name = ?", sweep),
        ("status = ?", status),
        ("(contains(run_id, ?) OR contains(sweep_name, ?))", text),
    ):
        if value:
            conditions.append(condition)
            params += [value] * condition.count("?")
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    params = [queries.stopped_run_ids(source), *params]
    frame = source.frame(_RUNS.format(where=where), [*params, limit, offset])
    if frame.height:
        total = int(frame["total"][0])
    else:  # a page past the last
        found = source.query(f"{_SHOWN_RUNS.format(where=where)} SELECT count(*) FROM chosen",
                             params)  # fmt: skip
        total = int(found[0][0])
    return (frame.drop("total") if "total" in frame.columns else frame), total


def outcome_counts(source: Source, run_id: str) -> pl.DataFrame:
    """Answers of a run per model, manifold and outcome (model, manifold, outcome, n): what a
    run that is still going has, before its summaries are written."""
    return source.frame(
        "SELECT model, manifold, outcome, count(*) AS n FROM responses WHERE run_id = ? "
        "GROUP BY ALL ORDER BY model, manifold, outcome",
        [run_id],
    )


def _case_columns(fold: tuple[int, int]) -> str:
    """An answer and its case as pages show them: an answer longer than the two parts of
    `fold` (characters of its beginning, of its end) as those two parts (`raw_text`,
    `raw_tail`; `raw_tail` is None for an answer shown whole) and its length; a prompt that
    long (an ingested case of another generator version) cut there, ` […]` at its end."""
    head, tail = fold
    longer = f"length(r.raw_text) > {head + tail}"
    shown = head + tail
    prompt = (
        f"CASE WHEN length(c.input) > {shown} THEN left(c.input, {shown}) || ' […]' "
        "ELSE c.input END"
    )
    return f"""
r.case_id, r.sample_index, r.point_key, {prompt} AS prompt, c.target,
CASE WHEN {longer} THEN left(r.raw_text, {head}) ELSE r.raw_text END AS raw_text,
CASE WHEN {longer} THEN right(r.raw_text, {tail}) END AS raw_tail,
length(r.raw_text) AS raw_length, r.raw_cut, r.raw_chars, r.answer,
r.outcome, r.error, r.finish_reason, r.prompt_tokens, r.completion_tokens, r.latency_s,
r.cached, CAST(c.params AS VARCHAR) AS params
"""


LIST_FOLD = (400, 1_200)
"""How much of a long answer a list of cases shows: its first and last characters."""

CASE_FOLD = (4_000, 12_000)
"""How much of a long answer the page of its case shows: its first and last characters."""


def point_cases(
    source: Source,
    run_id: str,
    model: str,
    manifold: str,
    point_key: str | None,
    outcome: str | None,
    text: str | None,
    offset: int,
    limit: int,
    level: tuple[str, str] | None = None,
) -> tuple[pl.DataFrame, int]:
    """A model's answers at a grid point of a run (every point when `point_key` is None), each
    with its case (prompt, target): `limit` of them from `offset`, ordered by case, and how
    many match. Only those of `outcome`, those whose prompt, target or answer contains `text`
    (case-insensitive), and those whose parameter `level[0]` has the value `level[1]` (as
    JSON: a point of a curve), when given."""
    conditions = ["r.run_id = ?", "r.model = ?", "r.manifold = ?"]
    params: list[object] = [run_id, model, manifold]
    if point_key is not None:
        conditions.append("r.point_key = ?")
        params.append(point_key)
    if level is not None:
        conditions.append("CAST(json_extract(c.params, ?) AS VARCHAR) = ?")
        params += [f"$.{level[0]}", level[1]]
    if outcome:
        conditions.append("r.outcome = ?")
        params.append(outcome)
    if text:
        conditions.append(
            "(contains(lower(c.input), ?) OR contains(lower(c.target), ?) "
            "OR contains(lower(coalesce(r.raw_text, '')), ?) OR EXISTS (SELECT 1 FROM texts t "
            "WHERE t.sha = r.raw_sha AND contains(lower(t.piece), ?)))"
        )  # a long answer's pieces each (a word across two pieces is not found)
        params += [text.lower()] * 4
    where = " AND ".join(conditions)
    joined = "responses r JOIN cases c USING (case_id)"
    total = int(source.query(f"SELECT count(*) FROM {joined} WHERE {where}", params)[0][0])
    order = "ORDER BY c.case_index, r.case_id, r.sample_index"
    page = f"SELECT r.* FROM {joined} WHERE {where} {order} LIMIT ? OFFSET ?"
    frame = source.frame(
        f"SELECT {_case_columns(LIST_FOLD)} FROM {_whole(page)} r JOIN cases c USING (case_id) "
        f"{order}",
        [*params, limit, offset],
    )
    return frame, total


def _whole(rows: str) -> str:
    """`rows` (SQL of responses rows: a page) with the whole text of each long answer in
    `raw_text`, joined from its pieces (numerate.store.texts) for those rows only."""
    return (
        f"(WITH p AS ({rows}) SELECT p.* REPLACE (coalesce(w.text, p.raw_text) AS raw_text) "
        "FROM p LEFT JOIN (SELECT sha, string_agg(piece, '' ORDER BY part) AS text FROM texts "
        "WHERE rowid IN (SELECT rowid FROM texts WHERE sha IN (SELECT raw_sha FROM p)) "
        "GROUP BY sha) w ON w.sha = p.raw_sha)"  # by row id: numerate.store.texts.whole_texts
    )


def case_answers(source: Source, run_id: str, model: str, case_id: str) -> pl.DataFrame:
    """Every answer (sample) of a model to one case of a run, with the case."""
    answers = "SELECT * FROM responses WHERE run_id = ? AND model = ? AND case_id = ?"
    return source.frame(
        f"SELECT {_case_columns(CASE_FOLD)}, r.manifold, c.chance "
        f"FROM {_whole(answers)} r JOIN cases c USING (case_id) ORDER BY r.sample_index",
        [run_id, model, case_id],
    )


def answer_text(source: Source, run_id: str, model: str, case_id: str, sample: int) -> str | None:
    """The whole stored text of one answer (None when there is no such answer or it has no
    text: an error)."""
    found = source.query(
        "SELECT raw_text, raw_sha FROM responses WHERE run_id = ? AND model = ? AND "
        "case_id = ? AND sample_index = ?",
        [run_id, model, case_id, sample],
    )
    if not found:
        return None
    text, sha = found[0]
    return whole_texts(source.query, [sha]).get(sha, text)


def folded_answers(source: Source, run_id: str) -> list[tuple[str, str, int]]:
    """(model, case id, sample) of each answer of a run that a list of cases shows folded."""
    head, tail = LIST_FOLD
    return [
        (model, case_id, sample)
        for model, case_id, sample in source.query(
            "SELECT model, case_id, sample_index FROM responses WHERE run_id = ? AND "
            f"(length(raw_text) > {head + tail} OR raw_sha IN (SELECT sha FROM texts GROUP BY "
            f"sha HAVING sum(length(piece)) > {head + tail})) ORDER BY ALL",
            [run_id],
        )
    ]


_CHANGED = """
FROM responses b JOIN responses n
  ON n.run_id = ? AND b.model = n.model AND b.case_id = n.case_id
 AND b.sample_index = n.sample_index
WHERE b.run_id = ? AND b.sample_index = 0 AND b.outcome {base} AND n.outcome {new}
"""
"""Two runs' discordant pairs: each case by its first answer, as the comparison's test counts
them (queries.PAIR_KEYS)."""


def changed_cases(
    source: Source, base: str, new: str, lost: bool, offset: int, limit: int
) -> tuple[pl.DataFrame, int]:
    """The cases two runs disagree on by their first answers (McNemar's discordant pairs, as
    the comparison counts them): `lost`, right in `base`
    and wrong in `new` (wrong, unparsed or truncated), else gained. `limit` of them from
    `offset` (model, manifold, point_key, case_id, sample_index, base_outcome, new_outcome),
    and how many there are. An `error` is no answer: never a loss or a gain."""
    wrong = "IN ('wrong', 'unparsed', 'truncated')"
    sides = {"base": "= 'correct'", "new": wrong} if lost else {"base": wrong, "new": "= 'correct'"}
    body = _CHANGED.format(**sides)
    total = int(source.query(f"SELECT count(*) {body}", [new, base])[0][0])
    frame = source.frame(
        "SELECT b.model, b.manifold, b.point_key, b.case_id, b.sample_index, "
        f"b.outcome AS base_outcome, n.outcome AS new_outcome {body} "
        "ORDER BY b.model, b.manifold, b.point_key, b.case_id, b.sample_index LIMIT ? OFFSET ?",
        [new, base, limit, offset],
    )
    return frame, total


def numgen_runs(source: Source) -> pl.DataFrame:
    """Every NumGen run, newest first, with its headline metrics where it has them: run_id,
    kind, generator, detector, status (STOPPED for one recorded `running` that no live process
    holds), started, n, errors, accuracy, ci_low, ci_high, mwe, knower_level,
    human_correlation."""
    return source.frame(
        f"SELECT run_id, r.kind, r.generator, r.detector, {_SHOWN_STATUS}, "
        "date_trunc('second', r.started_at) AS started, m.n, m.errors, m.accuracy, m.ci_low, "
        "m.ci_high, m.mwe, m.knower_level, m.human_correlation "
        "FROM numgen_runs r LEFT JOIN numgen_metrics m USING (run_id) "
        "ORDER BY r.started_at DESC, r.run_id",
        [queries.stopped_run_ids(source, "numgen_runs")],
    )


_CELL = """
FROM numgen_images i LEFT JOIN numgen_detections d USING (run_id, prompt_id)
WHERE i.run_id = ? AND i.target = ? AND {count}
"""


def numgen_cell(
    source: Source, run_id: str, target: int, count: int | None, offset: int, limit: int
) -> tuple[pl.DataFrame, int]:
    """The images of a NumGen run asked for `target` objects in which the detector counted
    `count` (None: nothing counted; MAX_COUNT or more: the matrix's last column), a page of
    them (prompt_id, prompt, object, image_seed, count, raw_count, error, path, sha256,
    annotated_path), and how many."""
    if count is None:
        condition, params = "d.count IS NULL", [run_id, target]
    elif count >= MAX_COUNT:
        condition, params = "d.count >= ?", [run_id, target, MAX_COUNT]
    else:
        condition, params = "d.count = ?", [run_id, target, count]
    body = _CELL.format(count=condition)
    total = int(source.query(f"SELECT count(*) {body}", params)[0][0])
    frame = source.frame(
        "SELECT i.prompt_id, i.prompt, i.object, i.image_seed, d.count, d.raw_count, "
        "coalesce(d.error, i.error) AS error, i.path, i.sha256, d.annotated_path "
        f"{body} ORDER BY i.prompt_index LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )
    return frame, total


IMAGE_FILES = (
    "SELECT i.prompt_id, i.path, d.annotated_path, i.sha256 FROM numgen_images i "
    "LEFT JOIN numgen_detections d USING (run_id, prompt_id) WHERE i.run_id = ?"
)
"""A NumGen run's images: each prompt id, the file of its image and of the copy with the
detector's boxes drawn, and the image's SHA-256 as it was made."""

ImageFile = tuple[str, str | None]
"""A file a NumGen run recorded for an image, and the SHA-256 recorded of it (None: none; an
annotated copy has none)."""


def numgen_image(source: Source, run_id: str, prompt_id: str, annotated: bool) -> ImageFile | None:
    """The file a NumGen run recorded for an image (the image itself, or the copy with the
    detector's boxes drawn), or None."""
    rows = source.query(f"{IMAGE_FILES} AND i.prompt_id = ?", [run_id, prompt_id])
    if not rows or not rows[0][2 if annotated else 1]:
        return None
    _, image, copy, sha256 = rows[0]
    return (str(copy), None) if annotated else (str(image), sha256)


def numgen_image_files(
    source: Source, run_id: str
) -> list[tuple[str, ImageFile | None, ImageFile | None]]:
    """Every image a NumGen run recorded, in one query, in its prompts' order: the prompt id,
    the image's file and that of the copy with the detector's boxes drawn (None where none
    was recorded). A query an image cost an export of a run on a lake 0.1-0.2 s each."""
    rows = source.query(f"{IMAGE_FILES} ORDER BY i.prompt_index, i.prompt_id", [run_id])
    return [
        (str(p), (str(i), sha256) if i else None, (str(a), None) if a else None)
        for p, i, a, sha256 in rows
    ]


def numgen_images_folder(source: Source, run_id: str) -> str | None:
    """The images folder a NumGen run wrote its images under (`<images_dir>`: each image at
    `images/<generator>/<file>`, its annotated copy at
    `images/<generator>/annotated/<counter>/<file>`, numerate.numgen.batches.image_folder), as
    most of its recorded images name it; None when it recorded none that numerate writes.
    What the viewer serves of the run is confined to its `images` folder: a link at `images`
    itself or below is never followed (one at `images` served a folder planted elsewhere),
    and a path edited into the database that most of the run's do not share
    (`/home/x/secret.png`) is not shown."""
    roots = Counter(
        root
        for (path,) in source.query(
            "SELECT path FROM numgen_images WHERE run_id = ? AND path IS NOT NULL", [run_id]
        )
        if (root := _images_root(str(path)))
    )
    return roots.most_common(1)[0][0] if roots else None


def image_below(folder: str | None, recorded: str | None) -> str | None:
    """The name (`images/...`) of a recorded image below a NumGen run's images folder
    (`numgen_images_folder`), or None when it does not lie in the folder's `images/` (a path
    edited into the database). Compared by name: a link on the way is refused where the
    file is read (numerate.kernel.confined). The viewer shows, and a recount counts, no
    other file."""
    if folder is None or not recorded:
        return None
    name = Confined(folder).relative(recorded)
    return name if name is not None and name.startswith("images/") else None


def _images_root(recorded: str) -> str | None:
    """The images folder (`<images_dir>`) of a recorded image's path as numerate writes it,
    or None. A run made before paths were recorded absolute recorded them as given, relative
    to where it ran: such a folder is taken as it is (found from that folder), unless it
    climbs out of it (`..`)."""
    path = PurePosixPath(os.path.normpath(recorded))  # <images_dir>/images/<generator>/<file>
    if ".." in path.parts or len(path.parts) < 3 or path.parents[1].name != "images":
        return None
    return str(path.parents[2])
