"""A plain Ray program, not edited for rlprof: a remote function, actors that step CartPole and
call a @timed function, its own runtime_env (env_vars and a worker set-up hook), an actor it
kills, and one still in a call when it shuts Ray down. It prints its results, which must be the
same with and without rlprof."""

import os
import tempfile
import time

import gymnasium as gym
import ray

from profiler import hierarchical_timer
from ray_program_parts import SETUP_MARK, score


@ray.remote
def square(x):
    with hierarchical_timer("multiply"):
        return x * x


@ray.remote
class Runner:
    def __init__(self, seed):
        self.env = gym.make("CartPole-v1")
        self.seed = seed

    def run(self, steps):
        self.env.reset(seed=self.seed)
        rewards = []
        for step in range(steps):
            _, reward, terminated, truncated, _ = self.env.step(step % 2)
            rewards.append(reward)
            if terminated or truncated:
                self.env.reset()
        return score(rewards)

    def environment(self):
        return os.environ.get("USER_FLAG"), os.environ.get(SETUP_MARK)


@ray.remote
class Doomed:
    def work(self):
        with hierarchical_timer("doomed_work"):
            return os.getpid()


@ray.remote(num_cpus=0)
class Sleeper:
    def nap(self, started):
        with open(started, "w"):
            pass
        time.sleep(60)


# The cluster RAY_ADDRESS names (the tests' own), else a local Ray of 2 CPUs.
on_a_cluster = os.environ.get("RAY_ADDRESS", "local") != "local"
ray.init(**({} if on_a_cluster else {"num_cpus": 2, "include_dashboard": False}),
         runtime_env={"env_vars": {"USER_FLAG": "kept"},
                      "worker_process_setup_hook": "ray_program_parts.user_setup"})
print("squares", ray.get([square.remote(i) for i in range(5)]))
runners = [Runner.remote(seed) for seed in range(2)]
print("runs", ray.get([runner.run.remote(50) for runner in runners]))
print("runs", ray.get([runner.run.remote(30) for runner in runners]))
print("environment", ray.get(runners[0].environment.remote()))
doomed = Doomed.remote()
ray.get(doomed.work.remote())  # its construction shipped at once; its calls wait for the next
ray.get(doomed.work.remote())  # shipment, a second later, which never comes
ray.kill(doomed)
while True:  # ray.kill returns before the actor is gone
    try:
        ray.get(doomed.work.remote())
    except ray.exceptions.RayActorError:
        break
sleeper = Sleeper.remote()
started = os.path.join(tempfile.mkdtemp(), "started")
sleeper.nap.remote(started)  # still napping when Ray is shut down
while not os.path.exists(started):
    time.sleep(0.05)
ray.shutdown()
