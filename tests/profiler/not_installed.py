"""Run code in a fresh interpreter where some packages cannot be imported, as where they are not
installed: for the specifications of rlprof's optional dependencies."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_BLOCK_IMPORTS = """
import sys

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {packages!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}")
        return None

sys.meta_path.insert(0, NotInstalled())
"""


def run_without(packages: tuple[str, ...], code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (dedented) in a new interpreter in which importing ``packages`` fails."""
    source = _BLOCK_IMPORTS.format(packages=packages) + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=120)
