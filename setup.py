"""The one thing pyproject.toml cannot say: the optional C accelerators of the hot path (the
timer's blocks, the env step path's timed env call, and the framework phases' pass-through of
nested ``nn.Module`` calls), the stack sampler's waits without the GIL, where ``rlprof run`` puts
the program's first frame, and the spans' text of the timers file and of a trace (most of what
``rlprof run``'s exit spends).

``Extension(optional=True)``: where no C compiler (or no Python headers) is found, the build
warns and installs rlprof without it, and the pure-Python core runs
(``profiler.timing.accelerated()`` says which; see docs/timers.md).
"""

import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

CALL_FLAGS = ("-fno-plt", "-mtls-dialect=gnu2")
"""Flags that make the extensions' calls into Python, and their thread-local reads, cheaper where
the compiler takes them (GCC and Clang on x86-64 Linux).

The hot path runs between a torch policy call's layers, where the caches are full of torch:
``-fno-plt`` calls CPython's functions through the global offset table directly instead of through
a stub each (a stub is a line of code the instruction cache must fetch, at each of some 120 calls
a policy call makes through the phases); ``-mtls-dialect=gnu2`` reads a ``_Thread_local`` (the
phases' call depth, read at every layer call) through a TLS descriptor instead of a call to
``__tls_get_addr``. Counted in docs/architecture.md ("Compiler flags")."""

PROBE_SOURCE = "static _Thread_local int depth;\nint probe(void) { return ++depth; }\n"


class BuildWithCallFlags(build_ext):
    """build_ext, adding each of :data:`CALL_FLAGS` that the compiler compiles a probe with.

    A compiler that refuses one (another platform, an older compiler) builds without it; one that
    fails altogether fails the probes too, and the optional extensions are then left out as before.
    """

    def build_extensions(self) -> None:
        flags = [flag for flag in CALL_FLAGS if self._compiler_takes(flag)]
        for extension in self.extensions:
            extension.extra_compile_args = [*extension.extra_compile_args, *flags]
        super().build_extensions()

    def _compiler_takes(self, flag: str) -> bool:
        with tempfile.TemporaryDirectory() as folder:
            source = Path(folder) / "probe.c"
            source.write_text(PROBE_SOURCE)
            try:
                self.compiler.compile([str(source)], output_dir=folder, extra_postargs=[flag, "-Werror"])
            except Exception:  # CompileError, or the compiler not found: build without the flag
                return False
        return True


# Reading a node's slots and the clock as both accelerators must (see the header's comment).
SHARED_HEADER = "profiler/timing/_slots_and_clock.h"
# Module globals and thread-state values read once and remembered (see the header's comment).
REMEMBERED_READS_HEADER = "profiler/timing/_remembered_reads.h"

setup(
    cmdclass={"build_ext": BuildWithCallFlags},
    ext_modules=[
        Extension(
            "profiler.timing._timer_core",
            sources=["profiler/timing/_timer_core.c"],
            depends=[SHARED_HEADER, REMEMBERED_READS_HEADER, "profiler/timing/_timer_core_api.h"],
            include_dirs=["profiler/timing"],
            optional=True,
        ),
        Extension(
            "envmanager.transport._step_core",
            sources=["envmanager/transport/_step_core.c"],
            depends=[SHARED_HEADER, REMEMBERED_READS_HEADER, "envmanager/transport/_step_record.h"],
            include_dirs=["profiler/timing"],
            optional=True,
        ),
        Extension(
            "profiler.automatic._module_call_core",
            sources=["profiler/automatic/_module_call_core.c"],
            depends=[REMEMBERED_READS_HEADER, "profiler/timing/_timer_core_api.h"],
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
