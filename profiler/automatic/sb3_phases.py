"""Stable-Baselines3's learn loop as blocks, without edits: rollout against update.

SB3's ``learn`` alternates ``collect_rollouts`` (the policy acts, the envs step) and ``train``
(the update). While ``rlprof run`` runs, those methods are wrapped at class level, so each call
is a block named after the algorithm (``PPO.collect_rollouts``, ``PPO.train``), and the policy's
model-level calls are blocks inside them: ``<Policy>.predict``, ``evaluate_actions`` and
``predict_values`` here, the policy's own ``forward`` through the torch phases
(:mod:`profiler.automatic.torch_phases`). ``train`` is the update: the torch hooks open no
``update`` block of their own inside it. A policy method is timed whole: the modules it calls are
not blocks of their own. ``evaluate_policy`` (what ``EvalCallback`` runs, inside
``collect_rollouts``) is a block too, so that the evaluation's policy calls and env steps are told
from the training's. SB3 itself is never edited, and :func:`uninstall_sb3_phases` puts every
method back.

Only the algorithms SB3 ships (imported with ``stable_baselines3``) are wrapped; an algorithm the
program derives keeps its own ``train`` and ``collect_rollouts`` untimed unless it calls SB3's.

Where memory is sampled when SB3 is imported (``rlprof run --memory`` samples from before the
program's first line), SB3's replay buffers (``ReplayBuffer`` and the subclasses it ships: what
DQN, SAC and TD3 fill, and what CleanRL's off-policy scripts use directly) also set the gauge
:data:`REPLAY_BUFFER_GAUGE` every :data:`GAUGE_EVERY_ADDS` ``add`` s: the MiB of the buffer's arrays
that hold transitions so far. SB3 allocates them with ``np.zeros``, whose pages become resident
only as the buffer fills, so the trainer grows by about that much until it is full, which the
``memory_leak`` verdict must not call a leak. Without memory sampling, ``add`` is left alone.
"""

from __future__ import annotations

import functools
import sys
from types import ModuleType
from typing import Any

from profiler.automatic.torch_phases import inside_model_call, inside_update
from profiler.recording import memory
from profiler.timing import timers

__all__ = ["EVALUATION_BLOCK", "GAUGE_EVERY_ADDS", "REPLAY_BUFFER_GAUGE", "install_sb3_phases", "uninstall_sb3_phases"]

_ALGORITHM_METHODS = ("collect_rollouts", "train")
_POLICY_METHODS = ("predict", "evaluate_actions", "predict_values")
EVALUATION_BLOCK = "evaluate_policy"
REPLAY_BUFFER_GAUGE = "sb3.replay_buffer.filled_mb"
GAUGE_EVERY_ADDS = 256
"""A replay buffer sets its gauge once this many ``add`` s (and when it wraps round)."""
_MEBIBYTE = 1024 * 1024
_restore: list[tuple[Any, str, Any, Any]] = []  # (class or module, attribute, original, wrapper)


def install_sb3_phases(stable_baselines3: ModuleType) -> None:
    """Wrap the learn loop's methods of the imported ``stable_baselines3`` (idempotent)."""
    if _restore:
        return
    from stable_baselines3.common.base_class import BaseAlgorithm
    from stable_baselines3.common.policies import BasePolicy

    for cls in _shipped_subclasses(BaseAlgorithm):
        for name in _ALGORITHM_METHODS:
            _wrap(cls, name, model_call=False)
    for cls in [BasePolicy, *_shipped_subclasses(BasePolicy)]:
        for name in _POLICY_METHODS:
            _wrap(cls, name, model_call=True)
    _wrap_evaluation()
    if memory.is_sampling():
        _wrap_replay_buffers()


def uninstall_sb3_phases() -> None:
    """Put back every method and function :func:`install_sb3_phases` wrapped."""
    while _restore:
        owner, name, original, wrapper = _restore.pop()
        if owner.__dict__.get(name) is wrapper:
            setattr(owner, name, original)


