"""GPU check of issue 24's NVTX part: PyTorch's autograd ranges inside rlprof's, the capture
range, and an Nsight Systems capture read back by rlprof.

    python3 benchmarks/nvtx_check.py [--markdown PATH]

Run from the repository root on a CUDA machine (the repository need not be installed: it is put
on the path). Prints one ``PASS``/``FAIL``/``INFO`` line per check and exits 1 if any failed;
``--markdown PATH`` also writes the lines as a table for docs/gpu.md. Under a minute.

What it checks:

* ``cuda``: torch sees a GPU (else nothing else can be checked);
* ``autograd ranges on``: inside ``profiler.emit_nvtx(autograd=True)`` PyTorch's own NVTX
  profiler runs (``torch.autograd.profiler.emit_nvtx``), a forward, backward and double backward
  on the GPU run through it, rlprof's block ranges open and close around them, and leaving stops
  PyTorch's profiler;
* ``autograd ranges by default``: ``emit_nvtx()`` turns them on by itself where torch has a GPU;
* ``torch.cuda.nvtx backend``: ``emit_nvtx(backend="torch")`` sends rlprof's ranges through
  ``torch.cuda.nvtx`` (a CUDA build's NVTX), one push and one pop per block run, each message naming
  the block, its ``seq``, the ``rlprof`` domain and the process, with PyTorch's autograd ranges on;
* ``capture range``: ``capture_range()`` and ``capture_steps()`` call cudaProfilerStart/Stop;
* ``worker rule``: an env worker gets PyTorch's ranges by default only once it uses the GPU;
* ``nsys``: where Nsight Systems is found, a child program runs under ``nsys profile`` (with
  ``--capture-range=cudaProfilerApi`` and ``capture_steps``), its report is exported as SQLite and
  read by rlprof: the ranges must be rlprof's blocks with PyTorch's ops inside, the raw export must
  hold ``seq`` and ``stashed seq`` ranges, and kernels must give device time. If ``nsys`` cannot
  make a report here (it has written only a ``.qdstrm`` on some machines), that is an ``INFO``
  line saying what happened, not a failure.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NSYS_PLACES = (
    "/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys",
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/usr/local/cuda/bin/nsys",
    "/usr/local/cuda-*/bin/nsys",
)

CHILD = textwrap.dedent("""
    import torch
    import profiler
    from profiler import hierarchical_timer
    from profiler.gpu import capture_steps

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.Tanh(), torch.nn.Linear(128, 1)).cuda()
    data = torch.randn(32, 64, device="cuda", requires_grad=True)
    capture = capture_steps(2, 4)
    with profiler.emit_nvtx(record_shapes=True, autograd=True):
        for _ in range(6):
            capture.step()
            with hierarchical_timer("step"):
                with hierarchical_timer("update"):
                    loss = model(data).pow(2).mean()
                    (gradient,) = torch.autograd.grad(loss, data, create_graph=True)
                    gradient.pow(2).sum().backward()  # double backward
            torch.cuda.synchronize()
    capture.close()
