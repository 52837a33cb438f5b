/* Reads that the C hot paths remember between calls instead of making at each: a module's global,
 * read again only once its module's dict has changed, and a value kept in the calling thread's
 * state dict, found again without a lookup while the same thread asks.
 *
 * profiler/timing/_timer_core.c (the thread's timer stack), envmanager/transport/_step_core.c (the
 * timers module's flags) and profiler/automatic/_module_call_core.c (hierarchical_timer, the
 * thread's phase state) read the same way through these. setup.py hands this folder to the three
 * builds and lists this file in their ``depends``, which also puts it in the sdist.
 *
 * Everything is ``static inline``: each extension gets its own copy.
 */

#ifndef RLPROF_REMEMBERED_READS_H
#define RLPROF_REMEMBERED_READS_H

#include <Python.h>

#include <stdint.h>

/* A module global read once per change of its module's dict: where each change to a dict gives it
 * a new version tag (CPython 3.11's ma_version_tag; 3.12 deprecates it), the value read last is
 * kept with the tag it was read at, and read again only when the dict's tag moved, as CPython 3.10's
 * LOAD_GLOBAL cache did. A lookup in a module's dict is about 120 instructions, paid at every step
 * or block for values that change a few times a run. Elsewhere every read is a lookup. */
typedef struct {
    PyObject *dict;     /* the module's dict the value was read from (borrowed: the module's) */
    uint64_t version;   /* its version tag then; 0: nothing read yet */
    PyObject *value;    /* borrowed: the dict holds it for as long as its tag stays */
} GlobalCache;

/* ``dict[name]`` through ``cache``: a borrowed reference; NULL, with no exception set, if absent. */
static inline PyObject *
module_global(PyObject *dict, PyObject *name, GlobalCache *cache)
{
#if PY_VERSION_HEX < 0x030C0000
    uint64_t version = ((PyDictObject *)dict)->ma_version_tag;
    if (cache->version == version && cache->dict == dict && version != 0) {
        return cache->value;
    }
    PyObject *value = PyDict_GetItemWithError(dict, name);
    if (value != NULL) {
        cache->dict = dict;
        cache->version = version;
        cache->value = value;
    }
    return value;
#else
    (void)cache;
    return PyDict_GetItemWithError(dict, name);
#endif
}

/* What the calling thread's state dict holds under ``key``, as found last: kept in a
 * ``static _Thread_local ThreadFound`` of the caller's, with the id of the thread state it was
 * found for (never reused, where a thread state's address may be: a native thread's state is made
 * anew around each call into Python). ``value`` is borrowed: the thread's state dict holds it (and
 * ``key``, so no other object takes the key's address) until the caller forgets both. */
typedef struct {
    uint64_t thread_id;
    PyObject *key;
    PyObject *value;
} ThreadFound;

/* The calling thread's state dict's ``key`` (borrowed), through ``found``; NULL, with no error
 * set, when it holds none, or with the error. */
static inline PyObject *
thread_dict_item(ThreadFound *found, PyObject *key)
{
    uint64_t thread_id = PyThreadState_GetID(PyThreadState_Get());
    if (found->value != NULL && found->key == key && found->thread_id == thread_id) {
        return found->value;
    }
    PyObject *thread_dict = PyThreadState_GetDict();
    if (thread_dict == NULL) {
        return NULL;
    }
    PyObject *value = PyDict_GetItemWithError(thread_dict, key);
    if (value != NULL) {
        found->thread_id = thread_id;
        found->key = key;
        found->value = value;
    }
    return value;
}

/* Keep ``value`` under ``key`` in the calling thread's state dict, and in ``found``: 0, -1 with an
 * error, or 1 (kept nowhere) when the thread has no state dict. */
static inline int
keep_thread_dict_item(ThreadFound *found, PyObject *key, PyObject *value)
{
    PyObject *thread_dict = PyThreadState_GetDict();
    if (thread_dict == NULL) {
        return 1;
    }
    if (PyDict_SetItem(thread_dict, key, value) < 0) {
        return -1;
    }
    found->thread_id = PyThreadState_GetID(PyThreadState_Get());
    found->key = key;
    found->value = value;
    return 0;
}

/* Drop the calling thread's state dict's ``key``, and ``found`` if it holds it: 0, or -1 with an error. */
static inline int
forget_thread_dict_item(ThreadFound *found, PyObject *key)
{
    if (found->key == key) {
        found->key = NULL;
        found->value = NULL;
    }
    PyObject *thread_dict = PyThreadState_GetDict();
    if (thread_dict == NULL) {
        return 0;
    }
    if (PyDict_GetItemWithError(thread_dict, key) != NULL) {
        return PyDict_DelItem(thread_dict, key);
    }
    return PyErr_Occurred() ? -1 : 0;
}

#endif /* RLPROF_REMEMBERED_READS_H */
