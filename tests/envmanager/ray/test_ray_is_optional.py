"""Specification: Ray is an optional extra. Without it everything else works, and the Ray parts
say in one line how to get it. Each test runs an interpreter in which importing ``ray`` fails, as
it does where Ray is not installed."""

from __future__ import annotations

import subprocess
from not_installed import run_without


def run_without_ray(code: str) -> subprocess.CompletedProcess[str]:
    return run_without(("ray",), code)


def test_envmanager_and_the_ray_integration_import_without_ray():
    result = run_without_ray("""
        import envmanager
        from envmanager import RayEnvManager, SubprocessEnvManager
        import profiler.integrations.ray
        print("ray" in sys.modules)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "False\n"


def test_building_a_ray_env_manager_without_ray_says_how_to_install_it():
    result = run_without_ray("""
        import gymnasium as gym
        from envmanager import RayEnvManager
        try:
            RayEnvManager([lambda: gym.make("CartPole-v1")])
        except ImportError as error:
            print(error)
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "RayEnvManager needs Ray: pip install 'rlprof[ray]' (or pip install 'ray>=2.9')\n"
