"""`numerate grade`, `numerate regrade` and `numerate cache clear`."""

import json

import pytest
from typer.testing import CliRunner

from numerate.cli import app
from numerate.store import Store

runner = CliRunner()


def cases_file(tmp_path, manifold="objects", count=4):
    out = tmp_path / "cases.jsonl"
    result = runner.invoke(app, ["generate", manifold, "--count", str(count), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_grade_writes_outcome_and_answer_for_every_line(tmp_path):
    cases = cases_file(tmp_path)
    responses = [f"Answer: {cases[0]['target']}", "Answer: 999", "no idea", None]
    lines = [{**case, "response": r} for case, r in zip(cases, responses, strict=True)]
    lines[1]["finish_reason"] = "length"
    source = tmp_path / "answers.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines) + "\n")
    out = tmp_path / "graded.jsonl"
    result = runner.invoke(app, ["grade", str(source), "--out", str(out)])
    assert result.exit_code == 0, result.output
    graded = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(g["outcome"], g["answer"]) for g in graded] == [
        ("correct", cases[0]["target"]), ("truncated", "999"), ("unparsed", None),
        ("error", None),
    ]  # fmt: skip
    assert graded[0]["input"] == cases[0]["input"]  # the line comes back whole
    assert "graded 4 answers" in result.stderr
    single = tmp_path / "one.jsonl"
    single.write_text(json.dumps(lines[0]) + "\n")
    one = runner.invoke(app, ["grade", str(single), "--out", str(tmp_path / "one-graded.jsonl")])
    assert "graded 1 answer (1 correct)" in one.stderr  # not "1 answers" (a hostile sweep)
    stdout = runner.invoke(app, ["grade", str(source)])
    assert [json.loads(x) for x in stdout.stdout.splitlines()] == graded


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json\n", "line 1, column 2: not valid JSON"),
        ('{"a": "x\n', "line 1, column 7: not valid JSON: Unterminated string starting at"),
        ("[1, 2]\n", "line 1: expected a JSON object"),
        ("null\n", "line 1: expected a JSON object, got null"),
        ('{"manifold": "nope", "response": "x"}\n', "unknown manifold 'nope'"),
        ('{"manifold": "objects", "response": "x"}\n', "line 1"),
        ("{}\n", "line 1: no `manifold` field (the case's manifold: objects, sequence, shuffle)"),
        ('{"manifold": null, "response": "x"}\n', "manifold = null: expected a manifold name"),
        ("\n\n", "holds no answers to grade"),
    ],
)
def test_grade_names_the_bad_line(tmp_path, content, message):
    source = tmp_path / "bad.jsonl"
    source.write_text(content)
    out = tmp_path / "graded.jsonl"
    result = runner.invoke(app, ["grade", str(source), "--out", str(out)])
    assert result.exit_code == 2
    assert message in result.stderr and result.stderr.startswith("error: ")
    assert not out.exists()  # nothing written


@pytest.mark.parametrize(
    "changes",
    [
        {"manifold": "m" * 3_000_000},  # was said whole: 3 MB
        {"params": {"k" * 3_000_000: 1}},
        {"params": {"\x1b]0;PWN\x07": 1}},  # reached the terminal raw: it set its title
    ],
)
def test_grade_names_a_field_of_any_size_or_with_escapes_in_a_short_escaped_line(tmp_path, changes):
    line = {**cases_file(tmp_path, count=1)[0], "response": "x", **changes}
    source = tmp_path / "bad.jsonl"
    source.write_text(json.dumps(line) + "\n")
    result = runner.invoke(app, ["grade", str(source)])
    assert result.exit_code == 2
    assert len(result.stderr) < 1_000 and "\x1b" not in result.stderr


