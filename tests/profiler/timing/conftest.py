"""Every test of the hot path runs twice in one pytest run, once on each core (see
tests/profiler/timer_cores.py)."""

from timer_cores import timer_core  # noqa: F401  (an autouse fixture, parametrised by core)
