/* The trainer's side of a profiled vector step as one C struct: included by _step_core.c, whose
 * helpers (slots, the clock, the timers' globals, the critical path's count of a whole step) it uses.
 *
 * envmanager/transport/step_stamps.py holds the reference, StepRecordInPython, and says what each
 * method does. A StepRecord keeps the step's stamps as doubles and counts each closed run at once
 * into sums held here: the step block's and its three phases' totals, counts and extremes, and the
 * critical path's (the steps every worker replied in, per worker the wait it decided as last and
 * its histogram). No object is made per step but the node's start (a live view reads it), and no
 * tuple is kept: the reference keeps a tuple of the run's stamps and folds them with numpy, which
 * was most of what profiling added to the trainer's step (benchmarks/trainer_step_instructions.py).
 * The sums go to the nodes and to the critical path when the block folds (its ``accumulator``):
 * at FOLD_AT_RUNS runs, as the reference folds, and before anything reads the tree. A run with a
 * stamp that is not a float (a worker that did not reply: None) is kept as the reference keeps it,
 * a tuple in the block's runs, and counted by the block's own fold. So is every run while the
 * timeline records spans (timers.span_blocks): the block's fold records a run's spans from its
 * stamps, as the reference's runs. */

#define RECORD_NODES 4  /* the step block, then its phases: sending, waiting, receiving */

typedef struct {
    PyObject_HEAD
    PyObject *block;          /* the PhasedBlock */
    PyObject *ready_at;       /* the pool's list of each worker's reply stamp, filled in place */
    PyObject *on_whole_steps; /* add_whole_steps(steps, [(worker, wait summed, counts), ...]) or None */
    PyObject *local;          /* the timers' _thread_local the stack below was found through */
    uint64_t thread_id;       /* and the thread it is the stack of */
    PyObject *stack;
    PyObject *clock;          /* the timers' clock, read at open */
    int clock_is_system;
    double start, sent, waited, waiting_since;
    int reached;              /* phase ends stamped since open: 0, 1 (sent) or 2 (waited) */
    int keeps_tuple;          /* opened while the timeline records spans: the run is kept as a tuple */
    Py_ssize_t workers;
    int several;
    Py_ssize_t bound_count;
    double bounds[MAX_WAIT_BOUNDS];
    Py_ssize_t held;          /* runs counted here, not yet folded */
    double totals[RECORD_NODES], shortest[RECORD_NODES], longest[RECORD_NODES];
    double *wait_sums;        /* per worker */
    Py_ssize_t *counts;       /* per worker, per bucket */
} StepRecord;

static void
record_clear_sums(StepRecord *self)
{
    self->held = 0;
    for (int node = 0; node < RECORD_NODES; node++) {
        self->totals[node] = 0.0;
        self->shortest[node] = INFINITY;
        self->longest[node] = -INFINITY;
    }
    memset(self->wait_sums, 0, self->workers * sizeof(double));
    memset(self->counts, 0, self->workers * (self->bound_count + 1) * sizeof(Py_ssize_t));
}

/* One reading of the clock read at open, as a double. */
static int
record_read_clock(StepRecord *self, double *seconds)
{
#ifdef HAVE_MONOTONIC_CLOCK
    if (self->clock_is_system) {
        return read_system_clock(seconds);
    }
#endif
    PyObject *reading = PyObject_CallNoArgs(self->clock);
    if (reading == NULL) {
        return -1;
    }
    *seconds = PyFloat_AsDouble(reading);
    Py_DECREF(reading);
    return *seconds == -1.0 && PyErr_Occurred() ? -1 : 0;
}

