"""The ``rlprof`` command line: its sub-commands (analyse, compare, convert, report) and ``rlprof run``.

``main`` is what the console script calls (``profiler.cli:main``).
"""

from profiler.cli.commands import main

__all__ = ["main"]
