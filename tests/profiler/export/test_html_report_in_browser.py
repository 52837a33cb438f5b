"""The HTML report opened in a real headless Chromium: its script runs to the end, logs nothing to
the console, and a block name holding a script does not execute."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from profiler import get_timer_tree, hierarchical_timer
from profiler.export import write_export

CHROMIUM = shutil.which("chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium on PATH (apt-get install chromium)"
)


def open_in_chromium(page_path, profile_dir):
    """The DOM after the page's scripts ran, and every console message Chromium logged."""
    completed = subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile_dir}", "--dump-dom", page_path.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
    )
    console = [line for line in completed.stderr.splitlines() if ":CONSOLE" in line]
    return completed.stdout, console


def test_the_report_renders_in_chromium_without_console_messages(run_with_timeline, fake_clock, tmp_path):
    hostile = "<script>document.documentElement.setAttribute('data-pwned','1')</script>"
    with hierarchical_timer(hostile):
        fake_clock.advance(0.001)
    run_with_timeline["children"].append(get_timer_tree()["children"][-1])
    page_path = write_export(run_with_timeline, "html", tmp_path / "report.html")

    dom, console = open_in_chromium(page_path, tmp_path / "chromium-profile")

    root_tag = re.search(r"<html[^>]*>", dom).group(0)  # where the script leaves its marks
    assert console == []
    ready = re.search(r'data-report-ready="(\d+)"', root_tag)
    assert ready, "the report's script did not run to the end"
    assert int(ready.group(1)) == page_path.read_text().count('<div class="frame')
    assert "data-report-error" not in root_tag
    assert "data-pwned" not in root_tag, "a block name ran as a script"
