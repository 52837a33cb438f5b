"""Specification of the verdicts that read the kernel's counts: each rule on constructed runs, both
sides of its thresholds.

The runs are fake-clock timer files (see run_files.py) given the sections a real run's dump carries
(``scheduling`` for the trainer and each worker, ``machine_load``), with figures chosen so that each
threshold is approached from both sides. Real runs built to show each verdict are in
tests/envmanager/test_machine_verdicts_on_real_runs.py and test_gil_on_real_runs.py.
"""

from __future__ import annotations

import pytest
from run_files import write_vector_run

from profiler import load_timing_tree
from profiler.analysis.machine_verdicts import (
    GIL_CONTENTION,
    GIL_MAX_CORES,
    GIL_MIN_BUSY_SHARE,
    OUTSIDE_LOAD,
    OUTSIDE_MIN_CORE_SHARE,
    TORCH_POOL_MIN_CORE_SHARE,
    TORCH_THREADS,
)
from profiler.analysis.verdicts import CPU_MIN_COST_SHARE, CPU_OVERSUBSCRIPTION, judge_run


def waits(run_queue: float, cpu: float, wall: float, switches: int = 7) -> dict:
    return {"run_queue_seconds": run_queue, "cpu_seconds": cpu, "wall_seconds": wall,
            "involuntary_switches": switches}


def with_machine(tree, *, trainer, workers, outside_core_seconds=None, outside_processes=(),
                 threads=()):
    """``tree`` with the kernel's counts: ``trainer`` and ``workers`` as (run queue, cpu) seconds
    over the run's wall time; the run's cores busy for its own CPU plus ``outside_core_seconds``."""
    wall = tree["total"]
    tree["scheduling"] = {**waits(*trainer, wall), "since": "timers start",
                          "python_threads": [{"name": name, "cpu_seconds": cpu, "run_queue_seconds": 0.0}
                                             for name, cpu in threads]}
    for entry, figures in zip(tree["workers"], workers):
        entry["scheduling"] = waits(*figures, wall)
    if outside_core_seconds is not None:
        own = trainer[1] + sum(cpu for _, cpu in workers)
        tree["machine_load"] = {
            "cores": [0, 1], "wall_seconds": wall, "busy_core_seconds": own + outside_core_seconds,
            "load_average_1min": 3.5,
            "outside_processes": [{"pid": pid, "name": name, "cpu_seconds": cpu}
                                  for pid, name, cpu in outside_processes]}
    return tree


@pytest.fixture
def vector_run(tmp_path, fake_clock):
    """``vector_run(**options)``: a fake-clock vector run's tree (see ``write_vector_run``), 2 cores."""
    def written(**options):
        options = {"measured": True, "cores": 2, **options}
        return load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock, **options))
    return written


def two_quiet_workers(vector_run):
    """2 workers sleeping 4 ms a step on 2 cores: the run alone has a core per busy worker.
    Wall time 105 ms."""
    return vector_run(worker_step_seconds=(0.004, 0.004), env_cpu_fraction=0.1, busy_processes=3)


# --- the kernel's count in the CPU verdict ----------------------------------------------------------


def test_an_oversubscribed_run_quotes_the_process_that_waited_longest_for_a_core(vector_run):
    # 4 workers of 4 ms CPU a step on 2 cores (see test_verdicts.py): the cores floor costs 40 ms.
    tree = vector_run(worker_step_seconds=(0.004,) * 4, busy_processes=5)
    wall = tree["total"]
    verdicts = judge_run(with_machine(tree, trainer=(0.001, 0.01),
                                      workers=[(0.02, 0.04), (0.043, 0.04), (0.02, 0.04), (0.02, 0.04)]))
    cpu = verdicts.of_kind(CPU_OVERSUBSCRIPTION)[0]
    assert cpu.cost_seconds == pytest.approx(0.040)
    assert f"worker 1 waited {0.043 / wall:.1%} of its wall time for a core" in cpu.title
    assert "the kernel's count" in cpu.title
    waits = {entry["process"]: entry for entry in cpu.evidence["run_queue_by_process"]}
    assert waits["worker 1"]["run_queue_seconds"] == 0.043
    assert waits["trainer"]["involuntary_switches"] == 7
    assert "likely" not in cpu.title


