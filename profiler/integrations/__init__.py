"""Sinks for rlprof's figures in the tools users already watch: optional, each its own module.

Nothing here is imported by ``profiler`` itself, and a module here imports its third-party
package (if it needs one) only when used, so a missing extra never breaks ``import profiler``.
"""
