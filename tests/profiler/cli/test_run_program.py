"""Specification of ``rlprof run``: an unedited program, run as ``python`` would, profiled.

Every test runs ``python -m profiler run ...`` as a real subprocess on a small script written
here, and checks what the program saw, how rlprof ended and the files it wrote.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from profiler import load_timing_tree
from profiler.cli.run_program import split_run_arguments
from tree_paths import find

FINISHES_WITHIN = 120  # seconds: generous, for a loaded machine; no test checks a duration


def write_script(folder: Path, name: str, source: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(source))
    return path


def rlprof_run(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "profiler", "run", *arguments], cwd=cwd,
                          capture_output=True, text=True, timeout=FINISHES_WITHIN)


TIMED_SCRIPT = """
    import sys
    from profiler import hierarchical_timer

    for _ in range(3):
        with hierarchical_timer("train"):
            with hierarchical_timer("update"):
                pass
    print("argv", sys.argv[1:])
"""


def test_a_program_runs_and_its_blocks_are_written_with_the_trace_and_report(tmp_path):
    script = write_script(tmp_path, "train.py", TIMED_SCRIPT)
    result = rlprof_run("--summaries-dir", "out", str(script), "--lr", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "argv ['--lr', '3']\n"
    tree = load_timing_tree(tmp_path / "out" / "train_timers.json")
    assert find(tree, "train", "update")["count"] == 3
    assert (tmp_path / "out" / "train_trace.json.gz").is_file()
    assert (tmp_path / "out" / "train_report.html").is_file()


def test_the_analysis_is_printed_on_stderr(tmp_path):
    script = write_script(tmp_path, "train.py", TIMED_SCRIPT)
    stderr = rlprof_run("--summaries-dir", "out", str(script), cwd=tmp_path).stderr
    assert f"rlprof: {script} exited with code 0" in stderr
    assert "train/update" in stderr
    assert "rlprof: timers  out/train_timers.json" in stderr


COLLECTOR_STATE_AT_EXIT = """
    import atexit, gc
    {setting}
    atexit.register(lambda: print("collector enabled:", gc.isenabled()))
"""


@pytest.mark.parametrize(("setting", "left"), [("", True), ("gc.disable()", False)], ids=["on", "off"])
def test_the_garbage_collector_is_left_as_the_program_left_it(tmp_path, setting, left):
    # rlprof pauses the collector while it writes its files and report, after the program ends.
    script = write_script(tmp_path, "train.py", COLLECTOR_STATE_AT_EXIT.format(setting=setting))
    result = rlprof_run("--summaries-dir", "out", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"collector enabled: {left}\n"


FROZEN_WHILE_THE_PROGRAM_RUNS = """
    import atexit, gc

    class Node:
        pass

    print("frozen while it runs:", gc.get_freeze_count() > 0)
    cycle = Node()
    cycle.itself = cycle
    del cycle
    print("its own garbage collected:", gc.collect() > 0)
    atexit.register(lambda: print("frozen after it ends:", gc.get_freeze_count() > 0))
"""


def test_what_exists_before_the_program_is_frozen_while_it_runs_and_to_the_exit(tmp_path):
    # rlprof's set-up leaves objects that the program's full collections, and the interpreter's at
    # its exit, would otherwise walk; the process ends after the run, so they are never unfrozen.
    script = write_script(tmp_path, "train.py", FROZEN_WHILE_THE_PROGRAM_RUNS)
    result = rlprof_run("--summaries-dir", "out", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ("frozen while it runs: True\nits own garbage collected: True\n"
                             "frozen after it ends: True\n")


FINALIZED_AT_THE_EXIT = """
    class Flushed:
        def __del__(self):
            print("finalized at the exit:", self.name)

    # Alive to the end, each only through a cycle: the interpreter's passes at its exit free them.
    kept = Flushed()
    kept.name, kept.itself = "a global's cycle", kept
    made_in_atexit = []

    def make_one_more():
        late = Flushed()
        late.name, late.itself = "a cycle made by an atexit function", late
        made_in_atexit.append(late)

    import atexit
    atexit.register(make_one_more)
