"""Issue 38, parts 5 to 7, end to end: a sweep of the oracle, a reasoning model (the fake
endpoint's reasoning mode: a reasoning field, reasoning tokens, loops, truncation at
max_tokens) and the uniform guess, then each figure where people look (`report --tiers`, the
run's Prefect summary, `numerate view`, `numerate plot`) against values computed here by hand
from the stored answers."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections import defaultdict

import duckdb
import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from numerate.cli import app
from numerate.results.artifacts import run_markdown
from numerate.store import Store
from numerate.store.reader import Reader
from numerate.view.app import create_app
from tests.cli.test_run import write_config
from tests.fake_openai import FakeOpenAI, Reply, prompt_of

runner = CliRunner()
LOOP = "Wait, let me recount the items one more time from the start. "


def thinker(body) -> Reply:
    """A third of the cases: a reasoning that loops, truncated at max_tokens; the others a
    short reasoning (its tokens reported) and the answer 3."""
    digest = hashlib.sha256(prompt_of(body).encode()).digest()
    if digest[0] % 3 == 0:
        return Reply(None, finish_reason="length", reasoning=LOOP * 30, reasoning_tokens=64)
    return Reply("Answer: 3", reasoning=f"I count {digest[1]} things, then add.",
                 reasoning_tokens=5 + digest[1] % 7)  # fmt: skip


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    folder = tmp_path_factory.mktemp("standing")
    db = folder / "r.duckdb"
    with FakeOpenAI(thinker) as server:
        models = [
            {"name": "oracle", "model": "baseline:oracle"},
            {"name": "thinker", "model": "fake", "base_url": server.base_url},
            {"name": "random", "model": "baseline:random"},
        ]
        manifolds = [{"manifold": "objects", "count": 48}, {"manifold": "shuffle", "count": 48}]
        config = write_config(folder / "run.yaml", models, manifolds)
        done = runner.invoke(app, ["run", "--config", str(config), "--db", str(db)])
    assert done.exit_code == 0, done.output
    Store.close_all()
    with duckdb.connect(str(db), read_only=True) as con:
        run_id = con.execute("SELECT run_id FROM runs").fetchone()[0]
        answers = con.execute(
            "SELECT r.model, r.manifold, r.point_key, r.case_id, r.outcome, c.chance "
            "FROM responses r JOIN cases c USING (case_id)"
        ).fetchall()
    return db, run_id, answers


def by_hand(answers):
    """Scores and tiers from the answers, by the definitions of docs/statistics.md."""
    points = defaultdict(list)
    for model, manifold, point, _, outcome, chance in answers:
        points[(model, manifold, point)].append((outcome, chance))
    per_manifold = defaultdict(list)
    accuracy = defaultdict(list)
    for (model, manifold, _), rows in points.items():
        n = len(rows)
        correct = sum(o == "correct" for o, _ in rows) / n
        truncated = sum(o == "truncated" for o, _ in rows) / n
        chance = sum(c for _, c in rows) / n
        per_manifold[(model, manifold)].append((correct - chance) / (1 - chance) - truncated)
        accuracy[(model, "*")].append(correct)
        accuracy[(model, manifold)].append(correct)
    scores = {}
    for model in {m for m, _ in per_manifold}:
        means = [sum(v) / len(v) for (m, _), v in per_manifold.items() if m == model]
        scores[model] = math.exp(sum(math.log(max(x, 0.01)) for x in means) / len(means))
    # tiers over every point: pooled McNemar counts (equal counts per point), Holm, greedy
    right = {(m, case): o == "correct" for m, _, _, case, o, _ in answers}
    models = sorted(scores)
    p = {}
    for a, b in itertools.combinations(models, 2):
        cases = {case for m, case in right if m == a}
        lost = sum(right[(a, c)] and not right[(b, c)] for c in cases)
        gained = sum(right[(b, c)] and not right[(a, c)] for c in cases)
        d = lost + gained
        tail = sum(math.comb(d, k) for k in range(min(lost, gained) + 1)) / 2**d if d else 1.0
        p[(a, b)] = (min(1.0, 2 * tail), d)
    family = sorted((v[0], k) for k, v in p.items() if v[1] > 0)
    holm, running = {}, 0.0
    for i, (value, key) in enumerate(family):
        running = max(running, min(1.0, (len(family) - i) * value))
        holm[key] = running
    differ = {frozenset(k) for k, v in holm.items() if v < 0.05}
    mean = {m: sum(accuracy[(m, "*")]) / len(accuracy[(m, "*")]) for m in models}
    tiers, tier, members = {}, 0, []
    for m in sorted(models, key=lambda m: (-mean[m], m)):
        if not members or any(frozenset((m, o)) in differ for o in members):
            tier, members = tier + 1, []
        members.append(m)
        tiers[m] = tier
    return scores, tiers


def test_report_tiers_shows_the_scores_and_tiers_computed_by_hand(swept):
    db, _, answers = swept
    assert {o for *_, o, _ in answers} >= {"correct", "truncated", "wrong"}
    scores, tiers = by_hand(answers)
    shown = runner.invoke(app, ["report", "--db", str(db), "--tiers", "--format", "json"])
    assert shown.exit_code == 0, shown.output
    found = json.loads(shown.stdout)  # one document: a first-contact review found four
    assert list(found) == ["summaries", "scores", "tiers", "pairs"]
    score_rows, tier_rows, pair_rows = found["scores"], found["tiers"], found["pairs"]
    for row in score_rows:
        assert float(row["score"]) == pytest.approx(scores[row["model"]], abs=1e-9)
        assert float(row["ci_low"]) <= float(row["score"]) <= float(row["ci_high"])
        assert int(row["tier"]) == tiers[row["model"]]
    assert [r["model"] for r in score_rows] == sorted(scores, key=lambda m: (-scores[m], m))
    assert {r["model"]: int(r["tier"]) for r in tier_rows if r["scope"] == "*"} == tiers
    assert {(r["scope"], r["base_model"], r["new_model"]) for r in pair_rows} >= {
        ("*", "oracle", "random"), ("objects", "oracle", "thinker"),
        ("shuffle", "random", "thinker"),
    }  # fmt: skip
    assert all(r["detectable_difference"] is not None for r in pair_rows)
    refused = runner.invoke(app, ["report", "--db", str(db), "--tiers", "--format", "csv"])
    assert refused.exit_code == 2 and refused.stdout == ""
    assert "--format csv holds one table, and --tiers adds more: give --format json" in (
        refused.stderr
    )
    table = runner.invoke(app, ["report", "--db", str(db), "--tiers"])
    assert table.exit_code == 0 and "score [95% CI]" in table.stdout
    # a hostile pass: --model narrowed the summaries, and the tiers still listed every model
    # without a word; they rank every model (a tier depends on those beside it), and say so
    narrowed = runner.invoke(app, ["report", "--db", str(db), "--tiers", "--model", "oracle",
                                   "--format", "json"])  # fmt: skip
    assert narrowed.exit_code == 0, narrowed.output
    assert {r["model"] for r in json.loads(narrowed.stdout)["scores"]} == set(scores)
    assert "scores and tiers rank every model and manifold of the run" in narrowed.stderr


def test_an_answer_stored_without_its_case_is_said_in_a_line_by_tiers_and_regrade(swept, tmp_path):
    """Before: `report --tiers` and `regrade` of such a run ended in a ValueError traceback."""
    source, run_id, _ = swept
    db = tmp_path / "damaged.duckdb"
    db.write_bytes(source.read_bytes())
    with duckdb.connect(str(db)) as con:
        (case_id,) = con.execute("SELECT min(case_id) FROM responses").fetchone()
        con.execute("DELETE FROM cases WHERE case_id = ?", [case_id])
    for command in (["report", "--tiers"], ["regrade", "--run", run_id]):
        done = runner.invoke(app, [*command, "--db", str(db)])
        Store.close_all()
        assert done.exit_code == 2, done.output
        assert isinstance(done.exception, SystemExit), done.exception
        assert done.stderr.strip().splitlines()[-1] == (
            f"error: run {run_id}: an answer for case {case_id!r} is stored without its case "
            "(the `cases` table lost rows: a damaged database, or rows deleted by hand); its "
            "figures cannot be computed"
        )


def test_the_summary_artifact_and_the_viewer_show_score_interval_and_tier(swept):
    db, run_id, answers = swept
    scores, tiers = by_hand(answers)
    with Reader.open(str(db)) as reader:
        summary = run_markdown(reader, run_id, str(db))
    for model, score in scores.items():
        assert re.search(rf"\| {model} \| .* \| {score:.3f} \| \[\d\.\d{{3}}, \d\.\d{{3}}\] "
                         rf"\| {tiers[model]} \|", summary), summary  # fmt: skip
    client = TestClient(create_app(str(db)))
    page = client.get(f"/run/{run_id}").text
    assert "score [95% interval]" in page
    for model, score in scores.items():
        assert re.search(rf'{model}</th>\s*<td class="estimate"><span class="acc">{score:.3f}'
                         rf'</span>.*?</td>\s*<td class="num">{tiers[model]}</td>',
                         page, re.S), model  # fmt: skip


def test_the_viewer_shows_the_token_budget_and_links_the_loops_to_their_cases(swept):
    db, run_id, _ = swept
    with duckdb.connect(str(db), read_only=True) as con:
        looped = con.execute(
            "SELECT case_id, point_key, manifold, reasoning_ratio FROM responses WHERE "
            "model = 'thinker' AND reasoning LIKE 'Wait, let me recount%' ORDER BY "
            "reasoning_ratio DESC, case_id LIMIT 10"
        ).fetchall()
        truncated = con.execute(
            "SELECT manifold, count(*) FROM responses WHERE model = 'thinker' AND outcome = "
            "'truncated' GROUP BY manifold"
        ).fetchall()
    assert looped and truncated
    client = TestClient(create_app(str(db)))
    page = client.get(f"/run/{run_id}").text
    assert "The reasoning that repeats itself most" in page
    shown = re.findall(r'href="(/run/[^"]+/case\?[^"]+)">([^<]+)</a>', page)
    assert [case for _, case in shown] == [case for case, *_ in looped]
    assert all(client.get(link.replace("&amp;", "&")).status_code == 200 for link, _ in shown)
    for manifold, count in truncated:
        page = client.get(f"/run/{run_id}/manifold/{manifold}").text
        assert "Token budget" in page
        assert re.search(rf"thinker: [\d,]+ answers, {count:,} truncated", page)
        with duckdb.connect(str(db), read_only=True) as con:  # the manifold's own 10 loops
            own = con.execute(
                "SELECT case_id FROM responses WHERE manifold = ? AND reasoning_ratio IS NOT "
                "NULL ORDER BY reasoning_ratio DESC, case_id LIMIT 10",
                [manifold],
            ).fetchall()
        listed = re.findall(r'href="/run/[^"]+/case\?[^"]+">([^<]+)</a>', page)
        assert listed == [case for (case,) in own]
    plot = runner.invoke(app, ["plot", run_id, "--db", str(db), "--kind", "budget",
                               "--out", str(db.parent / "budget.png")])  # fmt: skip
    assert plot.exit_code == 0, plot.output
    assert (db.parent / "budget.png").read_bytes().startswith(b"\x89PNG")


def test_several_samples_a_case_are_grouped_by_case(tmp_path):
    """With `samples: 3` the bootstrap's unit is the case: the standing reads each point's
    cases by their (correct, truncated, scored) counts, as counted here from the answers; and
    the tiers' pairs are cases too (each model's first answer), never a case's samples."""
    from numerate.results.standing import read

    models = [{"name": "guess", "model": "baseline:random", "sampling": {"samples": 3}},
              {"name": "sure", "model": "baseline:oracle", "sampling": {"samples": 3}}]  # fmt: skip
    config = write_config(tmp_path / "s.yaml", models, [{"manifold": "shuffle", "count": 30}])
    db = tmp_path / "s.duckdb"
    done = runner.invoke(app, ["run", "--config", str(config), "--db", str(db)])
    assert done.exit_code == 0, done.output
    Store.close_all()
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT r.point_key, r.case_id, r.outcome, c.chance FROM responses r "
            "JOIN cases c USING (case_id) WHERE r.model = 'guess'"
        ).fetchall()
        first = dict(con.execute(
            "SELECT case_id, outcome = 'correct' FROM responses WHERE model = 'guess' "
            "AND sample_index = 0"
        ).fetchall())  # fmt: skip
    cases = defaultdict(list)
    for point, case, outcome, chance in rows:
        cases[(point, case)].append((outcome, chance))
    expected = defaultdict(lambda: defaultdict(int))
    for (point, _), answers in cases.items():
        kind = (sum(o == "correct" for o, _ in answers), sum(o == "truncated" for o, _ in answers),
                len(answers))  # fmt: skip
        expected[point][kind] += 1
    assert max(len(a) for a in cases.values()) == 3
    with Reader.open(str(db)) as reader:
        run_id = reader.query("SELECT run_id FROM runs")[0][0]
        points, pairs = read(reader, run_id)
    for row in pairs.iter_rows(named=True):  # guess against the oracle, one pair a case
        in_point = [case for point, case in cases if point == row["point_key"]]
        assert row["n"] == len(in_point)
        assert (row["base_model"], row["new_model"], row["lost"]) == ("guess", "sure", 0)
        assert row["gained"] == len(in_point) - sum(first[case] for case in in_point)
    found = points["guess"]  # in order of point key (one manifold)
    for point, key in zip(found, sorted(expected), strict=True):
        got = dict(zip(zip(point.correct, point.truncated, point.scored, strict=True),
                       point.cases, strict=True))  # fmt: skip
        assert got == expected[key]
        assert list(zip(point.correct, point.truncated, point.scored, strict=True)) == sorted(got)
        answers = [a for (p, _), listed in cases.items() if p == key for a in listed]
        assert point.chance == pytest.approx(sum(c for _, c in answers) / len(answers))
    assert any(0 < k[0] < 3 for point in expected for k in expected[point])  # mixed cases


def test_a_run_of_two_models_compares_them(tmp_path):
    """A fourth mutation sweep: with pairs counted only from three models on, a run of two
    put both in tier 1, untested, and every test passed."""
    from numerate.results.standing import standing
    from numerate.store.queries import POOLED

    db = tmp_path / "two.duckdb"
    models = [{"name": "oracle", "model": "baseline:oracle"},
              {"name": "random", "model": "baseline:random"}]  # fmt: skip
    config = write_config(tmp_path / "two.yaml", models, [{"manifold": "objects", "count": 40}])
    done = runner.invoke(app, ["run", "--config", str(config), "--db", str(db)])
    Store.close_all()
    assert done.exit_code == 0, done.output
    with Reader.open(str(db)) as reader:
        (run_id,) = reader.query("SELECT run_id FROM runs")[0]
        found = standing(reader, run_id)
    pooled = found.pairs.filter(found.pairs["scope"] == POOLED).to_dicts()
    assert [(p["base_model"], p["new_model"], p["differ"]) for p in pooled] == [
        ("oracle", "random", True)
    ]
    assert {s["model"]: s["tier"] for s in found.scores.to_dicts()} == {"oracle": 1, "random": 2}