def test_without_the_kernels_count_the_cpu_verdict_says_so_and_infers_as_before(vector_run):
    verdicts = judge_run(vector_run(worker_step_seconds=(0.004,) * 4, busy_processes=5))
    assert verdicts.of_kind(CPU_OVERSUBSCRIPTION)
    assert any("no run-queue delay" in line for line in verdicts.cannot_tell)


def test_a_run_without_workers_gets_no_line_about_their_waits(tmp_path, fake_clock):
    tree = {"name": "root", "total": 10.0, "count": 1, "self": 1.0, "gauges": {},
            "metadata": {"cores_available": "2"},
            "children": [{"name": "work", "total": 9.0, "count": 1, "self": 9.0, "children": []}]}
    assert not [line for line in judge_run(tree).cannot_tell if "core" in line]


def test_time_off_the_cpu_is_not_read_as_waiting_when_the_kernel_counted_the_waits(vector_run):
    # The envs are 10% on a CPU: the inference says "likely" waiting; the kernel says they slept.
    tree = vector_run(worker_step_seconds=(0.008,) * 4, busy_processes=5, env_cpu_fraction=0.1)
    assert "likely" in judge_run(tree).of_kind(CPU_OVERSUBSCRIPTION)[0].title  # without the counts
    measured = with_machine(tree, trainer=(0.0, 0.01), workers=[(0.001, 0.008)] * 4)
    assert not judge_run(measured).of_kind(CPU_OVERSUBSCRIPTION)


# --- other programs' load ---------------------------------------------------------------------------


@pytest.mark.parametrize("outside_share, is_verdict", [(0.09, False), (0.11, True)])
def test_other_programs_must_use_a_tenth_of_the_runs_cores(vector_run, outside_share, is_verdict):
    assert OUTSIDE_MIN_CORE_SHARE == 0.10
    tree = two_quiet_workers(vector_run)
    outside = outside_share * 2 * tree["total"]
    verdicts = judge_run(with_machine(tree, trainer=(0.005, 0.01), workers=[(0.03, 0.004)] * 2,
                                      outside_core_seconds=outside))
    assert bool(verdicts.of_kind(OUTSIDE_LOAD)) is is_verdict


@pytest.mark.parametrize("waits_share, is_verdict", [(0.09, False), (0.11, True)])
def test_other_programs_load_must_cost_a_tenth_of_the_wall_time(vector_run, waits_share, is_verdict):
    assert CPU_MIN_COST_SHARE == 0.10
    tree = two_quiet_workers(vector_run)
    worker_waits = waits_share * tree["total"] - 0.001
    verdicts = judge_run(with_machine(tree, trainer=(0.001, 0.01), workers=[(worker_waits, 0.004)] * 2,
                                      outside_core_seconds=0.1))
    assert bool(verdicts.of_kind(OUTSIDE_LOAD)) is is_verdict


def test_the_runs_own_cpu_that_rlprof_did_not_measure_is_not_other_programs_load(vector_run):
    """Workers that import a framework before their first env (SB3's SubprocVecEnv) use CPU that
    their scheduling figures do not cover: the run's processes' whole CPU time says it is theirs."""
    tree = with_machine(two_quiet_workers(vector_run), trainer=(0.005, 0.01), workers=[(0.03, 0.004)] * 2,
                        outside_core_seconds=0.15)
    tree["machine_load"]["run_processes_cpu_seconds"] = 0.018 + 0.15  # measured, and their start-up
    verdicts = judge_run(tree)
    assert not verdicts.of_kind(OUTSIDE_LOAD)


