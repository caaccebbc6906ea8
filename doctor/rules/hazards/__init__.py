"""Hazard rules: the environment around torch, beyond version numbers, one module per family.

``containers``, ``resources`` (/dev/shm, CPU quota, memory), ``devices`` (CUDA_VISIBLE_DEVICES),
``libraries`` (library shadowing, CUDA_HOME), ``installs`` (mixed and duplicate installs, interpreter
hygiene) and ``wsl``. Each ``check_*`` is a pure function of the machine's assessment that reads the typed
sections of ``snapshot.environment`` (``doctor/model/environment.py``). A section a snapshot lacks (an
older report, collect_env text) is None: the rule has nothing to say, it never judges a default.
"""

from __future__ import annotations

from doctor.model.i18n import Msg
from doctor.rules import Rule
from doctor.rules.hazards.containers import check_containers
from doctor.rules.hazards.devices import check_visible_devices
from doctor.rules.hazards.installs import check_interpreter_hygiene, check_mixed_installs
from doctor.rules.hazards.libraries import check_library_shadowing
from doctor.rules.hazards.resources import check_cpu_quota, check_memory, check_shm
from doctor.rules.hazards.wsl import check_wsl

RULES = [
    Rule(
        "containers",
        Msg("a container that should have a GPU has one"),
        check_containers,
        (
            "container-no-gpu-access",
            "nvidia-visible-devices-hides-all",
            "nvidia-driver-capabilities-no-compute",
        ),
    ),
    Rule("shm", Msg("/dev/shm is large enough for DataLoader workers"), check_shm, ("shm-too-small",)),
    Rule(
        "cpu-quota",
        Msg("the CPU quota matches the CPUs torch sees"),
        check_cpu_quota,
        ("cpu-quota-low", "cpu-budget"),
    ),
    Rule(
        "memory",
        Msg("RAM and swap fit the GPUs"),
        check_memory,
        ("ram-smaller-than-gpu-memory", "no-swap-small-ram", "low-available-memory"),
    ),
    Rule(
        "visible-devices",
        Msg("CUDA_VISIBLE_DEVICES selects real GPUs"),
        check_visible_devices,
        (
            "cuda-visible-devices-hides-all",
            "cuda-visible-devices-duplicate",
            "cuda-visible-devices-no-match",
            "cuda-visible-devices-subset",
            "cuda-device-order-differs",
        ),
    ),
    Rule(
        "library-shadowing",
        Msg("no other CUDA libraries shadow torch's own"),
        check_library_shadowing,
        ("library-path-shadows-cuda-libs", "cuda-home-version-mismatch"),
    ),
    Rule(
        "mixed-installs",
        Msg("one torch, installed by one package manager"),
        check_mixed_installs,
        (
            "mixed-conda-pip-torch",
            "duplicate-torch-installs",
            "user-site-torch-shadows",
            "conda-cuda-mismatch",
            "interrupted-install-leftovers",
            "pythonpath-torch-shadows",
        ),
    ),
    Rule(
        "interpreter-hygiene",
        Msg("the target Python is a 64-bit, user-owned environment"),
        check_interpreter_hygiene,
        ("python-32-bit", "externally-managed-python", "conda-base-environment", "windows-store-python",
         "windows-long-paths-disabled"),
    ),
    Rule(
        "wsl",
        Msg("WSL2 uses the Windows driver's libraries"),
        check_wsl,
        ("wsl1-no-gpu", "wsl-library-path-order", "wsl-linux-driver-installed"),
    ),
]
