"""Random programs of timer blocks, for the property tests that run one program on both timer
cores and compare what each leaves: the tree (tests/profiler/timing/test_accelerator.py) and the
payloads a worker sends and the tree a trainer merges from them
(tests/profiler/multiprocess/test_payload_cores.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable

from hypothesis import strategies as st

from profiler.timing import timers


@dataclass
class Block:
    """One block of a random program: time spent before and after its children, whether it
    raises at its end an exception that escapes ``escapes`` blocks (0: it does not raise), and
    whether the worker flushes its timers while the block is open, after its first part."""

    name: str
    before: int
    after: int
    escapes: int
    children: list[Block] = field(default_factory=list)
    flushes: bool = False


class Escape(Exception):
    def __init__(self, levels: int) -> None:
        super().__init__(levels)
        self.levels = levels


def blocks(children: st.SearchStrategy[list[Block]], flushes: st.SearchStrategy[bool]) -> st.SearchStrategy[Block]:
    return st.builds(
        Block,
        name=st.sampled_from("abc"),
        before=st.integers(0, 5),
        after=st.integers(0, 5),
        escapes=st.integers(0, 3),
        children=children,
        flushes=flushes,
    )


def programs(flushes: st.SearchStrategy[bool] = st.just(False)) -> st.SearchStrategy[list[Block]]:
    """Up to four top-level blocks, each a random tree of up to twelve leaves; ``flushes`` draws
    each block's ``flushes``."""
    return st.lists(
        st.recursive(
            blocks(st.just([]), flushes),
            lambda inner: blocks(st.lists(inner, max_size=3), flushes),
            max_leaves=12,
        ),
        max_size=4,
    )


class SteppedClock:
    """A fake clock whose readings are of one number type, moved by the program."""

    def __init__(self, start: float | int | Fraction, step: float | int | Fraction) -> None:
        self.time = start
        self.step = step

    def __call__(self) -> float | int | Fraction:
        return self.time

    def advance(self, steps: int) -> None:
        self.time += self.step * steps


def run_block(block: Block, clock: SteppedClock, flush: Callable[[], None] = lambda: None) -> None:
    """Run ``block`` and its children as ``with hierarchical_timer`` blocks, calling ``flush()``
    where a block says so."""
    with timers.hierarchical_timer(block.name):
        clock.advance(block.before)
        if block.flushes:
            flush()
        for child in block.children:
            try:
                run_block(child, clock, flush)
            except Escape as escape:
                escape.levels -= 1
                if escape.levels > 0:
                    raise
        clock.advance(block.after)
        if block.escapes:
            raise Escape(block.escapes)


def run_program(program: list[Block], clock: SteppedClock, flush: Callable[[], None] = lambda: None) -> None:
    """Run every top-level block of ``program`` in turn, catching what escapes them."""
    for block in program:
        try:
            run_block(block, clock, flush)
        except Escape:
            pass
