"""NumGen at endpoints: the loopback fake Images API (it draws exactly n shapes) counted by the
blob counter and by the fake vision model, with the fakes' faults, and recounts."""

import asyncio
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from numerate.flows.numgen import numgen, numgen_recount
from numerate.grading.verdict import RunFailed
from tests.fake_openai import FakeOpenAI, ImageReply, Reply

pytestmark = pytest.mark.usefixtures("prefect_harness")

VLM = "vlm:fake-vision"


@pytest.fixture
def endpoint():
    with FakeOpenAI() as server:
        yield server


def config(endpoint, tmp_path, **extra):
    return {
        "generator": "api:fake-image",
        "detector": ["blobs", VLM],
        "images_dir": str(tmp_path),
        "prompts": {"per_number": 2},
        "generation": {"base_url": endpoint.base_url, "size": "256x256", "concurrency": 8},
        "detection": {"base_url": endpoint.base_url, "concurrency": 8},
        **extra,
    }


def query(db, sql, parameters=()):
    with duckdb.connect(db, read_only=True) as con:
        return con.execute(sql, list(parameters)).fetchall()


def run(settings, db):
    return asyncio.run(numgen(settings, db, "local"))


def test_an_images_api_counted_by_blobs_and_a_vision_model_scores_100_percent(
    endpoint, tmp_path, db_path
):
    result = run(config(endpoint, tmp_path), db_path)
    assert (result["accuracy"], result["n"], result["errors"], result["refused"]) == (1.0, 20, 0, 0)
    [recount] = result["recounts"]
    assert (recount["accuracy"], recount["n"], recount["unparsed"]) == (1.0, 20, 0)
    assert len(endpoint.image_requests) == 20 and endpoint.vision_requests == 20
    seeds = {request["seed"] for request in endpoint.image_requests}
    assert len(seeds) == 20  # each image its own seed, sent to the server
    # both counts of every image are stored, in two runs linked by source_run_id
    rows = query(
        db_path,
        "SELECT a.count, b.count, b.answer, i.sha256 FROM numgen_detections a "
        "JOIN numgen_runs r ON r.source_run_id = a.run_id "
        "JOIN numgen_detections b ON b.run_id = r.run_id AND b.prompt_id = a.prompt_id "
        "JOIN numgen_images i ON i.run_id = a.run_id AND i.prompt_id = a.prompt_id",
    )
    assert len(rows) == 20 and all(a == b for a, b, _, _ in rows)
    assert all("Answer:" in answer and len(sha) == 64 for _, _, answer, sha in rows)
    detectors = query(db_path, "SELECT detector, source_run_id IS NULL FROM numgen_runs "
                               "ORDER BY started_at")  # fmt: skip
    assert detectors == [("blobs", True), (VLM, False)]
    # a repeated run asks for no image it already stored
    again = run(config(endpoint, tmp_path), db_path)
    assert len(endpoint.image_requests) == 20 and again["accuracy"] == 1.0


