"""torch's real message texts, for the stand-in torch and the runtime rule tests.

Where each comes from is noted beside it: the torch 2.13.0 / 2.14.1 wheels' Python files, torch's C++
sources (pytorch/pytorch c10/cuda/) and issue threads. None was recorded on live NVIDIA hardware here;
the texts are torch's own format strings filled in as torch would.
"""

# `_check_cubins` (torch/cuda/__init__.py, identical in 2.13.0 and 2.14.1): the classic RTX 50xx (sm_120)
# on a cu126 build case, with the cu126 build's arch list.
ARCH_WARNING_OLD = (
    "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
    "installation.\n"
    "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
    "If you want to use the NVIDIA GeForce RTX 5090 GPU with PyTorch, please check the instructions at "
    "https://pytorch.org/get-started/locally/\n"
)
ARCH_LIST_CU126 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]

# `_check_capability` (torch/cuda/__init__.py, 2.13/2.14 text): a Pascal card on a cu130 build.
ARCH_WARNING_NEW = (
    "Found GPU0 NVIDIA GeForce GTX 1080 which is of compute capability (CC) 6.1.\n"
    "The following list shows the CCs this version of PyTorch was built for and the hardware CCs it "
    "supports:\n"
    "- 7.5 which supports hardware CC >=7.5,<8.0\n"
    "- 8.0 which supports hardware CC >=8.0,<9.0 except {8.7}\n"
    "- 8.6 which supports hardware CC >=8.6,<9.0 except {8.7}\n"
    "- 9.0 which supports hardware CC >=9.0,<10.0\n"
    "- 10.0 which supports hardware CC >=10.0,<11.0\n"
    "- 12.0 which supports hardware CC >=12.0,<13.0\n"
    "Your installed torch==2.13.0+cu130 does not include kernels for this GPU. Reinstall the same version "
    "against a CUDA build that does, e.g.:\n"
    "  For CUDA 12.6 use pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126\n"
)

# The kernel launch that follows, as torch ≈2.1–2.6 words it (c10/cuda/CUDAException.cpp,
# pytorch#100691), raised as torch.AcceleratorError in current torch.
NO_KERNEL_IMAGE = (
    "CUDA error: no kernel image is available for execution on the device\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"
)

# ROCm's counterpart (pytorch#132570), in the hipified wording of the lines above.
HIP_INVALID_DEVICE_FUNCTION = (
    "HIP error: invalid device function\n"
    "HIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.\n"
    "For debugging consider passing AMD_SERIALIZE_KERNEL=3\n"
    "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.\n"
)

# c10/cuda/CUDAFunctions.cpp; 12040 is the ComfyUI log's value (CUDA 12.4).
DRIVER_TOO_OLD = (
    "The NVIDIA driver on your system is too old (found version 12040). Please update your GPU driver by "
    "downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
    "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your "
    "version of the CUDA driver."
)
NO_DRIVER = (
    "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver "
    "from http://www.nvidia.com/Download/index.aspx"
)

# torch/cuda/__init__.py `_lazy_init` (read in the 2.13.0 wheel too).
NOT_COMPILED = "Torch not compiled with CUDA enabled"

# cudaErrorDevicesUnavailable (46) in current torch's wording (c10/cuda/CUDAException.cpp).
BUSY = (
    "CUDA error: CUDA-capable device(s) is/are busy or unavailable\n"
    "Search for `cudaErrorDevicesUnavailable' in "
    "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
    "For more detailed error information, run with CUDA_LOG_FILE=stderr\n"
)

# cudaErrorSystemDriverMismatch (803) from cudaGetDeviceCount, in c10/cuda/CUDAFunctions.cpp's words
# (pytorch/pytorch@01a6a16d9bb6424c034f5623c46bfd08ec21613b) with the CUDA runtime's error string.
DRIVER_MISMATCH_803 = (
    "Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
    "NumCudaDevices() that might have already set an error? Error 803: system has unsupported display "
    "driver / cuda driver combination"
)

# The widely reported cuDNN handle failure (torch's "cuDNN error: " prefix + cudnnGetErrorString).
CUDNN_NOT_INITIALIZED = "cuDNN error: CUDNN_STATUS_NOT_INITIALIZED"

# torch/backends/cudnn/__init__.py (2.13.0 wheel; note the double space torch has).
CUDNN_INCOMPATIBLE = (
    "cuDNN version incompatibility: PyTorch was compiled  against (9, 10, 2) but found runtime version "
    "(9, 1, 0). PyTorch already comes bundled with cuDNN. One option to resolving this error is to ensure "
    "PyTorch can find the bundled cuDNN. Looks like your LD_LIBRARY_PATH contains incompatible version of "
    "cudnn. Please either remove it from the path or install cudnn (9, 10, 2)"
)

# c10/cuda/CUDACachingAllocator.cpp's out-of-memory format (2.x), filled in for a GPU another
# process has filled.
OUT_OF_MEMORY = (
    "CUDA out of memory. Tried to allocate 16.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which "
    "3.06 MiB is free. Process 4242 has 79.13 GiB memory in use. Of the allocated memory 0 bytes is "
    "allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. If reserved but unallocated "
    "memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)

# pytorch#138460: a system libnvJitLink on LD_LIBRARY_PATH shadowing the pip one.
UNDEFINED_NVJITLINK = (
    "/venv/lib/python3.11/site-packages/torch/lib/../../nvidia/cusparse/lib/libcusparse.so.12: "
    "undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12"
)

# The cuDNN 8 lazy-load failure that ends in abort() (widely reported with torch 2.0/2.1 wheels).
CUDNN_LOAD_ABORT = (
    "Could not load library libcudnn_cnn_infer.so.8. Error: libnvrtc.so: cannot open shared object file: "
    "No such file or directory\n"
)

# CUDA's cudaErrorIllegalAddress (700): a failure torchdoctor does not map to a specific cause.
ILLEGAL_ADDRESS = (
    "CUDA error: an illegal memory access was encountered\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.\n"
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
)
