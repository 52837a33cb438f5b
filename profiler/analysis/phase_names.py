"""The names the training phases are read by: the blocks ``rlprof run``'s torch hooks open, and the
parts the analysis makes of them.

Kept apart so that the phases (:mod:`profiler.analysis.training_phases`) and the split of update
blocks that held the rollout (:mod:`profiler.analysis.rollout_updates`) read one set of names.
"""

from __future__ import annotations

from profiler.analysis.step_time import VECTOR_STEP_BLOCKS

__all__ = ["NO_GRAD_SUFFIX", "ROLLOUT_CODE_PART", "UNTIMED_PART", "UPDATE_BLOCK", "is_training_name"]

UPDATE_BLOCK = "update"
"""The block the torch hooks open per optimizer step (``profiler.automatic.torch_phases``)."""
NO_GRAD_SUFFIX = " (no grad)"
"""Ends the name of a model call's block run under ``torch.no_grad()`` (inference)."""
UNTIMED_PART = "(untimed)"
"""The update part that stands for the update's own code, in no block between its timed calls."""
ROLLOUT_CODE_PART = "(rollout's own code)"
"""The policy part that stands for the rollout's own code inside update blocks that held the
rollout: what ran before their last step in no block (building the action distribution, sampling,
storing the step)."""


def is_training_name(name: str) -> bool:
    """``backward``, an optimizer's ``step`` or ``zero_grad``: the learner's work wherever it ran."""
    return name == "backward" or (name.endswith((".step", ".zero_grad"))
                                  and name not in VECTOR_STEP_BLOCKS and name != "env.step")
