"""The CleanRL-style PPO run that several test modules of ``profiler.automatic`` read."""

from __future__ import annotations

import pytest

from framework_runs import rlprof_run


@pytest.fixture(scope="session")
def cleanrl_run(tmp_path_factory):
    """The CleanRL-style PPO under ``rlprof run``, with a planted slow ``write_logs`` after each
    update (outside anything the hooks time) for the stack sampler to find."""
    pytest.importorskip("torch")
    return rlprof_run(tmp_path_factory.mktemp("cleanrl"), "cleanrl_torch_ppo.py", "--slow-logging", "0.1")
