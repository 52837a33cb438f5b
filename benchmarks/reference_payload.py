"""Load rlprof's payload version 3 (its snapshot and its merger) from git history, so that
benchmarks can measure it beside the current version in one run.

Version 3 named every block in every payload, as a nested tuple of names and figures, and checked
it field by field; version 4 declares names once and sends columns of numbers (see
``profiler.multiprocess.payload``). The two modules are read with ``git show`` from the last commit that had
version 3 and loaded under their own names, sharing everything else with the current rlprof.
Returns None (with the reason on stderr) outside a git checkout, so a benchmark prints its other
figures regardless.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

VERSION_3_COMMIT = "9db763dfe1aaaf8245745987aac7a3350a52ebcf"
"""The last commit whose payloads were version 3."""

_REPOSITORY = Path(__file__).resolve().parent.parent


def load_version_3() -> tuple[ModuleType, ModuleType] | None:
    """Return version 3's ``(payload, merge)`` modules, or None if git cannot show them."""
    sources = {}
    for name in ("payload", "merge"):
        shown = subprocess.run(
            ["git", "show", f"{VERSION_3_COMMIT}:profiler/{name}.py"],
            cwd=_REPOSITORY, capture_output=True, text=True,
        )
        if shown.returncode != 0:
            print(f"payload version 3 unavailable: {shown.stderr.strip()}", file=sys.stderr)
            return None
        sources[name] = shown.stdout
    payload = _load("rlprof_payload_v3", sources["payload"])
    merge_source = sources["merge"].replace("from profiler.multiprocess.payload import", "from rlprof_payload_v3 import")
    merge = _load("rlprof_merge_v3", merge_source)
    return payload, merge


def _load(module_name: str, source: str) -> ModuleType:
    module = ModuleType(module_name)
    module.__file__ = f"<{module_name}>"
    sys.modules[module_name] = module  # dataclasses look their module up by name
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module