def test_with_the_fakes_faults_every_image_is_accounted_for(endpoint, tmp_path, db_path):
    asked: dict[str, int] = {}
    kinds = set()

    def faults(body):
        prompt = body["prompt"]
        asked[prompt] = asked.get(prompt, 0) + 1
        kind = body["seed"] % 7  # each image's own seed: the same faults every run
        kinds.add(kind)
        first = asked[prompt] == 1
        if "7 " in prompt:
            return ImageReply.refusal()  # refused every time: its own outcome
        faults_first = {
            0: ImageReply(429, headers={"Retry-After": "0.05"}),
            1: ImageReply(500),
            2: ImageReply(b64="not base64 at all!"),
            3: ImageReply(delay_s=3.0),  # past the timeout: asked again
            4: ImageReply(trickle_s=3.0),  # a slow body, past the timeout: asked again
        }
        if first and kind in faults_first:
            return faults_first[kind]
        if kind == 5:
            return ImageReply(size=128)  # another size than asked: kept, its size stored
        return ImageReply(as_url=kind == 6)

    vision_asked = [0]

    def vision(body):
        vision_asked[0] += 1
        if vision_asked[0] % 7 == 0:
            return Reply(status=500)  # retried
        if vision_asked[0] % 11 == 0:
            return Reply(content="So many, I lost count.")  # unparsed: never 0
        return endpoint.count_drawn(body)

    endpoint.image_responder = faults
    endpoint.vision = vision
    settings = config(endpoint, tmp_path, prompts={"per_number": 3})
    settings["generation"] |= {"timeout_s": 1.0}
    with pytest.raises(RunFailed) as ended:  # the vision model said no number of some images
        run(settings, db_path)
    result = ended.value.result
    assert kinds == set(range(7))  # every fault was served
    [recount] = result["recounts"]
    assert result["status"] == "finished" and recount["status"] == "degraded"
    refused = 3  # the three prompts of 7 objects
    assert result["refused"] == refused and result["errors"] == 0
    # every image made was counted right; a refusal is the generator's answer, not correct
    assert result["n"] == 30 - refused and result["accuracy"] == pytest.approx(27 / 30)
    assert recount["refused"] == refused
    assert recount["n"] + recount["unparsed"] == 30 - refused
    assert recount["accuracy"] == pytest.approx(recount["n"] / (recount["n"] + refused))
    assert recount["unparsed"] >= 1 and recount["errors"] == 0  # the 500s were asked again
    rows = query(db_path, "SELECT count(*), count(path), sum(refused::INT), count(DISTINCT width) "
                          "FROM numgen_images WHERE run_id = ?", [result["run_id"]])  # fmt: skip
    assert rows == [(30, 30 - refused, refused, 2)]
    leaderboard = query(db_path, "SELECT run_id, n, refused, errors, accuracy FROM "
                                 "numgen_leaderboard ORDER BY run_id")  # fmt: skip
    assert (result["run_id"], 30 - refused, refused, 0, result["accuracy"]) in leaderboard
    unparsed = query(db_path, "SELECT count(*) FROM numgen_detections WHERE unparsed AND "
                              "count IS NULL AND run_id = ?", [recount["run_id"]])  # fmt: skip
    assert unparsed == [(recount["unparsed"],)]


def test_a_recount_asks_for_no_image_and_links_its_run(endpoint, tmp_path, db_path):
    settings = config(endpoint, tmp_path, detector="blobs")
    del settings["detection"]  # the blob counter has no endpoint
    first = run(settings, db_path)
    asked = len(endpoint.image_requests)
    detection = {"base_url": endpoint.base_url}
    from numerate.numgen.detection import DetectionSettings

    [again] = asyncio.run(
        numgen_recount(first["run_id"], VLM, DetectionSettings(**detection), db_path, "local")
    )
    assert len(endpoint.image_requests) == asked  # no generation request
    assert again["accuracy"] == 1.0
    links = query(db_path, "SELECT source_run_id, detector, status FROM numgen_runs "
                           "WHERE run_id = ?", [again["run_id"]])  # fmt: skip
    assert links == [(first["run_id"], VLM, "finished")]


