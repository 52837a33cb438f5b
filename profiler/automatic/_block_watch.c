/* The optional C wait of the stack sampler (see profiler/automatic/stack_sampler.py).
 *
 * The sampler's thread looks at the trainer's thread every few tens of milliseconds. Most looks
 * in a training loop find a block open, and such a look reads nothing: the blocks already say
 * what that time was. In Python even that look costs the trainer: the sampler's thread must take
 * the GIL to compare two attributes, so the trainer, running Python, is made to hand it over,
 * waits for it back and is put back in the queue for a core (benchmarks/sampler_wakeups.py).
 *
 * BlockWatch does the waiting and the looks that find a block open without the GIL.
 * ``next_look()`` releases the GIL, sleeps until the next look is due (the waits thinning out as
 * the run goes on, as stack_sampler.next_wait says), reads the watched TimerStack's ``current``
 * and ``root`` slots, and counts the look in ``in_blocks`` if they differ. It takes the GIL back
 * only to return: with the seconds since the look before, for a look that found no block open
 * (the Python caller then reads the thread's frame), or with None once ``stop()`` was called.
 *
 * The two slots are read as pointers and compared, never followed, and the BlockWatch holds a
 * reference to the stack, so the read is safe while the trainer's thread moves ``current``: it
 * sees the one value or the other, as a look with the GIL would a moment earlier or later.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <time.h>

#include "_slots_and_clock.h" /* slot_offset */

/* The interface version: profiler/automatic/stack_sampler.py's BLOCK_WATCH_VERSION, which must
 * equal it for the module to be used (see profiler/timing/accelerator.py's load_extension). */
#ifndef BLOCK_WATCH_VERSION
#define BLOCK_WATCH_VERSION 1
#endif

typedef struct {
    PyObject_HEAD
    PyObject *stack;              /* the watched TimerStack */
    Py_ssize_t current_offset;    /* where its ``current`` and ``root`` slots lie */
    Py_ssize_t root_offset;
    double interval;              /* the first looks' interval, the longest, and how fast they thin */
    double longest_interval;
    double thinning;
    double started;               /* monotonic seconds: the watch's start, and the last look */
    double last;
    long long in_blocks;          /* looks that found a block open; written without the GIL */
    int looking;                  /* a next_look() is running (one caller at a time) */
    int stopped;                  /* stop() was called */
    PyThread_type_lock stop_lock; /* held from the start; stop() releases it, ending the wait */
} BlockWatchObject;

static double
monotonic_seconds(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* stack_sampler.next_wait: the first interval, then the time sampled over ``thinning``, at most
 * the longest interval. */
static double
next_wait(BlockWatchObject *self)
{
    double wait = (self->last - self->started) / self->thinning;
    if (wait < self->interval) {
        wait = self->interval;
    }
    return wait < self->longest_interval ? wait : self->longest_interval;
}

static int
block_watch_init(BlockWatchObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"stack", "interval", "longest_interval", "thinning", NULL};
    PyObject *stack;
    double interval, longest_interval, thinning;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "Oddd:BlockWatch", keywords, &stack, &interval,
                                     &longest_interval, &thinning)) {
        return -1;
    }
    if (!(interval > 0.0) || !(longest_interval >= interval) || !(thinning > 0.0)) {
        PyErr_SetString(PyExc_ValueError,
                        "BlockWatch: interval and thinning must be > 0, longest_interval >= interval");
        return -1;
    }
    if (self->stack != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "BlockWatch: already initialised");
        return -1;
    }
    Py_ssize_t current_offset = slot_offset(Py_TYPE(stack), "current");
    Py_ssize_t root_offset = current_offset < 0 ? -1 : slot_offset(Py_TYPE(stack), "root");
    if (root_offset < 0) {
        return -1;
    }
    self->stop_lock = PyThread_allocate_lock();
    if (self->stop_lock == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyThread_acquire_lock(self->stop_lock, WAIT_LOCK);
    Py_INCREF(stack);
    self->stack = stack;
    self->current_offset = current_offset;
    self->root_offset = root_offset;
    self->interval = interval;
    self->longest_interval = longest_interval;
    self->thinning = thinning;
    self->started = self->last = monotonic_seconds();
    return 0;
}

