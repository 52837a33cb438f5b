/* A thread's spans as the trace's X events, in nesting order: profiler/export/chrome_trace.py's
 * _nested_in_order and the plain span's text of _span_events, in C.
 *
 * The trace of a long run is nearly all spans, and their nanoseconds, ordering, nesting and text
 * were most of what rlprof run's exit spent after the timers file (about 1.3 us a span in
 * Python; benchmarks/exit_span_cost.py). The Python functions stay the reference: the same tests
 * run with and without this helper, and a property test compares the two on random spans.
 *
 * nested_span_texts(spans, origin, names, place, device_names) gives, in nesting order (by start,
 * then by descending end, then by place in the list; a child trimmed to end with its parent),
 * each span as its event's text where Python writes a plain span's text itself (no details, not
 * a device block's, ending before EXACT_MICROSECONDS_BELOW), else as (start, end, span) for
 * Python's encoder. None, and Python does the thread, when a span is not a list or tuple of a
 * name (a str) and two floats first, or its nanoseconds from the origin are negative or beyond
 * 2**62, or a key of names or device_names is not a str: a str looked up among str keys runs no
 * Python code, which could change the spans under the helper.
 * Every number is computed as Python computes it: round((seconds - origin) * 1e9), halves to even.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

#ifndef TRACE_SPANS_VERSION
#define TRACE_SPANS_VERSION 1 /* the interface profiler/export/chrome_trace.py expects */
#endif

#define EXACT_MICROSECONDS_BELOW 1000000000000000LL /* chrome_trace.EXACT_MICROSECONDS_BELOW */
#define NANOSECONDS_LIMIT 4611686018427387904.0      /* 2**62: ends, negated, still fit */

typedef struct {
    long long start;
    long long negative_end;
    Py_ssize_t position;
} Span;

/* round(x) as Python's float.__round__ gives it (halves to even); 0 when beyond the limit. */
static int
nanoseconds_of(double x, long long *nanoseconds)
{
    double rounded = round(x);
    if (fabs(x - rounded) == 0.5) {
        rounded = 2.0 * round(x / 2.0);
    }
    if (!(rounded >= 0.0 && rounded < NANOSECONDS_LIMIT)) {
        return 0;
    }
    *nanoseconds = (long long)rounded;
    return 1;
}

static int
in_nesting_order(const void *left_pointer, const void *right_pointer)
{
    const Span *left = left_pointer, *right = right_pointer;
    if (left->start != right->start) {
        return left->start < right->start ? -1 : 1;
    }
    if (left->negative_end != right->negative_end) {
        return left->negative_end < right->negative_end ? -1 : 1;
    }
    return left->position < right->position ? -1 : (left->position > right->position);
}

/* repr(nanoseconds / 1000) for 0 <= nanoseconds < EXACT_MICROSECONDS_BELOW (see
 * chrome_trace.MICROSECOND_FRACTIONS): the whole microseconds, then the thousandths without
 * their trailing zeros, ".0" for none. */
static int
write_microseconds(char *text, long long nanoseconds)
{
    char reversed[24];
    int count = 0;
    long long whole = nanoseconds / 1000;
    do {
        reversed[count++] = (char)('0' + whole % 10);
        whole /= 10;
    } while (whole > 0);
    int length = 0;
    while (count > 0) {
        text[length++] = reversed[--count];
    }
    text[length++] = '.';
    int fraction = (int)(nanoseconds % 1000);
    if (fraction == 0) {
        text[length++] = '0';
    } else {
        text[length++] = (char)('0' + fraction / 100);
        text[length++] = (char)('0' + fraction / 10 % 10);
        text[length++] = (char)('0' + fraction % 10);
        while (text[length - 1] == '0') {
            length--;
        }
    }
    text[length] = '\0';
    return length;
}

static PyObject *
span_text(PyObject *name_text, PyObject *place, long long start, long long end)
{
    char timestamp[32], duration[32];
    int timestamp_length = write_microseconds(timestamp, start);
    int duration_length = write_microseconds(duration, end - start);
    if (!PyUnicode_IS_ASCII(name_text) || !PyUnicode_IS_ASCII(place)) {
        return PyUnicode_FromFormat("{\"name\":%U,\"ph\":\"X\",\"ts\":%s,\"dur\":%s,%U", name_text, timestamp,
                                    duration, place);
    }
    static const char before_time[] = ",\"ph\":\"X\",\"ts\":", before_duration[] = ",\"dur\":";
    Py_ssize_t name_length = PyUnicode_GET_LENGTH(name_text), place_length = PyUnicode_GET_LENGTH(place);
    Py_ssize_t length = 8 + name_length + (Py_ssize_t)sizeof(before_time) - 1 + timestamp_length
                        + (Py_ssize_t)sizeof(before_duration) - 1 + duration_length + 1 + place_length;
    PyObject *text = PyUnicode_New(length, 127);
    if (text == NULL) {
        return NULL;
    }
    char *cursor = (char *)PyUnicode_1BYTE_DATA(text);
#define APPEND(source, count) (memcpy(cursor, (source), (size_t)(count)), cursor += (count))
    APPEND("{\"name\":", 8);
    APPEND(PyUnicode_1BYTE_DATA(name_text), name_length);
    APPEND(before_time, sizeof(before_time) - 1);
    APPEND(timestamp, timestamp_length);
    APPEND(before_duration, sizeof(before_duration) - 1);
    APPEND(duration, duration_length);
    APPEND(",", 1);
    APPEND(PyUnicode_1BYTE_DATA(place), place_length);
#undef APPEND
    return text;
}

