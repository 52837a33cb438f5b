"""Payloads and merging run twice in one pytest run, once on each core: a worker's snapshot takes
its rows with the C accelerator's ``take_rows`` or the Python reference (see
tests/profiler/timer_cores.py)."""

from timer_cores import timer_core  # noqa: F401  (an autouse fixture, parametrised by core)