static void
block_watch_dealloc(BlockWatchObject *self)
{
    Py_XDECREF(self->stack);
    if (self->stop_lock != NULL) {
        PyThread_free_lock(self->stop_lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
block_watch_next_look(BlockWatchObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->stack == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "BlockWatch: not initialised");
        return NULL;
    }
    if (self->stopped) {
        Py_RETURN_NONE;
    }
    if (self->looking) {
        PyErr_SetString(PyExc_RuntimeError, "BlockWatch.next_look: another thread is already waiting");
        return NULL;
    }
    self->looking = 1;
    char *stack = (char *)self->stack;
    PyObject **current = (PyObject **)(stack + self->current_offset);
    PyObject **root = (PyObject **)(stack + self->root_offset);
    double elapsed = 0.0;
    int stopped = 0;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        PY_TIMEOUT_T microseconds = (PY_TIMEOUT_T)(next_wait(self) * 1e6);
        if (PyThread_acquire_lock_timed(self->stop_lock, microseconds, 0) == PY_LOCK_ACQUIRED) {
            stopped = 1;
            break;
        }
        double now = monotonic_seconds();
        elapsed = now - self->last;
        self->last = now;
        if (__atomic_load_n(current, __ATOMIC_RELAXED) != __atomic_load_n(root, __ATOMIC_RELAXED)) {
            __atomic_add_fetch(&self->in_blocks, 1, __ATOMIC_RELAXED);
            continue;
        }
        break;
    }
    Py_END_ALLOW_THREADS
    self->looking = 0;
    if (stopped) {
        self->stopped = 1;
        Py_RETURN_NONE;
    }
    return PyFloat_FromDouble(elapsed);
}

static PyObject *
block_watch_stop(BlockWatchObject *self, PyObject *Py_UNUSED(ignored))
{
    if (self->stop_lock != NULL && !self->stopped) {
        self->stopped = 1;
        PyThread_release_lock(self->stop_lock);
    }
    Py_RETURN_NONE;
}

static PyObject *
block_watch_get_in_blocks(BlockWatchObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(__atomic_load_n(&self->in_blocks, __ATOMIC_RELAXED));
}

static PyMethodDef block_watch_methods[] = {
    {"next_look", (PyCFunction)block_watch_next_look, METH_NOARGS,
     "Wait, without the GIL, for the next look that finds no block open: its seconds since the look "
     "before; None once stop() was called."},
    {"stop", (PyCFunction)block_watch_stop, METH_NOARGS,
     "End the wait of next_look() now, and every later one at once."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef block_watch_getset[] = {
    {"in_blocks", (getter)block_watch_get_in_blocks, NULL, "Looks that found a block open.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BlockWatchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "profiler.automatic._block_watch.BlockWatch",
    .tp_doc = PyDoc_STR("BlockWatch(stack, interval, longest_interval, thinning): the stack sampler's "
                        "waits and its looks that find a block open, without the GIL."),
    .tp_basicsize = sizeof(BlockWatchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)block_watch_init,
    .tp_dealloc = (destructor)block_watch_dealloc,
    .tp_methods = block_watch_methods,
    .tp_getset = block_watch_getset,
};

static struct PyModuleDef block_watch_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "profiler.automatic._block_watch",
    .m_doc = "The stack sampler's waits and its looks that find a block open, without the GIL.",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__block_watch(void)
{
    if (PyType_Ready(&BlockWatchType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&block_watch_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "VERSION", BLOCK_WATCH_VERSION) < 0
        || PyModule_AddObjectRef(module, "BlockWatch", (PyObject *)&BlockWatchType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
