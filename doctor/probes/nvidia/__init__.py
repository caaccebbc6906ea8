"""The NVIDIA probe: driver version, the driver's maximum CUDA, the GPUs, and what is broken.

Layers, as in packaging's ``_manylinux``:

- raw sources return text or an outcome and never raise: ``nvml.py`` (loading and querying NVML),
  ``smi.py`` (finding and running nvidia-smi), ``kernel.py`` (/sys and /proc reads, the PCI scan);
- ``parsers.py``: pure ``parse_*`` / ``classify_*`` functions, tested on tests/fixtures/nvidia/;
- ``probe.py``: ``probe_nvidia``, which combines the sources in a documented order of precedence
  (its docstring) and applies the TORCHDOCTOR_DRIVER_VERSION / _CUDA_DRIVER_VERSION overrides.

pynvml is imported only when NVML is asked (``load_pynvml``), never by importing this package.
"""

from doctor.probes.nvidia.kernel import read_kernel_driver_version, read_pci_nvidia_devices
from doctor.probes.nvidia.nvml import NvmlOutcome, load_pynvml, query_nvml
from doctor.probes.nvidia.parsers import (
    QUERY_FIELDS,
    classify_nvml_error,
    classify_smi_failure,
    is_l4t_version,
    normalise_bus_id,
    parse_compute_caps,
    parse_proc_version,
    parse_smi_banner,
    parse_smi_query,
    parse_sys_module_version,
)
from doctor.probes.nvidia.probe import ENV_CUDA, ENV_DRIVER, probe_nvidia
from doctor.probes.nvidia.smi import COMPUTE_CAP_ARGS, QUERY_ARGS, SmiOutcome, find_nvidia_smi, query_smi

__all__ = [
    "COMPUTE_CAP_ARGS",
    "ENV_CUDA",
    "ENV_DRIVER",
    "QUERY_ARGS",
    "QUERY_FIELDS",
    "NvmlOutcome",
    "SmiOutcome",
    "classify_nvml_error",
    "classify_smi_failure",
    "find_nvidia_smi",
    "is_l4t_version",
    "load_pynvml",
    "normalise_bus_id",
    "parse_compute_caps",
    "parse_proc_version",
    "parse_smi_banner",
    "parse_smi_query",
    "parse_sys_module_version",
    "probe_nvidia",
    "query_nvml",
    "query_smi",
    "read_kernel_driver_version",
    "read_pci_nvidia_devices",
]
