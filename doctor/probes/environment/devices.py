"""The device-selection variables (*_VISIBLE_DEVICES, CUDA_DEVICE_ORDER), recorded raw: the rules parse
them."""

from __future__ import annotations

from collections.abc import Mapping

from doctor.model.environment import VisibleDevices

# The variables recorded, each only when it is set (an empty value is set: it hides every GPU).
VISIBLE_DEVICE_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
)


def probe_visible_devices(env: Mapping[str, str]) -> VisibleDevices:
    return VisibleDevices(**{name: env[name] for name in VISIBLE_DEVICE_VARS if name in env})
