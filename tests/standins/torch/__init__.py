"""A stand-in ``torch`` for the smoke-test tests: the API surface torch_child.py uses, nothing more.

Behaviour comes from the JSON file named by ``TD_STANDIN_SCENARIO`` (see tests/test_runtime_probe.py
for the scenarios and where each message text comes from). Tensors are symbolic: they carry a
shape, dtype, device and one number, enough for the child's checks (fill/sum, max rel err) to come
out right, or wrong when the scenario says so. Python 3.8+ (it runs in any target interpreter).

Scenario keys (all optional):
  version, cuda, hip            torch.__version__, torch.version.cuda / .hip
  devices                       [{"name", "capability": [M, m], "total", "free"}] (bytes)
  mps                           torch.backends.mps.is_available()
  arch_list, cudnn, nccl        get_arch_list(), backends.cudnn.version(), cuda.nccl.version()
  available_warning             is_available() warns "CUDA initialization: <text>" and is False
  init_warnings                 warnings issued by torch.cuda.init() (torch's lazy init)
  import_error                  {"type", "message"} raised at import
  exit                          {"op", "code"}: the process exits there without a word (os._exit)
  fail                          {"op", "type", "message"}: raise at an op
  crash                         {"op", "signal", "stderr"}: write stderr, then kill ourselves
  hang                          {"op", "seconds"}: sleep at an op
  wrong                         {"op", "err"}: that op's result is off by err (relative)
  autocast_disabled             dtype names autocast silently ignores (torch warns and computes in fp32)
Ops: import, init, mem_get_info, alloc, matmul, conv, autocast, cudnn_version, sync.
"""

import json
import os
import signal as _signal
import sys
import time
import types
import warnings

_SCENARIO = {}
if os.environ.get("TD_STANDIN_SCENARIO"):
    with open(os.environ["TD_STANDIN_SCENARIO"]) as _f:
        _SCENARIO = json.load(_f)


class AcceleratorError(RuntimeError):
    pass


class OutOfMemoryError(RuntimeError):
    pass


_ERRORS = {
    "RuntimeError": RuntimeError,
    "AssertionError": AssertionError,
    "ImportError": ImportError,
    "OSError": OSError,
    "AcceleratorError": AcceleratorError,
    "OutOfMemoryError": OutOfMemoryError,
}


def _hook(op):
    fail = _SCENARIO.get("fail")
    if fail and fail["op"] == op:
        raise _ERRORS[fail.get("type", "RuntimeError")](fail["message"])
    crash = _SCENARIO.get("crash")
    if crash and crash["op"] == op:
        sys.stderr.write(crash.get("stderr", ""))
        sys.stderr.flush()
        os.kill(os.getpid(), getattr(_signal, crash.get("signal", "SIGSEGV")))
    leave = _SCENARIO.get("exit")
    if leave and leave["op"] == op:
        os._exit(int(leave.get("code", 0)))
    hang = _SCENARIO.get("hang")
    if hang and hang["op"] == op:
        time.sleep(hang.get("seconds", 600))


def _wrong(op):
    wrong = _SCENARIO.get("wrong")
    return float(wrong["err"]) if wrong and wrong["op"] == op else 0.0


if _SCENARIO.get("import_error"):
    _error = _SCENARIO["import_error"]
    raise _ERRORS[_error.get("type", "ImportError")](_error["message"])
_hook("import")

__version__ = _SCENARIO.get("version", "2.6.0+cu124")
version = types.SimpleNamespace(
    __version__=__version__, cuda=_SCENARIO.get("cuda"), hip=_SCENARIO.get("hip"), xpu=None
)
_DEVICES = _SCENARIO.get("devices", [])


class dtype:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name


float32 = dtype("float32")
float64 = dtype("float64")
float16 = dtype("float16")
bfloat16 = dtype("bfloat16")
_autocast = []  # stack of (device_type, dtype)


class Tensor:
    def __init__(self, shape, value=1.0, dtype_=float32, device="cpu"):
        self.shape = tuple(shape)
        self.value = value
        self.dtype = dtype_
        self.device = device

    def _like(self, value=None, **changes):
        t = Tensor(self.shape, self.value if value is None else value, self.dtype, self.device)
        for key, val in changes.items():
            setattr(t, key, val)
        return t

    def numel(self):
        n = 1
        for size in self.shape:
            n *= size
        return n

    def to(self, device):
        return self._like(device=str(device))

    def cpu(self):
        return self.to("cpu")

    def double(self):
        return self._like(dtype=float64)

    def float(self):
        return self._like(dtype=float32)

    def __getitem__(self, item):
        return self._like()

    def __sub__(self, other):
        return self._like(self.value - other.value)

    def __truediv__(self, other):
        return self._like(self.value / other.value)

    def abs(self):
        return self._like(abs(self.value))

    def max(self):
        return self._like(shape=())

    def clamp_min(self, low):
        return self._like(max(self.value, low))

    def sum(self):
        return self._like(self.value * self.numel(), shape=())

    def item(self):
        return self.value


