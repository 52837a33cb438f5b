/* The optional C accelerator of rlprof's hot path: a timer block, from finding its node to
 * closing it.
 *
 * One concept, one file (over 600 lines, mostly comments): the parts below (a block's __enter__
 * and __exit__, how ``with`` reaches them without allocating, hierarchical_timer's lookup of the
 * node, a call inside a block for other extensions (block_api, see _timer_core_api.h), and the
 * rows a worker's payload takes from the nodes) share the node's slot offsets, the
 * stack's, and the clock, and are only ever changed together, against timer_node.py, timers.py
 * and multiprocess/payload.py. The trainer's check of those rows shares their layout with them
 * (ROW_BYTES, and payload.py's _ROW_FORMAT).
 *
 * profiler/timing/timer_node.py holds the reference: TimerNode's Python __enter__ and __exit__.
 * This module makes the same two methods in C, for the same class, over the same slots: it reads
 * and writes the node's __slots__ (parent, _stack, total, count, errors, min, max, _start) at the
 * offsets Python gave them, so that a node is the same object whichever core times it, pickles
 * the same, and may be timed by one core and read or changed by Python code (PhasedBlock, the
 * merger, the worker's inline step timing) at any time.
 *
 * Results are those of the Python methods, exactly: while the clock is the system one and the
 * figures are floats (always, unless code stores other numbers in them), the arithmetic is done
 * on C doubles, which is what Python's float arithmetic is; any other type (a fake clock giving
 * ints or Fractions, a total someone set to an int) takes Python's own number protocol, as the
 * Python methods would.
 *
 * The clock: block_methods() and set_clock() are given the clock every timer reads
 * (timer_node._clock). While it is time.perf_counter and this is Linux, a block reads
 * clock_gettime(CLOCK_MONOTONIC) itself and converts it as CPython's perf_counter does, giving
 * the very same float; any other clock (a test's fake, another platform's perf_counter) is called.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_slots_and_clock.h"
#include "_remembered_reads.h"
#include "_timer_core_api.h"

#include <float.h>
#include <limits.h>
#include <string.h>
#include <stdint.h>

/* The interface version: profiler/timing/accelerator.py's TIMER_CORE_VERSION, which must equal it
 * for the module to be used. Raise both together whenever this file changes what Python sees (a
 * function added, removed or changed): a build left from older sources (an in-place .so that
 * outlived a `git pull`) then says it is stale, and the pure-Python core runs, instead of failing
 * at import on a missing function. A test builds this file with -DTIMER_CORE_VERSION=0. */
#ifndef TIMER_CORE_VERSION
#define TIMER_CORE_VERSION 5
#endif

/* What a block needs of its node, by slot: where each one lies in the instance. */
typedef struct {
    Py_ssize_t name;
    Py_ssize_t children;
    Py_ssize_t parent;
    Py_ssize_t stack;
    Py_ssize_t total;
    Py_ssize_t count;
    Py_ssize_t errors;
    Py_ssize_t min;
    Py_ssize_t max;
    Py_ssize_t start;
    Py_ssize_t bound;
} NodeSlots;

static NodeSlots slots;
static PyObject *node_type = NULL;       /* the class whose methods were made (TimerNode) */
static PyObject *stack_type = NULL;      /* TimerStack, whose open block is written directly */
static Py_ssize_t stack_current = 0;     /* where TimerStack's slot "current" lies */
static Py_ssize_t stack_timeline = 0;    /* where TimerStack's slot "timeline" lies */
static PyObject *timer_clock = NULL;     /* the clock every timer reads */
static PyObject *perf_counter = NULL;    /* time.perf_counter, to recognise the system clock */
static int clock_is_system = 0;          /* clock is perf_counter and read here directly */
static PyObject *current_name = NULL;    /* interned "current": the stack's open block */
static PyObject *one = NULL;             /* the int 1, added to count and errors */
static PyObject *stack_name = NULL;      /* interned "stack": a thread's stack on its local */
static PyObject *children_name = NULL;   /* interned "children" */
static PyObject *disabled_block_name = NULL; /* interned "_DISABLED_BLOCK": in timers.py */
static PyObject *timeline_name = NULL;   /* interned "timeline": a stack's timeline buffers */
static PyObject *spans_name = NULL;      /* interned "spans": a timeline's spans */
static PyObject *spans_recorded_name = NULL; /* interned "spans_recorded": how many it recorded */
static PyObject *append_name = NULL;     /* interned "append" */
static PyObject *timeline_type = NULL;   /* ThreadTimeline, whose spans are appended directly */
static Py_ssize_t timeline_spans = 0;    /* where ThreadTimeline's slot "spans" lies */
static Py_ssize_t timeline_recorded = 0; /* where ThreadTimeline's slot "spans_recorded" lies */
static PyObject *deque_type = NULL;      /* collections.deque: a ThreadTimeline's spans */
static PyObject *deque_append = NULL;    /* deque.append, called without looking it up */
static int compiled_lookup = 1;          /* hierarchical_timer's common case found here */

/* One reading of the clock, as a new reference; *seconds holds it as a double when the reading
 * is a float (always, from the system clock), and *is_float says so. */
static PyObject *
read_clock(double *seconds, int *is_float)
{
#ifdef HAVE_MONOTONIC_CLOCK
    if (clock_is_system) {
        if (read_system_clock(seconds) < 0) {
            return NULL;
        }
        *is_float = 1;
        return PyFloat_FromDouble(*seconds);
    }
#endif
    PyObject *reading = PyObject_CallNoArgs(timer_clock);
    if (reading == NULL) {
        return NULL;
    }
    *is_float = PyFloat_CheckExact(reading);
    if (*is_float) {
        *seconds = PyFloat_AS_DOUBLE(reading);
    }
    return reading;
}

/* self._stack.current = value: straight into the slot on a TimerStack (the stack of every
 * block but a test's stand-in), through setattr on anything else. */
static int
move_open_block(PyObject *self, PyObject *value)
{
    PyObject *stack = get_slot(self, slots.stack, "_stack");
    if (stack == NULL) {
        return -1;
    }
    if ((PyObject *)Py_TYPE(stack) == stack_type) {
        Py_INCREF(value);
        set_slot(stack, stack_current, value);
        return 0;
    }
    return PyObject_SetAttr(stack, current_name, value);
}

/* Make this block the stack's open block, then start its clock: 0, or -1 with an error. */
static int
start_run(PyObject *self)
{
    if (move_open_block(self, self) < 0) {
        return -1;
    }
    double seconds;
    int is_float;
    PyObject *start = read_clock(&seconds, &is_float);
    if (start == NULL) {
        return -1;
    }
    set_slot(self, slots.start, start);
    return 0;
}

/* TimerNode.__enter__. */
static PyObject *
node_enter(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    if (start_run(self) < 0) {
        return NULL;
    }
    Py_INCREF(self);
    return self;
}

/* slot += addend (a new value is stored: Python's numbers are immutable). */
static int
add_to_slot(PyObject *self, Py_ssize_t offset, const char *name, PyObject *addend)
{
    PyObject *value = get_slot(self, offset, name);
    if (value == NULL) {
        return -1;
    }
    Py_INCREF(value);  /* a number type written in Python may rebind the slot while adding */
    PyObject *sum = PyNumber_InPlaceAdd(value, addend);
    Py_DECREF(value);
    if (sum == NULL) {
        return -1;
    }
    set_slot(self, offset, sum);
    return 0;
}

