/* The optional C pass-through of nested nn.Module calls (see profiler/automatic/torch_phases.py).
 *
 * torch_phases times the outermost module call of each thread: a module called while another
 * module's call is open (a layer of the policy) is not a block of its own and must go straight
 * on to torch's own ``Module.__call__``. In Python that pass-through is one more Python call per
 * layer call (a frame, the arguments packed into a tuple and a dict and unpacked again, and a
 * threading.local lookup): most of what the framework phases cost a policy call. Here it is a C
 * callable, put in place of ``Module.__call__``, that forwards the call's own argument vector
 * (vectorcall, nothing packed) to torch's ``__call__`` while this thread's depth is nonzero, and
 * to the Python wrapper (which times the call) otherwise.
 *
 * ThreadDepth is that depth: one counter per thread, kept in a C thread-local variable, read and
 * written through the ``value`` attribute of any ThreadDepth object. torch_phases keeps it where
 * it kept ``depth`` on its threading.local (every module call, model-level block and
 * ``inside_model_call`` moves it), so the pass-through and the Python code see the same count.
 * A new thread starts at 0, as a threading.local's ``__init__`` set it.
 *
 * The warm path of a timed call is here too. A call at depth 0 of a module whose block names
 * torch_phases already cached, made inside an open model method (the policy's actor and critic
 * inside CleanRL's ``get_action_and_value``) or, with none open, when no update starts and its
 * caller's frames were read already (SB3's policy forward in ``collect_rollouts``), opens its
 * block, calls torch's ``__call__`` and closes the block without a Python frame; and a model
 * method wrapped by torch_phases is a
 * ModelMethodGate, which times a call of a class whose block names are cached the same way (the
 * Python wrapper ``model_method_timed`` is what it falls back to, and the reference). Python
 * frames, packed ``*args, **kwargs`` and the ``with`` statements' bytecode were most of what a
 * policy call's three blocks cost (benchmarks/phases_instructions.py). ``configure`` hands both
 * gates torch_phases' own state (its threading.local, the cached names, the learning methods,
 * ``torch.is_grad_enabled``, ``_open_update``), the timers module, whose ``hierarchical_timer`` is
 * read at each call as the Python wrappers read it, and the timer core's ``block_api``
 * (profiler/timing/_timer_core_api.h), which runs each block: the node's own C methods called
 * directly, where Python's protocols would look up and call ``__enter__`` and ``__exit__``. The
 * threading.local is read through the calling thread's own dict of it, remembered in the thread
 * state (thread_phase_dict). Whatever the warm
 * path does not cover (the first call of a module or class, discovery of the model method, module
 * scopes, an update a module call starts, a caller not read yet) goes to the Python wrapper,
 * before anything was changed.
 *
 * The pure-Python path (RLPROF_PURE_PYTHON=1, or no compiler at install) is the reference: a
 * threading.local for the depth and the Python wrappers for every call, which do the same tests.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include "_remembered_reads.h"
#include "_timer_core_api.h"

/* The interface version: profiler/automatic/torch_phases.py's MODULE_CALL_CORE_VERSION, which must
 * equal it for the module to be used. Raise both together whenever this file changes what Python
 * sees: a build left from older sources then says it is stale and the Python pass-through runs
 * (see profiler/timing/accelerator.py's load_extension). */
#ifndef MODULE_CALL_CORE_VERSION
#define MODULE_CALL_CORE_VERSION 3
#endif

static _Thread_local Py_ssize_t thread_depth = 0;

/* --- ThreadDepth: the calling thread's depth, as an attribute ------------------------------------ */

typedef struct {
    PyObject_HEAD
} ThreadDepthObject;

static PyObject *
depth_get(PyObject *self, void *closure)
{
    return PyLong_FromSsize_t(thread_depth);
}

static int
depth_set(PyObject *self, PyObject *value, void *closure)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "a thread's depth cannot be deleted");
        return -1;
    }
    Py_ssize_t depth = PyLong_AsSsize_t(value);
    if (depth == -1 && PyErr_Occurred()) {
        return -1;
    }
    thread_depth = depth;
    return 0;
}

