"""Capture the live view of a real run as text: docs/images/live_view.txt, shown in docs/live.md.

    python docs/images/capture_live_view.py

Runs ``rlprof run --live`` on tests/envmanager/straggler_training.py (four envs, worker 3's six
times slower) in a detached tmux session 110 columns wide, waits until the window has filled,
and saves what the terminal shows (``tmux capture-pane``). Needs tmux on PATH.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
PICTURE = Path(__file__).resolve().parent / "live_view.txt"
SETTLE_SECONDS = 9.0
"""How long the run goes before the capture: past the 5-second window and the workers' start."""


def main() -> None:
    tmux = shutil.which("tmux") or sys.exit("needs tmux on PATH (apt-get install tmux)")
    session = f"rlprof-live-{os.getpid()}"
    with tempfile.TemporaryDirectory() as folder:
        command = (f"cd {REPOSITORY} && {sys.executable} -m profiler run --live --summaries-dir "
                   f"{folder} tests/envmanager/straggler_training.py 15; sleep 30")
        subprocess.run([tmux, "new-session", "-d", "-s", session, "-x", "110", "-y", "40", command], check=True)
        try:
            time.sleep(SETTLE_SECONDS)
            shown = subprocess.run([tmux, "capture-pane", "-t", session, "-p"], check=True,
                                   capture_output=True, text=True).stdout
        finally:
            subprocess.run([tmux, "kill-session", "-t", session], check=False)
    PICTURE.write_text(shown.rstrip("\n") + "\n")
    print(f"wrote {PICTURE}")


if __name__ == "__main__":
    main()