/* Keep the longest (or, with Py_LT, the shortest) run: if elapsed <op> slot: slot = elapsed. */
static int
keep_extreme(PyObject *self, Py_ssize_t offset, const char *name, int op, PyObject *elapsed,
             double elapsed_seconds, int elapsed_is_float)
{
    PyObject *extreme = get_slot(self, offset, name);
    if (extreme == NULL) {
        return -1;
    }
    int beyond;
    if (elapsed_is_float && PyFloat_CheckExact(extreme)) {
        double held = PyFloat_AS_DOUBLE(extreme);
        beyond = op == Py_GT ? elapsed_seconds > held : elapsed_seconds < held;
    }
    else {
        Py_INCREF(extreme);  /* as in add_to_slot: held while Python code may run */
        beyond = PyObject_RichCompareBool(elapsed, extreme, op);
        Py_DECREF(extreme);
        if (beyond < 0) {
            return -1;
        }
    }
    if (beyond) {
        Py_INCREF(elapsed);
        set_slot(self, offset, elapsed);
    }
    return 0;
}

/* The run's span (name, start, end) appended to the timeline of the node's stack, if it has
 * one, and the timeline's spans_recorded counted: TimerNode._exit_and_record's last lines. */
static int
record_span(PyObject *self, PyObject *start, PyObject *end)
{
    PyObject *stack = get_slot(self, slots.stack, "_stack");
    if (stack == NULL) {
        return -1;
    }
    PyObject *timeline;
    if ((PyObject *)Py_TYPE(stack) == stack_type) {
        timeline = get_slot(stack, stack_timeline, "timeline");
        Py_XINCREF(timeline);
    }
    else {
        timeline = PyObject_GetAttr(stack, timeline_name);
    }
    if (timeline == NULL) {
        return -1;
    }
    if (timeline == Py_None) {
        Py_DECREF(timeline);
        return 0;
    }
    int result = -1;
    PyObject *spans = NULL, *span = NULL, *appended = NULL, *recorded = NULL, *counted = NULL;
    PyObject *name = get_slot(self, slots.name, "name");
    if (name == NULL || (span = PyTuple_Pack(3, name, start, end)) == NULL) {
        goto done;
    }
    if (PyUnicode_CheckExact(name) && PyFloat_CheckExact(start) && PyFloat_CheckExact(end)) {
        /* What the garbage collector's first pass over the span would do (a tuple of atomic
         * values holds no reference cycle): done now, so that the spans a timeline holds (up
         * to its capacity, a second's worth in a worker) add nothing to its passes. */
        PyObject_GC_UnTrack(span);
    }
    if ((PyObject *)Py_TYPE(timeline) == timeline_type) {
        /* A ThreadTimeline (every timeline but a test's stand-in): its slots read and written
         * in place, and its deque's append called as the method it is, with no attribute looked
         * up or set by name (those were about two thirds of what recording a span cost). */
        if ((spans = get_slot(timeline, timeline_spans, "spans")) == NULL) {
            goto done;
        }
        Py_INCREF(spans);
        PyObject *call[2] = {spans, span};
        appended = (PyObject *)Py_TYPE(spans) == deque_type
            ? PyObject_Vectorcall(deque_append, call, 2, NULL)
            : PyObject_VectorcallMethod(append_name, call, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (appended == NULL || (recorded = get_slot(timeline, timeline_recorded, "spans_recorded")) == NULL) {
            goto done;
        }
        Py_INCREF(recorded);
        if ((counted = PyNumber_Add(recorded, one)) == NULL) {
            goto done;
        }
        set_slot(timeline, timeline_recorded, counted);
        counted = NULL;  /* the slot holds it now */
        result = 0;
        goto done;
    }
    if ((spans = PyObject_GetAttr(timeline, spans_name)) == NULL) {
        goto done;
    }
    PyObject *call[2] = {spans, span};
    appended = PyObject_VectorcallMethod(append_name, call, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (appended == NULL || (recorded = PyObject_GetAttr(timeline, spans_recorded_name)) == NULL
        || (counted = PyNumber_InPlaceAdd(recorded, one)) == NULL
        || PyObject_SetAttr(timeline, spans_recorded_name, counted) < 0) {
        goto done;
    }
    result = 0;
done:
    Py_DECREF(timeline);
    Py_XDECREF(spans);
    Py_XDECREF(span);
    Py_XDECREF(appended);
    Py_XDECREF(recorded);
    Py_XDECREF(counted);
    return result;
}

/* Stop the clock, give the open block back to the parent, count the run (an error too when
 * ``exc_type`` is not None); with ``record``, its span recorded on the timeline as well. The
 * clock's reading that ended the run (a new reference), or NULL. */
static PyObject *
count_run(PyObject *self, PyObject *exc_type, int record)
{
    double end_seconds;
    int end_is_float;
    PyObject *end = read_clock(&end_seconds, &end_is_float);
    if (end == NULL) {
        return NULL;
    }
    PyObject *elapsed = NULL;
    double elapsed_seconds = 0.0;
    int elapsed_is_float = 0;
    PyObject *start = get_slot(self, slots.start, "_start");
    if (start == NULL) {
        goto failed;
    }
    Py_INCREF(start);  /* as in add_to_slot: held while Python code may run; and the span's start */
    if (end_is_float && PyFloat_CheckExact(start)) {
        elapsed_seconds = end_seconds - PyFloat_AS_DOUBLE(start);
        elapsed_is_float = 1;
        elapsed = PyFloat_FromDouble(elapsed_seconds);
    }
    else {
        elapsed = PyNumber_Subtract(end, start);
    }
    if (elapsed == NULL) {
        goto failed;
    }
    PyObject *parent = get_slot(self, slots.parent, "parent");
    if (parent == NULL || move_open_block(self, parent) < 0) {
        goto failed;
    }
    PyObject *total = get_slot(self, slots.total, "total");
    if (total == NULL) {
        goto failed;
    }
    if (elapsed_is_float && PyFloat_CheckExact(total)) {
        PyObject *sum = PyFloat_FromDouble(PyFloat_AS_DOUBLE(total) + elapsed_seconds);
        if (sum == NULL) {
            goto failed;
        }
        set_slot(self, slots.total, sum);
    }
    else if (add_to_slot(self, slots.total, "total", elapsed) < 0) {
        goto failed;
    }
    if (add_to_slot(self, slots.count, "count", one) < 0
        || keep_extreme(self, slots.max, "max", Py_GT, elapsed, elapsed_seconds, elapsed_is_float) < 0
        || keep_extreme(self, slots.min, "min", Py_LT, elapsed, elapsed_seconds, elapsed_is_float) < 0) {
        goto failed;
    }
    if (exc_type != Py_None && add_to_slot(self, slots.errors, "errors", one) < 0) {
        goto failed;
    }
    if (record && record_span(self, start, end) < 0) {
        goto failed;
    }
    Py_DECREF(start);
    Py_DECREF(elapsed);
    return end;

failed:
    Py_XDECREF(start);
    Py_XDECREF(end);
    Py_XDECREF(elapsed);
    return NULL;
}

/* TimerNode.__exit__; with ``record``, TimerNode._exit_and_record. */
static PyObject *
node_exit(PyObject *self, PyObject *const *args, Py_ssize_t nargs, int record)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "__exit__() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *end = count_run(self, args[0], record);
    if (end == NULL) {
        return NULL;
    }
    Py_DECREF(end);
    Py_RETURN_NONE;
}

/* How ``with node:`` reaches the methods, allocating nothing.
 *
 * The with statement looks __enter__ and __exit__ up on the node's class and binds each to the
 * node: for a function or a C method, a new bound-method object per lookup, two allocations per
 * block that cost more than everything the methods do. TimerNode's __enter__ and __exit__ are
 * instead BlockMethod descriptors, which bind a node once: its two BoundBlockMethods are kept in
 * the node's slot ``_bound_methods`` and handed out again at every lookup. Both kinds of object
 * are called as the methods are: ``TimerNode.__exit__(node, None, None, None)`` (as the
 * companions' wrappers call them) and ``node.__exit__(None, None, None)`` (as ``with`` does).
 * The exit that records the block's span on the timeline (TimerNode._exit_and_record, while
 * timeline recording is on) is a third kind, bound and kept the same way. */
typedef struct {
    PyObject_HEAD
    int kind;  /* ENTER, EXIT or RECORDING_EXIT */
    vectorcallfunc vectorcall;
} BlockMethod;

/* Which method: a node keeps one bound method of each kind, at this index of its tuple. */
enum { ENTER = 0, EXIT = 1, RECORDING_EXIT = 2, BLOCK_METHOD_KINDS = 3 };

static const char *
method_name(int kind)
{
    return kind == ENTER ? "__enter__" : kind == EXIT ? "__exit__" : "_exit_and_record";
}

typedef struct {
    PyObject_HEAD
    PyObject *node;
    int kind;
    vectorcallfunc vectorcall;
} BoundBlockMethod;

static PyTypeObject BlockMethodType;
static PyTypeObject BoundBlockMethodType;

static PyObject *
call_block_method(int kind, PyObject *node, PyObject *const *args, Py_ssize_t nargs)
{
    if (kind != ENTER) {
        return node_exit(node, args, nargs, kind == RECORDING_EXIT);
    }
    if (nargs != 0) {
        PyErr_Format(PyExc_TypeError, "__enter__() takes no arguments (%zd given)", nargs);
        return NULL;
    }
    return node_enter(node, NULL);
}

static PyObject *
bound_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    BoundBlockMethod *bound = (BoundBlockMethod *)callable;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0) {
        PyErr_SetString(PyExc_TypeError, "a block's __enter__ and __exit__ take no keyword arguments");
        return NULL;
    }
    return call_block_method(bound->kind, bound->node, args, PyVectorcall_NARGS(nargsf));
}

