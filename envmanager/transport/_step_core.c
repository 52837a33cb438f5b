/* The optional C helper of the env step path: an env call timed as a timer block, the zero-edit
 * env step (EnvStep, with the worker's FinishStamps), and the trainer's bookkeeping of a profiled
 * vector step (StepRecord, in _step_record.h, and count_whole_steps: further down).
 *
 * One concept, one file (over 600 lines, mostly comments and error paths): what the step path
 * does once per env call or vector step, in C, over the same TimerNode, TimerStack and
 * PhasedBlock slots and the same clock; split, each part would repeat the slot tables.
 *
 * envmanager/transport/timed_calls.py holds the reference, ``PythonStepTimer``: ``open()`` makes
 * the block ``name`` the open block of a timer stack and starts its clock, ``close(node)`` stops
 * it and counts the run into the block's TimerNode as TimerNode.__exit__ counts it (total, count,
 * min, max; ``fail(node)`` an error too), and has a CpuSampler measure the next call after a slow
 * one. Every env step of every worker is timed so, and this is the same type in C, with the same
 * results. A worker's env step goes through ``step_env(env, action)``, which makes the call
 * itself: called from C, a Python function costs a fresh run of the interpreter loop (CPython
 * 3.11 inlines Python-to-Python calls), but less than the Python function around open() and
 * close() it replaces (its frame, its reads of globals and closure cells, two calls into C), as
 * counted in instructions by benchmarks/worker_step_instructions.py. open(), close() and fail()
 * stay for callers that make the call themselves. step_env holds
 * its runs as sums of doubles in the StepTimer struct and adds them to the node when it folds (the
 * timer is one of its stack's deferred recorders: TimerStack.settle folds it before any reader);
 * PythonStepTimer holds the run lengths and sums them in the same order, so both give the same floats.
 *
 * The node's, the stack's and the sampler's __slots__ are read and written at the offsets Python
 * gave them (``configure`` is handed TimerNode, TimerStack and CpuSampler once), as
 * profiler/timing/_timer_core.c does and through the same helpers (_slots_and_clock.h), so a
 * node is the same object whichever side counts it; any other type goes through getattr and
 * setattr. While the clock is time.perf_counter on Linux it is read here directly and converted
 * as CPython converts it (the very same float); any other clock (a test's fake) is called, and
 * figures that are not floats (a fake clock's ints or Fractions) take Python's number protocol,
 * as the Python methods would.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include "_slots_and_clock.h"  /* profiler/timing/: the slots and the clock, as _timer_core.c reads them */
#include "_remembered_reads.h"  /* profiler/timing/: module globals read once per change of their dict */

#if PY_VERSION_HEX < 0x030B0000
#define PyFloat_Unpack8 _PyFloat_Unpack8  /* public from Python 3.11 */
#endif

/* The interface version: timed_calls.py's STEP_CORE_VERSION, which must equal it for the module
 * to be used. Raise both together whenever this file changes what Python sees (a function added,
 * removed or changed): a build left from older sources then says it is stale, and the Python
 * reference runs, instead of failing at import. A test builds this file with -DSTEP_CORE_VERSION=0. */
#ifndef STEP_CORE_VERSION
#define STEP_CORE_VERSION 12
#endif

/* The node's fields the helper reads or writes, by index into the tables below. */
enum { CHILDREN, PARENT, TOTAL, COUNT, ERRORS, MIN, MAX, START, FIELDS };
static const char *field_names[FIELDS] = {"children", "parent", "total", "count", "errors", "min", "max", "_start"};
static PyObject *field_strings[FIELDS];
static Py_ssize_t field_offsets[FIELDS];
static PyTypeObject *node_type = NULL;   /* TimerNode, once configure() ran */
static PyTypeObject *stack_type = NULL;  /* TimerStack */
static Py_ssize_t stack_current = 0;     /* where TimerStack's slot "current" lies */
static PyTypeObject *sampler_type = NULL; /* CpuSampler */
static Py_ssize_t sampler_countdown = 0;  /* where CpuSampler's slot "countdown" lies */
static PyObject *timers_module = NULL;    /* profiler.timing.timers: plain_blocks, _thread_local */
static PyObject *timers_globals = NULL;   /* its __dict__, where plain_blocks is read at each step */
static PyObject *current_string, *get_child_string, *countdown_string, *step_string, *measure_string;
static PyObject *plain_blocks_string, *span_blocks_string, *deferred_string, *add_string;
static PyObject *one, *zero;
static long held_fold_at = 1024;          /* phased_block.FOLD_AT_RUNS: step_env folds its held runs at this many */
static PyObject *perf_counter = NULL;    /* time.perf_counter, to recognise the system clock */

/* A field of a node, as a new reference (AttributeError for a slot never set). */
static PyObject *
node_get(PyObject *node, int field)
{
    if (Py_IS_TYPE(node, node_type)) {
        PyObject *value = get_slot(node, field_offsets[field], field_names[field]);
        Py_XINCREF(value);
        return value;
    }
    return PyObject_GetAttr(node, field_strings[field]);
}

/* node.<field> = value; steals the reference to value. */
static int
node_set(PyObject *node, int field, PyObject *value)
{
    if (value == NULL) {
        return -1;
    }
    if (Py_IS_TYPE(node, node_type)) {
        set_slot(node, field_offsets[field], value);
        return 0;
    }
    int failed = PyObject_SetAttr(node, field_strings[field], value);
    Py_DECREF(value);
    return failed;
}

static PyObject *
stack_get_current(PyObject *stack)
{
    if (Py_IS_TYPE(stack, stack_type) && SLOT(stack, stack_current) != NULL) {
        PyObject *current = SLOT(stack, stack_current);
        Py_INCREF(current);
        return current;
    }
    return PyObject_GetAttr(stack, current_string);
}

static int
stack_set_current(PyObject *stack, PyObject *node)
{
    if (Py_IS_TYPE(stack, stack_type)) {
        Py_INCREF(node);
        Py_XSETREF(SLOT(stack, stack_current), node);
        return 0;
    }
    return PyObject_SetAttr(stack, current_string, node);
}

/* One reading of the clock as a new reference; *seconds holds it when it is a float. */
static PyObject *
read_clock(PyObject *clock, double *seconds, int *is_float)
{
#ifdef HAVE_MONOTONIC_CLOCK
    if (clock == perf_counter) {
        if (read_system_clock(seconds) < 0) {
            return NULL;
        }
        *is_float = 1;
        return PyFloat_FromDouble(*seconds);
    }
#endif
    PyObject *reading = PyObject_CallNoArgs(clock);
    if (reading != NULL && (*is_float = PyFloat_CheckExact(reading))) {
        *seconds = PyFloat_AS_DOUBLE(reading);
    }
    return reading;
}

/* The run's length as an object: *elapsed, made from ``seconds`` at the first need (on the
 * clock's fast path a run's length is a double only, and most runs need no float object of it). */
static PyObject *
elapsed_object(PyObject **elapsed, double seconds)
{
    if (*elapsed == NULL) {
        *elapsed = PyFloat_FromDouble(seconds);
    }
    return *elapsed;
}

/* if elapsed <op> node.<field>: node.<field> = elapsed */
static int
keep_extreme(PyObject *node, int field, int op, PyObject **elapsed, double seconds, int is_float)
{
    PyObject *held = node_get(node, field);
    if (held == NULL) {
        return -1;
    }
    int beyond;
    if (is_float && PyFloat_CheckExact(held)) {
        double value = PyFloat_AS_DOUBLE(held);
        beyond = op == Py_GT ? seconds > value : seconds < value;
    }
    else {
        PyObject *value = elapsed_object(elapsed, seconds);
        beyond = value == NULL ? -1 : PyObject_RichCompareBool(value, held, op);
    }
    Py_DECREF(held);
    if (beyond <= 0) {
        return beyond;
    }
    PyObject *value = elapsed_object(elapsed, seconds);
    if (value == NULL) {
        return -1;
    }
    Py_INCREF(value);
    return node_set(node, field, value);
}

/* node.<field> += 1; an int below LONG_MAX (a count, always, unless code stored another number)
 * without Python's number protocol. */
static int
add_one(PyObject *node, int field)
{
    PyObject *value = node_get(node, field);
    if (value == NULL) {
        return -1;
    }
    if (PyLong_CheckExact(value)) {
        int overflow;
        long held = PyLong_AsLongAndOverflow(value, &overflow);
        if (!overflow && held != LONG_MAX && !(held == -1 && PyErr_Occurred())) {
            Py_DECREF(value);
            return node_set(node, field, PyLong_FromLong(held + 1));
        }
        PyErr_Clear();
    }
    PyObject *sum = PyNumber_InPlaceAdd(value, one);
    Py_DECREF(value);
    return node_set(node, field, sum);
}

/* Count one run, as TimerNode.__exit__ does: ``seconds`` long where is_float (*elapsed, the same
 * as an object, made when needed), else *elapsed long. */
static int
add_run(PyObject *node, PyObject **elapsed, double seconds, int is_float)
{
    PyObject *total = node_get(node, TOTAL);
    if (total == NULL) {
        return -1;
    }
    PyObject *sum;
    if (is_float && PyFloat_CheckExact(total)) {
        sum = PyFloat_FromDouble(PyFloat_AS_DOUBLE(total) + seconds);
    }
    else {
        sum = elapsed_object(elapsed, seconds) == NULL ? NULL : PyNumber_InPlaceAdd(total, *elapsed);
    }
    Py_DECREF(total);
    if (node_set(node, TOTAL, sum) < 0 || add_one(node, COUNT) < 0
        || keep_extreme(node, MAX, Py_GT, elapsed, seconds, is_float) < 0
        || keep_extreme(node, MIN, Py_LT, elapsed, seconds, is_float) < 0) {
        return -1;
    }
    return 0;
}

typedef struct {
    PyObject_HEAD
    PyObject *stack;        /* the timer stack whose open block the call nests under */
    PyObject *name;         /* the block's name */
    PyObject *clock;        /* the timers' clock, read as the block opens and closes */
    PyObject *sampler;      /* a CpuSampler, or None */
    PyObject *exact_above;  /* a run this long sets the sampler's countdown to 0 */
    PyObject *watched;      /* step_env's stand-in while a companion watches blocks, or None */
    /* step_env's runs, held as sums until fold() adds them to ``node`` (see held_run): */
    PyObject *parent;       /* the block ``node`` hangs under, as step_env last found it; NULL: none yet */
    PyObject *node;         /* the block's node under ``parent`` */
    long held_count;        /* runs held (0: the sums below mean nothing) */
    double held_total, held_min, held_max;
    /* step_env's short path applies: the clock is time.perf_counter, the stack a TimerStack, the
     * sampler a CpuSampler or None, exact_above a float (then also here, as a double) */
    int lean;
    double exact_above_seconds;
    PyObject *weakreflist;  /* a stack's deferred recorders hold the timer weakly */
} StepTimer;

/* sampler.countdown = 0 */
static int
measure_next_call(PyObject *sampler)
{
    if (Py_IS_TYPE(sampler, sampler_type)) {
        Py_XSETREF(SLOT(sampler, sampler_countdown), Py_NewRef(zero));
        return 0;
    }
    return PyObject_SetAttr(sampler, countdown_string, zero);
}

/* The child ``name`` of ``parent`` (made if it is not there yet), as a new reference:
 * ``parent.children[name]``, else ``parent.get_child(name)``. */
static PyObject *
child_node(PyObject *parent, PyObject *name)
{
    PyObject *node = NULL;
    PyObject *children = node_get(parent, CHILDREN);
    if (children == NULL) {
        return NULL;
    }
    if (PyDict_CheckExact(children)) {
        node = Py_XNewRef(PyDict_GetItemWithError(children, name));
    }
    else {
        node = PyObject_GetItem(children, name);
        if (node == NULL && PyErr_ExceptionMatches(PyExc_KeyError)) {
            PyErr_Clear();
        }
    }
    Py_DECREF(children);
    if (node == NULL && !PyErr_Occurred()) {
        node = PyObject_CallMethodOneArg(parent, get_child_string, name);
    }
    return node;
}

/* open(): the block ``name`` under the open block becomes the open block, its clock started;
 * returns its node. */
