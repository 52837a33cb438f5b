"""rlprof's version: what the dumps, ``rlprof --version`` and the package metadata say.

A module of its own, importing nothing, so that every module can read it without importing the
``profiler`` package, which imports them all.
"""

__version__ = "0.1.0"