/* The calling thread's timer stack (borrowed from the cache), as timers.current_thread_stack(). */
static PyObject *
record_stack(StepRecord *self)
{
    PyObject *local = module_global(timers_globals, thread_local_string, &thread_local_cache);  /* borrowed */
    if (local == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_AttributeError, "module 'profiler.timing.timers' has no attribute '_thread_local'");
        }
        return NULL;
    }
    uint64_t thread_id = PyThreadState_GetID(PyThreadState_Get());
    if (local == self->local && thread_id == self->thread_id && self->stack != NULL) {
        return self->stack;
    }
    PyObject *stack = PyObject_GetAttr(local, stack_string);
    if (stack == NULL) {  /* the thread's first block */
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return NULL;
        }
        PyErr_Clear();
        if ((stack = PyObject_CallMethodNoArgs(timers_module, current_thread_stack_string)) == NULL) {
            return NULL;
        }
    }
    Py_INCREF(local);
    Py_XSETREF(self->local, local);
    Py_XSETREF(self->stack, stack);
    self->thread_id = thread_id;
    return stack;
}

/* open(): the block opened in the calling thread, its node returned; None, opening nothing, when
 * the step cannot be timed from stamps now (timing off or paused, a companion other than the
 * timeline watches blocks). */
static PyObject *
record_open(StepRecord *self, PyObject *Py_UNUSED(ignored))
{
    int on = plain_blocks_now();
    int spans = 0;
    if (on == 0) {
        on = spans = span_blocks_now();
    }
    if (on <= 0) {
        return on < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *stack = record_stack(self);
    if (stack == NULL) {
        return NULL;
    }
    Py_INCREF(stack);  /* attaching runs Python code, which may drop the cache's reference */
    PyObject *node = NULL;
    PyObject *current = stack_get_current(stack);
    PyObject *parent = current == NULL ? NULL : block_get(self->block, BLOCK_PARENT);
    if (parent == NULL) {
        goto done;
    }
    if (current != parent) {
        PyObject *attached = PyObject_CallMethodOneArg(self->block, attach_string, stack);
        if (attached == NULL) {
            goto done;
        }
        Py_DECREF(attached);
    }
    node = block_get(self->block, BLOCK_NODE);
    if (node == NULL) {
        goto done;
    }
    Py_INCREF(node);
    PyObject *clock = module_global(timer_node_globals, clock_string, &clock_cache);  /* borrowed */
    if (clock == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_AttributeError, "module 'profiler.timing.timer_node' has no attribute '_clock'");
        }
        Py_CLEAR(node);
        goto done;
    }
    Py_INCREF(clock);
    Py_XSETREF(self->clock, clock);
    self->clock_is_system = clock == perf_counter;
    if (stack_set_current(stack, node) < 0 || record_read_clock(self, &self->start) < 0
        || node_set(node, START, PyFloat_FromDouble(self->start)) < 0) {
        Py_CLEAR(node);
        goto done;
    }
    self->reached = 0;
    self->keeps_tuple = spans;
done:
    Py_XDECREF(current);
    Py_DECREF(stack);
    return node;
}

/* sent(): the sending phase ended now; the trainer began waiting then (on time.perf_counter, the
 * workers' clock, where the timers' clock is another). */
static PyObject *
record_sent(StepRecord *self, PyObject *Py_UNUSED(ignored))
{
    if (record_read_clock(self, &self->sent) < 0) {
        return NULL;
    }
    self->waiting_since = self->sent;
    if (!self->clock_is_system) {
        PyObject *now = PyObject_CallNoArgs(perf_counter);
        if (now == NULL) {
            return NULL;
        }
        self->waiting_since = PyFloat_AsDouble(now);
        Py_DECREF(now);
    }
    self->reached = 1;
    Py_RETURN_NONE;
}

/* waited(): the waiting phase ended now. */
static PyObject *
record_waited(StepRecord *self, PyObject *Py_UNUSED(ignored))
{
    if (record_read_clock(self, &self->waited) < 0) {
        return NULL;
    }
    self->reached = 2;
    Py_RETURN_NONE;
}

static PyObject *
record_fold_block(StepRecord *self)
{
    return PyObject_CallMethodNoArgs(self->block, fold_string);
}

/* A run with a stamp that is not a float, kept as the reference keeps every run: the tuple
 * (start, sent, waited, end, waiting_since, *ready_at) in the block's runs. */
