"""Specification of the ``torch_threads`` finding on real runs: Stable-Baselines3's A2C over 8
``SubprocVecEnv`` workers on 2 cores, its trainer running torch with 2 intra-op threads (the
default on 2 cores), is told that torch's threads compete with the env workers for cores and to
try one thread; the same program on one torch thread is not. (On this machine the first learned
in 5.2 to 5.6 s and the second in 3.7 to 4.0 s: docs/cli.md.)"""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("stable_baselines3")  # installed by the README's test command: runs in CI

from framework_runs import rlprof_run  # noqa: E402
from profiler.analysis.machine_verdicts import TORCH_THREADS  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="schedstat is Linux's"),
    pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _: ())(0)) < 2,
                       reason="on one core, torch's pool has one thread"),
]


def a2c_run(folder, torch_threads: int) -> dict:
    return rlprof_run(folder, "sb3_a2c.py", "--cores", "2", "--torch-threads", str(torch_threads))


def test_torchs_threads_beside_more_workers_than_cores_are_told_to_try_one(tmp_path):
    run = a2c_run(tmp_path, 2)
    (verdict,) = [verdict for verdict in run["verdicts"] if verdict["kind"] == TORCH_THREADS]
    assert verdict["title"].startswith("torch's intra-op threads compete with the env workers for cores: torch "
                                       "ran 2 threads in the trainer beside its 8 env workers on 2 cores")
    assert verdict["evidence"]["trainer_native_cpu_seconds"] > 0
    assert verdict["suggestion"].startswith("Try torch.set_num_threads(1) in the trainer")


def test_torch_on_one_thread_is_not_told_of_its_threads(tmp_path):
    run = a2c_run(tmp_path, 1)
    assert TORCH_THREADS not in [verdict["kind"] for verdict in run["verdicts"]]
    assert run["tree"]["metadata"]["torch_threads"] in (1, "1")
