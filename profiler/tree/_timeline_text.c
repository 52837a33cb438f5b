/* A thread's spans as the timers file writes them: profiler/tree/timer_json.py's compact JSON of
 * the timeline's "spans" lists, in C.
 *
 * json's encoder writes each time with float's repr, whose shortest-decimal search (CPython's
 * _Py_dg_dtoa) was 11 of the 16 million instructions the timers file cost per 1,000 spans of
 * rlprof run's exit (benchmarks/exit_span_cost.py). A time read from time.perf_counter is the
 * nearest float to a whole number of nanoseconds, and where floats lie closer than a nanosecond
 * (from 1 s to 2**23 s, 97 days) that decimal, written out, is repr's text: see
 * write_seconds. Other times are written by repr itself. Python stays the reference: the same
 * tests run with and without this helper, and a property test compares the texts.
 *
 * spans_text(spans, name_text) is json.dumps(spans, separators=(",", ":"), ensure_ascii=False)
 * for a list of [name, float, float] rows, each name written as name_text(name) gives it (its
 * strict JSON text; called once a name); None, and the encoder writes the list, where a row is
 * anything else (details, a name that is not a str, a number that is not a finite float), also
 * when name_text made it so.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

#ifndef TIMELINE_TEXT_VERSION
#define TIMELINE_TEXT_VERSION 1 /* the interface profiler/tree/timer_json.py expects */
#endif

#define EXACT_SECONDS_FROM 1.0
#define EXACT_SECONDS_BELOW 8388608.0 /* 2**23: below, floats lie 2**-30 s apart or closer */

typedef struct {
    char *bytes;
    size_t length, capacity;
    int ascii;
} Text;