static int
record_keep_tuple(StepRecord *self, double end, PyObject *ready_at)
{
    Py_ssize_t replies = PyList_GET_SIZE(ready_at);
    PyObject *run = PyTuple_New(5 + replies);
    if (run == NULL) {
        return -1;
    }
    double stamps[5] = {self->start, self->sent, self->waited, end, self->waiting_since};
    for (int index = 0; index < 5; index++) {
        PyObject *stamp = PyFloat_FromDouble(stamps[index]);
        if (stamp == NULL) {
            Py_DECREF(run);
            return -1;
        }
        PyTuple_SET_ITEM(run, index, stamp);
    }
    for (Py_ssize_t index = 0; index < replies; index++) {
        PyTuple_SET_ITEM(run, 5 + index, Py_NewRef(PyList_GET_ITEM(ready_at, index)));
    }
    PyObject *runs = block_get(self->block, BLOCK_RUNS);
    int appended = runs == NULL ? -1 : PyList_Append(runs, run);
    Py_DECREF(run);
    return appended;
}

/* close(): the block closed now, with each worker's reply stamp in ready_at (None: no reply). */
static PyObject *
record_close(StepRecord *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *ready_at = self->ready_at;
    if (PyList_GET_SIZE(ready_at) != self->workers || self->reached != 2) {
        PyErr_SetString(PyExc_TypeError, "close() comes after sent() and waited(), with a stamp per worker");
        return NULL;
    }
    double end;
    if (record_read_clock(self, &end) < 0) {
        return NULL;
    }
    PyObject *stack = block_get(self->block, BLOCK_STACK);
    PyObject *parent = stack == NULL ? NULL : block_get(self->block, BLOCK_PARENT);
    if (parent == NULL || stack_set_current(stack, parent) < 0) {
        return NULL;
    }
    self->reached = -1;
    PyObject *runs = block_get(self->block, BLOCK_RUNS);
    if (runs == NULL || !PyList_CheckExact(runs)) {
        PyErr_SetString(PyExc_TypeError, "the block's runs are not a list");
        return NULL;
    }
    if (self->keeps_tuple) {
        if (record_keep_tuple(self, end, ready_at) < 0) {
            return NULL;
        }
        goto maybe_fold;
    }
    /* Per step the critical path's figures, as count_whole_steps counts a row. */
    double last = 0.0, second = -INFINITY;
    Py_ssize_t last_worker = 0;
    for (Py_ssize_t worker = 0; worker < self->workers; worker++) {
        PyObject *item = PyList_GET_ITEM(ready_at, worker);
        if (!PyFloat_CheckExact(item)) {
            if (record_keep_tuple(self, end, ready_at) < 0) {
                return NULL;
            }
            goto maybe_fold;
        }
        double stamp = PyFloat_AS_DOUBLE(item);
        if (worker == 0) {
            last = stamp;
        }
        else if (stamp > last) {
            second = last;
            last = stamp;
            last_worker = worker;
        }
        else if (stamp > second) {
            second = stamp;
        }
    }
    count_whole_step(self->waiting_since, last, second, last_worker, self->several, self->bounds, self->bound_count,
                     self->wait_sums, self->counts);
    double elapsed[RECORD_NODES] = {end - self->start, self->sent - self->start, self->waited - self->sent,
                                    end - self->waited};
    for (int node = 0; node < RECORD_NODES; node++) {
        self->totals[node] += elapsed[node];
        if (elapsed[node] < self->shortest[node]) {
            self->shortest[node] = elapsed[node];
        }
        if (elapsed[node] > self->longest[node]) {
            self->longest[node] = elapsed[node];
        }
    }
    self->held += 1;
maybe_fold:
    if (self->held + PyList_GET_SIZE(runs) >= fold_at_runs) {
        return record_fold_block(self);
    }
    Py_RETURN_NONE;
}

/* fail(): the block closed now as an exception leaving it: PhasedBlock.fail with the phase ends
 * stamped (None for those not reached). */
