"""Specification of the verdict engine: each rule on constructed runs, both sides of its thresholds.

The runs are timer files written with the fake clock (see run_files.py), so every figure is exact
and each threshold can be approached from both sides. Real runs, built with real subprocesses,
are in tests/envmanager/test_verdicts_on_real_runs.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from phase_trees import timeline_tree
from run_files import with_waits_in_steps, write_plain_run, write_vector_run

from profiler import load_timing_tree
from profiler.analysis.verdicts import (
    CPU_MIN_COST_SHARE,
    CPU_MIN_DEMAND_SHARE,
    CPU_OVERSUBSCRIPTION,
    ENV_BOUND,
    LEAK_MIN_GROWTH_BYTES,
    LEAK_MIN_SAMPLES,
    MEMORY_LEAK,
    REPLAY_BUFFER_GAUGE,
    STRAGGLER,
    STRAGGLER_LAST_SHARE_BEYOND_FAIR,
    TRAINER_BOUND,
    TRANSPORT_BOUND,
    UNTIMED,
    WORKERS_BALANCED,
    judge_run,
)

DATA = Path(__file__).parents[2] / "data"


@pytest.fixture
def run(tmp_path, fake_clock):
    """``run(**options)``: the verdicts on a fake-clock vector run (see ``write_vector_run``)."""
    def judged(**options):
        return judge_run(load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock, **options)))
    return judged


def only(verdicts, kind):
    (verdict,) = verdicts.of_kind(kind)
    return verdict


# --- straggler ----------------------------------------------------------------------------------


def test_a_worker_last_in_every_step_and_slow_in_its_env_is_named_with_its_cost(run):
    verdicts = run(measured=True)  # workers take 4, 4, 4 and 10 ms a step
    straggler = only(verdicts, STRAGGLER)
    assert straggler.evidence["worker"] == "worker 3"
    assert straggler.cost_seconds == pytest.approx(0.060)  # 6 ms a step waited on it alone
    assert straggler.share == pytest.approx(0.060 / verdicts.wall_seconds)
    assert "worker 3 holds up the vector step" in straggler.title
    assert not verdicts.of_kind(WORKERS_BALANCED)


def test_workers_whose_critical_path_counted_no_step_are_called_neither_balanced_nor_stragglers(tmp_path, fake_clock):
    # What a run whose workers never reached rlprof's channel dumps: entries with empty paths.
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock, measured=True))
    for worker in tree["workers"]:
        path = worker["critical_path"]
        path.update(vector_steps=0, last_to_reply=0, wait_as_last_seconds=0.0)
    verdicts = judge_run(tree)
    assert not verdicts.of_kind(WORKERS_BALANCED) and not verdicts.of_kind(STRAGGLER)
    assert any(line.startswith("which worker holds up the step: the critical path counted no vector step")
               for line in verdicts.cannot_tell)


def slow_in_first_steps(slow_steps: int, steps: int = 16):
    """Worker 3 computes 10 ms in the first ``slow_steps`` steps; otherwise worker 0 is last by
    0.1 ms. Only how often worker 3 is last changes between runs."""
    return [(0.004, 0.004, 0.004, 0.010) if step < slow_steps else (0.0041, 0.004, 0.004, 0.004)
            for step in range(steps)]


@pytest.mark.parametrize("slow_steps, is_straggler", [(9, False), (10, True)])
def test_a_straggler_is_last_in_its_fair_share_plus_half_the_rest_of_the_steps(
        run, slow_steps, is_straggler):
    # With 4 workers: 25% + 0.5 * 75% = 62.5%, that is 10 of 16 steps.
    assert STRAGGLER_LAST_SHARE_BEYOND_FAIR == 0.5
    verdicts = run(measured=True, steps=16, worker_step_seconds=slow_in_first_steps(slow_steps))
    assert bool(verdicts.of_kind(STRAGGLER)) is is_straggler
    assert bool(verdicts.of_kind(WORKERS_BALANCED)) is not is_straggler


@pytest.mark.parametrize("extra_seconds, is_straggler", [(0.0004, False), (0.0008, True)])
def test_a_straggler_costs_at_least_five_percent_of_the_wall_time(run, extra_seconds, is_straggler):
    # Worker 3 is last in every step by extra_seconds: 3.7% of the wall time, then 7.1%.
    verdicts = run(measured=True, worker_step_seconds=(0.004, 0.004, 0.004, 0.004 + extra_seconds))
    assert bool(verdicts.of_kind(STRAGGLER)) is is_straggler


def test_a_worker_late_by_send_order_but_not_slower_is_no_straggler(run):
    verdicts = run(measured=True, worker_step_seconds=(0.004,) * 4, reply_delays=(0, 0, 0, 0.006))
    balanced = only(verdicts, WORKERS_BALANCED)
    assert not verdicts.of_kind(STRAGGLER)
    assert "not by its env" in balanced.title
    assert balanced.evidence["last_share"] == 1.0


def test_a_worker_last_in_every_step_by_too_little_to_matter_is_told_what_its_waits_cost(run):
    # Worker 3 replies 0.1 ms after the others in every step: 0.9% of the wall time, under 5%.
    verdicts = run(measured=True, worker_step_seconds=(0.004,) * 4, reply_delays=(0, 0, 0, 0.0001))
    balanced = only(verdicts, WORKERS_BALANCED)
    assert balanced.evidence["last_share"] == 1.0
    assert "worker 3 replies last in 100.0% of steps (fair share 25.0%), but the steps waited only" in balanced.title
    assert "of the wall time (a straggler's waits cost from 5.0%)" in balanced.title
    assert "not by its env" in balanced.title


def test_a_worker_whose_env_explains_under_half_its_waits_is_told_how_much_it_does(run):
    # Worker 3 always replies 6 ms after the others, 2.4 ms of it computing: 40% of the wait.
    verdicts = run(measured=True, worker_step_seconds=(0.004, 0.004, 0.004, 0.0064),
                   reply_delays=(0, 0, 0, 0.0036))
    title = only(verdicts, WORKERS_BALANCED).title
    assert "more than the others' mean, 40.0% of its waits as last: it is late mostly by send order" in title
    assert "no longer than the others'" not in title


def test_a_worker_last_in_no_more_than_its_share_is_told_where_a_straggler_starts(run):
    verdicts = run(measured=True, steps=16, worker_step_seconds=slow_in_first_steps(9))
    title = only(verdicts, WORKERS_BALANCED).title
    assert "is last in 56.2% of steps (fair share 25.0%; a straggler is last in 62.5%)" in title


@pytest.mark.parametrize("compute_excess, is_straggler", [(0.0024, False), (0.0036, True)])
def test_a_stragglers_own_compute_explains_at_least_half_of_its_wait(run, compute_excess, is_straggler):
    # Worker 3 always replies 6 ms after the others; its env accounts for 40%, then 60%, of that.
    verdicts = run(measured=True, worker_step_seconds=(0.004, 0.004, 0.004, 0.004 + compute_excess),
                   reply_delays=(0, 0, 0, 0.006 - compute_excess))
    assert bool(verdicts.of_kind(STRAGGLER)) is is_straggler


def test_a_straggler_with_more_envs_than_the_others_is_told_the_split_is_uneven(run):
    # envs_per_worker="auto" with 5 envs on 2 cores: 3 and 2 envs of 2 ms each.
    verdicts = run(measured=True, worker_step_seconds=(0.006, 0.004), envs_per_worker=(3, 2))
    straggler = only(verdicts, STRAGGLER)
    assert straggler.evidence["worker"] == "worker 0"
    assert "worker 0 steps 3 envs per vector step where the other workers step 2" in straggler.suggestion
    assert "a multiple of the workers" in straggler.suggestion
    assert "Find what makes" not in straggler.suggestion


def test_a_straggler_with_more_envs_whose_envs_are_also_slower_is_told_to_find_why(run):
    # 3 envs of 4 ms against 2 of 2 ms: the envs themselves are twice as slow.
    verdicts = run(measured=True, worker_step_seconds=(0.012, 0.004), envs_per_worker=(3, 2))
    assert "Find what makes worker 0's env slower" in only(verdicts, STRAGGLER).suggestion


def test_identical_workers_taking_turns_at_being_last_are_balanced(run):
    """The PPO case: identical envs, whoever is last by a hair changes from step to step."""
    steps = 40
    plan = [tuple(0.004 + (0.00005 if worker == (step * 3) % 4 else 0.0) for worker in range(4))
            for step in range(steps)]
    verdicts = run(measured=True, steps=steps, worker_step_seconds=plan)
    assert not verdicts.of_kind(STRAGGLER)
    assert "workers are balanced" in only(verdicts, WORKERS_BALANCED).title


def test_a_lone_worker_gets_no_straggler_and_no_balance_finding(run):
    verdicts = run(measured=True, worker_step_seconds=(0.010,))
    assert not verdicts.of_kind(STRAGGLER) and not verdicts.of_kind(WORKERS_BALANCED)


def test_without_critical_path_a_much_slower_worker_is_inferred_and_said_so(run):
    verdicts = run()  # an older file: workers section, no critical path
    straggler = only(verdicts, STRAGGLER)
    assert straggler.evidence["worker"] == "worker 3"
    assert "inferred from env compute" in straggler.title
    assert straggler.cost_seconds == pytest.approx(0.060)  # (10 - 4 ms) a step
    assert any("no critical-path counters" in line for line in verdicts.cannot_tell)


@pytest.mark.parametrize("slow_seconds, is_straggler", [(0.0058, False), (0.0062, True)])
def test_an_inferred_straggler_computes_at_least_half_again_the_others(run, slow_seconds, is_straggler):
    verdicts = run(worker_step_seconds=(0.004, 0.004, 0.004, slow_seconds))
    assert bool(verdicts.of_kind(STRAGGLER)) is is_straggler


def test_without_a_workers_section_the_straggler_cannot_be_told_and_it_is_said(run):
    verdicts = run(with_workers_section=False)
    assert not verdicts.of_kind(STRAGGLER) and not verdicts.of_kind(WORKERS_BALANCED)
    assert any("no workers section" in line for line in verdicts.cannot_tell)


# --- CPU oversubscription -------------------------------------------------------------------------


def test_envs_needing_more_cpu_than_the_cores_give_make_the_cpu_the_limit(run):
    # 4 workers, each 4 ms of CPU in 8 ms of wall a step, on 2 cores: a step needs 8 ms of cores,
    # the busiest worker alone 4 ms, so 4 ms a step wait for a free core.
    verdicts = run(measured=True, worker_step_seconds=(0.008,) * 4, env_cpu_fraction=0.5,
                   cores=2, busy_processes=5)
    cpu = only(verdicts, CPU_OVERSUBSCRIPTION)
    assert cpu.cost_seconds == pytest.approx(0.040)
    assert cpu.evidence["env_cpu_per_step_seconds"] == pytest.approx(0.016)
    assert cpu.evidence["cores_floor_per_step_seconds"] == pytest.approx(0.008)
    assert cpu.evidence["env_off_cpu_seconds_mean_worker"] == pytest.approx(0.040)
    assert "5 busy processes" in cpu.title and "2 cores" in cpu.title
    assert 'envs_per_worker="auto" (2 workers for 4 envs' in cpu.suggestion


@pytest.mark.parametrize("cpu_seconds, is_limit", [(0.0015, False), (0.003, True)])
def test_the_wait_for_a_core_must_cost_ten_percent_of_the_wall_time(run, cpu_seconds, is_limit):
    # 3 workers on 2 cores wait half a worker's CPU a step: 9.4%, then 15.8% of the wall time.
    assert CPU_MIN_COST_SHARE == 0.10
    verdicts = run(measured=True, worker_step_seconds=(cpu_seconds,) * 3, cores=2, busy_processes=4)
    assert bool(verdicts.of_kind(CPU_OVERSUBSCRIPTION)) is is_limit


def test_on_a_machine_loaded_by_others_time_off_the_cpu_makes_the_cpu_likely_the_limit(run):
    # 3 workers on 2 cores: the cores floor explains 1 ms a step (6.9%), but each worker's env
    # ran 2 ms on a CPU in 8 ms of wall time: 6 ms a step off the CPU.
    verdicts = run(measured=True, worker_step_seconds=(0.008,) * 3, env_cpu_fraction=0.25,
                   cores=2, busy_processes=4)
    cpu = only(verdicts, CPU_OVERSUBSCRIPTION)
    assert cpu.title.startswith("the CPU is likely the limit")
    assert "or sleeping, if the env sleeps" in cpu.title
    assert cpu.cost_seconds == pytest.approx(0.060)
    assert cpu.evidence["measured_by"] == "time off the CPU"


@pytest.mark.parametrize("cpu_fraction, is_limit", [(0.045, False), (0.075, True)])
def test_time_off_the_cpu_counts_only_when_env_cpu_is_five_percent_of_the_cores(
        run, cpu_fraction, is_limit):
    # The envs' CPU is 4.7%, then 7.8%, of 2 cores over the steps; the rest of their time is off it.
    assert CPU_MIN_DEMAND_SHARE == 0.05
    verdicts = run(measured=True, worker_step_seconds=(0.008,) * 3, env_cpu_fraction=cpu_fraction,
                   cores=2, busy_processes=4)
    assert bool(verdicts.of_kind(CPU_OVERSUBSCRIPTION)) is is_limit


@pytest.mark.parametrize("cpu_fraction", [1.0, 0.25])
def test_no_more_workers_than_cores_is_never_oversubscribed(run, cpu_fraction):
    verdicts = run(measured=True, worker_step_seconds=(0.008,) * 2, env_cpu_fraction=cpu_fraction,
                   cores=2, busy_processes=3)
    assert not verdicts.of_kind(CPU_OVERSUBSCRIPTION)


def test_sleeping_envs_do_not_load_the_cpu(run):
    """Wall far above CPU time is not contention when the envs barely use the CPU (they sleep)."""
    verdicts = run(measured=True, worker_step_seconds=(0.008,) * 4, env_cpu_fraction=0.02,
                   cores=2, busy_processes=5)
    assert not verdicts.of_kind(CPU_OVERSUBSCRIPTION)


def test_an_oversubscribed_cpu_is_not_blamed_on_the_pipe_or_the_envs(run):
    # 4 ms of pipe latency and 3 ms of transport a step, against 4 ms of env compute.
    verdicts = run(measured=True, worker_step_seconds=(0.004,) * 4, env_cpu_fraction=0.5,
                   latency_seconds=0.004, policy_seconds=0.0005, cores=2, busy_processes=5)
    assert verdicts.of_kind(CPU_OVERSUBSCRIPTION)
    assert not verdicts.of_kind(TRANSPORT_BOUND) and not verdicts.of_kind(ENV_BOUND)


@pytest.mark.parametrize("options, missing", [
    ({"measured": True}, "does not record the cores"),
    ({"cores": 2, "busy_processes": 5}, "does not record the workers' env CPU time"),
])
def test_without_cpu_time_or_cores_cpu_contention_cannot_be_told_and_it_is_said(run, options, missing):
    verdicts = run(worker_step_seconds=(0.008,) * 4, **options)
    assert not verdicts.of_kind(CPU_OVERSUBSCRIPTION)
    assert any(missing in line for line in verdicts.cannot_tell)


# --- the pipe ----------------------------------------------------------------------------------------


def test_a_pipe_slower_than_the_envs_on_a_free_cpu_is_transport_bound(run):
    verdicts = run(measured=True, worker_step_seconds=(0.0005, 0.0005), latency_seconds=0.002,
                   cores=2, busy_processes=3)
    transport = only(verdicts, TRANSPORT_BOUND)
    assert transport.cost_seconds == pytest.approx(0.050)  # send 1 + receive 2 + latency 2 ms a step
    assert transport.evidence["receive_and_decode_seconds"] == pytest.approx(0.020)
    assert transport.evidence["cpu_contention"] == "not the limit"
    assert "envs_per_worker=2" in transport.suggestion
    assert "shared_memory=True" in transport.suggestion


def test_when_receiving_outweighs_sending_the_advice_starts_with_the_observations(run):
    # Receiving takes 2 ms a step, sending 1 ms.
    verdicts = run(measured=True, worker_step_seconds=(0.0005, 0.0005), latency_seconds=0.002,
                   cores=2, busy_processes=3)
    suggestion = only(verdicts, TRANSPORT_BOUND).suggestion
    assert suggestion.index("shared_memory=True") < suggestion.index("envs_per_worker=")
    assert "receiving and decoding them is 66.7% of the transport" in suggestion


def test_workers_bound_by_their_pipes_and_outnumbering_the_cores_are_told_of_auto(run):
    verdicts = run(measured=True, worker_step_seconds=(0.0005,) * 4, latency_seconds=0.002,
                   cores=2, busy_processes=5, env_cpu_fraction=0.1)
    suggestion = only(verdicts, TRANSPORT_BOUND).suggestion
    assert 'envs_per_worker="auto" (one worker per core, 2 for 4 envs)' in suggestion


def test_workers_bound_by_their_pipes_with_a_core_each_are_not_told_of_auto(run):
    verdicts = run(measured=True, worker_step_seconds=(0.0005, 0.0005), latency_seconds=0.002,
                   cores=2, busy_processes=3)
    assert '"auto"' not in only(verdicts, TRANSPORT_BOUND).suggestion


def test_a_lone_worker_bound_by_its_pipe_is_not_told_to_batch_envs_per_worker(run):
    verdicts = run(measured=True, worker_step_seconds=(0.0005,), latency_seconds=0.002,
                   cores=2, busy_processes=2)
    suggestion = only(verdicts, TRANSPORT_BOUND).suggestion
    assert "envs_per_worker=" not in suggestion
    assert "one worker already carries every env" in suggestion


def test_envs_slower_than_the_pipe_are_not_transport_bound(run):
    verdicts = run(measured=True, worker_step_seconds=(0.005, 0.005), cores=2, busy_processes=3)
    assert not verdicts.of_kind(TRANSPORT_BOUND)


@pytest.mark.parametrize("policy_seconds, is_verdict", [(0.040, True), (0.050, False)])
def test_the_pipe_must_cost_ten_percent_of_the_wall_time(run, policy_seconds, is_verdict):
    # The pipe costs 5 ms of each 6 ms step: 10.9%, then 8.9%, of the wall time.
    verdicts = run(measured=True, worker_step_seconds=(0.0005, 0.0005), latency_seconds=0.002,
                   policy_seconds=policy_seconds, cores=2, busy_processes=3)
    assert bool(verdicts.of_kind(TRANSPORT_BOUND)) is is_verdict


def test_a_pipe_verdict_on_a_file_without_cpu_time_says_the_cpu_was_not_measured(run):
    verdicts = run(worker_step_seconds=(0.0005, 0.0005), latency_seconds=0.002)
    transport = only(verdicts, TRANSPORT_BOUND)
    assert transport.evidence["cpu_contention"] == "not measured in this file"
    assert "an oversubscribed CPU looks the same" in transport.title


@pytest.fixture
def pipe_run(tmp_path, fake_clock):
    """``pipe_run(in_blocks)``: the verdicts on the transport-bound run above (ten steps, each 1 ms
    of sending, 2 of receiving and 2 of waiting beyond 0.5 ms of env compute), its trainer's
    scheduling section saying ``in_blocks``."""
    def judged(in_blocks):
        tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock, measured=True,
                                                 worker_step_seconds=(0.0005, 0.0005), latency_seconds=0.002,
                                                 cores=2, busy_processes=3))
        return judge_run(with_waits_in_steps(tree, in_blocks))
    return judged


def test_a_pipe_that_outweighs_the_envs_only_with_the_trainers_waits_for_a_core_is_not_told_but_said(pipe_run):
    # Two of the ten steps read: 4.5 ms of each step's 5 ms beyond the envs was a wait for a core.
    verdicts = pipe_run({"vector.step": {"runs_read": 2, "run_queue_seconds": 0.009}})
    assert not verdicts.of_kind(TRANSPORT_BOUND)
    assert ("whether the pipe is the limit: it took 5.00 ms per step against 500.0 us of env compute, but inside "
            "the steps the trainer waited 4.50 ms per step for a core") in " ".join(verdicts.cannot_tell)


def test_a_pipe_verdict_leaves_out_and_says_the_trainers_waits_for_a_core_inside_its_steps(pipe_run):
    verdicts = pipe_run({"vector.step": {"runs_read": 2, "run_queue_seconds": 0.002}})  # 1 ms a step
    transport = only(verdicts, TRANSPORT_BOUND)
    assert transport.cost_seconds == pytest.approx(0.040)  # 5 ms a step less the 1 ms waited
    assert transport.evidence["trainer_core_waits_seconds"] == pytest.approx(0.010)
    assert transport.evidence["core_waits_steps_read"] == 2
    assert transport.evidence["pipe_per_step_seconds"] == pytest.approx(0.004)
    assert ("take 4.00 ms per step against 500.0 us of env compute; inside the steps the trainer also waited "
            "1.00 ms per step for a core (the kernel's count), left out of the pipe's time") in transport.title


def test_a_trainer_on_a_core_longer_than_the_envs_inside_its_steps_is_the_pipes_limit_whatever_it_waited(pipe_run):
    # Of each step's 5 ms beyond the envs, 4.5 waited for a core (in the pipe's parts or not), and
    # the trainer ran 1.5 ms on a core, 0.5 ms of it its other work in the step: sending,
    # receiving and decoding took at least the other 1 ms.
    verdicts = pipe_run({"vector.step": {"runs_read": 2, "run_queue_seconds": 0.009, "cpu_seconds": 0.003}})
    transport = only(verdicts, TRANSPORT_BOUND)
    assert transport.cost_seconds == pytest.approx(0.010)
    assert transport.evidence["trainer_on_core_seconds"] == pytest.approx(0.015)
    assert ("take 1.00 ms per step against 500.0 us of env compute; inside the steps the trainer also waited "
            "4.50 ms per step") in transport.title
    assert transport.evidence["trainer_core_waits_seconds"] == pytest.approx(0.045)


def test_waits_inside_another_block_leave_the_pipe_as_it_was(pipe_run):
    verdicts = pipe_run({"SyncVectorEnv.step": {"runs_read": 2, "run_queue_seconds": 0.009}})
    transport = only(verdicts, TRANSPORT_BOUND)
    assert transport.cost_seconds == pytest.approx(0.050)
    assert "trainer_core_waits_seconds" not in transport.evidence


PROBLEM = ("scheduling.in_blocks['vector.step'] needs whole runs_read, run_queue_seconds >= 0 and cpu_seconds >= 0 "
           "where given; ignored")


@pytest.mark.parametrize("in_blocks, problem", [
    ({"vector.step": {"runs_read": 2, "run_queue_seconds": -1.0}}, PROBLEM),
    ({"vector.step": {"runs_read": 2.5, "run_queue_seconds": 0.009}}, PROBLEM),
    ({"vector.step": {"runs_read": 2, "run_queue_seconds": 0.009, "cpu_seconds": "0.001"}}, PROBLEM),
    ([0.009], "scheduling.in_blocks is not an object; ignored"),
])
def test_damaged_waits_inside_the_steps_are_said_and_ignored(pipe_run, in_blocks, problem):
    verdicts = pipe_run(in_blocks)
    assert only(verdicts, TRANSPORT_BOUND).cost_seconds == pytest.approx(0.050)
    assert problem in verdicts.cannot_tell


# --- the trainer --------------------------------------------------------------------------------------


def test_a_slow_policy_is_named_first(run):
    verdicts = run(measured=True, policy_seconds=0.030, cores=2, busy_processes=5)
    first = verdicts.verdicts[0]
    assert first.kind == TRAINER_BOUND
    assert first.evidence["top_blocks"][0]["block"] == "policy.act"
    assert first.cost_seconds == pytest.approx(0.300)
    assert "Speed up policy.act first" in first.suggestion


@pytest.mark.parametrize("policy_seconds, is_verdict", [(0.012, False), (0.015, True)])
def test_the_trainer_must_take_more_than_the_vector_steps(run, policy_seconds, is_verdict):
    # The steps take 13.5 ms each: a 12 ms policy is 47% of the wall but less than the steps.
    verdicts = run(measured=True, policy_seconds=policy_seconds)
    assert bool(verdicts.of_kind(TRAINER_BOUND)) is is_verdict


def one_block_run(block_seconds: float) -> dict:
    """10 s of wall time with one block of ``block_seconds``; the rest is outside any block."""
    return {"name": "root", "total": 10.0, "count": 1, "self": 10.0 - block_seconds,
            "children": [{"name": "work", "total": block_seconds, "count": 1, "self": block_seconds,
                          "children": []}], "gauges": {}, "metadata": {}}


@pytest.mark.parametrize("block_seconds, is_verdict", [(3.5, False), (4.5, True)])
def test_the_trainer_must_take_forty_percent_of_the_wall_time(block_seconds, is_verdict):
    assert bool(judge_run(one_block_run(block_seconds)).of_kind(TRAINER_BOUND)) is is_verdict


def start_up_then_loop(policy_seconds: float) -> dict:
    """20 s outside any block, then 10 iterations of a 10 ms vector step, a ``policy.act`` block
    of ``policy_seconds`` and 0.1 s outside any block (the last of which is after the loop)."""
    spans, clock = [], 20.0
    for _ in range(10):
        spans.append(["vector.step", clock, clock + 0.01])
        spans.append(["policy.act", clock + 0.01, clock + 0.01 + policy_seconds])
        clock += 0.11 + policy_seconds
    return timeline_tree(spans, total=clock)


@pytest.mark.parametrize("policy_seconds, is_verdict", [(0.06, False), (0.08, True)])
def test_the_trainer_must_take_forty_percent_of_the_training_loop_not_of_the_start_up(policy_seconds, is_verdict):
    # The policy's 0.6 s are 37.5% of the 1.6 s loop, its 0.8 s 44%: each under 4% of the wall time.
    assert bool(judge_run(start_up_then_loop(policy_seconds)).of_kind(TRAINER_BOUND)) is is_verdict


def test_the_trainer_bound_verdict_gives_its_shares_of_the_loop_and_of_the_wall_time():
    trainer = only(judge_run(start_up_then_loop(0.08)), TRAINER_BOUND)
    assert trainer.title == ("the trainer's own code is the limit: its blocks take 44.4% of the training loop "
                             "(3.7% of the wall time), led by policy.act (44.4%)")
    assert trainer.evidence["training_loop_seconds"] == pytest.approx(1.8)


def with_a_timed_load_before_the_loop(tree: dict) -> dict:
    """``tree`` with 5 s of its start-up in a ``load_dataset`` block."""
    spans = tree["timeline"]["processes"][0]["threads"][0]["spans"]
    return timeline_tree([["load_dataset", 10.0, 15.0], *spans], total=tree["total"])


def test_a_block_that_ran_only_before_the_loop_is_not_the_loops_trainer_limit():
    assert not judge_run(with_a_timed_load_before_the_loop(start_up_then_loop(0.06))).of_kind(TRAINER_BOUND)


def test_a_block_that_ran_only_before_the_loop_is_not_in_the_loops_wall_time():
    trainer = only(judge_run(with_a_timed_load_before_the_loop(start_up_then_loop(0.08))), TRAINER_BOUND)
    assert trainer.evidence["training_loop_seconds"] == pytest.approx(1.8)
    assert "led by policy.act (44.4%)" in trainer.title


def test_a_single_process_run_names_its_slowest_blocks(tmp_path, fake_clock):
    verdicts = judge_run(load_timing_tree(write_plain_run(tmp_path / "run.json", fake_clock)))
    trainer = only(verdicts, TRAINER_BOUND)
    assert [block["block"] for block in trainer.evidence["top_blocks"]] == ["backward", "forward", "load"]
    assert verdicts.cannot_tell == ()


# --- the environments ----------------------------------------------------------------------------------


@pytest.mark.parametrize("compute_seconds, is_verdict", [(0.0015, False), (0.004, True)])
def test_env_compute_must_take_thirty_percent_of_the_wall_time(run, compute_seconds, is_verdict):
    verdicts = run(measured=True, worker_step_seconds=(compute_seconds,) * 2, cores=4, busy_processes=3)
    assert bool(verdicts.of_kind(ENV_BOUND)) is is_verdict


def test_env_bound_suggests_more_workers_when_cores_are_idle(run):
    verdicts = run(measured=True, worker_step_seconds=(0.008,) * 2, cores=4, busy_processes=3)
    assert "1 of 4 cores are idle: add workers" in only(verdicts, ENV_BOUND).suggestion


@pytest.mark.parametrize("cores, unknown", [(None, "the cores"), (4, "how many processes were busy on its 4 cores")])
def test_env_bound_says_which_figure_it_lacks_to_tell_idle_cores(run, cores, unknown):
    verdicts = run(measured=True, worker_step_seconds=(0.008,) * 2, cores=cores, busy_processes=None)
    assert f"(this file does not record {unknown})" in only(verdicts, ENV_BOUND).suggestion


def test_env_bound_suggests_a_cheaper_env_when_every_core_is_busy(run):
    verdicts = run(measured=True, worker_step_seconds=(0.008,) * 2, cores=2, busy_processes=3)
    assert "Make env.step cheaper" in only(verdicts, ENV_BOUND).suggestion


# --- untimed --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("untimed_seconds, is_verdict", [(0.015, False), (0.020, True)])
def test_time_outside_any_block_is_a_verdict_from_ten_percent(run, untimed_seconds, is_verdict):
    # The blocks take 165 ms: 15 ms outside them is 8.3%, 20 ms is 10.8%.
    verdicts = run(measured=True, untimed_seconds=untimed_seconds)
    assert bool(verdicts.of_kind(UNTIMED)) is is_verdict
    if is_verdict:
        assert only(verdicts, UNTIMED).cost_seconds == pytest.approx(untimed_seconds)


# --- the list ---------------------------------------------------------------------------------------------


def test_verdicts_are_ranked_by_cost_and_findings_come_last(run):
    verdicts = run(measured=True, untimed_seconds=0.5, worker_step_seconds=(0.0040, 0.0041))
    costs = [verdict.cost_seconds for verdict in verdicts.verdicts]
    assert costs == sorted(costs, reverse=True)
    assert verdicts.kinds[0] == UNTIMED and verdicts.kinds[-1] == WORKERS_BALANCED


@pytest.mark.parametrize("name", ["mlagents_timers.json", "mlagents_nested_timers.json"])
def test_mlagents_files_are_judged_with_what_they_cannot_tell_said(name):
    verdicts = judge_run(load_timing_tree(DATA / name))
    assert any("no workers section" in line for line in verdicts.cannot_tell)
    assert not verdicts.of_kind(STRAGGLER) and not verdicts.of_kind(CPU_OVERSUBSCRIPTION)


def test_damaged_measurements_are_reported_among_what_cannot_be_told(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock, measured=True))
    tree["workers"][2]["critical_path"] = "broken"
    verdicts = judge_run(tree)
    assert "worker 2: critical_path is not an object; ignored" in verdicts.cannot_tell
    assert verdicts.of_kind(STRAGGLER)[0].title.startswith("worker 3 likely holds up")


@pytest.mark.parametrize("options", [
    {}, {"measured": True}, {"measured": True, "cores": 2, "busy_processes": 5,
                             "worker_step_seconds": (0.008,) * 4, "env_cpu_fraction": 0.5},
])
def test_every_verdict_is_strict_json(run, options):
    document = run(**options).as_dict()
    assert json.loads(json.dumps(document, allow_nan=False)) == document
    for verdict in document["verdicts"]:
        assert set(verdict) == {"kind", "title", "cost_seconds", "share", "evidence", "suggestion"}


# --- memory_leak -------------------------------------------------------------------------------------

MIB = 1024 * 1024


def with_memory(tree, name, resident_bytes, blocks=()):
    """``tree`` with a process ``name`` whose samples, one a second, read ``resident_bytes``."""
    samples = [[float(second), int(value), None] for second, value in enumerate(resident_bytes)]
    process = {"pid": 4321, "name": name, "clock_offset": 0.0, "stride": 1, "samples": samples,
               "blocks": [{"path": list(path), "calls": 10, "net_bytes": net, "peak_bytes": net}
                          for path, net in blocks]}
    tree.setdefault("memory", {"unit": "bytes", "clock": "perf_counter", "processes": []})
    tree["memory"]["processes"].append(process)
    return tree


def steady(start, growth, samples=40):
    return [start + growth * index / (samples - 1) for index in range(samples)]


@pytest.fixture
def plain(tmp_path, fake_clock):
    return load_timing_tree(write_plain_run(tmp_path / "run.json", fake_clock))


def test_a_process_whose_memory_grows_steadily_is_named_a_leak(plain):
    tree = with_memory(plain, "worker 2", steady(100 * MIB, 40 * MIB), blocks=[(("env.step",), 38 * MIB)])
    (leak,) = judge_run(tree).of_kind(MEMORY_LEAK)
    assert leak.title.startswith("worker 2 leaks memory: it grew steadily by")
    assert leak.cost_seconds == 0.0
    assert leak.evidence["process"] == "worker 2"
    assert leak.evidence["blocks_keeping_most"][0]["block"] == "env.step"
    assert leak.suggestion.startswith("Find what its env keeps from every step")


def test_growth_below_the_threshold_is_no_leak(plain):
    tree = with_memory(plain, "trainer", steady(100 * MIB, LEAK_MIN_GROWTH_BYTES * 0.75))
    assert not judge_run(tree).of_kind(MEMORY_LEAK)


def test_growth_small_beside_a_large_process_is_no_leak(plain):
    tree = with_memory(plain, "trainer", steady(4096 * MIB, 40 * MIB))
    assert not judge_run(tree).of_kind(MEMORY_LEAK)


def test_a_warm_up_that_levels_off_is_no_leak(plain):
    warm_up = [100 * MIB] * 4 + [180 * MIB] * 36
    assert not judge_run(with_memory(plain, "trainer", warm_up)).of_kind(MEMORY_LEAK)


def test_flat_memory_is_no_leak(plain):
    noisy = [100 * MIB + (index % 3) * 4096 for index in range(40)]
    assert not judge_run(with_memory(plain, "worker 0", noisy)).of_kind(MEMORY_LEAK)


def test_too_few_samples_are_said_to_tell_nothing(plain):
    verdicts = judge_run(with_memory(plain, "trainer", steady(100 * MIB, 40 * MIB, LEAK_MIN_SAMPLES - 1)))
    assert not verdicts.of_kind(MEMORY_LEAK)
    assert any("whether trainer's memory leaks" in line for line in verdicts.cannot_tell)
    assert not any("samples there" in line for line in verdicts.cannot_tell)  # no loop to be "there"


def test_a_leak_without_allocation_tracking_says_how_to_find_the_block(plain):
    (leak,) = judge_run(with_memory(plain, "trainer", steady(100 * MIB, 40 * MIB))).of_kind(MEMORY_LEAK)
    assert "track_allocations=True" in leak.suggestion


def a_run_whose_loop_is(first_second, steps, total):
    """A run of ``total`` seconds whose training loop is ``steps`` vector steps, one a second from
    ``first_second`` on."""
    spans = [["vector.step", first_second + step, first_second + step + 0.5] for step in range(steps)]
    return timeline_tree(spans, total)


def test_the_start_ups_growth_before_a_flat_loop_is_no_leak():
    # Imports and building the model grow the process by 300 MiB; the loop's ten samples are flat.
    start_up = steady(50 * MIB, 300 * MIB, samples=30)
    tree = with_memory(a_run_whose_loop_is(30, steps=10, total=41), "trainer", start_up + [350 * MIB] * 10)
    assert not judge_run(tree).of_kind(MEMORY_LEAK)


def test_growth_inside_the_loop_is_judged_on_the_loops_samples_only():
    resident = [50 * MIB] * 10 + steady(60 * MIB, 60 * MIB, samples=20) + [200 * MIB] * 5
    tree = with_memory(a_run_whose_loop_is(10, steps=20, total=36), "worker 0", resident)
    (leak,) = judge_run(tree).of_kind(MEMORY_LEAK)
    assert leak.evidence["judged_over"] == "training loop"
    assert leak.evidence["samples"] == 20  # seconds 10 to 29: the loop's, not the end's jump
    assert leak.evidence["growth_bytes"] < 60 * MIB
    assert leak.title.endswith("over the training loop, and was still growing when it ended")


def test_a_trainer_leak_names_a_replay_buffer_still_filling_among_the_causes(plain):
    (leak,) = judge_run(with_memory(plain, "trainer", steady(100 * MIB, 40 * MIB))).of_kind(MEMORY_LEAK)
    assert "a replay buffer still filling grows so too, up to its size" in leak.suggestion
    assert leak.evidence["judged_over"] == "run"  # no timeline of steps: the whole run


def with_replay_buffer(tree, lowest_mib, highest_mib):
    tree.setdefault("gauges", {})[REPLAY_BUFFER_GAUGE] = {"value": highest_mib, "min": lowest_mib,
                                                          "max": highest_mib, "count": 100}
    return tree


def test_a_trainer_that_grows_by_what_its_replay_buffer_filled_is_not_called_leaking(plain):
    tree = with_replay_buffer(with_memory(plain, "trainer", steady(100 * MIB, 40 * MIB)), 1, 35)
    verdicts = judge_run(tree)
    assert not verdicts.of_kind(MEMORY_LEAK)
    assert any("while its replay buffer filled 34.0 MiB" in line for line in verdicts.cannot_tell)


def test_a_trainer_that_grows_well_beyond_its_replay_buffer_is_named_with_the_buffers_part(plain):
    tree = with_replay_buffer(with_memory(plain, "trainer", steady(100 * MIB, 90 * MIB)), 0, 30)
    (leak,) = judge_run(tree).of_kind(MEMORY_LEAK)
    assert leak.evidence["replay_buffer_filled_bytes"] == 30 * MIB
    assert leak.evidence["rise_bytes"] == 90 * MIB
    assert ("it rose 90.0 MiB; its replay buffer filled 30.0 MiB of that, and the other 60.0 MiB is what "
            "to look for") in leak.suggestion


def test_without_a_replay_buffer_a_process_that_ends_where_it_began_is_still_judged_on_its_trend(plain):
    # Steady quarters, a spike at the first sample and a dip at the last: no rise from end to end.
    resident = [150 * MIB] + steady(100 * MIB, 40 * MIB)[1:-1] + [90 * MIB]
    verdicts = judge_run(with_memory(plain, "trainer", resident))
    assert verdicts.of_kind(MEMORY_LEAK)
    assert not any("replay buffer" in line for line in verdicts.cannot_tell)


def test_a_workers_growth_is_not_set_against_the_trainers_replay_buffer(plain):
    tree = with_replay_buffer(with_memory(plain, "worker 0", steady(100 * MIB, 40 * MIB)), 0, 100)
    assert judge_run(tree).of_kind(MEMORY_LEAK)


def test_only_the_leaking_process_is_named(plain):
    tree = with_memory(plain, "worker 0", [100 * MIB] * 40)
    tree = with_memory(tree, "worker 1", steady(100 * MIB, 60 * MIB))
    assert [verdict.evidence["process"] for verdict in judge_run(tree).of_kind(MEMORY_LEAK)] == ["worker 1"]
