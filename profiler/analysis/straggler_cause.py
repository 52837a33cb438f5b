"""What a slow worker's env calls did with their time: computed, waited for a core, or were blocked.

A worker that holds up the vector step is slow for one of two kinds of reason, with different
fixes: its env computes longer than the others' (a harder level, longer episodes, a costlier code
path), or its env's step waits on something other than a CPU (a ``time.sleep``, a file or network
read, a lock, a simulator or a server in another process). The worker's env time (the wall time of
its ``env.step`` and ``env.reset`` calls and their sampled CPU time) and the kernel's count of its
process's waits for a core tell the two apart: time its env calls spent neither on a CPU nor
waiting for one, they spent blocked. The process's waits for a core cover its whole life, not only
its env calls, so the blocked share read here is at least what it says.
"""

from __future__ import annotations

from profiler.analysis.machine_figures import ProcessWaits
from profiler.analysis.run_measurements import EnvTime
from profiler.analysis.text_format import format_percent, format_seconds
from profiler.records import Record

__all__ = ["BLOCKED_FROM_SHARE", "EnvTimeSplit", "env_time_split"]

BLOCKED_FROM_SHARE = 0.5
"""A slow worker's env calls are called blocked when at least half their wall time was neither on
a CPU nor (at most) waiting for a core. A sleeping straggler reads about 0.9 here, a computing
one about 0 (``tests/envmanager/test_verdicts_on_real_runs.py``)."""


class EnvTimeSplit(Record):
    """A worker's env calls' wall time, and the shares of it on a CPU and, at most, waiting for a core."""

    wall_seconds: float
    on_cpu_share: float
    core_wait_share: float | None
    """At most this share waited for a core (its process's waits, all its life, over its env
    calls' wall time); None where the dump has no count of the worker's waits."""

    @property
    def blocked_share(self) -> float | None:
        """At least this share was neither on a CPU nor waiting for a core; None where the
        worker's waits for a core are not known."""
        if self.core_wait_share is None:
            return None
        return max(0.0, 1.0 - self.on_cpu_share - self.core_wait_share)

    @property
    def blocked(self) -> bool:
        """The env's calls mostly waited on something other than a CPU."""
        blocked = self.blocked_share
        return blocked is not None and blocked >= BLOCKED_FROM_SHARE

    def evidence(self) -> dict[str, float]:
        """The figures a verdict quotes."""
        figures = {"env_on_cpu_share": self.on_cpu_share}
        if self.core_wait_share is not None:
            figures["env_core_wait_share_at_most"] = self.core_wait_share
            figures["env_blocked_share_at_least"] = self.blocked_share or 0.0
        return figures

    def sentence(self, label: str) -> str:
        """Where ``label``'s env calls' time went, in a sentence."""
        on_cpu = (f"{label}'s env calls were on a CPU {format_percent(self.on_cpu_share)} of their "
                  f"{format_seconds(self.wall_seconds)}")
        if self.core_wait_share is None:
            if self.on_cpu_share >= BLOCKED_FROM_SHARE:
                return f"{on_cpu}: its env computes longer than the others'."
            return (f"{on_cpu}; the rest they waited for a core or were blocked (this dump does not "
                    f"count {label}'s waits for a core).")
        if self.blocked:
            return (f"{on_cpu}, and the worker waited for a core at most "
                    f"{format_percent(self.core_wait_share)} of that: for at least "
                    f"{format_percent(self.blocked_share)} they were blocked, waiting on something other "
                    "than a CPU.")
        return (f"{on_cpu} and waited for a core at most {format_percent(self.core_wait_share)} of "
                "it: its time is its env's computation, not a wait on something else.")


def env_time_split(env_time: EnvTime | None, waits: ProcessWaits | None) -> EnvTimeSplit | None:
    """The split of a worker's env time (None without it, or with no time), its waits for a
    core read from ``waits`` where the dump counted them."""
    if env_time is None or env_time.wall_seconds <= 0:
        return None
    wall = env_time.wall_seconds
    core_wait = None if waits is None else min(1.0, waits.run_queue_seconds / wall)
    return EnvTimeSplit(wall, min(1.0, env_time.cpu_seconds / wall), core_wait)
