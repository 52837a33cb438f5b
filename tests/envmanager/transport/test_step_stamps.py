"""The critical path's count of whole steps (envmanager.transport.step_stamps.whole_steps_counter):
in C and its numpy reference, the same figures for the same random tables, and the one a profiled
manager uses, on both implementations (see tests/envmanager/step_cores.py). The step record itself:
tests/envmanager/transport/test_step_record.py."""

from __future__ import annotations

import random

import numpy as np
import pytest

from profiler.timing.phased_block import FOLD_AT_RUNS

from envmanager.measurement.critical_path import WAIT_BOUNDS_SECONDS, whole_steps_in_python
from envmanager.transport import step_stamps, timed_calls
from envmanager.transport.step_stamps import whole_steps_counter
from step_cores import step_core  # noqa: F401  (an autouse fixture, parametrised by implementation)


def test_the_count_in_force_is_the_one_asked_for(step_core):
    assert (whole_steps_counter() is whole_steps_in_python) is (step_core == "python")


def test_the_c_helper_configured_for_the_steps_is_the_step_timers_own():
    assert step_stamps._extension is timed_calls.extension()


def _steps_table(seed: int) -> tuple[np.ndarray, int]:
    """A random float64 table of whole steps (the moment the trainer began waiting, then each
    worker's stamp), with equal stamps, replies before the wait began, waits in every bucket, and
    sometimes as a strided view of a wider table, as a fold hands it over."""
    generator = random.Random(seed)
    workers = generator.randrange(1, 6)
    extra = generator.randrange(0, 3)
    choices = [1.0, 1.0 + 3e-5, 1.0 + 1e-3, 1.5, 0.999]
    rows = [
        [generator.choice(choices) if generator.random() < 0.3 else 1.0 + generator.random() * 10 ** -generator.randrange(0, 7)
         for _ in range(1 + workers + extra)]
        for _ in range(generator.randrange(1, 200))
    ]
    table = np.array(rows, dtype=np.float64)
    return (table[:, extra:] if generator.random() < 0.5 else np.ascontiguousarray(table[:, : 1 + workers])), workers


@pytest.mark.parametrize("step_core", ["compiled"], indirect=True)  # it runs both itself: once is enough
def test_both_counts_of_whole_steps_give_the_same_figures_for_the_same_random_tables(step_core):
    count_in_c = whole_steps_counter()
    for seed in range(300):
        table, workers = _steps_table(seed)
        several = workers > 1
        assert count_in_c(table, several, WAIT_BOUNDS_SECONDS, workers) == whole_steps_in_python(
            table, several, WAIT_BOUNDS_SECONDS, workers
        ), f"seed {seed}"


def test_the_count_of_whole_steps_in_c_refuses_a_table_that_is_not_float64_of_the_workers_columns():
    extension = timed_calls.extension()
    if extension is None:
        pytest.skip(timed_calls.unavailable_reason)
    with pytest.raises(TypeError):
        extension.count_whole_steps(np.zeros((3, 3), dtype=np.int64), True, WAIT_BOUNDS_SECONDS, 2)
    with pytest.raises(TypeError):
        extension.count_whole_steps(np.zeros((3, 4)), True, WAIT_BOUNDS_SECONDS, 2)


def test_a_profiled_managers_critical_path_counts_with_the_implementation_in_force(step_core):
    from envmanager import SubprocessEnvManager
    from envmanager_testenvs import CountingEnv

    with SubprocessEnvManager([CountingEnv] * 2) as envs:
        assert envs._profiling.critical_path.count_whole_steps is whole_steps_counter()
        envs.reset(seed=0)
        for _ in range(FOLD_AT_RUNS + 3):
            envs.step(np.zeros(2, dtype=np.int64))
        envs._profiling.step_block.fold()
        assert envs._profiling.critical_path.vector_steps == [FOLD_AT_RUNS + 3] * 2
        assert sum(envs._profiling.critical_path.last_to_reply) == FOLD_AT_RUNS + 3
