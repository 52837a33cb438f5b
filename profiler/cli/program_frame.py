"""Run a script as ``python`` does, its module frame where ``python`` puts it.

``runpy.run_path`` would run the program's module frame above rlprof's own frames and its own.
On CPython 3.11 a thread's frames live in 16 KB chunks, mapped when a call does not fit in the
current one and unmapped when that call returns, so where a program's loop crosses a chunk's end
depends on how deep its first frame starts: SB3's PPO under ``rlprof run`` crossed 19,379 times
(a 16 KB ``mmap``, a page fault and a ``munmap`` each) where ``python`` crossed 3,199. The C
helper ``_program_frame`` (built with rlprof's other accelerators) starts the module frame at
the bottom of a chunk of its own, as ``python`` does; without it, or on another Python than 3.11,
``runpy.run_path`` runs the script, with the same results.

A module (``rlprof run -m module``) runs as ``python -m module`` runs it: through runpy's own
``_run_module_as_main``, called by the helper at the bottom of a chunk of its own, so that the
module frame lies above the same runpy frames as under ``python -m``; ``__main__`` is a fresh
module for the program's run, as ``runpy.run_module(..., alter_sys=True)`` makes it. Without the
helper the same function runs, called plainly.
"""

from __future__ import annotations

import builtins
import pkgutil
import runpy
import sys
from types import ModuleType

from profiler.timing import accelerator

__all__ = ["PROGRAM_FRAME_VERSION", "frame_stack_offset", "run_module", "run_script"]

PROGRAM_FRAME_VERSION = 2
"""The interface version ``_program_frame.c`` must say (its ``PROGRAM_FRAME_VERSION``)."""


def _load_helper() -> ModuleType | None:
    if accelerator.extension is None:
        return None  # RLPROF_PURE_PYTHON=1, or no compiler at install
    if sys.version_info[:2] != (3, 11):
        # Elsewhere the helper is a plain exec (no frame-stack chunks to place the frame in), and
        # run_script's use of runpy's private helpers holds for 3.11's runpy only (3.13's
        # _get_code_from_file takes the file alone): run_path itself runs the script.
        return None
    module, _ = accelerator.load_extension("profiler.cli._program_frame", PROGRAM_FRAME_VERSION,
                                           "the program frame's C helper")
    return module


_helper = _load_helper()


def frame_stack_offset() -> int | None:
    """Bytes from the calling thread's frame-stack chunk's first slot to its top; None without
    the C helper or on another Python than 3.11."""
    return _helper.frame_stack_offset() if _helper is not None else None


def run_script(path: str) -> None:
    """Run the script at ``path`` as ``__main__``, as ``runpy.run_path(path, run_name="__main__")``
    does (a directory or a zip file with a ``__main__.py`` goes to ``run_path`` itself)."""
    if _helper is None or pkgutil.get_importer(path) is not None:
        runpy.run_path(path, run_name="__main__")
        return
    # run_path's own steps for a plain file, its helpers included (the code read from source or a
    # .pyc, a temporary __main__ module in sys.modules, sys.argv[0]), but the exec done by the helper.
    code, file_name = runpy._get_code_from_file("__main__", path)  # noqa: SLF001 - run_path's reading of a file
    with runpy._TempModule("__main__") as temporary, runpy._ModifiedArgv0(file_name):  # noqa: SLF001
        run_globals = temporary.module.__dict__
        run_globals.update(__name__="__main__", __file__=file_name, __cached__=None, __doc__=None,
                           __loader__=None, __package__="", __spec__=None)
        run_globals.setdefault("__builtins__", builtins.__dict__)  # as exec() adds it
        sys.audit("exec", code)  # as exec() raises it
        _helper.exec_program(code, run_globals)


def run_module(name: str) -> None:
    """Run module ``name`` as ``__main__``, as ``python -m name`` does (``sys.argv[0]`` its file,
    ``__spec__`` its spec, a module that cannot run a one-line exit), in a fresh ``__main__``
    module as ``runpy.run_module(name, run_name="__main__", alter_sys=True)`` makes it; the caller
    puts ``sys.argv`` back. ``python -m`` calls runpy's ``_run_module_as_main`` by name on every
    CPython, so it is here with or without the helper: both paths end the same way."""
    with runpy._TempModule("__main__"):  # noqa: SLF001 - run_module's fresh __main__
        if _helper is None:
            runpy._run_module_as_main(name, True)  # noqa: SLF001 - python -m's own entry
        else:
            _helper.call_program(runpy._run_module_as_main, name, True)  # noqa: SLF001