/* The span's event: its text, or (start, end, span) where Python's encoder writes it. */
static PyObject *
span_event(PyObject *span, PyObject *names, PyObject *place, PyObject *device_names, long long start,
           long long end)
{
    PyObject *name = PySequence_Fast_GET_ITEM(span, 0);
    int device_block = PyDict_Contains(device_names, name);
    if (device_block < 0) {
        return NULL;
    }
    if (PySequence_Fast_GET_SIZE(span) == 3 && end < EXACT_MICROSECONDS_BELOW && !device_block) {
        PyObject *name_text = PyDict_GetItemWithError(names, name);
        if (name_text == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetObject(PyExc_KeyError, name);
            }
            return NULL;
        }
        if (!PyUnicode_Check(name_text)) {
            PyErr_SetString(PyExc_TypeError, "a name's text must be a str");
            return NULL;
        }
        return span_text(name_text, place, start, end);
    }
    return Py_BuildValue("(LLO)", start, end, span);
}

static int
has_only_text_keys(PyObject *dict)
{
    Py_ssize_t place = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &place, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            return 0;
        }
    }
    return 1;
}

static PyObject *
nested_span_texts(PyObject *self, PyObject *args)
{
    PyObject *spans, *names, *place, *device_names;
    double origin;
    if (!PyArg_ParseTuple(args, "O!dO!UO!:nested_span_texts", &PyList_Type, &spans, &origin, &PyDict_Type,
                          &names, &place, &PyDict_Type, &device_names)) {
        return NULL;
    }
    if (!has_only_text_keys(names) || !has_only_text_keys(device_names)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t count = PyList_GET_SIZE(spans);
    Span *ordered = PyMem_Malloc(sizeof(Span) * (size_t)(count > 0 ? count : 1));
    long long *open_ends = PyMem_Malloc(sizeof(long long) * (size_t)(count > 0 ? count : 1));
    PyObject *result = NULL;
    if (ordered == NULL || open_ends == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t position = 0; position < count; position++) {
        PyObject *span = PyList_GET_ITEM(spans, position);
        if (!(PyList_CheckExact(span) || PyTuple_CheckExact(span)) || PySequence_Fast_GET_SIZE(span) < 3
            || !PyUnicode_CheckExact(PySequence_Fast_GET_ITEM(span, 0))) {
            result = Py_None;
            goto done;
        }
        PyObject *began = PySequence_Fast_GET_ITEM(span, 1), *ended = PySequence_Fast_GET_ITEM(span, 2);
        long long start, end;
        if (!PyFloat_CheckExact(began) || !PyFloat_CheckExact(ended)
            || !nanoseconds_of((PyFloat_AS_DOUBLE(began) - origin) * 1e9, &start)
            || !nanoseconds_of((PyFloat_AS_DOUBLE(ended) - origin) * 1e9, &end)) {
            result = Py_None;
            goto done;
        }
        ordered[position] = (Span){start, -(end > start ? end : start), position};
    }
    qsort(ordered, (size_t)count, sizeof(Span), in_nesting_order);
    result = PyList_New(count);
    if (result == NULL) {
        goto done;
    }
    Py_ssize_t open = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        long long start = ordered[index].start, end = -ordered[index].negative_end;
        while (open > 0 && open_ends[open - 1] <= start) {
            open--;
        }
        if (open > 0 && end > open_ends[open - 1]) {
            end = open_ends[open - 1];
        }
        open_ends[open++] = end;
        PyObject *event = span_event(PyList_GET_ITEM(spans, ordered[index].position), names, place, device_names,
                                     start, end);
        if (event == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, index, event);
    }
done:
    PyMem_Free(ordered);
    PyMem_Free(open_ends);
    if (result == Py_None) {
        Py_RETURN_NONE;
    }
    return result;
}

static PyMethodDef methods[] = {
    {"nested_span_texts", nested_span_texts, METH_VARARGS,
     "nested_span_texts(spans, origin, names, place, device_names): a thread's X events in nesting order, "
     "as texts, or (start, end, span) for Python's encoder; None where Python must do the thread"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_trace_spans", "A thread's spans as a trace's X events, in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__trace_spans(void)
{
    PyObject *created = PyModule_Create(&module);
    if (created != NULL && PyModule_AddIntConstant(created, "VERSION", TRACE_SPANS_VERSION) < 0) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