""")


class Checks:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str, str]] = []

    def add(self, status: str, name: str, detail: str) -> None:
        self.lines.append((status, name, detail))
        print(f"{status} {name}: {detail}", flush=True)

    @property
    def failed(self) -> bool:
        return any(status == "FAIL" for status, _, _ in self.lines)

    def markdown(self) -> str:
        rows = ["| result | check | detail |", "| --- | --- | --- |"]
        rows += [f"| {status} | {name} | {detail.replace('|', '/')} |" for status, name, detail in self.lines]
        return "\n".join(rows) + "\n"


class RecordedRanges:
    """rlprof's ranges, written down (PyTorch's go to NVTX itself)."""

    name = "recorded"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def push_range(self, message: str, sequence: int, category: str) -> None:
        self.calls.append(("push", message))

    def pop_range(self) -> None:
        self.calls.append(("pop", ""))


def short(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300]


def train_step(torch, model, data) -> None:
    loss = model(data).pow(2).mean()
    (gradient,) = torch.autograd.grad(loss, data, create_graph=True)
    gradient.pow(2).sum().backward()
    torch.cuda.synchronize()


def check_autograd_ranges(checks: Checks, torch) -> None:
    import profiler
    from profiler import hierarchical_timer
    from profiler.gpu.nvtx_bridge import autograd_ranges_on

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).cuda()
    data = torch.randn(8, 16, device="cuda", requires_grad=True)
    enabled = torch._C._autograd._profiler_enabled  # any autograd profiler of this thread, emit_nvtx's included
    recorded = RecordedRanges()
    try:
        with profiler.emit_nvtx(record_shapes=True, autograd=True, backend=recorded):
            on_inside = autograd_ranges_on() and enabled()
            with hierarchical_timer("update"):
                train_step(torch, model, data)
        off_after = not autograd_ranges_on() and not enabled()
    except Exception as error:  # noqa: BLE001 - a check reports, it does not stop
        checks.add("FAIL", "autograd ranges on", short(error))
        return
    balanced = recorded.calls == [("push", "update"), ("pop", "")]
    if on_inside and off_after and balanced:
        checks.add("PASS", "autograd ranges on", "PyTorch's emit_nvtx ran inside rlprof's (forward, backward, "
                   "double backward on the GPU); rlprof's update range opened and closed around them")
    else:
        checks.add("FAIL", "autograd ranges on", f"PyTorch's profiler on inside: {on_inside}; off after: {off_after}; "
                   f"rlprof's ranges: {recorded.calls}")
    try:
        with profiler.emit_nvtx(backend=RecordedRanges()):
            default_on = autograd_ranges_on()
        checks.add("PASS" if default_on else "FAIL", "autograd ranges by default",
                   "emit_nvtx() ran PyTorch's ranges by itself" if default_on else "emit_nvtx() did not run them")
    except Exception as error:  # noqa: BLE001
        checks.add("FAIL", "autograd ranges by default", short(error))
    try:
        with profiler.emit_nvtx(autograd=True):  # the default backend: nvtx package, else torch.cuda.nvtx
            with hierarchical_timer("update"):
                train_step(torch, model, data)
        from profiler.gpu.nvtx_bridge import resolve_backend

        checks.add("PASS", "real NVTX backend", f"rlprof's ranges through {resolve_backend(None).name!r} with PyTorch's")
    except Exception as error:  # noqa: BLE001
        checks.add("FAIL", "real NVTX backend", short(error))


class CountedTorchNvtx:
    """``torch.cuda.nvtx`` itself, with the ranges rlprof sends through it written down on the
    way (what NVTX returns for each push is kept: a tool's range depth, or its no-tool code)."""

    def __init__(self, torch_nvtx) -> None:
        self.torch_nvtx = torch_nvtx
        self.pushes: list[tuple[str, object]] = []
        self.pops = 0

    def range_push(self, message: str):
        depth = self.torch_nvtx.range_push(message)
        self.pushes.append((message, depth))
        return depth

    def range_pop(self):
        self.pops += 1
        return self.torch_nvtx.range_pop()


def check_torch_backend(checks: Checks, torch) -> None:
    """rlprof's ``backend="torch"`` on a CUDA build: its ranges reach ``torch.cuda.nvtx``, with
    PyTorch's autograd ranges running inside them."""
    import profiler
    from profiler import hierarchical_timer
    from profiler.gpu.nvtx_bridge import TorchNvtxBackend

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).cuda()
    data = torch.randn(8, 16, device="cuda", requires_grad=True)
    try:
        backend = TorchNvtxBackend()
        counted = CountedTorchNvtx(backend.nvtx)
        backend.nvtx = counted
        with profiler.emit_nvtx(autograd=True, backend=backend):
            for _ in range(3):
                with hierarchical_timer("update"):
                    train_step(torch, model, data)
    except Exception as error:  # noqa: BLE001 - a check reports, it does not stop
        checks.add("FAIL", "torch.cuda.nvtx backend", short(error))
        return
    messages = [message for message, _ in counted.pushes]
    named = [re.fullmatch(r"update, seq = (\d+), rlprof trainer \(pid \d+\)", message) for message in messages]
    sequences = [int(match.group(1)) for match in named if match]
    well_named = len(sequences) == 3 and sequences == list(range(sequences[0], sequences[0] + 3))
    balanced = counted.pops == len(messages)
    checks.add("PASS" if well_named and balanced else "FAIL", "torch.cuda.nvtx backend",
               f"{len(messages)} pushes and {counted.pops} pops through torch.cuda.nvtx (want 3 and 3), "
               f"first message {messages[0] if messages else None!r}, NVTX returned "
               f"{[depth for _, depth in counted.pushes]} (no tool attached)")