/* TimerNode.__enter__(node) and TimerNode.__exit__(node, exc_type, exc_value, traceback). */
static PyObject *
unbound_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    BlockMethod *method = (BlockMethod *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0) {
        PyErr_SetString(PyExc_TypeError, "a block's __enter__ and __exit__ take no keyword arguments");
        return NULL;
    }
    if (nargs < 1 || !PyObject_TypeCheck(args[0], (PyTypeObject *)node_type)) {
        PyErr_Format(PyExc_TypeError, "%s() needs a %.100s as its first argument",
                     method_name(method->kind), ((PyTypeObject *)node_type)->tp_name);
        return NULL;
    }
    return call_block_method(method->kind, args[0], args + 1, nargs - 1);
}

static PyObject *
new_bound(PyObject *node, int kind)
{
    BoundBlockMethod *bound = PyObject_GC_New(BoundBlockMethod, &BoundBlockMethodType);
    if (bound == NULL) {
        return NULL;
    }
    Py_INCREF(node);
    bound->node = node;
    bound->kind = kind;
    bound->vectorcall = bound_vectorcall;
    PyObject_GC_Track(bound);
    return (PyObject *)bound;
}

/* node.__enter__ / node.__exit__: the node's own bound methods, made at its first lookup. */
static PyObject *
block_method_get(PyObject *descriptor, PyObject *node, PyObject *type)
{
    if (node == NULL || node == Py_None) {
        Py_INCREF(descriptor);
        return descriptor;
    }
    int kind = ((BlockMethod *)descriptor)->kind;
    PyObject *kept = SLOT(node, slots.bound);
    if (kept == NULL || !PyTuple_CheckExact(kept) || PyTuple_GET_SIZE(kept) != BLOCK_METHOD_KINDS) {
        kept = PyTuple_New(BLOCK_METHOD_KINDS);
        if (kept == NULL) {
            return NULL;
        }
        for (int kind = 0; kind < BLOCK_METHOD_KINDS; kind++) {
            PyObject *bound = new_bound(node, kind);
            if (bound == NULL) {
                Py_DECREF(kept);
                return NULL;
            }
            PyTuple_SET_ITEM(kept, kind, bound);
        }
        set_slot(node, slots.bound, kept);
    }
    PyObject *bound = PyTuple_GET_ITEM(kept, kind);
    Py_INCREF(bound);
    return bound;
}

static PyObject *
block_method_repr(BlockMethod *method)
{
    return PyUnicode_FromFormat("<C method %s of %.100s>", method_name(method->kind),
                                ((PyTypeObject *)node_type)->tp_name);
}

static PyObject *
bound_repr(BoundBlockMethod *bound)
{
    return PyUnicode_FromFormat("<C method %s of %R>", method_name(bound->kind), bound->node);
}

static int
bound_traverse(BoundBlockMethod *bound, visitproc visit, void *arg)
{
    Py_VISIT(bound->node);
    return 0;
}

static int
bound_clear(BoundBlockMethod *bound)
{
    Py_CLEAR(bound->node);
    return 0;
}

static void
bound_dealloc(BoundBlockMethod *bound)
{
    PyObject_GC_UnTrack(bound);
    bound_clear(bound);
    PyObject_GC_Del(bound);
}

static PyTypeObject BlockMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "profiler.timing._timer_core.BlockMethod",
    .tp_doc = PyDoc_STR("A TimerNode's __enter__ or __exit__, in C (see timer_node.py's reference)."),
    .tp_basicsize = sizeof(BlockMethod),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(BlockMethod, vectorcall),
    .tp_descr_get = block_method_get,
    .tp_repr = (reprfunc)block_method_repr,
};

static PyTypeObject BoundBlockMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "profiler.timing._timer_core.BoundBlockMethod",
    .tp_doc = PyDoc_STR("A node's own __enter__ or __exit__, bound once (see BlockMethod)."),
    .tp_basicsize = sizeof(BoundBlockMethod),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(BoundBlockMethod, vectorcall),
    .tp_traverse = (traverseproc)bound_traverse,
    .tp_clear = (inquiry)bound_clear,
    .tp_dealloc = (destructor)bound_dealloc,
    .tp_repr = (reprfunc)bound_repr,
};

static PyObject *
new_block_method(int kind)
{
    BlockMethod *method = PyObject_New(BlockMethod, &BlockMethodType);
    if (method == NULL) {
        return NULL;
    }
    method->kind = kind;
    method->vectorcall = unbound_vectorcall;
    return (PyObject *)method;
}

static int
use_clock(PyObject *new_clock)
{
    if (!PyCallable_Check(new_clock)) {
        PyErr_SetString(PyExc_TypeError, "the clock must be callable");
        return -1;
    }
    Py_INCREF(new_clock);
    Py_XSETREF(timer_clock, new_clock);
#ifdef HAVE_MONOTONIC_CLOCK
    clock_is_system = new_clock == perf_counter;
#endif
    return 0;
}

