"""The on-demand flow, concurrency limits across runs, and keys from Secret blocks."""

import asyncio

import pytest
from prefect import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

from numerate.flows.evaluate import evaluate
from numerate.flows.sweep import sweep
from numerate.kernel.errors import ConfigError
from numerate.store import Store
from tests.fake_openai import Reply

pytestmark = pytest.mark.usefixtures("prefect_harness")


async def create_limit(name, limit):
    async with get_client() as client:
        await client.create_global_concurrency_limit(
            GlobalConcurrencyLimitCreate(name=name, limit=limit)
        )


def test_evaluate_narrows_the_built_in_sweep(db_path):
    run_id = asyncio.run(
        evaluate(model="baseline:oracle", manifolds=["shuffle"], count=3, db=db_path)
    )
    rows = Store.open(db_path).query(
        "SELECT model, manifold, count(*), sum((outcome = 'correct')::INT) FROM responses "
        "WHERE run_id = ? GROUP BY ALL",
        [run_id],
    )
    # the built-in shuffle grid has 4 points: 3 cases each
    assert rows == [("baseline:oracle", "shuffle", 12, 12)]


def test_evaluate_rejects_a_manifold_the_config_lacks(db_path):
    with pytest.raises(ConfigError, match="'nope' is not in the sweep"):
        asyncio.run(evaluate(model="baseline:oracle", manifolds=["nope"], db=db_path))


def test_two_runs_against_one_endpoint_share_its_limit(fake_openai, tmp_path):
    """Each run takes all 4 slots of the endpoint's limit: the second asks once the first is
    done. Until both models have been asked, every answer takes 0.5 s, so a second run that
    did not wait (no limit taken) would ask while the first still has 4 requests in flight."""
    asyncio.run(create_limit("fake-endpoint", 4))
    asked: set[str] = set()

    def responder(body):
        asked.add(body["model"])
        return Reply(content="Answer: 1", delay_s=0.02 if len(asked) > 1 else 0.5)

    fake_openai.responder = responder

    def config(name):
        return {
            "name": name,
            "models": [{"name": name, "model": f"fake-{name}", "base_url": fake_openai.base_url,
                        "concurrency": 4, "concurrency_limit": "fake-endpoint"}],
            "manifolds": [{"manifold": "objects", "count": 20}],
        }  # fmt: skip

    async def both():
        return await asyncio.gather(
            sweep(config("first"), str(tmp_path / "a.duckdb")),
            sweep(config("second"), str(tmp_path / "b.duckdb")),
        )

    asyncio.run(both())
    assert len(fake_openai.prompts()) == 40 and asked == {"fake-first", "fake-second"}
    assert fake_openai.max_in_flight == 4  # without the shared limit: 8


def test_a_run_that_ends_first_leaves_another_run_s_client_open(fake_openai, tmp_path):
    """Two sweeps at once in one process ask one endpoint: the short one ends while the long
    one still has requests in flight (the short one's answers wait until the long one asks),
    and the long one's client stays open until it ends."""
    asked: set[str] = set()

    def responder(body):
        asked.add(body["model"])
        if body["model"] == "fake-long":
            return Reply(content="Answer: 1", delay_s=0.3)
        return Reply(content="Answer: 1", delay_s=0.0 if "fake-long" in asked else 2.0)

    fake_openai.responder = responder

    def config(name, count):
        return {
            "name": name,
            "models": [{"name": name, "model": f"fake-{name}", "base_url": fake_openai.base_url,
                        "concurrency": 2}],
            "manifolds": [{"manifold": "objects", "count": count}],
        }  # fmt: skip

    async def both():
        return await asyncio.gather(
            sweep(config("short", 2), str(tmp_path / "short.duckdb")),
            sweep(config("long", 20), str(tmp_path / "long.duckdb")),
        )

    asyncio.run(both())  # a run with failed requests raises RunFailed
    assert len(fake_openai.prompts()) == 22
    errors = Store.open(str(tmp_path / "long.duckdb")).query(
        "SELECT count(*) FILTER (error IS NOT NULL) FROM responses"
    )
    assert errors == [(0,)]


@pytest.mark.parametrize(
    ("limit", "message"),
    [(None, "no global concurrency limit named 'missing-limit'"), (2, "exceeds the 2 slots")],
)
def test_a_limit_that_cannot_be_held_is_a_clear_error(fake_openai, db_path, limit, message):
    name = "missing-limit" if limit is None else "small-limit"
    if limit is not None:
        asyncio.run(create_limit(name, limit))
    cfg = {"name": "x", "models": [{"name": "fake", "model": "fake-model",
           "base_url": fake_openai.base_url, "concurrency": 4, "concurrency_limit": name}],
           "manifolds": [{"manifold": "objects", "count": 1}]}  # fmt: skip
    with pytest.raises(ConfigError, match=message):
        asyncio.run(sweep(cfg, db_path))


def test_the_key_can_come_from_a_secret_block(fake_openai, db_path):
    from prefect.blocks.system import Secret

    secret = "sk-from-a-secret-block-42"
    Secret(value=secret).save("numerate-test-key", overwrite=True)
    fake_openai.api_key = secret
    cfg = {"name": "s", "models": [{"name": "fake", "model": "fake-model",
           "base_url": fake_openai.base_url, "api_key_secret": "numerate-test-key"}],
           "manifolds": [{"manifold": "sequence", "count": 2}]}  # fmt: skip
    run_id = asyncio.run(sweep(cfg, db_path))
    assert fake_openai.authorizations[-1] == f"Bearer {secret}"
    outcomes = Store.open(db_path).query(
        "SELECT count(*) FROM responses WHERE run_id = ? AND outcome <> 'error'", [run_id]
    )
    assert outcomes == [(2,)]
    Store.close_all()
    with open(db_path, "rb") as handle:
        assert secret.encode() not in handle.read()
