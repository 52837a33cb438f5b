"""Specification of the verdicts on real runs: worker processes, pipes and envs, built to show one
limit each (see verdict_runs.py). A verdict must hold on the run built to show it, and must not
appear on the runs built not to.

Each run is built once per module and judged by the same engine ``rlprof analyze`` uses.
"""

from __future__ import annotations

import re

import pytest
from verdict_runs import (
    LEAK_BYTES_PER_STEP,
    LEAK_STEPS,
    PINNED_CORES,
    PLANTED_DELAYS,
    PLANTED_STEPS,
    cheap_envs_on_fewer_cores_run,
    computing_straggler_run,
    cpu_oversubscribed_run,
    identical_cartpoles_run,
    large_observations_run,
    leaking_worker_run,
    planted_straggler_run,
    slow_policy_run,
)

from profiler.analysis.analyze import analyze_run, render_analysis
from profiler.analysis.straggler_cause import BLOCKED_FROM_SHARE
from profiler.analysis.verdicts import (
    CPU_OVERSUBSCRIPTION,
    LEAK_MIN_GROWTH_BYTES,
    MEMORY_LEAK,
    OUTSIDE_LOAD,
    STRAGGLER,
    TRAINER_BOUND,
    TRANSPORT_BOUND,
    WORKERS_BALANCED,
    judge_run,
)


@pytest.fixture(scope="module")
def cpu_bound():
    return judge_run(cpu_oversubscribed_run())


@pytest.fixture(scope="module")
def planted_straggler():
    return judge_run(planted_straggler_run())


@pytest.fixture(scope="module")
def computing_straggler():
    return judge_run(computing_straggler_run())


@pytest.fixture(scope="module")
def large_observations():
    return judge_run(large_observations_run())


@pytest.fixture(scope="module")
def slow_policy():
    return judge_run(slow_policy_run())


@pytest.fixture(scope="module")
def cheap_envs_on_fewer_cores():
    return judge_run(cheap_envs_on_fewer_cores_run())


@pytest.fixture(scope="module")
def identical_cartpoles():
    return judge_run(identical_cartpoles_run())


def only(verdicts, kind):
    (verdict,) = verdicts.of_kind(kind)
    return verdict


# --- identical CPU-bound envs, more workers than cores ---------------------------------------------


def test_cpu_bound_envs_oversubscribing_the_cores_make_the_cpu_the_first_verdict(cpu_bound):
    # On a shared machine other programs' load may cost more than the run's own crowding; under
    # a heavy load it may then be the only CPU verdict (the run's own is a lower bound).
    assert cpu_bound.kinds[0] in (CPU_OVERSUBSCRIPTION, OUTSIDE_LOAD)
    for verdict in cpu_bound.of_kind(CPU_OVERSUBSCRIPTION):
        evidence = verdict.evidence
        assert (evidence["cores_available"], evidence["workers"]) == (PINNED_CORES, 6)
        assert evidence["busy_processes"] == 7


def test_cpu_bound_envs_oversubscribing_the_cores_are_not_blamed_on_the_pipe(cpu_bound):
    assert not cpu_bound.of_kind(TRANSPORT_BOUND)


def test_identical_cpu_bound_envs_have_no_straggler(cpu_bound):
    assert not cpu_bound.of_kind(STRAGGLER)
    assert cpu_bound.of_kind(WORKERS_BALANCED)


# --- one env 6x slower ------------------------------------------------------------------------------


def test_a_planted_slow_worker_is_named_with_what_it_costs(planted_straggler):
    straggler = only(planted_straggler, STRAGGLER)
    assert straggler.evidence["worker_id"] == 3
    planted = PLANTED_STEPS * (PLANTED_DELAYS[3] - PLANTED_DELAYS[0])
    assert straggler.cost_seconds >= planted / 4  # most of it, on a loaded machine
    assert straggler.share > 0


def test_sleeping_envs_are_not_called_a_cpu_limit(planted_straggler):
    assert not planted_straggler.of_kind(CPU_OVERSUBSCRIPTION)


def test_a_straggler_whose_env_sleeps_is_told_its_env_waits_on_something_other_than_a_cpu(planted_straggler):
    straggler = only(planted_straggler, STRAGGLER)
    assert straggler.evidence["env_blocked_share_at_least"] >= BLOCKED_FROM_SHARE
    assert "they were blocked, waiting on something other than a CPU" in straggler.suggestion
    assert "Find what worker 3's env waits on in its step: a sleep" in straggler.suggestion
    assert "computation" not in straggler.suggestion