def test_a_recount_of_an_image_replaced_since_it_was_made_is_that_image_s_error(
    endpoint, tmp_path, db_path
):
    """A hostile pass: with one image's file replaced by another's, a recount stored the count
    of the other image as this one's, beside this one's recorded SHA-256 (accuracy 0.9, exit
    0). An image is counted only when it is the image its run recorded."""
    import shutil

    settings = config(endpoint, tmp_path, detector="blobs")
    del settings["detection"]
    first = run(settings, db_path)
    (one, target, path), (other_path,) = query(
        db_path, "SELECT prompt_id, target, path FROM numgen_images WHERE run_id = ? "
        "ORDER BY target LIMIT 1", [first["run_id"]]
    )[0], query(db_path, "SELECT path FROM numgen_images WHERE run_id = ? ORDER BY target DESC "
                "LIMIT 1", [first["run_id"]])[0]  # fmt: skip
    shutil.copyfile(other_path, path)  # the most objects drawn, where the fewest were
    from numerate.grading.verdict import RunFailed
    from numerate.numgen.detection import DetectionSettings

    with pytest.raises(RunFailed) as ended:  # 1 of 20 images is more than 2%: degraded
        asyncio.run(numgen_recount(
            first["run_id"], VLM, DetectionSettings(base_url=endpoint.base_url), db_path, "local"
        ))  # fmt: skip
    [again] = ended.value.result
    assert str(ended.value) == (
        f"NumGen run {again['run_id']} degraded: 1 of 20 images have no count (1 for an error; "
        "5.0% > max_error_rate 2.0%)"
    )
    [(count, error)] = query(db_path, "SELECT count, error FROM numgen_detections WHERE "
                             "run_id = ? AND prompt_id = ?", [again["run_id"], one])  # fmt: skip
    assert count is None and f"image {path}: not the image the run made" in error
    assert (again["errors"], again["n"], again["accuracy"]) == (1, 19, 1.0), (target, again)


def test_a_recount_reads_no_image_outside_its_run_s_images_folder(endpoint, tmp_path, db_path):
    """A hostile pass: a path edited into the database (with the file's SHA-256) to a file
    outside the run's images folder was read and sent to the vision model. It is not read;
    that image has no count, and says why."""
    import shutil

    settings = config(endpoint, tmp_path, detector="blobs")
    del settings["detection"]
    first = run(settings, db_path)
    [(one, path)] = query(db_path, "SELECT prompt_id, path FROM numgen_images WHERE run_id = ? "
                          "ORDER BY target LIMIT 1", [first["run_id"]])  # fmt: skip
    outside = tmp_path / "elsewhere" / "secret.png"  # absolute, outside images_dir
    outside.parent.mkdir()
    shutil.copyfile(path, outside)
    with duckdb.connect(db_path) as db:
        db.execute("UPDATE numgen_images SET path = ? WHERE run_id = ? AND prompt_id = ?",
                   [str(outside), first["run_id"], one])  # fmt: skip
    seen = []
    endpoint.vision = lambda body: seen.append(body) or endpoint.count_drawn(body)
    from numerate.grading.verdict import RunFailed
    from numerate.numgen.detection import DetectionSettings

    with pytest.raises(RunFailed) as ended:  # 1 of 20 images is more than 2%: degraded
        asyncio.run(numgen_recount(
            first["run_id"], VLM, DetectionSettings(base_url=endpoint.base_url), db_path, "local"
        ))  # fmt: skip
    [again] = ended.value.result
    assert len(seen) == 19  # the other images, each once
    [(count, error)] = query(db_path, "SELECT count, error FROM numgen_detections WHERE "
                             "run_id = ? AND prompt_id = ?", [again["run_id"], one])  # fmt: skip
    images = Path(path).parents[2] / "images"  # <images_dir>/images/<generator>/<file>
    assert count is None and error == (
        f"no image: its recorded path {outside} is not below the run's images ({images}): not read"
    )
    stored = query(db_path, "SELECT count(path) FROM numgen_images WHERE run_id = ?",
                   [again["run_id"]])  # fmt: skip
    assert stored == [(19,)]  # the recount keeps no path outside its images folder


def test_a_recount_of_a_run_that_recorded_relative_paths_reads_them_where_it_ran(
    endpoint, tmp_path, db_path, monkeypatch
):
    """A review: a run made before image paths were recorded absolute (relative to where it
    ran) lost every image in a recount once recounts were confined to the images folder."""
    settings = config(endpoint, tmp_path, detector="blobs")
    del settings["detection"]
    first = run(settings, db_path)
    with duckdb.connect(db_path) as db:  # `images/<generator>/<file>`, as such a run wrote it
        db.execute("UPDATE numgen_images SET path = substr(path, ?) WHERE run_id = ?",
                   [len(str(tmp_path)) + 2, first["run_id"]])  # fmt: skip
    assert query(db_path, "SELECT min(path) FROM numgen_images")[0][0].startswith("images/")
    monkeypatch.chdir(tmp_path)
    from numerate.numgen.detection import DetectionSettings

    [again] = asyncio.run(numgen_recount(
        first["run_id"], VLM, DetectionSettings(base_url=endpoint.base_url), db_path, "local"
    ))  # fmt: skip
    assert (again["errors"], again["n"], again["accuracy"]) == (0, 20, 1.0)