static PyObject *
block_methods(PyObject *module, PyObject *args)
{
    PyObject *type;
    PyObject *new_clock;
    if (!PyArg_ParseTuple(args, "O!O:block_methods", &PyType_Type, &type, &new_clock)) {
        return NULL;
    }
    if (node_type != NULL && node_type != type) {
        PyErr_SetString(PyExc_RuntimeError, "block_methods() serves one node class per process");
        return NULL;
    }
    PyTypeObject *node = (PyTypeObject *)type;
    NodeSlots found;
    if ((found.name = slot_offset(node, "name")) < 0
        || (found.children = slot_offset(node, "children")) < 0
        || (found.parent = slot_offset(node, "parent")) < 0
        || (found.stack = slot_offset(node, "_stack")) < 0
        || (found.total = slot_offset(node, "total")) < 0
        || (found.count = slot_offset(node, "count")) < 0
        || (found.errors = slot_offset(node, "errors")) < 0
        || (found.min = slot_offset(node, "min")) < 0
        || (found.max = slot_offset(node, "max")) < 0
        || (found.start = slot_offset(node, "_start")) < 0
        || (found.bound = slot_offset(node, "_bound_methods")) < 0) {
        return NULL;
    }
    if (use_clock(new_clock) < 0) {
        return NULL;
    }
    slots = found;
    Py_INCREF(type);
    Py_XSETREF(node_type, type);
    PyObject *enter = new_block_method(ENTER);
    PyObject *exit = new_block_method(EXIT);
    PyObject *methods = NULL;
    if (enter != NULL && exit != NULL) {
        methods = PyTuple_Pack(2, enter, exit);
    }
    Py_XDECREF(enter);
    Py_XDECREF(exit);
    return methods;
}

/* Where the slots ``first`` and ``second`` of the class ``type`` lie (use_stack_type's and
 * use_timeline_type's check): -1 with an error if ``type`` is not a class or lacks either. */
static int
two_slot_offsets(PyObject *type, const char *caller, const char *first, const char *second,
                 Py_ssize_t *first_offset, Py_ssize_t *second_offset)
{
    if (!PyType_Check(type)) {
        PyErr_Format(PyExc_TypeError, "%s() takes a class", caller);
        return -1;
    }
    *first_offset = slot_offset((PyTypeObject *)type, first);
    *second_offset = *first_offset < 0 ? -1 : slot_offset((PyTypeObject *)type, second);
    return *second_offset < 0 ? -1 : 0;
}

static PyObject *
use_stack_type(PyObject *module, PyObject *type)
{
    Py_ssize_t current_offset, timeline_offset;
    if (two_slot_offsets(type, "use_stack_type", "current", "timeline", &current_offset, &timeline_offset) < 0) {
        return NULL;
    }
    stack_current = current_offset;
    stack_timeline = timeline_offset;
    Py_INCREF(type);
    Py_XSETREF(stack_type, type);
    Py_RETURN_NONE;
}

/* use_timeline_type(ThreadTimeline): a recorded span is appended to such a timeline through its
 * slots (record_span); any other timeline, through its attributes. */
static PyObject *
use_timeline_type(PyObject *module, PyObject *type)
{
    Py_ssize_t spans_offset, recorded_offset;
    if (two_slot_offsets(type, "use_timeline_type", "spans", "spans_recorded", &spans_offset, &recorded_offset) < 0) {
        return NULL;
    }
    if (deque_append == NULL) {
        PyObject *collections = PyImport_ImportModule("collections");
        PyObject *deque = collections == NULL ? NULL : PyObject_GetAttrString(collections, "deque");
        PyObject *append = deque == NULL ? NULL : PyObject_GetAttr(deque, append_name);
        Py_XDECREF(collections);
        if (append == NULL) {
            Py_XDECREF(deque);
            return NULL;
        }
        deque_type = deque;
        deque_append = append;
    }
    timeline_spans = spans_offset;
    timeline_recorded = recorded_offset;
    Py_INCREF(type);
    Py_XSETREF(timeline_type, type);
    Py_RETURN_NONE;
}

/* TimerNode._exit_and_record in C, for the class block_methods() was given. */
static PyObject *
recording_exit(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    if (node_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no node class yet: block_methods() sets it");
        return NULL;
    }
    return new_block_method(RECORDING_EXIT);
}

