/* What profiler/timing/_timer_core.c offers other C extensions: a call made inside a timer block.
 *
 * profiler/automatic/_module_call_core.c times the framework phases' warm calls (the policy's
 * outermost module calls, the program's model methods) as ``with hierarchical_timer(name):
 * return target(*args)``. Made through Python's protocols from another extension, that is a call
 * of hierarchical_timer, an attribute lookup of ``__exit__``, a method call of ``__enter__`` and a
 * call of the exit with three arguments: more code than the block itself runs, at every policy
 * call, where torch's own code fills the instruction cache (benchmarks/phases_loop_cost.py). The
 * timer core can run the same statement on its own node methods directly, so it hands out this
 * table in a capsule (``_timer_core.block_api``), which the other extension is given at configure
 * time. Both extensions include this header. Change it only with the interface versions of both
 * (TIMER_CORE_VERSION, MODULE_CALL_CORE_VERSION) raised: a build from before the change then says
 * it is stale and is not loaded, rather than calling through a table of another shape.
 */

#ifndef RLPROF_TIMER_CORE_API_H
#define RLPROF_TIMER_CORE_API_H

#include <Python.h>

#define TIMER_CORE_API_CAPSULE "profiler.timing._timer_core.block_api"

typedef struct {
    /* ``with lookup(name): return target(*args)``, as the with statement runs it. ``lookup`` is
     * what timers.hierarchical_timer is now; when it is the timer core's own BlockLookup and the
     * block it gives is a node whose class still has the C __enter__ and __exit__ (no companion
     * watching blocks, no pure-Python core chosen), the node's run is started and counted
     * directly; anything else goes through the methods the block's class has. */
    PyObject *(*call_in_named_block)(PyObject *lookup, PyObject *name, PyObject *target, PyObject *const *args,
                                     size_t nargsf, PyObject *kwnames);
} TimerCoreAPI;

#endif
