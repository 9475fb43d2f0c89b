import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Tiny random Stable Diffusion and Grounding DINO models in the test session's Hugging Face
    cache, loadable by model id with HF_HUB_OFFLINE=1."""
    pytest.importorskip("diffusers")
    from tests.numgen.tiny_models import TINY_DIFFUSERS, TINY_GROUNDING_DINO, install_tiny_models

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    install_tiny_models(Path(os.environ["HF_HOME"]) / "hub", tmp_path_factory.mktemp("tiny"))
    return {"generator": TINY_DIFFUSERS, "detector": TINY_GROUNDING_DINO}


async def latest_artifact(key):
    """The newest Prefect artifact with `key` (None when there is none)."""
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    async with get_client() as client:
        found = await client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            sort=ArtifactSort.CREATED_DESC,
        )
    return found[0] if found else None
