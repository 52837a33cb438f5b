"""The first env, built to read the spaces, in a process of its own that ends with its helpers.

Before it starts its workers, a vector env must know the spaces (the shared buffers are laid
out by them), so Gymnasium's ``AsyncVectorEnv`` builds one env in the trainer and closes it.
An env that starts a helper process (a simulator, a game server) and forgets it in ``close()``
would leave that helper as a child of the trainer, in no worker's process group: alive after
the run, and after a trainer killed while the env was being built.

So that env is built in a short-lived process (the manager's start method) that leads a process
group of its own, as a worker does: it reads what the batch needs of the env, closes it, sends
that back, and ends its group, with every helper the env left.  A trainer that dies meanwhile
is noticed through a lifeline and the parent-death signal, as by a worker
(:mod:`envmanager.lifetime.lifeline`), and the group ends then too.  The process costs one start
of a worker (an interpreter under ``spawn``), once per manager.
"""

from __future__ import annotations

import signal
import threading
from multiprocessing.connection import Connection, wait as wait_for_ready
from typing import Any, Callable

from gymnasium import Env, Space

from envmanager.lifetime.exit_descriptor import ExitDescriptor
from envmanager.lifetime.interrupts import starting_without_interrupts
from envmanager.lifetime.lifeline import (
    PARENT_DEATH_SIGNAL,
    Lifeline,
    ask_for_signal_at_parent_death,
    watch_trainer,
)
from envmanager.lifetime.process_group import kill_own_process_group, kill_process_group, lead_new_process_group
from envmanager.transport import protocol
from envmanager.transport.protocol import RemoteFailure
from envmanager.transport.rlprof_worker import mark_as_rlprof_worker
from envmanager.transport.worker import EnvFactories

__all__ = ["FirstEnvFacts", "read_first_env"]


class FirstEnvFacts:
    """What the batch needs of the first env, as attributes of the env's own names; ``close()``
    does nothing (the env was closed where it was built)."""

    def __init__(self, metadata: dict[str, Any], render_mode: Any, action_space: Space, observation_space: Space) -> None:
        self.metadata = metadata
        self.render_mode = render_mode
        self.action_space = action_space
        self.observation_space = observation_space

    def close(self) -> None:
        pass


def read_first_env(ctx: Any, make_env: Callable[[], Env]) -> FirstEnvFacts:
    """Build ``make_env()`` in a process of its own (start method ``ctx``), read its facts, close
    it and end that process's group; re-raise here what building or closing it raised."""
    lifeline = Lifeline()
    reader, writer = ctx.Pipe(duplex=False)
    process = ctx.Process(
        target=_build_read_and_end,
        name="FirstEnv<SubprocessEnvManager>",
        args=(EnvFactories([make_env]), lifeline.reader, writer, _parent_death_reaches_us(ctx)),
        daemon=True,
    )
    exit_descriptor = None
    try:
        with starting_without_interrupts(ctx.get_start_method()):
            try:
                process.start()
            finally:
                writer.close()
        # Its pidfd, not its sentinel: a child the env forked may hold the sentinel (and the
        # pipe) open long after the process died (see envmanager.lifetime.exit_descriptor).
        exit_descriptor = ExitDescriptor(process)
        ready = wait_for_ready([reader, exit_descriptor.fileno])
        answer = _read_answer(reader) if reader in ready or reader.poll(0) else None
    finally:
        # Its group may hold what the env left running; killed before the process is reaped.
        if process.pid is not None:
            if not kill_process_group(process.pid) and process.exitcode is None:
                process.kill()  # it had not made its group yet
            process.join()
        if exit_descriptor is not None:
            exit_descriptor.close()
        lifeline.close()
        reader.close()
    if answer is None:
        raise RuntimeError(
            f"the process building the first env (to read the spaces) ended with exit code {process.exitcode} "
            "before it could answer"
        )
    ok, body = answer
    if not ok:
        raise _exception_from(body)
    return body


def _parent_death_reaches_us(ctx: Any) -> bool:
    """As for a worker (see pool.py): only a process started by the main thread or the
    forkserver may ask for the kernel's parent-death signal."""
    return ctx.get_start_method() == "forkserver" or threading.current_thread() is threading.main_thread()


def _read_answer(reader: Connection) -> tuple[bool, Any] | None:
    try:
        return protocol.decode(reader.recv_bytes())
    except (EOFError, OSError):
        return None


def _exception_from(failure: RemoteFailure) -> BaseException:
    exc = failure.exception
    if exc is None:
        exc = RuntimeError(f"{failure.type_name}: {failure.message}")
    exc.add_note(f"(raised building the first env, to read the spaces; its traceback:\n{failure.traceback})")
    return exc


def _build_read_and_end(factories: EnvFactories, lifeline: Connection, replies: Connection, signal_at_parent_death: bool) -> None:
    """The process's entry point: it never returns, its group is killed."""
    mark_as_rlprof_worker()  # its env is read, not timed
    lead_new_process_group()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(PARENT_DEATH_SIGNAL, lambda signum, frame: kill_own_process_group())
    if signal_at_parent_death:
        ask_for_signal_at_parent_death(PARENT_DEATH_SIGNAL)
    watch_trainer(lifeline, kill_own_process_group)
    try:
        env = factories.factories[0]()
        try:
            answer: tuple[bool, Any] = (
                True,
                FirstEnvFacts(dict(env.metadata), env.render_mode, env.action_space, env.observation_space),
            )
        finally:
            env.close()
        data = _pickled(answer)
    except Exception as exc:
        data = _pickled((False, RemoteFailure(exc, 0)))
    try:
        replies.send_bytes(data)
    except OSError:
        pass  # the trainer is gone
    kill_own_process_group()


def _pickled(answer: tuple[bool, Any]) -> bytes:
    """With cloudpickle, so that metadata holding a lambda still travels; a failure if nothing does."""
    try:
        return protocol.encode_anything(answer)
    except Exception as exc:
        return protocol.encode_anything((False, RemoteFailure(exc, 0, "sending the first env's spaces to the trainer")))
