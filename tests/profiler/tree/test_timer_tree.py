"""The dump's metadata says what the run's processes competed for."""

from __future__ import annotations

from profiler import get_timer_tree
from profiler.recording.cpu_cores import cores_available


def test_the_metadata_names_the_cores_the_run_could_use():
    assert get_timer_tree()["metadata"]["cores_available"] == str(cores_available())
