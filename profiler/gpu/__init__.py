"""GPU and framework work seen by rlprof: NVTX ranges for its blocks
(:mod:`profiler.gpu.nvtx_bridge`), the time blocks take on the device
(:mod:`profiler.gpu.device_time`) and PyTorch's operators under the blocks that ran them
(:mod:`profiler.gpu.torch_ops`).

All are optional: nothing here imports ``nvtx`` or ``torch`` until asked to, and asking without
them raises an error that says what to install.
"""

from profiler.gpu import device_memory  # noqa: F401 - GPU memory at every memory sample
from profiler.gpu.device_time import (
    DeviceEvents,
    DeviceTimingUnavailableError,
    device_unavailable_reason,
    set_default_device,
    set_device_events,
)
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

__all__ = [
    "DOMAIN_NAME",
    "DeviceEvents",
    "DeviceTimingUnavailableError",
    "NvtxBackend",
    "NvtxSettings",
    "NvtxUnavailableError",
    "apply_nvtx",
    "emit_nvtx",
    "is_emitting",
    "nvtx_settings",
    "device_unavailable_reason",
    "set_default_device",
    "set_device_events",
]
