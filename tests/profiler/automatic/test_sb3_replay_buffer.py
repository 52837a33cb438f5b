"""Specification: under ``rlprof run --memory`` a Stable-Baselines3 replay buffer that fills is not
called a leak, and a leak beside it still is.

SB3 allocates a replay buffer with ``np.zeros``: its pages become resident as it fills, so an
off-policy trainer grows steadily until the buffer is full. ``programs/sb3_dqn_wide.py`` (SB3's
DQN) fills about 94 MiB of buffer in its loop; with ``keeps``, its env also keeps 50 kB a step.
``programs/cleanrl_replay_buffer.py`` fills the same buffer itself, as CleanRL's scripts do.
"""

from __future__ import annotations

import pytest

pytest.importorskip("stable_baselines3")  # installed by the README's test command: runs in CI

from framework_runs import rlprof_run  # noqa: E402
from profiler.analysis.verdicts import MEMORY_LEAK, REPLAY_BUFFER_GAUGE, judge_run  # noqa: E402

MIB = 1024 * 1024
SAMPLED = ("--memory=0.1",)


def without_the_gauge(tree):
    """``tree`` as the verdict would see it if rlprof did not know the buffer."""
    gauges = {name: gauge for name, gauge in tree["gauges"].items() if name != REPLAY_BUFFER_GAUGE}
    return {**tree, "gauges": gauges}


@pytest.fixture(scope="module")
def filling(tmp_path_factory):
    return rlprof_run(tmp_path_factory.mktemp("filling"), "sb3_dqn_wide.py", options=SAMPLED)


@pytest.fixture(scope="module")
def keeping(tmp_path_factory):
    return rlprof_run(tmp_path_factory.mktemp("keeping"), "sb3_dqn_wide.py", "keeps", options=SAMPLED)


def test_the_gauge_follows_what_the_buffer_filled(filling):
    gauge = filling["tree"]["gauges"][REPLAY_BUFFER_GAUGE]
    assert gauge["max"] * MIB == pytest.approx(4000 * 2 * 3072 * 4, rel=0.05)  # full at the end
    assert gauge["min"] < gauge["max"] / 10  # set from the first rollouts on


def test_a_buffer_that_fills_is_not_called_a_leak(filling):
    verdicts = judge_run(filling["tree"])
    assert not verdicts.of_kind(MEMORY_LEAK)
    assert any(line.startswith("whether the trainer's memory leaks") and "replay buffer filled" in line
               for line in verdicts.cannot_tell)
    assert judge_run(without_the_gauge(filling["tree"])).of_kind(MEMORY_LEAK)


def test_a_leak_beside_the_buffer_is_still_named_with_the_buffers_part(keeping):
    (leak,) = judge_run(keeping["tree"]).of_kind(MEMORY_LEAK)
    assert leak.evidence["process"] == "trainer"
    assert leak.evidence["replay_buffer_filled_bytes"] > 50 * MIB
    assert leak.evidence["rise_bytes"] > 2 * leak.evidence["replay_buffer_filled_bytes"]
    assert "its replay buffer filled" in leak.suggestion


def test_a_buffer_a_cleanrl_style_loop_fills_itself_is_not_called_a_leak_either(tmp_path):
    # Its loop is under a second: sampled often enough for a trend.
    tree = rlprof_run(tmp_path, "cleanrl_replay_buffer.py", options=("--memory=0.02",))["tree"]
    assert tree["gauges"][REPLAY_BUFFER_GAUGE]["max"] * MIB == pytest.approx(4000 * 2 * 3072 * 4, rel=0.05)
    assert not judge_run(tree).of_kind(MEMORY_LEAK)
    assert judge_run(without_the_gauge(tree)).of_kind(MEMORY_LEAK)


def test_without_memory_sampling_the_gauge_is_not_set(tmp_path):
    run = rlprof_run(tmp_path, "sb3_dqn_wide.py")
    assert REPLAY_BUFFER_GAUGE not in run["tree"]["gauges"]
