"""Specification of :mod:`profiler.automatic.post_import`: a function runs once a module is
imported, without rlprof importing it; every watch shares one finder on ``sys.meta_path``."""

from __future__ import annotations

import sys

import pytest

from profiler.automatic import post_import
from profiler.automatic.post_import import when_imported


@pytest.fixture
def modules(tmp_path, monkeypatch):
    """Two modules on the path, never imported yet."""
    for name in ("first_watched", "second_watched"):
        (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in ("first_watched", "second_watched"):
        sys.modules.pop(name, None)


def test_the_function_runs_right_after_the_module_is_imported(modules):
    seen = []
    watch = when_imported("first_watched", lambda module: seen.append(module.VALUE))
    assert seen == []
    import first_watched  # noqa: F401
    assert seen == [1]
    assert watch.fired


def test_a_module_imported_already_runs_the_function_at_once(modules):
    import first_watched  # noqa: F401
    seen = []
    assert when_imported("first_watched", lambda module: seen.append(module.__name__)) is None
    assert seen == ["first_watched"]


def test_every_watch_shares_one_finder_which_leaves_with_the_last_watch(modules, monkeypatch):
    # A finder of this test's own: watches other tests left pending stay out of the count.
    finder = post_import._Watches()
    monkeypatch.setattr(post_import, "_watches", finder)
    watches = [when_imported(name, lambda module: None) for name in ("first_watched", "second_watched", "first_watched")]
    assert sys.meta_path.count(finder) == 1 and sys.meta_path[0] is finder
    for watch in watches:
        watch.cancel()
    assert finder not in sys.meta_path


def test_two_watches_of_one_module_both_run_in_the_order_they_were_set(modules):
    seen = []
    when_imported("first_watched", lambda module: seen.append("older"))
    when_imported("first_watched", lambda module: seen.append("newer"))
    import first_watched  # noqa: F401
    assert seen == ["older", "newer"]


def test_a_cancelled_watch_does_not_run(modules):
    seen = []
    when_imported("first_watched", lambda module: seen.append("kept")).cancel()
    import first_watched  # noqa: F401
    assert seen == []
