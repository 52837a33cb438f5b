"""Record the live view of a real run: docs/images/live_view.png and live_view.txt, in docs/live.md.

    python docs/images/capture_live_view.py

A real run: four envs stepped by a SubprocessEnvManager's worker processes, worker 3's six times
slower than the others (the planted straggler of tests/envmanager/straggler_training.py), a
``policy.act`` block before each step. The live view refreshes every second as it does on a
terminal; once the 5-second window has filled, its panel is drawn by the view's own renderer on a
recording ``rich`` console 110 columns wide, saved as SVG and text, and the SVG photographed by
headless Chromium into the PNG. Needs rich and chromium on PATH (``apt-get install chromium``).
"""

from __future__ import annotations

import io
import re
import sys
import tempfile
from pathlib import Path

IMAGES = Path(__file__).resolve().parent
REPOSITORY = IMAGES.parents[1]
sys.path[:0] = [str(REPOSITORY), str(REPOSITORY / "tests" / "envmanager"), str(IMAGES)]

from make_screenshots import screenshot  # noqa: E402
from rich.console import Console  # noqa: E402
from straggler_training import step_for, straggler_env_fns  # noqa: E402

from envmanager.subprocess_env_manager import SubprocessEnvManager  # noqa: E402
from profiler.integrations.live_render import rich_panel  # noqa: E402
from profiler.integrations.live_view import LiveView, in_process_reader  # noqa: E402

COLUMNS = 110
RUN_SECONDS = 9.0
"""How long the run goes before the picture: past the 5-second window and the workers' start."""


def run_with_the_view() -> LiveView:
    """Step the planted straggler for RUN_SECONDS with the live view refreshing; the view, its
    last figures taken while the workers still ran."""
    envs = SubprocessEnvManager(straggler_env_fns())
    view = LiveView(in_process_reader(), stream=io.StringIO(), mode="lines", measure_memory=True)
    try:
        view.start()
        step_for(envs, RUN_SECONDS)
        view.refresh()
    finally:
        view.stop()
        envs.close()
    return view


def main() -> None:
    view = run_with_the_view()
    console = Console(record=True, width=COLUMNS, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor")
    console.print(rich_panel(view.latest, "rlprof live"))
    text = console.export_text(clear=False)
    svg = console.export_svg(title="rlprof run --live train.py", clear=True)
    (IMAGES / "live_view.txt").write_text(text.rstrip("\n") + "\n", encoding="utf-8")
    width, height = (float(number) for number in re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).groups())
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "live_view.html"
        page.write_text(f'<!DOCTYPE html><html><body style="margin:0;background:#fff">{svg}</body></html>',
                        encoding="utf-8")
        screenshot(page, IMAGES / "live_view.png", int(width) + 1, int(height) + 1)
    print(IMAGES / "live_view.txt")


if __name__ == "__main__":
    main()
