"""The GPU path for real: skipped without a CUDA GPU (and, for real checkpoints, without their
weights in the Hugging Face cache: nothing is downloaded). Run: pytest -m gpu."""

import os
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


@pytest.mark.parametrize("dtype", ["auto", "float16"])
def test_tiny_models_on_the_gpu(tiny_models, tmp_path, dtype):
    """The calls a NumGen run makes (numerate/tasks/numgen.py), on the GPU: a generator with
    its device and batch size left to numerate (cuda, batches sized to the GPU's free memory;
    `auto` is bfloat16 there), its PNGs saved by generate_batch, then counted in float32 on the
    same device by detect_batch, with annotated copies."""
    from numerate.numgen.batches import annotated_folder, detect_batch, generate_batch, image_folder
    from numerate.numgen.config import NumGenConfig
    from numerate.numgen.detection import make_detector
    from numerate.numgen.generation import GenerationSettings, make_generator
    from numerate.numgen.prompts import PromptSpec, make_prompts

    torch.cuda.reset_peak_memory_stats()
    config = NumGenConfig(
        generator=tiny_models["generator"], detector=tiny_models["detector"],
        prompts=PromptSpec(per_number=2, n_max=4), images_dir=str(tmp_path),
        generation=GenerationSettings(steps=2, height=32, width=32, dtype=dtype),
    )  # fmt: skip
    prompts = make_prompts(config.prompts)
    generator = make_generator(config.generator, config.generation)
    images = generate_batch(generator, prompts, image_folder(config))
    assert [(i["error"], i["width"], i["height"]) for i in images] == [(None, 32, 32)] * 8
    assert generator.batch_size is not None and generator.batch_size > 1  # the CPU's is 1
    assert torch.cuda.max_memory_allocated() > 0  # the pipeline ran on the GPU

    detector = make_detector(config.detector_label, config.detection, config.generation.device)
    counted = detect_batch(detector, images, annotated_folder(config))
    assert [c["error"] for c in counted] == [None] * 8
    assert all(c["count"] is not None and 0 <= c["count"] <= 20 for c in counted)
    assert all(c["annotated_path"] and os.path.isfile(c["annotated_path"]) for c in counted)


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
