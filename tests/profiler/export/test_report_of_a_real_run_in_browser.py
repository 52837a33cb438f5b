"""The HTML report of a real run, opened in a real Chromium through Playwright: what a reader sees.

The run (``report_run_training.py`` under ``rlprof run``): four worker processes, worker 3 a
planted straggler, resource gauges sampled, and untimed work between the steps that the stack
sampler names. The page must run its script to the end with no error or console message, and
show its sections: the title from the run's name, each worker's bar with its mean, the gauges in
their units with what they are, and the flame graph's untimed part labelled and split.

Skipped where no Chromium is found (``apt-get install chromium``) or Playwright is missing
(``pip install playwright``, in the ``test`` extra; it drives the installed Chromium, no browser
download).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
PROGRAM = Path(__file__).parent / "report_run_training.py"
RAW_FLOAT = re.compile(r"\d\.\d{4,}|\de[-+]\d")
"""A figure printed as Python prints a float (0.007081, 2.2904e-05), not in a unit."""

pytestmark = pytest.mark.skipif(CHROMIUM is None,
                                reason="no Chromium on PATH to open the report in (apt-get install chromium)")
sync_api = pytest.importorskip("playwright.sync_api", reason="needs Playwright (pip install playwright; "
                               "it drives the installed Chromium, no browser download)")


@pytest.fixture(scope="module")
def report_path(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("report_run")
    subprocess.run([sys.executable, "-m", "profiler", "run", "--summaries-dir", str(folder), str(PROGRAM), "4"],
                   check=True, capture_output=True, timeout=300)
    (report,) = folder.glob("*_report.html")
    return report


@pytest.fixture(scope="module")
def opened(report_path):
    """The report open in headless Chromium, and every page error and console message it gave."""
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.on("console", lambda message: problems.append(f"console {message.type}: {message.text}"))
            page.goto(report_path.as_uri())
            page.wait_for_selector("html[data-report-ready]")
            yield page, problems
        finally:
            browser.close()


def test_the_report_runs_its_script_to_the_end_with_no_error_or_console_message(opened):
    page, problems = opened
    assert problems == []
    assert page.get_attribute("html", "data-report-error") is None
    assert int(page.get_attribute("html", "data-report-ready")) == page.locator("#flame .frame").count()


def test_every_section_is_shown(opened):
    page, _ = opened
    for section in ("verdicts", "summary", "flame-graph", "workers", "gauges", "top-blocks", "metadata"):
        assert page.locator(f"section#{section}").is_visible(), section


def test_the_title_is_the_runs_name(opened):
    page, _ = opened
    assert page.title() == "rlprof report: report_run_training"
    assert page.locator("h1").inner_text() == "rlprof report: report_run_training"


def test_each_worker_has_a_visible_bar_of_its_mean_the_straggler_the_longest_and_marked(opened):
    page, _ = opened
    rows = page.locator("#workers .worker-row")
    assert rows.count() == 4
    widths = {}
    for index in range(4):
        row = rows.nth(index)
        assert re.search(r"mean \d[\d.]* (ms|µs|s) × \d", row.inner_text())
        widths[row.locator(".worker-name").inner_text()] = row.locator(".mean").bounding_box()["width"]
    assert all(width >= 20 for width in widths.values()), widths  # the fast workers' means show too
    assert max(widths, key=widths.get) == "worker 3"
    assert "straggler" in rows.nth(3).get_attribute("class")


def test_the_gauges_are_shown_in_their_units_with_what_they_are(opened):
    page, _ = opened
    table = page.locator("#gauges table")
    assert table.is_visible()
    figures = table.locator("td.number").all_inner_texts()
    assert figures and not [figure for figure in figures if RAW_FLOAT.search(figure)]
    assert any(figure.endswith("MiB") for figure in figures) and any(figure.endswith("%") for figure in figures)
    assert "resident memory of worker 3" in table.inner_text()


def test_the_flame_graphs_untimed_part_is_labelled_and_split_over_the_places_sampled(opened):
    page, _ = opened
    untimed = page.locator('#flame .frame[data-name="(untimed: outside any block)"]')
    assert untimed.is_visible() and untimed.bounding_box()["width"] > 0
    place = page.locator('#flame .frame[data-name^="(untimed) log_progress (report_run_training.py:"]')
    assert place.is_visible() and place.bounding_box()["width"] >= 20
    place.hover()
    tooltip = page.locator("#tooltip")
    assert tooltip.is_visible()
    assert "log_progress" in tooltip.inner_text() and "stack samples" in tooltip.inner_text()
    assert page.locator("#flame-untimed").inner_text().startswith("Untimed time by where it fell in the loop")