static PyGetSetDef depth_getset[] = {
    {"value", depth_get, depth_set,
     PyDoc_STR("How many module calls and model-level blocks are open in the calling thread."), NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ThreadDepthType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "profiler.automatic._module_call_core.ThreadDepth",
    .tp_basicsize = sizeof(ThreadDepthObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = PyDoc_STR("ThreadDepth(): ``value`` is the calling thread's depth (a C thread-local)."),
    .tp_getset = depth_getset,
    .tp_new = PyType_GenericNew,
};


/* --- the warm path: torch_phases' state, handed over by configure() ----------------------------- */

static PyObject *phase_state = NULL;       /* torch_phases._state: a threading.local */
static PyObject *module_names = NULL;      /* torch_phases._names: id -> (weakref, name, no-grad name) */
static PyObject *learning_methods = NULL;  /* torch_phases._learning_methods: ids of code objects */
static PyObject *grad_enabled = NULL;      /* torch.is_grad_enabled */
static PyObject *open_update = NULL;       /* torch_phases._open_update(state) */
static PyObject *callers_read = NULL;      /* torch_phases._callers_read: ids of the callers already read */
static PyObject *torch_folder = NULL;      /* torch_phases._torch_folder: where torch's own code lies */
static PyObject *timers_globals = NULL;    /* profiler.timing.timers.__dict__ */
static const TimerCoreAPI *timer_core = NULL; /* the timer core's block_api: how a block is run */
static PyObject *open_methods_name, *update_block_name, *training_name, *hierarchical_timer_name, *dict_name;

/* torch.is_grad_enabled(), as 1 or 0; -1 on error. */
static int
read_grad_enabled(void)
{
    PyObject *enabled = PyObject_CallNoArgs(grad_enabled);
    if (enabled == NULL) {
        return -1;
    }
    int truth = PyObject_IsTrue(enabled);
    Py_DECREF(enabled);
    return truth;
}

/* ``owner.__dict__`` as a new reference when it is a dict; else NULL with an error (a TypeError
 * saying ``refusal`` when it is something else). */
static PyObject *
dict_of(PyObject *owner, const char *refusal)
{
    PyObject *found = PyObject_GetAttr(owner, dict_name);
    if (found != NULL && !PyDict_CheckExact(found)) {
        Py_DECREF(found);
        PyErr_SetString(PyExc_TypeError, refusal);
        return NULL;
    }
    return found;
}

/* This thread's torch_phases._state.__dict__ as found last (see _remembered_reads.h). */
static _Thread_local ThreadFound found_phase_dict;

/* This thread's torch_phases._state.__dict__ (borrowed), or NULL with an error: what the
 * threading.local keeps for the calling thread, remembered in the thread's state dict under the
 * local itself, and in found_phase_dict for the thread's next call. Reading an attribute through
 * the local costs several dict lookups and a type lookup; through this, none while the same thread
 * asks. A thread's dict on a given local is made at its first use and never replaced, and the
 * thread's state dict goes (and the reference with it) when the thread does; a forked child's
 * thread keeps both, as it keeps the local's dict. */
static PyObject *
thread_phase_dict(void)
{
    PyObject *phase_dict = thread_dict_item(&found_phase_dict, phase_state);
    if (phase_dict != NULL || PyErr_Occurred()) {
        return phase_dict;
    }
    phase_dict = dict_of(phase_state, "torch_phases' state has no dict of its own");  /* its __init__ runs here, once */
    if (phase_dict == NULL) {
        return NULL;
    }
    int kept = keep_thread_dict_item(&found_phase_dict, phase_state, phase_dict);
    Py_DECREF(phase_dict);  /* the thread's state dict holds it */
    if (kept != 0) {
        if (kept > 0) {
            PyErr_SetString(PyExc_RuntimeError, "no thread state dict to keep torch_phases' state in");
        }
        return NULL;
    }
    return phase_dict;
}

/* torch_phases._state.<name> in the calling thread: a new reference, or NULL with an error
 * (AttributeError when the state lacks it, as reading the attribute would raise). */
static PyObject *
thread_phase(PyObject *name)
{
    PyObject *phase_dict = thread_phase_dict();
    if (phase_dict == NULL) {
        return NULL;
    }
    PyObject *value = PyDict_GetItemWithError(phase_dict, name);
    if (value == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_AttributeError, "torch_phases' state has no attribute %R", name);
        }
        return NULL;
    }
    return Py_NewRef(value);
}

