import json

import numpy as np
import pytest
from PIL import Image

from numerate.numgen.batches import detect_batch
from numerate.numgen.detection import (
    BlobDetector,
    Detection,
    DetectionSettings,
    GroundingDinoDetector,
    annotate,
    box_iou,
    caption_for,
    filter_boxes,
    nms,
)
from numerate.numgen.synthetic import draw_stimulus
from numerate.numgen.torch_utils import ModelLoadError


def test_iou_by_hand():
    a = np.array([[0, 0, 10, 10]], dtype=float)
    b = np.array([[5, 0, 15, 10], [20, 20, 30, 30], [0, 0, 10, 10]], dtype=float)
    assert box_iou(a, b)[0].tolist() == pytest.approx([50 / 150, 0.0, 1.0])


def test_nms_keeps_the_best_of_near_duplicates_only():
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 10.2], [0, 0, 10, 14], [50, 50, 60, 60]], float)
    scores = np.array([0.6, 0.9, 0.8, 0.5])
    # IoU(0, 1) = 0.98 > 0.95: box 0 goes; IoU(1, 2) = 0.73: both stay
    assert nms(boxes, scores, 0.95) == [1, 2, 3]


def test_filters_follow_the_reference_defaults():
    settings = DetectionSettings()
    assert (settings.box_threshold, settings.text_threshold, settings.min_score) == (
        0.05,
        0.25,
        0.4,
    )
    assert settings.nms_iou == 0.95 and settings.max_box_area is None
    boxes = [[0, 0, 100, 100], [10, 10, 20, 20], [30, 30, 40, 40]]
    kept = filter_boxes(boxes, [0.9, 0.39, 0.41], (100, 100), settings)
    assert kept.scores == [0.9, 0.41]  # 0.39 is below the 0.40 floor
    big = filter_boxes(
        boxes, [0.9, 0.39, 0.41], (100, 100), settings.model_copy(update={"max_box_area": 0.95})
    )
    assert big.scores == [0.41]  # the box covering the whole image goes


def test_zero_detections_are_a_count_of_zero_and_many_are_20_plus():
    assert filter_boxes([], [], (10, 10), DetectionSettings()).count == 0
    many = Detection(boxes=[(i, 0, i + 1, 1) for i in range(27)], scores=[1.0] * 27)
    assert (many.raw_count, many.count) == (27, 20)


def test_caption_is_the_full_object_phrase():
    assert caption_for("human faces") == "human faces."
    assert caption_for("Dots.") == "dots."


def test_annotation_draws_boxes():
    image = Image.new("RGB", (64, 64), "white")
    drawn = annotate(image, Detection(boxes=[(8, 8, 40, 40)], scores=[0.8]), "apples")
    assert drawn.size == image.size and drawn.tobytes() != image.tobytes()
    assert image.getpixel((8, 20)) == (255, 255, 255)  # the original is untouched


def test_a_corrupt_or_missing_image_is_an_error_row_not_a_crash(tmp_path):
    good = tmp_path / "good.png"
    draw_stimulus(3, 1).save(good)
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    rows = [
        {"prompt_id": "a", "object": "dots", "path": str(good), "error": None},
        {"prompt_id": "b", "object": "dots", "path": str(corrupt), "error": None},
        {"prompt_id": "c", "object": "dots", "path": None, "error": "RuntimeError: API down"},
    ]
    found = detect_batch(BlobDetector(), rows, tmp_path / "annotated")
    assert [r["count"] for r in found] == [3, None, None]
    assert "cannot read" in found[1]["error"] and str(corrupt) in found[1]["error"]
    assert "API down" in found[2]["error"]
    assert len(json.loads(found[0]["boxes"])) == 3
    assert (tmp_path / "annotated" / "a.png").exists()


def test_a_batch_of_images_is_counted_a_bounded_part_at_a_time(tmp_path, monkeypatch):
    """A hostile pass: a task batch of 8192 x 8192 images (the largest an endpoint may return)
    was decoded whole before the detector was called, 270 MB an image. Each call is given
    images until they reach PIXELS_AT_ONCE, and the counts are those of one call."""
    from numerate.numgen import batches

    sizes = [256, 128, 256, 64, 256, 256, 128]
    rows = []
    for index, size in enumerate(sizes):
        path = tmp_path / f"{index}.png"
        draw_stimulus(index % 4 + 1, index, size=size).save(path)
        rows.append({"prompt_id": str(index), "object": "dots", "path": str(path), "error": None})
    rows.insert(3, {"prompt_id": "x", "object": "dots", "path": None, "error": "API down"})
    whole = detect_batch(BlobDetector(), rows, None)
    calls: list[list[int]] = []

    class Recording(BlobDetector):
        def detect(self, images, objects):
            calls.append([image.width * image.height for image in images])
            return super().detect(images, objects)

    bound = 256 * 256 + 128 * 128
    monkeypatch.setattr(batches, "PIXELS_AT_ONCE", bound)
    parted = detect_batch(Recording(), rows, None)

    def said(found):
        return [{k: v for k, v in row.items() if k != "created_at"} for row in found]

    assert said(parted) == said(whole)
    assert [r["count"] for r in parted] == [1, 2, 3, None, 4, 1, 2, 3]
    assert sorted(p for call in calls for p in call) == sorted(s * s for s in sizes)
    assert len(calls) == 3 and all(sum(call[:-1]) < bound for call in calls)


def test_grounding_dino_loads_by_model_id_offline_and_counts(tiny_models):
    detector = GroundingDinoDetector(
        tiny_models["detector"], DetectionSettings(min_score=0.0, batch_size=2), device="cpu"
    )
    images = [draw_stimulus(n, n) for n in (1, 4, 9)]
    found = detector.detect(images, ["dots", "dots", "triangles"])
    assert len(found) == 3
    for detection, image in zip(found, images, strict=True):
        assert detection.count == min(detection.raw_count, 20)
        assert all(0 <= s <= 1 for s in detection.scores)
        for x0, y0, x1, y1 in detection.boxes:
            assert -1 <= x0 <= x1 <= image.width + 1 and -1 <= y0 <= y1 <= image.height + 1
    # the same images again, one at a time: the same counts (no state between batches)
    again = [
        detector.detect([image], [o])[0]
        for image, o in zip(images, ["dots", "dots", "triangles"], strict=True)
    ]
    assert [d.raw_count for d in again] == [d.raw_count for d in found]
    strict = GroundingDinoDetector(tiny_models["detector"], DetectionSettings(min_score=1.0), "cpu")
    assert [d.count for d in strict.detect(images, ["dots"] * 3)] == [0, 0, 0]


def test_an_unknown_detector_id_fails_clearly_offline(tiny_models):
    with pytest.raises(ModelLoadError, match="cannot load detector 'no-such/detector'"):
        GroundingDinoDetector("no-such/detector", device="cpu").detect(
            [draw_stimulus(1, 1)], ["dots"]
        )
