"""Specification: nothing of a framework is imported or hooked unless the program uses it, and
``--no-framework-phases`` leaves the frameworks alone (``--no-stack-sampler``, the sampler)."""

from __future__ import annotations

import textwrap

import pytest

from framework_runs import rlprof, rlprof_run
from profiler import load_timing_tree


def plain_program(folder):
    script = folder / "plain.py"
    script.write_text(textwrap.dedent("""
        import sys
        total = sum(range(1000))
        print(sorted(name for name in sys.modules if name.split(".")[0] in ("torch", "stable_baselines3")))
    """))
    return script


def test_a_program_without_torch_runs_without_torch_imported(tmp_path):
    result = rlprof("run", "--summaries-dir", "out", str(plain_program(tmp_path)), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[]\n"


def test_torch_imported_inside_a_function_late_in_the_program_is_still_hooked(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "late.py"
    script.write_text(textwrap.dedent("""
        def train():
            import torch
            network = torch.nn.Linear(2, 1)
            network(torch.zeros(1, 2))

        train()
    """))
    result = rlprof("run", "--summaries-dir", "out", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr

    tree = load_timing_tree(tmp_path / "out" / "late_timers.json")
    assert [child["name"] for child in tree["children"]] == ["network.forward"]


def test_no_framework_phases_times_no_module_backward_or_optimizer_call(tmp_path):
    pytest.importorskip("torch")
    run = rlprof_run(tmp_path, "cleanrl_torch_ppo.py", options=("--no-framework-phases",))
    # What is left are the program's envs, timed where they run (envmanager.instrumentation).
    names = block_names(run["tree"])
    assert names and all(name.startswith(("vector.", "env.")) for name in names)
    assert "rlprof_framework_phases" not in run["tree"]["metadata"]


def test_no_stack_sampler_writes_no_samples(tmp_path):
    result = rlprof("run", "--no-stack-sampler", "--summaries-dir", "out", str(plain_program(tmp_path)),
                    cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    tree = load_timing_tree(tmp_path / "out" / "plain_timers.json")
    assert "untimed_samples" not in tree
    assert tree["metadata"]["rlprof_stack_sampler"] == "off"  # the analysis says it was turned off
    assert "not sampled (`rlprof run --no-stack-sampler`" in result.stderr


def block_names(node: dict) -> set[str]:
    """The names of every block under ``node``."""
    names = set()
    for child in node["children"]:
        names |= {child["name"], *block_names(child)}
    return names
