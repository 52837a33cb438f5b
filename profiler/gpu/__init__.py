"""GPU and framework work seen by rlprof: NVTX ranges for its blocks
(:mod:`profiler.gpu.nvtx_bridge`), the time blocks take on the device
(:mod:`profiler.gpu.device_time`), PyTorch's operators under the blocks that ran them
(:mod:`profiler.gpu.torch_ops`), PyTorch's autograd ranges inside rlprof's
(:mod:`profiler.gpu.autograd_ranges`) and an Nsight capture around chosen steps
(:mod:`profiler.gpu.capture_range`).

All are optional: nothing here imports ``nvtx`` or ``torch`` until asked to, and asking without
them raises an error that says what to install.
"""

import importlib
from typing import TYPE_CHECKING

from profiler.gpu import device_memory  # noqa: F401 - GPU memory at every memory sample
from profiler.gpu.device_time import (  # hierarchical_timer(device=...) works after import profiler
    DeviceEvents,
    DeviceTimingUnavailableError,
    device_unavailable_reason,
    set_default_device,
    set_device_events,
)

if TYPE_CHECKING:  # for type checkers and readers: where each name comes from
    from profiler.gpu.capture_range import CaptureUnavailableError, capture_range, capture_steps
    from profiler.gpu.nvtx_bridge import (
        DOMAIN_NAME,
        NvtxBackend,
        NvtxSettings,
        NvtxUnavailableError,
        apply_nvtx,
        emit_nvtx,
        is_emitting,
        nvtx_settings,
    )

# The NVTX bridge (with PyTorch's autograd ranges and operators behind it) and the Nsight capture
# are imported when one of their names is first asked for (PEP 562): ``import profiler`` reaches
# this package for the GPU memory and device time above, and ``rlprof run``'s trainer and every env
# worker would otherwise import the operators' recording too, though few runs ever use it.
_HOMES = {
    "CaptureUnavailableError": "profiler.gpu.capture_range",
    "capture_range": "profiler.gpu.capture_range",
    "capture_steps": "profiler.gpu.capture_range",
    "DOMAIN_NAME": "profiler.gpu.nvtx_bridge",
    "NvtxBackend": "profiler.gpu.nvtx_bridge",
    "NvtxSettings": "profiler.gpu.nvtx_bridge",
    "NvtxUnavailableError": "profiler.gpu.nvtx_bridge",
    "apply_nvtx": "profiler.gpu.nvtx_bridge",
    "emit_nvtx": "profiler.gpu.nvtx_bridge",
    "is_emitting": "profiler.gpu.nvtx_bridge",
    "nvtx_settings": "profiler.gpu.nvtx_bridge",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:  # a submodule not imported yet: ``from profiler.gpu import torch_ops`` imports it
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # asked once: later lookups find it without coming here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = [
    "CaptureUnavailableError",
    "DOMAIN_NAME",
    "DeviceEvents",
    "DeviceTimingUnavailableError",
    "NvtxBackend",
    "NvtxSettings",
    "NvtxUnavailableError",
    "apply_nvtx",
    "capture_range",
    "capture_steps",
    "emit_nvtx",
    "is_emitting",
    "nvtx_settings",
    "device_unavailable_reason",
    "set_default_device",
    "set_device_events",
]