/* This thread's torch_phases._state.open_methods, a new reference to a list; NULL (and no error
 * set) when it is not a list, or on an error (set). */
static PyObject *
thread_open_methods(void)
{
    PyObject *open = thread_phase(open_methods_name);
    if (open != NULL && !PyList_CheckExact(open)) {
        Py_CLEAR(open);
    }
    return open;
}

static GlobalCache hierarchical_timer_cache;

/* with timers.hierarchical_timer(name): return target(*args) -- hierarchical_timer read from the
 * module (again each time its dict changed), the block run by the timer core (see
 * _timer_core_api.h). */
static PyObject *
call_in_named_block(PyObject *name, PyObject *target, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *lookup = module_global(timers_globals, hierarchical_timer_name, &hierarchical_timer_cache);
    if (lookup == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_RuntimeError, "profiler.timing.timers has no hierarchical_timer");
        }
        return NULL;
    }
    Py_INCREF(lookup);
    PyObject *result = timer_core->call_in_named_block(lookup, name, target, args, nargsf, kwnames);
    Py_DECREF(lookup);
    return result;
}

static PyObject *
configure(PyObject *module, PyObject *args)
{
    PyObject *state, *names, *learning, *read, *folder, *grad, *opener, *timers, *api;
    if (!PyArg_ParseTuple(args, "OO!O!O!UOOOO:configure", &state, &PyDict_Type, &names, &PyDict_Type, &learning,
                          &PyDict_Type, &read, &folder, &grad, &opener, &timers, &api)) {
        return NULL;
    }
    const TimerCoreAPI *core = PyCapsule_GetPointer(api, TIMER_CORE_API_CAPSULE);
    if (core == NULL) {
        return NULL;
    }
    if (!PyCallable_Check(grad) || !PyCallable_Check(opener)) {
        PyErr_SetString(PyExc_TypeError, "configure() takes torch.is_grad_enabled and _open_update as callables");
        return NULL;
    }
    PyObject *globals = dict_of(timers, "configure() takes the timers module");
    if (globals == NULL) {
        return NULL;
    }
    Py_XSETREF(timers_globals, globals);
    timer_core = core;
    Py_XSETREF(phase_state, Py_NewRef(state));
    Py_XSETREF(module_names, Py_NewRef(names));
    Py_XSETREF(learning_methods, Py_NewRef(learning));
    Py_XSETREF(callers_read, Py_NewRef(read));
    Py_XSETREF(torch_folder, Py_NewRef(folder));
    Py_XSETREF(grad_enabled, Py_NewRef(grad));
    Py_XSETREF(open_update, Py_NewRef(opener));
    Py_RETURN_NONE;
}

/* --- NestedCallGate: Module.__call__ ------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *nested;     /* torch's own Module.__call__: what a nested call goes to */
    PyObject *outermost;  /* the Python wrapper: what a call at depth 0 goes to */
    PyObject *dict;       /* functools.update_wrapper's __name__, __doc__, __wrapped__ */
    char pass_nested;     /* False while module scopes make nested calls blocks too */
    char time_outermost;  /* whether a call at depth 0 may be timed here (the warm path) */
} GateObject;

/* The block names of ``module``'s forward from torch_phases._names (a borrowed tuple), or NULL
 * (no error) when none are cached for it: the Python wrapper reads its caller to name it. */
static PyObject *
cached_module_names(PyObject *module)
{
    PyObject *key = PyLong_FromVoidPtr(module);
    if (key == NULL) {
        return NULL;
    }
    PyObject *names = PyDict_GetItemWithError(module_names, key);
    Py_DECREF(key);
    if (names == NULL || !PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) != 3
        || !PyWeakref_CheckRef(PyTuple_GET_ITEM(names, 0))
        || PyWeakref_GET_OBJECT(PyTuple_GET_ITEM(names, 0)) != module) {
        return NULL;  /* not cached, or an entry left by a module gone whose id this one took */
    }
    return names;
}

/* With no model method open, whether the Python wrapper has nothing to do before the block: no
 * update to start (``grad`` off, the thread not training yet, or an update open) and a caller
 * whose frames it read already (the frame that called the gate, outside torch). 1, 0, or -1. */
