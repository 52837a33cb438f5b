"""What ``rlprof run`` times in a program without edits, beyond the program's own blocks.

- the phases of the frameworks the program imports: PyTorch's forward, backward, optimizer step
  and ``zero_grad`` (:mod:`.torch_phases`), Stable-Baselines3's rollout and update
  (:mod:`.sb3_phases`) — installed when the program imports them, never imported by rlprof;
- a sampler of the trainer's stack that names where the time outside any block went
  (:mod:`.stack_sampler`).

:class:`AutomaticPhases` starts and stops all of it; ``rlprof run --no-framework-phases`` leaves
the frameworks alone (the sampler still runs), ``--no-stack-sampler`` stops the sampler.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

from profiler.automatic.stack_sampler import DEFAULT_INTERVAL, StackSampler
from profiler.timing import timers

if TYPE_CHECKING:
    from profiler.automatic.post_import import PostImportWatch

__all__ = ["AutomaticPhases", "FRAMEWORKS_METADATA", "SAMPLER_OFF_METADATA", "TORCH_THREADS_METADATA"]

FRAMEWORKS_METADATA = "rlprof_framework_phases"
"""Metadata key: the frameworks whose phases were timed, comma-separated (``torch,stable_baselines3``)."""
TORCH_THREADS_METADATA = "torch_threads"
"""Metadata key: the trainer's intra-op thread count (``torch.get_num_threads()``) as the program
ended, for a program that imported torch (the ``torch_threads`` verdict reads it)."""
SAMPLER_OFF_METADATA = "rlprof_stack_sampler"
"""Metadata key, ``"off"`` when ``rlprof run --no-stack-sampler`` turned the trainer's stack sampler
off: its untimed time is then said to be unsampled by that choice, not for want of ``rlprof run``."""


class AutomaticPhases:
    """The framework hooks and the stack sampler of one ``rlprof run``, for the calling thread."""

    def __init__(self, *, framework_phases: bool = True, stack_sampler: bool = True,
                 interval: float = DEFAULT_INTERVAL) -> None:
        self.framework_phases = framework_phases
        self.stack = timers.get_timer_stack_for_thread(threading.current_thread())
        self.sampler = StackSampler(interval=interval) if stack_sampler else None
        self.frameworks: list[str] = []
        self._watches: list[PostImportWatch] = []
        self._started = False

    def start(self) -> AutomaticPhases:
        if self.framework_phases:
            # Imported here: an env worker imports this package for its stack sampler alone, and
            # the import hooks' base classes (importlib.abc) would bring importlib.resources.
            from profiler.automatic.post_import import when_imported

            for package, install in (("torch", self._install_torch), ("stable_baselines3", self._install_sb3)):
                watch = when_imported(package, install)
                if watch is not None:
                    self._watches.append(watch)
        if self.sampler is not None:
            self.sampler.start()
        self._started = True
        return self

    def stop(self) -> None:
        """Stop sampling, stop watching imports and remove every hook (idempotent); note how many
        intra-op threads torch ran with, where the program imported it (phases timed or not)."""
        if not self._started:
            return
        self._started = False
        torch = sys.modules.get("torch")
        get_num_threads = getattr(torch, "get_num_threads", None)
        if callable(get_num_threads):
            timers.add_metadata(TORCH_THREADS_METADATA, int(get_num_threads()), timer_stack=self.stack)
        if self.sampler is not None:
            self.sampler.stop()
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()
        if "stable_baselines3" in self.frameworks:
            from profiler.automatic.sb3_phases import uninstall_sb3_phases

            uninstall_sb3_phases()
        if "torch" in self.frameworks:
            from profiler.automatic.torch_phases import uninstall_torch_phases

            uninstall_torch_phases()

    def _install_torch(self, torch: ModuleType) -> None:
        from profiler.automatic.torch_phases import install_torch_phases

        self._install("torch", install_torch_phases, torch)

    def _install_sb3(self, stable_baselines3: ModuleType) -> None:
        from profiler.automatic.sb3_phases import install_sb3_phases

        self._install("stable_baselines3", install_sb3_phases, stable_baselines3)

    def _install(self, framework: str, install: Callable[[ModuleType], None], module: ModuleType) -> None:
        """Install one framework's hooks; a version whose hooks differ is left untimed, with one
        line saying so, and the program runs on as it would without rlprof."""
        try:
            install(module)
        except Exception as error:  # noqa: BLE001 - the program must not fail for rlprof's hooks
            print(f"rlprof: {framework}'s phases are not timed ({type(error).__name__}: {error})",
                  file=sys.stderr)
            return
        self.frameworks.append(framework)
        timers.add_metadata(FRAMEWORKS_METADATA, ",".join(self.frameworks), timer_stack=self.stack)
