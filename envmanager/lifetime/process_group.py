"""Each worker leads a process group of its own, so it ends together with its envs' helpers.

Envs often start helper processes: a simulator, a game server, ``subprocess.Popen`` of some
binary.  Such a helper joins its parent's process group, so when a worker is in a group of
its own, killing that group reaches the worker and every helper its envs started, even one
an env forgot to stop in ``close()`` or could not stop because the worker was killed.  (A
helper that starts a new session or group of its own, ``start_new_session=True``, leaves
the group and is out of reach.)

Safety: a group is only ever killed by the number of a worker that made it, and while that
worker's process has not been reaped (the group's number is then still reserved by the
kernel), so an unrelated process is never hit.  A worker whose group could not be made
(``setpgid`` refused) is killed alone.

A side effect of the own group: a terminal's Ctrl-C (sent to the foreground group) no
longer reaches the workers; they ignore SIGINT anyway, since the trainer stops them.
"""

from __future__ import annotations

import os
import signal

__all__ = ["lead_new_process_group", "kill_process_group", "kill_own_process_group"]


def lead_new_process_group() -> bool:
    """Make the calling process the leader of a new process group; False if refused."""
    try:
        os.setpgid(0, 0)
    except OSError:
        return False
    return True


def kill_process_group(leader_pid: int) -> bool:
    """SIGKILL every process of the group led by ``leader_pid``; False if there is no such group.

    Call it only before the leader is reaped (see the module's safety note).
    """
    try:
        os.killpg(leader_pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_own_process_group() -> None:
    """SIGKILL the caller's group if it leads one, then the caller: the end of a worker."""
    if os.getpgrp() == os.getpid():
        os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)