static int
nothing_before_block(int grad)
{
    if (grad) {
        PyObject *update_block = thread_phase(update_block_name);
        if (update_block == NULL) {
            return -1;
        }
        Py_DECREF(update_block);
        if (update_block == Py_None) {
            PyObject *training = thread_phase(training_name);
            if (training == NULL) {
                return -1;
            }
            int truth = PyObject_IsTrue(training);
            Py_DECREF(training);
            if (truth != 0) {
                return truth < 0 ? -1 : 0;
            }
        }
    }
    PyFrameObject *frame = PyEval_GetFrame();  /* borrowed: the Python code that called the gate */
    if (frame == NULL) {
        return 0;
    }
    PyCodeObject *code = PyFrame_GetCode(frame);
    int found = PyUnicode_Tailmatch(code->co_filename, torch_folder, 0, PY_SSIZE_T_MAX, -1);
    if (found != 0) {  /* torch's own code called it (or an error): the wrapper reads further out */
        Py_DECREF(code);
        return found < 0 ? -1 : 0;
    }
    PyObject *key = PyLong_FromVoidPtr(code);
    Py_DECREF(code);
    if (key == NULL) {
        return -1;
    }
    found = PyDict_Contains(callers_read, key);
    Py_DECREF(key);
    return found;
}

/* A call at depth 0, timed here when the Python wrapper would only open its block: the module's
 * names are cached and, unless a model method is open, there is no update to start and no caller
 * to read. Sets *handled to 0, having changed nothing, when the wrapper must take it. */
static PyObject *
outermost_call(GateObject *gate, PyObject *const *args, size_t nargsf, PyObject *kwnames, int *handled)
{
    *handled = 0;
    if (phase_state == NULL || PyVectorcall_NARGS(nargsf) < 1) {
        return NULL;
    }
    PyObject *names = cached_module_names(args[0]);
    if (names == NULL) {
        *handled = PyErr_Occurred() != NULL;
        return NULL;
    }
    /* Held from here: reading the grad mode or a thread's first state may run Python (a
     * collection, a finalizer) that could drop the cache's entry. */
    Py_INCREF(names);
    int grad = read_grad_enabled();
    PyObject *open = grad < 0 ? NULL : thread_open_methods();
    if (open == NULL) {
        *handled = PyErr_Occurred() != NULL;
        Py_DECREF(names);
        return NULL;
    }
    Py_ssize_t open_count = PyList_GET_SIZE(open);
    Py_DECREF(open);
    if (open_count == 0) {
        int nothing = nothing_before_block(grad);
        if (nothing <= 0) {
            *handled = nothing < 0;
            Py_DECREF(names);
            return NULL;
        }
    }
    *handled = 1;
    thread_depth = 1;
    PyObject *result = call_in_named_block(PyTuple_GET_ITEM(names, grad ? 1 : 2), gate->nested, args, nargsf, kwnames);
    Py_DECREF(names);
    thread_depth = 0;
    return result;
}

static PyObject *
gate_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    GateObject *gate = (GateObject *)self;
    if (!gate->pass_nested) {
        return PyObject_Vectorcall(gate->outermost, args, nargsf, kwnames);  /* module scopes: all in Python */
    }
    if (thread_depth > 0) {
        return PyObject_Vectorcall(gate->nested, args, nargsf, kwnames);
    }
    if (gate->time_outermost) {
        int handled;
        PyObject *result = outermost_call(gate, args, nargsf, kwnames, &handled);
        if (handled) {
            return result;
        }
    }
    return PyObject_Vectorcall(gate->outermost, args, nargsf, kwnames);
}

static PyObject *
gate_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *nested, *outermost;
    static char *keywords[] = {"nested", "outermost", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:NestedCallGate", keywords, &nested, &outermost)) {
        return NULL;
    }
    if (!PyCallable_Check(nested) || !PyCallable_Check(outermost)) {
        PyErr_SetString(PyExc_TypeError, "NestedCallGate takes two callables");
        return NULL;
    }
    GateObject *gate = (GateObject *)type->tp_alloc(type, 0);
    if (gate == NULL) {
        return NULL;
    }
    gate->vectorcall = gate_vectorcall;
    gate->nested = Py_NewRef(nested);
    gate->outermost = Py_NewRef(outermost);
    gate->dict = NULL;
    gate->pass_nested = 1;
    gate->time_outermost = 0;
    return (PyObject *)gate;
}

