"""Specification of how rlprof tells a reader to measure memory: in the terms of the run at hand."""

from __future__ import annotations

from profiler.analysis.memory_advice import (
    allocations_advice, made_by_rlprof_run, more_samples_advice, sampling_advice,
)


def test_a_dump_rlprof_run_wrote_is_known_by_its_metadata():
    assert made_by_rlprof_run({"metadata": {"rlprof_run": "train.py"}})
    assert not made_by_rlprof_run({"metadata": {"run_id": "x"}})
    assert not made_by_rlprof_run({"name": "root"})


def test_a_run_rlprof_run_made_is_told_its_options_not_the_api():
    assert sampling_advice(True) == "run it again with rlprof run --memory"
    assert allocations_advice(True) == "run it again with rlprof run --memory --track-allocations"
    assert "rlprof run --memory=SECONDS" in more_samples_advice(True)


def test_any_other_run_is_told_the_api():
    assert "Profiler(sample_rate=N)" in sampling_advice(False)
    assert "start_sampling(track_allocations=True)" in allocations_advice(False)
    assert more_samples_advice(False) == "sample more often"
