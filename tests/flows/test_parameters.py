"""Flow parameters are typed: a deployment's parameter form in the Prefect UI is drawn from
each flow's parameter schema, and JSON parameters are validated into the config models once,
where they enter."""

import pytest

from numerate.config.sweep import SweepConfig
from numerate.flows.distributed import distributed_sweep
from numerate.flows.numgen import numgen, numgen_generate
from numerate.flows.sweep import sweep


def schema_of(flow):
    return flow.parameters.model_dump(mode="json", by_alias=True)


@pytest.mark.parametrize(
    ("flow", "model", "fields"),
    [
        (sweep, "SweepConfig", {"models", "manifolds", "seed", "batch_size"}),
        (distributed_sweep, "SweepConfig", {"models", "manifolds"}),
        (numgen, "NumGenConfig", {"generator", "detector", "prompts"}),
        (numgen_generate, "NumGenConfig", {"generator", "detector"}),
    ],
)
def test_a_flow_s_config_parameter_is_a_typed_form(flow, model, fields):
    schema = schema_of(flow)
    definitions = schema.get("definitions") or schema.get("$defs") or {}
    assert model in definitions, sorted(definitions)
    assert fields <= set(definitions[model]["properties"])
    config = schema["properties"]["config"]
    referenced = config.get("$ref") or str(config.get("anyOf") or config.get("allOf"))
    assert model in referenced  # not an untyped JSON box


def test_a_deployment_s_json_is_validated_into_the_config_once():
    from prefect.utilities.callables import parameters_to_args_kwargs

    data = {
        "name": "typed",
        "models": [{"name": "o", "model": "baseline:oracle"}],
        "manifolds": [{"manifold": "objects", "count": 2}],
    }
    validated = sweep.validate_parameters({"config": data})
    assert isinstance(validated["config"], SweepConfig)
    args, _ = parameters_to_args_kwargs(sweep.fn, validated)
    assert args[0].models[0].name == "o"
    with pytest.raises(Exception, match="count"):
        sweep.validate_parameters({"config": {**data, "manifolds": [{"manifold": "objects",
                                                                     "count": 0}]}})  # fmt: skip