static int
gate_traverse(GateObject *gate, visitproc visit, void *arg)
{
    Py_VISIT(gate->nested);
    Py_VISIT(gate->outermost);
    Py_VISIT(gate->dict);
    return 0;
}

static int
gate_clear(GateObject *gate)
{
    Py_CLEAR(gate->nested);
    Py_CLEAR(gate->outermost);
    Py_CLEAR(gate->dict);
    return 0;
}

static void
gate_dealloc(GateObject *gate)
{
    PyObject_GC_UnTrack(gate);
    gate_clear(gate);
    Py_TYPE(gate)->tp_free((PyObject *)gate);
}

/* As a function on a class: ``module.__call__`` is a bound method. Calling ``module(...)`` does
 * not come here: with Py_TPFLAGS_METHOD_DESCRIPTOR the interpreter calls the gate with the
 * module as the first argument, allocating no bound method. */
static PyObject *
gate_get(PyObject *self, PyObject *instance, PyObject *owner)
{
    if (instance == NULL || instance == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, instance);
}

static PyMemberDef gate_members[] = {
    {"nested", T_OBJECT, offsetof(GateObject, nested), READONLY,
     PyDoc_STR("What a call made while this thread's depth is nonzero goes to.")},
    {"outermost", T_OBJECT, offsetof(GateObject, outermost), READONLY,
     PyDoc_STR("What a call made at depth 0 goes to.")},
    {"pass_nested", T_BOOL, offsetof(GateObject, pass_nested), 0,
     PyDoc_STR("Whether nested calls go to ``nested`` (False: every call goes to ``outermost``).")},
    {"time_outermost", T_BOOL, offsetof(GateObject, time_outermost), 0,
     PyDoc_STR("Whether a call at depth 0 of a module whose names are cached, with nothing for ``outermost`` "
               "to do before its block (a model method open, or no update to start and its caller read), "
               "is timed here (configure() must have run) rather than by ``outermost``.")},
    {"__dictoffset__", T_PYSSIZET, offsetof(GateObject, dict), READONLY},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(GateObject, vectorcall), READONLY},
    {NULL},
};

static PyGetSetDef gate_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject GateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "profiler.automatic._module_call_core.NestedCallGate",
    .tp_basicsize = sizeof(GateObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = PyDoc_STR("NestedCallGate(nested, outermost): calls ``nested`` while the calling thread's "
                        "ThreadDepth is nonzero (and pass_nested is set), else ``outermost``, with the "
                        "same arguments."),
    .tp_new = gate_new,
    .tp_dealloc = (destructor)gate_dealloc,
    .tp_traverse = (traverseproc)gate_traverse,
    .tp_clear = (inquiry)gate_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(GateObject, vectorcall),
    .tp_descr_get = gate_get,
    .tp_dictoffset = offsetof(GateObject, dict),
    .tp_members = gate_members,
    .tp_getset = gate_getset,
};


/* --- ModelMethodGate: a model method wrapped on its class ----------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *method;          /* the program's own method */
    PyObject *code;            /* its code object: what _state.open_methods holds while it runs */
    PyObject *names_by_class;  /* type -> (block name, no-grad block name), shared with ``wrapper`` */
    PyObject *wrapper;         /* the Python model_method_timed: the reference, and the cold path */
    PyObject *dict;            /* functools.update_wrapper's attributes, and rlprof_model_method */
    PyObject *weak_references; /* a function takes them: weakref.WeakMethod(agent.method) holds one */
} MethodGateObject;

/* Whether this call starts an update first: torch_phases.model_method_timed's test, for a thread
 * whose model methods are all closed. 1, 0, or -1 on error. */
