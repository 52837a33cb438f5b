"""Property: the trace's C helper (``_trace_spans.c``) writes a thread's spans as the Python
reference writes them, for any spans: the same events, in the same order, to the byte.

Spans are drawn to meet every branch of both: ties of start and end (the order they were recorded
in decides), children poking out of their parents, spans ending before they start, spans with
details, device blocks (written by the encoder with their mean), names the encoder escapes
(quotes, non-ASCII, a lone surrogate), nanoseconds that are whole and a half (to even), times beyond the exact microseconds (11.6 days from the
origin) and beyond what 64-bit nanoseconds hold (the whole thread then goes to Python), and times
given as integers (likewise).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from profiler.export import chrome_trace

pytestmark = pytest.mark.skipif(chrome_trace._trace_spans is None,  # noqa: SLF001
                                reason="the trace's C helper was not built here (no compiler, or RLPROF_PURE_PYTHON=1)")

NAMES = ("env.step", "vector.step", 'say "hi"', "politique \u00e9t\u00e9", "load \udcff.bin", "cuda block")
ORIGIN = 31316.733421895

seconds = st.one_of(
    st.integers(0, 2_000_000).map(lambda count: ORIGIN + count * 1e-9),  # nanoseconds apart: ties
    st.floats(ORIGIN, ORIGIN + 5.0),
    st.sampled_from([ORIGIN + 11.6 * 86_400, ORIGIN + 12 * 86_400.0, ORIGIN + 2e4 * 86_400, ORIGIN + 1e10]),
)
details = st.dictionaries(st.sampled_from(["cat", "seq", "sizes"]), st.one_of(st.text(max_size=4), st.integers(0, 9)),
                          min_size=1, max_size=2)


@st.composite
def spans(draw):
    rows = []
    for _ in range(draw(st.integers(0, 40))):
        start = draw(seconds)
        end = draw(st.one_of(seconds, st.just(start), st.floats(start, start + 1e-3)))
        row = [draw(st.sampled_from(NAMES)), start, end]
        if draw(st.integers(0, 9)) == 0:
            row.append(draw(details))
        rows.append(row)
    if rows and draw(st.integers(0, 19)) == 0:
        rows[draw(st.integers(0, len(rows) - 1))][1] = int(ORIGIN) + 1  # an integer time
    return rows


def span_texts(rows: list[list], device_names: dict[str, float], monkeypatch, c_helper: bool) -> list[str]:
    tree = {"timeline": {"clock": "perf_counter", "processes": [
        {"pid": 7, "name": "trainer", "threads": [{"tid": 1, "name": "MainThread", "spans": [list(row) for row in rows]}]}
    ]}}
    clock = chrome_trace._TraceClock(tree["timeline"], [])  # noqa: SLF001
    with monkeypatch.context() as patch:
        if not c_helper:
            patch.setattr(chrome_trace, "_trace_spans", None)
        thread = tree["timeline"]["processes"][0]["threads"][0]
        return [text for chunk in chrome_trace._span_events(7, thread, clock, device_names, True)  # noqa: SLF001
                for text in chunk]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=spans(), device_block=st.booleans())
@example(rows=[["a", ORIGIN, ORIGIN + 1.0], ["b", ORIGIN, ORIGIN + 1.0], ["c", ORIGIN + 0.5, ORIGIN + 2.0]],
         device_block=False)
@example(rows=[["cuda block", ORIGIN, ORIGIN + 1e-3, {"cat": "x"}], ["a", ORIGIN + 1e40, ORIGIN + 1e40]],
         device_block=True)
@example(rows=[["a", 0.0, 2.5e-09], ["b", 1.5e-09, 4.5e-09], ["c", 5e-10, 5.5e-09]], device_block=False)  # halves
@example(rows=[["a", 0.0, 1e-06], ["b", 5e-07, 1.001e-06]], device_block=False)  # a child 1 ns past its parent
def test_the_c_helper_writes_a_thread_s_spans_as_python_does(rows, device_block, monkeypatch):
    device_names = {"cuda block": 0.25} if device_block else {}
    assert span_texts(rows, device_names, monkeypatch, True) == span_texts(rows, device_names, monkeypatch, False)


def test_the_c_helper_writes_a_plain_thread_itself():
    """A helper declining every thread would pass the comparison above (Python then writes them
    all): a thread of plain spans comes back as its events' texts, a device block's as the span
    for the encoder."""
    texts = chrome_trace._trace_spans.nested_span_texts(  # noqa: SLF001
        [["b", 0.25, 0.5], ["a", 0.0, 1.0], ["cuda", 0.5, 0.75]], 0.0, {"a": '"a"', "b": '"b"', "cuda": '"cuda"'},
        '"pid":7,"tid":1}', {"cuda": 0.25})
    assert texts == ['{"name":"a","ph":"X","ts":0.0,"dur":1000000.0,"pid":7,"tid":1}',
                     '{"name":"b","ph":"X","ts":250000.0,"dur":250000.0,"pid":7,"tid":1}',
                     (500_000_000, 750_000_000, ["cuda", 0.5, 0.75])]


def test_a_thread_the_c_helper_cannot_hold_goes_to_python_whole():
    spans_beyond_64_bits = [["a", 0.0, 0.5], ["b", 1e10, 1e10 + 1.0]]
    integer_times = [["a", 1, 2.0]]
    name_not_text = [[("a",), 0.0, 1.0]]
    for rows in (spans_beyond_64_bits, integer_times, [("a", 0.0)], name_not_text):
        assert chrome_trace._trace_spans.nested_span_texts(rows, 0.0, {"a": '"a"', "b": '"b"'}, "}", {}) is None  # noqa: SLF001


class NameMatchingNothing:
    """A device block's name whose hash is that of ``name``: a dict looking ``name`` up compares
    the two, and that comparison runs ``on_compare`` (Python code) once."""

    def __init__(self, name, on_compare):
        self.name, self.on_compare = name, on_compare

    def __hash__(self):
        return hash(self.name)

    def __eq__(self, other):
        on_compare, self.on_compare = self.on_compare, lambda: None
        on_compare()
        return False


def test_a_lookup_that_changes_the_list_gives_what_python_gives(monkeypatch):
    """Looking a span's name up among the device blocks can run Python code (a key's ``__eq__``)
    that replaces spans of the list the helper is writing: the events are still those the Python
    reference writes (it holds the spans it ordered), not a replaced span read under the old one's
    times."""
    def events(c_helper: bool) -> list[str]:
        spans = [["a", ORIGIN, ORIGIN + 1.0], ["b", ORIGIN + 2.0, ORIGIN + 3.0], ["b", ORIGIN + 4.0, ORIGIN + 5.0]]

        def replace_a_later_span():
            spans[2] = ["a", ORIGIN + 4.0, ORIGIN + 5.0, {"cat": "replaced"}]

        thread = {"tid": 1, "name": "MainThread", "spans": spans}
        clock = chrome_trace._TraceClock({"processes": [{"pid": 7, "threads": [thread]}]}, [])  # noqa: SLF001
        device_names = {NameMatchingNothing("a", replace_a_later_span): 0.25}
        with monkeypatch.context() as patch:
            if not c_helper:
                patch.setattr(chrome_trace, "_trace_spans", None)
            return [text for chunk in chrome_trace._span_events(7, thread, clock, device_names, True)  # noqa: SLF001
                    for text in chunk]

    assert events(True) == events(False)
