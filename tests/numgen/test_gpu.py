"""The GPU path for real: skipped without a CUDA GPU (and, for real checkpoints, without their
weights in the Hugging Face cache: nothing is downloaded). Run: pytest -m gpu."""

import time

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

REAL_GENERATOR = "stabilityai/stable-diffusion-2-1"
REAL_DETECTOR = "IDEA-Research/grounding-dino-tiny"


def cached(model_id):
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(model_id, "model_index.json"), str) or isinstance(
        try_to_load_from_cache(model_id, "config.json"), str
    )


def test_tiny_models_on_the_gpu(tiny_models):
    from numerate.numgen.detection import DetectionSettings, GroundingDinoDetector
    from numerate.numgen.generation import DiffusersGenerator, GenerationSettings
    from numerate.numgen.prompts import PromptSpec, make_prompts

    prompts = make_prompts(PromptSpec(per_number=2, n_max=4))
    settings = GenerationSettings(steps=2, height=32, width=32, device="cuda", dtype="float16")
    images = DiffusersGenerator(tiny_models["generator"], settings).generate(prompts)
    assert [i.size for i in images] == [(32, 32)] * 8
    detector = GroundingDinoDetector(tiny_models["detector"], DetectionSettings(), device="cuda")
    assert len(detector.detect(images, [p.object for p in prompts])) == 8


@pytest.mark.slow
@pytest.mark.skipif(
    not (cached(REAL_GENERATOR) and cached(REAL_DETECTOR)), reason="real weights not cached"
)
def test_real_checkpoints_generate_and_count(tmp_path):
    from numerate.numgen.detection import GroundingDinoDetector
    from numerate.numgen.generation import DiffusersGenerator, GenerationSettings
    from numerate.numgen.prompts import PromptSpec, make_prompts

    prompts = make_prompts(PromptSpec(per_number=1, objects=["apples"]))
    generator = DiffusersGenerator(REAL_GENERATOR, GenerationSettings(steps=20, device="cuda"))
    generator.generate(prompts[:1])  # load and warm up
    start = time.perf_counter()
    images = generator.generate(prompts)
    generated = time.perf_counter() - start
    detector = GroundingDinoDetector(REAL_DETECTOR, device="cuda")
    detector.detect(images[:1], ["apples"])
    start = time.perf_counter()
    found = detector.detect(images, [p.object for p in prompts])
    detected = time.perf_counter() - start
    print(f"\n{len(images) / generated:.2f} images/s, {len(images) / detected:.1f} detections/s, "
          f"peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")  # fmt: skip
    assert all(0 <= d.count <= 20 for d in found)
