"""Which timer stack belongs to which thread, and the folded trees of threads that have ended."""

from __future__ import annotations

import re
import threading
from typing import Any

from profiler.timing.timer_node import TimerNode
from profiler.timing.timer_stack import TimerStack

__all__ = ["ENDED_THREAD_GROUPS", "StackRegistry", "holds_events"]


ENDED_THREAD_GROUPS = 64
"""How many groups of ended threads are kept apart (by name pattern); the rest share one."""


class StackRegistry:
    """Which stack belongs to which thread, and the folded trees of threads that have ended.

    The hot path never takes the lock: each thread caches its stack in the module's
    ``threading.local`` and consults the registry only on its first timer call.

    A program that starts many short threads (a thread per request, per episode, per download)
    must not pay for each of them forever. When a thread has ended, its tree and gauges are added
    into one stack per *group* of threads — its name with every number replaced by ``N``, so
    ``Thread-7 (fetch)`` and ``Thread-912 (fetch)`` share ``ended:Thread-N (fetch)`` — and its
    own stack is let go. Totals, counts and errors are added, so nothing is lost; the group's
    ``ended_threads`` counts the threads it holds. Ended threads are folded when a dump asks for
    every stack, and, as threads come and go, whenever the number of registered threads has
    doubled since the last look (so registration stays cheap). A stack a merger is attached to is
    never folded, and a thread's recorded timeline events are kept on their own track.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stacks_by_thread: dict[int, tuple[threading.Thread, TimerStack]] = {}
        self.kept: list[TimerStack] = []
        self.ended_groups: dict[str, TimerStack] = {}
        self._fold_when_over = 64

    def stack_for_thread(self, thread: threading.Thread) -> TimerStack:
        with self.lock:
            ident = thread.ident
            if ident is None:
                raise RuntimeError(f"thread {thread.name!r} has not started, so it has no timers")
            entry = self.stacks_by_thread.get(ident)
            if entry is not None and entry[0] is thread:
                return entry[1]
            if not thread.is_alive():
                # An ended thread's timers are in its group's stack, or will be folded there.
                return self._group_for(thread.name)
            if entry is not None:
                # The identifier was reused, so the thread that had it has ended.
                self._fold(*entry)
            stack = TimerStack(thread.name)
            self.stacks_by_thread[ident] = (thread, stack)
            if len(self.stacks_by_thread) > self._fold_when_over:
                self._fold_ended_threads()
                self._fold_when_over = 2 * len(self.stacks_by_thread) + 64
            return stack

    def all_stacks(self) -> list[TimerStack]:
        """Every live thread's stack, then those kept for their timeline or mergers, then the
        groups of ended threads."""
        with self.lock:
            self._fold_ended_threads()
            return [
                *(stack for _, stack in self.stacks_by_thread.values()),
                *self.kept,
                *self.ended_groups.values(),
            ]

    def _fold_ended_threads(self) -> None:
        # The main thread counts as ended once the interpreter shuts down, which is when the
        # end-of-run dump takes its tree: that tree must stay the one dumped, not a folded copy.
        ended = [
            ident
            for ident, (thread, _) in self.stacks_by_thread.items()
            if not thread.is_alive() and thread is not threading.main_thread()
        ]
        for ident in ended:
            self._fold(*self.stacks_by_thread.pop(ident))
        # A stack kept for its recorded events goes once they have been cleared or drained.
        self.kept = [stack for stack in self.kept if stack.mergers or holds_events(stack.timeline)]

    def _fold(self, thread: threading.Thread, stack: TimerStack) -> None:
        """Fold the stack of ``thread``, which has ended and is no longer registered."""
        if stack.mergers:
            self.kept.append(stack)  # its mergers dump their workers with it
            return
        group = self._group_for(stack.thread_name) if stack.root.children or stack.gauges else None
        # Before settling: a merger that anchors payloads in this tree (a vector env stepped from
        # this thread, its workers' blocks merged under the step) adds what arrives from now on
        # under the group's nodes, and what it holds already, settle() adds here first.
        stack.folded_into = group
        stack.settle()
        if group is not None:
            group.root.add(stack.root)
            group.ended_threads += 1
            # The root of a group counts no runs of its own; its extremes are those of the
            # threads it holds, each thread's run being its outermost blocks back to back.
            thread_run = sum(child.total for child in stack.root.children.values())
            group.root.min = min(group.root.min, thread_run)
            group.root.max = max(group.root.max, thread_run)
            for name, gauge in stack.gauges.items():
                existing = group.gauges.get(name)
                if existing is None:
                    group.gauges[name] = gauge.copy()
                else:
                    existing.merge(gauge)
        if holds_events(stack.timeline):
            # The tree is folded; the recorded events keep their thread's own track.
            stack.root = stack.current = TimerNode("root", None, stack)
            stack.gauges = {}
            self.kept.append(stack)

    def _group_for(self, thread_name: str) -> TimerStack:
        pattern = re.sub(r"\d+", "N", thread_name)
        if pattern not in self.ended_groups and len(self.ended_groups) >= ENDED_THREAD_GROUPS:
            pattern = "other"
        group = self.ended_groups.get(pattern)
        if group is None:
            group = self.ended_groups[pattern] = TimerStack(f"ended:{pattern}")
            group.holds_ended_threads = True
            group.timeline = None
        return group


def holds_events(timeline: Any) -> bool:
    return timeline is not None and timeline.holds_events()