def with_torch_pool(tree, *, torch_threads: int, pool_share: float, main_thread_waits: float = 0.03):
    """``tree`` whose trainer ran torch on ``torch_threads`` threads, its threads other than its
    Python ones busy for ``pool_share`` of the 2 cores over the run (no timeline: the loop is the
    wall time), its main thread waiting ``main_thread_waits`` for a core."""
    tree["metadata"]["torch_threads"] = str(torch_threads)
    native = pool_share * 2 * tree["total"]
    tree = with_machine(tree, trainer=(main_thread_waits, 0.01 + native), workers=[(0.01, 0.004)] * 2,
                        threads=[("MainThread", 0.01)])
    tree["scheduling"]["python_threads"][0]["run_queue_seconds"] = main_thread_waits
    return tree


@pytest.mark.parametrize("pool_share, is_verdict", [(0.09, False), (0.11, True)])
def test_torchs_pool_must_keep_a_tenth_of_the_cores_busy(vector_run, pool_share, is_verdict):
    assert TORCH_POOL_MIN_CORE_SHARE == 0.10
    tree = with_torch_pool(two_quiet_workers(vector_run), torch_threads=2, pool_share=pool_share)
    assert bool(judge_run(tree).of_kind(TORCH_THREADS)) is is_verdict


def test_torchs_pool_is_a_finding_that_costs_nothing(vector_run):
    """The CPU the pool used is not the time the others lost: one run cannot tell what one thread
    would win (27% of an SB3 A2C's learning, 3% of a CleanRL-style PPO's, on the same 2 cores)."""
    tree = with_torch_pool(two_quiet_workers(vector_run), torch_threads=2, pool_share=0.5)
    (verdict,) = judge_run(tree).of_kind(TORCH_THREADS)
    assert verdict.cost_seconds == 0.0
    assert verdict.suggestion.startswith("Try torch.set_num_threads(1) in the trainer")


@pytest.mark.parametrize("waits_share, is_verdict", [(0.09, False), (0.11, True)])
def test_torchs_pool_is_told_only_where_the_run_waited_for_cores(vector_run, waits_share, is_verdict):
    assert CPU_MIN_COST_SHARE == 0.10
    tree = two_quiet_workers(vector_run)  # no timeline: the loop is the whole wall time
    main_thread_waits = waits_share * tree["total"] - 0.01  # and the largest worker's 10 ms
    tree = with_torch_pool(tree, torch_threads=2, pool_share=0.5, main_thread_waits=main_thread_waits)
    assert bool(judge_run(tree).of_kind(TORCH_THREADS)) is is_verdict


def test_torch_on_one_thread_is_not_told_of_its_pool(vector_run):
    tree = with_torch_pool(two_quiet_workers(vector_run), torch_threads=1, pool_share=0.5)
    assert not judge_run(tree).of_kind(TORCH_THREADS)


def test_a_pool_with_cores_of_its_own_beside_the_runs_busy_processes_is_not_told(vector_run):
    tree = vector_run(worker_step_seconds=(0.004, 0.004), env_cpu_fraction=0.1, busy_processes=3, cores=4)
    tree = with_torch_pool(tree, torch_threads=2, pool_share=0.5)
    assert not judge_run(tree).of_kind(TORCH_THREADS)


def test_other_programs_load_names_the_busiest_of_them_and_what_to_do(vector_run):
    tree = two_quiet_workers(vector_run)
    verdicts = judge_run(with_machine(
        tree, trainer=(0.005, 0.01), workers=[(0.03, 0.004), (0.02, 0.004)], outside_core_seconds=0.15,
        outside_processes=[(4242, "stress", 0.12), (77, "chrome", 0.02)]))
    outside = verdicts.of_kind(OUTSIDE_LOAD)[0]
    assert outside.cost_seconds == pytest.approx(0.035)  # the trainer's waits and worker 0's
    assert "stress (pid 4242" in outside.title and "chrome (pid 77" in outside.title
    assert "worker 0 waited" in outside.title
    assert "taskset" in outside.suggestion and "quieter machine" in outside.suggestion
    assert not verdicts.of_kind(CPU_OVERSUBSCRIPTION)  # the run alone has a core per worker


