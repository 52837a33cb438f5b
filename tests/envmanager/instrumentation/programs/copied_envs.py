"""What env_copies.py does with copies of an env, in a module of its own: a spawned worker imports
it (pickle finds ``Snapshots`` by name there, as it does a program's own env class)."""

import copy
import inspect
import pickle

import cloudpickle
import gymnasium as gym

WAYS = {
    "copy": copy.copy,
    "deepcopy": copy.deepcopy,
    "pickle": lambda env: pickle.loads(pickle.dumps(env)),
    "cloudpickle": lambda env: cloudpickle.loads(cloudpickle.dumps(lambda: env))(),
}


class Snapshots(gym.Wrapper):
    """An env that reports on copies of itself, in whatever process runs it."""

    def copies_report(self):
        return report(self)


def report(env):
    """Each way's copy stepped three times, whether that moved the original, the copy's attribute
    names; the names, docs and signatures of the env's step and reset."""
    seen = {}
    for way, make_copy in WAYS.items():
        env.reset(seed=5)
        before = env.unwrapped.state.copy()
        duplicate = make_copy(env)
        observations = [duplicate.step(action)[0].tolist() for action in (0, 1, 1)]
        seen[way] = {
            "observations": observations,
            "original_moved": bool((env.unwrapped.state != before).any()),
            "attributes": sorted(vars(duplicate)),
        }
    for name in ("step", "reset"):
        method = getattr(env, name)
        seen[name] = [method.__name__, method.__qualname__, method.__doc__, method.__module__,
                      str(inspect.signature(method))]
    seen["methods"] = methods_report(env)
    return seen


METHOD_WAYS = {
    "deepcopy": copy.deepcopy,
    "pickle": lambda method: pickle.loads(pickle.dumps(method)),
    "cloudpickle": lambda method: cloudpickle.loads(cloudpickle.dumps(method)),
}


def methods_report(env):
    """The env's ``step``, ``reset`` and ``close`` copied and pickled on their own, as a program may
    hand a bound method around: what each way gives (a bound method of a copy of the env, under
    plain python), what stepping, resetting and closing it gives, whether that moved the original;
    and whether a shallow copy of each equals the env's own."""
    names = ("step", "reset", "close")
    seen = {"shallow copies equal": [copy.copy(getattr(env, name)) == getattr(env, name) for name in names]}
    for way, make_copy in METHOD_WAYS.items():
        env.reset(seed=5)
        before = env.unwrapped.state.copy()
        step, reset, close = (make_copy(getattr(env, name)) for name in names)
        seen[way] = {
            "types": [type(method).__name__ for method in (step, reset, close)],
            "bound to a copy": [method.__self__ is not env for method in (step, reset, close)],
            "observations": [step(action)[0].tolist() for action in (0, 1, 1)],
            "reset": reset(seed=3)[0].tolist(),
            "closed": close(),
            "original_moved": bool((env.unwrapped.state != before).any()),
        }
    return seen


def describe(function):
    """A function's names, doc and signature, and whether pickle gives it back by name."""
    return [function.__name__, function.__qualname__, function.__doc__, function.__module__,
            str(inspect.signature(function)), pickle.loads(pickle.dumps(function)) is function]


def classes_report():
    """What the program sees of the functions a profiler might replace: ``gymnasium.make`` and the
    vector env classes' methods."""
    seen = {"make": describe(gym.make)}
    for cls in (gym.vector.SyncVectorEnv, gym.vector.AsyncVectorEnv):
        for name in ("__init__", "step", "reset", "step_async", "step_wait"):
            if hasattr(cls, name):
                seen[f"{cls.__name__}.{name}"] = describe(getattr(cls, name))
    return seen
