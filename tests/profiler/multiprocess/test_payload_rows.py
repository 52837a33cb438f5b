"""The rows a payload takes from a worker's nodes: the C accelerator's take_rows does what the
Python reference (payload.take_rows_in_python) does, to the packed rows and to the nodes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profiler.multiprocess import payload
from profiler.timing import accelerator
from profiler.timing.timer_node import TimerNode

needs_accelerator = pytest.mark.skipif(
    accelerator.extension is None, reason=f"C accelerator not loaded: {accelerator.unavailable_reason}"
)

figures = st.tuples(
    st.integers(0, 3),  # count
    st.sampled_from([0.0, -0.5, 1.25, 3.0]),  # total (negative: a run open across the last flush)
    st.sampled_from([math.inf, 0.25, 1.0]),  # min
    st.sampled_from([0.0, 1.0, 2.5]),  # max
    st.integers(0, 2),  # errors
)


def nodes_with(rows_of_figures: list[tuple[int, float, float, float, int]]) -> list[TimerNode]:
    nodes = []
    for count, total, minimum, maximum, errors in rows_of_figures:
        node = TimerNode()
        node.count, node.total, node.min, node.max, node.errors = count, total, minimum, maximum, errors
        nodes.append(node)
    return nodes


def state(nodes: list[TimerNode]) -> str:
    return repr([(node.count, node.total, node.min, node.max, node.errors) for node in nodes])


def assert_c_takes_the_rows_python_takes(ids, rows_of_figures):
    """The C snapshot of nodes holding ``rows_of_figures`` gives the Python reference's bytes and
    error counts, and leaves the nodes as the reference leaves them (zeroed)."""
    python_nodes, c_nodes = nodes_with(rows_of_figures), nodes_with(rows_of_figures)
    python_blocks, python_errors = payload.take_rows_in_python(ids, python_nodes)
    c_blocks, c_errors = accelerator.extension.take_rows(ids, c_nodes)
    assert c_blocks == python_blocks and c_errors == python_errors
    assert state(c_nodes) == state(python_nodes)


@needs_accelerator
@given(st.lists(figures, max_size=20))
def test_the_c_rows_and_the_zeroed_nodes_are_those_of_the_python_reference(rows_of_figures):
    ids = list(range(3, 3 + len(rows_of_figures)))
    assert_c_takes_the_rows_python_takes(ids, rows_of_figures)


@needs_accelerator
def test_take_rows_refuses_what_is_not_a_timer_node():
    with pytest.raises(TypeError, match="TimerNodes"):
        accelerator.extension.take_rows([1], [object()])


# Figures as a fake clock leaves them (ints, Fractions) beside floats: packed as struct packs them.
exotic_figures = st.tuples(
    st.integers(0, 2**40),  # count
    st.one_of(st.floats(0, 1e9), st.integers(0, 10**6), st.fractions(0, 10**6)),  # total
    st.one_of(st.just(math.inf), st.floats(0, 1e9), st.integers(0, 10**6), st.fractions(0, 10**6)),
    st.one_of(st.floats(0, 1e9), st.integers(0, 10**6), st.fractions(0, 10**6)),  # max
    st.integers(0, 2**40),  # errors
)


@needs_accelerator
@given(st.lists(exotic_figures, max_size=20), st.integers(0, 2**32 - 100))
def test_the_c_rows_pack_every_number_type_as_struct_does(rows_of_figures, first_id):
    ids = list(range(first_id, first_id + len(rows_of_figures)))
    assert_c_takes_the_rows_python_takes(ids, rows_of_figures)


@needs_accelerator
def test_take_rows_refuses_an_id_that_a_row_cannot_carry():
    node = TimerNode()
    node.count, node.total, node.min, node.max = 1, 1.0, 1.0, 1.0
    with pytest.raises(OverflowError):
        accelerator.extension.take_rows([2**32], [node])


row = st.tuples(
    st.integers(0, 3),  # how far this row's id is past the previous one's (0: the same id)
    st.integers(0, 2**63 - 1),  # count
    st.floats(0, 1e6),  # total
    st.floats(0, 1e6),  # min
    st.floats(0, 1e6),  # max
)


def blocks_of(rows: list[tuple[int, int, float, float, float]]) -> bytes:
    values: list[float] = []
    node_id = -1
    for step, count, total, minimum, maximum in rows:
        node_id += step
        values.extend((max(node_id, 0), count, total, minimum, maximum))
    return payload._rows_struct(len(rows)).pack(*values)


def python_verdict(blocks: bytes, declared: int, ascending_ids: tuple[int, ...]) -> object:
    try:
        return payload.row_ids_in_python(blocks, declared, ascending_ids)
    except payload.PayloadError:
        return "refused"


@needs_accelerator
@given(
    st.lists(row, max_size=12),
    st.integers(0, 40),
    st.lists(st.tuples(st.integers(0, 10**4), st.integers(0, 255)), max_size=3),
    st.booleans(),
)
def test_the_c_row_check_accepts_what_the_python_check_accepts_with_the_same_ids(
    rows, declared, flips, previous_layout
):
    # Well-formed rows, rows out of order or undeclared, and bytes flipped anywhere (signs,
    # NaNs, huge numbers, ids): the C check returns the ids the Python one does, or None where
    # the Python one refuses (and then names what is wrong).
    blocks = bytearray(blocks_of(rows))
    for position, value in flips:
        if blocks:
            blocks[position % len(blocks)] = value
    blocks = bytes(blocks)
    verdict = python_verdict(blocks, declared, ())
    ascending_ids = verdict if previous_layout and verdict != "refused" else ()
    checked = accelerator.extension.check_rows(blocks, declared, ascending_ids)
    assert (checked if checked is not None else "refused") == verdict


@needs_accelerator
def test_the_c_row_check_gives_back_the_previous_layouts_ids_when_the_rows_have_them():
    blocks = blocks_of([(1, 1, 0.5, 0.5, 0.5), (2, 2, 1.0, 0.25, 0.75)])
    previous = payload.row_ids_in_python(blocks, 5)
    assert previous == (0, 2)
    assert accelerator.extension.check_rows(blocks, 5, previous) is previous
    assert accelerator.extension.check_rows(blocks, 5, (0, 3)) == (0, 2)


@needs_accelerator
@pytest.mark.parametrize("blocks", [bytearray(36), b"\0" * 35, memoryview(b"\0" * 36)])
def test_the_c_row_check_leaves_anything_but_whole_rows_of_bytes_to_python(blocks):
    assert accelerator.extension.check_rows(blocks, 5, ()) is None