WORKER_RULE = textwrap.dedent("""
    import torch
    from profiler.gpu.autograd_ranges import autograd_ranges_wanted
    before = autograd_ranges_wanted(None, in_worker=True)
    torch.zeros(1, device="cuda")
    print(before, autograd_ranges_wanted(None, in_worker=True), autograd_ranges_wanted(None))
""")


def check_worker_rule(checks: Checks) -> None:
    """A process that imported torch but made no CUDA context gets no autograd ranges as a
    worker (they would make one); once it uses the GPU it does."""
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    try:
        run = subprocess.run([sys.executable, "-c", WORKER_RULE], capture_output=True, text=True, timeout=30,
                             env=environment)
    except subprocess.TimeoutExpired:
        checks.add("FAIL", "worker rule", "the probe did not finish in 30 s")
        return
    answer = run.stdout.split()
    expected = ["False", "True", "True"]
    checks.add("PASS" if answer == expected else "FAIL", "worker rule",
               f"a worker without a CUDA context: {answer[:1]}, with one: {answer[1:2]}, the trainer: {answer[2:3]}"
               + ("" if answer == expected else f" (expected {expected}; {run.stderr.strip()[-200:]})"))


def check_capture_range(checks: Checks, torch) -> None:
    from profiler.gpu import capture_range, capture_steps

    try:
        with capture_range():
            torch.ones(4, device="cuda").sum().item()
        with capture_steps(1, 2) as capture:
            for _ in range(4):
                capture.step()
        checks.add("PASS", "capture range", "cudaProfilerStart/Stop called by capture_range and capture_steps")
    except Exception as error:  # noqa: BLE001
        checks.add("FAIL", "capture range", short(error))


def find_nsys() -> str | None:
    found = shutil.which("nsys")
    if found:
        return found
    for pattern in NSYS_PLACES:
        for candidate in sorted(glob.glob(pattern)):
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def check_nsys(checks: Checks, deadline: float) -> None:
    nsys = find_nsys()
    if nsys is None:
        checks.add("INFO", "nsys", "Nsight Systems not found (PATH and " + ", ".join(NSYS_PLACES) + ")")
        return
    folder = Path(tempfile.mkdtemp(prefix="rlprof_nvtx_check_"))
    (folder / "child.py").write_text(CHILD)
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    command = [nsys, "profile", "--trace=cuda,nvtx", "--capture-range=cudaProfilerApi",
               "--capture-range-end=stop", "--force-overwrite=true", "-o", str(folder / "capture"),
               sys.executable, str(folder / "child.py")]
    try:
        run = subprocess.run(command, cwd=folder, env=environment, capture_output=True, text=True,
                             timeout=max(5.0, deadline - time.monotonic() - 15))
    except subprocess.TimeoutExpired:
        checks.add("INFO", "nsys profile", f"did not finish in time ({nsys})")
        return
    files = sorted(path.name for path in folder.iterdir())
    reports = [folder / name for name in files if name.endswith((".nsys-rep", ".qdrep"))]
    if not reports:
        tail = " / ".join((run.stderr or run.stdout).strip().splitlines()[-3:])[:300]
        checks.add("INFO", "nsys profile", f"no report (exit {run.returncode}; files: {', '.join(files)}); {tail}")
        return
    checks.add("PASS", "nsys profile", f"{reports[0].name} written by {nsys}")
    export = folder / "capture.sqlite"
    try:
        exported = subprocess.run([nsys, "export", "--type", "sqlite", "--force-overwrite=true", "-o", str(export),
                                   str(reports[0])], capture_output=True, text=True,
                                  timeout=max(5.0, deadline - time.monotonic() - 3))
    except subprocess.TimeoutExpired:
        checks.add("INFO", "nsys export", "did not finish in time")
        return
    if not export.exists():
        checks.add("INFO", "nsys export", f"no SQLite file (exit {exported.returncode}): "
                   f"{' / '.join(exported.stderr.strip().splitlines()[-2:])[:300]}")
        return
    check_export(checks, export)


