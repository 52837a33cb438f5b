"""Reading dumped trees in tests: a node by its path of names, a node's child names, counts by name."""

from __future__ import annotations


def find(tree: dict, *path: str) -> dict:
    """The node reached from ``tree`` through the children named ``path``, in order."""
    node = tree
    for name in path:
        node = next(child for child in node["children"] if child["name"] == name)
    return node


def child_names(node: dict) -> list[str]:
    return [child["name"] for child in node["children"]]


def nodes_named(node: dict, name: str) -> list[dict]:
    """Every node called ``name`` in the tree under ``node``, ``node`` included."""
    found = [node] if node.get("name") == name else []
    for child in node.get("children", []):
        found += nodes_named(child, name)
    return found


def count_of(tree: dict, name: str) -> int:
    """The calls of every block called ``name`` in ``tree``, added up."""
    return sum(node["count"] for node in nodes_named(tree, name))


def operators_by_path(tree: dict) -> dict[tuple[str, ...], dict]:
    """The dump's operator figures (its ``operators`` section), each by its path of block names."""
    return {tuple(entry["path"]): entry for entry in tree["operators"]["operators"]}
