import logging

import numpy as np
import pytest
from PIL import Image

from numerate.numgen.batches import generate_batch
from numerate.numgen.generation import (
    CallableGenerator,
    DiffusersGenerator,
    GenerationSettings,
    ImageError,
    SyntheticGenerator,
    make_generator,
    read_png_metadata,
    to_image,
)
from numerate.numgen.prompts import PromptSpec, make_prompts
from numerate.numgen.torch_utils import ModelLoadError


def prompts(per_number=1, n_max=3, **values):
    return make_prompts(PromptSpec(per_number=per_number, n_max=n_max, **values))


def test_to_image_accepts_what_the_spec_allows(tmp_path):
    torch = pytest.importorskip("torch")
    pil = Image.new("RGB", (8, 6), (10, 20, 30))
    pil.save(tmp_path / "a.png")
    hwc = np.full((6, 8, 3), 20, dtype=np.uint8)
    chw_float = np.full((3, 6, 8), 0.5, dtype=np.float32)
    for value in (pil, tmp_path / "a.png", str(tmp_path / "a.png"), hwc, chw_float,
                  torch.from_numpy(chw_float)[None]):  # fmt: skip
        image = to_image(value)
        assert image.mode == "RGB" and image.size == (8, 6)
    assert to_image(chw_float).getpixel((0, 0)) == (128, 128, 128)


@pytest.mark.parametrize(
    ("value", "message"),
    [(np.zeros((2, 2, 2, 2)), "shape"), (np.full((4, 4, 3), np.nan), "NaN"),
     (42, "got int"), (np.full((4, 4, 3), -5.0), "negative values")],  # black, clipped, before
)  # fmt: skip
def test_to_image_rejects_what_is_not_an_image(value, message):
    with pytest.raises(ImageError, match=message):
        to_image(value, "image for 'An image with 2 dogs'")


def test_a_corrupt_file_names_itself(tmp_path):
    path = tmp_path / "broken.png"
    path.write_bytes(b"not a png")
    with pytest.raises(ImageError, match=r"broken\.png"):
        to_image(path)


def test_images_are_saved_with_their_prompt_and_found_again(tmp_path):
    batch = prompts()
    calls = []

    class Counting(SyntheticGenerator):
        def generate(self, ps):
            calls.append(len(ps))
            return super().generate(ps)

    first = generate_batch(Counting(), batch, tmp_path)
    assert [r["cached"] for r in first] == [False] * 3 and calls == [3]
    meta, size = read_png_metadata(tmp_path / f"{batch[1].prompt_id}.png")
    assert size == (256, 256)
    assert meta["prompt"] == batch[1].text and meta["seed"] == str(batch[1].image_seed)
    assert meta["model"] == "synthetic" and meta["target"] == "2"
    again = generate_batch(Counting(), batch, tmp_path)
    assert [r["cached"] for r in again] == [True] * 3 and calls == [3]  # nothing made twice
    assert not list(tmp_path.glob("*.partial"))


def test_an_image_pil_takes_for_a_decompression_bomb_is_made_again(tmp_path, monkeypatch):
    """A hostile pass: one 30,000 x 30,000 PNG planted in the images folder failed the whole
    NumGen run with PIL's DecompressionBombError, naming no file. PIL's own bound is lowered
    here (its MAX_IMAGE_PIXELS setting) so that a 600 x 600 image is such a bomb."""
    batch = prompts()
    generate_batch(SyntheticGenerator(), batch, tmp_path)
    planted = tmp_path / f"{batch[1].prompt_id}.png"
    Image.new("1", (600, 600), 1).save(planted)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100_000)  # 256 x 256 is fine, 600 x 600 not
    with pytest.raises(ImageError, match=r"cannot read .*decompression bomb"):
        to_image(planted)
    again = generate_batch(SyntheticGenerator(), batch, tmp_path)
    assert [r["cached"] for r in again] == [True, False, True]
    assert read_png_metadata(planted)[1] == (256, 256)