def check_export(checks: Checks, export: Path) -> None:
    from profiler import load_timing_tree

    connection = sqlite3.connect(export)
    try:
        texts = [row[0] or "" for row in connection.execute(
            "SELECT COALESCE(n.text, s.value) FROM NVTX_EVENTS AS n LEFT JOIN StringIds AS s ON n.textId = s.id "
            "WHERE n.eventType IN (59, 60)")]
    finally:
        connection.close()
    # PyTorch's documentation writes the backward object's number as "stashed seq=<M>"; the
    # range of a backward node may carry it as "seq = M" too: both are matched, and reported.
    forward = {int(match.group(1)) for text in texts if "Backward" not in text
               for match in [re.search(r", seq ?= ?(\d+)", text)] if match}
    backward = {int(match.group(2)) for text in texts if "Backward" in text
                for match in [re.search(r", (stashed )?seq ?= ?(\d+)", text)] if match}
    spelled = sorted({match.group(0).strip(", ") for text in texts if "Backward" in text
                      for match in [re.search(r", (stashed )?seq ?=", text)] if match})
    matched = forward & backward
    checks.add("PASS" if forward and matched else "FAIL", "seq and stashed seq",
               f"{len(forward)} forward op numbers, {len(backward)} backward ones ({' / '.join(spelled) or 'none'}), "
               f"{len(matched)} matched, of {len(texts)} ranges; e.g. "
               + "; ".join(text for text in texts if "Backward" in text)[:160])
    try:
        tree = load_timing_tree(export)
    except Exception as error:  # noqa: BLE001
        checks.add("FAIL", "rlprof reads the export", short(error))
        return
    step = next((child for child in tree["children"] if child["name"] == "step"), None)
    update = next((child for child in (step or {}).get("children", []) if child["name"] == "update"), None)
    operators = [child["name"] for child in (update or {}).get("children", []) if child.get("object_type") == "operator"]
    captured_steps = step["count"] if step else 0
    checks.add("PASS" if update and operators else "FAIL", "ops inside rlprof's ranges",
               f"step ran {captured_steps} times in the capture (steps 2 to 4 asked); update holds "
               f"{len(operators)} operators, e.g. {', '.join(operators[:4])}")
    checks.add("PASS" if captured_steps == 3 else "FAIL", "capture steps",
               f"{captured_steps} captured steps (capture_steps(2, 4) under --capture-range=cudaProfilerApi)")
    device = {tuple(entry["path"]): entry["total"] for entry in tree.get("device_time", [])}
    update_device = device.get(("step", "update"), 0.0)
    checks.add("PASS" if update_device > 0 else "FAIL", "device time from kernels",
               f"update: {update_device * 1e3:.3f} ms of GPU work launched inside it; {tree['metadata'].get('gpu_work')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", type=Path, default=None, metavar="PATH", help="also write the results here")
    arguments = parser.parse_args()
    deadline = time.monotonic() + 55
    checks = Checks()
    try:
        import torch
    except ImportError as error:
        checks.add("FAIL", "cuda", short(error))
        torch = None
    if torch is not None and not torch.cuda.is_available():
        checks.add("FAIL", "cuda", f"torch {torch.__version__} sees no GPU")
    elif torch is not None:
        checks.add("PASS", "cuda", f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
                   f"Python {sys.version.split()[0]}")
        check_autograd_ranges(checks, torch)
        check_torch_backend(checks, torch)
        check_capture_range(checks, torch)
        check_worker_rule(checks)
        check_nsys(checks, deadline)
    if arguments.markdown is not None:
        arguments.markdown.write_text(checks.markdown())
    print("FAILED" if checks.failed else "PASSED")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