static int
starts_update(MethodGateObject *gate, int grad)
{
    if (!grad && PyDict_GET_SIZE(learning_methods) == 0) {
        return 0;  /* without grad, only a method that learns (runs a backward or a step) starts one */
    }
    PyObject *update_block = thread_phase(update_block_name);
    if (update_block == NULL) {
        return -1;
    }
    Py_DECREF(update_block);
    if (update_block != Py_None) {
        return 0;
    }
    if (grad) {
        PyObject *training = thread_phase(training_name);
        if (training == NULL) {
            return -1;
        }
        int truth = PyObject_IsTrue(training);
        Py_DECREF(training);
        if (truth != 0) {
            return truth;
        }
    }
    PyObject *key = PyLong_FromVoidPtr(gate->code);
    if (key == NULL) {
        return -1;
    }
    int learning = PyDict_Contains(learning_methods, key);
    Py_DECREF(key);
    return learning;
}

static PyObject *
method_gate_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    MethodGateObject *gate = (MethodGateObject *)self;
    if (thread_depth > 0) {  /* called from inside a module's forward: that block holds it */
        return PyObject_Vectorcall(gate->method, args, nargsf, kwnames);
    }
    if (phase_state == NULL || PyVectorcall_NARGS(nargsf) < 1) {
        return PyObject_Vectorcall(gate->wrapper, args, nargsf, kwnames);
    }
    PyObject *names = PyDict_GetItemWithError(gate->names_by_class, (PyObject *)Py_TYPE(args[0]));
    if (names == NULL || !PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) != 2) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        return PyObject_Vectorcall(gate->wrapper, args, nargsf, kwnames);  /* a class's first call */
    }
    Py_INCREF(names);
    PyObject *result = NULL, *open = NULL;
    int grad = read_grad_enabled();
    if (grad < 0 || (open = thread_open_methods()) == NULL) {
        if (open == NULL && !PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "torch_phases' open_methods is not a list");
        }
        goto done;
    }
    if (PyList_GET_SIZE(open) == 0) {
        int starts = starts_update(gate, grad);
        if (starts < 0) {
            goto done;
        }
        if (starts) {
            PyObject *opened = PyObject_CallOneArg(open_update, phase_state);
            if (opened == NULL) {
                goto done;
            }
            Py_DECREF(opened);
        }
    }
    if (PyList_Append(open, gate->code) < 0) {
        goto done;
    }
    result = call_in_named_block(PyTuple_GET_ITEM(names, grad ? 0 : 1), gate->method, args, nargsf, kwnames);
    /* open_methods.pop(), in a finally: the last method opened */
    Py_ssize_t size = PyList_GET_SIZE(open);
    if (size > 0) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (PyList_SetSlice(open, size - 1, size, NULL) < 0) {
            Py_CLEAR(result);
            _PyErr_ChainExceptions(type, value, traceback);
        }
        else {
            PyErr_Restore(type, value, traceback);
        }
    }
done:
    Py_XDECREF(open);
    Py_DECREF(names);
    return result;
}

static PyObject *
method_gate_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *method, *code, *names_by_class, *wrapper;
    static char *keywords[] = {"method", "code", "names_by_class", "wrapper", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!O!O:ModelMethodGate", keywords, &method, &PyCode_Type, &code,
                                     &PyDict_Type, &names_by_class, &wrapper)) {
        return NULL;
    }
    if (!PyCallable_Check(method) || !PyCallable_Check(wrapper)) {
        PyErr_SetString(PyExc_TypeError, "ModelMethodGate takes the method and its wrapper as callables");
        return NULL;
    }
    MethodGateObject *gate = (MethodGateObject *)type->tp_alloc(type, 0);
    if (gate == NULL) {
        return NULL;
    }
    gate->vectorcall = method_gate_vectorcall;
    gate->method = Py_NewRef(method);
    gate->code = Py_NewRef(code);
    gate->names_by_class = Py_NewRef(names_by_class);
    gate->wrapper = Py_NewRef(wrapper);
    gate->dict = NULL;
    gate->weak_references = NULL;
    return (PyObject *)gate;
}

static int
method_gate_traverse(MethodGateObject *gate, visitproc visit, void *arg)
{
    Py_VISIT(gate->method);
    Py_VISIT(gate->code);
    Py_VISIT(gate->names_by_class);
    Py_VISIT(gate->wrapper);
    Py_VISIT(gate->dict);
    return 0;
}