static int
reserve(Text *text, size_t more)
{
    if (text->length + more <= text->capacity) {
        return 0;
    }
    size_t capacity = text->capacity * 2 > text->length + more ? text->capacity * 2 : text->length + more;
    char *bytes = PyMem_Realloc(text->bytes, capacity);
    if (bytes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    text->bytes = bytes;
    text->capacity = capacity;
    return 0;
}

static int
append(Text *text, const char *bytes, size_t length)
{
    if (reserve(text, length) < 0) {
        return -1;
    }
    memcpy(text->bytes + text->length, bytes, length);
    text->length += length;
    return 0;
}

/* The decimal digits of whole (not negative), written at digits; returns how many. */
static int
write_whole(char *digits, long long whole)
{
    char reversed[24];
    int count = 0;
    do {
        reversed[count++] = (char)('0' + whole % 10);
        whole /= 10;
    } while (whole > 0);
    for (int index = 0; index < count; index++) {
        digits[index] = reversed[count - 1 - index];
    }
    return count;
}

/* repr(seconds) where seconds is the float nearest a whole number n of nanoseconds and floats
 * lie less than a nanosecond apart: n / 10**9 is then the only decimal of at most nine places
 * that reads back as seconds, so no shorter text does, and repr writes it (trailing zeros
 * dropped, ".0" for a whole second). Elsewhere, repr itself. */
static int
write_seconds(Text *text, PyObject *number)
{
    double seconds = PyFloat_AS_DOUBLE(number);
    if (seconds >= EXACT_SECONDS_FROM && seconds < EXACT_SECONDS_BELOW) {
        long long nanoseconds = llround(seconds * 1e9);
        if ((double)nanoseconds / 1e9 == seconds) {
            char digits[40];
            int length = write_whole(digits, nanoseconds / 1000000000LL);
            long long fraction = nanoseconds % 1000000000LL;
            digits[length++] = '.';
            if (fraction == 0) {
                digits[length++] = '0';
            } else {
                for (int place = 8; place >= 0; place--, fraction /= 10) {
                    digits[length + place] = (char)('0' + fraction % 10);
                }
                length += 9;
                while (digits[length - 1] == '0') {
                    length--;
                }
            }
            return append(text, digits, (size_t)length);
        }
    }
    PyObject *written = PyObject_Repr(number);
    if (written == NULL) {
        return -1;
    }
    Py_ssize_t length;
    const char *bytes = PyUnicode_AsUTF8AndSize(written, &length);
    int result = bytes == NULL ? -1 : append(text, bytes, (size_t)length);
    Py_DECREF(written);
    return result;
}

static int
is_plain_row(PyObject *row)
{
    if (!(PyList_CheckExact(row) || PyTuple_CheckExact(row)) || PySequence_Fast_GET_SIZE(row) != 3
        || !PyUnicode_CheckExact(PySequence_Fast_GET_ITEM(row, 0))) {
        return 0;
    }
    for (int index = 1; index < 3; index++) {
        PyObject *number = PySequence_Fast_GET_ITEM(row, index);
        if (!PyFloat_CheckExact(number) || !isfinite(PyFloat_AS_DOUBLE(number))) {
            return 0;
        }
    }
    return 1;
}

/* names[name] = name_text(name), the name's strict JSON text. */
static int
add_name_text(PyObject *names, PyObject *name_text, PyObject *name)
{
    Py_INCREF(name); /* name_text may drop the row that holds it */
    PyObject *written = PyObject_CallOneArg(name_text, name);
    int stored = written != NULL && PyUnicode_Check(written) ? PyDict_SetItem(names, name, written) : -1;
    Py_XDECREF(written); /* names holds it */
    Py_DECREF(name);
    if (stored < 0 && !PyErr_Occurred()) {
        PyErr_SetString(PyExc_TypeError, "a name's text must be a str");
    }
    return stored;
}

/* The text of the name of the row at index: from names, or by name_text at the name's first
 * row (then kept in names). name_text is Python code, which may change the list: the row is read
 * again after it, and NULL without an error says the list no longer has a plain row there. */
static PyObject *
name_text_of(PyObject *spans, Py_ssize_t index, PyObject *names, PyObject *name_text)
{
    PyObject *name = PySequence_Fast_GET_ITEM(PyList_GET_ITEM(spans, index), 0);
    PyObject *written = PyDict_GetItemWithError(names, name);
    if (written != NULL || PyErr_Occurred()) {
        return written;
    }
    if (add_name_text(names, name_text, name) < 0) {
        return NULL;
    }
    if (index >= PyList_GET_SIZE(spans) || !is_plain_row(PyList_GET_ITEM(spans, index))) {
        return NULL;
    }
    return PyDict_GetItemWithError(names, PySequence_Fast_GET_ITEM(PyList_GET_ITEM(spans, index), 0));
}

static int
write_name(Text *text, PyObject *written)
{
    Py_ssize_t length;
    const char *bytes = PyUnicode_AsUTF8AndSize(written, &length);
    if (bytes == NULL) {
        return -1;
    }
    text->ascii = text->ascii && PyUnicode_IS_ASCII(written);
    return append(text, bytes, (size_t)length);
}

static PyObject *
spans_text(PyObject *self, PyObject *args)
{
    PyObject *spans, *name_text;
    if (!PyArg_ParseTuple(args, "O!O:spans_text", &PyList_Type, &spans, &name_text)) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(spans);
    for (Py_ssize_t index = 0; index < count; index++) {
        if (!is_plain_row(PyList_GET_ITEM(spans, index))) {
            Py_RETURN_NONE;
        }
    }
    Text text = {NULL, 0, 0, 1};
    PyObject *names = PyDict_New();
    if (names == NULL || reserve(&text, 64 * (size_t)count + 2) < 0 || append(&text, "[", 1) < 0) {
        goto failed;
    }
    /* name_text is Python code, which may change the list: each row is checked again as it is
     * written (the list's length read each time, no row held across a call), and the encoder
     * writes the list if one is no longer plain. */
    for (Py_ssize_t index = 0; index < PyList_GET_SIZE(spans); index++) {
        if (!is_plain_row(PyList_GET_ITEM(spans, index))) {
            goto not_plain;
        }
        PyObject *written = name_text_of(spans, index, names, name_text);
        if (written == NULL) {
            if (PyErr_Occurred()) {
                goto failed;
            }
            goto not_plain;
        }
        PyObject *row = PyList_GET_ITEM(spans, index);
        if ((index > 0 && append(&text, ",", 1) < 0) || append(&text, "[", 1) < 0 || write_name(&text, written) < 0
            || append(&text, ",", 1) < 0 || write_seconds(&text, PySequence_Fast_GET_ITEM(row, 1)) < 0
            || append(&text, ",", 1) < 0 || write_seconds(&text, PySequence_Fast_GET_ITEM(row, 2)) < 0
            || append(&text, "]", 1) < 0) {
            goto failed;
        }
    }
    if (append(&text, "]", 1) < 0) {
        goto failed;
    }
    PyObject *result;
    if (text.ascii) {
        result = PyUnicode_New((Py_ssize_t)text.length, 127);
        if (result != NULL) {
            memcpy(PyUnicode_1BYTE_DATA(result), text.bytes, text.length);
        }
    } else {
        result = PyUnicode_DecodeUTF8(text.bytes, (Py_ssize_t)text.length, "strict");
    }
    PyMem_Free(text.bytes);
    Py_DECREF(names);
    return result;
not_plain:
    PyMem_Free(text.bytes);
    Py_DECREF(names);
    Py_RETURN_NONE;
failed:
    PyMem_Free(text.bytes);
    Py_XDECREF(names);
    return NULL;
}

static PyMethodDef methods[] = {
    {"spans_text", spans_text, METH_VARARGS,
     "spans_text(spans, name_text): the compact JSON of a list of [name, float, float] rows, each name "
     "as name_text(name) writes it; None for any other list"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_timeline_text", "A thread's spans as the timers file writes them, in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__timeline_text(void)
{
    PyObject *created = PyModule_Create(&module);
    if (created != NULL && PyModule_AddIntConstant(created, "VERSION", TIMELINE_TEXT_VERSION) < 0) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
