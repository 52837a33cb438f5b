"""The fixture that runs a folder's tests twice in one pytest run: on the C accelerator (a block's
``__enter__`` and ``__exit__``, ``hierarchical_timer``'s lookup, the snapshot's ``take_rows``) and
on the pure-Python core, the reference it must match (see profiler/timing/timer_node.py). The
pure-Python run also sets ``RLPROF_PURE_PYTHON=1``, so that processes a test starts run that
core too. A folder's ``conftest.py`` imports :func:`timer_core` to put its tests under it
(tests/profiler/timing/, tests/profiler/multiprocess/); docs/architecture.md says why the suite
runs once, with both cores inside it, rather than twice."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from profiler.timing import block_hooks, timer_node
from profiler.timing.accelerator import FORCE_PURE_PYTHON, unavailable_reason

CORES = ("compiled", "python")


@pytest.fixture(autouse=True, params=CORES)
def timer_core(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The core blocks run in this test: ``"compiled"`` (skipped where the accelerator is not
    loaded, saying why) or ``"python"``. The process's own core is back in force after it."""
    core = request.param
    if core == "compiled" and timer_node.COMPILED_ENTER is None:
        pytest.skip(f"C accelerator not loaded: {unavailable_reason}")
    if core == "python":
        monkeypatch.setenv(FORCE_PURE_PYTHON, "1")
    else:
        monkeypatch.delenv(FORCE_PURE_PYTHON, raising=False)
    default = timer_node.accelerated()
    block_hooks.use_compiled_core(core == "compiled")
    try:
        yield core
    finally:
        block_hooks.use_compiled_core(default)
