"""A NumGen config with models behind endpoints, and what is taken of their answers: pure."""

import io
import json

import pytest
from PIL import Image

from numerate.kernel.errors import ConfigError
from numerate.numgen.config import NumGenConfig, recount_settings
from numerate.numgen.detection import DetectionSettings
from numerate.numgen.hosted import MAX_SIDE, checked_png

URL = "http://127.0.0.1:9/v1"


def png_of(width, height, kind="PNG"):
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, format=kind)
    return buffer.getvalue()


def test_a_png_is_taken_as_sent_another_format_converted_and_a_huge_one_refused():
    sent = png_of(64, 32)
    assert checked_png(sent) is sent  # not decoded, not encoded again
    converted = checked_png(png_of(64, 32, "JPEG"))
    assert converted.startswith(b"\x89PNG") and Image.open(io.BytesIO(converted)).size == (64, 32)
    with pytest.raises(ValueError, match=f"at most {MAX_SIDE} a side"):
        checked_png(png_of(MAX_SIDE + 1, 1))  # a few hundred bytes, 8,193 pixels wide
    with pytest.raises(ValueError, match="not an image"):
        checked_png(sent[:-20])  # its end cut: a chunk's CRC cannot be checked
    with pytest.raises(ValueError) as junk:  # a hostile pass: `<_io.BytesIO object at 0x7f..>`
        checked_png(b"<html>bad gateway</html>")
    assert str(junk.value) == "not an image: no format PIL reads (24 bytes)"


def test_each_counter_of_a_list_gets_a_config_with_only_its_own_settings():
    config = NumGenConfig.model_validate({
        "generator": "synthetic", "detector": ["some/dino", "vlm:m"],
        "generation": {"device": "cpu"},
        "detection": {"base_url": URL, "min_score": 0.5},
    })  # fmt: skip
    dino, vlm = config.for_counter("some/dino"), config.for_counter("vlm:m")
    assert (dino.detection.min_score, dino.detection.base_url, dino.generation.device) == (
        0.5, None, "cpu"
    )  # fmt: skip
    assert (vlm.detection.min_score, vlm.detection.base_url, vlm.generation.device) == (
        0.4, URL, "auto"
    )  # fmt: skip


def stored(**config):
    return json.dumps(config), "finished"


def test_a_recount_drops_the_device_its_counters_do_not_use():
    source = stored(generator="synthetic", detector="some/dino", generation={"device": "cpu"})
    again = recount_settings("run-1", source, "vlm:m", DetectionSettings(base_url=URL))
    assert again.generation.device == "auto" and again.detector == "vlm:m"
    kept = recount_settings("run-1", source, "other/dino", None)
    assert kept.generation.device == "cpu"  # a Grounding DINO counter runs on it


@pytest.mark.parametrize(
    ("source", "detector", "said"),
    [
        (None, "blobs", "no NumGen run 'run-1'"),
        (stored(generator="random"), "blobs", "made no image (the random baseline)"),
        (("{}", "failed"), "blobs", "run run-1 is failed"),
        (stored(generator="synthetic", detector="blobs"), "vlm:m",
         "detection.base_url: vlm:m is asked at an endpoint"),
    ],
)  # fmt: skip
def test_a_recount_that_cannot_be_is_one_error(source, detector, said):
    with pytest.raises(ConfigError) as raised:
        recount_settings("run-1", source, detector, None)
    assert said in str(raised.value)
