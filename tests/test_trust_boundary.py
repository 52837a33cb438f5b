"""The trust boundary (docs/trust.md): pickle only on the env manager's own pipes; files are data."""

from __future__ import annotations

import ast
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from profiler import TimerFileError, load_timing_tree

ROOT = Path(__file__).resolve().parent.parent
PICKLING_MODULES = {"pickle", "cPickle", "_pickle", "cloudpickle", "dill", "marshal", "shelve", "joblib"}
# device_memory only writes: the CUDA allocator snapshot is a pickle file for PyTorch's memory viewer.
ALLOWED_TO_PICKLE = {"envmanager/transport/protocol.py", "envmanager/transport/worker.py",
                     "profiler/gpu/device_memory.py"}


def imported_modules(source: Path) -> set[str]:
    imported = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    return imported


def test_only_the_env_managers_pipe_protocol_and_worker_import_a_pickling_module():
    pickling = {
        str(path.relative_to(ROOT))
        for package in ("profiler", "envmanager")
        for path in (ROOT / package).rglob("*.py")
        if imported_modules(path) & PICKLING_MODULES
    }
    assert pickling == ALLOWED_TO_PICKLE


class RunsCodeWhenUnpickled:
    """Unpickling this creates a file: proof that loading it ran code."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


@pytest.fixture
def hostile_pickle(tmp_path) -> tuple[Path, Path]:
    marker = tmp_path / "code_ran"
    path = tmp_path / "run_timers.json"
    path.write_bytes(pickle.dumps(RunsCodeWhenUnpickled(marker), protocol=0))
    return path, marker


def test_the_loader_refuses_a_pickle_without_running_it(hostile_pickle):
    path, marker = hostile_pickle
    with pytest.raises(TimerFileError):
        load_timing_tree(path)
    assert not marker.exists()


WATCH_FOR_UNPICKLING = """
import sys
found = []
sys.addaudithook(lambda event, args: event.startswith("pickle.") and found.append(event))
from profiler.cli.commands import main
run, out = sys.argv[1], sys.argv[2]
codes = [
    main(["analyze", run]),
    main(["diff", run, run]),
    *(main(["convert", run, "--to", name, "-o", out]) for name in ("chrome", "speedscope", "collapsed", "html", "mlagents")),
    main(["report", run, "-o", out]),
]
print(codes, found)
"""


def test_no_rlprof_command_unpickles_a_file(hostile_pickle, tmp_path):
    path, marker = hostile_pickle
    result = subprocess.run(
        [sys.executable, "-c", WATCH_FOR_UNPICKLING, str(path), str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120,
    )
    assert result.stdout.strip() == f"{[2] * 8} []"
    assert result.stderr.count("rlprof: error: ") == 8
    assert not marker.exists()
