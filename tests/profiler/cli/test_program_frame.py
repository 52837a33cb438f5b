"""``rlprof run`` runs a script as ``runpy.run_path`` does, its module frame where ``python`` puts
it: at the bottom of a frame-stack chunk (CPython 3.11, with the C helper built), so that the
program's calls cross the chunks' ends where they do under ``python``.

Real subprocesses, each with the C helper and forced to pure Python (``run_path`` itself).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profiler.cli import program_frame
from profiler.timing.accelerator import FORCE_PURE_PYTHON

FINISHES_WITHIN = 120  # seconds: generous, for a loaded machine; no test checks a duration

SEEN_SCRIPT = """
    import json, sys
    from profiler.cli.program_frame import frame_stack_offset

    offset = frame_stack_offset()  # first: the module frame is the top of the stack here
    seen = {name: repr(globals().get(name)) for name in
            ("__name__", "__package__", "__spec__", "__loader__", "__cached__", "__doc__")}
    seen["file"] = __file__
    seen["argv0"] = sys.argv[0]
    seen["main_is_this"] = sys.modules["__main__"].__dict__ is globals()
    seen["builtins_is_dict"] = isinstance(__builtins__, dict)
    seen["offset"] = offset
    with open(sys.argv[1], "w") as file:
        json.dump(seen, file)
"""

FAILING_SCRIPT = """
    def fail():
        raise ValueError("the program's own error")

    fail()
"""

MODES = {"C helper": {}, "pure Python": {FORCE_PURE_PYTHON: "1"}}


def _environment(mode: str) -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if key != FORCE_PURE_PYTHON}
    return {**environment, **MODES[mode]}


def _script(folder: Path, source: str, name: str = "program.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


def _rlprof_run(folder: Path, mode: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profiler", "run", "--summaries-dir", str(folder / "runs"),
                           "--no-stack-sampler", *arguments], cwd=folder, env=_environment(mode),
                          capture_output=True, text=True, timeout=FINISHES_WITHIN)


@pytest.mark.parametrize("mode", MODES)
def test_the_script_sees_what_run_path_gives_it(tmp_path: Path, mode: str) -> None:
    script = _script(tmp_path, SEEN_SCRIPT)
    plain = tmp_path / "plain.json"
    subprocess.run([sys.executable, "-c", "import runpy, sys; sys.argv = sys.argv[1:]; "
                    "runpy.run_path(sys.argv[0], run_name='__main__')", str(script), str(plain)],
                   cwd=tmp_path, env=_environment(mode), check=True, timeout=FINISHES_WITHIN)
    profiled = tmp_path / "profiled.json"
    done = _rlprof_run(tmp_path, mode, str(script), str(profiled))
    assert done.returncode == 0, done.stderr
    seen, expected = json.loads(profiled.read_text()), json.loads(plain.read_text())
    seen.pop("offset"), expected.pop("offset")
    assert seen == expected


def test_the_module_frame_starts_where_python_starts_it(tmp_path: Path) -> None:
    if program_frame.frame_stack_offset() is None:
        pytest.skip("no C helper here, or not CPython 3.11: the frame stack is not read")
    script = _script(tmp_path, SEEN_SCRIPT)
    plain, profiled = tmp_path / "plain.json", tmp_path / "profiled.json"
    subprocess.run([sys.executable, str(script), str(plain)], cwd=tmp_path, check=True, timeout=FINISHES_WITHIN,
                   env=_environment("C helper"))
    done = _rlprof_run(tmp_path, "C helper", str(script), str(profiled))
    assert done.returncode == 0, done.stderr
    # python's first chunk keeps its first slot: the module frame lies one pointer higher there.
    pointer = 8 if sys.maxsize > 2**32 else 4
    assert json.loads(profiled.read_text())["offset"] == json.loads(plain.read_text())["offset"] - pointer


@pytest.mark.parametrize("mode", MODES)
def test_the_programs_error_is_reported_from_its_own_frames(tmp_path: Path, mode: str) -> None:
    script = _script(tmp_path, FAILING_SCRIPT)
    done = _rlprof_run(tmp_path, mode, str(script))
    assert done.returncode == 1
    traceback_lines = done.stderr.split("Traceback (most recent call last):\n", 1)[1].splitlines()
    assert traceback_lines[0].startswith(f'  File "{script}", line 5, in <module>')
    assert "program_frame" not in done.stderr and "runpy" not in done.stderr
    assert "ValueError: the program's own error" in done.stderr


@pytest.mark.parametrize("mode", MODES)
def test_a_program_that_exits_and_runs_again_leaves_the_stack_whole(tmp_path: Path, mode: str) -> None:
    # sys.exit unwinds through the helper; the frames below it (rlprof's) then run on, and a
    # second script run in the same process (the helper used twice) ends as the first did.
    script = _script(tmp_path, "import sys\nsys.exit(3)\n")
    driver = _script(tmp_path, f"""
        import sys
        from profiler.cli.program_frame import run_script

        def deep(levels):
            return deep(levels - 1) if levels else run_script({str(script)!r})

        codes = []
        for levels in (0, 200, 0):
            try:
                deep(levels)
            except SystemExit as exit_request:
                codes.append(exit_request.code)
        print(codes)
    """, name="driver.py")
    done = subprocess.run([sys.executable, str(driver)], cwd=tmp_path, env=_environment(mode), capture_output=True,
                          text=True, timeout=FINISHES_WITHIN)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[3, 3, 3]"


def _other_pythons() -> list[str]:
    """CPython interpreters of other minor versions than this one's found on PATH or under pyenv,
    for the tests that build the helper for them (3.10 and later, as pyproject.toml says)."""
    candidates = [shutil.which(f"python3.{minor}") for minor in range(10, 20)]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3")))
    found: dict[str, str] = {}
    for candidate in filter(None, candidates):
        try:
            version = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                     capture_output=True, text=True, timeout=FINISHES_WITHIN).stdout.strip()
        except OSError:
            continue
        if version and version != "%d.%d" % sys.version_info[:2] and tuple(map(int, version.split("."))) >= (3, 10):
            found.setdefault(version, candidate)
    return [found[version] for version in sorted(found)]


def _build_for(python: str, folder: Path) -> Path:
    """A copy of rlprof's ``profiler`` package with the timer core and the program frame's helper
    compiled for ``python`` (as ``setup.py build_ext`` would, with the interpreter's own headers)."""
    root = Path(program_frame.__file__).parents[2]
    copy = folder / "rlprof"
    shutil.copytree(root / "profiler", copy / "profiler", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    include, suffix = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['include']); "
         "print(sysconfig.get_config_var('EXT_SUFFIX'))"],
        capture_output=True, text=True, check=True, timeout=FINISHES_WITHIN).stdout.split()
    for module in ("profiler/timing/_timer_core", "profiler/cli/_program_frame"):
        subprocess.run(["cc", "-shared", "-fPIC", "-O1", f"-I{include}", str(copy / f"{module}.c"),
                        "-o", str(copy / f"{module}{suffix}")], check=True, timeout=FINISHES_WITHIN)
    return copy


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to build the helper with")
@pytest.mark.parametrize("python", _other_pythons())
def test_a_script_runs_on_every_python_the_helper_builds_for(tmp_path: Path, python: str) -> None:
    # The helper builds on every CPython (a plain exec elsewhere than 3.11); the script must run
    # there as run_path runs it, whatever runpy's private helpers look like in that version.
    copy = _build_for(python, tmp_path)
    script = _script(tmp_path, "import sys\nprint(__name__, sys.argv[0])\n")
    done = subprocess.run([python, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                           "from profiler.cli.program_frame import run_script; run_script(sys.argv[2])",
                           str(copy), str(script)], cwd=tmp_path, env=_environment("C helper"),
                          capture_output=True, text=True, timeout=FINISHES_WITHIN)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"__main__ {script}\n"