def test_the_trainers_waits_are_its_main_threads_not_its_threads_summed(vector_run):
    # Its threads waited 90 ms in all (torch's intra-op pool waits beside the main thread), the
    # main thread 40 ms: the same wall time counted once.
    tree = with_machine(two_quiet_workers(vector_run), trainer=(0.09, 0.01), workers=[(0.03, 0.004)] * 2,
                        outside_core_seconds=0.15, threads=[("MainThread", 0.008)])
    tree["scheduling"]["python_threads"][0]["run_queue_seconds"] = 0.04
    outside = judge_run(tree).of_kind(OUTSIDE_LOAD)[0]
    assert outside.cost_seconds == pytest.approx(0.04 + 0.03)
    assert f"trainer's main thread waited {0.04 / tree['total']:.1%} of its wall time for a core" in outside.title
    waits = {entry["process"]: entry["run_queue_seconds"] for entry in outside.evidence["run_queue_by_process"]}
    assert (waits["trainer"], waits["trainer's main thread"]) == (0.09, 0.04)


def test_other_programs_are_charged_only_the_waits_beyond_the_runs_own_crowding(vector_run):
    # The cores floor puts 40 ms on the run itself; its processes waited 60 ms in all.
    tree = vector_run(worker_step_seconds=(0.004,) * 4, busy_processes=5)
    verdicts = judge_run(with_machine(tree, trainer=(0.01, 0.01), workers=[(0.05, 0.04)] * 4,
                                      outside_core_seconds=0.1))
    assert verdicts.of_kind(CPU_OVERSUBSCRIPTION)[0].cost_seconds == pytest.approx(0.040)
    assert verdicts.of_kind(OUTSIDE_LOAD)[0].cost_seconds == pytest.approx(0.020)


def test_waits_the_runs_own_crowding_explains_are_not_put_on_other_programs(vector_run):
    tree = vector_run(worker_step_seconds=(0.004,) * 4, busy_processes=5)
    verdicts = judge_run(with_machine(tree, trainer=(0.0, 0.01), workers=[(0.045, 0.04)] * 4,
                                      outside_core_seconds=0.1))
    assert not verdicts.of_kind(OUTSIDE_LOAD)  # 5 ms beyond the run's own 40: under a tenth


def test_a_damaged_machine_section_is_said_and_ignored(vector_run):
    tree = with_machine(two_quiet_workers(vector_run), trainer=(0.005, 0.01),
                        workers=[(0.03, 0.004)] * 2, outside_core_seconds=0.15)
    tree["machine_load"]["busy_core_seconds"] = "lots"
    verdicts = judge_run(tree)
    assert not verdicts.of_kind(OUTSIDE_LOAD)
    assert any(line.startswith("machine_load needs") for line in verdicts.cannot_tell)


# --- threads and the GIL ----------------------------------------------------------------------------


def threaded_run(*, cpu: float, run_queue: float = 0.05, threads=(("env-0", 0.45), ("env-1", 0.40)),
                 cores: str = "2") -> dict:
    """A single-process run of 1 s whose trainer used ``cpu`` seconds of CPU on its threads."""
    tree = {"name": "root", "total": 1.0, "count": 1, "self": 0.1, "gauges": {},
            "metadata": {"cores_available": cores},
            "children": [{"name": "env_step", "total": 0.9, "count": 100, "self": 0.9, "children": []}]}
    scale = cpu / (0.05 + sum(seconds for _, seconds in threads))
    tree["scheduling"] = {**waits(run_queue, cpu, 1.0), "since": "process start",
                          "python_threads": [{"name": name, "cpu_seconds": seconds * scale,
                                              "run_queue_seconds": 0.0}
                                             for name, seconds in (("MainThread", 0.05), *threads)]}
    return tree


