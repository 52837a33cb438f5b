"""Specification of the demo's learner: returns, episode buffers, the policy gradient step."""

from __future__ import annotations

import numpy as np

from envmanager.demo.reinforce import EpisodeBuffers, LinearSoftmaxPolicy, discounted_returns


def test_discounted_returns_sum_later_rewards_with_the_discount():
    assert discounted_returns(np.array([1.0, 1.0, 1.0]), 0.5).tolist() == [1.75, 1.5, 1.0]


def test_an_untrained_policy_is_uniform():
    policy = LinearSoftmaxPolicy(observation_size=3, action_count=4, learning_rate=0.1, seed=0)
    assert np.allclose(policy.probabilities(np.ones((2, 3))), 0.25)


def test_actions_are_valid_indices_one_per_observation():
    policy = LinearSoftmaxPolicy(observation_size=2, action_count=3, learning_rate=0.1, seed=0)
    actions = policy.act(np.zeros((500, 2)))
    assert actions.shape == (500,)
    assert set(actions.tolist()) == {0, 1, 2}


def test_an_update_makes_the_better_rewarded_action_more_likely():
    policy = LinearSoftmaxPolicy(observation_size=1, action_count=2, learning_rate=0.5, seed=0)
    observation = np.array([[1.0]])
    good = (observation, np.array([1]), np.array([10.0]))
    bad = (observation, np.array([0]), np.array([0.0]))
    policy.update([good, bad], discount=0.99)
    assert policy.probabilities(observation)[0, 1] > 0.5


def test_episode_buffers_hand_out_an_episode_when_it_ends():
    buffers = EpisodeBuffers(num_envs=2)
    observations = np.array([[0.0], [1.0]])
    assert buffers.add(observations, np.array([0, 1]), np.array([1.0, 2.0]), np.array([False, False])) == []
    finished = buffers.add(observations, np.array([1, 0]), np.array([3.0, 4.0]), np.array([False, True]))
    assert len(finished) == 1
    episode_observations, actions, rewards = finished[0]
    assert episode_observations.tolist() == [[1.0], [1.0]]
    assert actions.tolist() == [1, 0] and rewards.tolist() == [2.0, 4.0]
    assert buffers.steps[1] == [] and len(buffers.steps[0]) == 2