"""


def test_the_programs_objects_are_still_finalized_at_the_exit(tmp_path):
    # Only what rlprof's set-up made stays frozen: the program's cycles (a file's buffer, a
    # logger's last rows) are finalized as under python.
    script = write_script(tmp_path, "train.py", FINALIZED_AT_THE_EXIT)
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True)
    result = rlprof_run("--summaries-dir", "out", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == sorted(plain.stdout.splitlines()) == [
        "finalized at the exit: a cycle made by an atexit function",
        "finalized at the exit: a global's cycle"]


def test_the_program_sees_itself_as_main_with_its_folder_first_on_the_path(tmp_path):
    write_script(tmp_path, "helper.py", "VALUE = 'imported from beside the script'\n")
    script = write_script(tmp_path, "main.py", """
        import sys
        import helper
        print(__name__, sys.argv[0], helper.VALUE)
    """)
    result = rlprof_run("--summaries-dir", "out", str(script), cwd=tmp_path.parent)
    assert result.stdout == f"__main__ {script} imported from beside the script\n"


def test_everything_after_the_script_is_the_programs_even_rlprof_options(tmp_path):
    script = write_script(tmp_path, "echo.py", "import sys; print(sys.argv[1:])\n")
    result = rlprof_run("--summaries-dir", "out", str(script), "--summaries-dir", "theirs",
                        "--vector-env", cwd=tmp_path)
    assert result.stdout == "['--summaries-dir', 'theirs', '--vector-env']\n"
    assert (tmp_path / "out" / "echo_timers.json").is_file()
    assert not (tmp_path / "theirs").exists()


def test_a_module_runs_with_dash_m(tmp_path):
    package = tmp_path / "trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    write_script(package, "main.py", TIMED_SCRIPT)
    result = rlprof_run("--summaries-dir", "out", "-m", "trainer.main", "--seed", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "argv ['--seed', '1']\n"
    assert find(load_timing_tree(tmp_path / "out" / "main_timers.json"), "train")["count"] == 3


def test_runs_go_under_runs_named_after_the_script_by_default(tmp_path):
    script = write_script(tmp_path, "train.py", TIMED_SCRIPT)
    rlprof_run(str(script), cwd=tmp_path)
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("train-")
    assert (run_dir / "train_timers.json").is_file()


@pytest.mark.parametrize("exit_call, code, printed", [
    ("sys.exit(3)", 3, ""),
    ("sys.exit()", 0, ""),
    ("sys.exit('bad config')", 1, "bad config"),
])
def test_the_programs_exit_code_is_kept_and_the_files_written(tmp_path, exit_call, code, printed):
    script = write_script(tmp_path, "quits.py", f"""
        import sys
        from profiler import hierarchical_timer
        with hierarchical_timer("setup"):
            pass
        {exit_call}
    """)
    result = rlprof_run("--summaries-dir", "out", str(script), cwd=tmp_path)
    assert result.returncode == code
    assert printed in result.stderr
    assert find(load_timing_tree(tmp_path / "out" / "quits_timers.json"), "setup")["count"] == 1


def test_an_uncaught_exception_prints_the_programs_traceback_and_keeps_the_timers(tmp_path):
    script = write_script(tmp_path, "crashes.py", """
        from profiler import hierarchical_timer

        def update():
            raise RuntimeError("loss is nan")

        with hierarchical_timer("train"):
            update()
    """)
    result = rlprof_run("--summaries-dir", "out", str(script), cwd=tmp_path)
    assert result.returncode == 1
    traceback = result.stderr.split("rlprof:")[0]
    assert traceback.startswith("Traceback (most recent call last):\n")
    assert f'File "{script}", line 8, in <module>' in traceback
    assert "runpy" not in traceback and "run_program" not in traceback
    assert "RuntimeError: loss is nan" in traceback
    assert find(load_timing_tree(tmp_path / "out" / "crashes_timers.json"), "train")["errors"] == 1


STOPPABLE_SCRIPT = """
    import sys
    import time
    from profiler import hierarchical_timer

    try:
        with hierarchical_timer("train"):
            for step in range(100000):
                with hierarchical_timer("step"):
                    if step == 3:
                        print("ready", flush=True)
                    time.sleep(0.01)
    finally:
        print("the program's cleanup ran", flush=True)
