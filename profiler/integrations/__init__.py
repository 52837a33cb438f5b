"""rlprof beside the tools users already run: sinks for its figures (TensorBoard) and timers
carried home from distributed code (Ray). Optional, each its own module.

Nothing here is imported by ``profiler`` itself, and a module here imports its third-party
package (if it needs one) only when used, so a missing extra never breaks ``import profiler``.
"""
