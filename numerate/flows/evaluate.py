"""On-demand evaluation: a sweep narrowed by parameters (a new checkpoint, one manifold, a
bigger count). Wiring only."""

from prefect import flow, tags

from numerate.config.sweep import (
    DEFAULT_SWEEP,
    evaluate_config,
    load_sweep_config,
    parse_sweep_config,
)
from numerate.flows.sweep import run_tags, sweep


@flow(name="evaluate")
async def evaluate(
    model: str | None = None,
    base_url: str | None = None,
    name: str | None = None,
    manifolds: list[str] | None = None,
    count: int | None = None,
    config_path: str | None = None,
    db: str | None = None,
    results_dir: str | None = None,
) -> str:
    """Evaluate one model (or a config's models) on some manifolds; returns the run id.

    Args:
        model: model id (or a baseline: baseline:oracle, baseline:random,
            baseline:heuristic); default: the config's models.
        base_url: the model's OpenAI-compatible endpoint.
        name: label for the model in the results (default: the model id).
        manifolds: manifold names to keep (default: all of the config's).
        count: cases per grid point (default: the config's).
        config_path: sweep config to start from (default: the built-in sweep).
        db: DuckDB results file (default: the config's, else $NUMERATE_DB, else
            results/numerate.duckdb).
        results_dir: shared results location to publish the run's Parquet shards to.
    """
    base = (
        load_sweep_config(config_path)
        if config_path
        else parse_sweep_config(DEFAULT_SWEEP, "built-in sweep")
    )
    config = evaluate_config(base, model, base_url, name, manifolds, count)
    if results_dir:
        config = config.model_copy(update={"results_dir": results_dir})
    with tags(*run_tags(config)):
        return str(await sweep(config, db))  # a Failed run raises here
