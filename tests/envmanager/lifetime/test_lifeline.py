"""The lifeline closes each of its descriptors once, through the one object that owns it.

When a manager is collected as garbage without close(), the collector runs the finalisers of
everything in the manager's reference cycle in no set order: a ``multiprocessing`` Connection's
own finaliser may close its descriptor before the manager's closes the lifeline.  A second close
of that number would close whatever the program opened with it in between.
"""

from __future__ import annotations

import gc
import os
import sys

from envmanager.lifetime.lifeline import Lifeline
from envmanager.subprocess_env_manager import SubprocessEnvManager
from envmanager_testenvs import HelperProcessEnv


def test_closing_a_lifeline_whose_ends_the_collector_finalised_first_closes_nothing_else(tmp_path):
    lifeline = Lifeline()
    freed = lifeline.reader.fileno()
    lifeline.reader.__del__()  # what the collector does first when the reader is in a dead cycle
    program_file = os.open(tmp_path / "program.txt", os.O_CREAT | os.O_RDWR)
    try:
        assert program_file == freed  # the program got the freed number
        lifeline.close()
        os.fstat(program_file)  # still the program's: raises EBADF if the lifeline closed it
    finally:
        os.close(program_file)


def test_a_manager_collected_without_close_closes_its_descriptors_without_error(tmp_path):
    envs = SubprocessEnvManager([HelperProcessEnv] * 2, context="fork")
    envs.reset(seed=0)
    ignored = []
    previous_hook, sys.unraisablehook = sys.unraisablehook, ignored.append
    try:
        del envs
        gc.collect()
    finally:
        sys.unraisablehook = previous_hook
    assert [repr(u.exc_value) for u in ignored] == []
