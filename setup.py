"""The one thing pyproject.toml cannot say: the optional C accelerators of the hot path (the
timer's blocks, the env step path's timed env call, and the framework phases' pass-through of
nested ``nn.Module`` calls), the stack sampler's waits without the GIL, where ``rlprof run`` puts
the program's first frame, and the spans' text of the timers file and of a trace (most of what
``rlprof run``'s exit spends).

``Extension(optional=True)``: where no C compiler (or no Python headers) is found, the build
warns and installs rlprof without it, and the pure-Python core runs
(``profiler.timing.accelerated()`` says which; see docs/timers.md).
"""

from setuptools import Extension, setup

# Reading a node's slots and the clock as both accelerators must (see the header's comment).
SHARED_HEADER = "profiler/timing/_slots_and_clock.h"

setup(
    ext_modules=[
        Extension(
            "profiler.timing._timer_core",
            sources=["profiler/timing/_timer_core.c"],
            depends=[SHARED_HEADER, "profiler/timing/_timer_core_api.h"],
            include_dirs=["profiler/timing"],
            optional=True,
        ),
        Extension(
            "envmanager.transport._step_core",
            sources=["envmanager/transport/_step_core.c"],
            depends=[SHARED_HEADER, "envmanager/transport/_step_record.h"],
            include_dirs=["profiler/timing"],
            optional=True,
        ),
        Extension(
            "profiler.automatic._module_call_core",
            sources=["profiler/automatic/_module_call_core.c"],
            depends=["profiler/timing/_timer_core_api.h"],
            include_dirs=["profiler/timing"],
            optional=True,
        ),
        Extension(
            "profiler.automatic._block_watch",
            sources=["profiler/automatic/_block_watch.c"],
            depends=[SHARED_HEADER],
            include_dirs=["profiler/timing"],
            optional=True,
        ),
        Extension(
            "profiler.cli._program_frame",
            sources=["profiler/cli/_program_frame.c"],
            optional=True,
        ),
        Extension(
            "profiler.tree._timeline_text",
            sources=["profiler/tree/_timeline_text.c"],
            optional=True,
        ),
        Extension(
            "profiler.export._trace_spans",
            sources=["profiler/export/_trace_spans.c"],
            optional=True,
        ),
    ]
)
