"""`numerate view` driven in a real headless browser: Chromium from Debian's packages (`make
test` installs it: `apt-get install chromium`), through Playwright (its Python package only: it
never downloads a browser of its own). A real `numerate view` process serves the test database
on 127.0.0.1; the test clicks from the runs to a case, filters, compares, and opens a NumGen
cell. A screenshot of each page is written to $NUMERATE_SCREENSHOTS when set (`make
screenshots` writes docs/images/), else to the test's folder."""

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.view.conftest import sql, start_view

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium: `apt-get install chromium` (make test does)"
)


@pytest.fixture(scope="module")
def server(results):
    process, address = start_view(results[0])
    yield address
    process.send_signal(signal.SIGINT)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        yield browser.new_page(viewport={"width": 1280, "height": 900})
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    folder = Path(os.environ.get("NUMERATE_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)

    def shot(page, name: str) -> None:
        page.screenshot(path=str(folder / f"view-{name}.png"), full_page=False)

    return shot


def test_from_the_runs_to_a_case_in_a_browser(server, page, shots, results):
    db, (_first, second) = results
    page.goto(server + "/")
    rows = page.locator("table.runs tbody tr")
    assert rows.count() == 2 and second in rows.first.inner_text()
    shots(page, "runs")

    page.click(f"text={second}")
    assert page.locator("h1").inner_text() == f"Run {second}"
    board = page.locator("table.board")
    assert "1.000" not in board.locator("tr", has_text="m").first.inner_text()  # the guesser
    shots(page, "run")

    page.click("table.board thead >> text=objects")
    assert page.locator("svg.curve").count() == 2
    cells = page.locator("table.heatmap td a")
    assert cells.count() == 8
    shots(page, "manifold")

    cells.first.click()  # model h (the heuristic) at the first grid point
    assert "Cases" in page.locator("h1").inner_text()
    answers = page.locator("table.cases tbody tr")
    assert answers.count() == 30
    shots(page, "cases")

    page.click("nav.outcome-filter >> text=wrong")
    outcomes = page.locator("table.cases tbody td .badge").all_inner_texts()
    assert outcomes and set(outcomes) == {"wrong"}

    page.locator("a.case-link").first.click()
    prompt = page.locator("pre.prompt").inner_text()
    (stored,) = sql(db, "SELECT input FROM cases WHERE input = ?", prompt.strip())[0]
    assert stored.strip() == prompt.strip()
    assert page.locator("pre.raw").first.inner_text().strip()  # the model's raw answer
    assert page.locator(".extracted").first.inner_text()
    shots(page, "case")


def test_a_comparison_and_its_lost_cases_in_a_browser(server, page, shots, results):
    _db, (first, second) = results
    page.goto(f"{server}/run/{second}")
    page.click("text=compare with the previous run of this sweep")
    assert first in page.locator("h1").inner_text()
    assert "regression" in page.locator("table.compare").inner_text()
    lost = page.locator("table.changed.lost tbody tr")
    assert lost.count() > 10
    shots(page, "compare")
    lost.first.locator("a").last.click()  # the new run's answer
    assert page.locator("h1").inner_text().startswith("Case")


def test_a_numgen_cell_shows_its_images_in_a_browser(server, page, shots):
    page.goto(server + "/numgen")
    page.locator("table.runs tbody a").first.click()
    assert page.locator("table.confusion").count() == 1
    shots(page, "numgen")
    page.locator("table.confusion td a").nth(2).click()
    images = page.locator(".images img")
    assert images.count() == 2
    for i in range(2):  # served and decoded, not broken (they load lazily: look at each)
        images.nth(i).scroll_into_view_if_needed()
        page.wait_for_function("image => image.complete && image.naturalWidth > 0",
                               arg=images.nth(i).element_handle(), timeout=10_000)  # fmt: skip
    shots(page, "numgen-cell")
