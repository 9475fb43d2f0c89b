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
