"""docs/seed-audit.md cannot lie: every row it marks working (✔) names a test, every test it names
exists, its rows are numbered in order, and its counts are its rows'."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AUDIT = ROOT / "docs" / "seed-audit.md"
SEEDS = ("MXNet", "MegEngine", "PyTorch", "ML-Agents")
GROUPS = {seed: (seed,) for seed in SEEDS} | {"MXNet+MegEngine+PyTorch": SEEDS[:3], "all": SEEDS}
"""The rows of the counts table, and the seeds each adds up."""
STATUSES = ("✔", "◐", "✘")
TEST_ID = re.compile(r"(tests/[\w/]+\.py)::(test_\w+)")


def cells(line: str) -> list[str]:
    """The cells of a markdown table row (``\\|`` inside a cell is a literal bar)."""
    parts = re.split(r"(?<!\\)\|", line.strip())
    return [part.strip() for part in parts[1:-1]]


def audit_rows() -> list[dict[str, str]]:
    rows = []
    for line in AUDIT.read_text().splitlines():
        if not re.match(r"\| \d+ \|", line):
            continue
        number, seed, capability, status, rlprof, tests, gpu = cells(line)
        rows.append({"number": number, "seed": seed, "capability": capability, "status": status,
                     "rlprof": rlprof, "tests": tests, "gpu": gpu})
    return rows


def stated_counts() -> dict[str, list[int]]:
    """The counts table: per group of seeds, rows, ✔, ◐, ✘ and the ✔ rows that need a GPU."""
    counts = {}
    for line in AUDIT.read_text().splitlines():
        row = cells(line) if line.startswith("|") else []
        if row and row[0] in GROUPS and len(row) == 6 and row[1].isdigit():
            counts[row[0]] = [int(value) for value in row[1:]]
    return counts


def functions_in(path: Path) -> set[str]:
    return {node.name for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


ROWS = audit_rows()


def test_the_audit_has_rows_for_every_seed():
    assert {row["seed"] for row in ROWS} == set(SEEDS)


def test_rows_are_numbered_in_order():
    assert [int(row["number"]) for row in ROWS] == list(range(1, len(ROWS) + 1))


def test_every_row_has_a_status_and_says_what_rlprof_does():
    for row in ROWS:
        assert row["status"] in STATUSES, row
        assert row["capability"] and row["rlprof"], row
        assert row["gpu"] in ("", "yes"), row


@pytest.mark.parametrize("row", [row for row in ROWS if row["status"] == "✔"],
                         ids=lambda row: f"row {row['number']}")
def test_every_working_row_names_a_test(row):
    assert TEST_ID.search(row["tests"]), f"row {row['number']} ({row['capability']}) names no test"


@pytest.mark.parametrize("test_id", sorted({match.group(0) for row in ROWS for match in TEST_ID.finditer(row["tests"])}))
def test_every_test_named_exists(test_id):
    path, name = test_id.split("::")
    assert (ROOT / path).is_file(), f"{path} does not exist"
    assert name in functions_in(ROOT / path), f"{path} has no {name}"


def test_the_tests_column_holds_test_ids_only():
    for row in ROWS:
        assert TEST_ID.sub("", row["tests"]).strip() == "", row


def test_the_counts_are_the_rows():
    actual = {}
    for group, seeds in GROUPS.items():
        rows = [row for row in ROWS if row["seed"] in seeds]
        statuses = Counter(row["status"] for row in rows)
        on_gpu = sum(1 for row in rows if row["status"] == "✔" and row["gpu"] == "yes")
        actual[group] = [len(rows), statuses["✔"], statuses["◐"], statuses["✘"], on_gpu]
    assert stated_counts() == actual
