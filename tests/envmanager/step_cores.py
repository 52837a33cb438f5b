"""The fixture that runs a test module twice in one pytest run: on the step path's C helper
(``envmanager/transport/_step_core.c``) and on its pure-Python reference
(:class:`envmanager.transport.timed_calls.PythonStepTimer`). The pure-Python run also sets
``RLPROF_PURE_PYTHON=1``, so that worker processes a test spawns run the reference too (a forked
one inherits the switch). A module imports :func:`step_core` to put its tests under it, as
tests/profiler/timer_cores.py does for the timer's own core."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from profiler.timing.accelerator import FORCE_PURE_PYTHON
from envmanager.transport import timed_calls

STEP_CORES = ("compiled", "python")


@pytest.fixture(autouse=True, params=STEP_CORES)
def step_core(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The step timer this test gets: ``"compiled"`` (skipped where the C helper is not built,
    saying why) or ``"python"``. The process's own choice is back in force after it."""
    core = request.param
    default = timed_calls.compiled()
    if core == "compiled":
        if timed_calls.unavailable_reason and not default:
            try:
                timed_calls.use_compiled(True)
            except RuntimeError as error:
                pytest.skip(str(error))
        monkeypatch.delenv(FORCE_PURE_PYTHON, raising=False)
    else:
        monkeypatch.setenv(FORCE_PURE_PYTHON, "1")
    timed_calls.use_compiled(core == "compiled")
    try:
        yield core
    finally:
        timed_calls.use_compiled(default)
