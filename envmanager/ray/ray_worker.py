"""The Ray actor that runs one worker's envs: an :class:`~envmanager.transport.worker.EnvRunner` whose
requests arrive as method calls.

Each request is one call of :meth:`EnvWorkerActor.request`, and its result is the very reply a
worker subprocess writes to its pipe, ``(sequence, ok, body, timers, finished_at)`` (see
:mod:`envmanager.transport.protocol`): the timer payload rides on the result as it rides on the pipe, and
``finished_at`` is read from the actor's own ``perf_counter``, which the driver puts on its clock
with the offset it estimates (:mod:`profiler.multiprocess.clock_offset`).

An actor runs its calls one at a time, in the order they were submitted, so requests and replies
pair up as they do on a pipe.

Merged per node (``RayEnvManager(merge_per_node=True)``), an actor sends each payload to the
aggregator on its node (:mod:`envmanager.ray.node_merging`) instead, and replies with the
payload's place left empty (None) and its env time and scheduling figures as usual. It does not
wait for a step's or a reset's payload to be merged there (a round trip per step would slow the
run down); it waits on a FLUSH and a CLOSE, whose replies the driver reads before it dumps: calls
from one actor reach the aggregator in order, so by then every payload it sent is merged there. This module imports nothing of Ray at import time: the driver makes
the class a Ray actor (``ray.remote(EnvWorkerActor)``) and Ray imports it by name on each node,
where rlprof must be installed.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from profiler.multiprocess.clock_offset import monotonic_clock_id

from envmanager.transport import protocol
from envmanager.transport.worker import EnvRunner, WorkerConfig, configure_profiling

__all__ = ["EnvWorkerActor", "WorkerIdentity"]

WorkerIdentity = tuple[str, str, int, str, str, str]
"""``(host name, Ray node id, pid, Ray actor id, monotonic clock id, node address)`` of an actor:
the node's address tells machines apart where host names repeat (containers, one test machine)."""


class EnvWorkerActor:
    """One worker of a :class:`~envmanager.ray_env_manager.RayEnvManager`, as a Ray actor."""

    def __init__(self, config: WorkerConfig) -> None:
        configure_profiling(config)
        self.runner = EnvRunner(config)
        self.runner.build_envs()
        self.aggregator: Any = None  # its node's aggregator, when payloads are merged per node
        self.worker_index = 0

    def merge_on_node(self, aggregator: Any, worker_index: int) -> None:
        """Send every payload from now on to ``aggregator`` (before the first one: a payload
        stream declares its names once, so it must reach one merger whole)."""
        self.aggregator, self.worker_index = aggregator, worker_index

    def identity(self) -> WorkerIdentity:
        """Where this actor runs, so the driver can name it and compare clocks."""
        import ray

        context = ray.get_runtime_context()
        return (
            socket.gethostname(),
            context.get_node_id(),
            os.getpid(),
            context.get_actor_id(),
            monotonic_clock_id(),
            ray.util.get_node_ip_address(),
        )

    def clock(self) -> float:
        """A reading of this process's timer clock, for the driver's round trips."""
        return time.perf_counter()

    def request(self, request: protocol.Request) -> protocol.Reply:
        """Answer one request ``(sequence, command, body)`` as a worker subprocess answers it on
        its pipe (one argument: Ray serializes each argument of a call apart).

        CLOSE closes the envs and carries the last timer data; the actor itself is ended by the
        driver afterwards.
        """
        sequence, command, body = request
        runner = self.runner
        if command == protocol.CLOSE:
            runner.close_envs()
            reply = (sequence, True, None, runner.last_timers(), time.perf_counter())
        else:
            reply = (sequence, *runner.answer(command, body))
        if self.aggregator is not None and reply[3] is not None:
            return self._merged_on_node(reply, command)
        return reply

    def _merged_on_node(self, reply: protocol.Reply, command: int) -> protocol.Reply:
        """The reply, its payload sent to the node's aggregator (to be merged under the reset
        block's place for a reset's, the step block's for any other)."""
        import ray
        from ray.exceptions import RayError

        sequence, ok, body, (payload, *figures), finished_at = reply
        merged = self.aggregator.add.remote(self.worker_index, payload, command == protocol.RESET)
        if command == protocol.FLUSH or command == protocol.CLOSE:
            try:
                ray.get(merged)  # and so every earlier one: a dump or the end follows
            except RayError:
                pass  # the aggregator is gone: the driver finds it gone and says what was lost
        return (sequence, ok, body, (None, *figures), finished_at)
