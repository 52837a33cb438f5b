"""The cores a run may use: its affinity mask, capped by a container's CPU quota."""

from __future__ import annotations

import os

import pytest

from profiler.recording.cpu_cores import cores_available


def affinity() -> int:
    return len(os.sched_getaffinity(0))


def cgroup_files(root, files: dict[str, str], own_cgroup: str = "0::/\n"):
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    proc_self_cgroup = root / "proc_self_cgroup"
    proc_self_cgroup.write_text(own_cgroup)
    return root, proc_self_cgroup


def test_without_a_quota_the_cores_are_the_affinity_mask(tmp_path):
    root, own = cgroup_files(tmp_path, {"cpu.max": "max 100000\n"})
    assert cores_available(root, own) == affinity()


def test_on_this_machine_the_cores_are_at_least_one_and_at_most_the_affinity_mask():
    assert 1 <= cores_available() <= affinity()


def test_a_cgroup_v2_quota_caps_the_cores_rounded_up(tmp_path):
    root, own = cgroup_files(tmp_path, {"cpu.max": "50000 100000\n"})
    assert cores_available(root, own) == 1


def test_a_fractional_quota_is_rounded_up_to_whole_cores(tmp_path):
    root, own = cgroup_files(tmp_path, {"cpu.max": "150000 100000\n"})
    assert cores_available(root, own) == min(2, affinity())


def test_the_processs_own_cgroup_v2_quota_is_read(tmp_path):
    root, own = cgroup_files(
        tmp_path, {"cpu.max": "max 100000\n", "job/cpu.max": "100000 100000\n"}, own_cgroup="0::/job\n"
    )
    assert cores_available(root, own) == 1


def test_a_cgroup_v1_quota_caps_the_cores(tmp_path):
    root, own = cgroup_files(
        tmp_path,
        {"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"},
        own_cgroup="1:cpu,cpuacct:/\n",
    )
    assert cores_available(root, own) == 1


def test_a_cgroup_v1_quota_of_minus_one_is_no_limit(tmp_path):
    root, own = cgroup_files(
        tmp_path, {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, "1:cpu:/\n"
    )
    assert cores_available(root, own) == affinity()


@pytest.mark.parametrize("text", ["", "garbage", "0 100000", "100000 0", "x y"])
def test_an_unreadable_quota_is_no_limit(tmp_path, text):
    root, own = cgroup_files(tmp_path, {"cpu.max": text})
    assert cores_available(root, own) == affinity()
