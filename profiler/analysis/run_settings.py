"""The run's real settings, read from the dump's metadata, so advice speaks in the user's terms.

An env manager records what it ran with (``env_manager_class``, ``shared_memory``,
``envs_per_worker``, ``num_envs``; see docs/formats.md), ``rlprof run --vector-env`` the class it
substituted (``vector_env_substituted_for``), and ``rlprof run`` the program it ran
(``rlprof_run``). A verdict then names the knob the user has: ``--envs-per-worker`` to a
``rlprof run`` user whose vector envs rlprof substituted, ``envs_per_worker=`` to one who wrote
a ``SubprocessEnvManager``, and it does not advise turning shared memory on when it was on.
``rlprof run`` records how many bytes one env's observation takes (``observation_bytes``) where the
program's vector env in workers says its space, so that smaller observations are not advised for
CartPole's 16. Files that do not record a setting get the general advice, as before.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis.metadata_numbers import whole_number
from profiler.records import Record

__all__ = ["RunSettings", "read_run_settings"]

_MANAGER = "SubprocessEnvManager"


class RunSettings(Record):
    """What the dump says of how the run was set up; None where it does not say."""

    manager_class: str | None
    shared_memory: bool | None
    envs_per_worker: str | None
    envs: int | None
    substituted_for: str | None
    observation_bytes: int | None = None
    """One env's observation, in bytes, where the program's vector env in workers said its space."""
    problems: tuple[str, ...] = ()
    """What the metadata held that could not be read (a number that is none), read as unsaid."""

    @property
    def uses_cli_options(self) -> bool:
        """The env workers were set up by ``rlprof run``'s own options (``--vector-env``)."""
        return self.substituted_for is not None and self.manager_class == _MANAGER

    def envs_per_worker_option(self, value: Any) -> str:
        """How the user sets ``envs_per_worker`` to ``value``."""
        if self.uses_cli_options:
            return f"--envs-per-worker {value}"
        quoted = f'"{value}"' if value == "auto" else value
        if self.manager_class not in (None, _MANAGER):
            return (f"step several envs per process ({self.manager_class} runs one process per env; "
                    f"SubprocessEnvManager's envs_per_worker={quoted} does)")
        return f"envs_per_worker={quoted}"

    def envs_per_worker_auto(self, workers: int, envs: int) -> str:
        """The advice to run one worker per core."""
        return f"{self.envs_per_worker_option('auto')} ({workers} workers for {envs} envs, spread evenly)"

    def shared_memory_advice(self) -> str | None:
        """How to put array observations in shared memory, or None when they already were."""
        if self.shared_memory:
            return None
        option = "shared_memory=True" if self.shared_memory is False else "shared_memory=True if it is off"
        if self.uses_cli_options:
            # rlprof run has no option for it: the stand-in passes the program's own argument on.
            option += (f" in the program's {self.substituted_for}(...) call (--vector-env passes it "
                       "to the SubprocessEnvManager it builds)")
        return f"{option} (array observations then skip the pipe)"


def read_run_settings(tree: dict[str, Any]) -> RunSettings:
    """The settings the dump's metadata records; None (or the general advice) for the others."""
    metadata = tree.get("metadata") or {}
    shared = str(metadata.get("shared_memory", "")).lower()
    problems: list[str] = []
    return RunSettings(
        manager_class=metadata.get("env_manager_class"),
        shared_memory={"true": True, "false": False}.get(shared),
        envs_per_worker=metadata.get("envs_per_worker"),
        envs=whole_number(metadata, "num_envs", problems, at_least=1),
        substituted_for=metadata.get("vector_env_substituted_for"),
        observation_bytes=whole_number(metadata, "observation_bytes", problems, at_least=0),
        problems=tuple(problems),
    )