def test_a_failing_image_is_recorded_and_the_rest_go_on(tmp_path):
    def api(text, seed):
        if "2 " in text:
            raise RuntimeError("content filter")
        return np.full((16, 16, 3), 255, dtype=np.uint8)

    rows = generate_batch(CallableGenerator(api, "callable:api"), prompts(), tmp_path)
    assert [r["error"] for r in rows] == [None, "RuntimeError: content filter", None]
    assert rows[1]["path"] is None and rows[0]["width"] == 16


def test_a_failed_batchs_warning_says_the_services_words_escaped_and_bounded(tmp_path, caplog):
    """A hostile pass: a service's error (a callable generator passes it on) went to the
    warning raw and whole: 100 KB, an escape that clears the terminal."""

    def api(text, seed):
        if "2 " in text:
            raise RuntimeError("service said: \x1b[2J\u202eevil " + "x" * 100_000)
        return np.full((16, 16, 3), 255, dtype=np.uint8)

    with caplog.at_level(logging.WARNING, logger="numerate.numgen"):
        generate_batch(CallableGenerator(api, "callable:api"), prompts(), tmp_path)
    [warned] = [r.getMessage() for r in caplog.records if "a batch of" in r.getMessage()]
    assert "\\x1b[2J\\u202eevil" in warned and "\x1b" not in warned and "\u202e" not in warned
    assert len(warned) < 700, len(warned)


def test_an_image_cut_short_is_made_again(tmp_path):
    """A hostile pass: an image cut short (a copy of the images folder interrupted) keeps the
    header and text chunks that say whose it is, and was read back on every run, its count an
    error ("image file is truncated"), never made again; a retry never mended it."""
    batch = prompts()
    generate_batch(SyntheticGenerator(), batch, tmp_path)
    cut = tmp_path / f"{batch[1].prompt_id}.png"
    whole = cut.read_bytes()
    cut.write_bytes(whole[:300])
    assert read_png_metadata(cut)[0]["prompt_id"] == batch[1].prompt_id  # still says whose
    again = generate_batch(SyntheticGenerator(), batch, tmp_path)
    assert [r["cached"] for r in again] == [True, False, True]
    assert cut.read_bytes() == whole  # the synthetic generator makes the same image again


def test_a_generator_that_fails_on_everything_raises(tmp_path):
    def down(text, seed):
        raise ConnectionError("endpoint unreachable")

    with pytest.raises(ConnectionError, match="unreachable"):
        generate_batch(CallableGenerator(down, "callable:down"), prompts(), tmp_path)


def test_make_generator_loads_callables_by_reference():
    assert make_generator("synthetic").name == "synthetic"
    generator = make_generator("callable:tests.numgen.test_generation:white_square")
    assert generator.generate(prompts(n_max=1))[0].size == (4, 4)
    with pytest.raises(ValueError, match="'module:function'"):
        make_generator("callable:nothing")
    with pytest.raises(ValueError, match="cannot be loaded"):
        make_generator("callable:tests.numgen.test_generation:missing")


def white_square(text, seed):
    return Image.new("RGB", (4, 4), "white")


def test_settings_take_the_model_family_preset_unless_set():
    flux = GenerationSettings().for_model("black-forest-labs/FLUX.1-schnell")
    assert flux == {"num_inference_steps": 4, "guidance_scale": 0.0, "height": 1024, "width": 1024}
    sd = GenerationSettings(steps=20).for_model("stabilityai/stable-diffusion-2-1")
    assert sd["num_inference_steps"] == 20 and sd["guidance_scale"] == 7.5
    assert GenerationSettings().for_model("my/own-model") == {}


def test_bad_settings_are_refused_before_any_model_work():
    with pytest.raises(ValueError, match="dtype must be one of"):
        DiffusersGenerator("x/y", GenerationSettings.model_construct(dtype="int8", device="cpu"))
    with pytest.raises(ValueError, match="device"):
        DiffusersGenerator("x/y", GenerationSettings.model_construct(device="tpu"))
    with pytest.raises(ValueError, match="empty"):
        DiffusersGenerator(" ", GenerationSettings(device="cpu"))


