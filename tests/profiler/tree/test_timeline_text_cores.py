"""Property: the timers file's C helper (``_timeline_text.c``) writes a timeline as the JSON
encoder writes it, to the byte, for any timeline: spans' times that are perf_counter readings
(the nearest float to whole nanoseconds, from a second to past the 97 days where a float's
spacing reaches a nanosecond), any other float, whole seconds, names the encoder escapes (quotes,
control characters, non-ASCII, a lone surrogate), rows with details, integer or non-finite times
(those threads are the encoder's whole), several processes and threads, the sections around
the spans, and keys the encoder turns to text.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from profiler.tree import strict_json, timer_json

pytestmark = pytest.mark.skipif(timer_json._timeline_text is None,  # noqa: SLF001
                                reason="the timers file's C helper was not built here (no compiler, or RLPROF_PURE_PYTHON=1)")

NAMES = ("env.step", 'say "hi"', "tab\there", "politique \u00e9t\u00e9", "load \udcff.bin", "\U0001f600")
NANOSECONDS = st.one_of(st.integers(10**9, 2**23 * 10**9), st.integers(0, 10**18),
                        st.integers(2**23 * 10**9 - 10**6, 2**23 * 10**9 + 10**6))

times = st.one_of(
    NANOSECONDS.map(lambda count: count / 1_000_000_000),  # what perf_counter gives
    st.floats(0.0, 1e20),
    st.integers(1, 2**23).map(float),  # whole seconds
    st.sampled_from([1.0, 2.0**23, math.nextafter(2.0**23, 0.0), 1e-5, 0.999999999, 5e-324]),
)


@st.composite
def rows(draw):
    row = [draw(st.sampled_from(NAMES)), draw(times), draw(times)]
    odd = draw(st.integers(0, 29))
    if odd == 0:
        row.append({"cat": "rl"})
    elif odd == 1:
        row[1] = int(row[1])
    elif odd == 2:
        row[2] = draw(st.sampled_from([math.nan, math.inf]))
    elif odd == 3:
        row = tuple(row)
    return row


threads = st.lists(rows(), max_size=30).map(lambda spans: {"tid": 1, "name": "MainThread", "spans": spans,
                                                          "instants": [["mark", 2.5]]})
processes = st.lists(threads, min_size=0, max_size=3).map(
    lambda threads: {"pid": 7, "name": "trainer", "host": "vm", "clock_offset": 0.0, "threads": threads,
                     "counters": [["cpu_percent", 1.5, 85.0]]})
timelines = st.lists(processes, max_size=3).map(lambda processes: {"clock": "perf_counter", "dropped": 0,
                                                                   "processes": processes})


@settings(max_examples=300, deadline=None)
@given(timeline=timelines)
@example(timeline={"clock": "perf_counter", "dropped": 0, "processes": [{"pid": 1, "threads": [
    {"tid": 1, "spans": [["a", 31316.733421895, 31316.733728548], ["a", 1.0, 8388607.999999999]]}]}]})
@example(timeline={"clock": "perf_counter", "processes": [{"pid": 1, "threads": [  # keys the encoder turns to text
    {"tid": 1, 2: "two", "spans": [["a", 2.5, 3.5]]}]}, {1.5: None, "threads": []}], "dropped": 0})
@example(timeline={"clock": "perf_counter", "processes": [{"pid": 1, "threads": [{"tid": 1}, "not a thread"]}]})
@example(timeline={"clock": "perf_counter", "processes": [  # such keys where a NaN elsewhere has the encoder's text repaired
    {"pid": 1, True: "x", None: 0, "threads": []}, {"pid": 2, "threads": [{"tid": 1, "spans": [["a", 1.0, math.nan]]}]}]})
def test_the_c_helper_writes_a_timeline_as_the_encoder_does(timeline):
    assert timer_json._compact_timeline(timeline) == strict_json.dumps(timeline, separators=(",", ":"))  # noqa: SLF001


@settings(max_examples=2000, deadline=None)
@given(seconds=times)
def test_a_time_is_written_as_its_repr(seconds):
    if not math.isfinite(seconds):
        return
    text = timer_json._timeline_text.spans_text([["a", seconds, seconds]], strict_json.dumps)  # noqa: SLF001
    assert text == f'[["a",{seconds!r},{seconds!r}]]'


def test_rows_the_c_helper_does_not_write_are_left_to_the_encoder():
    for spans in ([["a", 1.0, 2.0, {"cat": "x"}]], [["a", 1, 2.0]], [["a", 1.0, math.nan]], [[3, 1.0, 2.0]], [["a"]]):
        assert timer_json._timeline_text.spans_text(spans, strict_json.dumps) is None  # noqa: SLF001


def test_a_name_text_that_changes_the_list_leaves_it_to_the_encoder():
    """``name_text`` is Python code run between the helper's rows: whatever it does to the list
    (here a row turned to integer times), the helper writes the list as it now is or gives None,
    never a row it checked before and reads after (a freed or replaced row)."""
    spans = [["a", 1.5, 2.5], ["b", 3.5, 4.5], ["a", 5.5, 6.5]]

    def name_text_changing_the_list(name):
        spans[1] = ["b", 7, 8]
        return strict_json.dumps(name)

    written = timer_json._timeline_text.spans_text(spans, name_text_changing_the_list)  # noqa: SLF001
    assert written in (None, strict_json.dumps(spans, separators=(",", ":")))
