"""Write a run in every format rlprof exports, ready to open in the tools that read them.

    python examples/export_outputs.py                        # time a small loop, export it
    python examples/export_outputs.py RUN_timers.json        # export a run you have (rlprof's or ML-Agents')
    python examples/export_outputs.py --out exports/ RUN_timers.json

It writes, into ``--out`` (default ``exports/``):

* ``trace.json.gz``          open in https://ui.perfetto.dev or chrome://tracing
* ``profile.speedscope.json`` drag onto https://www.speedscope.app
* ``stacks.collapsed.txt``    feed to flamegraph.pl, inferno-flamegraph or speedscope
* ``report.html``            open in any browser, no server needed

See docs/outputs.md for what each one shows.
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path
from typing import Any

from profiler import get_timer_tree, hierarchical_timer, load_timing_tree, set_gauge
from profiler.export import write_export

OUTPUT_NAMES = {
    "chrome": "trace.json.gz",
    "speedscope": "profile.speedscope.json",
    "collapsed": "stacks.collapsed.txt",
    "html": "report.html",
}


def time_a_small_training_loop() -> dict[str, Any]:
    """A stand-in for a trainer: a few timed blocks, a logging thread beside them, a gauge."""

    def write_logs() -> None:
        with hierarchical_timer("logger.flush"):
            time.sleep(0.02)

    logger = threading.Thread(target=write_logs, name="logger")
    with hierarchical_timer("train"):
        logger.start()
        for step in range(5):
            with hierarchical_timer("env.step"):
                time.sleep(0.004)
            with hierarchical_timer("policy.act"):
                time.sleep(0.002)
            set_gauge("episode_return", 10.0 + step)
        with hierarchical_timer("policy.update"):
            time.sleep(0.01)
        logger.join()
    # The logger thread's blocks join the tree as a parallel "thread:logger" subtree.
    return get_timer_tree(include_threads=True)


def export_everything(tree: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write ``tree`` once per format into ``out_dir``; each file appears whole or not at all."""
    return [write_export(tree, name, out_dir / file_name) for name, file_name in OUTPUT_NAMES.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", nargs="?", type=Path, help="a timer JSON file; omit to time a demo loop")
    parser.add_argument("--out", type=Path, default=Path("exports"), help="folder to write into")
    arguments = parser.parse_args()

    tree = load_timing_tree(arguments.run) if arguments.run else time_a_small_training_loop()
    for path in export_everything(tree, arguments.out):
        print(path)


if __name__ == "__main__":
    main()