def test_python_threads_on_one_core_of_two_are_named_gil_contention():
    gil = judge_run(threaded_run(cpu=0.9)).of_kind(GIL_CONTENTION)[0]
    assert "env-0" in gil.title and "env-1" in gil.title
    assert "interpreter's lock" in gil.title
    assert "processes" in gil.suggestion


def test_gil_contention_costs_at_most_all_but_the_longest_threads_cpu_time():
    # Spread over two cores, env-0's 0.45 s would still take 0.45 s: 0.40 s of env-1's is saved at most.
    gil = judge_run(threaded_run(cpu=0.9)).of_kind(GIL_CONTENTION)[0]
    assert gil.cost_seconds == pytest.approx(0.85 - 0.45)


def a_spell_of_two_threads(*, cpu_while_together: float) -> dict:
    """A 5 s run: the main thread alone for 4 s (3.2 s of CPU: imports, building the model),
    then a collector thread beside it for its last second."""
    tree = threaded_run(cpu=3.2 + cpu_while_together, threads=(("collector", 0.0),))
    tree["total"] = 5.0
    tree["scheduling"].update(wall_seconds=5.0, cpu_seconds=3.2 + cpu_while_together, run_queue_seconds=0.05)
    main, collector = tree["scheduling"]["python_threads"]
    main["cpu_seconds"] = 3.2 + cpu_while_together / 2
    collector.update(cpu_seconds=cpu_while_together / 2, ended=True, started_seconds=4.0, ended_seconds=5.0,
                     process_at_start={"cpu_seconds": 3.2, "run_queue_seconds": 0.0},
                     process_at_end={"cpu_seconds": 3.2 + cpu_while_together, "run_queue_seconds": 0.05})
    return tree


def test_threads_that_ran_together_on_two_cores_are_not_gil_contention_whatever_the_whole_run_averages():
    # Over the whole run the process used 1.0 core (5 s of CPU in 5 s); in the second the threads
    # ran together it used 1.8.
    tree = a_spell_of_two_threads(cpu_while_together=1.8)
    assert tree["scheduling"]["cpu_seconds"] / tree["scheduling"]["wall_seconds"] == pytest.approx(1.0)
    assert not judge_run(tree).of_kind(GIL_CONTENTION)


def test_threads_that_took_turns_while_together_are_gil_contention_over_that_time():
    gil = judge_run(a_spell_of_two_threads(cpu_while_together=1.0)).of_kind(GIL_CONTENTION)[0]
    assert gil.evidence["seconds_together"] == pytest.approx(1.0)
    assert gil.evidence["cores_used"] == pytest.approx(1.0)
    assert "in the 1.00 s they ran together" in gil.title
    assert gil.cost_seconds == pytest.approx(0.5)  # the collector's 0.5 s, run beside the main thread


def test_threads_that_never_ran_at_once_are_not_gil_contention():
    tree = threaded_run(cpu=0.9)
    first, second = tree["scheduling"]["python_threads"][1:]
    first.update(started_seconds=0.0, ended_seconds=0.5, process_at_start={"cpu_seconds": 0.0, "run_queue_seconds": 0.0},
                 process_at_end={"cpu_seconds": 0.45, "run_queue_seconds": 0.0})
    second.update(started_seconds=0.5, ended_seconds=1.0, process_at_start={"cpu_seconds": 0.45, "run_queue_seconds": 0.0},
                  process_at_end={"cpu_seconds": 0.9, "run_queue_seconds": 0.0})
    tree["scheduling"]["python_threads"] = [first, second]  # the main thread did no real work
    assert not judge_run(tree).of_kind(GIL_CONTENTION)


def test_a_damaged_thread_moment_is_said_and_its_whole_run_read_instead():
    tree = a_spell_of_two_threads(cpu_while_together=1.8)
    tree["scheduling"]["python_threads"][1]["process_at_start"] = "soon"
    verdicts = judge_run(tree)
    assert any("collector's started_seconds and process_at_start are malformed" in line
               for line in verdicts.cannot_tell)
    assert verdicts.of_kind(GIL_CONTENTION)  # over the whole run: 1.0 core, as before rlprof kept the moments


