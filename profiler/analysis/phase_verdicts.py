"""Verdicts in the user's terms: the policy's inference or the update is what limits the run.

``rlprof run`` times a PyTorch or Stable-Baselines3 program's calls without edits; these rules
read them as phases (:mod:`profiler.analysis.training_phases`) and name the program's own call
that limits the run ("the policy's inference is the limit: Agent.get_action_and_value (no grad)
took 38% of the wall time"). The environments' and the transport's verdicts are
:mod:`profiler.analysis.verdicts`' (``env_bound``, ``transport_bound``); the time outside any
block is its ``untimed``. The rules, each with its threshold:

Shares are of the **training loop**: the wall time less the untimed time before the first vector
step and after the last (imports, building the envs and the model, the end) and the blocks that
ran only there, where the timeline tells them (:func:`profiler.analysis.untimed_gaps.training_loop_seconds`),
else of the wall time. A short run spends most
of its wall time starting up; what limits its loop is still what a user asks. The verdict's cost
and share are of the wall time, as every verdict's.

``policy_bound``
    The policy's inference calls take at least :data:`PHASE_MIN_SHARE` of the loop, and more
    than the update and more than the vector steps. The costliest call is named, with its calls
    and its time per call, and the share of it spent outside the networks' forwards (building the
    action distribution, sampling): a cost a smaller network does not remove.
``update_bound``
    The update (one ``update`` block per optimizer step and the loop between them, or SB3's
    ``<Algorithm>.train``) takes at least :data:`PHASE_MIN_SHARE` of the loop, and more than the
    policy's inference and more than the vector steps; its costliest parts are named (``backward``,
    ``Adam.step``, the forward with grad, the loss code between them). The advice is in the
    algorithm's terms: epochs and minibatches for PPO, how often to train for an off-policy learner
    (SB3's by its class, any other by the target network its update reads).
``rollout_with_grad``
    The program's rollout ran its policy with grad enabled: the vector steps (or the env steps of
    one env the program steps itself) fell inside the ``update`` blocks. The fix is
    ``torch.no_grad()`` around the rollout's policy calls (autograd records a graph for each of
    them that no backward uses); where the loss is made of those calls (no forward with grad after
    the last step: REINFORCE's kept log-probabilities, :attr:`TrainingPhases.loss_on_rollout_graph`),
    ``no_grad`` and a batched forward at the update that recomputes them. Where the timeline lets
    the analysis split those blocks at their last step (:attr:`TrainingPhases.split_at_steps`), the
    verdict names the policy's calls with grad, and ``policy_bound`` and ``update_bound`` are judged
    on the split phases (the rollout's own code before the last step is the policy's); otherwise
    the update blocks say nothing of the update, and no other phase verdict is drawn.
"""

from __future__ import annotations

from typing import Any, Protocol

from profiler.analysis.step_time import trainer_env_call_seconds
from profiler.analysis.text_format import format_percent, format_seconds
from profiler.analysis.training_phases import (NO_GRAD_SUFFIX, ROLLOUT_CODE_PART, UNTIMED_PART, PhaseBlock,
                                               TrainingPhases, training_phases)
from profiler.analysis.untimed_gaps import loop_share, loop_share_text

__all__ = ["EVALUATION_BOUND", "PHASE_KINDS", "PHASE_MIN_SHARE", "POLICY_BOUND", "ROLLOUT_WITH_GRAD", "UPDATE_BOUND",
           "PHASE_PARTS_NAMED", "SB3_OFF_POLICY_ALGORITHMS", "phase_verdicts"]

PHASE_MIN_SHARE = 0.20
"""A phase is named as the limit from a fifth of the training loop (and when it is the largest of
the policy, the update, the vector steps and the evaluation)."""

SB3_OFF_POLICY_ALGORITHMS = frozenset({"DQN", "QRDQN", "SAC", "TD3", "DDPG", "TQC", "CrossQ"})
"""Stable-Baselines3's (and sb3-contrib's) algorithms that learn from a replay buffer every few env
steps: their update shrinks with ``train_freq`` and ``gradient_steps``, they have no epochs."""

PHASE_PARTS_NAMED = 3
"""How many of the update's parts an ``update_bound`` verdict names, at the most."""

POLICY_BOUND = "policy_bound"
UPDATE_BOUND = "update_bound"
EVALUATION_BOUND = "evaluation_bound"
ROLLOUT_WITH_GRAD = "rollout_with_grad"
PHASE_KINDS = (POLICY_BOUND, UPDATE_BOUND, EVALUATION_BOUND, ROLLOUT_WITH_GRAD)


class JudgedRun(Protocol):
    """What these rules read of the run being judged (``profiler.analysis.verdicts._Run``)."""

    tree: dict[str, Any]

    @property
    def wall(self) -> float: ...

    def share(self, seconds: float) -> float | None: ...

    def verdict(self, kind: str, title: str, cost: float, evidence: dict[str, Any],
                suggestion: str) -> Any: ...


