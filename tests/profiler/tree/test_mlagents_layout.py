"""Siblings of one name in ML-Agents' layout, whose children are keyed by name."""

from __future__ import annotations

from profiler.tree.mlagents_layout import to_mlagents_layout


def tree_of(names):
    return {"name": "root", "total": 1.0, "count": 1,
            "children": [{"name": name, "total": 0.1, "count": 1, "children": []} for name in names]}


def test_siblings_of_one_name_are_numbered_from_2_in_their_order():
    keys = list(to_mlagents_layout(tree_of(["x", "x", "y", "x"]))["children"])
    assert keys == ["x", "x #2", "y", "x #3"]


def test_a_numbered_key_taken_by_a_real_name_is_skipped():
    keys = list(to_mlagents_layout(tree_of(["x #2", "x", "x", "x #3", "x"]))["children"])
    assert keys == ["x #2", "x", "x #3", "x #3 #2", "x #4"]
