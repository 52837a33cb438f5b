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
 * The pure-Python path (RLPROF_PURE_PYTHON=1, or no compiler at install) is the reference: a
 * threading.local for the depth and the Python wrapper for every call, which does the same test.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* The interface version: profiler/automatic/torch_phases.py's MODULE_CALL_CORE_VERSION, which must
 * equal it for the module to be used. Raise both together whenever this file changes what Python
 * sees: a build left from older sources then says it is stale and the Python pass-through runs
 * (see profiler/timing/accelerator.py's load_extension). */
#ifndef MODULE_CALL_CORE_VERSION
#define MODULE_CALL_CORE_VERSION 1
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

/* --- NestedCallGate: Module.__call__ ------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *nested;     /* torch's own Module.__call__: what a nested call goes to */
    PyObject *outermost;  /* the Python wrapper: what a call at depth 0 goes to */
    PyObject *dict;       /* functools.update_wrapper's __name__, __doc__, __wrapped__ */
    char pass_nested;     /* False while module scopes make nested calls blocks too */
} GateObject;

static PyObject *
gate_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    GateObject *gate = (GateObject *)self;
    PyObject *target = (thread_depth > 0 && gate->pass_nested) ? gate->nested : gate->outermost;
    return PyObject_Vectorcall(target, args, nargsf, kwnames);
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

static struct PyModuleDef module_definition = {
    PyModuleDef_HEAD_INIT,
    "profiler.automatic._module_call_core",
    PyDoc_STR("The C pass-through of nested nn.Module calls (see torch_phases.py)."),
    -1,
    NULL,
};

PyMODINIT_FUNC
PyInit__module_call_core(void)
{
    if (PyType_Ready(&ThreadDepthType) < 0 || PyType_Ready(&GateType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_definition);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "ThreadDepth", (PyObject *)&ThreadDepthType) < 0
        || PyModule_AddObjectRef(module, "NestedCallGate", (PyObject *)&GateType) < 0
        || PyModule_AddIntConstant(module, "VERSION", MODULE_CALL_CORE_VERSION) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