static PyObject *
step_timer_open(StepTimer *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *parent = stack_get_current(self->stack);
    if (parent == NULL) {
        return NULL;
    }
    PyObject *node = child_node(parent, self->name);
    if (node == NULL) {
        goto failed;
    }
    double seconds;
    int is_float;
    if (stack_set_current(self->stack, node) < 0
        || node_set(node, START, read_clock(self->clock, &seconds, &is_float)) < 0) {
        goto failed;
    }
    Py_DECREF(parent);
    return node;

failed:
    Py_DECREF(parent);
    Py_XDECREF(node);
    return NULL;
}

/* Count ``count`` runs held as sums into ``node``, as as many TimerNode.__exit__ would have
 * counted them: the total plus their sum, the count plus their number, the extremes kept (the
 * folds of StepTimer's and EnvStep's held runs). */
static int
count_held_runs(PyObject *node, long count, double total, double shortest, double longest)
{
    PyObject *held = node_get(node, TOTAL);
    if (held == NULL) {
        return -1;
    }
    PyObject *sum;
    if (PyFloat_CheckExact(held)) {
        sum = PyFloat_FromDouble(PyFloat_AS_DOUBLE(held) + total);
    }
    else {
        PyObject *added = PyFloat_FromDouble(total);
        sum = added == NULL ? NULL : PyNumber_InPlaceAdd(held, added);
        Py_XDECREF(added);
    }
    Py_DECREF(held);
    if (node_set(node, TOTAL, sum) < 0 || (held = node_get(node, COUNT)) == NULL) {
        return -1;
    }
    PyObject *counted = PyLong_FromLong(count);
    sum = counted == NULL ? NULL : PyNumber_InPlaceAdd(held, counted);
    Py_XDECREF(counted);
    Py_DECREF(held);
    if (node_set(node, COUNT, sum) < 0) {
        return -1;
    }
    PyObject *extreme = NULL;
    int kept = keep_extreme(node, MAX, Py_GT, &extreme, longest, 1);
    Py_XDECREF(extreme);
    extreme = NULL;
    if (kept >= 0) {
        kept = keep_extreme(node, MIN, Py_LT, &extreme, shortest, 1);
        Py_XDECREF(extreme);
    }
    return kept < 0 ? -1 : 0;
}

/* Add the runs step_env holds to its node (count_held_runs), and hold none: PythonStepTimer.fold's
 * lines. The sums are taken (held_count zeroed) before anything touches the node, so a fold that
 * another thread's settle() starts meanwhile finds nothing to add twice. */
static int
fold_held(StepTimer *self)
{
    long count = self->held_count;
    if (count == 0) {
        return 0;
    }
    double total = self->held_total, shortest = self->held_min, longest = self->held_max;
    self->held_count = 0;
    self->held_total = 0.0;
    PyObject *node = Py_NewRef(self->node);
    int failed = count_held_runs(node, count, total, shortest, longest);
    Py_DECREF(node);
    return failed;
}

/* Hold one run of step_env's ``seconds`` long, to be counted at the next fold (at held_fold_at
 * runs, or when a reader settles the stack). */
static int
hold_run(StepTimer *self, double seconds)
{
    if (self->held_count == 0) {
        self->held_min = self->held_max = seconds;
    }
    else if (seconds > self->held_max) {
        self->held_max = seconds;
    }
    else if (seconds < self->held_min) {
        self->held_min = seconds;
    }
    self->held_total += seconds;
    if (++self->held_count >= held_fold_at) {
        return fold_held(self);
    }
    return 0;
}

/* The clock stops, the node's parent is the open block again, a call this slow has the sampler
 * measure the next one, and the run is counted: into the node at once, or, with ``hold`` (step_env's
 * runs), into the sums held when both readings are floats and ``node`` is still self->node (with
 * the held runs folded first when not). */
static PyObject *
close_run(StepTimer *self, PyObject *node, int hold, const double *end_read)
{
    double end_seconds = 0.0;
    int end_is_float = 0;
    PyObject *end = NULL;  /* the clock's reading as an object: only off its fast path */
    if (end_read != NULL) {  /* read on time.perf_counter by the caller */
        end_seconds = *end_read;
        end_is_float = 1;
    }
    else
#ifdef HAVE_MONOTONIC_CLOCK
    if (self->clock == perf_counter) {
        if (read_system_clock(&end_seconds) < 0) {
            return NULL;
        }
        end_is_float = 1;
    }
    else
#endif
    if ((end = read_clock(self->clock, &end_seconds, &end_is_float)) == NULL) {
        return NULL;
    }
    PyObject *elapsed = NULL;
    double seconds = 0.0;
    int is_float = 0;
    PyObject *start = node_get(node, START);
    if (start == NULL) {
        goto failed;
    }
    if (end_is_float && PyFloat_CheckExact(start)) {
        is_float = 1;
        seconds = end_seconds - PyFloat_AS_DOUBLE(start);
    }
    else {
        if (end == NULL) {
            end = PyFloat_FromDouble(end_seconds);
        }
        elapsed = end == NULL ? NULL : PyNumber_Subtract(end, start);
        if (elapsed == NULL) {
            Py_DECREF(start);
            goto failed;
        }
    }
    Py_DECREF(start);
    PyObject *parent = node_get(node, PARENT);
    if (parent == NULL) {
        goto failed;
    }
    int moved = stack_set_current(self->stack, parent);
    Py_DECREF(parent);
    if (moved < 0) {
        goto failed;
    }
    if (self->sampler != Py_None) {
        int slow;
        if (is_float && PyFloat_CheckExact(self->exact_above)) {
            slow = seconds >= PyFloat_AS_DOUBLE(self->exact_above);
        }
        else {
            slow = elapsed_object(&elapsed, seconds) == NULL ? -1
                   : PyObject_RichCompareBool(elapsed, self->exact_above, Py_GE);
        }
        if (slow < 0 || (slow && measure_next_call(self->sampler) < 0)) {
            goto failed;
        }
    }
    int counted;
    if (hold && is_float && node == self->node) {
        counted = hold_run(self, seconds);
    }
    /* A clock of other numbers, or the timer moved to another node inside the call (an env
     * stepping another through this timer): the held runs first, then this one at once. */
    else if (hold && fold_held(self) < 0) {
        counted = -1;
    }
    else {
        counted = add_run(node, &elapsed, seconds, is_float);
    }
    if (counted < 0) {
        goto failed;
    }
    Py_XDECREF(end);
    Py_XDECREF(elapsed);
    Py_RETURN_NONE;

failed:
    Py_XDECREF(end);
    Py_XDECREF(elapsed);
    return NULL;
}

/* close(node): the run counted into the node at once. */
static PyObject *
step_timer_close(StepTimer *self, PyObject *node)
{
    return close_run(self, node, 0, NULL);
}

/* fail(node): close(node), the run counted as an error. */
static PyObject *
step_timer_fail(StepTimer *self, PyObject *node)
{
    if (add_one(node, ERRORS) < 0) {
        return NULL;
    }
    return step_timer_close(self, node);
}

/* Whether the sampler lets this call pass unmeasured: ``if sampler.countdown: sampler.countdown -= 1``
 * (1: it does, the countdown taken down; 0: measure it; -1: an error). */
static int
pass_unmeasured(PyObject *sampler)
{
    if (Py_IS_TYPE(sampler, sampler_type)) {
        PyObject *countdown = SLOT(sampler, sampler_countdown);
        if (countdown != NULL && PyLong_CheckExact(countdown)) {
            long left = PyLong_AsLong(countdown);
            if (left == -1 && PyErr_Occurred()) {
                return -1;
            }
            if (left == 0) {
                return 0;
            }
            PyObject *taken = PyLong_FromLong(left - 1);
            if (taken == NULL) {
                return -1;
            }
            Py_XSETREF(SLOT(sampler, sampler_countdown), taken);
            return 1;
        }
    }
    PyObject *countdown = PyObject_GetAttr(sampler, countdown_string);
    if (countdown == NULL) {
        return -1;
    }
    int left = PyObject_IsTrue(countdown);
    if (left <= 0) {
        Py_DECREF(countdown);
        return left;
    }
    PyObject *taken = PyNumber_InPlaceSubtract(countdown, one);
    Py_DECREF(countdown);
    if (taken == NULL) {
        return -1;
    }
    int failed = PyObject_SetAttr(sampler, countdown_string, taken);
    Py_DECREF(taken);
    return failed < 0 ? -1 : 1;
}

/* The timers module's globals, each read once per change of its dict (see _remembered_reads.h). */
static GlobalCache plain_blocks_cache, span_blocks_cache, thread_local_cache, clock_cache;

/* A flag of the timers' module (plain_blocks, span_blocks), read as Python reads a module global
 * (its dict, not getattr: a quarter of the instructions), once per change of that dict; 1 true,
 * 0 false, -1 an error. */
static int
timers_flag_now(PyObject *name, GlobalCache *cache)
{
    PyObject *flag = module_global(timers_globals, name, cache);  /* borrowed */
    if (flag == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_AttributeError, "module 'profiler.timing.timers' has no attribute '%U'", name);
        }
        return -1;
    }
    return flag == Py_True ? 1 : (flag == Py_False ? 0 : PyObject_IsTrue(flag));
}

static int
plain_blocks_now(void)
{
    return timers_flag_now(plain_blocks_string, &plain_blocks_cache);
}

static int
span_blocks_now(void)
{
    return timers_flag_now(span_blocks_string, &span_blocks_cache);
}

/* Find the block's node under ``parent``, the open block now, for step_env's runs (after folding
 * those held for the node before), and have the stack's settle() fold what it holds and its
 * reset() drop it: PythonStepTimer._attach's lines. */
static int
attach(StepTimer *self, PyObject *parent)
{
    if (fold_held(self) < 0) {
        return -1;
    }
    PyObject *node = child_node(parent, self->name);
    if (node == NULL) {
        return -1;
    }
    PyObject *deferred = PyObject_GetAttr(self->stack, deferred_string);
    PyObject *added = deferred == NULL ? NULL : PyObject_CallMethodOneArg(deferred, add_string, (PyObject *)self);
    Py_XDECREF(deferred);
    if (added == NULL) {
        Py_DECREF(node);
        return -1;
    }
    Py_DECREF(added);
    Py_XSETREF(self->node, node);
    Py_XSETREF(self->parent, Py_NewRef(parent));
    return 0;
}

/* open() for step_env: the node found when the open block was last this one, found again only
 * when the open block changed (the stack was reset, or a block is open around the call now). */
static PyObject *
step_env_open(StepTimer *self)
{
    PyObject *parent = stack_get_current(self->stack);
    if (parent == NULL) {
        return NULL;
    }
    int attached = parent == self->parent ? 0 : attach(self, parent);
    Py_DECREF(parent);
    if (attached < 0) {
        return NULL;
    }
    PyObject *node = Py_NewRef(self->node);
    double seconds;
    int is_float;
    if (stack_set_current(self->stack, node) < 0
        || node_set(node, START, read_clock(self->clock, &seconds, &is_float)) < 0) {
        Py_DECREF(node);
        return NULL;
    }
    return node;
}

/* fold(): add the runs step_env holds to the node (a stack's settle() calls it). */
static PyObject *
step_timer_fold(StepTimer *self, PyObject *Py_UNUSED(ignored))
{
    if (fold_held(self) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* discard(stack): drop the runs held if they ran in ``stack``: it was reset, its tree with them. */
static PyObject *
step_timer_discard(StepTimer *self, PyObject *stack)
{
    if (stack == self->stack) {
        self->held_count = 0;
        self->held_total = 0.0;
    }
    Py_RETURN_NONE;
}

/* step_env(env, action): env.step(action) timed as the block (see PythonStepTimer.step_env, the
 * reference). One call from the worker's Python into C, where the reference is a Python function
 * with two calls into C inside: the function's frame, its global and closure reads and the two
 * calls were most of what timing a step cost a worker. The env's step is called from here; that
 * starts the interpreter loop afresh (see the top of this file), which costs less than the frame
 * and the calls it replaces (benchmarks/worker_step_instructions.py counts both). */
/* The env call's result once its run closed (close_run's None, or NULL on an error: the result
 * then dropped). */
static PyObject *
after_close(PyObject *closed, PyObject *result)
{
    if (closed == NULL) {
        Py_DECREF(result);
        return NULL;
    }
    Py_DECREF(closed);
    return result;
}

/* The env's call raised: ``except BaseException: fail(node); raise`` (an error in fail() chained
 * to the env's). Always leaves an exception set. */
static void
fail_and_raise(StepTimer *self, PyObject *node)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyObject *failed = step_timer_fail(self, node);
    if (failed == NULL) {
        _PyErr_ChainExceptions(type, value, traceback);
        return;
    }
    Py_DECREF(failed);
    PyErr_Restore(type, value, traceback);
}

static PyObject *
step_env_general(StepTimer *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "step_env() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (self->watched != Py_None) {
        int on = plain_blocks_now();
        if (on < 0) {
            return NULL;
        }
        if (!on) {
            return PyObject_Vectorcall(self->watched, args, 2, NULL);
        }
    }
    PyObject *node = step_env_open(self);
    if (node == NULL) {
        return NULL;
    }
    PyObject *result = NULL;
    int unmeasured = self->sampler == Py_None ? 1 : pass_unmeasured(self->sampler);
    if (unmeasured > 0) {
        result = PyObject_VectorcallMethod(step_string, args, 2, NULL);
    }
    else if (unmeasured == 0) {
        PyObject *step = PyObject_GetAttr(args[0], step_string);
        if (step != NULL) {
            result = PyObject_CallMethodObjArgs(self->sampler, measure_string, step, args[1], NULL);
            Py_DECREF(step);
        }
    }
    if (result == NULL) {
        fail_and_raise(self, node);
        Py_DECREF(node);
        return NULL;
    }
    PyObject *closed = close_run(self, node, 1, NULL);
    Py_DECREF(node);
    return after_close(closed, result);
}