def test_the_viewer_and_the_report_show_where_two_counters_disagree(endpoint, tmp_path, db_path):
    from fastapi.testclient import TestClient

    from numerate.view.app import create_app

    def off_by_some(body):  # the vision model miscounts every image of 9 by 3
        right = endpoint.count_drawn(body)
        if "Answer: 9" in right.content:
            return Reply(content="Answer: 12")
        return right

    endpoint.vision = off_by_some
    result = run(config(endpoint, tmp_path), db_path)
    [recount] = result["recounts"]
    assert recount["accuracy"] == pytest.approx(18 / 20)
    page = TestClient(create_app(db_path)).get(f"/numgen/{recount['run_id']}").text
    assert "Agreement with the first count" in page and result["run_id"] in page
    assert "<b>0.900</b>" in page  # 18 of 20 counted alike
    apart = page.split("Counted most apart")[1]
    rows = apart.split("<tbody>")[1].split("</tbody>")[0].split("<tr>")[1:]
    assert len(rows) == 2  # the two images of 9: 9 by blobs, 12 by the vision model
    for row in rows:
        cells = [cell.split("</td>")[0] for cell in row.split('<td class="num">')[1:]]
        assert cells == ["9", "9", "12"]
        assert '<img class="thumb"' in row
    from numerate.results.numgen import agreement_text
    from numerate.store import Store

    said = agreement_text(Store.open(db_path), "markdown")
    assert "| 0.900 |" in said and "| 9 | 9 | 12 |" in said.replace("  ", " ")
    # and the linked run's Prefect summary artifact
    from numerate.results.artifacts import artifact_key
    from tests.numgen.conftest import latest_artifact

    summary = asyncio.run(latest_artifact(artifact_key(f"numgen-api:fake-image-{VLM}", "summary")))
    assert summary is not None and recount["run_id"] in summary.data
    assert f"Agreement with run `{result['run_id']}` (blobs)" in summary.data
    assert "exact agreement: 0.900" in summary.data and "images counted most apart" in summary.data


def test_an_endpoint_that_refuses_the_key_fails_the_run_with_the_cause(tmp_path, db_path):
    from numerate.grading.verdict import RunFailed

    with FakeOpenAI(api_key="the-right-key") as server:
        settings = config(server, tmp_path, detector="blobs")
        del settings["detection"]
        with pytest.raises(RunFailed, match="api:fake-image was stopped: endpoint refused the key"):
            run(settings, db_path)
        asked = len(server.authorizations)
    assert asked <= 2 * 10  # the breaker stopped it after 10 refusals (a batch retried once)
    assert query(db_path, "SELECT status FROM numgen_runs") == [("failed",)]


def test_calibrations_say_which_counter_to_trust_number_by_number(endpoint, tmp_path, db_path):
    from numerate.numgen.config import calibration_config
    from numerate.results.numgen import trust_frame
    from numerate.store import Store

    def off_at_nine(body):
        right = endpoint.count_drawn(body)
        return Reply(content="Answer: 12") if right.content.endswith(" 9") else right

    endpoint.vision = off_at_nine
    for counter, extra in (("blobs", {}), (VLM, {"detection": {"base_url": endpoint.base_url}})):
        settings = calibration_config(counter, 10, images_dir=str(tmp_path), **extra)
        run(settings.model_dump(mode="json"), db_path)
    trust = trust_frame(Store.open(db_path), "blobs", VLM)
    assert trust.height == 10
    by_target = {row["target"]: row for row in trust.to_dicts()}
    assert by_target[9] == {"target": 9, "blobs": 1.0, VLM: 0.0, "trust": "blobs"}
    assert {row["trust"] for t, row in by_target.items() if t != 9} == {"either"}
    assert trust_frame(Store.open(db_path), "blobs", "vlm:never-calibrated").is_empty()


