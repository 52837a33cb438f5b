"""A stale build of the stack sampler's C wait (compiled from other sources than this code's): it
is not used, the sampler waits and looks in Python, and one warning line names the file."""

from __future__ import annotations

from extension_builds import (assert_loaded_quietly, assert_refused_as_stale, build_module, copy_packages,
                              needs_compiler, run_in)

pytestmark = needs_compiler

REPORT = """
import json
from profiler.automatic import stack_sampler
print(json.dumps({"compiled": stack_sampler._block_watch is not None}))
"""


def build_watch(root, *macros: str):
    copy_packages(root)
    return build_module(root, "profiler.automatic._block_watch", "profiler/automatic/_block_watch.c", *macros)


def test_a_stale_wait_is_not_loaded_and_one_line_says_why(tmp_path):
    stale = build_watch(tmp_path, "BLOCK_WATCH_VERSION=0")
    assert_refused_as_stale(run_in(tmp_path, REPORT), stale, "the stack sampler's C wait")


def test_the_wait_built_from_these_sources_is_loaded(tmp_path):
    build_watch(tmp_path)
    assert_loaded_quietly(run_in(tmp_path, REPORT))