@pytest.mark.parametrize("device", ["tpu", "xla", "meta", "cuda:", "cuda:x", "CPU", "", "cpu "])
def test_a_device_numerate_cannot_use_is_refused_with_the_settings(device):
    with pytest.raises(ValueError, match="choose auto, cpu, cuda, cuda:N or mps"):
        GenerationSettings(device=device)


@pytest.mark.parametrize("device", ["auto", "cpu", "cuda", "cuda:0", "cuda:12", "mps"])
def test_every_device_numerate_runs_on_is_accepted(device):
    assert GenerationSettings(device=device).device == device


def test_an_unknown_dtype_is_refused_with_the_settings():
    with pytest.raises(ValueError, match="choose auto, float32, float16, bfloat16"):
        GenerationSettings(dtype="int8")


def tiny_settings(**values):
    return GenerationSettings(steps=2, height=32, width=32, device="cpu", **values)


def test_a_diffusers_pipeline_loads_by_model_id_offline(tiny_models):
    generator = DiffusersGenerator(tiny_models["generator"], tiny_settings(batch_size=4))
    batch = prompts(n_max=5)
    images = generator.generate(batch)
    assert [image.size for image in images] == [(32, 32)] * 5
    assert len({image.tobytes() for image in images}) == 5


def test_the_pipeline_loads_once_per_process(tiny_models):
    from numerate.numgen.generation import _load_pipeline

    settings = tiny_settings(batch_size=2)
    DiffusersGenerator(tiny_models["generator"], settings).generate(prompts(n_max=2))
    loads = _load_pipeline.cache_info().misses
    for _ in range(3):  # new generator objects, as every Prefect task makes one
        DiffusersGenerator(tiny_models["generator"], settings).generate(prompts(n_max=2))
    assert _load_pipeline.cache_info().misses == loads


def test_every_image_is_reproducible_alone_whatever_its_batch(tiny_models):
    batch = prompts(n_max=4)
    together = DiffusersGenerator(tiny_models["generator"], tiny_settings(batch_size=4)).generate(
        batch
    )
    alone = DiffusersGenerator(tiny_models["generator"], tiny_settings(batch_size=1)).generate(
        batch[2:3]
    )
    difference = np.abs(np.asarray(together[2], float) - np.asarray(alone[0], float))
    assert difference.max() <= 2  # 8-bit rounding of the same image


def test_an_unknown_generator_id_fails_clearly_offline(tiny_models):
    with pytest.raises(ModelLoadError, match="cannot load generator 'no-such/model'"):
        DiffusersGenerator("no-such/model", tiny_settings()).generate(prompts(n_max=1))


def test_a_model_path_that_is_no_folder_is_said_so(tmp_path):
    """A hostile pass: `--detector /nonexistent` said "no config.json in that folder" of a
    folder that is not there."""
    from numerate.numgen.torch_utils import check_available

    (tmp_path / "f").write_text("")
    (tmp_path / "empty").mkdir()
    for path, said in ((tmp_path / "gone", "no such folder"),
                       (tmp_path / "f", "is a file, not a model's folder"),
                       (tmp_path / "empty", "no config.json in that folder")):  # fmt: skip
        with pytest.raises(ModelLoadError, match=f"detector '{path}': {said}$"):
            check_available(str(path), "config.json", "detector")
    # a hostile pass: a name too long to be a path here was OSError's line (exit 3), in full
    with pytest.raises(ModelLoadError, match=r"generator 'a+…': File name too long$"):
        check_available("a" * 100_000, "model_index.json", "generator")
    # the hub's refusal of an id quotes it: a line break in it is written escaped (one line)
    with pytest.raises(ModelLoadError, match=r"^generator 'syn\\nthetic': Repo id [^\n]*$"):
        check_available("syn\nthetic", "model_index.json", "generator")


