"""What ``profiler.set_config`` accepts: MXNet's keys and rlprof's own, each checked on the way in.

:class:`ProfilerSettings` holds one value per key. :func:`updated_settings` returns a copy with
some keys changed, after checking every key and value, so a call with one bad key changes
nothing and raises a ``ValueError`` that names the key and what it accepts. What each key does is
described in docs/from-mxnet.md; in short:

* ``filename``, ``continuous_dump``, ``dump_period``, ``profile_memory`` and ``profile_process``
  act here as in MXNet;
* ``summaries_dir``, ``run_id``, ``formats`` and ``timeline`` are rlprof's (ML-Agents' names for
  the first two), and so are ``emit_nvtx`` and ``record_shapes`` (NVTX ranges for every block, as
  ``profiler.gpu.emit_nvtx`` makes them: docs/gpu.md), and ``live_view`` (the live view on
  stderr while the profiler runs: docs/live.md);
* ``profile_all=True`` or ``profile_imperative=True`` (given explicitly) records PyTorch's
  operators through PyTorch's own profiler (:mod:`profiler.gpu.torch_ops`), as MXNet records its
  imperative operators;
* ``profile_symbolic``, ``profile_api``, ``aggregate_stats`` and
  ``gpu_memory_profile_filename_prefix`` select what MXNet's engine records (its graphs, its C
  API, GPU memory); rlprof has none of these, so they are checked and kept but change nothing, so
  that MXNet code runs unchanged.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler.tree.timer_json import check_run_id

__all__ = [
    "DEFAULT_FILENAME",
    "OUTPUT_FORMATS",
    "PROFILE_PROCESSES",
    "ProfilerSettings",
    "updated_settings",
]

DEFAULT_FILENAME = "profile.json"
"""MXNet's default trace file, written in the working folder."""

OUTPUT_FORMATS = ("timers", "chrome", "speedscope", "collapsed", "html")
"""What a dump can write: the timer tree JSON and the exporters' formats (see docs/outputs.md)."""

PROFILE_PROCESSES = ("worker", "server")
"""MXNet's process names: ``worker`` is this process, ``server`` the env workers merged into it."""


@dataclass(frozen=True)
class ProfilerSettings:
    """The profiler's configuration; MXNet's defaults where MXNet has the key.

    ``continuous_dump`` is off by default, unlike MXNet: rlprof writes a whole file at every dump
    (never appends), which costs more than MXNet's append, so rewriting it every second is asked
    for rather than assumed.
    """

    filename: str = DEFAULT_FILENAME
    filename_given: bool = False
    summaries_dir: Path | None = None
    run_id: str = "profile"
    formats: tuple[str, ...] = ("timers", "chrome")
    timeline: bool = True
    continuous_dump: bool = False
    dump_period: float = 1.0
    profile_memory: bool = False
    profile_process: str = "worker"
    profile_all: bool = False
    profile_symbolic: bool = True
    profile_imperative: bool = True
    profile_api: bool = True
    aggregate_stats: bool = False
    gpu_memory_profile_filename_prefix: str = "gpu_memory_profile"
    emit_nvtx: bool = False
    record_shapes: bool = False
    live_view: bool = False
    device: str | None = None
    device_memory_per_block: bool = False
    imperative_given: bool = False

    @property
    def record_operators(self) -> bool:
        """Whether PyTorch's operators are recorded (profiler.gpu.torch_ops): asked for with
        ``profile_all=True`` or an explicit ``profile_imperative=True``; off by default."""
        return self.profile_all or (self.profile_imperative and self.imperative_given)


_FLAGS = (
    "timeline",
    "continuous_dump",
    "profile_memory",
    "profile_all",
    "profile_symbolic",
    "profile_imperative",
    "profile_api",
    "aggregate_stats",
    "emit_nvtx",
    "record_shapes",
    "live_view",
    "device_memory_per_block",
)
_KEYS = tuple(field.name for field in dataclasses.fields(ProfilerSettings)
              if field.name not in ("filename_given", "imperative_given"))


def updated_settings(settings: ProfilerSettings, changes: dict[str, Any]) -> ProfilerSettings:
    """``settings`` with ``changes`` applied; raises ``ValueError`` for an unknown key or a bad
    value, naming it and what is accepted, before anything is changed."""
    checked: dict[str, Any] = {}
    for key, value in changes.items():
        if key not in _KEYS:
            raise ValueError(
                f"set_config: unknown key {key!r}; the keys are: {', '.join(sorted(_KEYS))}"
            )
        checked[key] = _checked_value(key, value)
    if "filename" in checked:
        checked["filename_given"] = True
    if "profile_imperative" in checked:
        checked["imperative_given"] = True
    return dataclasses.replace(settings, **checked)


def _checked_value(key: str, value: Any) -> Any:
    if key in _FLAGS:
        return _flag(key, value)
    if key == "dump_period":
        return _period(value)
    if key == "filename":
        return _file_name(value)
    if key == "summaries_dir":
        return _folder(value)
    if key == "run_id":
        return _run_id(value)
    if key == "formats":
        return _formats(value)
    if key == "profile_process":
        return profile_process_name(value, "set_config: profile_process")
    if key == "device":
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"set_config: device must name a device such as 'cuda' or 'cuda:1', or be None, got {value!r}")
        return value
    return _text(key, value)  # gpu_memory_profile_filename_prefix


def profile_process_name(value: Any, where: str) -> str:
    """``value`` if it names one of MXNet's processes (:data:`PROFILE_PROCESSES`), else an error."""
    if value not in PROFILE_PROCESSES:
        raise ValueError(f"{where} must be 'worker' (this process) or 'server' (the env workers "
                         f"merged into it), got {value!r}")
    return str(value)


def _flag(key: str, value: Any) -> bool:
    # MXNet takes the string of a value; 0 and 1 are what C-minded code passes besides booleans.
    if isinstance(value, bool) or (type(value) is int and value in (0, 1)):
        return bool(value)
    raise ValueError(f"set_config: {key} must be True or False, got {value!r}")


def _period(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        math.isfinite(value) and value > 0
    ):
        raise ValueError(f"set_config: dump_period must be a number of seconds > 0, got {value!r}")
    return float(value)


def _file_name(value: Any) -> str:
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise ValueError(f"set_config: filename must be a file path (a non-empty string), got {value!r}")
    return os.fspath(value)  # type: ignore[return-value]


def _folder(value: Any) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise ValueError(
            f"set_config: summaries_dir must be a folder path (a non-empty string) or None, got {value!r}"
        )
    return Path(value)


def _run_id(value: Any) -> str:
    try:
        return check_run_id(value)
    except ValueError as error:
        raise ValueError(f"set_config: {error}") from None


def _formats(value: Any) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else value
    try:
        formats = tuple(names)
    except TypeError:
        formats = ()
    unknown = [name for name in formats if name not in OUTPUT_FORMATS]
    if not formats or unknown:
        raise ValueError(
            f"set_config: formats must name one or more of {', '.join(OUTPUT_FORMATS)}, got {value!r}"
        )
    return tuple(dict.fromkeys(formats))


def _text(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"set_config: {key} must be a string, got {value!r}")
    return value
