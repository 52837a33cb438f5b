"""Specification: the bytes one env's observation takes, as ``rlprof run`` records them for the
transport verdict, read from the observation space."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from envmanager.instrumentation.environments import _space_bytes


def test_a_box_takes_its_numbers_times_their_size():
    assert _space_bytes(spaces.Box(0, 255, (84, 84, 3), np.uint8)) == 84 * 84 * 3
    assert _space_bytes(spaces.Box(-1.0, 1.0, (4,), np.float32)) == 16


def test_a_discrete_observation_takes_one_integer():
    assert _space_bytes(spaces.Discrete(5)) == np.dtype(np.int64).itemsize


def test_dict_and_tuple_observations_add_up_their_parts():
    image = spaces.Box(0, 255, (8, 8), np.uint8)
    assert _space_bytes(spaces.Dict({"image": image, "step": spaces.Discrete(3)})) == 64 + 8
    assert _space_bytes(spaces.Tuple((image, image))) == 128


def test_a_space_that_does_not_say_its_shape_takes_no_known_bytes():
    assert _space_bytes(spaces.Text(10)) is None
    assert _space_bytes(spaces.Tuple((spaces.Text(10), spaces.Discrete(2)))) is None
    assert _space_bytes(None) is None