# --- one env computing 10 ms a step, the others nothing --------------------------------------------


def test_a_straggler_whose_env_computes_is_told_so_and_not_that_it_waits(computing_straggler):
    straggler = only(computing_straggler, STRAGGLER)
    assert straggler.evidence["worker_id"] == 3
    assert straggler.evidence["env_blocked_share_at_least"] < BLOCKED_FROM_SHARE
    assert "its time is its env's computation, not a wait on something else" in straggler.suggestion
    assert "Find what makes worker 3's env slower than the others'" in straggler.suggestion
    assert "blocked" not in straggler.suggestion and "waits on in its step" not in straggler.suggestion


# --- large observations through the pipe ---------------------------------------------------------


def test_large_observations_without_shared_memory_blame_the_transport(large_observations):
    transport = only(large_observations, TRANSPORT_BOUND)
    assert transport.evidence["cpu_contention"] == "not the limit"
    assert "shared_memory=True" in transport.suggestion


def test_large_observations_are_not_a_cpu_limit_nor_a_straggler(large_observations):
    assert not large_observations.of_kind(CPU_OVERSUBSCRIPTION)
    assert not large_observations.of_kind(STRAGGLER)


# --- a slow policy ------------------------------------------------------------------------------------


def test_a_slow_policy_is_named_first(slow_policy):
    first = slow_policy.verdicts[0]
    assert first.kind == TRAINER_BOUND
    assert first.evidence["top_blocks"][0]["block"] == "policy.act"


def test_a_slow_policy_is_not_blamed_on_the_workers(slow_policy):
    assert not slow_policy.of_kind(STRAGGLER) and not slow_policy.of_kind(CPU_OVERSUBSCRIPTION)


# --- identical envs over many steps: the PPO false-straggler case ------------------------------------


def test_identical_envs_over_many_steps_never_make_a_straggler(identical_cartpoles):
    assert not identical_cartpoles.of_kind(STRAGGLER)
    assert only(identical_cartpoles, WORKERS_BALANCED).title.startswith("workers are balanced")


def test_identical_envs_are_told_why_the_worker_most_often_last_is_no_straggler(identical_cartpoles):
    balanced = only(identical_cartpoles, WORKERS_BALANCED)
    if balanced.evidence["last_share"] >= balanced.evidence["straggler_last_share_from"]:
        assert ", but " in balanced.title  # last by send order or by too little to matter: which
    else:
        assert "a straggler is last in" in balanced.title


# --- envs with little CPU work, more workers than cores ----------------------------------------------


def test_envs_with_little_cpu_work_are_not_a_cpu_limit_even_with_more_workers_than_cores(
    cheap_envs_on_fewer_cores,
):
    assert not cheap_envs_on_fewer_cores.of_kind(CPU_OVERSUBSCRIPTION)


# --- a worker env that keeps data from every step -------------------------------------------------


@pytest.fixture(scope="module")
def leaking_run():
    return leaking_worker_run(leaking=(False, True))


@pytest.fixture(scope="module")
def leaking_worker(leaking_run):
    return judge_run(leaking_run)


@pytest.fixture(scope="module")
def nothing_leaks():
    return judge_run(leaking_worker_run(leaking=(False, False)))


def test_a_worker_whose_env_keeps_every_steps_data_is_named_a_leak(leaking_worker):
    leak = only(leaking_worker, MEMORY_LEAK)
    assert leak.evidence["process"] == "worker 1"
    # Most of what it kept; the first and last quarters' medians leave out the ends.
    assert leak.evidence["growth_bytes"] >= LEAK_STEPS * LEAK_BYTES_PER_STEP / 2
    assert leak.title.startswith("worker 1 leaks memory")


def test_envs_that_keep_nothing_get_no_leak_verdict(nothing_leaks):
    assert not nothing_leaks.of_kind(MEMORY_LEAK)


def test_analyze_shows_the_leaking_workers_growth_beside_the_others(leaking_run):
    memory = analyze_run(leaking_run).memory
    growth = {process.name: process.growth_bytes for process in memory.processes}
    assert growth["worker 1"] >= LEAK_STEPS * LEAK_BYTES_PER_STEP / 2
    assert growth["worker 0"] < LEAK_MIN_GROWTH_BYTES
    section = render_analysis(analyze_run(leaking_run)).split("\n\n")[-1]
    assert section.startswith("Memory per process")
    assert re.search(r"\+\d+\.\d MiB .* worker 1$", section, re.MULTILINE)
