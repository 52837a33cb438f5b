"""Specification: a program that ends with ``os._exit`` under ``rlprof run`` ends as under ``python``
(its code, no ``finally`` block or exit handler of its own) and still gets its files and analysis,
the blocks open at that moment timed up to it; from another thread too, while the main thread runs.
A process the program forks ends with ``os._exit`` at once, as without rlprof.

Real programs in real subprocesses (``rlprof run`` and ``python``).
"""

from __future__ import annotations

import subprocess
import sys
import threading

from profiler import load_timing_tree
from profiler.cli.immediate_exit import RunEnding
from tests.profiler.cli.test_run_program import FINISHES_WITHIN, rlprof_run, write_script
from tree_paths import find

ENDS_AT_ONCE = """
    import atexit
    import os
    from profiler import hierarchical_timer

    atexit.register(print, "the exit handler ran")
    with hierarchical_timer("setup"):
        pass
    try:
        with hierarchical_timer("train"):
            with hierarchical_timer("save"):
                print("saved", flush=True)
                os._exit(3)
    finally:
        print("the finally block ran")
"""


def run_both(tmp_path, name, source, *arguments):
    script = write_script(tmp_path, name, source)
    plain = subprocess.run([sys.executable, str(script), *arguments], cwd=tmp_path, capture_output=True,
                           text=True, timeout=FINISHES_WITHIN)
    return plain, rlprof_run("--summaries-dir", "out", str(script), *arguments, cwd=tmp_path)


def test_the_program_ends_with_its_code_and_none_of_its_own_cleanup_as_under_python(tmp_path):
    plain, profiled = run_both(tmp_path, "quits.py", ENDS_AT_ONCE)
    assert plain.returncode == profiled.returncode == 3
    assert plain.stdout == profiled.stdout == "saved\n"


def test_the_files_and_the_analysis_are_written_and_say_the_program_ended_with_os_exit(tmp_path):
    _, profiled = run_both(tmp_path, "quits.py", ENDS_AT_ONCE)
    assert "rlprof: quits.py ended with os._exit(3)" in profiled.stderr.replace(str(tmp_path) + "/", "")
    for name in ("quits_timers.json", "quits_trace.json.gz", "quits_report.html"):
        assert (tmp_path / "out" / name).is_file()


def test_the_blocks_open_at_os_exit_are_timed_up_to_it(tmp_path):
    run_both(tmp_path, "quits.py", ENDS_AT_ONCE)
    tree = load_timing_tree(tmp_path / "out" / "quits_timers.json")
    for path in (("train",), ("train", "save")):
        block = find(tree, *path)
        assert block["count"] == 1 and block["total"] > 0
        assert "errors" not in block  # ended, not failed


VECTOR_ENV_LEFT_OPEN = """
    import os
    import gymnasium as gym

    envs = gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="async")
    envs.reset(seed=0)
    for _ in range(40):
        envs.step(envs.action_space.sample())
    os._exit(0)
"""


def test_a_vector_env_left_open_at_os_exit_in_the_main_thread_ships_every_call(tmp_path):
    _, profiled = run_both(tmp_path, "rollout.py", VECTOR_ENV_LEFT_OPEN)
    assert profiled.returncode == 0, profiled.stderr
    tree = load_timing_tree(tmp_path / "out" / "rollout_timers.json")
    assert [worker["channel"] for worker in tree["workers"]] == ["complete", "complete"]
    assert find(tree, "vector.step")["count"] == 40


WATCHDOG = """
    import os
    import threading
    import time
    from profiler import hierarchical_timer

    stepped = threading.Event()


    def watchdog():
        stepped.wait()
        os._exit(7)


    threading.Thread(target=watchdog, name="watchdog", daemon=True).start()
    with hierarchical_timer("train"):
        for step in range(100000):
            with hierarchical_timer("step"):
                time.sleep(0.01)
            if step == 4:
                stepped.set()
"""


def test_os_exit_from_another_thread_times_the_main_threads_open_blocks_and_says_so(tmp_path):
    plain, profiled = run_both(tmp_path, "watched.py", WATCHDOG)
    assert plain.returncode == profiled.returncode == 7
    tree = load_timing_tree(tmp_path / "out" / "watched_timers.json")
    assert find(tree, "train")["count"] == 1  # the main thread's tree is the run's, not a thread's
    assert find(tree, "train", "step")["count"] >= 5
    assert ("rlprof: the thread 'watchdog' called os._exit while the main thread still ran: its vector envs "
            "were left as they were, and its blocks still open are timed up to that moment") in profiled.stderr


FORKS_A_CHILD_THAT_EXITS_AT_ONCE = """
    import os
    from profiler import hierarchical_timer

    pid = os.fork()
    if pid == 0:
        os._exit(5)
    _, status = os.waitpid(pid, 0)
    with hierarchical_timer("after"):
        print("child exit code", os.waitstatus_to_exitcode(status), flush=True)
"""


def test_a_forked_child_ends_with_os_exit_at_once_and_the_run_goes_on(tmp_path):
    plain, profiled = run_both(tmp_path, "forks.py", FORKS_A_CHILD_THAT_EXITS_AT_ONCE)
    assert plain.stdout == profiled.stdout == "child exit code 5\n"
    assert profiled.returncode == 0
    assert "os._exit" not in profiled.stderr
    assert find(load_timing_tree(tmp_path / "out" / "forks_timers.json"), "after")["count"] == 1


def test_an_exit_code_that_is_not_a_whole_number_is_refused_as_under_python(tmp_path):
    plain, profiled = run_both(tmp_path, "refused.py", """
        import os
        try:
            os._exit("done")
        except TypeError as error:
            print("refused:", error)
    """)
    assert plain.stdout == profiled.stdout
    assert profiled.stdout.startswith("refused:") and profiled.returncode == 0


def test_the_run_ends_once_and_who_asks_again_gets_that_end():
    calls = []
    ending = RunEnding(lambda end: calls.append(end) or f"ended by {end}")
    assert ending("the program's return") == "ended by the program's return"
    assert ending("an os._exit") == "ended by the program's return"
    assert calls == ["the program's return"]


def test_who_asks_while_the_run_is_ending_waits_for_that_end():
    finishing, release = threading.Event(), threading.Event()

    def finish(end):
        finishing.set()
        release.wait()
        return end

    ending = RunEnding(finish)
    first = threading.Thread(target=ending, args=("first",))
    first.start()
    finishing.wait()
    answers = []
    second = threading.Thread(target=lambda: answers.append(ending("second")))
    second.start()
    second.join(0.05)
    assert second.is_alive()  # still waiting for the first end
    release.set()
    first.join()
    second.join()
    assert answers == ["first"]