LOADS_WITH_A_SILENT_HUB = """
import sys
import huggingface_hub  # imported before, as in a worker that loaded a model earlier: it read
# HF_HUB_OFFLINE then, and setting it now changes nothing for it
from numerate.numgen.generation import DiffusersGenerator, GenerationSettings
from numerate.numgen.prompts import PromptSpec, make_prompts
from numerate.numgen.torch_utils import check_available
check_available(sys.argv[1], "model_index.json", "generator")  # the hub does not answer
settings = GenerationSettings(steps=2, height=32, width=32, device="cpu", batch_size=1)
images = DiffusersGenerator(sys.argv[1], settings).generate(
    make_prompts(PromptSpec(per_number=1, n_max=1)))
print("made", len(images))
"""


def test_a_cached_model_loads_without_asking_a_hub_that_does_not_answer(tiny_models):
    """A GPU machine with no route to the hub: the reachability check asks once, waits
    NUMERATE_HUB_TIMEOUT, and the cached model then loads from the cache alone, not through
    the hub client's waits and retries (go_offline: HF_HUB_OFFLINE for what reads it now,
    local_files_only for every load; huggingface_hub's module is no longer patched)."""
    import os
    import socket
    import subprocess
    import sys
    import threading

    asked: list[socket.socket] = []
    hub = socket.create_server(("127.0.0.1", 0))

    def take() -> None:  # accept every connection and never answer
        while True:
            try:
                asked.append(hub.accept()[0])
            except OSError:
                return

    threading.Thread(target=take, daemon=True).start()
    env = dict(os.environ, HF_ENDPOINT=f"http://127.0.0.1:{hub.getsockname()[1]}",
               NUMERATE_HUB_TIMEOUT="1")  # fmt: skip
    env.pop("HF_HUB_OFFLINE")
    try:
        done = subprocess.run(
            [sys.executable, "-c", LOADS_WITH_A_SILENT_HUB, tiny_models["generator"]],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        hub.close()
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("made 1")
    assert len(asked) == 1  # the check's one request; the load asked the hub nothing


def test_a_services_png_is_saved_as_sent_with_its_prompt_in_text_chunks(tmp_path):
    """An Images API's PNG is not encoded again (0.3 s for 1024 x 1024): its text chunks are
    added to its bytes, and PIL reads them back, Latin-1 or not, with the pixels unchanged."""
    import hashlib
    import io

    from PIL import Image, PngImagePlugin

    from numerate.numgen.generation import read_png_metadata, save_png, with_text
    from numerate.numgen.prompts import Prompt
    from numerate.numgen.synthetic import draw_stimulus

    drawn = draw_stimulus(5, 3, 96)
    theirs = PngImagePlugin.PngInfo()
    theirs.add_text("prompt", "the service's own words")  # would hide numerate's
    theirs.add_text("Software", "the service")
    buffer = io.BytesIO()
    drawn.save(buffer, format="PNG", pnginfo=theirs)
    sent = buffer.getvalue()
    prompt = Prompt(prompt_id="p1d", index=0, target=5, object="crêpes 🥞",
                    text="An image with 5 crêpes 🥞", image_seed=42)  # fmt: skip
    path = tmp_path / "p1d.png"
    digest, size = save_png(sent, path, prompt, "api:m")
    stored = path.read_bytes()
    assert size == (96, 96) and digest == hashlib.sha256(stored).hexdigest()
    assert stored.endswith(sent[-12:])  # IEND as sent
    meta, read_size = read_png_metadata(stored[: 200 + len(stored) - len(sent)])  # its head
    assert meta["prompt"] == prompt.text and meta["object"] == "crêpes 🥞"
    with Image.open(path) as back:
        assert back.info["Software"] == "the service"  # the service's other chunks stay
    assert (meta["seed"], meta["model"], read_size) == ("42", "api:m", (96, 96))
    with Image.open(path) as back:
        assert back.convert("RGB").tobytes() == drawn.tobytes()
    with pytest.raises(ImageError, match="not a PNG"):
        with_text(b"GIF89a" + sent, {"a": "b"})
