"""Which Gymnasium versions ``envmanager`` works with, checked before any of it imports Gymnasium.

``envmanager`` builds on Gymnasium's 1.x vector API (``AutoresetMode``, the space utilities of
``gymnasium.vector.utils``). The floor is 1.4, the release the test suite runs on: with 1.1 to
1.3, float16 observations in shared memory fail inside Gymnasium's own code. With another Gymnasium — a project pinning ``gymnasium==0.29.1``,
installed beside rlprof with ``--no-deps`` — importing it would fail deep inside with a bare
``ImportError`` about some helper; this check says instead, in one line, what is installed and
what is needed. It reads the installed version from the package metadata, without importing
Gymnasium; where Gymnasium is imported already, from the module itself. An env worker of
``rlprof run`` started by spawn or forkserver has imported Gymnasium before ``envmanager`` (the
vector env's worker function comes first in what it unpickles), and reading the metadata would
cost it ``importlib.metadata`` and the packages behind it (``email``, ``zipfile``, ``csv``...):
about a third of what rlprof adds to such a worker's start.
"""

from __future__ import annotations

import re
import sys

__all__ = [
    "SUPPORTED_GYMNASIUM",
    "UnsupportedGymnasiumError",
    "check_gymnasium_version",
    "is_supported_gymnasium",
]

SUPPORTED_GYMNASIUM = ">=1.4,<2"
"""The Gymnasium versions envmanager supports; pyproject.toml and the README say the same."""

_LOWEST = (1, 4)
_BELOW = (2, 0)


class UnsupportedGymnasiumError(ImportError):
    """The installed Gymnasium is missing or of a version envmanager does not support."""


def is_supported_gymnasium(installed: str) -> bool:
    """Whether a Gymnasium version string (``"1.4.0"``, ``"1.5.0rc1"``) is supported."""
    numbers = re.match(r"(\d+)\.(\d+)", installed)
    if numbers is None:
        return False
    release = (int(numbers.group(1)), int(numbers.group(2)))
    return _LOWEST <= release < _BELOW


def check_gymnasium_version(installed: str | None = None) -> None:
    """Raise :class:`UnsupportedGymnasiumError` unless the installed Gymnasium is supported.

    ``installed`` defaults to the version of the Gymnasium imported, else the one pip installed.
    """
    if installed is None:
        installed = _imported_version()
    if installed is None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("gymnasium")
        except PackageNotFoundError:
            raise UnsupportedGymnasiumError(
                f"envmanager needs gymnasium{SUPPORTED_GYMNASIUM}, and gymnasium is not "
                f"installed: pip install 'gymnasium{SUPPORTED_GYMNASIUM}'"
            ) from None
    if not is_supported_gymnasium(installed):
        raise UnsupportedGymnasiumError(
            f"envmanager supports gymnasium{SUPPORTED_GYMNASIUM}, but gymnasium {installed} is "
            f"installed: pip install 'gymnasium{SUPPORTED_GYMNASIUM}' (rlprof's profiler and "
            "`rlprof analyze` work with any Gymnasium, or none)"
        )


def _imported_version() -> str | None:
    """The ``__version__`` of the Gymnasium imported (None where it is not imported yet, or says
    no version)."""
    installed = getattr(sys.modules.get("gymnasium"), "__version__", None)
    return installed if isinstance(installed, str) else None
