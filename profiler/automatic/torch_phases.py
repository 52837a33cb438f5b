"""A PyTorch program's phases as blocks, without edits: forward, backward, optimizer step.

``rlprof run`` installs these hooks when the program imports torch (see
:mod:`profiler.automatic.post_import`); nothing here imports torch by itself. What becomes a
block, in the thread that makes the call:

- the **outermost** ``nn.Module`` call — the policy or value network as the program calls it,
  not each of its layers: a module called while another module's call is open is not a block of
  its own. The block is named after the module as the calling code knows it (``Agent.critic``
  for a child ``critic`` of the ``self`` that calls it, else the variable that holds it, else
  its class) followed by ``.forward``, and by ``(no grad)`` under ``torch.no_grad()``, where
  inference calls run, so a rollout's policy calls are told from the update's;
- ``backward``: every ``Tensor.backward`` and ``torch.autograd.backward``, through
  ``torch.autograd.backward``, the function both go through;
- ``<Optimizer>.step`` through torch's global optimizer step hooks, and
  ``<Optimizer>.zero_grad``, for which torch has no hook, by wrapping ``Optimizer.zero_grad``.

The forward hooks are global ``nn.Module`` hooks: while they are installed, every module call
takes torch's hooked path (a few microseconds per layer call), which the benchmark
``benchmarks/run_overhead.py`` measures. :func:`uninstall_torch_phases` removes all of it.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
import weakref
from types import FrameType, ModuleType
from typing import Any

from profiler.timing import timers

__all__ = ["NO_GRAD_SUFFIX", "inside_model_call", "install_torch_phases", "torch_phases_installed",
           "uninstall_torch_phases"]

NO_GRAD_SUFFIX = " (no grad)"
"""Ends the name of a forward block run under ``torch.no_grad()`` (inference)."""


class _ThreadState(threading.local):
    """Per thread: how many model calls are open, and the blocks this module opened."""

    def __init__(self) -> None:
        self.depth = 0
        self.forward_block: Any = None
        self.step_block: Any = None


_state = _ThreadState()
_installed: list[Any] = []  # what uninstall undoes, in order: removable handles and restorers
_names: weakref.WeakKeyDictionary[Any, tuple[str, str]] = weakref.WeakKeyDictionary()
_torch_folder = ""
_grad_enabled: Any = None


class inside_model_call:  # noqa: N801 - used as a context manager, like torch.no_grad
    """While open, module calls in this thread are inside a model-level block and not blocks of
    their own (SB3's ``evaluate_actions`` is timed whole, not layer by layer)."""

    __slots__ = ()

    def __enter__(self) -> None:
        _state.depth += 1

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        _state.depth -= 1


def torch_phases_installed() -> bool:
    return bool(_installed)


def install_torch_phases(torch: ModuleType) -> None:
    """Install the hooks in the imported ``torch`` (idempotent)."""
    global _torch_folder, _grad_enabled
    if _installed:
        return
    _torch_folder = os.path.dirname(torch.__file__) + os.sep
    _grad_enabled = torch.is_grad_enabled
    module_hooks = importlib.import_module("torch.nn.modules.module")
    optimizer_hooks = importlib.import_module("torch.optim.optimizer")
    _installed.append(module_hooks.register_module_forward_pre_hook(_before_forward))
    _installed.append(module_hooks.register_module_forward_hook(_after_forward, always_call=True))
    _installed.append(optimizer_hooks.register_optimizer_step_pre_hook(_before_step))
    _installed.append(optimizer_hooks.register_optimizer_step_post_hook(_after_step))
    _installed.append(_replace(torch.autograd, "backward", _timed_backward(torch.autograd.backward)))
    _installed.append(_replace(torch.optim.Optimizer, "zero_grad",
                               _timed_zero_grad(torch.optim.Optimizer.zero_grad)))


def uninstall_torch_phases() -> None:
    """Remove every hook and wrapper :func:`install_torch_phases` put in place."""
    while _installed:
        _installed.pop().remove()


class _Replaced:
    """Puts an attribute back as it was (unless someone replaced it again since)."""

    def __init__(self, owner: Any, name: str, original: Any, replacement: Any) -> None:
        self.owner, self.name, self.original, self.replacement = owner, name, original, replacement

    def remove(self) -> None:
        if self.owner.__dict__.get(self.name) is self.replacement:
            setattr(self.owner, self.name, self.original)


def _replace(owner: Any, name: str, replacement: Any) -> _Replaced:
    replaced = _Replaced(owner, name, owner.__dict__[name], replacement)
    setattr(owner, name, replacement)
    return replaced


# --- module calls -----------------------------------------------------------------------------------


def _before_forward(module: Any, args: Any) -> None:
    state = _state
    state.depth += 1
    if state.depth == 1:
        names = _names.get(module)
        if names is None:
            names = _names[module] = _module_names(module, sys._getframe(1))
        block = timers.hierarchical_timer(names[0] if _grad_enabled() else names[1])
        block.__enter__()
        state.forward_block = block


def _after_forward(module: Any, args: Any, result: Any) -> None:
    state = _state
    state.depth -= 1
    if state.depth == 0 and state.forward_block is not None:
        block, state.forward_block = state.forward_block, None
        block.__exit__(None, None, None)


def _module_names(module: Any, frame: FrameType | None) -> tuple[str, str]:
    """The block names of a module's forward, with grad and without."""
    name = _name_in_caller(module, frame) or type(module).__name__
    return f"{name}.forward", f"{name}.forward{NO_GRAD_SUFFIX}"


def _name_in_caller(module: Any, frame: FrameType | None) -> str | None:
    """The module's name as the code that called it knows it: ``Owner.child`` when the caller's
    ``self`` holds it as a child, else a variable of the caller's that holds it."""
    while frame is not None and frame.f_code.co_filename.startswith(_torch_folder):
        frame = frame.f_back
    if frame is None:
        return None
    local_names = frame.f_locals
    owner = local_names.get("self")
    named_children = getattr(owner, "named_children", None)
    if owner is not module and callable(named_children):
        for child_name, child in named_children():
            if child is module:
                return f"{type(owner).__name__}.{child_name}"
    for variables in (local_names, frame.f_globals):
        for variable, value in variables.items():
            if value is module and variable != "self":
                return variable
    return None


# --- backward, optimizer step, zero_grad --------------------------------------------------------------


def _timed_backward(backward: Any) -> Any:
    @functools.wraps(backward)
    def backward_timed(*args: Any, **kwargs: Any) -> Any:
        with timers.hierarchical_timer("backward"):
            return backward(*args, **kwargs)

    return backward_timed


def _timed_zero_grad(zero_grad: Any) -> Any:
    @functools.wraps(zero_grad)
    def zero_grad_timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        with timers.hierarchical_timer(f"{type(self).__name__}.zero_grad"):
            return zero_grad(self, *args, **kwargs)

    return zero_grad_timed


def _before_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    state = _state
    left_open = state.step_block
    if left_open is not None and getattr(left_open, "_stack", None) is not None \
            and left_open._stack.current is left_open:
        left_open.__exit__(RuntimeError, None, None)  # the last step raised: counted as an error
    block = timers.hierarchical_timer(f"{type(optimizer).__name__}.step")
    block.__enter__()
    state.step_block = block


def _after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    state = _state
    block, state.step_block = state.step_block, None
    if block is not None:
        block.__exit__(None, None, None)