def test_refusals_are_an_outcome_not_a_failure_and_trip_no_breaker(endpoint, tmp_path, db_path):
    endpoint.image_responder = lambda body: ImageReply.refusal()  # every prompt, 20 > 10
    settings = config(endpoint, tmp_path, detector="blobs")
    del settings["detection"]
    result = run(settings, db_path)
    assert (result["refused"], result["errors"], result["n"]) == (20, 0, 0)
    assert result["accuracy"] == 0.0  # 20 refusals: none right, not "no accuracy"
    prompts = [request["prompt"] for request in endpoint.image_requests]
    assert len(prompts) == len(set(prompts)) == 20  # each asked once: a refusal is an answer


def test_a_count_too_large_is_20_plus_and_a_numeral_past_counting_is_unparsed(
    endpoint, tmp_path, db_path
):
    def huge(body):
        n = endpoint.count_drawn(body).content.rsplit(" ", 1)[-1]
        said = {"1": "99999999999999999999", "2": "3000000000", "3": "21"}.get(n, n)
        return Reply(content=f"Answer: {said}")

    endpoint.vision = huge
    # the two images of 1 are in no metric: 10% of the run, which it allows (not degraded)
    result = run(config(endpoint, tmp_path, max_error_rate=0.1), db_path)
    [recount] = result["recounts"]
    assert recount["unparsed"] == 2 and recount["status"] == "finished"
    rows = query(
        db_path,
        "SELECT i.target, d.raw_count, d.count, d.overflow FROM numgen_images i JOIN "
        "numgen_detections d USING (run_id, prompt_id) WHERE run_id = ? AND i.target IN (1, 2, 3) "
        "ORDER BY i.target",
        [recount["run_id"]],
    )
    assert (
        rows
        == [(1, None, None, None)] * 2 + [(2, 2**31 - 1, 20, True)] * 2 + [(3, 21, 20, True)] * 2
    )


def test_a_link_planted_at_an_images_name_is_replaced_never_written_or_read_through(
    endpoint, tmp_path, db_path
):
    from numerate.numgen.batches import image_folder
    from numerate.numgen.config import NumGenConfig
    from numerate.numgen.prompts import make_prompts

    settings = config(endpoint, tmp_path, detector="blobs")
    del settings["detection"]
    parsed = NumGenConfig.model_validate(settings)
    folder = image_folder(parsed)
    folder.mkdir(parents=True)
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"not yours")
    first = make_prompts(parsed.prompts)[0]
    (folder / f"{first.prompt_id}.png").symlink_to(outside)
    result = run(settings, db_path)
    assert result["accuracy"] == 1.0 and result["errors"] == 0
    assert outside.read_bytes() == b"not yours"
    assert not (folder / f"{first.prompt_id}.png").is_symlink()
    assert len(endpoint.image_requests) == 20  # the link was no image already made


def test_an_image_at_a_url_past_the_read_bound_is_not_asked_for_again(
    endpoint, tmp_path, db_path, monkeypatch
):
    """Before: an image at the answer's url larger than the bound an answer's body is read to
    was "malformed answer: cannot fetch the image's url: AnswerTooLarge", and each was made
    (and paid for) again, up to max_retries times."""
    from numerate.endpoints import limits
    from numerate.grading.verdict import RunFailed

    monkeypatch.setattr(limits, "MAX_BODY_BYTES", 1000)  # the answer's JSON: 200 bytes
    asked: list[str] = []

    def at_a_url(body):
        asked.append(body["prompt"])
        return ImageReply(as_url=True)

    endpoint.image_responder = at_a_url
    settings = config(endpoint, tmp_path, detector="blobs", prompts={"per_number": 1})
    del settings["detection"]
    settings["generation"] |= {"max_retries": 3}
    said = "the image at the answer's url larger than 1,000 bytes: not read"
    with pytest.raises(RunFailed, match=said):
        run(settings, db_path)
    # each image once a try of its batch (a batch whose every image failed is tried twice,
    # numerate.tasks.numgen.BATCH_RETRIES), not max_retries + 1 = 4 times
    assert Counter(asked) == dict.fromkeys(asked, 2) and len(set(asked)) == 10


