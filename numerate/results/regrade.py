"""Grading a stored run again (`numerate regrade`) with the current graders, and storing its
aggregates. The answers never change; their outcomes may."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import ValidationError

from numerate.config.provenance import generator_version
from numerate.grading.judging import judge
from numerate.kernel.errors import describe_validation_error, shorten
from numerate.kernel.progress import current
from numerate.manifolds import registry
from numerate.planning.plan import case_id as id_of
from numerate.planning.plan import case_json, version_of
from numerate.results.aggregate import scored_run
from numerate.store import Store, queries
from numerate.store.rows import Regrade
from numerate.store.schema import DatabaseFault
from numerate.store.shards import Ingested, ShardError, ingest


def regrade_run(store: Store, run_id: str) -> Counter[tuple[str, str]]:
    """Grade a stored run's answers again with the current graders and refresh its
    aggregates; returns how many outcomes went from one value to another.

    A page of answers at a time (numerate.store.queries.stored_answers), its changed grades
    stored before the next page is read, so that memory follows a page whatever the run's
    size and however many grades change (all of a million answers' grades held at once took
    the process past 1 GiB). Stopped midway, some answers are graded anew and the run's
    figures are as they were: grading again is the same whenever it is done, so running it
    again finishes the work."""
    changes: Counter[tuple[str, str]] = Counter()
    progress = current()
    progress.doing("grading the stored answers again")
    progress.add_total(queries.answers_in(store, run_id))
    for page in queries.stored_answers(store, run_id):
        updates: list[Regrade] = []
        for stored in page:
            manifold = stored.manifold
            case = _stored_case(stored, run_id)
            outcome, answer = judge(
                manifold, case, stored.raw_text, stored.finish_reason, stored.error
            )
            changes[stored.outcome, outcome.value] += 1
            if outcome.value != stored.outcome or answer != stored.answer:
                updates.append(
                    {"model": stored.model, "case_id": stored.case_id,
                     "sample_index": stored.sample_index, "outcome": outcome.value,
                     "answer": answer}
                )  # fmt: skip
        store.update_grades(run_id, updates)
        progress.advance(len(page))
    progress.doing("figuring the run's results")
    aggregate_stored_run(store, run_id)
    progress.doing("")
    return changes


def _stored_case(stored: queries.StoredAnswer, run_id: str) -> Any:
    """The case an answer was to, as stored; DatabaseFault naming it and its first field no
    manifold makes so (its manifold or fields changed by hand: a traceback, exit 1)."""
    where = f"run {run_id}: case {shorten(stored.case_id)} ({shorten(stored.manifold)})"
    try:
        spec = registry.get(stored.manifold)
        return spec.case_model.model_validate_json(case_json(*stored.case))
    except registry.UnknownManifoldError as error:
        said = f"{where}: {error}"
    except ValidationError as error:
        said = describe_validation_error(error, where).split("\n")[0]
    raise DatabaseFault(f"{said}: no case numerate makes (the database was changed?)")


def ingest_graded(store: Store, results_dir: str) -> Ingested:
    """`store.shards.ingest`, each run graded again here (`regrade_run`) before it commits: a shard
    brings answers, and their outcomes and aggregates are this database's graders', never
    what the shard says (outcomes rewritten to `correct` were stored, and `report` showed the
    shard's own summaries beside them)."""

    def grade(loaded: Store, run_id: str) -> None:
        check_generated(loaded, run_id)
        regrade_run(loaded, run_id)

    return ingest(store, results_dir, grade=grade)


def check_generated(store: Store, run_id: str) -> None:
    """ShardError naming the first case found (a page of the run at a time, in order of id
    within a page: numerate.store.queries.run_cases) of a run, as a shard brought it, that is
    not what its manifold generates for its parameters, seed and index, with this version's
    generator: a case with a planted target would be stored for every later run that plans
    it. Cases of another generator version cannot be made again here, and are taken as they
    are."""
    for case_id, version, text in queries.run_cases(store, run_id):
        manifold, given_input, given_target = text.manifold, text.input, text.target
        if version_of(version) != generator_version(manifold):
            continue
        spec = registry.get(manifold)
        case = spec.case_model.model_validate_json(case_json(*text))
        made = spec.generate(spec.params(**case.params), case.seed, case.index)
        shown, expected = case.model_dump(mode="json"), made.model_dump(mode="json")
        differs = [field for field in expected if shown.get(field) != expected[field]]
        if given_input != made.input or given_target != made.target:
            differs.append("input" if given_input != made.input else "target")
        if case_id != id_of(manifold, version, case.seed, case.index):
            differs.append("case_id")
        if differs:
            raise ShardError(
                f"cases.parquet: case {case_id!r}: {differs[0]} is not what {manifold} "
                "generates for its parameters, seed and index (a case changed by hand)"
            )


def aggregate_stored_run(store: Store, run_id: str) -> int:
    """Recompute a stored run's per-point aggregates and summaries; returns the points."""
    # the queries in one hold of the file, the figures' work outside it, then the write
    points, summaries = scored_run(store, run_id, store.session)
    store.replace_aggregates(run_id, points, summaries)
    return points.height
