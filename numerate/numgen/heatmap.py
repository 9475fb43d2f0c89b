"""The confusion matrix as a heatmap PNG (PIL only: no plotting library needed)."""

from __future__ import annotations

from PIL import Image, ImageDraw

from numerate.numgen.metrics import COLUMNS, MAX_COUNT, ConfusionMatrix

CELL = 28
MARGIN_LEFT = 70
MARGIN_TOP = 56
MARGIN_BOTTOM = 40


def _shade(p: float) -> tuple[int, int, int]:
    """White (0) to dark blue (1)."""
    return (int(255 - 227 * p), int(255 - 195 * p), int(255 - 120 * p))


def render_heatmap(cm: ConfusionMatrix, title: str = "") -> Image.Image:
    """Rows: targets; columns: generated 0..19, 20+; a cell's shade is the share of its row,
    its text the count. The diagonal (correct answers) is outlined."""
    probabilities = cm.probabilities()
    width = MARGIN_LEFT + CELL * len(COLUMNS) + 12
    height = MARGIN_TOP + CELL * len(cm.targets) + MARGIN_BOTTOM
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    draw.text((8, 6), title or f"NumGen confusion matrix (n = {cm.n})", fill="black")
    draw.text((MARGIN_LEFT, 22), "generated count", fill="black")
    for j, g in enumerate(COLUMNS):
        label = f"{g}" if g < MAX_COUNT else "20+"
        draw.text((MARGIN_LEFT + j * CELL + 6, MARGIN_TOP - 12), label, fill="black")
    draw.text((4, MARGIN_TOP + 2), "target", fill="black")
    for i, t in enumerate(cm.targets):
        y = MARGIN_TOP + i * CELL
        draw.text((MARGIN_LEFT - 20, y + 8), f"{t:>2}", fill="black")
        for j, _ in enumerate(COLUMNS):
            x = MARGIN_LEFT + j * CELL
            p = float(probabilities[i, j])
            draw.rectangle(
                (x, y, x + CELL - 1, y + CELL - 1), fill=_shade(p), outline=(220, 220, 220)
            )
            count = int(cm.counts[i, j])
            if count:
                draw.text((x + 4, y + 8), str(count), fill="white" if p > 0.5 else "black")
        if t in COLUMNS:
            x = MARGIN_LEFT + t * CELL
            draw.rectangle((x, y, x + CELL - 1, y + CELL - 1), outline=(230, 25, 75), width=2)
    draw.text(
        (MARGIN_LEFT, height - MARGIN_BOTTOM + 14),
        "shade: share of the row; number: images; red: the target",
        fill="black",
    )
    return image
