/* What both C accelerators of the hot path share: a Python object's __slots__ read and written
 * at the offsets Python gave them, and time.perf_counter read as CPython reads it.
 *
 * profiler/timing/_timer_core.c (a timer block's enter and exit) and
 * envmanager/transport/_step_core.c (a worker's timed env call) both count runs into the same
 * TimerNode objects, and both must give the very same floats as the pure-Python reference does:
 * one copy of these, so the two cannot drift apart. setup.py hands this folder to both builds
 * (``include_dirs``), and pyproject.toml ships this header in the sdist.
 *
 * Everything is ``static inline``: each extension gets its own copy, and one that does not use a
 * helper does not warn about it.
 */

#ifndef RLPROF_SLOTS_AND_CLOCK_H
#define RLPROF_SLOTS_AND_CLOCK_H

#include <Python.h>
#include <structmember.h>

#include <stdint.h>

#ifdef __linux__
#include <time.h>
#define HAVE_MONOTONIC_CLOCK 1
#endif

/* The slot at ``offset`` of ``object``: a PyObject * that is NULL while the slot is not set. */
#define SLOT(object, offset) (*(PyObject **)((char *)(object) + (offset)))

/* Read a slot as Python does: a slot never set raises AttributeError. Borrowed reference. */
static inline PyObject *
get_slot(PyObject *object, Py_ssize_t offset, const char *name)
{
    PyObject *value = SLOT(object, offset);
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute '%s'",
                     Py_TYPE(object)->tp_name, name);
    }
    return value;
}

/* Store a new reference in a slot, releasing what it held. */
static inline void
set_slot(PyObject *object, Py_ssize_t offset, PyObject *value)
{
    PyObject *previous = SLOT(object, offset);
    SLOT(object, offset) = value;
    Py_XDECREF(previous);
}

/* Where the slot ``name`` of ``type`` lies; -1 with a TypeError if it is not a writable slot
 * holding any object (a class redefined, a property in its place: the caller then falls back to
 * Python, or refuses to configure). */
static inline Py_ssize_t
slot_offset(PyTypeObject *type, const char *name)
{
    PyObject *descriptor = PyObject_GetAttrString((PyObject *)type, name);
    if (descriptor == NULL) {
        return -1;
    }
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descriptor, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descriptor)->d_member;
        if (member->type == T_OBJECT_EX && !(member->flags & READONLY)) {
            offset = member->offset;
        }
    }
    Py_DECREF(descriptor);
    if (offset < 0) {
        PyErr_Format(PyExc_TypeError, "%.100s.%s is not a writable slot: the accelerator cannot time it",
                     type->tp_name, name);
    }
    return offset;
}

#ifdef HAVE_MONOTONIC_CLOCK
/* CLOCK_MONOTONIC in seconds, converted as CPython's time.perf_counter converts it on Linux
 * (pytime.c: nanoseconds as a 64-bit integer, then _PyTime_AsSecondsDouble), so that both give
 * the same float for the same instant. */
static inline int
read_system_clock(double *seconds)
{
    struct timespec now;
    if (clock_gettime(CLOCK_MONOTONIC, &now) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    int64_t nanoseconds = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    volatile double reading;  /* volatile, as in CPython: no rounding that CPython does not do */
    if (nanoseconds % 1000000000 == 0) {
        reading = (double)(nanoseconds / 1000000000);
    }
    else {
        reading = (double)nanoseconds;
        reading /= 1e9;
    }
    *seconds = reading;
    return 0;
}
#endif

#endif /* RLPROF_SLOTS_AND_CLOCK_H */
