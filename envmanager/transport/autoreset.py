"""One sub-environment as a worker runs it: the three Gymnasium autoreset modes.

The rules are Gymnasium's (https://farama.org/Vector-Autoreset-Mode) and must give results
identical to ``gymnasium.vector.SyncVectorEnv``:

* ``NEXT_STEP``: the step *after* a terminated or truncated step resets the env and returns
  the reset observation and info, reward 0, terminated and truncated False.
* ``SAME_STEP``: the terminating step resets at once; the reset observation is returned and
  the info carries ``final_obs`` and ``final_info``.
* ``DISABLED``: never resets on its own; the user resets through ``reset_mask``.
"""

from __future__ import annotations

from typing import Any, Callable

from gymnasium import Env
from gymnasium.vector import AutoresetMode

__all__ = ["SubEnv", "StepResult", "checked_autoreset_mode"]

StepResult = tuple[Any, float, bool, bool, dict]


class SubEnv:
    """An env plus the little state autoresetting needs (whether it is due, the last obs).

    ``step`` is bound once, at construction, to the method for the chosen mode, so the hot
    path pays no mode dispatch.  ``guard`` wraps every call into the env: it holds the
    ``max_concurrency`` permit and the profiler's timer blocks.
    """

    __slots__ = ("env", "needs_reset", "last_obs", "step", "_guard_reset", "_guard_step")

    def __init__(
        self,
        env: Env,
        autoreset_mode: AutoresetMode,
        guard_reset: Callable[[Env, Any, Any], tuple[Any, dict]],
        guard_step: Callable[[Env, Any], StepResult],
    ) -> None:
        self.env = env
        self.needs_reset = False
        self.last_obs: Any = None
        self._guard_reset = guard_reset
        self._guard_step = guard_step
        if autoreset_mode is AutoresetMode.NEXT_STEP:
            self.step = self._step_next_step
        elif autoreset_mode is AutoresetMode.SAME_STEP:
            self.step = self._step_same_step
        elif autoreset_mode is AutoresetMode.DISABLED:
            self.step = self._step_disabled
        else:
            raise ValueError(f"Unexpected autoreset mode {autoreset_mode!r}")

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        obs, info = self._guard_reset(self.env, seed, options)
        self.last_obs = obs
        self.needs_reset = False
        return obs, info

    def _step_next_step(self, action: Any) -> StepResult:
        if self.needs_reset:
            obs, info = self.reset()
            return obs, 0.0, False, False, info
        obs, reward, terminated, truncated, info = self._guard_step(self.env, action)
        self.last_obs = obs
        self.needs_reset = bool(terminated or truncated)
        return obs, reward, terminated, truncated, info

    def _step_same_step(self, action: Any) -> StepResult:
        obs, reward, terminated, truncated, info = self._guard_step(self.env, action)
        if terminated or truncated:
            final_obs, final_info = obs, info
            obs, reset_info = self.reset()
            # SyncVectorEnv adds final_obs/final_info first, then the reset info on top.
            info = {"final_obs": final_obs, "final_info": final_info, **reset_info}
        self.last_obs = obs
        return obs, reward, terminated, truncated, info

    def _step_disabled(self, action: Any) -> StepResult:
        result = self._guard_step(self.env, action)
        self.last_obs = result[0]
        return result


def checked_autoreset_mode(value: str | AutoresetMode) -> AutoresetMode:
    """The enum for ``value``: a member, its value (``"NextStep"``) or its name (``"next_step"``)."""
    if isinstance(value, AutoresetMode):
        return value
    try:
        return AutoresetMode(value)
    except ValueError:
        if isinstance(value, str) and value.upper() in AutoresetMode.__members__:
            return AutoresetMode[value.upper()]
        allowed = ", ".join(f"{m.value!r}/{m.name.lower()!r}" for m in AutoresetMode)
        raise ValueError(
            f"Invalid `autoreset_mode` {value!r}, expected an AutoresetMode or one of {allowed}."
        ) from None
