"""``rlprof run`` on a Ray program: every Ray worker process timed, without an edit to the program.

When the program imports Ray, :class:`RayWorkers` wraps ``ray.init`` (and the ``ray.init()`` Ray
makes itself on first use) so that the job's ``runtime_env`` carries rlprof's
``worker_process_setup_hook`` (:class:`~profiler.integrations.ray_worker_setup.WorkerSetup`),
Ray's own way to run code in every worker process of a job. The program's ``runtime_env`` is kept:
its ``env_vars``, ``working_dir`` and the rest pass through unchanged, and a setup hook of its own
still runs, after rlprof's. (A ``runtime_env`` given with ``job_config=`` is extended the same way.)

Each worker connects back to a socket the driver listens on (TCP with a random key, at the Ray
node address of the driver, so workers on other machines reach it as Ray's own do) and ships its
timers there: after a task once a second, all of them when the driver asks, and at its exit. The
driver merges them as they come (:class:`~profiler.multiprocess.merge.TimerMerger` named
``ray workers``) under the top of its tree, marked parallel, and into one tree per worker process
in the dump's ``workers`` section, each with ``host``, a ``ray`` section (``kind`` actor or task,
``class`` and ``actor_id`` for an actor, ``node_id``, ``pid``) and ``channel``: ``complete``, or
what was lost and why.

Before ``ray.shutdown`` and at the end of the run, the driver asks every worker for its last timers
and waits for them (:data:`FINAL_WAIT_SECONDS`), so that nothing timed before the end is lost. A
worker that died or was killed before (``ray.kill``, the OOM killer, a lost node) has lost what it
timed since its last shipment (at most a second of it, or its task in progress), and its entry
says so.
"""

from __future__ import annotations

import contextlib
import copy
import os
import socket
import threading
import time
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from types import ModuleType
from typing import Any, Callable

from profiler.analysis.text_format import counted
from profiler.automatic.post_import import PostImportWatch, when_imported
from profiler.integrations.ray_worker_setup import FLUSH_WAIT_SECONDS, WorkerSetup
from profiler.multiprocess.merge import PayloadError, TimerMerger
from profiler.recording import memory
from profiler.timing import timers

__all__ = ["COMPLETE", "FINAL_WAIT_SECONDS", "MERGER_NAME", "RayWorkers"]

MERGER_NAME = "ray workers"
"""The ``manager`` of the Ray workers' entries in the dump's ``workers`` section."""

FINAL_WAIT_SECONDS = 10.0 + FLUSH_WAIT_SECONDS  # generous: a loaded machine can delay an answer by seconds
"""How long the driver waits for its workers' last timers before ``ray.shutdown`` or the dump."""

COMPLETE = "complete"
KILLED = ("its process ended without sending its last timers (killed, crashed, or its node lost): "
          "what it timed after its last shipment, if anything, is lost")
SILENT = (f"it did not answer the request for its last timers within {FINAL_WAIT_SECONDS:.0f} s (a loaded or "
          "stopped process): what it timed after its last shipment, if anything, is lost")
BUSY = "{blocks} still running when the driver asked for its last timers: what it timed since its last shipment may be lost"

_SETUP_HOOK = "worker_process_setup_hook"
_JOB_CONFIG_VARIABLE = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # set by `ray job submit` for the driver


class _Worker:
    """What the driver knows of one Ray worker process, from its connection."""

    __slots__ = ("worker_id", "connection", "pid", "host", "node_id", "kind", "class_name", "actor_id",
                 "channel", "answered", "closed", "payloads")

    def __init__(self, worker_id: int, connection: Connection, pid: int, host: str, node_id: str) -> None:
        self.worker_id = worker_id
        self.connection = connection
        self.pid, self.host, self.node_id = pid, host, node_id
        self.kind, self.class_name, self.actor_id = "task", "", ""
        self.channel: str | None = None  # set when it answers a request for its last timers or says goodbye
        self.answered = threading.Event()
        self.closed = False
        self.payloads = 0

    @property
    def description(self) -> str:
        what = f"actor {self.class_name}" if self.kind == "actor" else "task worker"
        return f"Ray worker {self.worker_id} ({what}, pid {self.pid}, node {self.node_id[:8]})"

    def section(self) -> dict[str, Any]:
        section: dict[str, Any] = {"kind": self.kind, "node_id": self.node_id, "pid": self.pid}
        if self.kind == "actor":
            section.update({"class": self.class_name, "actor_id": self.actor_id})
        return section


