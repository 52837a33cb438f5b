"""The map in docs/architecture.md, held to the code: who may import whom, no circles, short rooms."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("profiler", "envmanager")

# Each package's rooms, lowest layer first; rooms in one inner tuple share a layer. A room is a
# sub-package or a top-level module; "" is the package's own __init__ (and __main__).
LAYERS = {
    "profiler": (
        ("version", "records"),
        ("timing",),
        ("recording", "automatic"),
        ("gpu",),
        ("multiprocess",),
        ("tree",),
        ("analysis",),
        ("export",),
        ("control", "integrations"),
        ("cli",),
        ("", "__main__"),
    ),
    "envmanager": (
        ("gymnasium_version",),
        ("lifetime",),
        ("measurement",),
        ("transport",),
        ("errors",),
        ("ray",),
        ("subprocess_env_manager",),
        ("ray_env_manager", "vector_env_substitution", "instrumentation"),
        ("demo",),
        ("",),
    ),
}
READS_DUMPS_ONLY = ("profiler.analysis", "profiler.export")
# The base of result classes, and the loader of the C helpers (the trace's among them), each
# importing nothing of rlprof: every layer may use them.
NEUTRAL_MODULES = ("profiler.records", "profiler.timing.accelerator")
# profiler.dumps() formats the live tree of this process: the one reader of live stacks there.
LIVE_TREE_READERS = {"profiler.analysis.stats": {"profiler.timing", "profiler.tree"}}
MAX_TOP_LEVEL_ENTRIES = 13
LONG_MODULE_LINES = 600


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return name.removesuffix(".__init__")


def package_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def imports_of(path: Path) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """Every absolute import in ``path``, anywhere in it: (line, module, names imported from it)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module, tuple(alias.name for alias in node.names)


def imported_modules(path: Path, known: dict[str, Path]) -> Iterator[tuple[int, str]]:
    """Our modules ``path`` imports: ``from package import module`` names the module, ``from
    package import name`` the package. An import of a module of ours that does not exist fails."""
    for line, module, names in imports_of(path):
        if module.split(".")[0] not in PACKAGES:
            continue
        assert module in known, f"{path.relative_to(ROOT)}:{line} imports {module}, which does not exist"
        submodules = [f"{module}.{name}" for name in names if f"{module}.{name}" in known]
        if submodules:
            yield from ((line, submodule) for submodule in submodules)
        else:
            yield line, module


def room_of(module: str) -> tuple[str, str]:
    package, _, rest = module.partition(".")
    return package, rest.split(".")[0]


def layer_of(module: str) -> int:
    package, room = room_of(module)
    for rank, rooms in enumerate(LAYERS[package]):
        if room in rooms:
            return rank
    raise AssertionError(f"{module}: its room {room!r} is on no layer of docs/architecture.md")


def import_edges() -> list[tuple[str, int, str]]:
    known = package_modules()
    return [
        (importer, line, imported)
        for importer, path in known.items()
        for line, imported in imported_modules(path, known)
    ]


def test_profiler_never_imports_envmanager():
    offending = [
        f"{importer}:{line} imports {imported}"
        for importer, line, imported in import_edges()
        if importer.split(".")[0] == "profiler" and imported.split(".")[0] == "envmanager"
    ]
    assert offending == []


def test_every_room_is_on_a_layer():
    for module in package_modules():
        layer_of(module)


def test_rooms_import_only_rooms_at_or_below_their_layer():
    offending = [
        f"{importer}:{line} imports {imported}"
        for importer, line, imported in import_edges()
        if room_of(importer)[0] == room_of(imported)[0] and layer_of(imported) > layer_of(importer)
    ]
    assert offending == []


def test_analysis_and_export_read_dumps_not_live_stacks():
    allowed = ("profiler.tree", *READS_DUMPS_ONLY, *NEUTRAL_MODULES)
    offending = []
    for importer, line, imported in import_edges():
        if not importer.startswith(READS_DUMPS_ONLY) or imported.startswith(allowed):
            continue
        exception = LIVE_TREE_READERS.get(importer, set())
        if not any(imported.startswith(room) for room in exception):
            offending.append(f"{importer}:{line} imports {imported}")
    assert offending == []


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports in ``graph`` as the list of its modules, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for imported in sorted(graph.get(module, ())):
            if state.get(imported) == 1:
                return path[path.index(imported):] + [imported]
            if imported not in state:
                found = visit(imported)
                if found:
                    return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def test_no_import_circle_between_modules_of_the_packages():
    graph: dict[str, set[str]] = {}
    for importer, _, imported in import_edges():
        if imported != importer:
            graph.setdefault(importer, set()).add(imported)
    assert find_cycle(graph) is None


def test_no_import_circle_between_benchmarks():
    scripts = {path.stem: path for path in (ROOT / "benchmarks").glob("*.py")}
    graph = {
        name: {module.split(".")[0] for _, module, _ in imports_of(path) if module.split(".")[0] in scripts}
        for name, path in scripts.items()
    }
    assert find_cycle(graph) is None


def test_the_cycle_finder_finds_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("folder", PACKAGES)
def test_a_package_top_level_reads_like_a_table_of_contents(folder):
    entries = [
        entry.name
        for entry in (ROOT / folder).iterdir()
        if entry.name not in ("__init__.py", "__main__.py", "__pycache__")
        and (entry.suffix == ".py" or (entry / "__init__.py").exists())
    ]
    assert len(entries) <= MAX_TOP_LEVEL_ENTRIES, sorted(entries)


def test_a_long_module_says_why_it_is_not_cut():
    unexplained = []
    for module, path in package_modules().items():
        source = path.read_text(encoding="utf-8")
        if source.count("\n") <= LONG_MODULE_LINES:
            continue
        docstring = ast.get_docstring(ast.parse(source)) or ""
        if "Why this module is long" not in docstring:
            unexplained.append(f"{module} ({source.count(chr(10))} lines)")
    assert unexplained == []
