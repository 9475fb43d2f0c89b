"""The work-pool templates in deployments/pools are valid and ask for what a GPU run needs."""

import json
from pathlib import Path

import yaml

POOLS = Path(__file__).resolve().parents[2] / "deployments" / "pools"
PREFECT_YAML = POOLS.parent / "prefect.yaml"


def test_gpu_process_pool_sets_the_cuda_environment():
    template = json.loads((POOLS / "gpu-process.json").read_text())
    assert template["job_configuration"]["env"] == "{{ env }}"
    env = template["variables"]["properties"]["env"]["default"]
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"


def test_gpu_kubernetes_pool_asks_for_gpus_and_tolerates_gpu_nodes():
    template = json.loads((POOLS / "gpu-kubernetes.json").read_text())
    pod = template["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "{{ gpu_count }}"
    assert pod["containers"][0]["image"] == "{{ image }}"
    assert any(t["key"] == "nvidia.com/gpu" for t in pod["tolerations"])
    variables = template["variables"]["properties"]
    assert variables["gpu_count"]["default"] == 1


def test_prefect_yaml_names_existing_entrypoints_and_pools():
    spec = yaml.safe_load(PREFECT_YAML.read_text())
    names = {d["name"]: d for d in spec["deployments"]}
    assert {"nightly-sweep", "evaluate", "ingest", "distributed-sweep"} <= set(names)
    for deployment in spec["deployments"]:
        path, function = deployment["entrypoint"].split(":")
        source = (POOLS.parents[1] / path).read_text()
        assert f"def {function}(" in source, deployment["entrypoint"]
        assert deployment["work_pool"]["name"] in ("cpu", "gpu")
    assert "schedules" not in names["evaluate"]
