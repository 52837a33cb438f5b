"""Drive our vector env and Gymnasium's SyncVectorEnv side by side and compare every result."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv

STEPS = 100


def assert_same_obs(ours, theirs) -> None:
    if isinstance(theirs, dict):
        assert ours.keys() == theirs.keys()
        for key in theirs:
            assert_same_obs(ours[key], theirs[key])
    else:
        ours, theirs = np.asarray(ours), np.asarray(theirs)
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)


def assert_same_infos(ours: dict, theirs: dict) -> None:
    assert ours.keys() == theirs.keys()
    for key in theirs:
        if isinstance(theirs[key], dict):
            assert_same_infos(ours[key], theirs[key])
        elif key == "final_obs":  # an object array of per-env observations (or None)
            for a, b in zip(ours[key], theirs[key]):
                if b is None:
                    assert a is None
                else:
                    assert_same_obs(a, b)
        else:
            assert ours[key].dtype == theirs[key].dtype, key
            np.testing.assert_array_equal(ours[key], theirs[key])


def run_side_by_side(
    make_ours: Callable[..., Any], env_fns, mode: AutoresetMode, steps: int = STEPS, **ours_kwargs
) -> int:
    """Drive ``make_ours(env_fns, autoreset_mode=mode, **ours_kwargs)`` and a SyncVectorEnv with
    the same seeds and actions, comparing every result; return how many episodes ended."""
    theirs = SyncVectorEnv(env_fns, autoreset_mode=mode)
    ours = make_ours(env_fns, autoreset_mode=mode, **ours_kwargs)
    try:
        obs_a, info_a = ours.reset(seed=123)
        obs_b, info_b = theirs.reset(seed=123)
        assert_same_obs(obs_a, obs_b)
        assert_same_infos(info_a, info_b)
        theirs.action_space.seed(7)
        episodes_ended = 0
        for _ in range(steps):
            actions = theirs.action_space.sample()
            result_a, result_b = ours.step(actions), theirs.step(actions)
            for a, b in zip(result_a[:4], result_b[:4]):
                assert_same_obs(a, b)
            assert_same_infos(result_a[4], result_b[4])
            done = result_b[2] | result_b[3]
            episodes_ended += int(done.sum())
            if mode is AutoresetMode.DISABLED and done.any():
                obs_a, info_a = ours.reset(options={"reset_mask": done})
                obs_b, info_b = theirs.reset(options={"reset_mask": done})
                assert_same_obs(obs_a, obs_b)
                assert_same_infos(info_a, info_b)
        return episodes_ended
    finally:
        ours.close()
        theirs.close()