@pytest.mark.parametrize("mode", MODES)
def test_audit_hooks_see_the_programs_exec_as_under_run_path(tmp_path: Path, mode: str) -> None:
    # exec() raises the "exec" audit event (so does python itself, running a script): a hook
    # installed before the program (sitecustomize, a sandbox) sees the program's code object.
    script = _script(tmp_path, "pass\n")
    driver = _script(tmp_path, f"""
        import sys
        from profiler.cli.program_frame import run_script

        seen = []
        sys.addaudithook(lambda event, arguments: seen.append(arguments[0].co_filename) if event == "exec" else None)
        run_script({str(script)!r})
        print(seen)
    """, name="driver.py")
    done = subprocess.run([sys.executable, str(driver)], cwd=tmp_path, env=_environment(mode), capture_output=True,
                          text=True, timeout=FINISHES_WITHIN)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == repr([str(script)])


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to build the helper with")
@pytest.mark.parametrize("python", _other_pythons())
def test_the_command_line_and_its_result_classes_import_on_every_python_pyproject_allows(
        tmp_path: Path, python: str) -> None:
    # profiler.records marks Record for type checkers with typing.dataclass_transform, which
    # Python 3.10 lacks: rlprof run and rlprof analyze import it at their start.
    copy = _build_for(python, tmp_path)
    done = subprocess.run([python, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                           "import profiler.cli.commands, profiler.records; print('imported')", str(copy)],
                          cwd=tmp_path, env=_environment("C helper"), capture_output=True, text=True,
                          timeout=FINISHES_WITHIN)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "imported\n"


