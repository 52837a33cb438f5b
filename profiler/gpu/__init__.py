"""GPU and framework work seen by rlprof: NVTX ranges for its blocks
(:mod:`profiler.gpu.nvtx_bridge`), the time blocks take on the device
(:mod:`profiler.gpu.device_time`), PyTorch's operators under the blocks that ran them
(:mod:`profiler.gpu.torch_ops`), PyTorch's autograd ranges inside rlprof's
(:mod:`profiler.gpu.autograd_ranges`) and an Nsight capture around chosen steps
(:mod:`profiler.gpu.capture_range`).

All are optional: nothing here imports ``nvtx`` or ``torch`` until asked to, and asking without
them raises an error that says what to install.
"""

from profiler.gpu.capture_range import CaptureUnavailableError, capture_range, capture_steps
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