@pytest.mark.parametrize("cpu, is_verdict", [(1.2, True), (1.3, False)])
def test_threads_running_on_more_than_one_core_released_the_gil(cpu, is_verdict):
    assert GIL_MAX_CORES == 1.25
    assert bool(judge_run(threaded_run(cpu=cpu)).of_kind(GIL_CONTENTION)) is is_verdict


@pytest.mark.parametrize("cpu, is_verdict", [(0.5, False), (0.6, True)])
def test_threads_that_mostly_sleep_are_not_held_up_by_the_gil(cpu, is_verdict):
    # Busy (on a core or waiting for one) 55%, then 65%, of the wall time.
    assert GIL_MIN_BUSY_SHARE == 0.60
    assert bool(judge_run(threaded_run(cpu=cpu)).of_kind(GIL_CONTENTION)) is is_verdict


def test_one_working_thread_is_not_contention():
    assert not judge_run(threaded_run(cpu=0.9, threads=(("env-0", 0.85),))).of_kind(GIL_CONTENTION)


def test_work_done_by_native_threads_is_not_the_gils():
    # The Python threads did a third of the CPU work; a library's own threads did the rest.
    tree = threaded_run(cpu=0.9)
    tree["scheduling"]["cpu_seconds"] = 1.2
    tree["scheduling"]["wall_seconds"] = 1.0
    for thread in tree["scheduling"]["python_threads"]:
        thread["cpu_seconds"] /= 3
    assert not judge_run(tree).of_kind(GIL_CONTENTION)


def test_a_single_core_machine_has_no_gil_contention_to_remove():
    assert not judge_run(threaded_run(cpu=0.9, cores="1")).of_kind(GIL_CONTENTION)


@pytest.mark.parametrize("cpu, is_verdict", [(0.15, False), (0.25, True)])
def test_gil_contention_must_cost_a_tenth_of_the_wall_time(cpu, is_verdict):
    # Threads mostly waiting for a core (run queue 0.5 s): what the GIL costs is half their CPU.
    verdicts = judge_run(threaded_run(cpu=cpu, run_queue=0.5))
    assert bool(verdicts.of_kind(GIL_CONTENTION)) is is_verdict


def test_env_compute_spent_waiting_for_cores_other_programs_took_is_not_called_env_bound(vector_run):
    # Env compute is 60% of the wall time, but the workers waited most of it for a core.
    tree = vector_run(worker_step_seconds=(0.01, 0.01), env_cpu_fraction=0.2, busy_processes=3)
    assert judge_run(tree).of_kind("env_bound")
    verdicts = judge_run(with_machine(tree, trainer=(0.01, 0.02), workers=[(0.08, 0.02)] * 2,
                                      outside_core_seconds=0.2))
    assert verdicts.of_kind(OUTSIDE_LOAD) and not verdicts.of_kind("env_bound")


def test_envs_held_up_by_the_gil_are_not_told_to_add_workers(vector_run):
    # Env compute dominates and a core is idle, which alone would say "add workers"; but the
    # trainer's threads took turns at the GIL, where more threads would only queue.
    tree = vector_run(worker_step_seconds=(0.01, 0.01), busy_processes=1)
    assert "add workers" in judge_run(tree).of_kind("env_bound")[0].suggestion
    wall = tree["total"]
    tree["scheduling"] = threaded_run(cpu=0.9 * wall)["scheduling"]
    tree["scheduling"].update(waits(0.05 * wall, 0.9 * wall, wall))
    verdicts = judge_run(tree)
    assert verdicts.of_kind(GIL_CONTENTION)
    (env_bound,) = verdicts.of_kind("env_bound")
    assert "add workers" not in env_bound.suggestion
    assert "worker processes" in env_bound.suggestion
