"""Specification of how ``rlprof run`` adds its worker set-up hook to the Ray job of the program it
runs: the program's own runtime_env is extended, never replaced or changed in place. These tests
read the arguments ``ray.init`` would get; they start no Ray."""

from __future__ import annotations

import json

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed; pip install -e '.[ray]' runs these tests")

from profiler.integrations.ray_worker_setup import WorkerSetup  # noqa: E402
from profiler.integrations.ray_workers import RayWorkers  # noqa: E402


@pytest.fixture
def workers():
    workers = RayWorkers(record_timeline=False, framework_phases=True)
    yield workers
    workers.finish()


def test_the_programs_runtime_env_keeps_its_fields_and_gains_the_hook(workers):
    runtime_env = {"env_vars": {"USER_FLAG": "kept"}, "working_dir": "."}
    arguments = workers._with_setup_hook({"runtime_env": runtime_env, "num_cpus": 2})
    extended = arguments["runtime_env"]
    assert extended["env_vars"] == {"USER_FLAG": "kept"} and extended["working_dir"] == "."
    assert isinstance(extended["worker_process_setup_hook"], WorkerSetup)
    assert arguments["num_cpus"] == 2


def test_the_programs_own_dict_is_left_as_it_was(workers):
    runtime_env = {"env_vars": {"USER_FLAG": "kept"}}
    workers._with_setup_hook({"runtime_env": runtime_env})
    assert runtime_env == {"env_vars": {"USER_FLAG": "kept"}}


def test_the_programs_own_setup_hook_is_kept_to_run_after_rlprofs(workers):
    arguments = workers._with_setup_hook({"runtime_env": {"worker_process_setup_hook": "my_package.setup"}})
    assert arguments["runtime_env"]["worker_process_setup_hook"].user_hook == "my_package.setup"


def test_a_runtime_env_given_through_job_config_is_extended_there(workers):
    job_config = ray.job_config.JobConfig(runtime_env={"env_vars": {"USER_FLAG": "kept"}})
    arguments = workers._with_setup_hook({"job_config": job_config})
    extended = arguments["job_config"].runtime_env
    assert extended["env_vars"] == {"USER_FLAG": "kept"}
    assert "worker_process_setup_hook" in extended
    assert "worker_process_setup_hook" not in job_config.runtime_env  # the program's object, unchanged


def test_a_job_submitted_with_its_own_setup_hook_is_left_alone_and_the_run_says_so(workers, monkeypatch):
    job = {"runtime_env": {"worker_process_setup_hook": "their.setup"}}
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps(job))
    assert workers._with_setup_hook({"num_cpus": 2}) == {"num_cpus": 2}
    assert any("not timed" in line for line in workers.finish())


def test_ray_init_and_shutdown_are_the_programs_again_after_the_run():
    init, shutdown = ray.init, ray.shutdown
    workers = RayWorkers(record_timeline=False, framework_phases=True).follow()  # Ray is imported: wraps now
    assert ray.init is not init and ray.init.__wrapped__ is init
    workers.finish()
    assert ray.init is init and ray.shutdown is shutdown