static PyObject *
record_fail(StepRecord *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *sent = self->reached >= 1 ? PyFloat_FromDouble(self->sent) : Py_NewRef(Py_None);
    PyObject *waited = self->reached >= 2 ? PyFloat_FromDouble(self->waited) : Py_NewRef(Py_None);
    PyObject *result = NULL;
    if (sent != NULL && waited != NULL) {
        self->reached = -1;
        result = PyObject_CallMethod(self->block, "fail", "OO", sent, waited);
    }
    Py_XDECREF(sent);
    Py_XDECREF(waited);
    return result;
}

/* node.<field> = node.<field> + value, or the extreme of the two (op Py_GT: the larger). */
static int
record_add_to(PyObject *node, int field, double value, int op)
{
    PyObject *mine = node_get(node, field);
    if (mine == NULL) {
        return -1;
    }
    PyObject *theirs = PyFloat_FromDouble(value);
    PyObject *updated = NULL;
    if (theirs != NULL) {
        if (op == -1) {
            updated = PyNumber_Add(mine, theirs);
        }
        else {
            int replace = PyObject_RichCompareBool(theirs, mine, op);
            updated = replace < 0 ? NULL : Py_NewRef(replace ? theirs : mine);
        }
    }
    Py_DECREF(mine);
    Py_XDECREF(theirs);
    return node_set(node, field, updated);
}

static int
record_add_count(PyObject *node, Py_ssize_t runs)
{
    PyObject *mine = node_get(node, COUNT);
    PyObject *more = mine == NULL ? NULL : PyLong_FromSsize_t(runs);
    PyObject *updated = more == NULL ? NULL : PyNumber_Add(mine, more);
    Py_XDECREF(mine);
    Py_XDECREF(more);
    return node_set(node, COUNT, updated);
}

/* fold(): the runs counted here added to the block's nodes (as PhasedBlock's fold adds a table of
 * runs: the sum, the count, the extremes) and the whole steps to the critical path; called by the
 * block's fold, under its lock. */
static PyObject *
record_fold(StepRecord *self, PyObject *Py_UNUSED(ignored))
{
    if (self->held == 0) {
        Py_RETURN_NONE;
    }
    PyObject *node = block_get(self->block, BLOCK_NODE);
    PyObject *phases = node == NULL ? NULL : PyObject_GetAttrString(self->block, "_phases");
    if (phases == NULL) {
        return NULL;
    }
    if (!PyTuple_CheckExact(phases) || PyTuple_GET_SIZE(phases) != RECORD_NODES - 1) {
        Py_DECREF(phases);
        PyErr_SetString(PyExc_TypeError, "a StepRecord's block has three phases");
        return NULL;
    }
    for (int index = 0; index < RECORD_NODES; index++) {
        PyObject *target = index == 0 ? node : PyTuple_GET_ITEM(phases, index - 1);
        if (record_add_to(target, TOTAL, self->totals[index], -1) < 0 || record_add_count(target, self->held) < 0
            || record_add_to(target, MAX, self->longest[index], Py_GT) < 0
            || record_add_to(target, MIN, self->shortest[index], Py_LT) < 0) {
            Py_DECREF(phases);
            return NULL;
        }
    }
    Py_DECREF(phases);
    Py_ssize_t steps = self->held;
    PyObject *per_worker = whole_steps_per_worker(self->workers, self->bound_count, self->wait_sums, self->counts);
    record_clear_sums(self);
    if (per_worker == NULL) {
        return NULL;
    }
    PyObject *result = Py_NewRef(Py_None);
    if (self->on_whole_steps != Py_None) {
        Py_DECREF(result);
        result = PyObject_CallFunction(self->on_whole_steps, "nO", steps, per_worker);
    }
    Py_DECREF(per_worker);
    return result;
}

/* drop(): forget the runs counted here (the timer stack they ran in was reset). */
static PyObject *
record_drop(StepRecord *self, PyObject *Py_UNUSED(ignored))
{
    record_clear_sums(self);
    Py_RETURN_NONE;
}