"""


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_writes_the_files_and_rlprof_ends_by_that_signal(tmp_path, signal_number):
    script = write_script(tmp_path, "long.py", STOPPABLE_SCRIPT)
    process = subprocess.Popen([sys.executable, "-m", "profiler", "run", "--summaries-dir", "out",
                                str(script)], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "ready\n"
        process.send_signal(signal_number)
        stdout, stderr = process.communicate(timeout=FINISHES_WITHIN)
    finally:
        process.kill()
    assert process.returncode == -signal_number
    assert stdout == "the program's cleanup ran\n"
    assert f"stopped by {signal.Signals(signal_number).name}" in stderr
    step = find(load_timing_tree(tmp_path / "out" / "long_timers.json"), "train", "step")
    assert step["count"] >= 4


FORKED_CHILDREN_TERMINATED = """
    import multiprocessing
    import signal
    import sys
    import time


    def wait(ready):
        ready.set()
        time.sleep(60)


    if sys.argv[1] == "own-handler":
        signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(3))
    fork = multiprocessing.get_context("fork")
    ready = fork.Event()
    terminated = fork.Process(target=wait, args=(ready,))
    terminated.start()
    fork.Process(target=wait, args=(fork.Event(),), daemon=True).start()  # multiprocessing terminates it at the exit
    # A signal that comes while the child is still being forked is dropped by Python itself.
    ready.wait()
    terminated.terminate()
    terminated.join()
    print("exit code", terminated.exitcode, flush=True)