def _on_device(device):
    return str(device) != "cpu"


def manual_seed(seed):
    return None


def get_num_threads():
    return 1


def randn(*shape, **kwargs):
    return Tensor(shape, 1.0, kwargs.get("dtype", float32), str(kwargs.get("device", "cpu")))


def full(shape, value, device="cpu", **kwargs):
    if _on_device(device):
        _hook("alloc")
    return Tensor(shape, float(value), float32, str(device))


def zeros(*shape, **kwargs):
    device = str(kwargs.get("device", "cpu"))
    if _on_device(device):
        _hook("init" if device == "mps" else "alloc")
    return Tensor(shape, 0.0, float32, device)


def matmul(a, b):
    out_dtype = a.dtype
    op = "matmul"
    if _autocast and a.device.split(":")[0] == _autocast[-1][0]:
        out_dtype, op = _autocast[-1][1], "autocast"
        if out_dtype.name in _SCENARIO.get("autocast_disabled", []):
            # torch: "In MPS autocast, but the target dtype is not supported. Disabling autocast."
            warnings.warn(
                "In autocast, but the target dtype is not supported. Disabling autocast.", stacklevel=2
            )
            out_dtype = a.dtype
    if not _on_device(a.device):
        return Tensor((a.shape[0], b.shape[-1]), 1.0, out_dtype, a.device)
    _hook(op)
    return Tensor((a.shape[0], b.shape[-1]), 1.0 + _wrong(op), out_dtype, a.device)


class autocast:
    def __init__(self, device_type, dtype=None):
        self.entry = (device_type, dtype)

    def __enter__(self):
        _autocast.append(self.entry)
        return self

    def __exit__(self, *exc):
        _autocast.pop()
        return False


def _conv2d(x, w, padding=0, **kwargs):
    if _on_device(x.device):
        _hook("conv")
        return Tensor(x.shape, 1.0 + _wrong("conv"), x.dtype, x.device)
    return Tensor(x.shape, 1.0, x.dtype, x.device)


nn = types.SimpleNamespace(functional=types.SimpleNamespace(conv2d=_conv2d))


# --- torch.cuda -------------------------------------------------------------------------------------


def _cuda_is_available():
    if _SCENARIO.get("available_warning"):
        warnings.warn("CUDA initialization: " + _SCENARIO["available_warning"], UserWarning, stacklevel=2)
        return False
    return bool(_DEVICES) and bool(version.cuda or version.hip)


def _cuda_init():
    if not (version.cuda or version.hip):
        raise AssertionError("Torch not compiled with CUDA enabled")
    _hook("init")
    for text in _SCENARIO.get("init_warnings", []):
        warnings.warn(text, UserWarning, stacklevel=2)


def _mem_get_info(index=0):
    _hook("mem_get_info")
    device = _DEVICES[index]
    if device.get("busy"):  # this device alone is held by another process
        raise AcceleratorError("CUDA error: CUDA-capable device(s) is/are busy or unavailable")
    return device.get("free", 1 << 34), device.get("total", 1 << 35)


def _sync(index=None):
    _hook("sync")


cuda = types.SimpleNamespace(
    is_available=_cuda_is_available,
    init=_cuda_init,
    device_count=lambda: len(_DEVICES),
    get_device_name=lambda index=0: _DEVICES[index]["name"],
    get_device_capability=lambda index=0: tuple(_DEVICES[index].get("capability", (8, 0))),
    get_arch_list=lambda: list(_SCENARIO.get("arch_list", [])),
    mem_get_info=_mem_get_info,
    synchronize=_sync,
    is_bf16_supported=lambda: True,
    nccl=types.SimpleNamespace(version=lambda: tuple(_SCENARIO.get("nccl", (2, 21, 5)))),
    OutOfMemoryError=OutOfMemoryError,
)


def _cudnn_version():
    _hook("cudnn_version")
    return _SCENARIO.get("cudnn")


backends = types.SimpleNamespace(
    cudnn=types.SimpleNamespace(version=_cudnn_version, is_available=lambda: True, enabled=True),
    mps=types.SimpleNamespace(is_available=lambda: bool(_SCENARIO.get("mps"))),
    mkldnn=types.SimpleNamespace(is_available=lambda: False),
)
mps = types.SimpleNamespace(synchronize=_sync, recommended_max_memory=lambda: 1 << 34)