static PyObject *
set_clock(PyObject *module, PyObject *new_clock)
{
    if (use_clock(new_clock) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
now(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    if (timer_clock == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no clock yet: block_methods() sets it");
        return NULL;
    }
    double seconds;
    int is_float;
    return read_clock(&seconds, &is_float);
}

static PyObject *
reads_system_clock(PyObject *module, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(clock_is_system);
}

/* hierarchical_timer, its common case in C.
 *
 * timers.hierarchical_timer (Python) is the reference: with timing on, no stack, device or other
 * argument given, and the block run before under the calling thread's open block, it returns
 * _thread_local.stack.current.children[name], and with timing off its stand-in _DISABLED_BLOCK;
 * anything else takes its slow path. A BlockLookup
 * wraps that function: it finds the common case itself, reading timers.py's globals
 * (``_enabled``, ``_thread_local``) at each call as the function does, and calls the function for
 * everything else, so that both give the same node, or the same error, for any call. */
typedef struct {
    PyObject_HEAD
    PyObject *function;     /* the Python hierarchical_timer */
    PyObject *globals;      /* its module's globals */
    PyObject *dict;         /* __doc__, __wrapped__, __name__...: set by functools.update_wrapper */
    vectorcallfunc vectorcall;
} BlockLookup;

/* An attribute Python's fast path reads, or NULL: with no error for AttributeError (which the
 * fast path catches: the slow path runs), with the error for anything else. */
static PyObject *
caught_attribute(PyObject *object, PyObject *name)
{
    PyObject *value = PyObject_GetAttr(object, name);
    if (value == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
    }
    return value;
}

/* What hierarchical_timer's Python function reads as the globals ``_enabled`` and
 * ``_thread_local``, handed over by timers.py (use_timing_state) each time it sets them: read here
 * without looking either up in the module's dict, which was half of a warm block's dict lookups.
 * Until timers.py hands them over, the Python function takes every call. */
static int timing_enabled = 0;
static PyObject *timing_local = NULL;

/* The calling thread's stack as thread_stack() last found it (see _remembered_reads.h). */
static _Thread_local ThreadFound found_stack;

/* _thread_local.stack (a new reference, or NULL as caught_attribute gives it), remembered in
 * the calling thread's state dict under the ``_thread_local`` object itself, and in found_stack
 * for the thread's next call: a thread's stack on a given local is set once
 * (timers.current_thread_stack) and never replaced, and a forked child gets a new local, hence a
 * new key. */
static PyObject *
thread_stack(PyObject *local)
{
    PyObject *stack = thread_dict_item(&found_stack, local);
    if (stack != NULL) {
        return Py_NewRef(stack);
    }
    if (PyErr_Occurred() || (stack = caught_attribute(local, stack_name)) == NULL) {
        return NULL;
    }
    if (keep_thread_dict_item(&found_stack, local, stack) < 0) {
        Py_CLEAR(stack);
    }
    return stack;
}

/* _thread_local.stack.current.children[name] (or, timing off, _DISABLED_BLOCK) as a new
 * reference, or NULL: with no error where Python's fast path would fall through to the slow
 * path, with the error it would raise. */
static PyObject *
find_open_child(BlockLookup *self, PyObject *name)
{
    if (timing_local == NULL) {
        return NULL;  /* timers.py has not handed its state over: the Python function decides */
    }
    if (!timing_enabled) {
        /* Timing off: the function gives its stand-in block, whatever the name. */
        PyObject *disabled = PyDict_GetItemWithError(self->globals, disabled_block_name);
        Py_XINCREF(disabled);
        return disabled;
    }
    PyObject *stack = thread_stack(timing_local);
    if (stack == NULL) {
        return NULL;
    }
    PyObject *current;
    if ((PyObject *)Py_TYPE(stack) == stack_type && SLOT(stack, stack_current) != NULL) {
        current = SLOT(stack, stack_current);
        Py_INCREF(current);
    }
    else {
        current = caught_attribute(stack, current_name);
    }
    Py_DECREF(stack);
    if (current == NULL) {
        return NULL;
    }
    PyObject *children = NULL;
    if ((PyObject *)Py_TYPE(current) == node_type && SLOT(current, slots.children) != NULL) {
        children = SLOT(current, slots.children);
        Py_INCREF(children);
    }
    else {
        children = caught_attribute(current, children_name);
    }
    Py_DECREF(current);
    if (children == NULL) {
        return NULL;
    }
    PyObject *node;
    if (PyDict_CheckExact(children)) {
        node = PyDict_GetItemWithError(children, name);
        Py_XINCREF(node);
    }
    else {
        node = PyObject_GetItem(children, name);
    }
    Py_DECREF(children);
    /* What the Python fast path catches (KeyError, AttributeError) sends the call to the slow path. */
    if (node == NULL && (PyErr_ExceptionMatches(PyExc_KeyError) || PyErr_ExceptionMatches(PyExc_AttributeError))) {
        PyErr_Clear();
    }
    return node;
}

static PyObject *
lookup_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    BlockLookup *self = (BlockLookup *)callable;
    if (compiled_lookup && PyVectorcall_NARGS(nargsf) == 1 && kwnames == NULL) {
        PyObject *node = find_open_child(self, args[0]);
        if (node != NULL || PyErr_Occurred()) {
            return node;
        }
    }
    return PyObject_Vectorcall(self->function, args, nargsf, kwnames);
}

static PyObject *
lookup_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *function;
    if (!PyArg_ParseTuple(args, "O:BlockLookup", &function)) {
        return NULL;
    }
    if (!PyFunction_Check(function)) {
        PyErr_SetString(PyExc_TypeError, "BlockLookup wraps a Python function");
        return NULL;
    }
    BlockLookup *self = (BlockLookup *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    Py_INCREF(function);
    self->function = function;
    self->globals = PyFunction_GetGlobals(function);
    Py_INCREF(self->globals);
    self->vectorcall = lookup_vectorcall;
    return (PyObject *)self;
}

static int
lookup_traverse(BlockLookup *self, visitproc visit, void *arg)
{
    Py_VISIT(self->function);
    Py_VISIT(self->globals);
    Py_VISIT(self->dict);
    return 0;
}

static int
lookup_clear(BlockLookup *self)
{
    Py_CLEAR(self->function);
    Py_CLEAR(self->globals);
    Py_CLEAR(self->dict);
    return 0;
}

static void
lookup_dealloc(BlockLookup *self)
{
    PyObject_GC_UnTrack(self);
    lookup_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Pickled by name, as a module-level function is: ``__qualname__`` in ``__module__``. */
static PyObject *
lookup_reduce(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyObject_GetAttrString(self, "__qualname__");
}

static PyObject *
lookup_repr(BlockLookup *self)
{
    return PyUnicode_FromFormat("<compiled %R>", self->function);
}

static PyMethodDef lookup_methods[] = {
    {"__reduce__", lookup_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef lookup_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(BlockLookup, dict), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(BlockLookup, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef lookup_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BlockLookupType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "profiler.timing._timer_core.BlockLookup",
    .tp_doc = PyDoc_STR("BlockLookup(hierarchical_timer): the function, its common case in C."),
    .tp_basicsize = sizeof(BlockLookup),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = lookup_new,
    .tp_traverse = (traverseproc)lookup_traverse,
    .tp_clear = (inquiry)lookup_clear,
    .tp_dealloc = (destructor)lookup_dealloc,
    .tp_repr = (reprfunc)lookup_repr,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(BlockLookup, vectorcall),
    .tp_dictoffset = offsetof(BlockLookup, dict),
    .tp_methods = lookup_methods,
    .tp_members = lookup_members,
    .tp_getset = lookup_getset,
};

/* --- A call inside a block, for other extensions (see _timer_core_api.h) ----------------------- */

static PyObject *enter_name = NULL;      /* interned "__enter__" */
static PyObject *exit_name = NULL;       /* interned "__exit__" */

/* with block: return target(*args) -- as the with statement runs it: __exit__ looked up before
 * __enter__ is called, given the exception (its type, value and traceback) when the call raised,
 * and a true answer from it swallows the exception (the call then returns None). */
static PyObject *
call_in_block(PyObject *block, PyObject *target, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *exit = PyObject_GetAttr(block, exit_name);
    if (exit == NULL) {
        return NULL;
    }
    PyObject *entered = PyObject_CallMethodNoArgs(block, enter_name);
    if (entered == NULL) {
        Py_DECREF(exit);
        return NULL;
    }
    Py_DECREF(entered);
    PyObject *result = PyObject_Vectorcall(target, args, nargsf, kwnames);
    if (result != NULL) {
        PyObject *exited = PyObject_CallFunctionObjArgs(exit, Py_None, Py_None, Py_None, NULL);
        Py_DECREF(exit);
        if (exited == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        Py_DECREF(exited);
        return result;
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (traceback != NULL && value != NULL) {
        PyException_SetTraceback(value, traceback);
    }
    PyObject *exited = PyObject_CallFunctionObjArgs(exit, type, value != NULL ? value : Py_None,
                                                    traceback != NULL ? traceback : Py_None, NULL);
    Py_DECREF(exit);
    if (exited == NULL) {
        _PyErr_ChainExceptions(type, value, traceback);
        return NULL;
    }
    int swallow = PyObject_IsTrue(exited);
    Py_DECREF(exited);
    if (swallow < 0) {
        _PyErr_ChainExceptions(type, value, traceback);
        return NULL;
    }
    if (swallow) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
        Py_RETURN_NONE;
    }
    PyErr_Restore(type, value, traceback);
    return NULL;
}

/* Whether ``with block`` would run this module's own __enter__ and __exit__ (the with statement
 * looks them up on the block's class): then *record says whether the exit records the span. */
static int
runs_compiled_methods(PyObject *block, int *record)
{
    if (node_type == NULL || !PyObject_TypeCheck(block, (PyTypeObject *)node_type)) {
        return 0;
    }
    PyObject *enter = _PyType_Lookup(Py_TYPE(block), enter_name);
    PyObject *exit = _PyType_Lookup(Py_TYPE(block), exit_name);
    if (enter == NULL || exit == NULL || !Py_IS_TYPE(enter, &BlockMethodType) || !Py_IS_TYPE(exit, &BlockMethodType)
        || ((BlockMethod *)enter)->kind != ENTER || ((BlockMethod *)exit)->kind == ENTER) {
        return 0;
    }
    *record = ((BlockMethod *)exit)->kind == RECORDING_EXIT;
    return 1;
}

/* call_in_block for a node whose class has this module's methods: what they do, called here. Their
 * exit returns None, so an exception always goes on. */
static PyObject *
call_in_node(PyObject *node, int record, PyObject *target, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    if (start_run(node) < 0) {
        return NULL;
    }
    PyObject *result = PyObject_Vectorcall(target, args, nargsf, kwnames);
    if (result != NULL) {
        PyObject *end = count_run(node, Py_None, record);
        if (end == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        Py_DECREF(end);
        return result;
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *end = count_run(node, type != NULL ? type : Py_None, record);
    if (end == NULL) {
        _PyErr_ChainExceptions(type, value, traceback);
        return NULL;
    }
    Py_DECREF(end);
    PyErr_Restore(type, value, traceback);
    return NULL;
}

static PyObject *
call_in_named_block(PyObject *lookup, PyObject *name, PyObject *target, PyObject *const *args, size_t nargsf,
                    PyObject *kwnames)
{
    PyObject *block = Py_IS_TYPE(lookup, &BlockLookupType) ? lookup_vectorcall(lookup, &name, 1, NULL)
                                                           : PyObject_CallOneArg(lookup, name);
    if (block == NULL) {
        return NULL;
    }
    int record;
    PyObject *result = runs_compiled_methods(block, &record)
        ? call_in_node(block, record, target, args, nargsf, kwnames)
        : call_in_block(block, target, args, nargsf, kwnames);
    Py_DECREF(block);
    return result;
}

static TimerCoreAPI block_api = {call_in_named_block};

/* Drop what thread_stack() remembered in the calling thread for ``local``: the forking thread
 * of a child process, whose timers start over on a new local (timers._forget_parent_timers). */
static PyObject *
forget_thread_stack(PyObject *module, PyObject *local)
{
    if (forget_thread_dict_item(&found_stack, local) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* use_timing_state(enabled, local): what the Python function reads as _enabled and _thread_local. */
static PyObject *
use_timing_state(PyObject *module, PyObject *args)
{
    int enabled;
    PyObject *local;
    if (!PyArg_ParseTuple(args, "pO:use_timing_state", &enabled, &local)) {
        return NULL;
    }
    timing_enabled = enabled;
    Py_XSETREF(timing_local, Py_NewRef(local));
    Py_RETURN_NONE;
}

static PyObject *
use_compiled_lookup(PyObject *module, PyObject *flag)
{
    int on = PyObject_IsTrue(flag);
    if (on < 0) {
        return NULL;
    }
    compiled_lookup = on;
    Py_RETURN_NONE;
}

/* A worker's payload rows: profiler/multiprocess/payload.py's take_rows_in_python, in C.
 *
 * For each (id, node): a node with runs gives the row (id, count, total, min, max), its errors
 * (if any) as (id, errors), and is zeroed (total 0.0, count 0, min inf, max 0.0, errors 0); a node
 * with no run closed but some time (a run open across the flush) gives (id, 0, total, 0.0, 0.0)
 * and its total goes to 0.0. The rows are packed as the payload carries them (ROW_BYTES each,
 * little-endian uint32, int64, float64, float64, float64), straight from the slots: packing the
 * Python way, a list of 250 references then struct.pack(*rows), cost twice the loop itself. The
 * Python function is the reference; this one reads and zeroes the same slots in the same order
 * and packs each number as struct does ('I' and 'q' through __index__, 'd' through __float__);
 * a number struct could not pack (an id past 2**32, a count past 2**63) raises OverflowError. */
static PyObject *zero_float = NULL;
static PyObject *zero_int = NULL;
static PyObject *infinity = NULL;

#define ROW_BYTES 36 /* uint32 id, int64 count, float64 total, minimum, maximum */

/* ``value``'s low ``size`` bytes at ``into``, little-endian whatever the machine. */
static void
put_little_endian(unsigned char *into, uint64_t value, int size)
{
    for (int index = 0; index < size; index++) {
        into[index] = (unsigned char)(value >> (8 * index));
    }
}

static int
pack_whole(unsigned char *into, PyObject *number, int size)
{
    PyObject *index = PyNumber_Index(number);
    if (index == NULL) {
        return -1;
    }
    uint64_t bits;
    if (size == 4) {
        unsigned long long value = PyLong_AsUnsignedLongLong(index);
        if (value == (unsigned long long)-1 && PyErr_Occurred()) {
            Py_DECREF(index);
            return -1;
        }
        if (value > 0xFFFFFFFFull) {
            Py_DECREF(index);
            PyErr_SetString(PyExc_OverflowError, "a payload row's id must fit 32 bits");
            return -1;
        }
        bits = value;
    }
    else {
        long long value = PyLong_AsLongLong(index);
        if (value == -1 && PyErr_Occurred()) {
            Py_DECREF(index);
            return -1;
        }
        bits = (uint64_t)value;
    }
    Py_DECREF(index);
    put_little_endian(into, bits, size);
    return 0;
}

static int
pack_double(unsigned char *into, PyObject *number)
{
    double value = PyFloat_CheckExact(number) ? PyFloat_AS_DOUBLE(number) : PyFloat_AsDouble(number);
    if (value == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    put_little_endian(into, bits, 8);
    return 0;
}

static int
pack_row(unsigned char *into, PyObject *id, PyObject *count, PyObject *total, PyObject *minimum,
         PyObject *maximum)
{
    if (pack_whole(into, id, 4) < 0 || pack_whole(into + 4, count, 8) < 0 || pack_double(into + 12, total) < 0
        || pack_double(into + 20, minimum) < 0 || pack_double(into + 28, maximum) < 0) {
        return -1;
    }
    return 0;
}

static PyObject *
take_rows(PyObject *module, PyObject *args)
{
    PyObject *ids_argument, *nodes_argument;
    if (!PyArg_ParseTuple(args, "OO:take_rows", &ids_argument, &nodes_argument) || node_type == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError, "take_rows() before block_methods()");
        }
        return NULL;
    }
    PyObject *ids = PySequence_Fast(ids_argument, "take_rows() takes a sequence of ids");
    PyObject *nodes = ids == NULL ? NULL : PySequence_Fast(nodes_argument, "take_rows() takes a sequence of nodes");
    PyObject *error_counts = PyList_New(0);
    PyObject *blocks = NULL;
    if (nodes == NULL || error_counts == NULL) {
        goto failed;
    }
    Py_ssize_t most = Py_MIN(PySequence_Fast_GET_SIZE(ids), PySequence_Fast_GET_SIZE(nodes));
    /* At most a row a node; shrunk to the rows taken at the end. */
    blocks = PyBytes_FromStringAndSize(NULL, most * ROW_BYTES);
    if (blocks == NULL) {
        goto failed;
    }
    unsigned char *row = (unsigned char *)PyBytes_AS_STRING(blocks);
    Py_ssize_t taken = 0;
    /* Sizes read at each step, figures read where Python reads them: a number type written in
     * Python may run code in a truth test. */
    for (Py_ssize_t index = 0; index < most && index < PySequence_Fast_GET_SIZE(ids)
                               && index < PySequence_Fast_GET_SIZE(nodes); index++) {
        PyObject *id = PySequence_Fast_GET_ITEM(ids, index);
        PyObject *node = PySequence_Fast_GET_ITEM(nodes, index);
        if (!PyObject_TypeCheck(node, (PyTypeObject *)node_type)) {
            PyErr_SetString(PyExc_TypeError, "take_rows() takes TimerNodes");
            goto failed;
        }
        PyObject *count = get_slot(node, slots.count, "count");
        int has_runs = count == NULL ? -1 : PyObject_IsTrue(count);
        if (has_runs < 0) {
            goto failed;
        }
        PyObject *total;
        if (has_runs) {
            count = get_slot(node, slots.count, "count");
            total = get_slot(node, slots.total, "total");
            PyObject *minimum = get_slot(node, slots.min, "min");
            PyObject *maximum = get_slot(node, slots.max, "max");
            if (count == NULL || total == NULL || minimum == NULL || maximum == NULL
                || pack_row(row + taken * ROW_BYTES, id, count, total, minimum, maximum) < 0) {
                goto failed;
            }
            taken++;
            PyObject *errors = get_slot(node, slots.errors, "errors");
            int has_errors = errors == NULL ? -1 : PyObject_IsTrue(errors);
            if (has_errors < 0) {
                goto failed;
            }
            if (has_errors) {
                errors = get_slot(node, slots.errors, "errors");
                PyObject *pair = errors == NULL ? NULL : PyTuple_Pack(2, id, errors);
                if (pair == NULL || PyList_Append(error_counts, pair) < 0) {
                    Py_XDECREF(pair);
                    goto failed;
                }
                Py_DECREF(pair);
                Py_INCREF(zero_int);
                set_slot(node, slots.errors, zero_int);
            }
            Py_INCREF(zero_float);
            set_slot(node, slots.total, zero_float);
            Py_INCREF(zero_int);
            set_slot(node, slots.count, zero_int);
            Py_INCREF(infinity);
            set_slot(node, slots.min, infinity);
            Py_INCREF(zero_float);
            set_slot(node, slots.max, zero_float);
            continue;
        }
        total = get_slot(node, slots.total, "total");
        int has_time = total == NULL ? -1 : PyObject_IsTrue(total);
        if (has_time < 0) {
            goto failed;
        }
        if (has_time) {
            total = get_slot(node, slots.total, "total");
            if (total == NULL || pack_row(row + taken * ROW_BYTES, id, zero_int, total, zero_float, zero_float) < 0) {
                goto failed;
            }
            taken++;
            Py_INCREF(zero_float);
            set_slot(node, slots.total, zero_float);
        }
    }
    Py_DECREF(ids);
    Py_DECREF(nodes);
    if (_PyBytes_Resize(&blocks, taken * ROW_BYTES) < 0) {
        Py_DECREF(error_counts);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, blocks, error_counts);
    Py_DECREF(blocks);
    Py_DECREF(error_counts);
    return result;

failed:
    Py_XDECREF(ids);
    Py_XDECREF(nodes);
    Py_XDECREF(blocks);
    Py_XDECREF(error_counts);
    return NULL;
}

/* The trainer's check of a payload's rows: profiler/multiprocess/payload.py's row_ids, in C.
 *
 * One pass over the bytes, where the Python check takes four strided copies, unpacks the ids and
 * every minimum and maximum into Python numbers and compares them pairwise (most of a merge's
 * cost). It only ever accepts: given exactly bytes, a whole number of rows, every number's top
 * byte at most 0x42 (>= 0, below the bounds, finite), ids ascending and below ``declared``, and
 * each minimum at most its maximum, it returns the ids as a tuple (``ascending_ids`` itself when
 * they are those); for anything else it returns None, and the Python check, the reference, runs
 * and either accepts (a case this one leaves to it) or names what is wrong. */
static PyObject *
check_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "check_rows() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *blocks = args[0], *declared_argument = args[1], *ascending_ids = args[2];
    if (!PyBytes_CheckExact(blocks) || !PyLong_CheckExact(declared_argument)) {
        Py_RETURN_NONE;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(blocks);
    if (size % ROW_BYTES) {
        Py_RETURN_NONE;
    }
    Py_ssize_t rows = size / ROW_BYTES;
    int overflow;
    long long declared = PyLong_AsLongLongAndOverflow(declared_argument, &overflow);
    if (declared == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (overflow > 0) {
        declared = LLONG_MAX;
    }
    const unsigned char *row = (const unsigned char *)PyBytes_AS_STRING(blocks);
    long long previous = -1;
    for (Py_ssize_t index = 0; index < rows; index++, row += ROW_BYTES) {
        if (row[11] > 0x42 || row[19] > 0x42 || row[27] > 0x42 || row[35] > 0x42) {
            Py_RETURN_NONE;
        }
        long long id = (long long)row[0] | (long long)row[1] << 8 | (long long)row[2] << 16
                       | (long long)row[3] << 24;
        if (id <= previous || id >= declared) {
            Py_RETURN_NONE;
        }
        previous = id;
        /* Both >= 0 and finite (their top bytes): as doubles, as Python compares them. */
        uint64_t minimum_bits = 0, maximum_bits = 0;
        for (int byte = 7; byte >= 0; byte--) {
            minimum_bits = minimum_bits << 8 | row[20 + byte];
            maximum_bits = maximum_bits << 8 | row[28 + byte];
        }
        double minimum, maximum;
        memcpy(&minimum, &minimum_bits, sizeof minimum);
        memcpy(&maximum, &maximum_bits, sizeof maximum);
        if (!(minimum <= maximum)) {
            Py_RETURN_NONE;
        }
    }
    /* The ids of the stream's previous payload, as a worker's payloads mostly have: kept. */
    if (PyTuple_CheckExact(ascending_ids) && PyTuple_GET_SIZE(ascending_ids) == rows) {
        row = (const unsigned char *)PyBytes_AS_STRING(blocks);
        Py_ssize_t index = 0;
        for (; index < rows; index++, row += ROW_BYTES) {
            PyObject *known = PyTuple_GET_ITEM(ascending_ids, index);
            long id = (long)row[0] | (long)row[1] << 8 | (long)row[2] << 16 | (long)row[3] << 24;
            if (!PyLong_CheckExact(known) || PyLong_AsLong(known) != id) {
                PyErr_Clear();
                break;
            }
        }
        if (index == rows) {
            Py_INCREF(ascending_ids);
            return ascending_ids;
        }
    }
    PyObject *ids = PyTuple_New(rows);
    if (ids == NULL) {
        return NULL;
    }
    row = (const unsigned char *)PyBytes_AS_STRING(blocks);
    for (Py_ssize_t index = 0; index < rows; index++, row += ROW_BYTES) {
        unsigned long id = (unsigned long)row[0] | (unsigned long)row[1] << 8 | (unsigned long)row[2] << 16
                           | (unsigned long)row[3] << 24;
        PyObject *number = PyLong_FromUnsignedLong(id);
        if (number == NULL) {
            Py_DECREF(ids);
            return NULL;
        }
        PyTuple_SET_ITEM(ids, index, number);
    }
    return ids;
}

/* A phased block's held runs (see profiler/timing/phased_block.py's runs_table_in_python, the
 * reference) as the float64 table its fold adds up: every run a tuple of ``columns`` numbers, a
 * float taken as it is, None as NaN, any other number through its __float__, written row by row
 * into a bytearray numpy then views. The reference's numpy.fromiter over a chain of the tuples
 * was most of a fold (about 180 of some 340 ns per run on the 2-core machine). Returns None, and
 * the reference runs, for anything else (a run not a tuple, of another width, a value that is
 * not a number), so its errors have one source. */
static PyObject *
runs_table(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_CheckExact(args[0]) || !PyLong_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "runs_table(runs: list, columns: int)");
        return NULL;
    }
    PyObject *runs = args[0];
    Py_ssize_t columns = PyLong_AsSsize_t(args[1]);
    if (columns < 0) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    Py_ssize_t held = PyList_GET_SIZE(runs);
    if (columns > 0 && held > PY_SSIZE_T_MAX / columns / (Py_ssize_t)sizeof(double)) {
        return Py_NewRef(Py_None);
    }
    PyObject *table = PyByteArray_FromStringAndSize(NULL, held * columns * (Py_ssize_t)sizeof(double));
    if (table == NULL) {
        return NULL;
    }
    double *cell = (double *)PyByteArray_AS_STRING(table);
    /* Each run is read in full before the list is touched again: a number's __float__ cannot
     * change which runs are read, only the list's length, checked at every row. */
    for (Py_ssize_t row = 0; row < held && row < PyList_GET_SIZE(runs); row++) {
        PyObject *run = PyList_GET_ITEM(runs, row);
        if (!PyTuple_CheckExact(run) || PyTuple_GET_SIZE(run) != columns) {
            Py_DECREF(table);
            return Py_NewRef(Py_None);
        }
        Py_INCREF(run);
        for (Py_ssize_t column = 0; column < columns; column++) {
            PyObject *value = PyTuple_GET_ITEM(run, column);
            double number;
            if (PyFloat_CheckExact(value)) {
                number = PyFloat_AS_DOUBLE(value);
            }
            else if (value == Py_None) {
                number = Py_NAN;
            }
            else if ((number = PyFloat_AsDouble(value)) == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();  /* not a number: the reference says so, or takes it its way */
                Py_DECREF(run);
                Py_DECREF(table);
                return Py_NewRef(Py_None);
            }
            *cell++ = number;
        }
        Py_DECREF(run);
    }
    if (PyList_GET_SIZE(runs) != held) {  /* changed under us by a __float__: let Python do it */
        Py_DECREF(table);
        return Py_NewRef(Py_None);
    }
    return table;
}

/* plain_spans(spans, max_seconds) -> bool: payload.py's _plain_spans_in_python, the reference:
 * whether every span of a tuple or list is a tuple (name, start, end) of a non-empty str and two
 * floats with -max_seconds <= start <= end <= max_seconds (a NaN fails the comparisons). The
 * trainer's channel thread asks it of every shipment's spans: in Python, a loop of some twenty
 * steps a span. Anything but a tuple or list of spans: None, and the reference decides. */
static PyObject *
plain_spans(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyFloat_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "plain_spans() takes the spans and a float bound");
        return NULL;
    }
    PyObject *spans = args[0];
    if (!PyTuple_CheckExact(spans) && !PyList_CheckExact(spans)) {
        Py_RETURN_NONE;
    }
    double bound = PyFloat_AS_DOUBLE(args[1]);
    for (Py_ssize_t index = 0; index < PySequence_Fast_GET_SIZE(spans); index++) {
        PyObject *span = PySequence_Fast_GET_ITEM(spans, index);
        if (!PyTuple_CheckExact(span) || PyTuple_GET_SIZE(span) != 3) {
            Py_RETURN_FALSE;
        }
        PyObject *name = PyTuple_GET_ITEM(span, 0);
        PyObject *start = PyTuple_GET_ITEM(span, 1);
        PyObject *end = PyTuple_GET_ITEM(span, 2);
        if (!PyUnicode_CheckExact(name) || PyUnicode_GET_LENGTH(name) == 0
            || !PyFloat_CheckExact(start) || !PyFloat_CheckExact(end)) {
            Py_RETURN_FALSE;
        }
        double started = PyFloat_AS_DOUBLE(start), ended = PyFloat_AS_DOUBLE(end);
        if (!(-bound <= started && started <= ended && ended <= bound)) {
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

static PyMethodDef module_functions[] = {
    {"plain_spans", (PyCFunction)(void (*)(void))plain_spans, METH_FASTCALL,
     PyDoc_STR("plain_spans(spans, max_seconds) -> whether every span is a plain (name, start, end), "
               "or None: let the Python reference decide (see profiler/multiprocess/payload.py).")},
    {"runs_table", (PyCFunction)(void (*)(void))runs_table, METH_FASTCALL,
     PyDoc_STR("runs_table(runs, columns) -> bytearray of float64 rows, or None: let the Python "
               "reference decide (see profiler/timing/phased_block.py's runs_table_in_python).")},
    {"take_rows", take_rows, METH_VARARGS,
     PyDoc_STR("take_rows(ids, nodes) -> (blocks, error_counts): a payload's rows, packed, the nodes "
               "zeroed (see profiler/multiprocess/payload.py's take_rows_in_python).")},
    {"check_rows", (PyCFunction)(void (*)(void))check_rows, METH_FASTCALL,
     PyDoc_STR("check_rows(blocks, declared, ascending_ids) -> the rows' ids, or None: let the Python "
               "check decide (see profiler/multiprocess/payload.py's row_ids).")},
    {"forget_thread_stack", forget_thread_stack, METH_O,
     PyDoc_STR("Forget the calling thread's stack remembered for this threading.local.")},
    {"use_timing_state", use_timing_state, METH_VARARGS,
     PyDoc_STR("use_timing_state(enabled, local): timers.py's _enabled and _thread_local, as BlockLookup reads them.")},
    {"use_compiled_lookup", use_compiled_lookup, METH_O,
     PyDoc_STR("Whether BlockLookup finds hierarchical_timer's common case itself (True) or calls "
               "the Python function for every call (False).")},
    {"block_methods", block_methods, METH_VARARGS,
     PyDoc_STR("block_methods(node_type, clock) -> (__enter__, __exit__): the C methods of a "
               "block for node_type, reading clock.")},
    {"recording_exit", recording_exit, METH_NOARGS,
     PyDoc_STR("recording_exit() -> the C TimerNode._exit_and_record: __exit__, and the run's span "
               "(name, start, end) appended to the stack's timeline (see timer_node.py).")},
    {"use_timeline_type", use_timeline_type, METH_O,
     PyDoc_STR("use_timeline_type(ThreadTimeline): append recorded spans to such timelines through their slots.")},
    {"use_stack_type", use_stack_type, METH_O,
     PyDoc_STR("Write the open block of this stack class straight into its slot \"current\".")},
    {"set_clock", set_clock, METH_O, PyDoc_STR("Make every block read this clock.")},
    {"now", now, METH_NOARGS, PyDoc_STR("One reading of the clock, as a block takes it.")},
    {"reads_system_clock", reads_system_clock, METH_NOARGS,
     PyDoc_STR("Whether blocks read CLOCK_MONOTONIC themselves (the clock is time.perf_counter).")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT,
    "profiler.timing._timer_core",
    PyDoc_STR("The C accelerator of a timer block's __enter__ and __exit__ (see timer_node.py)."),
    -1,
    module_functions,
};

PyMODINIT_FUNC
PyInit__timer_core(void)
{
    PyObject *time_module = PyImport_ImportModule("time");
    if (time_module == NULL) {
        return NULL;
    }
    perf_counter = PyObject_GetAttrString(time_module, "perf_counter");
    Py_DECREF(time_module);
    current_name = PyUnicode_InternFromString("current");
    stack_name = PyUnicode_InternFromString("stack");
    children_name = PyUnicode_InternFromString("children");
    disabled_block_name = PyUnicode_InternFromString("_DISABLED_BLOCK");
    timeline_name = PyUnicode_InternFromString("timeline");
    spans_name = PyUnicode_InternFromString("spans");
    spans_recorded_name = PyUnicode_InternFromString("spans_recorded");
    append_name = PyUnicode_InternFromString("append");
    enter_name = PyUnicode_InternFromString("__enter__");
    exit_name = PyUnicode_InternFromString("__exit__");
    one = PyLong_FromLong(1);
    zero_int = PyLong_FromLong(0);
    zero_float = PyFloat_FromDouble(0.0);
    infinity = PyFloat_FromDouble(Py_HUGE_VAL);
    if (zero_int == NULL || zero_float == NULL || infinity == NULL) {
        return NULL;
    }
    if (perf_counter == NULL || current_name == NULL || stack_name == NULL || children_name == NULL
        || disabled_block_name == NULL || one == NULL
        || timeline_name == NULL || spans_name == NULL || spans_recorded_name == NULL || append_name == NULL
        || enter_name == NULL || exit_name == NULL
        || PyType_Ready(&BlockMethodType) < 0 || PyType_Ready(&BoundBlockMethodType) < 0
        || PyType_Ready(&BlockLookupType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_definition);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&BlockLookupType);
    if (PyModule_AddObject(module, "BlockLookup", (PyObject *)&BlockLookupType) < 0) {
        Py_DECREF(&BlockLookupType);
        Py_DECREF(module);
        return NULL;
    }
    PyObject *api = PyCapsule_New(&block_api, TIMER_CORE_API_CAPSULE, NULL);
    if (api == NULL || PyModule_AddObject(module, "block_api", api) < 0) {
        Py_XDECREF(api);
        Py_DECREF(module);
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "VERSION", TIMER_CORE_VERSION) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