def _module(folder: Path) -> str:
    """A package ``trainer`` whose module ``seen`` writes what it sees (SEEN_SCRIPT): its name for -m."""
    package = folder / "trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    _script(package, SEEN_SCRIPT, name="seen.py")
    return "trainer.seen"


@pytest.mark.parametrize("mode", MODES)
def test_a_module_sees_what_python_dash_m_gives_it(tmp_path: Path, mode: str) -> None:
    module = _module(tmp_path)
    plain, profiled = tmp_path / "plain.json", tmp_path / "profiled.json"
    subprocess.run([sys.executable, "-m", module, str(plain)], cwd=tmp_path, env=_environment(mode), check=True,
                   timeout=FINISHES_WITHIN)
    done = _rlprof_run(tmp_path, mode, "-m", module, str(profiled))
    assert done.returncode == 0, done.stderr
    seen, expected = ({name: re.sub(" at 0x[0-9a-f]+", "", value) if isinstance(value, str) else value
                        for name, value in json.loads(path.read_text()).items()}  # the loader's address
                       for path in (profiled, plain))
    seen.pop("offset"), expected.pop("offset")
    # __main__ is a fresh module for the run (runpy.run_module's, with or without the helper):
    # exec gives it the builtins' dict where python's own __main__ has the builtins module.
    assert seen.pop("builtins_is_dict") and not expected.pop("builtins_is_dict")
    assert seen == expected


def test_a_modules_frame_starts_where_python_dash_m_starts_it(tmp_path: Path) -> None:
    if program_frame.frame_stack_offset() is None:
        pytest.skip("no C helper here, or not CPython 3.11: the frame stack is not read")
    module = _module(tmp_path)
    plain, profiled = tmp_path / "plain.json", tmp_path / "profiled.json"
    subprocess.run([sys.executable, "-m", module, str(plain)], cwd=tmp_path, check=True, timeout=FINISHES_WITHIN,
                   env=_environment("C helper"))
    done = _rlprof_run(tmp_path, "C helper", "-m", module, str(profiled))
    assert done.returncode == 0, done.stderr
    # Above runpy's _run_module_as_main and _run_code, as under python -m; python's first chunk
    # keeps its first slot: the module frame lies one pointer higher there.
    pointer = 8 if sys.maxsize > 2**32 else 4
    assert json.loads(profiled.read_text())["offset"] == json.loads(plain.read_text())["offset"] - pointer


CHANGES_FOLDER_MODULE = """
    import json, os, sys

    first = sys.path[0]
    os.chdir("elsewhere")  # a program that moves, then imports a module beside where it started
    import beside

    with open(os.path.join("..", sys.argv[1]), "w") as file:
        json.dump({"first": first, "beside": beside.VALUE}, file)
"""


@pytest.mark.parametrize("mode", MODES)
def test_a_modules_first_path_is_the_folder_python_dash_m_puts_there(tmp_path: Path, mode: str) -> None:
    # python -m puts the current folder's full path first on sys.path (not "", which follows the
    # program's chdir): a module that imports after moving finds what it finds under python -m.
    package = tmp_path / "trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    _script(package, CHANGES_FOLDER_MODULE, name="moves.py")
    _script(tmp_path, "VALUE = 7\n", name="beside.py")
    (tmp_path / "elsewhere").mkdir()
    subprocess.run([sys.executable, "-m", "trainer.moves", "plain.json"], cwd=tmp_path, env=_environment(mode),
                   check=True, timeout=FINISHES_WITHIN)
    done = _rlprof_run(tmp_path, mode, "-m", "trainer.moves", "profiled.json")
    assert done.returncode == 0, done.stderr
    expected = json.loads((tmp_path / "plain.json").read_text())
    assert expected == {"first": str(tmp_path), "beside": 7}
    assert json.loads((tmp_path / "profiled.json").read_text()) == expected


@pytest.mark.parametrize("mode", MODES)
def test_a_package_without_a_main_module_says_what_python_dash_m_says(tmp_path: Path, mode: str) -> None:
    # python -m prints one line and exits with 1 (runpy's _run_module_as_main); rlprof's path
    # with the helper and its path without it say the same, not a traceback of runpy's frames.
    (tmp_path / "library").mkdir()
    (tmp_path / "library" / "__init__.py").write_text("")
    plain = subprocess.run([sys.executable, "-m", "library"], cwd=tmp_path, env=_environment(mode),
                           capture_output=True, text=True, timeout=FINISHES_WITHIN)
    done = _rlprof_run(tmp_path, mode, "-m", "library")
    assert plain.returncode == done.returncode == 1
    assert "cannot be directly executed" in plain.stderr
    assert done.stderr.startswith(plain.stderr)
    assert "Traceback" not in done.stderr
