"""Fixtures shared by the whole suite: a fake clock, a clean default timer stack, a local Ray."""

from __future__ import annotations

import compileall
import fcntl
import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from multi_node_cluster import multi_node_cluster  # noqa: F401  (a fixture: a Ray cluster of several nodes)

from profiler.analysis.text_format import TABLE_WIDTH
from profiler.recording import memory
from profiler.timing import timers
from profiler.gpu import nvtx_bridge


class FakeClock:
    """A clock that moves only when told to, so timings in tests are exact."""

    def __init__(self, start: float = 1000.0) -> None:
        self.time = start

    def __call__(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds


@pytest.fixture
def fake_clock() -> Iterator[FakeClock]:
    clock = FakeClock()
    previous = timers.set_clock(clock)
    timers.reset_timers()
    try:
        yield clock
    finally:
        timers.set_clock(previous)


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C works in the session and in every program it starts, even when the session was
    started with SIGINT ignored, as a shell without job control starts a background job (``cmd &``
    in a script, some CI runners): a program inherits an ignored SIGINT across ``exec``, and the
    Ctrl-C specs would fail for it. A handler, unlike "ignore", is not inherited.

    The session (the pytest-xdist controller, before it starts its workers) also writes the
    bytecode caches of the checkout, see :func:`_compile_checkout`."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not hasattr(config, "workerinput"):
        _compile_checkout()


def _compile_checkout() -> None:
    """Write the bytecode caches of rlprof's packages and of the tests' modules, once a session.

    The suite starts many Python processes that import rlprof (``rlprof run``, env
    workers under spawn, Ray workers), and the test envs' modules. An editable install imports
    rlprof from the checkout, and a fresh checkout has no caches; under
    ``PYTHONDONTWRITEBYTECODE=1`` (set on this project's machines) no process writes them, so each
    compiled every module it imported: ``rlprof run`` of a one-line program took 0.7 to 1.0 s
    instead of 0.4 s, and the CLI and automatic tests 82 s instead of 68 s. ``compileall`` writes
    them whatever that setting (1.3 s for the three folders, and nothing once they are current);
    an installed rlprof has them from ``pip install``."""
    root = Path(__file__).resolve().parent.parent
    for folder in ("profiler", "envmanager", "tests"):
        compileall.compile_dir(root / folder, quiet=1)


@pytest.fixture(autouse=True)
def table_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables are laid out for :data:`~profiler.analysis.text_format.TABLE_WIDTH` columns, as
    for output to a file: otherwise the width would be the ``COLUMNS`` of the shell running the
    tests, or of pytest-xdist's workers (80), or the terminal's, and a narrow one elides paths the
    tests look for. Tests of the width set ``COLUMNS`` themselves; processes started inherit it."""
    monkeypatch.setenv("COLUMNS", str(TABLE_WIDTH))


@pytest.fixture(autouse=True, scope="session")
def sb3_logs_in_the_sessions_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Stable-Baselines3's ``learn`` makes a folder for its logger's files on every call, in the
    system's temporary folder unless ``SB3_LOGDIR`` names one: the suite's SB3 runs left about a dozen
    empty ``/tmp/SB3-<date>`` folders a session. Here they go into the session's own temporary
    folder, which pytest clears; programs the tests start inherit the setting."""
    previous = os.environ.get("SB3_LOGDIR")
    os.environ["SB3_LOGDIR"] = str(tmp_path_factory.mktemp("sb3_logs"))
    yield
    if previous is None:
        del os.environ["SB3_LOGDIR"]
    else:
        os.environ["SB3_LOGDIR"] = previous


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test marked ``quiet_machine`` has the machine to itself, from its setup (the module's runs
    built by its fixtures included) to its teardown: no other pytest-xdist worker runs a test
    meanwhile. Its runs are built to show a verdict (or built not to), and another test's load
    changes their premise: a test beside one took a node of 3 workers on 1 core from 12 ms a step
    to 186, and the crowding's share of the run below the verdict's 10%.

    The workers share a lock, each holding it (shared, or exclusive for such a test) while one
    test runs, never while waiting for the next. One asking for it exclusively first takes the
    turnstile, which the others pass on their way to the lock, so that they cannot keep it
    waiting by taking turns."""
    if not hasattr(item.config, "workerinput"):  # not a pytest-xdist worker: nothing runs beside
        yield
        return
    folder = Path(item.config.option.basetemp).parent  # the run's, shared by its workers
    mode = fcntl.LOCK_EX if item.get_closest_marker("quiet_machine") else fcntl.LOCK_SH
    with open(folder / "machine.turnstile", "w") as turnstile, open(folder / "machine.lock", "w") as lock:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(lock, mode)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        yield


@pytest.fixture(autouse=True)
def clean_timers() -> Iterator[None]:
    """Every test starts with empty trees (the calling thread's, and those other threads, ended
    or not, left behind), profiling enabled, no memory sampling and no NVTX ranges."""
    timers.enable()
    _reset_every_stack()
    yield
    timers.enable()
    nvtx_bridge.apply_nvtx(None)
    memory.stop_sampling()
    memory.clear_memory()
    _reset_every_stack()


@pytest.fixture(autouse=True)
def default_profiler_controls() -> Iterator[None]:
    """After each test the MXNet-style controls are back at their defaults: no dump thread, no
    end-of-run dump armed (it would write into the folder pytest runs in), no timeline being
    recorded, worker payloads merged."""
    yield
    from profiler.control import controls as control, end_of_run
    from profiler.recording import events, memory
    from profiler.multiprocess import merge

    if control._control.memory_sampling is not None:
        memory.stop_sampling()
        memory.clear_memory()
    control._control.stop_periodic_thread()
    end_of_run.disarm()
    timers.enable()  # before the new controls read the switch: they start in its state
    control._control = control._ProfilerControl()
    merge.set_merging(True)
    if events.is_recording():
        events.stop_recording()
        events.clear_recording()


@pytest.fixture
def recording() -> Iterator[None]:
    """Timeline recording on for the test, then off and forgotten."""
    from profiler.recording import events

    events.start_recording()
    yield
    events.stop_recording()
    events.clear_recording()


def _reset_every_stack() -> None:
    timers.reset_timers()
    for stack in timers.all_timer_stacks():
        stack.reset()
        # As a new stack: its next payload declares every block name (see profiler.multiprocess.block_ids).
        stack.block_ids = None


def parse_strict_json(text: str | bytes) -> Any:
    """Parse as JavaScript's JSON.parse does (Perfetto, speedscope, browsers): the bare tokens
    NaN and Infinity, which Python's own parser lets through, are errors."""

    def refuse(token: str) -> Any:
        raise ValueError(f"not strict JSON: the bare token {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def strict_json() -> Callable[[str | bytes], Any]:
    """:func:`parse_strict_json`, for tests that check every file rlprof writes is strict JSON."""
    return parse_strict_json


# Modules the tests' envs and tasks come from, which Ray's worker processes must import too: the
# shared helpers, and the Ray tests that define envs of their own.
_TEST_MODULE_FOLDERS = [
    Path(__file__).parent / "envmanager",
    Path(__file__).parent / "envmanager" / "ray",
    Path(__file__).parent / "profiler",
    Path(__file__).parent / "profiler" / "integrations" / "ray_programs",
]


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A local Ray on this machine's 2 cores, started once for the whole session, shut down at
    its end. Tests that use it run last (see ``pytest_collection_modifyitems``)."""
    ray = pytest.importorskip(
        "ray", reason="Ray is not installed; pip install -e '.[ray]' runs the Ray tests"
    )
    # Ray's workers are started by its raylet, which inherits this process's environment.
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(folder) for folder in _TEST_MODULE_FOLDERS] + ([previous] if previous else [])
    )
    try:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            object_store_memory=128 * 1024 * 1024,
        )
    finally:
        if previous is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = previous
    try:
        yield ray
    finally:
        ray.shutdown()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests that use Ray after all the others: Ray's threads and processes, once
    started, stay for the rest of the session, and the other tests' forked workers and child
    process checks should never meet them. Those on the multi-node cluster run last of all: it
    shuts the session's Ray down (see tests/envmanager/ray/conftest.py).

    The suite runs on three pytest-xdist workers (``-n 3`` in pyproject.toml), which are handed
    the tests in this order, each worker running its share in order: Ray's tests still come
    after every other test of their worker. (A session or module fixture is built once in each
    worker that runs a test of it.)"""

    def ray_order(item: pytest.Item) -> tuple[bool, bool]:
        fixtures = getattr(item, "fixturenames", ())
        multi_node = "multi_node_cluster" in fixtures
        return (multi_node or "ray_cluster" in fixtures, multi_node)

    items.sort(key=ray_order)