static int
method_gate_clear(MethodGateObject *gate)
{
    Py_CLEAR(gate->method);
    Py_CLEAR(gate->code);
    Py_CLEAR(gate->names_by_class);
    Py_CLEAR(gate->wrapper);
    Py_CLEAR(gate->dict);
    return 0;
}

static void
method_gate_dealloc(MethodGateObject *gate)
{
    PyObject_GC_UnTrack(gate);
    if (gate->weak_references != NULL) {
        PyObject_ClearWeakRefs((PyObject *)gate);
    }
    method_gate_clear(gate);
    Py_TYPE(gate)->tp_free((PyObject *)gate);
}

/* pickle.dumps and copy: the program's method is a function, which pickles as its qualified name
 * (the class attribute it is, found again at load) and copies as itself; so does the gate, which
 * is that class attribute now (its ``__qualname__`` is the method's, from update_wrapper). */
static PyObject *
method_gate_reduce(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return PyObject_GetAttrString(self, "__qualname__");
}

static PyMethodDef method_gate_methods[] = {
    {"__reduce__", method_gate_reduce, METH_NOARGS, PyDoc_STR("The method's qualified name: pickled by reference.")},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef method_gate_members[] = {
    {"method", T_OBJECT, offsetof(MethodGateObject, method), READONLY, PyDoc_STR("The program's own method.")},
    {"wrapper", T_OBJECT, offsetof(MethodGateObject, wrapper), READONLY,
     PyDoc_STR("The Python wrapper: what a call the gate does not time itself goes to.")},
    {"__dictoffset__", T_PYSSIZET, offsetof(MethodGateObject, dict), READONLY},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(MethodGateObject, vectorcall), READONLY},
    {NULL},
};

static PyTypeObject MethodGateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "profiler.automatic._module_call_core.ModelMethodGate",
    .tp_basicsize = sizeof(MethodGateObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = PyDoc_STR("ModelMethodGate(method, code, names_by_class, wrapper): a model method timed as "
                        "torch_phases' model_method_timed (``wrapper``) times it, its warm calls here."),
    .tp_new = method_gate_new,
    .tp_dealloc = (destructor)method_gate_dealloc,
    .tp_traverse = (traverseproc)method_gate_traverse,
    .tp_clear = (inquiry)method_gate_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(MethodGateObject, vectorcall),
    .tp_descr_get = gate_get,
    .tp_dictoffset = offsetof(MethodGateObject, dict),
    .tp_weaklistoffset = offsetof(MethodGateObject, weak_references),
    .tp_methods = method_gate_methods,
    .tp_members = method_gate_members,
    .tp_getset = gate_getset,
};

static PyMethodDef module_functions[] = {
    {"configure", configure, METH_VARARGS,
     PyDoc_STR("configure(state, names, learning_methods, callers_read, torch_folder, is_grad_enabled, open_update, "
               "timers, block_api): torch_phases' state, for the gates' warm paths, and the timer core's "
               "block_api capsule, which runs their blocks.")},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT,
    "profiler.automatic._module_call_core",
    PyDoc_STR("The C pass-through of nested nn.Module calls (see torch_phases.py)."),
    -1,
    module_functions,
};

PyMODINIT_FUNC
PyInit__module_call_core(void)
{
    if (PyType_Ready(&ThreadDepthType) < 0 || PyType_Ready(&GateType) < 0 || PyType_Ready(&MethodGateType) < 0) {
        return NULL;
    }
    if ((open_methods_name = PyUnicode_InternFromString("open_methods")) == NULL
        || (update_block_name = PyUnicode_InternFromString("update_block")) == NULL
        || (training_name = PyUnicode_InternFromString("training")) == NULL
        || (hierarchical_timer_name = PyUnicode_InternFromString("hierarchical_timer")) == NULL
        || (dict_name = PyUnicode_InternFromString("__dict__")) == NULL) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_definition);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "ThreadDepth", (PyObject *)&ThreadDepthType) < 0
        || PyModule_AddObjectRef(module, "NestedCallGate", (PyObject *)&GateType) < 0
        || PyModule_AddObjectRef(module, "ModelMethodGate", (PyObject *)&MethodGateType) < 0
        || PyModule_AddIntConstant(module, "VERSION", MODULE_CALL_CORE_VERSION) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
