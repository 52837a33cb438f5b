"""RayEnvManager's ``live_view=True`` on a real run: a planted straggler's actors on the session's
local Ray, the view drawn by the driver on a real pseudo-terminal."""

from __future__ import annotations

import sys
import termios
from pathlib import Path

import pytest
from pseudo_terminal import CURSOR_ESCAPES, Terminal

pytest.importorskip("rich")
pytestmark = pytest.mark.usefixtures("ray_cluster")

PROGRAM = str(Path(__file__).parents[1] / "manager_live_view_training.py")


def test_a_ray_managers_live_view_shows_the_straggler_while_the_actors_run_and_goes_at_close(ray_cluster, tmp_path):
    address = ray_cluster.get_runtime_context().gcs_address
    stop_file = tmp_path / "stop"
    terminal = Terminal([sys.executable, PROGRAM, "ray", "60", str(stop_file), address])
    try:
        terminal.read_until(b"worker 3 holds up the vector step")
        assert terminal.process.poll() is None  # drawn while the run goes on
        stop_file.touch()
        assert terminal.wait_for_exit() == 0
        assert b"closed" in terminal.output
        assert CURSOR_ESCAPES.findall(terminal.output)[-1] == (b"25", b"h")
        assert termios.tcgetattr(terminal.slave) == terminal.modes_before
    finally:
        terminal.close()
