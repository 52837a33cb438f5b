"""The env step in C (``_step_core.EnvStep``) against its reference (``step_path.timed_step``'s
Python): the same random programs of steps, failing steps, enclosing blocks, switches of the
timeline, of companions and of timing, reads of the tree, resets and calls from another thread
leave the same results, trees, spans, finish stamps and shipments, to the last bit of every float
(the steps last random, not binary-round, lengths of a fake clock)."""

from __future__ import annotations

import random
import threading
from typing import Any

import gymnasium as gym
import pytest

from profiler.recording import events
from profiler.timing import block_hooks, timers

from envmanager.instrumentation import timed_env
from envmanager.instrumentation.channel import ChannelServer
from envmanager.instrumentation.timed_env import WorkerIdentity, instrument_env
from envmanager.measurement import env_time
from envmanager.measurement.env_time import CpuSampler
from envmanager.transport import timed_calls

pytestmark = pytest.mark.skipif(not timed_calls.compiled() and timed_calls.unavailable_reason != "",
                                reason=f"the step path's C helper is not loaded: {timed_calls.unavailable_reason}")


class ClockedEnv(gym.Env):
    """Each step lasts the action's seconds of the fake clock, in a block of its own, and raises
    when the action says so."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    def step(self, action: tuple[float, bool]) -> tuple:
        seconds, fails = action
        with timers.hierarchical_timer("physics"):
            self.clock.advance(seconds)
        if fails:
            raise ValueError("bad action")
        return seconds, 0.0, False, False, {}


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.time = 1000.0

    def __call__(self) -> float:
        return self.time

    def advance(self, seconds: float) -> None:
        self.time += seconds


def random_program(seed: int, length: int = 400) -> list[tuple[str, Any]]:
    generator = random.Random(seed)
    kinds = ["step"] * 12 + ["fail", "block", "timeline", "companion", "read", "timing", "reset", "thread", "idle"]
    return [(kind, generator.uniform(1e-5, 0.3)) for kind in generator.choices(kinds, k=length)]


def node_figures(node: Any) -> tuple:
    return (node.name, node.total, node.count, node.errors, node.min, node.max,
            tuple(node_figures(child) for child in node.children.values()))


def run_program(program: list[tuple[str, Any]], compiled: bool, worker: bool) -> dict[str, Any]:
    """Run ``program`` on a fresh env timed with the C step (``compiled``) or the Python one, in
    the trainer or as a worker shipping over a real channel, in a thread of its own (a stack of its
    own: its flushes and block ids start afresh); everything it left."""
    left: list[Any] = []

    def run() -> None:
        try:
            left.append(_run_program(program, compiled, worker))
        except BaseException as error:  # noqa: BLE001 - raised again in the test's thread
            left.append(error)

    thread = threading.Thread(target=run, name="program")
    thread.start()
    thread.join()
    if isinstance(left[0], BaseException):
        raise left[0]
    return left[0]


def _run_program(program: list[tuple[str, Any]], compiled: bool, worker: bool) -> dict[str, Any]:
    timed_calls.use_compiled(compiled)
    clock = FakeClock()
    previous_clock = timers.set_clock(clock)
    timers.reset_timers()
    events.clear_recording()
    messages: list[Any] = []
    server = ChannelServer(lambda connection, message: messages.append(message), lambda connection: None)
    try:
        env = ClockedEnv(clock)
        if worker:
            identity = WorkerIdentity(server.address, 0, 0, record_timeline=False, memory_sampling=None)
            timed_env._shipping = None
            shipping = timed_env.worker_shipping(identity)
            shipping.cpu_sampler = CpuSampler(seed=5)  # the same measured calls in both runs
            kind = type(shipping.stamps).__name__
        instrument_env(env, identity if worker else None)
        step_type = type(env.step).__name__
        results, outcomes = [], []
        block = None
        companion = False
        for kind_of_op, seconds in program:
            clock.advance(seconds / 7)
            if kind_of_op == "step":
                results.append(env.step((seconds, False)))
            elif kind_of_op == "fail":
                with pytest.raises(ValueError, match="bad action"):
                    env.step((seconds, True))
            elif kind_of_op == "block":  # an enclosing block opened or closed: another parent
                if block is None:
                    block = timers.hierarchical_timer("vector.step")
                    block.__enter__()
                else:
                    block.__exit__(None, None, None)
                    block = None
            elif kind_of_op == "timeline":
                if events.is_recording():
                    events.stop_recording()
                else:
                    events.start_recording(capacity=10_000)
            elif kind_of_op == "companion":  # any other companion: with blocks
                companion = not companion
                block_hooks.set_exit_hook((lambda node: None) if companion else None)
            elif kind_of_op == "read":
                outcomes.append(node_figures(timers.get_timer_root()))
            elif kind_of_op == "timing":
                timers.disable() if timers.is_enabled() else timers.enable()
            elif kind_of_op == "reset" and block is None:
                timers.reset_timers()
            elif kind_of_op == "thread":
                other = threading.Thread(target=lambda: results.append(env.step((seconds, False))), name="other")
                other.start()
                other.join()
        if block is not None:
            block.__exit__(None, None, None)
        tree = node_figures(timers.get_timer_root())
        timeline = timers.get_timer_stack_for_thread(threading.current_thread()).timeline
        spans = timeline.span_rows() if timeline is not None else []
        env.close()
        server.wait_for_workers(timeout=30.0, settled=lambda connection: ("bye",) in messages)
    finally:
        block_hooks.set_exit_hook(None)
        timers.enable()
        events.stop_recording()
        events.clear_recording()
        server.close()
        timers.set_clock(previous_clock)
        timed_env._shipping = None
    shipments = []
    for message in messages:
        if message[0] == "timers":
            _, payload, _wall, _cpu, calls, stamps, _waits, _untimed = message
            timeline = payload[12]
            if timeline is not None:  # all but the wall clock's origin (the fake clock against the real)
                timeline = (timeline[0], *timeline[2:])
            payload = (*payload[:3], *payload[4:12], timeline, *payload[13:])  # and but the stream's random id
            shipments.append((payload, calls, stamps))
        elif message[0] != "hello":
            shipments.append(message)
    return {"results": results, "outcomes": outcomes, "tree": tree, "spans": spans, "shipments": shipments,
            "stamps": kind if worker else None, "step": step_type}


@pytest.fixture
def program_settings(monkeypatch):
    monkeypatch.setattr(env_time, "EXACT_ABOVE_SECONDS", float("inf"))  # the real clock decides no measure
    default = timed_calls.compiled()
    yield
    timed_calls.use_compiled(default)


@pytest.mark.parametrize("worker", [False, True], ids=["trainer", "worker"])
@pytest.mark.parametrize("seed", range(4))
def test_the_c_step_leaves_what_the_python_step_leaves(program_settings, seed, worker):
    program = random_program(seed)
    in_c = run_program(program, compiled=True, worker=worker)
    in_python = run_program(program, compiled=False, worker=worker)
    assert (in_c["step"], in_python["step"]) == ("EnvStep", "TimedMethod")
    assert in_c["stamps"] in (None, "FinishStamps") and in_python["stamps"] in (None, "FinishStamps")
    for part in ("results", "outcomes", "tree", "spans", "shipments"):
        assert in_c[part] == in_python[part], part
    # The program exercised what it is about: spans held and recorded, shipments made and said goodbye.
    shipped_names = [name for shipment in in_c["shipments"][:-1] if shipment[0][11] is not None
                     for name, _ in shipment[0][11][6]]
    assert "env.step" in [span[0] for span in in_c["spans"]] + shipped_names
    if worker:
        assert len(in_c["shipments"]) > 2 and in_c["shipments"][-1] == ("bye",)
