"""A trainer that works alone first (imports, building the model), then beside one worker thread.

Run as a program: ``python threaded_spell.py OUT.json (learns|joins)``. The main thread computes
pure Python for ``PRELUDE_SECONDS`` of CPU, alone; then a ``collector`` thread computes pure Python
for ``SPELL_SECONDS``, while the main thread either ``learns`` (computes as long, so the two take
turns at the GIL) or ``joins`` (waits for it, taking no turn). Over the whole run the process ran
on one core either way; only the spell tells them apart. The tree is written with the threads'.
"""

from __future__ import annotations

import json
import sys
import threading
import time

from profiler import get_timer_tree, hierarchical_timer

PRELUDE_SECONDS = 0.6
SPELL_SECONDS = 0.6


def compute(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def collect() -> None:
    with hierarchical_timer("collect"):
        compute(SPELL_SECONDS)


def main(out: str, main_thread: str) -> None:
    with hierarchical_timer("prelude"):
        compute(PRELUDE_SECONDS)
    collector = threading.Thread(target=collect, name="collector")
    collector.start()
    if main_thread == "learns":
        with hierarchical_timer("learn"):
            compute(SPELL_SECONDS)
    collector.join()
    with open(out, "w") as file:
        json.dump(get_timer_tree(include_threads=True), file)


if __name__ == "__main__":
    main(*sys.argv[1:3])