def phase_verdicts(run: JudgedRun) -> list[Any]:
    """The phase verdicts of ``run`` (none for a run without framework phases)."""
    phases = training_phases(run.tree)
    if phases is None:
        return []
    if phases.rollout_with_grad and not phases.split_at_steps:
        return [_rollout_with_grad(run, phases)]
    judged = [*_policy_bound(run, phases), *_update_bound(run, phases), *_evaluation_bound(run, phases)]
    return [_rollout_with_grad(run, phases), *judged] if phases.rollout_with_grad else judged


def _evidence(phases: TrainingPhases) -> dict[str, Any]:
    return {"policy_seconds": phases.policy_seconds, "update_seconds": phases.update_seconds,
            "env_steps_seconds": phases.env_seconds, "evaluation_seconds": phases.evaluation_seconds}


def _is_the_limit(run: JudgedRun, seconds: float, others: tuple[float, ...]) -> bool:
    return (loop_share(run.tree, seconds) or 0.0) >= PHASE_MIN_SHARE and all(seconds > other for other in others)


def _policy_bound(run: JudgedRun, phases: TrainingPhases) -> list[Any]:
    seconds = phases.policy_seconds
    if not _is_the_limit(run, seconds, (phases.update_seconds, phases.env_seconds, phases.evaluation_seconds)):
        return []
    calls = [block for block in phases.policy if block.name != ROLLOUT_CODE_PART]
    if not calls:
        return []
    top = calls[0]
    others = (f"; with {', '.join(_part_name(block) for block in phases.policy if block is not top)}, "
              f"{loop_share_text(run.tree, seconds)}" if len(phases.policy) > 1 else "")
    evidence = {**_evidence(phases), "blocks": [block.as_dict() for block in phases.policy]}
    outside = top.self_seconds / top.seconds if top.seconds > 0 else 0.0
    # Only a call that timed network forwards inside it tells its own code from theirs: an
    # outermost module call (SB3's ActorCriticPolicy.forward) holds its layers untimed, all self time.
    inside = (f" Of {top.name}'s time, {format_percent(outside)} ran outside the networks' forwards "
              "(its own code: building the action distribution, sampling): a smaller network does "
              "not remove that part." if 0 < top.self_seconds < top.seconds else "")
    rollout_code = next((block for block in phases.policy if block.name == ROLLOUT_CODE_PART), None)
    if rollout_code is not None and rollout_code.seconds > top.seconds:
        inside += (f" The rollout's own code around the calls takes more than they do, "
                   f"{loop_share_text(run.tree, rollout_code.seconds)}: the rollout_with_grad verdict says why.")
    batching = ("stepping several envs in a vector env (gymnasium.vector) makes each call serve all of them"
                if phases.env_steps is not None and not phases.steps_a_vector_env
                else "more envs per vector env make each call serve more of them")
    # A loss made of the rollout's calls needs their grad: inference mode would break it.
    cheaper = ("a smaller network makes the call itself cheaper" if phases.loss_on_rollout_graph
               else "a smaller network or torch.inference_mode() makes the call itself cheaper")
    return [run.verdict(
        POLICY_BOUND,
        f"the policy's inference is the limit: {top.name} took {loop_share_text(run.tree, top.seconds)} "
        f"({top.calls} calls, {format_seconds(top.seconds / max(top.calls, 1))} each){others}",
        seconds, evidence,
        f"Each call's cost is mostly per call, not per env, for a small network: {batching}; {cheaper}.{inside}")]


def _update_bound(run: JudgedRun, phases: TrainingPhases) -> list[Any]:
    seconds = phases.update_seconds
    if not phases.update_blocks or not _is_the_limit(
            run, seconds, (phases.policy_seconds, phases.env_seconds, phases.evaluation_seconds)):
        return []
    blocks = phases.update_blocks
    updates = sum(block.calls for block in blocks)
    what = "optimizer steps" if blocks[0].name == "update" else f"calls of {blocks[0].name}"
    parts = [part for part in phases.update_parts if part.seconds > 0][:PHASE_PARTS_NAMED]
    named = ", ".join(f"{_part_name(part)} {format_percent(loop_share(run.tree, part.seconds))}" for part in parts)
    evidence = {**_evidence(phases), "updates": updates,
                "between_updates_seconds": phases.update_between_seconds,
                "parts": [part.as_dict() for part in phases.update_parts]}
    own_code = (" The update's own code between its timed calls leads it: time its lines in "
                "hierarchical_timer blocks to see which of them cost most."
                if parts and parts[0].name == UNTIMED_PART else "")
    # The env side: the vector steps, or the program's own env stepped in the trainer (one env, no
    # vector env); a program that steps no env (offline RL, learning from a dataset) has none.
    trainer_env_seconds = None if phases.steps_a_vector_env else trainer_env_call_seconds(run.tree)
    steps_envs = phases.env_steps is not None or trainer_env_seconds is not None
    if phases.steps_a_vector_env:
        env_side = (f"; the env side can win back at most the vector steps' time, "
                    f"{loop_share_text(run.tree, phases.env_seconds)}.")
    elif trainer_env_seconds is not None:
        env_side = (f"; the env side can win back at most its env calls' time, "
                    f"{loop_share_text(run.tree, trainer_env_seconds)}.")
    else:
        env_side = "."
    return [run.verdict(
        UPDATE_BOUND,
        f"the update (learner) is the limit: {updates} {what} took {loop_share_text(run.tree, seconds)}"
        + (f", led by {named}" if named else ""),
        seconds, evidence,
        f"{_fewer_updates(blocks[0].name, phases.reads_a_target_network, steps_envs)} or a cheaper loss "
        f"shorten it{env_side}{own_code}")]


