"""The rows a payload takes from a worker's nodes: the C accelerator's take_rows does what the
Python reference (payload.take_rows_in_python) does, to the rows and to the nodes."""

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


@needs_accelerator
@given(st.lists(figures, max_size=20))
def test_the_c_rows_and_the_zeroed_nodes_are_those_of_the_python_reference(rows_of_figures):
    ids = list(range(3, 3 + len(rows_of_figures)))
    python_nodes, c_nodes = nodes_with(rows_of_figures), nodes_with(rows_of_figures)
    python_rows, python_errors = payload.take_rows_in_python(ids, python_nodes)
    c_rows, c_errors = accelerator.extension.take_rows(ids, c_nodes)
    assert repr(c_rows) == repr(python_rows) and c_errors == python_errors
    assert state(c_nodes) == state(python_nodes)


@needs_accelerator
def test_take_rows_refuses_what_is_not_a_timer_node():
    with pytest.raises(TypeError, match="TimerNodes"):
        accelerator.extension.take_rows([1], [object()])
