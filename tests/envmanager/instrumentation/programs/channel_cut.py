"""A rollout whose workers cut rlprof's channel midway, as an env that closes sockets it does not
know would: training must go on, with the same results.

``python channel_cut.py OUT.npy --context spawn --cut`` steps 2 CartPole envs in an
``AsyncVectorEnv``: 50 steps, a pause longer than a worker's shipping interval, one step more (the
workers ship what they timed), 24 steps, the same pause (the workers' next step ships again), and
26 steps more; with ``--cut``, each env, at its 52nd step, shuts down every socket of its process
connected to a folder named ``rlprof-envs-*`` (rlprof's channel), so the second shipment meets a
cut channel. The envs give ``SIGPIPE`` its default action back, as some command-line programs do:
a write to the cut channel must not kill the worker. Saves every observation.
"""

import argparse
import functools
import os
import signal
import socket
import time

import gymnasium as gym
import numpy as np

CUT_AT_STEP = 52


class ChannelCutter(gym.Wrapper):
    def __init__(self, env, cut):
        super().__init__(env)
        self.cut = cut
        self.steps = 0

    def step(self, action):
        self.steps += 1
        if self.cut and self.steps == CUT_AT_STEP:
            cut_rlprofs_channel()
        return self.env.step(action)


def cut_rlprofs_channel():
    for name in os.listdir("/proc/self/fd"):
        try:
            peer = socket.socket(fileno=os.dup(int(name)))
        except (OSError, ValueError):
            continue
        try:
            if "rlprof-envs-" in str(peer.getpeername()):
                peer.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            peer.close()


def make_env(cut):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    return ChannelCutter(gym.make("CartPole-v1"), cut)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--context", default=None)
    parser.add_argument("--cut", action="store_true")
    args = parser.parse_args()
    make = functools.partial(make_env, args.cut)
    envs = gym.vector.AsyncVectorEnv([make, make], context=args.context)
    rng = np.random.default_rng(5)
    observations = [envs.reset(seed=2)[0]]
    for step in range(101):
        if step in (50, 75):
            time.sleep(1.5)
        observations.append(envs.step(rng.integers(0, 2, size=2))[0])
    envs.close()
    np.save(args.out, np.array(observations))


if __name__ == "__main__":
    main()