def _fewer_updates(update_block: str, reads_a_target_network: bool, steps_envs: bool) -> str:
    """How the program can take fewer optimizer steps, in its algorithm's own terms: an update
    that reads a target network is an off-policy learner's (a DQN), which has no epochs; a program
    that steps no env learns from its data alone, with no rollout or env step to count per."""
    if not steps_envs:
        return "Fewer optimizer steps (fewer epochs, larger minibatches)"
    algorithm, _, method = update_block.rpartition(".")
    if method == "train" and algorithm in SB3_OFF_POLICY_ALGORITHMS:
        return f"Fewer gradient steps per env step ({algorithm}'s train_freq larger, or gradient_steps smaller)"
    if reads_a_target_network:
        return ("Fewer optimizer steps per env step (train less often, or take fewer gradient steps "
                "each time)")
    return "Fewer optimizer steps per rollout (fewer epochs, larger minibatches)"


def _evaluation_bound(run: JudgedRun, phases: TrainingPhases) -> list[Any]:
    seconds = phases.evaluation_seconds
    if not phases.evaluation or not _is_the_limit(
            run, seconds, (phases.policy_seconds, phases.update_seconds, phases.env_seconds)):
        return []
    top = phases.evaluation[0]
    evidence = {**_evidence(phases), "blocks": [block.as_dict() for block in phases.evaluation]}
    return [run.verdict(
        EVALUATION_BOUND,
        f"the evaluation is the limit: {top.name} took {loop_share_text(run.tree, seconds)} ({top.calls} calls, "
        f"{format_seconds(seconds / max(top.calls, 1))} each), its policy calls and env steps included",
        seconds, evidence,
        "Evaluate less often (EvalCallback's eval_freq counts each env's steps) or on fewer episodes "
        "(n_eval_episodes): the training waits for every evaluation, which runs inside its rollout.")]


def _part_name(part: PhaseBlock) -> str:
    if part.name == UNTIMED_PART:
        return "the update's own code (its batch, the loss, clipping)"
    if part.name == ROLLOUT_CODE_PART:
        return "the rollout's own code around the calls (the action distribution, sampling, storing the step)"
    return part.name


def _rollout_with_grad(run: JudgedRun, phases: TrainingPhases) -> Any:
    with_grad = [block for block in phases.policy
                 if not block.name.endswith(NO_GRAD_SUFFIX) and block.name != ROLLOUT_CODE_PART]
    steps = phases.steps_word
    if phases.split_at_steps and with_grad:
        calls = ", ".join(f"{block.name} ({block.calls} calls, {format_seconds(block.seconds)})"
                          for block in with_grad[:PHASE_PARTS_NAMED])
        title = (f"the rollout's policy ran with grad enabled: {calls}; the {steps} fell inside "
                 "the update blocks, which rlprof split at their last step")
    else:
        title = (f"the rollout's policy ran with grad enabled: the {steps} fell inside the update "
                 "blocks, so rollout and update cannot be told apart")
    evidence = {**_evidence(phases), "loss_on_rollout_graph": phases.loss_on_rollout_graph}
    if phases.loss_on_rollout_graph:
        advice = ("The loss is made of the rollout's own calls (each step's log-probability kept for it, "
                  "as REINFORCE does), so autograd records a graph per step, one small call at a time: run "
                  "the rollout under torch.no_grad(), keep its observations and actions, and recompute the "
                  "log-probabilities at the update in one batched forward over them (as PPO does), one "
                  "graph for the whole rollout; rlprof then tells the policy from the update by the blocks "
                  "themselves.")
    else:
        advice = ("Call the policy under torch.no_grad() (or torch.inference_mode()) in the rollout: autograd "
                  "records a graph for every call that no backward uses, and rlprof then tells the policy from "
                  "the update by the blocks themselves.")
    return run.verdict(ROLLOUT_WITH_GRAD, title, 0.0, evidence, advice)
