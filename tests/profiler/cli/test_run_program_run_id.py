"""``rlprof run --run-id`` names the run's files inside its summaries folder, never a path."""

from __future__ import annotations

from profiler.cli.commands import main


def test_rlprof_run_refuses_a_run_id_that_is_a_path_in_one_line(tmp_path, capsys):
    script = tmp_path / "t.py"
    script.write_text("print('ran')\n")
    code = main(["run", "--summaries-dir", str(tmp_path / "runs"), "--run-id", "../escaped", str(script)])
    captured = capsys.readouterr()
    assert code == 2 and "run_id must be a non-empty name" in captured.err
    assert "ran" not in captured.out and not (tmp_path / "escaped_timers.json").exists()