/* StepRecord(block, ready_at, bounds, on_whole_steps): see step_stamps.StepRecordInPython. */
static PyObject *
record_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"block", "ready_at", "bounds", "on_whole_steps", NULL};
    PyObject *block, *ready_at, *bounds, *on_whole_steps;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!OO:StepRecord", keywords, &block, &PyList_Type, &ready_at,
                                     &bounds, &on_whole_steps)) {
        return NULL;
    }
    Py_ssize_t workers = PyList_GET_SIZE(ready_at);
    if (block_type == NULL || !Py_IS_TYPE(block, block_type) || !PyList_CheckExact(ready_at) || workers < 1) {
        PyErr_SetString(PyExc_TypeError, "StepRecord() takes a PhasedBlock and a list of at least one worker's stamp");
        return NULL;
    }
    StepRecord *self = (StepRecord *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->bound_count = read_wait_bounds(bounds, self->bounds);
    if (self->bound_count < 0) {
        Py_DECREF(self);
        return NULL;
    }
    self->block = Py_NewRef(block);
    self->ready_at = Py_NewRef(ready_at);
    self->on_whole_steps = Py_NewRef(on_whole_steps);
    self->workers = workers;
    self->several = workers > 1;
    self->reached = -1;
    self->wait_sums = PyMem_Calloc(workers, sizeof(double));
    self->counts = PyMem_Calloc(workers * (self->bound_count + 1), sizeof(Py_ssize_t));
    if (self->wait_sums == NULL || self->counts == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    record_clear_sums(self);
    return (PyObject *)self;
}

static int
record_traverse(StepRecord *self, visitproc visit, void *arg)
{
    Py_VISIT(self->block);
    Py_VISIT(self->ready_at);
    Py_VISIT(self->on_whole_steps);
    Py_VISIT(self->local);
    Py_VISIT(self->stack);
    Py_VISIT(self->clock);
    return 0;
}

static int
record_clear(StepRecord *self)
{
    Py_CLEAR(self->block);
    Py_CLEAR(self->ready_at);
    Py_CLEAR(self->on_whole_steps);
    Py_CLEAR(self->local);
    Py_CLEAR(self->stack);
    Py_CLEAR(self->clock);
    return 0;
}

static void
record_dealloc(StepRecord *self)
{
    PyObject_GC_UnTrack(self);
    record_clear(self);
    PyMem_Free(self->wait_sums);
    PyMem_Free(self->counts);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
record_get_block(StepRecord *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->block);
}

static PyObject *
record_get_held(StepRecord *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->held);
}

static PyGetSetDef record_getset[] = {
    {"block", (getter)record_get_block, NULL, PyDoc_STR("the step's PhasedBlock"), NULL},
    {"held", (getter)record_get_held, NULL, PyDoc_STR("runs counted here and not yet folded"), NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef record_methods[] = {
    {"open", (PyCFunction)record_open, METH_NOARGS, PyDoc_STR("open(): the block opened; its node, or None.")},
    {"sent", (PyCFunction)record_sent, METH_NOARGS, PyDoc_STR("sent(): the sending phase ended now.")},
    {"waited", (PyCFunction)record_waited, METH_NOARGS, PyDoc_STR("waited(): the waiting phase ended now.")},
    {"close", (PyCFunction)record_close, METH_NOARGS, PyDoc_STR("close(): the block closed now, the run counted.")},
    {"fail", (PyCFunction)record_fail, METH_NOARGS, PyDoc_STR("fail(): the block closed by an exception.")},
    {"fold", (PyCFunction)record_fold, METH_NOARGS, PyDoc_STR("fold(): the runs counted here into the nodes.")},
    {"drop", (PyCFunction)record_drop, METH_NOARGS, PyDoc_STR("drop(): the runs counted here forgotten.")},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject StepRecordType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "envmanager.transport._step_core.StepRecord",
    .tp_basicsize = sizeof(StepRecord),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = PyDoc_STR("The trainer's side of a profiled vector step, its sums held in C."),
    .tp_new = record_new,
    .tp_traverse = (traverseproc)record_traverse,
    .tp_clear = (inquiry)record_clear,
    .tp_dealloc = (destructor)record_dealloc,
    .tp_methods = record_methods,
    .tp_getset = record_getset,
};