def test_grade_refuses_params_too_long_for_a_point_before_making_their_case(tmp_path):
    """A hostile pass: a 1 MB `anchor_prefix` in one line took 1.2 GB (Shuffle Tracking
    repeats it in each of its statements as the case is made to be checked; a 16 MiB line
    would have taken about 19 GB). Its parameters are held to a grid point's bound first."""
    made = runner.invoke(app, ["generate", "shuffle", "--count", "1", "--set", "anchor=NUMERIC"])
    line = {**json.loads(made.stdout), "response": "x"}
    line["params"] = {**line["params"], "anchor_prefix": "p" * 1_000_000}
    source = tmp_path / "bomb.jsonl"
    source.write_text(json.dumps(line) + "\n")
    result = runner.invoke(app, ["grade", str(source)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {source} line 1: params.anchor_prefix = 'ppp")
    assert "more than the 10,000 a grid point's name may have" in result.stderr
    generated = runner.invoke(app, ["generate", "shuffle", "--set", "anchor=ROMAN",
                                    "--set", f"anchor_prefix={'p' * 20_000}"])  # fmt: skip
    assert generated.exit_code == 2 and not generated.stdout
    assert generated.stderr.startswith("error: --set anchor_prefix = 'ppp")
    # a review: grade counted the defaults too, and refused what generate wrote
    near = runner.invoke(app, ["generate", "shuffle", "--count", "1", "--set", "anchor=ROMAN",
                               "--set", f"anchor_prefix={'p' * 9_970}"])  # fmt: skip
    assert near.exit_code == 0, near.output
    source.write_text(json.dumps({**json.loads(near.stdout), "response": "x"}) + "\n")
    assert runner.invoke(app, ["grade", str(source)]).exit_code == 0


def test_grade_reads_a_line_whose_text_holds_a_line_separator(tmp_path):
    """A hostile pass: a line whose response holds U+2028 or U+0085 (JSON writes them as they
    are: numerate's own output does) was split there, and refused as broken JSON."""
    case = cases_file(tmp_path, count=1)[0]
    source = tmp_path / "answers.jsonl"
    answers = [f"\u2028Answer: {case['target']}", f"Answer: {case['target']}\u0085", "\u2029"]
    source.write_text("".join(json.dumps({**case, "response": answer}, ensure_ascii=False)
                              + "\r\n" for answer in answers))  # fmt: skip
    out = tmp_path / "graded.jsonl"
    result = runner.invoke(app, ["grade", str(source), "--out", str(out)])
    assert result.exit_code == 0, result.output
    graded = [json.loads(line) for line in out.read_text().split("\n") if line]
    assert [g["outcome"] for g in graded] == ["correct", "correct", "unparsed"]
    again = runner.invoke(app, ["grade", str(out)])  # its own output, graded again
    assert again.exit_code == 0 and again.stdout == out.read_text()


def test_grade_refuses_a_line_without_response_and_a_non_utf8_file(tmp_path):
    case = cases_file(tmp_path, count=1)[0]
    source = tmp_path / "x.jsonl"
    source.write_text(json.dumps(case) + "\n")
    assert "no `response` field" in runner.invoke(app, ["grade", str(source)]).stderr
    source.write_bytes(b"\xff\xfe{}")
    assert "is not UTF-8" in runner.invoke(app, ["grade", str(source)]).stderr


@pytest.mark.parametrize("manifold", ["objects", "shuffle", "sequence"])
@pytest.mark.parametrize(
    ("field", "edit", "named"),
    [
        ("target", lambda case: "999", "target"),
        ("seed", lambda case: case["seed"] + 1, "input"),  # another case: its prompt differs
        ("index", lambda case: case["index"] + 1, "input"),
    ],
)
def test_grade_refuses_a_case_that_is_not_the_one_generated(tmp_path, manifold, field, edit, named):
    """A hand-edited target was graded as if it were the case's (answer 999 to a case of 7
    objects: correct); a case is now checked against the one its params, seed and index
    generate, and the first field that differs is named."""
    case = cases_file(tmp_path, manifold, count=1)[0]
    edited = {**case, field: edit(case), "response": "Answer: 999"}
    source = tmp_path / "edited.jsonl"
    source.write_text(json.dumps(case | {"response": "x"}) + "\n" + json.dumps(edited) + "\n")
    out = tmp_path / "graded.jsonl"
    result = runner.invoke(app, ["grade", str(source), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {source} line 2: {named} = ")
    assert "generates for this line's params, seed and index" in result.stderr
    assert not out.exists()


def test_grade_shows_where_an_edited_case_differs():
    """Corpus H: an input with a space added at its end was shown cut to the same first 60
    characters as the one generated: two identical texts."""
    from numerate.grading.files import around_difference

    generated = "How many objects are there? " * 5
    shown, expected = around_difference(f'"{generated} "', f'"{generated}"')
    assert shown != expected and shown.endswith(' "') and expected.endswith('"')
    assert shown.startswith("...") and len(shown) <= 66
    assert around_difference('"short"', '"other"') == ('"short"', '"other"')


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("index", True, "index = true: Input should be a valid integer"),
        ("index", 3.0, "index = 3.0: Input should be a valid integer"),
        ("index", "3", "index = '3': Input should be a valid integer"),
        ("index", -5, "index = -5: Input should be greater than or equal to 0"),
        # corpus H: blamed on `input` (the case 10**30 generates), not on the index
        ("index", 10**30, f"index = {10**30}: Input should be less than 9223372036854775808"),
        ("seed", "5", "seed = '5': Input should be a valid integer"),
        (
            "seed",
            2**64,
            "seed = 18446744073709551616: Input should be less than or equal to "
            "9223372036854775807",
        ),
    ],
)
def test_grade_takes_an_index_and_seed_only_as_written(tmp_path, field, value, said):
    """Before: `true`, `3.0`, `"3"`, -5 and 2**64 were taken as an index or a seed (pydantic's
    lax integers), unlike every other whole number numerate reads."""
    case = cases_file(tmp_path, count=1)[0]
    source = tmp_path / "odd.jsonl"
    source.write_text(json.dumps({**case, field: value, "response": "Answer: 1"}) + "\n")
    result = runner.invoke(app, ["grade", str(source)])
    assert result.exit_code == 2
    assert result.stderr == f"error: {source} line 1: {said}\n"


def test_grade_takes_a_case_whose_params_leave_out_defaults(tmp_path):
    """params as written by another tool may omit a parameter at its default, or add the
    point's count: the case generated is the same, so it is graded."""
    case = cases_file(tmp_path, count=1)[0]
    params = {k: v for k, v in case["params"].items() if k != "anchor_prefix"} | {"count": 3}
    source = tmp_path / "answers.jsonl"
    source.write_text(json.dumps({**case, "params": params, "response": "Answer: 1"}) + "\n")
    result = runner.invoke(app, ["grade", str(source)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["outcome"] in {"correct", "wrong"}


def test_regrade_of_a_run_another_process_writes_is_refused_until_it_ends(tmp_path):
    """A hostile pass: `regrade --run latest` of a run still writing went ahead without a word
    (its progress read 47,648/42,000) while the run wrote its own grades and figures."""
    import subprocess
    import sys

    db = str(tmp_path / "r.duckdb")
    assert runner.invoke(app, ["run", "--db", db, "--model", "baseline:oracle"]).exit_code == 0
    run_id = Store.open(db).query("SELECT run_id FROM runs")[0][0]
    Store.close_all()
    holds = (  # a run's process holds its claim while it runs
        "import sys; from numerate.store import Store; "
        "assert Store.open(sys.argv[1]).claim_run(sys.argv[2]); print('held', flush=True); "
        "sys.stdin.read()"
    )
    holder = subprocess.Popen([sys.executable, "-c", holds, db, run_id], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        refused = runner.invoke(app, ["regrade", "--run", run_id, "--db", db])
        assert (refused.exit_code, refused.stderr) == (2, (
            f"error: run {run_id} is still running (another process writes it): regrade it "
            "once it has ended\n"
        ))  # fmt: skip
    finally:
        holder.communicate("")  # its end lets the claim go
    Store.close_all()
    again = runner.invoke(app, ["regrade", "--run", run_id, "--db", db])
    assert again.exit_code == 0 and "0 outcome(s) changed" in again.stdout, again.output


def test_regrade_restores_outcomes_from_the_stored_answers(tmp_path):
    db = str(tmp_path / "r.duckdb")
    result = runner.invoke(app, ["run", "--db", db, "--model", "baseline:oracle"])
    assert result.exit_code == 0, result.output
    store = Store.open(db)
    run_id = store.query("SELECT run_id FROM runs")[0][0]
    # a grader of the past marked some right answers wrong
    store.query(
        "UPDATE responses SET outcome = 'wrong' WHERE case_id IN "
        "(SELECT case_id FROM responses WHERE manifold = 'shuffle' LIMIT 7)"
    )
    from numerate.results.regrade import aggregate_stored_run

    aggregate_stored_run(store, run_id)
    assert store.query("SELECT min(accuracy) FROM summaries")[0][0] < 1.0
    texts = store.query("SELECT list(raw_text ORDER BY case_id) FROM responses")[0][0]
    Store.close_all()
    result = runner.invoke(app, ["regrade", "--run", run_id, "--db", db])
    assert result.exit_code == 0, result.output
    assert "7 outcome(s) changed (wrong -> correct: 7)" in result.stdout
    # its bar counts answers graded again: no request is sent, retried or found stored
    bar = [line for line in result.stderr.splitlines() if line.startswith("regrade")]
    assert bar and not any(word in bar[-1] for word in ("errors", "retries", "cached", "flight"))
    store = Store.open(db)
    assert store.query("SELECT min(accuracy) FROM summaries")[0][0] == 1.0
    assert store.query("SELECT list(raw_text ORDER BY case_id) FROM responses")[0][0] == texts
    Store.close_all()
    # a hostile pass: an outcome changed by hand reached the terminal raw (its title set)
    store = Store.open(db)
    store.query("UPDATE responses SET outcome = ? WHERE run_id = ?", ["\x1b]0;x\x07", run_id])
    Store.close_all()
    escaped = runner.invoke(app, ["regrade", "--run", run_id, "--db", db])
    assert escaped.exit_code == 0 and "\x1b" not in escaped.stdout, escaped.output
    assert "(\\x1b]0;x\\x07 -> correct: " in escaped.stdout
    missing = runner.invoke(app, ["regrade", "--run", "nope", "--db", db])
    assert missing.exit_code == 2 and "run 'nope': no run in" in missing.stderr
    blank = runner.invoke(app, ["regrade", "--run", " \n", "--db", db])
    assert blank.exit_code == 2 and "run id ' \\n': give an id" in blank.stderr
    # as report, compare and plot name runs; ` latest` was stripped, then taken for an id
    for named in ("latest", run_id[:-4], " latest", f"{run_id}\n"):
        again = runner.invoke(app, ["regrade", "--run", named, "--db", db])
        assert again.exit_code == 0 and f"of {run_id}: 0 outcome(s) changed" in again.stdout
    store = Store.open(db)  # a hostile pass: a case changed by hand was a traceback, exit 1
    store.query("UPDATE cases SET data = '{}' WHERE manifold = 'objects'")
    Store.close_all()
    broken = runner.invoke(app, ["regrade", "--run", run_id, "--db", db])
    said = broken.stderr.splitlines()[-1]  # after the bar
    assert broken.exit_code == 2 and said.startswith(f"error: run {run_id}: case "), said
    assert said.endswith(
        "(objects): target_categories: Field required: no case numerate "
        "makes (the database was changed?)"
    ), said
    store = Store.open(db)  # a run stopped before any answer: "regraded 0 responses", exit 0
    store.query("DELETE FROM responses WHERE run_id = ?", [run_id])
    Store.close_all()
    empty = runner.invoke(app, ["regrade", "--run", run_id, "--db", db])
    assert empty.exit_code == 2 and empty.stdout == "", empty.output
    assert empty.stderr == f"error: run {run_id} holds no answer: nothing to regrade\n"


def test_a_run_is_read_again_a_page_of_answers_at_a_time(tmp_path, monkeypatch):
    """`regrade` (and ingest's check of a run's cases) read a run a page at a time, so that
    memory follows a page: every answer comes once, with its case's text, every case once,
    over about answers / ANSWERS_A_PAGE queries of a page each."""
    from numerate.store import queries

    db = str(tmp_path / "p.duckdb")
    assert runner.invoke(app, ["run", "--db", db, "--model", "baseline:oracle"]).exit_code == 0
    store = Store.open(db)
    run_id = store.query("SELECT run_id FROM runs")[0][0]
    stored = store.query(
        "SELECT r.model, r.case_id, r.sample_index, r.raw_text, c.input FROM responses r "
        "JOIN cases c USING (case_id) WHERE run_id = ? ORDER BY ALL",
        [run_id],
    )
    sizes = []
    query = store.query

    def counted(sql, params=None):
        rows = query(sql, params)
        sizes.append(len(rows))
        return rows

    monkeypatch.setattr(queries, "ANSWERS_A_PAGE", 64)
    monkeypatch.setattr(store, "query", counted)
    pages = list(queries.stored_answers(store, run_id))
    answers = sorted((a.model, a.case_id, a.sample_index, a.raw_text, a.case.input)
                     for page in pages for a in page)  # fmt: skip
    assert answers == stored and len(stored) == 600
    assert sizes[0] == 1 and len(sizes) == 1 + 10  # the count, then ten pages
    assert [len(page) for page in pages] == sizes[1:]
    assert all(0 < size < 2 * 64 for size in sizes[1:])
    cases = [case_id for case_id, _, _ in queries.run_cases(store, run_id)]
    assert sorted(cases) == sorted({case_id for _, case_id, *_ in stored})
    # every grade changes: each page's are stored before the next page is read
    monkeypatch.setattr(store, "query", query)
    store.query("UPDATE responses SET outcome = 'wrong'")
    written = []
    update = store.update_grades
    monkeypatch.setattr(store, "update_grades", lambda run, rows: written.append(len(rows))
                        or update(run, rows))  # fmt: skip
    from numerate.results.regrade import regrade_run

    assert regrade_run(store, run_id) == {("wrong", "correct"): 600}
    assert written == [len(page) for page in pages]
    assert store.query("SELECT count(*) FROM responses WHERE outcome = 'correct'")[0][0] == 600
    Store.close_all()


def test_cache_clear(tmp_path):
    db = str(tmp_path / "c.duckdb")
    assert runner.invoke(app, ["run", "--db", db, "--model", "baseline:oracle"]).exit_code == 0
    Store.close_all()
    for before in ("2000-01-01", "2000-01-01T10:00", "2000-01-01T10:00+02:00"):
        result = runner.invoke(app, ["cache", "clear", "--db", db, "--before", before])
        assert result.stdout.startswith("removed 0 stored answer(s)")
    result = runner.invoke(app, ["cache", "clear", "--db", db, "--model", "baseline:oracle"])
    assert result.exit_code == 0 and result.stdout.startswith("removed 600 stored answer(s)")
    bad = runner.invoke(app, ["cache", "clear", "--db", db, "--before", "yesterday"])
    assert bad.exit_code == 2 and "--before 'yesterday'" in bad.stderr
    no_day = runner.invoke(app, ["cache", "clear", "--db", db, "--before", "2026-02-30"])
    assert no_day.exit_code == 2  # a date of its shape: "expected a date" said nothing
    assert no_day.stderr.strip() == "error: --before '2026-02-30': day is out of range for month"
    for zone in ("+99:00", "-24:00", "+05:75"):  # Python's words named a timedelta
        far = runner.invoke(
            app, ["cache", "clear", "--db", db, "--before", f"2026-01-01T10:00{zone}"]
        )
        assert far.exit_code == 2 and far.stderr.strip() == (
            f"error: --before '2026-01-01T10:00{zone}': the zone's offset {zone} is out of range "
            "(from -23:59 to +23:59)"
        )
    for other in ("2026-W01", "20260101", "2026-12-01T15", "2026-12-01T15:51:40,5", "٢٠٢٦-٠١-٠١"):
        read = runner.invoke(app, ["cache", "clear", "--db", db, "--before", other])
        assert read.exit_code == 2  # Python reads them (a week, a compact date): not said to
        assert f"--before {other!r}: expected a date, YYYY-MM-DD" in read.stderr  # be taken
    blank = runner.invoke(app, ["cache", "clear", "--db", db, "--model", " "])
    assert blank.exit_code == 2 and "--model ' ': give an endpoint model id" in blank.stderr
    typo = runner.invoke(app, ["cache", "clear", "--db", db, "--model", "baseline:orcale"])
    assert typo.exit_code == 2  # "removed 0" before
    assert (
        "--model 'baseline:orcale': no run in" in typo.stderr and "baseline:oracle" in typo.stderr
    )
    store = Store.open(db)
    assert store.query("SELECT count(*) FROM responses")[0][0] == 600  # results stay
    Store.close_all()
