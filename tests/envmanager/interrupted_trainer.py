"""A training script that Ctrl-C stops while a large reply is half read; run by test_interrupts.py.

Usage: ``python interrupted_trainer.py SUMMARIES_DIR``. It prints its worker pids as one JSON
line, then steps envs whose 2 MB observations cross the pipe until a real SIGINT lands between
two reads of a reply. Like many training scripts it catches the KeyboardInterrupt to save a
checkpoint (a moment's work, during which the worker writes more of its reply), then lets it
unwind through ``with SubprocessEnvManager``; the test sees what a user would: whether the
script ends, what it dumped and which processes it left behind.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
from envmanager_testenvs import BigObservationEnv
from interrupts import ctrl_c_when, mid_read

from envmanager import SubprocessEnvManager

STEPS_BEFORE_THE_INTERRUPT = 3


def main(summaries_dir: str) -> None:
    with SubprocessEnvManager(
        [BigObservationEnv] * 2,
        context="fork",
        shared_memory=False,
        flush_every=1,
        summaries_dir=summaries_dir,
        run_id="interrupted",
    ) as envs:
        print(json.dumps([handle.process.pid for handle in envs._pool.workers]), flush=True)
        envs.reset(seed=0)
        for _ in range(STEPS_BEFORE_THE_INTERRUPT):
            envs.step(np.zeros(2, dtype=np.int64))
        try:
            with ctrl_c_when(mid_read):
                envs.step(np.zeros(2, dtype=np.int64))
        except KeyboardInterrupt:
            time.sleep(0.3)  # saving a checkpoint
            raise


if __name__ == "__main__":
    main(sys.argv[1])
