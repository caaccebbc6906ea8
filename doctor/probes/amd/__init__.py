"""The AMD probe: the GPUs the ROCm runtime will see, their processors, the device files it needs, and the
variables that steer it.

Layers, as in ``doctor/probes/nvidia/``:

- raw sources return data or None and never raise: ``sysfs.py`` (the PCI bus, the KFD topology, /dev/kfd and
  the render nodes, read under the TORCHDOCTOR_SYSROOT root), ``tools.py`` (running rocminfo, amd-smi,
  rocm-smi through the runner);
- ``parsers.py``: pure functions, tested on tests/fixtures/amd/;
- ``probe.py``: ``probe_amd``, which combines them in a documented order of precedence.
"""

from doctor.probes.amd.probe import probe_amd

__all__ = ["probe_amd"]