class RayWorkers:
    """The Ray workers of one ``rlprof run``: :meth:`follow` before the program, :meth:`finish` after."""

    def __init__(self, *, record_timeline: bool, framework_phases: bool) -> None:
        self.record_timeline = record_timeline
        self.framework_phases = framework_phases
        self.stack = timers._resolve(None)
        self.problems: list[str] = []
        self._watch: PostImportWatch | None = None
        self._ray: ModuleType | None = None
        self._originals: dict[str, Callable[..., Any]] = {}
        self._listener: socket.socket | None = None
        self._address: tuple[str, int] | None = None
        self._authkey = os.urandom(32)
        self._lock = threading.Lock()
        # Connections accepted whose worker is not registered yet (its hello not read): a worker
        # runs tasks as soon as the driver has checked its key, before the driver reads its hello.
        self._introducing = 0
        self._introduced = threading.Condition(self._lock)
        self._workers: list[_Worker] = []
        self._merger: TimerMerger | None = None
        self._finished = False
        self.environments_timed = 0
        """Ray worker processes whose environments were timed (known once :meth:`finish` ran)."""

    # --- before the program: wrap ray.init once Ray is imported ----------------------------------

    def follow(self) -> RayWorkers:
        """Wrap ``ray.init`` and ``ray.shutdown`` when the program imports Ray (now, if it has)."""
        self._watch = when_imported("ray", self._wrap_ray)
        return self

    def _wrap_ray(self, ray: ModuleType) -> None:
        if self._finished:
            return
        self._ray = ray
        init, shutdown = ray.init, ray.shutdown
        self._originals = {"init": init, "shutdown": shutdown}

        def init_with_rlprof(*args: Any, **kwargs: Any) -> Any:
            if not self._finished and not ray.is_initialized():
                kwargs = self._with_setup_hook(kwargs)
            return init(*args, **kwargs)

        def shutdown_with_rlprof(*args: Any, **kwargs: Any) -> Any:
            if not self._finished and ray.is_initialized():
                self.collect_last_timers()
            return shutdown(*args, **kwargs)

        for wrapper, original in ((init_with_rlprof, init), (shutdown_with_rlprof, shutdown)):
            wrapper.__doc__, wrapper.__wrapped__ = original.__doc__, original  # type: ignore[attr-defined]
            wrapper.__name__ = original.__name__
        ray.init, ray.shutdown = init_with_rlprof, shutdown_with_rlprof

    def _with_setup_hook(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """``ray.init``'s arguments with rlprof's setup hook added to the job's runtime_env."""
        injected = os.environ.get(_JOB_CONFIG_VARIABLE)
        if injected and _SETUP_HOOK in injected:
            self.problems.append("the Ray job was submitted with a worker_process_setup_hook of its own: "
                                 "its Ray workers are not timed")
            return kwargs
        try:
            address = self._listen()
        except OSError as error:
            self.problems.append(f"cannot listen for the Ray workers' timers ({error.strerror or error}): "
                                 "they are not timed")
            return kwargs
        kwargs = dict(kwargs)
        job_config = kwargs.get("job_config")
        if kwargs.get("runtime_env") is None and job_config is not None and job_config.runtime_env:
            job_config = kwargs["job_config"] = copy.deepcopy(job_config)
            job_config.set_runtime_env(self._runtime_env(job_config.runtime_env, address))
        else:
            kwargs["runtime_env"] = self._runtime_env(kwargs.get("runtime_env"), address)
        return kwargs

    def _runtime_env(self, runtime_env: dict[str, Any] | None, address: tuple[str, int]) -> dict[str, Any]:
        """A copy of the program's runtime_env (the program's dict is left as it was) with the hook."""
        extended = dict(runtime_env or {})
        # The memory sampling in force now (rlprof run --memory), as the envs' workers read it.
        extended[_SETUP_HOOK] = WorkerSetup(address, self._authkey, self.record_timeline,
                                            self.framework_phases, extended.get(_SETUP_HOOK),
                                            memory_sampling=memory.sampling_settings())
        return extended

    # --- the channel: one connection per worker process (its own threads) ------------------------

    def _listen(self) -> tuple[str, int]:
        with self._lock:
            if self._address is None:
                from ray.util import get_node_ip_address  # where Ray's other nodes reach this one

                listener = socket.create_server((get_node_ip_address(), 0), backlog=128)
                self._listener = listener
                self._address = listener.getsockname()[:2]
                threading.Thread(target=self._accept, args=(listener,), name="rlprof-ray-workers",
                                 daemon=True).start()
            return self._address

    def _accept(self, listener: socket.socket) -> None:
        """Accept every worker's connection; each is checked and read on a thread of its own, so
        that a worker slow to prove its key (a loaded machine, a process stopped mid-way) delays
        no other."""
        while True:
            try:
                peer, _ = listener.accept()
            except OSError:
                if self._finished:
                    return  # closed at the end of the run
                time.sleep(0.01)  # out of file descriptors, say: try again, without spinning
                continue  # or a peer that hung up before it was accepted: never stop listening
            except Exception:  # noqa: BLE001 - the same
                continue
            with self._lock:
                self._introducing += 1  # until _read registers its worker or gives up on it
            threading.Thread(target=self._read, args=(peer,), name="rlprof-ray-worker", daemon=True).start()

    def _read(self, peer: socket.socket) -> None:
        worker: _Worker | None = None
        try:
            connection = Connection(peer.detach())
            try:
                deliver_challenge(connection, self._authkey)  # a peer without the key is refused here
                answer_challenge(connection, self._authkey)
            except Exception:  # noqa: BLE001 - a peer without the key, or one that hung up
                connection.close()
                return
            while True:
                try:
                    message = connection.recv()
                except Exception:  # noqa: BLE001 - ended, or a message that does not unpickle
                    return
                if not isinstance(message, tuple) or not message:
                    continue
                if worker is None:
                    worker = self._hello(connection, message)
                else:
                    self._on_message(worker, message)
        finally:
            if worker is not None:
                worker.closed = True
                worker.answered.set()  # nothing more will come: a final wait need not go on
            else:
                with self._lock:
                    self._introduced_one()  # no worker will come of this connection

    def _hello(self, connection: Connection, message: tuple[Any, ...]) -> _Worker | None:
        if message[0] != "hello" or len(message) != 4:
            return None
        _, pid, host, node_id = message
        with self._lock:
            worker = _Worker(len(self._workers), connection, int(pid), str(host), str(node_id))
            self._workers.append(worker)
            if self._merger is None:
                self._merger = self._new_merger()
            self._introduced_one()
        return worker

    def _introduced_one(self) -> None:
        """One accepted connection is settled: its worker registered, or none to come (locked)."""
        self._introducing -= 1
        self._introduced.notify_all()

    def _on_message(self, worker: _Worker, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "timers" and len(message) == 2:
            try:
                merger = self._merger  # made at the worker's hello
                merger.merge_payload(worker.worker_id, message[1], self.stack.root)  # type: ignore[union-attr]
                worker.payloads += 1
            except PayloadError as error:
                self.problems.append(f"{worker.description}: a timer payload was refused ({error})")
        elif kind == "actor" and len(message) == 3:
            worker.kind, worker.class_name, worker.actor_id = "actor", str(message[1]), str(message[2])
        elif kind in ("flushed", "bye") and len(message) == 2:
            busy = tuple(message[1])
            worker.channel = BUSY.format(blocks=", ".join(busy)) if busy else COMPLETE
            worker.answered.set()

    def _new_merger(self) -> TimerMerger:
        merger = TimerMerger(self.stack, name=MERGER_NAME)
        merger.add_worker_section("host", lambda entry: self._workers[entry["worker_id"]].host)
        merger.add_worker_section("ray", lambda entry: self._workers[entry["worker_id"]].section())
        merger.add_worker_section("channel", lambda entry: self._workers[entry["worker_id"]].channel)
        return merger

    # --- the end ---------------------------------------------------------------------------------

    def collect_last_timers(self) -> None:
        """Ask every connected worker for its timers now, and wait for them (or for its end).

        A worker connects when its process starts, and runs its first task as soon as the driver
        has checked its key, maybe before the driver has read its hello: an actor started just
        before the end (one still in its first call, say) would then not be asked, and would be
        reported as ended without its last timers. So the hellos of the connections accepted so
        far are read first.
        """
        deadline = time.monotonic() + FINAL_WAIT_SECONDS
        with self._introduced:
            self._introduced.wait_for(lambda: self._introducing == 0, timeout=FINAL_WAIT_SECONDS)
            workers = [worker for worker in self._workers if not worker.closed]
        asked = []
        for worker in workers:
            worker.answered.clear()
            try:
                worker.connection.send(("flush",))
                asked.append(worker)
            except Exception:  # noqa: BLE001 - its process is gone: its entry says what was lost
                worker.answered.set()
        for worker in asked:
            worker.answered.wait(max(0.0, deadline - time.monotonic()))

    def finish(self) -> list[str]:
        """Collect the workers' last timers, stop listening, give Ray its own functions back;
        the lines to tell the user."""
        if self._finished:
            return []
        ray = self._ray
        try:
            if ray is not None and ray.is_initialized():
                self.collect_last_timers()
        except Exception as error:  # noqa: BLE001 - the timers merged so far are still written
            self.problems.append(f"collecting the Ray workers' last timers failed: {type(error).__name__}: {error}")
        self._finished = True
        self.restore()
        for worker in self._workers:
            if worker.channel is None:
                worker.channel = KILLED if worker.closed else SILENT
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
            self._listener.close()
        for worker in self._workers:
            with contextlib.suppress(OSError):
                worker.connection.close()
        if self._merger is not None:
            self._merger.retire()
        self.environments_timed = self._count_environments()
        return [*self.summary(), *self.problems]

    def restore(self) -> None:
        """Stop watching for Ray's import and put ``ray.init`` and ``ray.shutdown`` back (idempotent)."""
        if self._watch is not None:
            self._watch.cancel()
        ray = self._ray
        if ray is not None and self._originals:
            for name, original in self._originals.items():
                if getattr(getattr(ray, name), "__wrapped__", None) is original:
                    setattr(ray, name, original)
            self._originals = {}

    def _count_environments(self) -> int:
        """Worker processes whose trees hold env steps or resets (their envs were timed there)."""
        if self._merger is None:
            return 0
        return sum(1 for entry in self._merger.worker_entries()
                   if any(_holds_env_calls(child) for child in entry["children"]))

    def summary(self) -> list[str]:
        """One line on the Ray workers timed, and one per worker whose last timers were lost.

        Only the workers that ran something count: Ray starts some worker processes ahead of need,
        and those that never ran a task have nothing to tell (nor an entry in the dump).
        """
        workers = [worker for worker in self._workers if worker.payloads or worker.kind == "actor"]
        if not workers:
            return []
        actors = sorted({worker.class_name for worker in workers if worker.kind == "actor"})
        actor_count = sum(1 for worker in workers if worker.kind == "actor")
        parts = [counted(actor_count, "actor") + (f" ({', '.join(actors)})" if actors else ""),
                 counted(len(workers) - actor_count, "task worker")]
        if self.environments_timed:
            parts.append(f"environments timed in {self.environments_timed} of them")
        nodes = len({worker.node_id for worker in workers})
        lines = [f"Ray workers timed: {counted(len(workers), 'process', 'processes')} on "
                 f"{counted(nodes, 'node')}: " + ", ".join(parts)]
        lines += [f"{worker.description}: {worker.channel}" for worker in workers if worker.channel != COMPLETE]
        return lines


def _holds_env_calls(node: dict[str, Any]) -> bool:
    return node.get("name") in ("env.step", "env.reset") or any(
        _holds_env_calls(child) for child in node.get("children", ()))
