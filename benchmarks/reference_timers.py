"""Fetch Unity ML-Agents' ``timers.py`` so benchmarks can measure it beside ours.

``mlagents_envs/timers.py`` imports only the standard library, so it is loaded straight from the
wheel as a standalone module; nothing of ML-Agents is installed. Returns None (with the reason on
stderr) when the wheel cannot be fetched, so a benchmark prints its other figures regardless.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

MLAGENTS_WHEEL_VERSION = "1.1.0"
CACHE_DIR = Path.home() / ".cache" / "rlprof-benchmarks"


def load_mlagents_timers() -> ModuleType | None:
    """Return ML-Agents' ``timers`` module, downloading its wheel once into a cache folder."""
    source = CACHE_DIR / f"mlagents_timers_{MLAGENTS_WHEEL_VERSION}.py"
    if not source.exists():
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        download = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--ignore-requires-python", f"mlagents-envs=={MLAGENTS_WHEEL_VERSION}",
             "-d", str(CACHE_DIR)],
            capture_output=True, text=True, timeout=300,
        )
        wheels = sorted(CACHE_DIR.glob(f"mlagents_envs-{MLAGENTS_WHEEL_VERSION}-*.whl"))
        if download.returncode != 0 or not wheels:
            print(f"ML-Agents timers unavailable: {download.stderr.strip()[-300:]}", file=sys.stderr)
            return None
        with zipfile.ZipFile(wheels[0]) as wheel:
            source.write_bytes(wheel.read("mlagents_envs/timers.py"))
    spec = importlib.util.spec_from_file_location("mlagents_timers", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