def test_an_endpoint_where_every_image_fails_fails_the_run(endpoint, tmp_path, db_path):
    """Before: every request failing (a dead endpoint, max_retries 0) stored a finished run
    of 0 counted images, and `numgen run` exited 0."""
    from numerate.grading.verdict import RunFailed
    from numerate.tasks.numgen import BATCH_RETRIES

    endpoint.image_responder = lambda body: ImageReply(500, error_message="down\nfor good")
    settings = config(endpoint, tmp_path, detector="blobs")
    del settings["detection"]
    settings["generation"] |= {"max_retries": 0}
    # the server's line break written escaped: the run's error is one line (a hostile pass)
    said = r"api:fake-image: all 10 images of a batch failed: HTTP 500: down\\nfor good"
    with pytest.raises(RunFailed, match=said):
        run({**settings, "prompts": {"per_number": 1}}, db_path)
    assert query(db_path, "SELECT status FROM numgen_runs") == [("failed",)]
    # once each a try of its batch: the client retries nothing itself (max_retries 0)
    assert len(endpoint.image_requests) == 10 * (BATCH_RETRIES + 1)


def test_a_service_that_rate_limits_for_ever_is_waited_out_within_its_throttle_budget(
    endpoint, tmp_path, db_path
):
    """A hostile pass: docs/numgen.md says a 429 is waited out within `throttle_budget_s`,
    but a NumGen config refused the setting, so an Images API that answered 429 for ever
    was asked for ten minutes a request. It is a generation (and detection) setting now."""
    from numerate.grading.verdict import RunFailed

    endpoint.image_responder = lambda body: ImageReply(429, headers={"Retry-After": "0.2"})
    settings = config(endpoint, tmp_path, detector="blobs", prompts={"per_number": 1})
    del settings["detection"]
    settings["generation"] |= {"throttle_budget_s": 1, "max_retries": 0}
    with pytest.raises(RunFailed, match=r"HTTP 429.*still refused after \d s\)"):
        run(settings, db_path)
    assert query(db_path, "SELECT status FROM numgen_runs") == [("failed",)]


def test_a_counter_that_answers_nothing_is_asked_again_and_its_silence_is_an_error(
    endpoint, tmp_path, db_path
):
    """A review of the sweep's empty answers (now the model's, graded): a `vlm:` counter that
    answered nothing was then an unparsed count, never asked again, and a run of such counts
    finished with no error. The counter is the instrument: its silence is asked again, and
    an error once retries are spent."""
    asked: Counter[str] = Counter()

    def silent_once(body):
        key = str(body["messages"][0]["content"][1]["image_url"]["url"])[-64:]
        asked[key] += 1
        return Reply(content=None) if asked[key] == 1 else endpoint.count_drawn(body)

    endpoint.vision = silent_once
    settings = config(endpoint, tmp_path, detector=VLM, prompts={"per_number": 1})
    settings["detection"] |= {"max_retries": 1}
    result = run(settings, db_path)
    assert (result["accuracy"], result["n"], result["errors"]) == (1.0, 10, 0)
    assert sorted(asked.values()) == [2] * 10  # each image asked again once
    endpoint.vision = lambda body: Reply(content="   ")
    from numerate.grading.verdict import RunFailed

    settings["images_dir"] = str(tmp_path / "again")
    with pytest.raises(RunFailed, match=r"empty answer \(finish_reason 'stop'\)"):
        run(settings, db_path)
