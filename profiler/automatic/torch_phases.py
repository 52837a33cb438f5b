"""A PyTorch program's phases as blocks, without edits: the policy's calls, the update, backward,
optimizer step.

``rlprof run`` installs these hooks when the program imports torch (see
:mod:`profiler.automatic.post_import`); nothing here imports torch by itself. What becomes a
block, in the thread that makes the call:

- the program's own **model method** that makes the outermost module calls — CleanRL's
  ``Agent.get_action_and_value``, which calls the actor and the critic and samples the action
  distribution. A user who says "the policy's time" means that whole call, not only the networks'
  forwards inside it. It is found on the first module call it makes: the calling frames are
  read for the outermost method of an ``nn.Module`` in the program's own code (not torch's, not
  an installed library's, never ``forward``); that method is then wrapped on the class that
  defines it, so every later call is a block named ``Agent.get_action_and_value`` (with
  ``(no grad)`` under ``torch.no_grad()``), and the call that was found is timed from its first
  module call to its return (a profile function watches for that one return, then goes). The
  module calls inside stay blocks of their own, nested in it;
- the **update**: a block ``update`` from the first model call with grad enabled (a model method
  or an outermost module call) to the end of the next optimizer step — one per optimizer step,
  holding that step's forward, the loss arithmetic, ``zero_grad``, ``backward``, gradient
  clipping and ``step``. So the tree tells the rollout (``(no grad)`` calls, environment steps)
  from the update as the program's own timers around them would. A program that runs its
  rollout's policy with grad enabled has its rollout inside ``update`` blocks, which the analysis
  says (the policy should run under ``torch.no_grad()``);

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

**Module scopes** (MegEngine's ``with_scopes``, :func:`set_module_scopes`): when asked, the
module calls *inside* an outermost one are blocks too, each nested in the call that made it and
named by its attribute path in the outermost module (``named_modules()``): ``0.forward``,
``actor.0.forward``; a module not among the outermost's (one it calls without holding it) by its
class. Off by default: a policy call then opens a block per layer, which costs each layer call a
block (``benchmarks/run_overhead.py``).

Module calls are seen by wrapping ``nn.Module.__call__``, not through torch's global forward
hooks: with a global hook installed, every layer call takes torch's hooked path (a few
microseconds each: a policy call of CleanRL's agent, a dozen layer calls, was a fifth slower),
while the wrapper sends a call made inside another module's call straight on. Where the optional
C extension ``profiler/automatic/_module_call_core.c`` was built, that pass-through is in C (a
callable put in place of ``Module.__call__`` that forwards a nested call's arguments as they
came, and sends a call at depth 0 to the Python wrapper); without it (or with
``RLPROF_PURE_PYTHON=1``) the Python wrapper does the same test itself, one Python call more per
layer call. The same extension times the warm calls too: an outermost call of a module whose
names are cached, when the wrapper would only open its block (a model method is open, or there
is no update to start and its caller was read already), and a wrapped model method's call of a
class it has names for (the model method is then a C ``ModelMethodGate`` on its class). The
Python wrappers ``module_call_timed`` and :class:`TimedModelMethod` stay the reference and take
every other call: first calls, discovery, module scopes, an update to start from a module call.
``benchmarks/phases_instructions.py`` counts what the phases cost a policy call and a minibatch.
:func:`uninstall_torch_phases` removes all of it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
import threading
import weakref
from types import FrameType, MethodType, ModuleType
from typing import Any

from profiler.automatic.stack_sampler import file_kind
from profiler.timing import accelerator, timers

__all__ = ["NO_GRAD_SUFFIX", "UPDATE_BLOCK", "TimedModelMethod", "compiled_pass_through", "inside_model_call", "inside_update",
           "install_torch_phases", "set_module_scopes", "torch_phases_installed", "uninstall_torch_phases",
           "use_compiled_pass_through"]

NO_GRAD_SUFFIX = " (no grad)"
"""Ends the name of a forward or model-method block run under ``torch.no_grad()`` (inference)."""
UPDATE_BLOCK = "update"
"""The block from the first model call with grad enabled to the end of the next optimizer step."""

_NEVER_WRAPPED = frozenset({"forward", "__call__", "_call_impl", "_wrapped_call_impl"})
_GENERATOR_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class _ThreadState(threading.local):
    """Per thread: the model methods and blocks this module opened (the depth of module calls is
    :data:`_depth`'s, apart: the C pass-through reads it)."""

    def __init__(self) -> None:
        self.scope_names: dict[int, str] | None = None  # the outermost module's, with module scopes
        self.step_block: Any = None
        self.update_block: Any = None
        self.framework_updates = 0  # open updates a framework times itself (SB3's train)
        self.training = False  # a backward, zero_grad or optimizer step ran in this thread
        self.open_methods: list[Any] = []  # the model methods whose blocks are open, innermost last


class _PythonDepth(threading.local):
    """The pure-Python ``ThreadDepth``: ``value`` is how many module calls and model-level blocks
    (:class:`inside_model_call`) are open in the calling thread."""

    def __init__(self) -> None:
        self.value = 0


MODULE_CALL_CORE_VERSION = 3
"""The interface version ``_module_call_core.c`` must say (its ``MODULE_CALL_CORE_VERSION``): raised
with it. A build that says another is stale and is not used (see
:func:`profiler.timing.accelerator.load_extension`)."""


def _load_core() -> ModuleType | None:
    """The C pass-through (``_module_call_core``), unless pure Python is asked for, it was not
    built, or it is a stale build."""
    if accelerator.extension is None:
        return None  # RLPROF_PURE_PYTHON=1, or no compiler at install: the pure-Python core
    module, _ = accelerator.load_extension("profiler.automatic._module_call_core", MODULE_CALL_CORE_VERSION,
                                           "the framework phases' C pass-through")
    return module


_core = _load_core()
_use_core = _core is not None
_state = _ThreadState()
_depth: Any = _core.ThreadDepth() if _core is not None else _PythonDepth()
_installed: list[Any] = []  # what uninstall undoes, in order: removable handles and restorers
_module_call: Any = None  # what Module.__call__ is while installed: the C gate or the Python wrapper
# Per module, by id: (a weak reference to it, its block name with grad, without). A plain dict,
# not a WeakKeyDictionary: its get is a Python call that makes a weak reference every time.
_names: dict[int, tuple[Any, str, str]] = {}
# Code objects by id (held, so that no other code takes the id): a code object's own hash reads
# its constants and names at each lookup, an int's is free.
_callers_read: dict[int, Any] = {}  # the callers whose frames were read once
_learning_methods: dict[int, Any] = {}  # the model methods that ran a backward or a step
_torch_folder = ""
_module_scopes = False  # whether module calls inside an outermost one are blocks (set_module_scopes)
# Per outermost module: its submodules' attribute paths, by id (named_modules(), read once).
_scope_names: weakref.WeakKeyDictionary[Any, dict[int, str]] = weakref.WeakKeyDictionary()
_grad_enabled: Any = None
_module_class: Any = None


class inside_model_call:  # noqa: N801 - used as a context manager, like torch.no_grad
    """While open, module calls in this thread are inside a model-level block and not blocks of
    their own (SB3's ``evaluate_actions`` is timed whole, not layer by layer)."""

    __slots__ = ()

    def __enter__(self) -> None:
        _depth.value += 1

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        _depth.value -= 1


class inside_update:  # noqa: N801 - used as a context manager, like torch.no_grad
    """While open, this thread is in an update a framework times as its own block (SB3's
    ``train``): no ``update`` block of this module opens inside it."""

    __slots__ = ()

    def __enter__(self) -> None:
        _state.framework_updates += 1

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        _state.framework_updates -= 1


def torch_phases_installed() -> bool:
    return bool(_installed)


def use_compiled_pass_through(enabled: bool) -> bool:
    """Whether the next :func:`install_torch_phases` passes nested module calls on in C (where the
    extension was built) or in Python; returns the previous setting, to restore. For tests and
    benchmarks, while the phases are not installed."""
    global _use_core
    previous, _use_core = _use_core, enabled and _core is not None
    return previous


def compiled_pass_through() -> bool:
    """Whether nested module calls are passed on in C (the C extension is loaded and chosen)."""
    return _use_core


def install_torch_phases(torch: ModuleType) -> None:
    """Install the hooks in the imported ``torch`` (idempotent)."""
    global _torch_folder, _grad_enabled, _module_class, _module_call, _depth
    if _installed:
        return
    _torch_folder = os.path.dirname(torch.__file__) + os.sep
    _grad_enabled = torch.is_grad_enabled
    module_hooks = importlib.import_module("torch.nn.modules.module")
    _module_class = module_hooks.Module
    optimizer_hooks = importlib.import_module("torch.optim.optimizer")
    depth_kind = _core.ThreadDepth if _use_core else _PythonDepth
    if type(_depth) is not depth_kind:
        _depth = depth_kind()
    original_call = module_hooks.Module.__call__
    _module_call = _timed_module_call(original_call)
    if _use_core:
        _core.configure(_state, _names, _learning_methods, _callers_read, _torch_folder, _grad_enabled, _open_update,
                        timers, accelerator.extension.block_api)
        _module_call = functools.update_wrapper(_core.NestedCallGate(original_call, _module_call), original_call)
        _module_call.pass_nested = not _module_scopes
        _module_call.time_outermost = True  # a warm outermost call with nothing before its block: timed in C
    _installed.append(_replace(module_hooks.Module, "__call__", _module_call))
    _installed.append(optimizer_hooks.register_optimizer_step_pre_hook(_before_step))
    _installed.append(optimizer_hooks.register_optimizer_step_post_hook(_after_step))
    _installed.append(_replace(torch.autograd, "backward", _timed_backward(torch.autograd.backward)))
    _installed.append(_replace(torch.optim.Optimizer, "zero_grad",
                               _timed_zero_grad(torch.optim.Optimizer.zero_grad)))


def uninstall_torch_phases() -> None:
    """Remove every hook and wrapper :func:`install_torch_phases` put in place, and close an
    ``update`` block the program left open (a forward with grad and no optimizer step after it)."""
    global _module_call
    while _installed:
        _installed.pop().remove()
    _module_call = None
    _close_update(_state)
    _state.training = False
    _callers_read.clear()
    _learning_methods.clear()


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


def _timed_module_call(call: Any) -> Any:
    """``nn.Module.__call__``, timing the outermost module calls of each thread.

    A module called while another's call is open (a layer of the policy) goes straight through:
    one Python call more, and torch's own fast path, where global hooks would send every layer
    call through torch's hooked path.
    """

    @functools.wraps(call)
    def module_call_timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        depth = _depth
        if depth.value:  # the C pass-through sends these on itself, unless module scopes are on
            if not _module_scopes:
                return call(self, *args, **kwargs)
            with timers.hierarchical_timer(_scope_block_name(self, _state)):
                return call(self, *args, **kwargs)
        depth.value = 1
        scopes = _module_scopes
        if scopes:
            _state.scope_names = _scope_names_of(self)
        try:
            with _outermost_call_block(self, sys._getframe(1)):
                return call(self, *args, **kwargs)
        finally:
            depth.value = 0
            if scopes:
                _state.scope_names = None

    return module_call_timed


def set_module_scopes(enabled: bool) -> bool:
    """Make the module calls inside an outermost one blocks too (MegEngine's ``with_scopes``, see
    the module docstring), or stop; returns the previous setting, to restore."""
    global _module_scopes
    previous, _module_scopes = _module_scopes, enabled
    if _module_call is not None and hasattr(_module_call, "pass_nested"):
        _module_call.pass_nested = not enabled  # the C gate: nested calls to the Python wrapper
    return previous


def _scope_names_of(module: Any) -> dict[int, str]:
    names = _scope_names.get(module)
    if names is None:
        names = _scope_names[module] = {id(child): name for name, child in module.named_modules() if name}
    return names


def _scope_block_name(module: Any, state: _ThreadState) -> str:
    """A nested module call's block: its attribute path in the outermost module, else its class."""
    name = state.scope_names.get(id(module)) if state.scope_names else None
    return f"{name or type(module).__name__}.forward"


def _outermost_call_block(module: Any, caller: FrameType) -> Any:
    """The block of an outermost module call, after what its start may open before it: the update
    (a call with grad, once the program trains) and the model method the caller runs in."""
    state = _state
    grad = _grad_enabled()
    if not state.open_methods:
        # An outermost model call that no model method holds: it may start an update, and its
        # caller may be a model method not wrapped yet.
        if grad and state.training and state.update_block is None:
            _open_update(state)
        frame = caller  # _caller_frame(caller), inline: a Python call less at every policy call
        while frame is not None and frame.f_code.co_filename.startswith(_torch_folder):
            frame = frame.f_back
        if frame is not None and id(frame.f_code) not in _callers_read:
            _callers_read[id(frame.f_code)] = frame.f_code
            _time_model_method(frame, grad)
    names = _names.get(id(module))
    if names is None or names[0]() is not module:
        names = _module_names(module, caller)
    return timers.hierarchical_timer(names[1] if grad else names[2])


def _module_names(module: Any, frame: FrameType | None) -> tuple[Any, str, str]:
    """A module's entry in ``_names``: a weak reference to it (which removes the entry when the
    module goes) and the block names of its forward, with grad and without."""
    name = _name_in_caller(module, frame) or type(module).__name__
    key = id(module)
    names = _names[key] = (weakref.ref(module, lambda gone: _forget_names(key, gone)),
                           f"{name}.forward", f"{name}.forward{NO_GRAD_SUFFIX}")
    return names


def _forget_names(key: int, gone: Any) -> None:
    names = _names.get(key)
    if names is not None and names[0] is gone:  # not a later module's entry under the same id
        del _names[key]


def _caller_frame(frame: FrameType | None) -> FrameType | None:
    """The first frame outside torch: the code that called the module."""
    while frame is not None and frame.f_code.co_filename.startswith(_torch_folder):
        frame = frame.f_back
    return frame


def _name_in_caller(module: Any, frame: FrameType | None) -> str | None:
    """The module's name as the code that called it knows it: ``Owner.child`` when the caller's
    ``self`` holds it as a child, else a variable of the caller's that holds it."""
    frame = _caller_frame(frame)
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


# --- model methods ---------------------------------------------------------------------------------


def _time_model_method(caller: FrameType, grad: bool) -> None:
    """Find the outermost model method on the calling frames, wrap it on its class, and time the
    call of it that is running now (from here to its return)."""
    found = None
    frame: FrameType | None = caller
    while frame is not None:
        method = _model_method_of(frame)
        if method is not None:
            found = (frame, *method)
        frame = frame.f_back
    if found is None:
        return
    frame, instance, owner, name = found
    if not getattr(owner.__dict__[name], "rlprof_model_method", False):  # another thread's look may have wrapped it
        _installed.append(_replace(owner, name, _timed_method(owner.__dict__[name], name)))
    if sys.getprofile() is not None:
        return  # another profiler watches returns: the call running now stays untimed
    state = _state
    if grad and state.training and state.update_block is None:
        _open_update(state)
    block = timers.hierarchical_timer(_method_block_names(type(instance), name)[0 if grad else 1])
    block.__enter__()
    state.open_methods.append(frame.f_code)
    _close_at_return(frame, block)


def _model_method_of(frame: FrameType) -> tuple[Any, type, str] | None:
    """``(self, defining class, name)`` when ``frame`` runs a method of an ``nn.Module`` defined in
    the program's own code (not torch, a library or rlprof), and not ``forward`` or a generator."""
    code = frame.f_code
    if (code.co_name in _NEVER_WRAPPED or code.co_argcount < 1 or code.co_varnames[0] != "self"
            or code.co_flags & _GENERATOR_FLAGS or file_kind(code.co_filename) != "program"):
        return None
    instance = frame.f_locals.get("self")
    if not isinstance(instance, _module_class):
        return None
    for owner in type(instance).__mro__:
        function = owner.__dict__.get(code.co_name)
        if getattr(function, "__code__", None) is code:
            return instance, owner, code.co_name
    return None


def _method_block_names(cls: type, name: str) -> tuple[str, str]:
    """The block names of a model method on ``cls``, with grad and without (each wrapper keeps
    them per class: see :func:`_timed_method`)."""
    return f"{cls.__name__}.{name}", f"{cls.__name__}.{name}{NO_GRAD_SUFFIX}"


def _timed_method(method: Any, name: str) -> Any:
    """``method`` (the program's model method ``name``) wrapped for its class: a C
    ``ModelMethodGate`` where the extension is in force, whose cold path is a
    :class:`TimedModelMethod`; else that :class:`TimedModelMethod` itself."""
    timed = TimedModelMethod(method, name)
    if not _use_core:
        return timed
    gate = functools.update_wrapper(_core.ModelMethodGate(method, timed.code, timed.names_by_class, timed), method)
    gate.rlprof_model_method = True
    gate.__signature__ = timed.__signature__
    return gate


class TimedModelMethod:
    """A model method wrapped on its class, in Python: the reference of the C ``ModelMethodGate``
    and its cold path (first calls, an update to start).

    It stays the program's method to what looks at it, as the gate does: the method's name,
    qualified name, doc, module and ``__wrapped__``, its signature said outright
    (``inspect.getfullargspec``, and what reads it, does not follow ``__wrapped__`` and would read
    ``(self, *args, **kwargs)``), a method bound to each instance (``__get__``, so ``super()``
    reaches it), weak references, and pickle and copy by its qualified name, as the program's
    function pickles. Not a function, as the gate is not: cloudpickle pickles a function of the
    script (``__main__``) by value, and this one's globals are rlprof's thread state, which no
    pickle carries (SB3's ``model.save()`` pickles a policy class of the script that way).
    """

    __slots__ = ("method", "code", "code_id", "name", "names_by_class", "__dict__", "__weakref__")

    def __init__(self, method: Any, name: str) -> None:
        self.method = method
        self.code = method.__code__
        self.code_id = id(self.code)
        self.name = name
        self.names_by_class: dict[type, tuple[str, str]] = {}  # shared with the gate
        functools.update_wrapper(self, method)
        self.rlprof_model_method = True
        self.__signature__ = inspect.signature(method)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        return self if instance is None else MethodType(self, instance)

    def __call__(self, instance: Any, *args: Any, **kwargs: Any) -> Any:
        method = self.method
        if _depth.value:  # called from inside a module's forward: that block holds it
            return method(instance, *args, **kwargs)
        state = _state
        grad = _grad_enabled()
        open_methods = state.open_methods
        if (not open_methods and state.update_block is None
                and ((grad and state.training) or self.code_id in _learning_methods)):
            _open_update(state)
        names = self.names_by_class.get(type(instance))
        if names is None:
            names = self.names_by_class[type(instance)] = _method_block_names(type(instance), self.name)
        open_methods.append(self.code)
        try:
            with timers.hierarchical_timer(names[0] if grad else names[1]):
                return method(instance, *args, **kwargs)
        finally:
            open_methods.pop()

    def __reduce__(self) -> str:
        return self.__qualname__


def _close_at_return(frame: FrameType, block: Any) -> None:
    """Close ``block`` when ``frame`` returns (or raises), through a profile function of this
    thread that removes itself then."""
    state = _state

    def watch(watched: FrameType, event: str, argument: Any) -> None:
        if event == "return" and watched is frame:
            sys.setprofile(None)
            state.open_methods.pop()
            block.__exit__(None, None, None)

    sys.setprofile(watch)


# --- the update ---------------------------------------------------------------------------------------


def _training_call(state: _ThreadState) -> None:
    """A backward, ``zero_grad`` or optimizer step: the program trains. From now on a model call
    with grad starts an update; this call starts one if none is open (the program's first update,
    whose first forward came before anything said it was training), unless a model method holds
    it — then that method learns, and its later calls are held in updates."""
    state.training = True
    if state.open_methods:
        _learning_methods[id(state.open_methods[0])] = state.open_methods[0]
    elif state.update_block is None and not _depth.value:
        _open_update(state)


def _open_update(state: _ThreadState) -> None:
    if state.framework_updates:
        return
    if timers.current_thread_stack().current.name == UPDATE_BLOCK:
        return  # the program's own "update" block holds it already
    block = timers.hierarchical_timer(UPDATE_BLOCK)
    block.__enter__()
    state.update_block = block


def _close_update(state: _ThreadState) -> None:
    """Close the open ``update`` block if it is the innermost open block (blocks must nest: one
    the program opened inside it and left open keeps it open until the next step)."""
    block = state.update_block
    if block is None:
        return
    stack = getattr(block, "_stack", None)
    if stack is None or stack.current is block:
        state.update_block = None
        block.__exit__(None, None, None)


# --- backward, optimizer step, zero_grad --------------------------------------------------------------


def _timed_backward(backward: Any) -> Any:
    @functools.wraps(backward)
    def backward_timed(*args: Any, **kwargs: Any) -> Any:
        _training_call(_state)
        with timers.hierarchical_timer("backward"):
            return backward(*args, **kwargs)

    return backward_timed


# Per optimizer class: its blocks' names, ``<Optimizer>.step`` and ``<Optimizer>.zero_grad`` (made
# once: formatting them at each minibatch made a string, and its hash, per call).
_optimizer_names: dict[type, tuple[str, str]] = {}


def _optimizer_block_names(cls: type) -> tuple[str, str]:
    names = _optimizer_names.get(cls)
    if names is None:
        names = _optimizer_names[cls] = (f"{cls.__name__}.step", f"{cls.__name__}.zero_grad")
    return names


def _timed_zero_grad(zero_grad: Any) -> Any:
    @functools.wraps(zero_grad)
    def zero_grad_timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        _training_call(_state)
        with timers.hierarchical_timer(_optimizer_block_names(type(self))[1]):
            return zero_grad(self, *args, **kwargs)

    return zero_grad_timed


def _before_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    state = _state
    left_open = state.step_block
    if left_open is not None and getattr(left_open, "_stack", None) is not None \
            and left_open._stack.current is left_open:
        left_open.__exit__(RuntimeError, None, None)  # the last step raised: counted as an error
    _training_call(state)
    block = timers.hierarchical_timer(_optimizer_block_names(type(optimizer))[0])
    block.__enter__()
    state.step_block = block


def _after_step(optimizer: Any, args: Any, kwargs: Any) -> None:
    state = _state
    block, state.step_block = state.step_block, None
    if block is not None:
        block.__exit__(None, None, None)
    _close_update(state)
