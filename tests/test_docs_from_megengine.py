"""Every ``rlprof`` command written in docs/from-megengine.md runs as written: on a real run
whose session recorded PyTorch's operators and memory (made by a separate Python process, as a
user's program would), and on an Nsight Systems export, under the file names the doc uses."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the doc's runs record PyTorch's operators")

from nsys_exports import NsysExport, global_tid  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "from-megengine.md"

PROGRAM = textwrap.dedent("""
    import torch
    from profiler import Profiler, hierarchical_timer

    torch.manual_seed(0)
    policy = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2))
    optimizer = torch.optim.SGD(policy.parameters(), lr=1e-2)
    observations, returns = torch.randn(16, 8), torch.randn(16, 2)
    with Profiler(path="profile", formats=["timers.json"], sample_rate=4, record_operators=True):
        for _ in range(5):
            with hierarchical_timer("update"):
                with hierarchical_timer("policy.forward"):
                    loss = (policy(observations) - returns).pow(2).mean()
                with hierarchical_timer("policy.backward"):
                    optimizer.zero_grad()
                    loss.backward()
                optimizer.step()
""")


def doc_commands() -> list[str]:
    """The ``rlprof`` commands of the doc: lines of its code blocks, and inline code."""
    text = DOC.read_text()
    commands = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        commands += [line.strip() for line in block.splitlines() if line.strip().startswith("rlprof ")]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    # Inline code naming a command with its arguments (``rlprof analyze`` alone names the command).
    commands += [" ".join(span.split()) for span in re.findall(r"`(rlprof [^`]+)`", prose) if len(span.split()) > 2]
    return list(dict.fromkeys(commands))


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("megengine_commands")
    subprocess.run([sys.executable, "-c", PROGRAM], cwd=folder, check=True, timeout=300)
    [written] = (folder / "profile").glob("*.timers.json")
    written.rename(folder / "profile" / "17812.timers.json")
    shutil.copy(folder / "profile" / "17812.timers.json", folder / "RUN.json")
    trainer = global_tid(4242, 4242)
    export = NsysExport(folder / "capture.sqlite")
    export.range(0, 9_000, trainer, "update")
    export.range(1_000, 3_000, trainer, "aten::addmm, seq = 0, sizes = [[32], [16, 8], [8, 32]]")
    export.kernel(1_500, trainer, 3_000, 5_000)
    export.close()
    return folder


def test_the_doc_has_the_commands_of_profile_analyze():
    commands = doc_commands()
    assert any("--aggregate-by type" in command for command in commands)
    assert any("--opr-name" in command for command in commands)
    assert any("capture.sqlite" in command for command in commands)


@pytest.mark.parametrize("command", doc_commands())
def test_each_command_of_the_doc_runs_as_written(runs, command):
    rlprof = Path(sys.executable).with_name("rlprof")
    arguments = shlex.split(command)
    result = subprocess.run([str(rlprof), *arguments[1:]], cwd=runs, capture_output=True, text=True,
                            timeout=300, env={"COLUMNS": "100", "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    profile_analyze_layout = {"--print-only", "--show-host", "--copy-time", "--dump-only-opr", "--confluence"}
    if profile_analyze_layout & set(arguments):  # profile_analyze's text: the operators only
        assert "aten::" in result.stdout
    elif arguments[1] == "analyze" and "--format" not in arguments and "--aggregate-by process" not in command:
        assert "Operators (" in result.stdout
