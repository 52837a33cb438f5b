/* The program's module frame at the bottom of a frame-stack chunk of its own, as under `python`.
 *
 * CPython 3.11 keeps a thread's frames in chunks of 16 KB; a call that does not fit in the
 * current chunk maps a new one, which is unmapped as soon as that call returns. A loop whose
 * calls cross a chunk's end therefore maps, faults in and unmaps a chunk at every crossing, and
 * where the crossings fall depends on how deep the program's first frame starts. Under `python`
 * the script's module frame is the first frame of the thread; under `rlprof run` it would sit
 * above rlprof's own frames, and SB3's PPO crossed a chunk's end 19,379 times in a run where
 * `python` crossed 3,199 (docs/run.md, "What it costs").
 *
 * exec_program(code, globals) runs `code` with the thread's stack top set to its current chunk's
 * limit, so that the module frame does not fit there and opens a chunk of its own, at whose
 * bottom it lies (one slot lower than `python`'s, whose first chunk keeps its first slot). When
 * the module frame returns, its chunk is freed and the top comes back to that limit; it is put
 * back where it was. The frames below never read the slots skipped.
 * call_program(function, *args) does the same for a call: `python -m module`'s first frame is
 * runpy's _run_module_as_main, which rlprof calls this way so that the module frame lies above
 * the same runpy frames as under `python -m`.
 * Elsewhere than 3.11 (another layout of the thread state) they are a plain exec and call.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef PROGRAM_FRAME_VERSION
#define PROGRAM_FRAME_VERSION 2 /* the interface profiler/cli/program_frame.py expects */
#endif

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define FRAME_STACK_CHUNKS 1
#else
#define FRAME_STACK_CHUNKS 0
#endif

/* function(*args) (code evaluated in globals where function is NULL), its first frame at the
 * bottom of a frame-stack chunk of its own. */
static PyObject *
in_chunk_of_its_own(PyObject *function, PyObject *args, PyObject *code, PyObject *globals)
{
#if FRAME_STACK_CHUNKS
    PyThreadState *thread = PyThreadState_Get();
    PyObject **top = thread->datastack_top;
    if (thread->datastack_chunk != NULL) {
        thread->datastack_top = thread->datastack_limit;
    }
#endif
    PyObject *result = function != NULL ? PyObject_Call(function, args, NULL) : PyEval_EvalCode(code, globals, globals);
#if FRAME_STACK_CHUNKS
    thread->datastack_top = top;
#endif
    return result;
}

static PyObject *
exec_program(PyObject *self, PyObject *args)
{
    PyObject *code, *globals;
    if (!PyArg_ParseTuple(args, "O!O!:exec_program", &PyCode_Type, &code, &PyDict_Type, &globals)) {
        return NULL;
    }
    return in_chunk_of_its_own(NULL, NULL, code, globals);
}

static PyObject *
call_program(PyObject *self, PyObject *args)
{
    Py_ssize_t count = PyTuple_GET_SIZE(args);
    if (count < 1 || !PyCallable_Check(PyTuple_GET_ITEM(args, 0))) {
        PyErr_SetString(PyExc_TypeError, "call_program(function, *args) takes a callable first");
        return NULL;
    }
    PyObject *arguments = PyTuple_GetSlice(args, 1, count);
    if (arguments == NULL) {
        return NULL;
    }
    PyObject *result = in_chunk_of_its_own(PyTuple_GET_ITEM(args, 0), arguments, NULL, NULL);
    Py_DECREF(arguments);
    return result;
}

static PyObject *
frame_stack_offset(PyObject *self, PyObject *unused)
{
#if FRAME_STACK_CHUNKS
    PyThreadState *thread = PyThreadState_Get();
    if (thread->datastack_chunk == NULL) {
        Py_RETURN_NONE;
    }
    return PyLong_FromSsize_t((char *)thread->datastack_top - (char *)thread->datastack_chunk->data);
#else
    Py_RETURN_NONE;
#endif
}

static PyMethodDef methods[] = {
    {"exec_program", exec_program, METH_VARARGS,
     "exec_program(code, globals): exec code in globals, its frame at the bottom of a frame-stack chunk"},
    {"call_program", call_program, METH_VARARGS,
     "call_program(function, *args): call function, its frame at the bottom of a frame-stack chunk"},
    {"frame_stack_offset", frame_stack_offset, METH_NOARGS,
     "Bytes from the calling thread's frame-stack chunk's first slot to its top (None where unknown)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_program_frame", "The program's module frame where python puts it.", -1, methods,
};

PyMODINIT_FUNC
PyInit__program_frame(void)
{
    PyObject *created = PyModule_Create(&module);
    if (created != NULL && PyModule_AddIntConstant(created, "VERSION", PROGRAM_FRAME_VERSION) < 0) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