/* The countdown a CpuSampler holds when it is a small positive int (what the sampler always
 * stores): its value, read from the int's one digit (CPython 3.11's layout; elsewhere through
 * PyLong_AsLong); 0 for anything else, which step_env_general then handles as before. */
static inline long
small_countdown(PyObject *countdown)
{
    if (countdown == NULL || !PyLong_CheckExact(countdown)) {
        return 0;
    }
#if PY_VERSION_HEX < 0x030C0000
    return Py_SIZE(countdown) == 1 ? (long)((PyLongObject *)countdown)->ob_digit[0] : 0;
#else
    long left = PyLong_AsLong(countdown);
    if (left == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return left > 0 ? left : 0;
#endif
}

/* step_env(env, action): env.step(action) timed as the block (see PythonStepTimer.step_env, the
 * reference). The common step (the open block the one the timer last found its node under, the
 * clock time.perf_counter, the sampler's countdown not out, no companion watching) runs the short
 * path here, in one function, which touches as little memory and code as it can: on a machine
 * with more processes than cores the caches are cold at every step, and a step of a profiled
 * worker paid for each cache line its timing touched several times what its instructions cost
 * (benchmarks/worker_step_instructions.py --cold counts the misses). Its node's start is
 * written into the float the node already holds where nothing else holds it (no float made and
 * freed per step), the countdown is taken down by its small int, and the call is made as
 * step_env_general makes it. Every other step, and a call that raises, takes step_env_general. */
static PyObject *
step_timer_step_env(StepTimer *self, PyObject *const *args, Py_ssize_t nargs)
{
#ifdef HAVE_MONOTONIC_CLOCK
    PyObject *stack = self->stack, *parent = self->parent, *node = self->node, *sampler = self->sampler;
    if (nargs != 2 || !self->lean || parent == NULL || SLOT(stack, stack_current) != parent
        || !Py_IS_TYPE(node, node_type)) {
        return step_env_general(self, args, nargs);
    }
    if (self->watched != Py_None) {
        int on = plain_blocks_now();
        if (on <= 0) {
            return on < 0 ? NULL : PyObject_Vectorcall(self->watched, args, 2, NULL);
        }
    }
    long left = 1;
    if (sampler != Py_None && (left = small_countdown(SLOT(sampler, sampler_countdown))) == 0) {
        return step_env_general(self, args, nargs);
    }
    double start;
    if (read_system_clock(&start) < 0) {
        return NULL;
    }
    PyObject *held_start = SLOT(node, field_offsets[START]);
    if (held_start != NULL && PyFloat_CheckExact(held_start) && Py_REFCNT(held_start) == 1) {
        ((PyFloatObject *)held_start)->ob_fval = start;  /* the node's own float: nobody else sees it */
    }
    else {
        PyObject *reading = PyFloat_FromDouble(start);
        if (reading == NULL) {
            return NULL;
        }
        set_slot(node, field_offsets[START], reading);
    }
    /* stack.current = node (blocks in the env's own code nest under it). The stack holds the
     * node, and this call holds it too until it returns: the env's code may reset the stack and
     * step through this timer again, which drops the stack's reference and the timer's. */
    Py_INCREF(node);
    SLOT(stack, stack_current) = Py_NewRef(node);
    Py_DECREF(parent);
    if (sampler != Py_None) {
        /* Cached for the sampler's own countdowns (small ints); one set from outside may be made. */
        PyObject *countdown = PyLong_FromLong(left - 1);
        if (countdown == NULL) {
            /* the reference's ``sampler.countdown -= 1`` raising inside its try: a failed run */
            fail_and_raise(self, node);
            Py_DECREF(node);
            return NULL;
        }
        Py_XSETREF(SLOT(sampler, sampler_countdown), countdown);
    }
    PyObject *result = PyObject_VectorcallMethod(step_string, args, 2, NULL);
    if (result == NULL) {
        fail_and_raise(self, node);
        Py_DECREF(node);
        return NULL;
    }
    /* close_run's common case: both readings floats, the timer still on its node. */
    double end;
    if (read_system_clock(&end) < 0) {
        Py_DECREF(node);
        Py_DECREF(result);
        return NULL;
    }
    PyObject *started = SLOT(node, field_offsets[START]), *above = SLOT(node, field_offsets[PARENT]);
    if (node == self->node && started != NULL && PyFloat_CheckExact(started) && above != NULL) {
        double seconds = end - PyFloat_AS_DOUBLE(started);
        Py_INCREF(above);
        Py_XSETREF(SLOT(stack, stack_current), above);
        Py_DECREF(node);  /* the timer holds it still: it is self->node */
        if (sampler != Py_None && seconds >= self->exact_above_seconds && measure_next_call(sampler) < 0) {
            Py_DECREF(result);
            return NULL;
        }
        if (hold_run(self, seconds) < 0) {
            Py_DECREF(result);
            return NULL;
        }
        return result;
    }
    PyObject *closed = close_run(self, node, 1, &end);
    Py_DECREF(node);
    return after_close(closed, result);
#else
    return step_env_general(self, args, nargs);
#endif
}

static PyObject *
step_timer_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *stack, *name, *clock, *sampler, *exact_above, *watched = Py_None;
    static char *keywords[] = {"stack", "name", "clock", "sampler", "exact_above", "watched", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OUOOO|O:StepTimer", keywords, &stack, &name, &clock,
                                     &sampler, &exact_above, &watched)) {
        return NULL;
    }
    if (node_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "configure(TimerNode, TimerStack, CpuSampler, timers, FOLD_AT_RUNS) must run before a StepTimer is made");
        return NULL;
    }
    if (!PyCallable_Check(clock) || (watched != Py_None && !PyCallable_Check(watched))) {
        PyErr_SetString(PyExc_TypeError, "the clock and the watched step must be callable");
        return NULL;
    }
    StepTimer *self = (StepTimer *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->stack = Py_NewRef(stack);
    self->name = Py_NewRef(name);
    self->clock = Py_NewRef(clock);
    self->sampler = Py_NewRef(sampler);
    self->exact_above = Py_NewRef(exact_above);
    self->watched = Py_NewRef(watched);
    self->parent = self->node = NULL;
    self->held_count = 0;
    self->held_total = 0.0;
    self->lean = 0;
#ifdef HAVE_MONOTONIC_CLOCK
    self->lean = clock == perf_counter && Py_IS_TYPE(stack, stack_type)
                 && (sampler == Py_None || Py_IS_TYPE(sampler, sampler_type)) && PyFloat_CheckExact(exact_above);
#endif
    self->exact_above_seconds = self->lean ? PyFloat_AS_DOUBLE(exact_above) : 0.0;
    self->weakreflist = NULL;
    return (PyObject *)self;
}

static int
step_timer_traverse(StepTimer *self, visitproc visit, void *arg)
{
    Py_VISIT(self->stack);
    Py_VISIT(self->name);
    Py_VISIT(self->clock);
    Py_VISIT(self->sampler);
    Py_VISIT(self->exact_above);
    Py_VISIT(self->watched);
    Py_VISIT(self->parent);
    Py_VISIT(self->node);
    return 0;
}

static int
step_timer_clear(StepTimer *self)
{
    Py_CLEAR(self->stack);
    Py_CLEAR(self->name);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->sampler);
    Py_CLEAR(self->exact_above);
    Py_CLEAR(self->watched);
    Py_CLEAR(self->parent);
    Py_CLEAR(self->node);
    return 0;
}

/* A timer that goes adds what it held to its node first (PythonStepTimer.__del__): a worker's
 * envs, and the timer with them, go before its last payload is taken. */