"""


def test_a_forked_child_the_program_terminates_dies_by_sigterm_as_under_python(tmp_path):
    script = write_script(tmp_path, "forks.py", FORKED_CHILDREN_TERMINATED)
    plain = subprocess.run([sys.executable, str(script), "default"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=FINISHES_WITHIN)
    profiled = rlprof_run("--summaries-dir", "out", str(script), "default", cwd=tmp_path)
    assert plain.stdout == profiled.stdout == "exit code -15\n"
    assert "Traceback" not in plain.stderr + profiled.stderr


def test_a_forked_child_keeps_the_sigterm_handler_the_program_set(tmp_path):
    script = write_script(tmp_path, "forks.py", FORKED_CHILDREN_TERMINATED)
    profiled = rlprof_run("--summaries-dir", "out", str(script), "own-handler", cwd=tmp_path)
    assert profiled.stdout == "exit code 3\n"


def test_a_missing_script_is_a_one_line_error_before_anything_runs(tmp_path):
    result = rlprof_run("--summaries-dir", "out", "nowhere.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "rlprof: error: run: can't open file 'nowhere.py': no such file\n"
    assert not (tmp_path / "out").exists()


def test_a_missing_module_is_a_one_line_error(tmp_path):
    result = rlprof_run("-m", "no_such_module_here", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (
        2, "rlprof: error: run: no module named 'no_such_module_here'\n")


def test_run_without_a_program_is_a_one_line_error(tmp_path):
    result = rlprof_run("--vector-env", cwd=tmp_path)
    assert result.returncode == 2
    assert "give the program to run" in result.stderr


def test_envs_per_worker_without_vector_env_is_a_one_line_error(tmp_path):
    script = write_script(tmp_path, "train.py", "print('ran')\n")
    result = rlprof_run("--envs-per-worker", "auto", str(script), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "rlprof: error: run: --envs-per-worker applies to the vector envs that --vector-env "
        "replaces: add --vector-env\n")


@pytest.mark.parametrize("value", ["0", "many", "1.5"])
def test_a_bad_envs_per_worker_is_a_one_line_error(tmp_path, value):
    result = rlprof_run("--vector-env", "--envs-per-worker", value, "train.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "--envs-per-worker" in result.stderr and "whole number >= 1 or auto" in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # argparse's usage line and the error


def test_timeline_spans_with_no_timeline_is_a_one_line_error(tmp_path):
    script = write_script(tmp_path, "train.py", "print('ran')\n")
    result = rlprof_run("--no-timeline", "--timeline-spans", "500", str(script), cwd=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "rlprof: error: run: --timeline-spans sizes the timeline that --no-timeline turns off: give one of them\n")


@pytest.mark.parametrize("value", ["0", "many", "1.5"])
def test_a_bad_timeline_spans_is_a_one_line_error(tmp_path, value):
    result = rlprof_run("--timeline-spans", value, "train.py", cwd=tmp_path)
    assert result.returncode == 2
    assert "--timeline-spans" in result.stderr and "whole number" in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 2  # argparse's usage line and the error


def test_the_timeline_keeps_the_trainers_latest_spans_up_to_timeline_spans(tmp_path):
    script = write_script(tmp_path, "train.py", (
        "from profiler import hierarchical_timer\n"
        "for step in range(50):\n"
        "    with hierarchical_timer('step'):\n"
        "        pass\n"))
    result = rlprof_run("--timeline-spans", "20", "--summaries-dir", "out", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    thread = load_timing_tree(tmp_path / "out" / "train_timers.json")["timeline"]["processes"][0]["threads"][0]
    assert len(thread["spans"]) == 20
    assert "spans_complete_after" in thread


@pytest.mark.parametrize("arguments, own, program", [
    (["train.py", "--lr", "3"], ["train.py"], ["--lr", "3"]),
    (["--vector-env", "train.py"], ["train.py", "--vector-env"], []),
    (["--vector-env=all", "--run-id", "a", "t.py", "x"], ["t.py", "--vector-env=all", "--run-id", "a"], ["x"]),
    (["--envs-per-worker", "auto", "t.py", "x"], ["t.py", "--envs-per-worker", "auto"], ["x"]),
    (["--timeline-spans", "500", "t.py", "x"], ["t.py", "--timeline-spans", "500"], ["x"]),
    (["-m", "pkg.train", "--seed", "1"], ["-m", "pkg.train"], ["--seed", "1"]),
    (["-mpkg.train", "-m", "x"], ["-m", "pkg.train"], ["-m", "x"]),
])
def test_rlprof_options_end_at_the_program(arguments, own, program):
    assert split_run_arguments(arguments) == (own, program)


def test_a_summaries_folder_that_cannot_be_made_is_refused_before_the_run(tmp_path):
    script = write_script(tmp_path, "train.py", "print('ran')\n")
    (tmp_path / "taken").write_text("a file, not a folder")
    result = rlprof_run("--summaries-dir", "taken/out", str(script), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("rlprof: error: run: cannot create the summaries folder 'taken/out'")
    assert result.stdout == ""


def test_the_files_go_where_asked_even_when_the_program_changes_folder(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    script = write_script(tmp_path, "wanders.py", "import os; os.chdir('elsewhere')\n")
    result = rlprof_run("--summaries-dir", "out", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "wanders_timers.json").is_file()
    assert "rlprof: timers  out/wanders_timers.json" in result.stderr


def test_operators_records_pytorchs_operators_under_the_programs_blocks(tmp_path):
    pytest.importorskip("torch", reason="torch is not installed; pip install torch runs this")
    script = write_script(tmp_path, "train.py", """
        import torch
        from profiler import hierarchical_timer

        layer, batch = torch.nn.Linear(8, 4), torch.randn(2, 8)
        for _ in range(3):
            with hierarchical_timer("policy.forward"):
                layer(batch)
    """)
    result = rlprof_run("--operators", "--summaries-dir", "out", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    tree = load_timing_tree(tmp_path / "out" / "train_timers.json")
    # The module call is a block of its own (rlprof run times PyTorch's phases), the ops inside it.
    assert find(tree, "policy.forward", "layer.forward", "aten::linear")["object_type"] == "operator"
    assert find(tree, "policy.forward", "layer.forward", "aten::linear")["count"] == 3


def test_operators_without_torch_is_one_line_before_anything_runs(tmp_path):
    from not_installed import run_without

    script = write_script(tmp_path, "train.py", "print('ran')\n")
    completed = run_without(("torch",), f"""
        import sys
        from profiler.cli.commands import main
        sys.exit(main(["run", "--operators", "--summaries-dir", {str(tmp_path / 'out')!r}, {str(script)!r}]))
    """)
    assert (completed.returncode, completed.stdout) == (2, "")
    assert completed.stderr.count("\n") == 1 and "--operators: recording PyTorch operators needs PyTorch" in completed.stderr