def _wrap_evaluation() -> None:
    """``evaluate_policy`` as the block :data:`EVALUATION_BLOCK`, in every SB3 module that holds it:
    ``EvalCallback``'s module imported it by name, as a program's ``from ... import`` does after
    this ran (the wrapper is then what it gets)."""
    from stable_baselines3.common import evaluation

    original = evaluation.evaluate_policy

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with timers.hierarchical_timer(EVALUATION_BLOCK):
            return original(*args, **kwargs)

    for name, module in list(sys.modules.items()):
        if name.startswith("stable_baselines3.") and getattr(module, "__dict__", {}).get("evaluate_policy") is original:
            setattr(module, "evaluate_policy", wrapper)
            _restore.append((module, "evaluate_policy", original, wrapper))


def _shipped_subclasses(base: type) -> list[type]:
    found, pending = [], [base]
    while pending:
        for subclass in pending.pop().__subclasses__():
            if subclass.__module__.startswith("stable_baselines3.") and subclass not in found:
                found.append(subclass)
                pending.append(subclass)
    return found


def _wrap(cls: type, name: str, *, model_call: bool) -> None:
    original = cls.__dict__.get(name)
    if original is None or getattr(original, "__isabstractmethod__", False):
        return
    # The block's name per class of ``self`` (``PPO.train``, ``ActorCriticPolicy.evaluate_actions``),
    # made at its first call: formatting it at each call made a string, and its hash, per step.
    block_names: dict[type, str] = {}

    def block_name(cls: type) -> str:
        block = block_names.get(cls)
        if block is None:
            block = block_names[cls] = f"{cls.__name__}.{name}"
        return block

    if model_call:
        @functools.wraps(original)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            with timers.hierarchical_timer(block_names.get(type(self)) or block_name(type(self))), \
                    inside_model_call():
                return original(self, *args, **kwargs)
    elif name == "train":
        @functools.wraps(original)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            with timers.hierarchical_timer(block_names.get(type(self)) or block_name(type(self))), inside_update():
                return original(self, *args, **kwargs)
    else:
        @functools.wraps(original)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            with timers.hierarchical_timer(block_names.get(type(self)) or block_name(type(self))):
                return original(self, *args, **kwargs)
    setattr(cls, name, wrapper)
    _restore.append((cls, name, original, wrapper))


def _wrap_replay_buffers() -> None:
    """``add`` of SB3's ``ReplayBuffer`` and of each shipped subclass that has its own, followed by
    the gauge every :data:`GAUGE_EVERY_ADDS` transitions."""
    from stable_baselines3.common.buffers import ReplayBuffer

    for cls in [ReplayBuffer, *_shipped_subclasses(ReplayBuffer)]:
        original = cls.__dict__.get("add")
        if original is not None:
            wrapper = _gauged_add(original)
            setattr(cls, "add", wrapper)
            _restore.append((cls, "add", original, wrapper))


def _gauged_add(original: Any) -> Any:
    @functools.wraps(original)
    def add(self: Any, *args: Any, **kwargs: Any) -> Any:
        added = original(self, *args, **kwargs)
        position = getattr(self, "pos", None)
        if isinstance(position, int) and position % GAUGE_EVERY_ADDS == 0:
            _gauge_replay_buffer(self)
        return added

    return add


def _gauge_replay_buffer(buffer: Any) -> None:
    """Set :data:`REPLAY_BUFFER_GAUGE` to the MiB of ``buffer``'s arrays filled so far (its arrays'
    bytes times the share of its slots written)."""
    slots = getattr(buffer, "buffer_size", 0)
    position = getattr(buffer, "pos", 0)
    if not isinstance(slots, int) or slots <= 0 or not isinstance(position, int):
        return  # none, or a buffer of another shape than SB3's: the program's run goes on untouched
    import numpy  # SB3's own dependency, imported with it

    filled = 1.0 if getattr(buffer, "full", False) else min(position / slots, 1.0)
    allocated = 0
    for value in getattr(buffer, "__dict__", {}).values():
        arrays = value.values() if isinstance(value, dict) else (value,)  # a DictReplayBuffer's observations
        allocated += sum(array.nbytes for array in arrays if isinstance(array, numpy.ndarray))
    timers.set_gauge(REPLAY_BUFFER_GAUGE, allocated * filled / _MEBIBYTE)
