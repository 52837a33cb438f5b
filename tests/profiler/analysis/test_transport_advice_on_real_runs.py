"""Specification: on real runs of two envs in Gymnasium's ``AsyncVectorEnv`` workers stepped with
random actions (no policy: the loop is the envs and their pipe, ``shared_memory=False``), the
pipe is the limit either way; rlprof records how many bytes an observation takes, and advises
smaller observations (or shared memory) for 12 kB ones, and for CartPole's 16 bytes only fewer
round trips."""

from __future__ import annotations

import pytest

from framework_runs import rlprof_run
from profiler.analysis.verdicts import TRANSPORT_BOUND


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    return rlprof_run(tmp_path_factory.mktemp("wide"), "wide_async_steps.py")


@pytest.fixture(scope="module")
def narrow(tmp_path_factory):
    return rlprof_run(tmp_path_factory.mktemp("narrow"), "wide_async_steps.py", "--narrow")


def transport_verdict(run: dict) -> dict:
    (verdict,) = [verdict for verdict in run["verdicts"] if verdict["kind"] == TRANSPORT_BOUND]
    return verdict


def test_the_dump_says_how_many_bytes_one_envs_observation_takes(wide, narrow):
    assert int(wide["tree"]["metadata"]["observation_bytes"]) == 3072 * 4  # float32
    assert int(narrow["tree"]["metadata"]["observation_bytes"]) == 4 * 4


def test_large_observations_through_the_pipe_are_advised_smaller_or_shared(wide):
    verdict = transport_verdict(wide)
    assert verdict["evidence"]["observation_bytes_per_step"] == 2 * 3072 * 4
    assert "smaller observations (crop, downsample, uint8)" in verdict["suggestion"]
    assert "shared_memory=True" in verdict["suggestion"]


def test_cartpoles_observations_are_not_advised_smaller_only_fewer_round_trips(narrow):
    suggestion = transport_verdict(narrow)["suggestion"]
    assert suggestion.startswith("Cut round trips: the pipe is AsyncVectorEnv's own")
    assert "smaller observations" not in suggestion and "shared_memory" not in suggestion
