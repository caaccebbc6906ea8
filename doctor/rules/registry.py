"""The list of every rule, in the order they run. Adding a rule is adding it here: a rule module that
fails to import fails loudly, so no rule can vanish without a word."""

from __future__ import annotations

from doctor.rules import apple, dependencies, driver, gpu_arch, hazards, install, rocm, runtime, wanted, xpu

RULES = [
    # The driver, install and GPU checks interleave, in the order every output lists them.
    driver.NVIDIA_STATE, install.TORCH_INSTALLED, install.BUILD_KIND, driver.DRIVER_CUDA, gpu_arch.GPU_ARCH,
    install.COMPANIONS, install.PYTHON, install.TABLE_FRESH, *dependencies.RULES,
    *rocm.RULES, *xpu.RULES, *apple.RULES,
    *wanted.RULES, *runtime.RULES, *hazards.RULES,
]