static void
step_timer_finalize(StepTimer *self)
{
    if (self->held_count == 0 || self->node == NULL) {
        return;
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (fold_held(self) < 0) {
        PyErr_WriteUnraisable((PyObject *)self);
    }
    PyErr_Restore(type, value, traceback);
}

static void
step_timer_dealloc(StepTimer *self)
{
    if (PyObject_CallFinalizerFromDealloc((PyObject *)self) < 0) {
        return;  /* resurrected */
    }
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    step_timer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
step_timer_repr(StepTimer *self)
{
    return PyUnicode_FromFormat("<compiled step timer %R>", self->name);
}

static PyMethodDef step_timer_methods[] = {
    {"open", (PyCFunction)step_timer_open, METH_NOARGS,
     PyDoc_STR("Open the block under the open block; its node.")},
    {"close", (PyCFunction)step_timer_close, METH_O, PyDoc_STR("Close the node open() gave; count the run.")},
    {"fail", (PyCFunction)step_timer_fail, METH_O,
     PyDoc_STR("Close the node open() gave as an exception leaving it.")},
    {"step_env", (PyCFunction)(void (*)(void))step_timer_step_env, METH_FASTCALL,
     PyDoc_STR("step_env(env, action): env.step(action) timed as the block, the run held until fold().")},
    {"fold", (PyCFunction)step_timer_fold, METH_NOARGS, PyDoc_STR("Add the runs step_env holds to the node.")},
    {"discard", (PyCFunction)step_timer_discard, METH_O,
     PyDoc_STR("discard(stack): drop the runs held if they ran in stack (it was reset).")},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StepTimerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "envmanager.transport._step_core.StepTimer",
    .tp_doc = PyDoc_STR("StepTimer(stack, name, clock, sampler, exact_above, watched=None): an env call timed as the block "
                        "`name` (see timed_calls.PythonStepTimer, the reference)."),
    .tp_basicsize = sizeof(StepTimer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_weaklistoffset = offsetof(StepTimer, weakreflist),
    .tp_finalize = (destructor)step_timer_finalize,
    .tp_new = step_timer_new,
    .tp_methods = step_timer_methods,
    .tp_traverse = (traverseproc)step_timer_traverse,
    .tp_clear = (inquiry)step_timer_clear,
    .tp_dealloc = (destructor)step_timer_dealloc,
    .tp_repr = (reprfunc)step_timer_repr,
};

/* --- the zero-edit env step: EnvStep and FinishStamps ----------------------------------------
 *
 * envmanager/instrumentation/step_path.py holds the reference, timed_step's Python closure with
 * its HeldSteps and FinishStamps, and says what is counted how. An EnvStep is the env's ``step``
 * attribute itself: the program's ``env.step(action)`` is one vectorcall into C, with no Python
 * frame around the env's own step. While blocks are plain or only the timeline watches them, on
 * the thread that built the env, each run is held as two doubles (start, end) and counted into
 * the node, with its span on the stack's timeline, when the runs fold (HeldSteps._fold_held's
 * lines, in the same order: the same floats); in a worker, each run's end is appended to the
 * worker's FinishStamps as a double and the shipping is called once it passes ``quiet_until``.
 * Every other call goes to ``watched``, the reference's ``with`` block. */

static Py_ssize_t stack_timeline = 0;  /* where TimerStack's slot "timeline" lies */
static PyObject *add_spans_string, *add_packed_spans_string, *append_string, *active_string, *quiet_until_string, *reduce_ex_string;

typedef struct {
    PyObject_HEAD
    double *stamps;          /* the finish stamps held, in order */
    Py_ssize_t count, capacity;
} FinishStamps;

static PyTypeObject FinishStampsType;

/* Hold one stamp. */
static int
finish_stamps_add(FinishStamps *self, double stamp)
{
    if (self->count == self->capacity) {
        Py_ssize_t capacity = self->capacity ? self->capacity * 2 : 1024;
        double *grown = PyMem_Realloc(self->stamps, capacity * sizeof(double));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->stamps = grown;
        self->capacity = capacity;
    }
    self->stamps[self->count++] = stamp;
    return 0;
}

/* append(stamp): as list.append, the stamp a float (or a number that converts to one). */
static PyObject *
finish_stamps_append(FinishStamps *self, PyObject *stamp)
{
    double value = PyFloat_AsDouble(stamp);
    if ((value == -1.0 && PyErr_Occurred()) || finish_stamps_add(self, value) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* take(): the stamps held as float64 bytes; none held after. */
static PyObject *
finish_stamps_take(FinishStamps *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *taken = PyBytes_FromStringAndSize((const char *)self->stamps, self->count * (Py_ssize_t)sizeof(double));
    if (taken != NULL) {
        self->count = 0;
    }
    return taken;
}

static Py_ssize_t
finish_stamps_length(FinishStamps *self)
{
    return self->count;
}

static PyObject *
finish_stamps_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (!_PyArg_NoPositional("FinishStamps", args) || !_PyArg_NoKeywords("FinishStamps", kwargs)) {
        return NULL;
    }
    FinishStamps *self = (FinishStamps *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->stamps = NULL;
        self->count = self->capacity = 0;
    }
    return (PyObject *)self;
}

static void
finish_stamps_dealloc(FinishStamps *self)
{
    PyMem_Free(self->stamps);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef finish_stamps_methods[] = {
    {"append", (PyCFunction)finish_stamps_append, METH_O, PyDoc_STR("Hold one finish stamp.")},
    {"take", (PyCFunction)finish_stamps_take, METH_NOARGS,
     PyDoc_STR("The stamps held, as float64 bytes; none held after.")},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods finish_stamps_sequence = {
    .sq_length = (lenfunc)finish_stamps_length,
};

static PyTypeObject FinishStampsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "envmanager.transport._step_core.FinishStamps",
    .tp_doc = PyDoc_STR("A worker's finish stamps, held as doubles (see step_path.FinishStamps, the reference)."),
    .tp_basicsize = sizeof(FinishStamps),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = finish_stamps_new,
    .tp_dealloc = (destructor)finish_stamps_dealloc,
    .tp_methods = finish_stamps_methods,
    .tp_as_sequence = &finish_stamps_sequence,
};

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *timing;        /* the env's _Timing: ``active`` */
    PyObject *step;          /* the env's own bound step */
    PyObject *stack;         /* the timer stack of the thread that built the env (a TimerStack) */
    PyObject *clock;         /* the timers' clock */
    PyObject *sampler;       /* the worker's CpuSampler, or None */
    PyObject *stamps;        /* the worker's finish stamps (FinishStamps, or any object with append), or None */
    PyObject *worker_timers; /* the worker's WorkerTimers (``quiet_until``), or None */
    PyObject *ship;          /* the worker's shipping's ship, or None */
    PyObject *watched;       /* the reference's with block: every call not held here */
    PyObject *name;          /* the block's name */
    unsigned long owner;     /* the thread that built the env */
    Py_ssize_t active_offset, quiet_until_offset;  /* their slots; -1: read by name */
    /* The runs held (HeldSteps): */
    PyObject *parent;        /* the block ``node`` hangs under, as the step last found it; NULL: none yet */
    PyObject *node;
    PyObject *timeline;      /* the timeline the held runs record their spans on; NULL: none */
    double *runs;            /* start, end of each run held */
    long capacity;           /* the runs ``runs`` has room for (0: none yet); configure() may fold at more later */
    long held;
    PyObject *weakreflist;   /* a stack's deferred recorders hold it weakly */
    PyObject *dict;          /* the env's own step's __name__, __doc__, __wrapped__... (functools.update_wrapper) */
} EnvStep;

/* A slot at ``offset`` of ``object`` (-1: its attribute ``name``), as a new reference. */
static PyObject *
slot_or_attribute(PyObject *object, Py_ssize_t offset, PyObject *name)
{
    if (offset >= 0) {
        PyObject *value = SLOT(object, offset);
        if (value != NULL) {
            return Py_NewRef(value);
        }
    }
    return PyObject_GetAttr(object, name);
}

/* Where the writable slot ``name`` of ``object``'s type lies; -1 (no error) if it is not one. */
static Py_ssize_t
slot_offset_or_none(PyObject *object, const char *name)
{
    Py_ssize_t offset = slot_offset(Py_TYPE(object), name);
    if (offset < 0) {
        PyErr_Clear();
    }
    return offset;
}

/* Count the runs held into the node and add their spans to the timeline they were held for
 * (HeldSteps._fold_held): the buffer and the count taken before anything runs that could let
 * another thread in. */
static int
env_step_fold(EnvStep *self)
{
    long count = self->held;
    if (count == 0) {
        return 0;
    }
    double *runs = self->runs;
    long capacity = self->capacity;
    self->runs = NULL;
    self->capacity = 0;
    self->held = 0;
    double total = 0.0, longest = runs[1] - runs[0], shortest = longest;
    for (long run = 0; run < count; run++) {
        double elapsed = runs[2 * run + 1] - runs[2 * run];
        total += elapsed;
        if (elapsed > longest) {
            longest = elapsed;
        }
        else if (elapsed < shortest) {
            shortest = elapsed;
        }
    }
    PyObject *node = Py_NewRef(self->node);
    PyObject *timeline = Py_XNewRef(self->timeline);
    int failed = count_held_runs(node, count, total, shortest, longest);
    Py_DECREF(node);
    if (!failed && timeline != NULL) {
        /* The runs are the (start, end) pairs the timeline keeps packed (profiler.recording.packed_spans). */
        PyObject *pairs = PyBytes_FromStringAndSize((const char *)runs, count * 2 * (Py_ssize_t)sizeof(double));
        PyObject *added = pairs == NULL ? NULL
            : PyObject_CallMethodObjArgs(timeline, add_packed_spans_string, self->name, pairs, NULL);
        Py_XDECREF(pairs);
        failed = added == NULL ? -1 : 0;
        Py_XDECREF(added);
    }
    Py_XDECREF(timeline);
    if (self->runs == NULL) {
        self->runs = runs;  /* kept for the next runs */
        self->capacity = capacity;
    }
    else {
        PyMem_Free(runs);
    }
    return failed;
}

/* Fold, then find the node under ``parent``, the open block now, and join the stack's deferred
 * recorders (HeldSteps.attach). */
static int
env_step_attach(EnvStep *self, PyObject *parent)
{
    if (env_step_fold(self) < 0) {
        return -1;
    }
    PyObject *node = child_node(parent, self->name);
    if (node == NULL) {
        return -1;
    }
    Py_XSETREF(self->node, node);
    Py_XSETREF(self->parent, Py_NewRef(parent));
    PyObject *deferred = PyObject_GetAttr(self->stack, deferred_string);
    PyObject *added = deferred == NULL ? NULL : PyObject_CallMethodOneArg(deferred, add_string, (PyObject *)self);
    Py_XDECREF(deferred);
    Py_XDECREF(added);
    return added == NULL ? -1 : 0;
}

/* Count a run of ``node`` at once, after the runs held (HeldSteps.count_now): one that raised
 * (``failed``), one on a clock of other numbers, one whose node changed inside the call. The
 * readings are objects (start_object, end_object) or, where those are NULL, the doubles. */
static int
env_step_count_now(EnvStep *self, PyObject *node, PyObject *start_object, double start, PyObject *end_object,
                   double end, int failed)
{
    if (env_step_fold(self) < 0 || (failed && add_one(node, ERRORS) < 0)) {
        return -1;
    }
    PyObject *started = start_object != NULL ? Py_NewRef(start_object) : PyFloat_FromDouble(start);
    PyObject *ended = end_object != NULL ? Py_NewRef(end_object) : PyFloat_FromDouble(end);
    PyObject *elapsed = NULL;
    int counted = -1;
    if (started == NULL || ended == NULL) {
        goto done;
    }
    int is_float = PyFloat_CheckExact(started) && PyFloat_CheckExact(ended);
    double seconds = is_float ? PyFloat_AS_DOUBLE(ended) - PyFloat_AS_DOUBLE(started) : 0.0;
    if (!is_float && (elapsed = PyNumber_Subtract(ended, started)) == NULL) {
        goto done;
    }
    if (add_run(node, &elapsed, seconds, is_float) < 0) {
        goto done;
    }
    counted = 0;
    if (self->timeline != NULL) {
        PyObject *spans = Py_BuildValue("[(OOO)]", self->name, started, ended);
        PyObject *added = spans == NULL ? NULL : PyObject_CallMethodOneArg(self->timeline, add_spans_string, spans);
        Py_XDECREF(spans);
        counted = added == NULL ? -1 : 0;
        Py_XDECREF(added);
    }
done:
    Py_XDECREF(started);
    Py_XDECREF(ended);
    Py_XDECREF(elapsed);
    return counted;
}

/* stack.current = node.parent */
static int
env_step_close_block(EnvStep *self, PyObject *node)
{
    PyObject *parent = node_get(node, PARENT);
    if (parent == NULL) {
        return -1;
    }
    int moved = stack_set_current(self->stack, parent);
    Py_DECREF(parent);
    return moved;
}

/* The clock's reading: a double in *seconds (NULL returned, no error) on time.perf_counter or
 * when the clock gave a float (its float object dropped); else the reading as an object. */
static int
env_step_read_clock(EnvStep *self, double *seconds, PyObject **reading)
{
    *reading = NULL;
#ifdef HAVE_MONOTONIC_CLOCK
    if (self->clock == perf_counter) {
        return read_system_clock(seconds);
    }
#endif
    PyObject *value = PyObject_CallNoArgs(self->clock);
    if (value == NULL) {
        return -1;
    }
    if (PyFloat_CheckExact(value)) {
        *seconds = PyFloat_AS_DOUBLE(value);
        Py_DECREF(value);
    }
    else {
        *reading = value;
    }
    return 0;
}

/* node._start = the reading: into the float the node holds where nothing else holds it (no float
 * made and freed per step), as StepTimer.step_env writes it. */
static int
env_step_set_start(PyObject *node, double start, PyObject *reading)
{
    if (reading == NULL && Py_IS_TYPE(node, node_type)) {
        PyObject *held_start = SLOT(node, field_offsets[START]);
        if (held_start != NULL && PyFloat_CheckExact(held_start) && Py_REFCNT(held_start) == 1) {
            ((PyFloatObject *)held_start)->ob_fval = start;
            return 0;
        }
    }
    return node_set(node, START, reading != NULL ? Py_NewRef(reading) : PyFloat_FromDouble(start));
}

/* The worker's part once the step returned: the stamp held, the shipping called once it is due. */
static int
env_step_stamp(EnvStep *self, double end, PyObject *end_object)
{
    if (end_object == NULL && Py_IS_TYPE(self->stamps, &FinishStampsType)) {
        if (finish_stamps_add((FinishStamps *)self->stamps, end) < 0) {
            return -1;
        }
    }
    else {
        PyObject *stamp = end_object != NULL ? Py_NewRef(end_object) : PyFloat_FromDouble(end);
        PyObject *appended = stamp == NULL ? NULL : PyObject_CallMethodOneArg(self->stamps, append_string, stamp);
        Py_XDECREF(stamp);
        if (appended == NULL) {
            return -1;
        }
        Py_DECREF(appended);
    }
    PyObject *quiet_until = slot_or_attribute(self->worker_timers, self->quiet_until_offset, quiet_until_string);
    if (quiet_until == NULL) {
        return -1;
    }
    int due;
    if (end_object == NULL && PyFloat_CheckExact(quiet_until)) {
        due = end >= PyFloat_AS_DOUBLE(quiet_until);
    }
    else {
        PyObject *stamp = end_object != NULL ? Py_NewRef(end_object) : PyFloat_FromDouble(end);
        due = stamp == NULL ? -1 : PyObject_RichCompareBool(stamp, quiet_until, Py_GE);
        Py_XDECREF(stamp);
    }
    Py_DECREF(quiet_until);
    if (due <= 0) {
        return due;
    }
    PyObject *shipped = PyObject_CallNoArgs(self->ship);
    Py_XDECREF(shipped);
    return shipped == NULL ? -1 : 0;
}

/* The env step (timed_step's ``timed``). */
static PyObject *
env_step_call(EnvStep *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *active = slot_or_attribute(self->timing, self->active_offset, active_string);
    if (active == NULL) {
        return NULL;
    }
    int on = active == Py_True ? 1 : (active == Py_False ? 0 : PyObject_IsTrue(active));
    Py_DECREF(active);
    if (on <= 0) {
        return on < 0 ? NULL : PyObject_Vectorcall(self->step, args, nargsf, kwnames);
    }
    int spans = span_blocks_now();
    int plain = spans == 0 ? plain_blocks_now() : 0;
    if (spans < 0 || plain < 0) {
        return NULL;
    }
    if (!(spans || plain) || PyThread_get_thread_ident() != self->owner || nargs != 1 || kwnames != NULL) {
        if (self->held && env_step_fold(self) < 0) {
            return NULL;
        }
        return PyObject_Vectorcall(self->watched, args, nargsf, kwnames);
    }
    PyObject *stack = self->stack;
    PyObject *timeline = NULL;
    if (spans && (timeline = SLOT(stack, stack_timeline)) == Py_None) {
        timeline = NULL;
    }
    /* The timeline and the open block are held across the fold: it calls the timeline's
     * add_spans, Python code, and another thread may replace either meanwhile (clear_recording,
     * reset_timers), which frees one only the stack held. */
    if (timeline != self->timeline) {  /* HeldSteps.record_on */
        Py_XINCREF(timeline);
        if (env_step_fold(self) < 0) {
            Py_XDECREF(timeline);
            return NULL;
        }
        Py_XSETREF(self->timeline, timeline);
    }
    PyObject *parent = SLOT(stack, stack_current);
    if (parent == NULL) {
        PyErr_SetString(PyExc_AttributeError, "the timer stack has no open block");
        return NULL;
    }
    if (parent != self->parent) {
        Py_INCREF(parent);
        int attached = env_step_attach(self, parent);
        Py_DECREF(parent);
        if (attached < 0) {
            return NULL;
        }
    }
    /* stack.current = node (blocks in the env's own code nest under it). This call holds the
     * node until it returns: the env's code may reset the stack, or step through here again. */
    PyObject *node = Py_NewRef(self->node);
    Py_XSETREF(SLOT(stack, stack_current), Py_NewRef(node));
    double start = 0.0, end = 0.0;
    PyObject *start_object = NULL, *end_object = NULL, *result = NULL;
    if (env_step_read_clock(self, &start, &start_object) < 0 || env_step_set_start(node, start, start_object) < 0) {
        env_step_close_block(self, node);  /* the clock failed: nothing ran, nothing is counted */
        Py_DECREF(node);
        Py_XDECREF(start_object);
        return NULL;
    }
    int unmeasured = self->sampler == Py_None ? 1 : pass_unmeasured(self->sampler);
    if (unmeasured > 0) {
        result = PyObject_Vectorcall(self->step, args, 1, NULL);
    }
    else if (unmeasured == 0) {
        result = PyObject_CallMethodObjArgs(self->sampler, measure_string, self->step, args[0], NULL);
    }
    if (result == NULL) {
        goto failed;
    }
    if (env_step_read_clock(self, &end, &end_object) < 0 || env_step_close_block(self, node) < 0) {
        goto dropped;
    }
    if (start_object == NULL && end_object == NULL && node == self->node) {
        if (self->capacity < held_fold_at) {  /* none yet, or configure() folds at more runs now */
            double *grown = PyMem_Realloc(self->runs, held_fold_at * 2 * sizeof(double));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto dropped;
            }
            self->runs = grown;
            self->capacity = held_fold_at;
        }
        self->runs[2 * self->held] = start;
        self->runs[2 * self->held + 1] = end;
        if (++self->held >= held_fold_at && env_step_fold(self) < 0) {
            goto dropped;
        }
    }
    /* A clock of other numbers, or the node changed inside the call: counted at once. */
    else if (env_step_count_now(self, node, start_object, start, end_object, end, 0) < 0) {
        goto dropped;
    }
    if (self->stamps != Py_None && env_step_stamp(self, end, end_object) < 0) {
        goto dropped;
    }
    Py_DECREF(node);
    Py_XDECREF(start_object);
    Py_XDECREF(end_object);
    return result;

dropped:
    Py_DECREF(result);
    Py_DECREF(node);
    Py_XDECREF(start_object);
    Py_XDECREF(end_object);
    return NULL;

failed: {
        /* ``except BaseException``: the block closed (before the clock is read, as the reference
         * closes it), the run counted with its error, the env's exception raised (or an error in
         * the counting, the env's exception its context). */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (env_step_close_block(self, node) < 0 || env_step_read_clock(self, &end, &end_object) < 0
            || env_step_count_now(self, node, start_object, start, end_object, end, 1) < 0) {
            _PyErr_ChainExceptions(type, value, traceback);
        }
        else {
            PyErr_Restore(type, value, traceback);
        }
        Py_DECREF(node);
        Py_XDECREF(start_object);
        Py_XDECREF(end_object);
        return NULL;
    }
}

static PyObject *
env_step_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *timing, *step, *stack, *clock, *sampler, *stamps, *worker_timers, *ship, *watched, *name;
    static char *keywords[] = {"timing", "step", "stack", "clock", "sampler", "stamps", "worker_timers", "ship",
                               "watched", "name", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOOU:EnvStep", keywords, &timing, &step, &stack, &clock,
                                     &sampler, &stamps, &worker_timers, &ship, &watched, &name)) {
        return NULL;
    }
    if (node_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure() must run before an EnvStep is made");
        return NULL;
    }
    if (!Py_IS_TYPE(stack, stack_type)) {
        PyErr_SetString(PyExc_TypeError, "EnvStep() takes a TimerStack");
        return NULL;
    }
    if (!PyCallable_Check(step) || !PyCallable_Check(clock) || !PyCallable_Check(watched)
        || (stamps != Py_None && (worker_timers == Py_None || !PyCallable_Check(ship)))) {
        PyErr_SetString(PyExc_TypeError, "EnvStep(): the step, clock, watched step and ship must be callable, and "
                                         "a worker's stamps come with its timers");
        return NULL;
    }
    EnvStep *self = (EnvStep *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = (vectorcallfunc)env_step_call;
    self->timing = Py_NewRef(timing);
    self->step = Py_NewRef(step);
    self->stack = Py_NewRef(stack);
    self->clock = Py_NewRef(clock);
    self->sampler = Py_NewRef(sampler);
    self->stamps = Py_NewRef(stamps);
    self->worker_timers = Py_NewRef(worker_timers);
    self->ship = Py_NewRef(ship);
    self->watched = Py_NewRef(watched);
    self->name = Py_NewRef(name);
    self->owner = PyThread_get_thread_ident();
    self->active_offset = slot_offset_or_none(timing, "active");
    self->quiet_until_offset = worker_timers == Py_None ? -1 : slot_offset_or_none(worker_timers, "quiet_until");
    self->parent = self->node = self->timeline = NULL;
    self->runs = NULL;
    self->capacity = 0;
    self->held = 0;
    self->weakreflist = NULL;
    self->dict = NULL;
    return (PyObject *)self;
}

/* fold(): count the runs held (a stack's settle() calls it). */
static PyObject *
env_step_fold_method(EnvStep *self, PyObject *Py_UNUSED(ignored))
{
    if (env_step_fold(self) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* discard(stack): drop the runs held if they ran in ``stack``: it was reset, its tree with them. */
static PyObject *
env_step_discard(EnvStep *self, PyObject *stack)
{
    if (stack == self->stack) {
        self->held = 0;
    }
    Py_RETURN_NONE;
}

/* __reduce_ex__(protocol): the env's own step's (timed_method.TimedMethod's, the reference). An
 * EnvStep stands for the env's bound step, so a copy or a pickle of it alone is one of that method,
 * as under plain python: getattr(env, "step"), of a deep copy of the env for a deep copy, of the
 * env as the program built it (timed_env's PlainReduce) for a pickle. */
static PyObject *
env_step_reduce(EnvStep *self, PyObject *protocol)
{
    if (self->step == NULL) {  /* cleared by the garbage collector, in a finalizer's reach */
        PyErr_SetString(PyExc_TypeError, "cannot reduce a cleared EnvStep");
        return NULL;
    }
    return PyObject_CallMethodOneArg(self->step, reduce_ex_string, protocol);
}

static int
env_step_traverse(EnvStep *self, visitproc visit, void *arg)
{
    Py_VISIT(self->timing);
    Py_VISIT(self->step);
    Py_VISIT(self->stack);
    Py_VISIT(self->clock);
    Py_VISIT(self->sampler);
    Py_VISIT(self->stamps);
    Py_VISIT(self->worker_timers);
    Py_VISIT(self->ship);
    Py_VISIT(self->watched);
    Py_VISIT(self->name);
    Py_VISIT(self->parent);
    Py_VISIT(self->node);
    Py_VISIT(self->timeline);
    Py_VISIT(self->dict);
    return 0;
}

static int
env_step_clear(EnvStep *self)
{
    Py_CLEAR(self->timing);
    Py_CLEAR(self->step);
    Py_CLEAR(self->stack);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->sampler);
    Py_CLEAR(self->stamps);
    Py_CLEAR(self->worker_timers);
    Py_CLEAR(self->ship);
    Py_CLEAR(self->watched);
    Py_CLEAR(self->name);
    Py_CLEAR(self->parent);
    Py_CLEAR(self->node);
    Py_CLEAR(self->timeline);
    Py_CLEAR(self->dict);
    return 0;
}

/* An EnvStep that goes counts what it held first (HeldSteps.__del__). */
static void
env_step_finalize(EnvStep *self)
{
    if (self->held == 0 || self->node == NULL) {
        return;
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (env_step_fold(self) < 0) {
        PyErr_WriteUnraisable((PyObject *)self);
    }
    PyErr_Restore(type, value, traceback);
}

static void
env_step_dealloc(EnvStep *self)
{
    if (PyObject_CallFinalizerFromDealloc((PyObject *)self) < 0) {
        return;  /* resurrected */
    }
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    env_step_clear(self);
    PyMem_Free(self->runs);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
env_step_repr(EnvStep *self)
{
    return PyUnicode_FromFormat("<timed %R of %R>", self->name, self->step);
}

static PyMethodDef env_step_methods[] = {
    {"fold", (PyCFunction)env_step_fold_method, METH_NOARGS, PyDoc_STR("Count the runs held.")},
    {"discard", (PyCFunction)env_step_discard, METH_O,
     PyDoc_STR("discard(stack): drop the runs held if they ran in stack (it was reset).")},
    {"__reduce_ex__", (PyCFunction)env_step_reduce, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

/* A __dict__, so that the env's step's __name__, __qualname__, __doc__, __module__ and __wrapped__
 * (inspect.signature follows it) are the EnvStep's as they are the reference closure's. */
static PyGetSetDef env_step_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject EnvStepType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "envmanager.transport._step_core.EnvStep",
    .tp_doc = PyDoc_STR("EnvStep(timing, step, stack, clock, sampler, stamps, worker_timers, ship, watched, name): "
                        "an env's step timed in place (see step_path.timed_step, the reference)."),
    .tp_basicsize = sizeof(EnvStep),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(EnvStep, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_weaklistoffset = offsetof(EnvStep, weakreflist),
    .tp_finalize = (destructor)env_step_finalize,
    .tp_new = env_step_new,
    .tp_methods = env_step_methods,
    .tp_getset = env_step_getset,
    .tp_dictoffset = offsetof(EnvStep, dict),
    .tp_traverse = (traverseproc)env_step_traverse,
    .tp_clear = (inquiry)env_step_clear,
    .tp_dealloc = (destructor)env_step_dealloc,
    .tp_repr = (reprfunc)env_step_repr,
};

/* --- TimedMethod: an env's reset or close timed in place ----------------------------------------
 *
 * instrumentation/timed_method.py's TimedMethod, a functools.partial subclass, is the reference: a
 * call of it is a call of rlprof's closure (``call``), and it copies and pickles as the env's own
 * method it stands for (``original``). On Python 3.11 a subclass of partial does not inherit its
 * vectorcall: each call made an argument tuple and went through partial's tp_call (about 500
 * instructions an env reset). This one is a vectorcall straight into ``call``. */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *call;          /* rlprof's closure */
    PyObject *original;      /* the env's own method */
    PyObject *dict;          /* the original's __name__, __doc__, __wrapped__... (functools.update_wrapper) */
    PyObject *weakreflist;   /* a bound method takes weak references, and so does the reference */
} TimedMethod;

static PyObject *
timed_method_call(TimedMethod *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(self->call, args, nargsf, kwnames);
}

static PyObject *
timed_method_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *call, *original;
    static char *keywords[] = {"call", "original", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:TimedMethod", keywords, &call, &original)) {
        return NULL;
    }
    if (!PyCallable_Check(call)) {
        PyErr_SetString(PyExc_TypeError, "TimedMethod(): the call must be callable");
        return NULL;
    }
    TimedMethod *self = (TimedMethod *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = (vectorcallfunc)timed_method_call;
    self->call = Py_NewRef(call);
    self->original = Py_NewRef(original);
    self->dict = NULL;
    self->weakreflist = NULL;
    return (PyObject *)self;
}

/* __reduce_ex__(protocol): the original method's, as EnvStep's is its env step's. */
static PyObject *
timed_method_reduce(TimedMethod *self, PyObject *protocol)
{
    if (self->original == NULL) {  /* cleared by the garbage collector, in a finalizer's reach */
        PyErr_SetString(PyExc_TypeError, "cannot reduce a cleared TimedMethod");
        return NULL;
    }
    return PyObject_CallMethodOneArg(self->original, reduce_ex_string, protocol);
}

static int
timed_method_traverse(TimedMethod *self, visitproc visit, void *arg)
{
    Py_VISIT(self->call);
    Py_VISIT(self->original);
    Py_VISIT(self->dict);
    return 0;
}

static int
timed_method_clear(TimedMethod *self)
{
    Py_CLEAR(self->call);
    Py_CLEAR(self->original);
    Py_CLEAR(self->dict);
    return 0;
}

static void
timed_method_dealloc(TimedMethod *self)
{
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    timed_method_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
timed_method_repr(TimedMethod *self)
{
    return PyUnicode_FromFormat("<timed %R>", self->original);
}

static PyMethodDef timed_method_methods[] = {
    {"__reduce_ex__", (PyCFunction)timed_method_reduce, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef timed_method_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TimedMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "envmanager.transport._step_core.TimedMethod",
    .tp_doc = PyDoc_STR("TimedMethod(call, original): call, copied and pickled as the env's method original "
                        "(see timed_method.TimedMethod, the reference)."),
    .tp_basicsize = sizeof(TimedMethod),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(TimedMethod, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_weaklistoffset = offsetof(TimedMethod, weakreflist),
    .tp_new = timed_method_new,
    .tp_methods = timed_method_methods,
    .tp_getset = timed_method_getset,
    .tp_dictoffset = offsetof(TimedMethod, dict),
    .tp_traverse = (traverseproc)timed_method_traverse,
    .tp_clear = (inquiry)timed_method_clear,
    .tp_dealloc = (destructor)timed_method_dealloc,
    .tp_repr = (reprfunc)timed_method_repr,
};

static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyTypeObject *new_node_type, *new_stack_type, *new_sampler_type;
    PyObject *new_timers;
    long new_fold_at;
    if (!PyArg_ParseTuple(args, "O!O!O!Ol:configure", &PyType_Type, &new_node_type, &PyType_Type, &new_stack_type,
                          &PyType_Type, &new_sampler_type, &new_timers, &new_fold_at)) {
        return NULL;
    }
    if (new_fold_at < 1) {
        PyErr_SetString(PyExc_ValueError, "configure(): runs are folded at 1 or more");
        return NULL;
    }
    Py_ssize_t offsets[FIELDS];
    for (int field = 0; field < FIELDS; field++) {
        if ((offsets[field] = slot_offset(new_node_type, field_names[field])) < 0) {
            return NULL;
        }
    }
    Py_ssize_t current = slot_offset(new_stack_type, "current");
    Py_ssize_t timeline = current < 0 ? -1 : slot_offset(new_stack_type, "timeline");
    Py_ssize_t countdown = timeline < 0 ? -1 : slot_offset(new_sampler_type, "countdown");
    if (countdown < 0) {
        return NULL;
    }
    memcpy(field_offsets, offsets, sizeof(offsets));
    held_fold_at = new_fold_at;
    stack_current = current;
    stack_timeline = timeline;
    sampler_countdown = countdown;
    Py_INCREF(new_sampler_type);
    Py_XSETREF(sampler_type, new_sampler_type);
    Py_INCREF(new_node_type);
    Py_XSETREF(node_type, new_node_type);
    Py_INCREF(new_stack_type);
    Py_XSETREF(stack_type, new_stack_type);
    PyObject *new_globals = PyObject_GetAttrString(new_timers, "__dict__");
    if (new_globals == NULL) {
        return NULL;
    }
    if (!PyDict_CheckExact(new_globals)) {
        Py_DECREF(new_globals);
        PyErr_SetString(PyExc_TypeError, "configure() takes the timers module");
        return NULL;
    }
    Py_XSETREF(timers_globals, new_globals);
    Py_INCREF(new_timers);
    Py_XSETREF(timers_module, new_timers);
    Py_RETURN_NONE;
}

/* The trainer's side of a profiled vector step: its step block (a PhasedBlock of
 * profiler/timing/phased_block.py), read at its slots' offsets (``configure_steps`` is handed
 * PhasedBlock once) by StepRecord (_step_record.h), and the timers' globals read as the Python
 * code reads them, at each call. */
enum { BLOCK_NODE, BLOCK_PARENT, BLOCK_STACK, BLOCK_RUNS, BLOCK_FIELDS };
static const char *block_field_names[BLOCK_FIELDS] = {"node", "parent", "stack", "runs"};
static Py_ssize_t block_offsets[BLOCK_FIELDS];
static PyTypeObject *block_type = NULL;   /* PhasedBlock, once configure_steps() ran */
static PyObject *timer_node_globals = NULL; /* profiler.timing.timer_node's __dict__: _clock */
static Py_ssize_t fold_at_runs = 0;       /* phased_block.FOLD_AT_RUNS */
static PyObject *thread_local_string, *stack_string, *current_thread_stack_string;
static PyObject *attach_string, *clock_string, *fold_string;

/* A slot of a PhasedBlock (borrowed; AttributeError for one never set). */
static PyObject *
block_get(PyObject *block, int field)
{
    return get_slot(block, block_offsets[field], block_field_names[field]);
}

/* --- the critical path's count of whole steps, shared by count_whole_steps and StepRecord ------ */

#define MAX_WAIT_BOUNDS 63

/* The critical path's wait bounds, a sequence of at most MAX_WAIT_BOUNDS floats, read into
 * bounds: their number, or -1 with an exception set. */
static Py_ssize_t
read_wait_bounds(PyObject *sequence, double *bounds)
{
    PyObject *fast = PySequence_Fast(sequence, "the bounds must be a sequence of floats");
    if (fast == NULL) {
        return -1;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(fast);
    if (count > MAX_WAIT_BOUNDS) {
        Py_DECREF(fast);
        PyErr_SetString(PyExc_ValueError, "at most 63 bounds");
        return -1;
    }
    for (Py_ssize_t index = 0; index < count; index++) {
        bounds[index] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, index));
        if (bounds[index] == -1.0 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
    }
    Py_DECREF(fast);
    return count;
}

/* One step every worker replied in, counted as whole_steps_in_python counts a row: the wait the
 * last reply alone decided (from the second-to-last reply, or when the trainer began waiting if
 * later; clamped at 0 as numpy.maximum clamps) added to the last worker's sum, and its bucket
 * (numpy.searchsorted(bounds, wait, side="right")) counted. */
static void
count_whole_step(double waiting_since, double last, double second, Py_ssize_t last_worker, int several,
                 const double *bounds, Py_ssize_t bound_count, double *sums, Py_ssize_t *counts)
{
    double began = waiting_since;
    if (several && (second >= waiting_since || isnan(second))) {  /* numpy.maximum(second, since) */
        began = second;
    }
    double wait = last - began;
    if (!(wait >= 0.0 || isnan(wait))) {  /* numpy.maximum(wait, 0.0) */
        wait = 0.0;
    }
    Py_ssize_t bucket = 0;
    while (bucket < bound_count && bounds[bucket] <= wait) {
        bucket++;
    }
    sums[last_worker] += wait;
    counts[last_worker * (bound_count + 1) + bucket] += 1;
}

/* [(worker, wait summed, [count per bucket]), ...] for the workers last in some step counted. */
static PyObject *
whole_steps_per_worker(Py_ssize_t workers, Py_ssize_t bound_count, const double *sums, const Py_ssize_t *counts)
{
    Py_ssize_t buckets = bound_count + 1;
    PyObject *result = PyList_New(0);
    for (Py_ssize_t worker = 0; result != NULL && worker < workers; worker++) {
        Py_ssize_t last_in = 0;
        for (Py_ssize_t bucket = 0; bucket < buckets; bucket++) {
            last_in += counts[worker * buckets + bucket];
        }
        if (last_in == 0) {
            continue;
        }
        PyObject *histogram = PyList_New(buckets);
        for (Py_ssize_t bucket = 0; histogram != NULL && bucket < buckets; bucket++) {
            PyObject *count = PyLong_FromSsize_t(counts[worker * buckets + bucket]);
            if (count == NULL) {
                Py_CLEAR(histogram);
                break;
            }
            PyList_SET_ITEM(histogram, bucket, count);
        }
        PyObject *entry = histogram == NULL ? NULL : Py_BuildValue("(ndN)", worker, sums[worker], histogram);
        if (entry == NULL || PyList_Append(result, entry) < 0) {
            Py_XDECREF(entry);
            Py_CLEAR(result);
            break;
        }
        Py_DECREF(entry);
    }
    return result;
}

#include "_step_record.h"  /* StepRecord: the profiled step's state as one C struct */

/* count_whole_steps(steps, several, bounds, workers): CriticalPath.count_steps's count of the
 * steps every worker replied in, over their float64 table (a row per step: when the trainer began
 * waiting, then each worker's reply stamp; any strides), in one pass instead of a dozen numpy
 * calls. envmanager/measurement/critical_path.py's whole_steps_in_python is the reference, and
 * this gives its very figures: per step the last reply (the first of equal stamps), the wait it
 * alone decided (from the second-to-last reply, or when the trainer began waiting if later;
 * clamped at 0 as numpy.maximum clamps), summed per worker in row order as numpy.bincount sums,
 * and bucketed as numpy.searchsorted(bounds, wait, side="right") buckets. Returns
 * [(worker, wait summed, [count per bucket]), ...] for the workers last in some step. */
static PyObject *
count_whole_steps(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "count_whole_steps() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    int several = PyObject_IsTrue(args[1]);
    Py_ssize_t workers = PyLong_AsSsize_t(args[3]);
    if (several < 0 || (workers < 0 && PyErr_Occurred())) {
        return NULL;
    }
    double bounds[MAX_WAIT_BOUNDS];
    Py_ssize_t bound_count = read_wait_bounds(args[2], bounds);
    if (bound_count < 0) {
        return NULL;
    }
    Py_ssize_t buckets = bound_count + 1;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_RECORDS_RO) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    double *sums = NULL;
    Py_ssize_t *counts = NULL;
    if (view.ndim != 2 || view.itemsize != 8 || view.format == NULL || strcmp(view.format, "d") != 0
        || view.shape[1] != workers + 1 || workers < 1) {
        PyErr_SetString(PyExc_TypeError, "count_whole_steps() takes a float64 table of 1 + workers columns");
        goto done;
    }
    sums = PyMem_Calloc(workers, sizeof(double));
    counts = PyMem_Calloc(workers * buckets, sizeof(Py_ssize_t));
    if (sums == NULL || counts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t rows = view.shape[0], row_stride = view.strides[0], column_stride = view.strides[1];
    for (Py_ssize_t row = 0; row < rows; row++) {
        const char *cells = (const char *)view.buf + row * row_stride;
        double waiting_since = *(const double *)cells;
        double last = *(const double *)(cells + column_stride), second = -INFINITY;
        Py_ssize_t last_worker = 0;
        for (Py_ssize_t worker = 1; worker < workers; worker++) {
            double stamp = *(const double *)(cells + (worker + 1) * column_stride);
            if (stamp > last) {
                second = last;
                last = stamp;
                last_worker = worker;
            }
            else if (stamp > second) {
                second = stamp;
            }
        }
        count_whole_step(waiting_since, last, second, last_worker, several, bounds, bound_count, sums, counts);
    }
    result = whole_steps_per_worker(workers, bound_count, sums, counts);
done:
    PyMem_Free(sums);
    PyMem_Free(counts);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
configure_steps(PyObject *module, PyObject *args)
{
    PyTypeObject *new_block_type;
    PyObject *new_timer_node;
    Py_ssize_t new_fold_at;
    if (!PyArg_ParseTuple(args, "O!On:configure_steps", &PyType_Type, &new_block_type, &new_timer_node,
                          &new_fold_at)) {
        return NULL;
    }
    if (node_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "configure(TimerNode, TimerStack, CpuSampler, timers) must run first");
        return NULL;
    }
    Py_ssize_t offsets[BLOCK_FIELDS];
    for (int field = 0; field < BLOCK_FIELDS; field++) {
        if ((offsets[field] = slot_offset(new_block_type, block_field_names[field])) < 0) {
            return NULL;
        }
    }
    memcpy(block_offsets, offsets, sizeof(offsets));
    fold_at_runs = new_fold_at;
    Py_INCREF(new_block_type);
    Py_XSETREF(block_type, new_block_type);
    PyObject *globals = PyModule_GetDict(new_timer_node);  /* borrowed */
    if (globals == NULL) {
        return NULL;
    }
    Py_INCREF(globals);
    Py_XSETREF(timer_node_globals, globals);
    Py_RETURN_NONE;
}

/* The trainer's reading of a step's wake-up replies: envmanager/transport/wakeup_replies.py holds
 * the reference, take_wakeups_in_python, and says what is taken and what is left. A handle's
 * slots are read at their offsets when it is the type seen last (WorkerHandle), by name else. */
enum { HANDLE_INDEX, HANDLE_AWAITING, HANDLE_OUTSTANDING, HANDLE_READ_AHEAD, HANDLE_FIELDS };
static const char *handle_field_names[HANDLE_FIELDS] = {"index", "awaiting", "outstanding", "read_ahead"};
static PyObject *handle_field_strings[HANDLE_FIELDS];
static Py_ssize_t handle_offsets[HANDLE_FIELDS];
static PyTypeObject *handle_type = NULL;     /* the type whose offsets handle_offsets holds */
static char wakeup_frame_start[8];            /* protocol.STEP_REPLY_FRAME_START */
static Py_ssize_t wakeup_frame_start_size = -1;
static Py_ssize_t wakeup_size = -1;           /* FRAMED_STEP_REPLY_SIZE */
static double wakeup_max_seconds = 0.0;       /* payload.MAX_SECONDS: a stamp at or past it is no clock's */

/* configure_wakeups(frame_start, fields_size, max_seconds): the wake-up's framed bytes. */
static PyObject *
configure_wakeups(PyObject *module, PyObject *args)
{
    const char *start;
    Py_ssize_t start_size, fields_size;
    double max_seconds;
    if (!PyArg_ParseTuple(args, "y#nd:configure_wakeups", &start, &start_size, &fields_size, &max_seconds)) {
        return NULL;
    }
    /* The reply's fields after the start: a sequence number (int64) then the stamp (double). */
    if (start_size < 1 || start_size > (Py_ssize_t)sizeof(wakeup_frame_start) || fields_size != 16) {
        PyErr_SetString(PyExc_ValueError, "configure_wakeups() takes a frame start of 1 to 8 bytes and 16 bytes of fields");
        return NULL;
    }
    memcpy(wakeup_frame_start, start, start_size);
    wakeup_frame_start_size = start_size;
    wakeup_size = start_size + fields_size;
    wakeup_max_seconds = max_seconds;
    Py_RETURN_NONE;
}

/* Whether the handle's slots can be read at offsets: its type is the one seen last, or is now. */
static int
handle_by_offsets(PyObject *handle)
{
    PyTypeObject *type = Py_TYPE(handle);
    if (type == handle_type) {
        return 1;
    }
    Py_ssize_t offsets[HANDLE_FIELDS];
    for (int field = 0; field < HANDLE_FIELDS; field++) {
        if ((offsets[field] = slot_offset(type, handle_field_names[field])) < 0) {
            PyErr_Clear();  /* not slots of that kind: read by name */
            return 0;
        }
    }
    memcpy(handle_offsets, offsets, sizeof(offsets));
    Py_INCREF(type);
    Py_XSETREF(handle_type, type);
    return 1;
}

/* handle.<field> as a new reference. */
static PyObject *
handle_get(PyObject *handle, int by_offsets, int field)
{
    if (by_offsets) {
        PyObject *value = get_slot(handle, handle_offsets[field], handle_field_names[field]);
        Py_XINCREF(value);
        return value;
    }
    return PyObject_GetAttr(handle, handle_field_strings[field]);
}

/* handle.<field> = value (a borrowed reference). */
static int
handle_set(PyObject *handle, int by_offsets, int field, PyObject *value)
{
    if (by_offsets) {
        Py_INCREF(value);
        set_slot(handle, handle_offsets[field], value);
        return 0;
    }
    return PyObject_SetAttr(handle, handle_field_strings[field], value);
}

/* Whether value == number, as Python's == says (-1: an error); an int is its small int here. */
static int
equals(PyObject *value, PyObject *number)
{
    return value == number ? 1 : PyObject_RichCompareBool(value, number, Py_EQ);
}

/* The stamp of a read-ahead that is exactly a step's wake-up, in *stamp: 1; 0 if it is not one. */
static int
wakeup_stamp(PyObject *start, double *stamp)
{
    const char *bytes;
    Py_ssize_t size;
    if (PyBytes_CheckExact(start)) {
        bytes = PyBytes_AS_STRING(start);
        size = PyBytes_GET_SIZE(start);
    }
    else if (PyByteArray_CheckExact(start)) {
        bytes = PyByteArray_AS_STRING(start);
        size = PyByteArray_GET_SIZE(start);
    }
    else {
        return 0;
    }
    if (size != wakeup_size || memcmp(bytes, wakeup_frame_start, wakeup_frame_start_size) != 0) {
        return 0;
    }
    *stamp = PyFloat_Unpack8(bytes + wakeup_frame_start_size + 8, 1);
    return *stamp == -1.0 && PyErr_Occurred() ? -1 : 1;
}

/* list[index] += 1, for any sequence as Python would do it. */
static int
add_one_at(PyObject *counts, PyObject *index)
{
    PyObject *count = PyObject_GetItem(counts, index);
    PyObject *more = count == NULL ? NULL : PyNumber_Add(count, one);
    Py_XDECREF(count);
    if (more == NULL) {
        return -1;
    }
    int failed = PyObject_SetItem(counts, index, more);
    Py_DECREF(more);
    return failed;
}

/* take_wakeups(targets, ready_at, counted, cleared): see wakeup_replies.take_wakeups_in_python. */
static PyObject *
take_wakeups(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "take_wakeups() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    if (wakeup_size < 0) {
        PyErr_SetString(PyExc_RuntimeError, "configure_wakeups() must run first");
        return NULL;
    }
    PyObject *ready_at = args[1], *counted = args[2], *cleared = args[3];
    PyObject *targets = PySequence_Fast(args[0], "take_wakeups() takes a sequence of handles");
    PyObject *left = targets == NULL ? NULL : PyList_New(0);
    if (left == NULL) {
        Py_XDECREF(targets);
        return NULL;
    }
    Py_ssize_t count = PySequence_Fast_GET_SIZE(targets);
    for (Py_ssize_t position = 0; position < count; position++) {
        PyObject *handle = PySequence_Fast_GET_ITEM(targets, position);
        int by_offsets = handle_by_offsets(handle);
        PyObject *value = handle_get(handle, by_offsets, HANDLE_AWAITING);
        int idle = value == NULL ? -1 : equals(value, zero);
        Py_XDECREF(value);
        if (idle != 0) {
            if (idle < 0) {
                goto error;
            }
            continue;
        }
        PyObject *start = handle_get(handle, by_offsets, HANDLE_READ_AHEAD);
        if (start == NULL) {
            goto error;
        }
        int taken = 0;
        if (start != Py_None) {
            value = handle_get(handle, by_offsets, HANDLE_OUTSTANDING);
            int owes_one = value == NULL ? -1 : equals(value, one);
            Py_XDECREF(value);
            double stamp = 0.0;
            int is_wakeup = owes_one == 1 ? wakeup_stamp(start, &stamp) : owes_one;
            if (is_wakeup < 0) {
                Py_DECREF(start);
                goto error;
            }
            taken = is_wakeup && stamp >= 0.0 && stamp < wakeup_max_seconds;
            if (taken) {
                PyObject *index = handle_get(handle, by_offsets, HANDLE_INDEX);
                PyObject *stamp_object = index == NULL ? NULL : PyFloat_FromDouble(stamp);
                int failed = stamp_object == NULL
                    || handle_set(handle, by_offsets, HANDLE_READ_AHEAD, Py_None) < 0
                    || handle_set(handle, by_offsets, HANDLE_OUTSTANDING, zero) < 0
                    || handle_set(handle, by_offsets, HANDLE_AWAITING, zero) < 0
                    || PyObject_SetItem(ready_at, index, stamp_object) < 0
                    || add_one_at(counted, index) < 0
                    || PyObject_SetItem(cleared, index, Py_None) < 0;
                Py_XDECREF(stamp_object);
                Py_XDECREF(index);
                if (failed) {
                    Py_DECREF(start);
                    goto error;
                }
            }
        }
        Py_DECREF(start);
        if (!taken && PyList_Append(left, handle) < 0) {
            goto error;
        }
    }
    Py_DECREF(targets);
    return left;
error:
    Py_DECREF(targets);
    Py_DECREF(left);
    return NULL;
}

/* ReceiveWaits and TimedReceive: the trainer's reads of its vector env's worker replies, each
 * timed where it blocked (see reply_reads.py, whose ReceiveWaits and timed_receive are the
 * reference). The state the timed recv's of one vector env share: whether a timed step_wait runs,
 * the seconds its reads blocked, the run's clock. */
typedef struct {
    PyObject_HEAD
    char active;  /* T_BOOL reads a char */
    double blocked;
    PyObject *clock;
} ReceiveWaits;

static PyTypeObject ReceiveWaitsType;

static PyObject *
receive_waits_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (!_PyArg_NoPositional("ReceiveWaits", args) || !_PyArg_NoKeywords("ReceiveWaits", kwargs)) {
        return NULL;
    }
    ReceiveWaits *self = (ReceiveWaits *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->active = 0;
        self->blocked = 0.0;
        self->clock = Py_NewRef(Py_None);
    }
    return (PyObject *)self;
}

static int
receive_waits_traverse(ReceiveWaits *self, visitproc visit, void *arg)
{
    Py_VISIT(self->clock);
    return 0;
}

static int
receive_waits_clear(ReceiveWaits *self)
{
    Py_CLEAR(self->clock);
    return 0;
}

static void
receive_waits_dealloc(ReceiveWaits *self)
{
    PyObject_GC_UnTrack(self);
    receive_waits_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* begin(clock): a timed step_wait begins; its reads count what they block on `clock`, from 0. */
static PyObject *
receive_waits_begin(ReceiveWaits *self, PyObject *clock)
{
    Py_INCREF(clock);
    Py_SETREF(self->clock, clock);
    self->blocked = 0.0;
    self->active = 1;
    Py_RETURN_NONE;
}

/* end(): the step_wait is over; the seconds its reads blocked. */
static PyObject *
receive_waits_end(ReceiveWaits *self, PyObject *Py_UNUSED(ignored))
{
    self->active = 0;
    return PyFloat_FromDouble(self->blocked);
}

static PyMethodDef receive_waits_methods[] = {
    {"begin", (PyCFunction)receive_waits_begin, METH_O,
     PyDoc_STR("begin(clock): a timed step_wait begins; its reads count what they block on clock, from 0.")},
    {"end", (PyCFunction)receive_waits_end, METH_NOARGS,
     PyDoc_STR("end(): the step_wait is over; the seconds its reads blocked.")},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef receive_waits_members[] = {
    {"active", T_BOOL, offsetof(ReceiveWaits, active), READONLY,
     PyDoc_STR("A timed step_wait runs: the reads wait first, and count what they blocked.")},
    {"blocked", T_DOUBLE, offsetof(ReceiveWaits, blocked), READONLY,
     PyDoc_STR("Seconds the reads blocked since the step_wait began.")},
    {"clock", T_OBJECT, offsetof(ReceiveWaits, clock), READONLY, PyDoc_STR("The run's clock, set by begin().")},
    {NULL},
};

static PyTypeObject ReceiveWaitsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "envmanager.transport._step_core.ReceiveWaits",
    .tp_doc = PyDoc_STR("What one vector env's timed recv's share (see reply_reads.ReceiveWaits, the reference)."),
    .tp_basicsize = sizeof(ReceiveWaits),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = receive_waits_new,
    .tp_traverse = (traverseproc)receive_waits_traverse,
    .tp_clear = (inquiry)receive_waits_clear,
    .tp_dealloc = (destructor)receive_waits_dealloc,
    .tp_members = receive_waits_members,
    .tp_methods = receive_waits_methods,
};

/* One connection's timed recv: its ReceiveWaits, the connection (held as its bound recv holds it:
 * the cycle through the connection's own attribute is broken when the vector env goes, see
 * reply_reads.ReplyReads.attach) and its class's recv, called with it. */
typedef struct {
    PyObject_HEAD
    ReceiveWaits *waits;
    PyObject *connection;
    PyObject *receive;     /* type(connection).recv */
    vectorcallfunc vectorcall;
} TimedReceive;

static PyObject *handle_string;  /* "_handle": a Connection's descriptor, None once closed */

/* The clock's reading in seconds (the system clock read directly where it is time.perf_counter:
 * no float made and freed). */
static int
read_seconds(PyObject *clock, double *seconds)
{
#ifdef HAVE_MONOTONIC_CLOCK
    if (clock == perf_counter) {
        return read_system_clock(seconds);
    }
#endif
    int is_float = 0;
    PyObject *reading = read_clock(clock, seconds, &is_float);
    if (reading == NULL) {
        return -1;
    }
    if (!is_float) {
        *seconds = PyFloat_AsDouble(reading);
    }
    Py_DECREF(reading);
    return *seconds == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* Wait for the connection to be readable, the GIL released, and add the seconds it blocked to
 * the waits: only where it is open and has nothing to read yet (a closed one, or one whose peer
 * closed, is left to the connection's own recv, which raises its own error). 0, or -1 with an
 * exception: a signal handler's, or poll's. */
static int
timed_receive_wait(ReceiveWaits *waits, PyObject *connection)
{
    PyObject *handle = PyObject_GetAttr(connection, handle_string);
    if (handle == NULL) {
        return -1;
    }
    long descriptor = handle == Py_None ? -1 : PyLong_AsLong(handle);
    Py_DECREF(handle);
    if (descriptor == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (descriptor < 0 || descriptor > INT_MAX) {
        return 0;  /* closed */
    }
    struct pollfd pipe = {.fd = (int)descriptor, .events = POLLIN | POLLPRI, .revents = 0};
    if (poll(&pipe, 1, 0) != 0) {
        return 0;  /* readable (or reported otherwise: its own recv finds out) without waiting */
    }
    double start, end;
    if (read_seconds(waits->clock, &start) < 0) {
        return -1;
    }
    for (;;) {
        int reported, failure;
        Py_BEGIN_ALLOW_THREADS
        reported = poll(&pipe, 1, -1);
        failure = errno;
        Py_END_ALLOW_THREADS
        if (reported >= 0) {
            break;
        }
        if (failure != EINTR) {
            errno = failure;
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        if (PyErr_CheckSignals() < 0) {  /* a handler raised (KeyboardInterrupt): as select.poll does */
            return -1;
        }
    }
    if (read_seconds(waits->clock, &end) < 0) {
        return -1;
    }
    waits->blocked += end - start;
    return 0;
}

static PyObject *
timed_receive_call(TimedReceive *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *connection = Py_NewRef(self->connection);  /* held through the call, whatever it drops */
    if (self->waits->active && timed_receive_wait(self->waits, connection) < 0) {
        Py_DECREF(connection);
        return NULL;
    }
    /* The class's recv with the connection first, then the caller's arguments, as the bound method passes them. */
    Py_ssize_t given = PyVectorcall_NARGS(nargsf), keywords = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject *few[8];
    PyObject **arguments = given + keywords + 1 <= 8 ? few : PyMem_New(PyObject *, given + keywords + 1);
    if (arguments == NULL) {
        Py_DECREF(connection);
        return PyErr_NoMemory();
    }
    arguments[0] = connection;
    for (Py_ssize_t index = 0; index < given + keywords; index++) {
        arguments[index + 1] = args[index];
    }
    PyObject *result = PyObject_Vectorcall(self->receive, arguments, (size_t)(given + 1), kwnames);
    if (arguments != few) {
        PyMem_Free(arguments);
    }
    Py_DECREF(connection);
    return result;
}

static PyObject *
timed_receive_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *waits, *connection;
    if (!_PyArg_NoKeywords("TimedReceive", kwargs)
        || !PyArg_ParseTuple(args, "O!O:TimedReceive", &ReceiveWaitsType, &waits, &connection)) {
        return NULL;
    }
    PyObject *receive = PyObject_GetAttrString((PyObject *)Py_TYPE(connection), "recv");
    if (receive == NULL) {
        return NULL;
    }
    TimedReceive *self = (TimedReceive *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(receive);
        return NULL;
    }
    self->waits = (ReceiveWaits *)Py_NewRef(waits);
    self->connection = Py_NewRef(connection);
    self->receive = receive;
    self->vectorcall = (vectorcallfunc)timed_receive_call;
    return (PyObject *)self;
}

static int
timed_receive_traverse(TimedReceive *self, visitproc visit, void *arg)
{
    Py_VISIT(self->waits);
    Py_VISIT(self->connection);
    Py_VISIT(self->receive);
    return 0;
}

static int
timed_receive_clear(TimedReceive *self)
{
    Py_CLEAR(self->waits);
    Py_CLEAR(self->connection);
    Py_CLEAR(self->receive);
    return 0;
}

static void
timed_receive_dealloc(TimedReceive *self)
{
    PyObject_GC_UnTrack(self);
    timed_receive_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject TimedReceiveType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "envmanager.transport._step_core.TimedReceive",
    .tp_doc = PyDoc_STR("TimedReceive(waits, connection): connection.recv, timed where it blocks while "
                        "waits.active (see reply_reads.timed_receive, the reference)."),
    .tp_basicsize = sizeof(TimedReceive),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(TimedReceive, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = timed_receive_new,
    .tp_traverse = (traverseproc)timed_receive_traverse,
    .tp_clear = (inquiry)timed_receive_clear,
    .tp_dealloc = (destructor)timed_receive_dealloc,
};

static PyMethodDef module_functions[] = {
    {"configure", configure, METH_VARARGS,
     PyDoc_STR("configure(TimerNode, TimerStack, CpuSampler, timers module, FOLD_AT_RUNS): where their slots lie, "
               "read once, and at how many held runs step_env folds.")},
    {"configure_steps", configure_steps, METH_VARARGS,
     PyDoc_STR("configure_steps(PhasedBlock, timer_node module, FOLD_AT_RUNS): for StepRecord.")},
    {"count_whole_steps", (PyCFunction)(void (*)(void))count_whole_steps, METH_FASTCALL,
     PyDoc_STR("count_whole_steps(steps, several, bounds, workers): the critical path's count of whole steps.")},
    {"configure_wakeups", configure_wakeups, METH_VARARGS,
     PyDoc_STR("configure_wakeups(frame_start, fields_size, max_seconds): a step's wake-up reply, framed.")},
    {"take_wakeups", (PyCFunction)(void (*)(void))take_wakeups, METH_FASTCALL,
     PyDoc_STR("take_wakeups(targets, ready_at, counted, cleared): the step's wake-up replies taken; "
               "the other awaited handles.")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef step_core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "envmanager.transport._step_core",
    .m_doc = PyDoc_STR("The optional C helper of the env step path (see envmanager/transport/timed_calls.py)."),
    .m_size = -1,
    .m_methods = module_functions,
};

PyMODINIT_FUNC
PyInit__step_core(void)
{
    for (int field = 0; field < FIELDS; field++) {
        if ((field_strings[field] = PyUnicode_InternFromString(field_names[field])) == NULL) {
            return NULL;
        }
    }
    if ((current_string = PyUnicode_InternFromString("current")) == NULL
        || (get_child_string = PyUnicode_InternFromString("get_child")) == NULL
        || (countdown_string = PyUnicode_InternFromString("countdown")) == NULL
        || (step_string = PyUnicode_InternFromString("step")) == NULL
        || (measure_string = PyUnicode_InternFromString("measure")) == NULL
        || (plain_blocks_string = PyUnicode_InternFromString("plain_blocks")) == NULL
        || (span_blocks_string = PyUnicode_InternFromString("span_blocks")) == NULL
        || (deferred_string = PyUnicode_InternFromString("deferred")) == NULL
        || (add_string = PyUnicode_InternFromString("add")) == NULL
        || (thread_local_string = PyUnicode_InternFromString("_thread_local")) == NULL
        || (stack_string = PyUnicode_InternFromString("stack")) == NULL
        || (current_thread_stack_string = PyUnicode_InternFromString("current_thread_stack")) == NULL
        || (attach_string = PyUnicode_InternFromString("_attach")) == NULL
        || (clock_string = PyUnicode_InternFromString("_clock")) == NULL
        || (fold_string = PyUnicode_InternFromString("fold")) == NULL
        || (add_spans_string = PyUnicode_InternFromString("add_spans")) == NULL
        || (add_packed_spans_string = PyUnicode_InternFromString("add_packed_spans")) == NULL
        || (append_string = PyUnicode_InternFromString("append")) == NULL
        || (active_string = PyUnicode_InternFromString("active")) == NULL
        || (quiet_until_string = PyUnicode_InternFromString("quiet_until")) == NULL
        || (reduce_ex_string = PyUnicode_InternFromString("__reduce_ex__")) == NULL
        || (handle_string = PyUnicode_InternFromString("_handle")) == NULL
        || (handle_field_strings[HANDLE_INDEX] = PyUnicode_InternFromString("index")) == NULL
        || (handle_field_strings[HANDLE_AWAITING] = PyUnicode_InternFromString("awaiting")) == NULL
        || (handle_field_strings[HANDLE_OUTSTANDING] = PyUnicode_InternFromString("outstanding")) == NULL
        || (handle_field_strings[HANDLE_READ_AHEAD] = PyUnicode_InternFromString("read_ahead")) == NULL
        || (one = PyLong_FromLong(1)) == NULL || (zero = PyLong_FromLong(0)) == NULL) {
        return NULL;
    }
    PyObject *time_module = PyImport_ImportModule("time");
    if (time_module == NULL) {
        return NULL;
    }
    perf_counter = PyObject_GetAttrString(time_module, "perf_counter");
    Py_DECREF(time_module);
    if (perf_counter == NULL || PyType_Ready(&StepTimerType) < 0 || PyType_Ready(&StepRecordType) < 0
        || PyType_Ready(&EnvStepType) < 0 || PyType_Ready(&FinishStampsType) < 0
        || PyType_Ready(&TimedMethodType) < 0
        || PyType_Ready(&ReceiveWaitsType) < 0 || PyType_Ready(&TimedReceiveType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&step_core_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "StepTimer", (PyObject *)&StepTimerType) < 0
        || PyModule_AddObjectRef(module, "StepRecord", (PyObject *)&StepRecordType) < 0
        || PyModule_AddObjectRef(module, "EnvStep", (PyObject *)&EnvStepType) < 0
        || PyModule_AddObjectRef(module, "TimedMethod", (PyObject *)&TimedMethodType) < 0
        || PyModule_AddObjectRef(module, "FinishStamps", (PyObject *)&FinishStampsType) < 0
        || PyModule_AddObjectRef(module, "ReceiveWaits", (PyObject *)&ReceiveWaitsType) < 0
        || PyModule_AddObjectRef(module, "TimedReceive", (PyObject *)&TimedReceiveType) < 0
        || PyModule_AddIntConstant(module, "VERSION", STEP_CORE_VERSION) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
