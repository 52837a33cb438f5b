"""Reading dumped trees in tests: a node by its path of names, a node's child names."""

from __future__ import annotations


def find(tree: dict, *path: str) -> dict:
    """The node reached from ``tree`` through the children named ``path``, in order."""
    node = tree
    for name in path:
        node = next(child for child in node["children"] if child["name"] == name)
    return node


def child_names(node: dict) -> list[str]:
    return [child["name"] for child in node["children"]]
