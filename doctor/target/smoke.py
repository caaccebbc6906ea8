"""The torch child: imports torch in the *target* interpreter and, in smoke mode, computes on each device.

Run by ``doctor.probes.runtime`` as a separate process, never imported by torchdoctor itself::

    python torch_child.py --mode import|smoke --device all|N --budget SECONDS

Stdlib only and Python 3.6+ (it runs in whatever interpreter the user's torch lives in).

It reports as it goes, one JSON object per line on stdout, so that a crash or a hang still leaves
the evidence gathered so far:

    {"running": {"name": ..., "device": ...}}    before each step: a hang or crash names the step
    {"step": {"name", "status", "seconds", "message", "device", "data"}}    after each step
    {"facts": {...}}                              TorchRuntime fields as they become known (merged)
    {"warnings": [...]}                           warnings captured during the last step
    {"result": {"status": ..., "seconds": ...}}  the last line; absent when the child died

Anything torch or its C libraries print goes to stderr: file descriptor 1 is pointed at 2 first.
"""

import os  # already loaded by site.py: importing it cannot pick up a stray file from our folder
import sys

# Our own folder comes first on sys.path; nothing in it may shadow torch or the stdlib.
# realpath on both sides: run through a symlink, sys.path[0] is the resolved folder, and our
# nvidia.py must never shadow the nvidia package of the CUDA wheels.
_HERE = os.path.dirname(os.path.realpath(__file__))
if sys.path and os.path.realpath(sys.path[0] or os.curdir) == _HERE:
    del sys.path[0]

import argparse  # noqa: E402
import faulthandler  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

MAX_TEXT = 4000  # characters kept of one exception message or warning
MAX_WARNINGS = 50

# Workload sizes: about 2 s on a GPU, well under 1 s on a CPU.
GPU_MATMUL_N = 4096
CPU_MATMUL_N = 512
CHECK_ROWS = 64  # rows of the GPU product checked against a float64 CPU product
AUTOCAST_N = 256
TIMED_SECONDS = 0.25  # how long the throughput measurement runs, at most
MAX_TIMED_RUNS = 20
# max |device - cpu float64| / max |cpu float64|. Devices may use TF32 for fp32 work, hence 1e-2.
TOLERANCE = {"gpu": 1e-2, "cpu": 1e-4, "float16": 1e-2, "bfloat16": 5e-2}
DEVICE_STEPS = ("alloc", "matmul", "conv", "autocast-fp16", "autocast-bf16", "sync")


class Skip(Exception):
    """A step that does not apply here (the message says why)."""


class WrongResult(Exception):
    """The device computed something other than the CPU did."""

    def __init__(self, message, data):
        Exception.__init__(self, message)
        self.data = data


class Channel:
    """The JSON-lines channel to the parent, on the original stdout."""

    def __init__(self):
        self._out = sys.stdout
        try:
            sys.stdout.flush()
            self._out = os.fdopen(os.dup(1), "w")
            os.dup2(2, 1)  # C libraries that printf() now write to stderr
        except (OSError, ValueError, AttributeError):
            pass
        sys.stdout = sys.stderr

    def send(self, key, value):
        line = json.dumps({key: _clean(value)}, allow_nan=False, sort_keys=True)
        self._out.write(line + "\n")
        self._out.flush()


def _clean(value):
    """JSON-safe copy: non-finite floats and unknown objects become strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def _describe(exc):
    text = "%s: %s" % (type(exc).__name__, exc)
    return text[:MAX_TEXT]


class Smoke:
    """Runs steps one at a time, timing each, within the overall budget."""

    def __init__(self, channel, budget, warning_log):
        self.channel = channel
        self.start = time.perf_counter()
        self.budget = budget
        self.failed = 0  # steps that failed
        self._warning_log = warning_log
        self._warnings_sent = 0
        self._seen = set()

    def elapsed(self):
        return time.perf_counter() - self.start

    def step(self, name, device, func):
        """Run ``func() -> (message, data)`` as one step; True when it passed."""
        if self.elapsed() >= self.budget:
            self._send_step(name, device, "skipped", None, "skipped: the time budget was spent", {})
            return False
        self.channel.send("running", {"name": name, "device": device})
        began = time.perf_counter()
        data = {}
        try:
            message, data = func()
            status = "ok"
        except Skip as exc:
            status, message = "skipped", "skipped: %s" % exc
        except WrongResult as exc:
            status, message, data = "failed", str(exc)[:MAX_TEXT], dict(exc.data, wrong_result=True)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: B036 - SystemExit from a broken torch is evidence too
            status, message, data = "failed", _describe(exc), {"exception": type(exc).__name__}
        self._send_step(name, device, status, time.perf_counter() - began, message, data)
        return status == "ok"

    def skip(self, name, device, why):
        self._send_step(name, device, "skipped", None, "skipped: %s" % why, {})

    def fail(self, name, device, message):
        self._send_step(name, device, "failed", None, message, {})

    def _send_step(self, name, device, status, seconds, message, data):
        if status == "failed":
            self.failed += 1
        step = {"name": name, "status": status, "message": message, "device": device, "data": data}
        step["seconds"] = None if seconds is None else round(seconds, 4)
        self.channel.send("step", step)
        self._send_new_warnings()

    def _send_new_warnings(self):
        fresh = []
        for record in self._warning_log[self._warnings_sent :]:
            text = str(record.message)[:MAX_TEXT]
            if text not in self._seen and len(self._seen) < MAX_WARNINGS:
                self._seen.add(text)
                fresh.append(text)
        self._warnings_sent = len(self._warning_log)
        if fresh:
            self.channel.send("warnings", fresh)


# --- the backends -------------------------------------------------------------------------------


def _try(func, default=None):
    try:
        return func()
    except Exception:
        return default


def choose_backend(torch, explicit_device):
    version = getattr(torch, "version", None)
    if getattr(version, "hip", None):
        return "rocm"
    if getattr(version, "cuda", None):
        return "cuda"
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and _try(xpu.is_available, False):
        return "xpu"
    mps = getattr(getattr(torch, "backends", None), "mps", None)
    if mps is not None and _try(mps.is_available, False):
        return "mps"
    if explicit_device is not None:
        # A device was asked for by number: let torch say why there is none ("Torch not compiled
        # with CUDA enabled" on a CPU build) rather than quietly testing the CPU.
        return "cuda"
    return "cpu"


def _mib(nbytes):
    return int(nbytes) // (1024 * 1024)


def init_backend(torch, backend, explicit_device, facts):
    """Initialise the backend and list its devices into ``facts``; returns the devices to test."""
    facts["cuda_available"] = _try(torch.cuda.is_available)  # False on CPU builds; never raises
    if backend in ("cuda", "rocm"):
        facts["arch_list"] = list(_try(torch.cuda.get_arch_list, []) or [])
        torch.cuda.init()
        count = torch.cuda.device_count()
        facts["device_count"] = count
        devices = _pick(explicit_device, count)
        usable, problems = [], []
        for index in devices:
            device = {"index": index}
            facts["devices"].append(device)
            try:  # one busy or broken GPU must not hide the others
                device["name"] = str(torch.cuda.get_device_name(index))
                major, minor = torch.cuda.get_device_capability(index)
                device["capability"] = "%d.%d" % (major, minor)
                free, total = torch.cuda.mem_get_info(index)  # creates the context: busy/OOM show here
                device["free_memory_mib"], device["total_memory_mib"] = _mib(free), _mib(total)
                usable.append(index)
            except Exception as exc:
                device["error"] = _describe(exc)
                problems.append("device %d: %s" % (index, device["error"]))
        if problems and not usable:
            raise RuntimeError("; ".join(problems))
        return usable
    if backend == "xpu":
        init = getattr(torch.xpu, "init", None)
        if init is not None:
            init()
        count = torch.xpu.device_count()
        facts["device_count"] = count
        devices = _pick(explicit_device, count)
        for index in devices:
            device = {"index": index, "name": str(torch.xpu.get_device_name(index))}
            facts["devices"].append(device)
            mem_get_info = getattr(torch.xpu, "mem_get_info", None)
            if mem_get_info is not None:
                free, total = mem_get_info(index)
                device["free_memory_mib"], device["total_memory_mib"] = _mib(free), _mib(total)
        return devices
    if backend == "mps":
        torch.zeros(1, device="mps")
        facts["device_count"] = 1
        device = {"index": 0, "name": "Apple MPS"}
        total = _try(lambda: torch.mps.recommended_max_memory())
        if total:
            device["total_memory_mib"] = _mib(total)
        facts["devices"].append(device)
        return [0]
    facts["device_count"] = 0
    return [None]


def _pick(explicit_device, count):
    if explicit_device is None:
        if count == 0:
            raise RuntimeError("torch sees no device (device_count() is 0)")
        return list(range(count))
    if explicit_device >= count:
        raise RuntimeError("device %d is not visible: torch sees %d device(s)" % (explicit_device, count))
    return [explicit_device]


def read_versions(torch, backend, facts):
    data = {"torch": facts.get("torch_version")}
    version = getattr(torch, "version", None)
    data["cuda_runtime"] = getattr(version, "cuda", None)
    data["hip"] = getattr(version, "hip", None)
    cudnn = getattr(getattr(torch, "backends", None), "cudnn", None)
    # cudnn.version() raises on a cuDNN mismatch ("cuDNN version incompatibility"): evidence, not noise.
    data["cudnn"] = cudnn.version() if cudnn is not None else None
    facts["cudnn_version"] = data["cudnn"] if isinstance(data["cudnn"], int) else None
    mps = getattr(getattr(torch, "backends", None), "mps", None)
    data["mps_available"] = _try(mps.is_available) if mps is not None else None
    xpu = getattr(torch, "xpu", None)
    data["xpu_available"] = _try(xpu.is_available) if xpu is not None else None
    if backend in ("cuda", "rocm"):
        try:
            nccl = torch.cuda.nccl.version()
            if isinstance(nccl, tuple):
                text = ".".join(str(part) for part in nccl)
            elif isinstance(nccl, int):  # torch < 1.13: an int, 2708 = 2.7.8, 21903 = 2.19.3
                major, minor, patch = ((nccl // 10000, nccl // 100 % 100, nccl % 100) if nccl >= 10000
                                       else (nccl // 1000, nccl // 100 % 10, nccl % 100))
                text = "%d.%d.%d" % (major, minor, patch)
            else:
                text = str(nccl)
            data["nccl"] = facts["nccl_version"] = text
        except Exception as exc:  # NCCL is absent from some builds (Windows): not a failure
            data["nccl_error"] = _describe(exc)
    names = ("torch", "cuda_runtime", "hip", "cudnn", "nccl")
    return ", ".join("%s %s" % (key, data[key]) for key in names if data.get(key) is not None), data


# --- the device workload --------------------------------------------------------------------------


class Device:
    def __init__(self, torch, backend, index, capability):
        self.torch = torch
        self.backend = backend
        self.index = index
        self.capability = capability
        if backend in ("cuda", "rocm"):
            self.name = "cuda:%d" % index
        elif backend == "xpu":
            self.name = "xpu:%d" % index
        else:
            self.name = backend  # "mps" or "cpu"
        self.kind = self.name.split(":")[0]
        self.is_cpu = backend == "cpu"

    def sync(self):
        torch = self.torch
        if self.kind == "cuda":
            torch.cuda.synchronize(self.index)
        elif self.kind == "xpu":
            torch.xpu.synchronize(self.index)
        elif self.kind == "mps":
            torch.mps.synchronize()

    def memory(self):
        torch = self.torch
        if self.kind == "cuda":
            free, total = torch.cuda.mem_get_info(self.index)
        elif self.kind == "xpu" and getattr(torch.xpu, "mem_get_info", None) is not None:
            free, total = torch.xpu.mem_get_info(self.index)
        else:
            return {}
        return {"free_mib": _mib(free), "total_mib": _mib(total)}


def _rel_err(got, ref):
    """max |got - ref| / max |ref|, as a Python float."""
    return float(((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item())


def _check(what, err, tolerance, data):
    data["max_rel_err"] = err
    data["tolerance"] = tolerance
    if not math.isfinite(err) or err > tolerance:
        raise WrongResult(
            "%s differs from the CPU float64 result: max rel err %s > %g" % (what, _fmt(err), tolerance), data
        )


def _fmt(err):
    return "%.2e" % err if math.isfinite(err) else str(err)


def step_alloc(dev):
    torch = dev.torch
    rows, cols = 1024, 4096  # 16 MiB of float32
    x = torch.full((rows, cols), 1.0, device=dev.name)
    total = float(x.sum().item())
    data = {"mib": 16}
    data.update(dev.memory())
    if total != rows * cols:
        raise WrongResult("a tensor filled with 1.0 sums to %r, not %d" % (total, rows * cols), data)
    message = "16 MiB filled and read back"
    if "free_mib" in data:
        message += "; %d of %d MiB free" % (data["free_mib"], data["total_mib"])
    return message, data


def step_matmul(dev):
    torch = dev.torch
    n = CPU_MATMUL_N if dev.is_cpu else GPU_MATMUL_N
    rows = n if dev.is_cpu else CHECK_ROWS
    tolerance = TOLERANCE["cpu" if dev.is_cpu else "gpu"]
    torch.manual_seed(1234)
    a, b = torch.randn(n, n), torch.randn(n, n)
    da, db = a.to(dev.name), b.to(dev.name)
    c = torch.matmul(da, db)  # warm-up: library handles, kernel selection
    dev.sync()
    runs, began = 0, time.perf_counter()
    while runs < MAX_TIMED_RUNS and (runs < 2 or time.perf_counter() - began < TIMED_SECONDS):
        c = torch.matmul(da, db)
        runs += 1
        if runs <= 2 or runs % 4 == 0:
            dev.sync()  # only so that the loop's clock reading means something
    dev.sync()
    seconds = time.perf_counter() - began
    tflops = 2.0 * n**3 * runs / seconds / 1e12 if seconds > 0 else None
    data = {"n": n, "dtype": "float32", "runs": runs, "tflops": tflops, "checked_rows": rows}
    ref = torch.matmul(a[:rows].double(), b.double())
    _check("%dx%d float32 matmul" % (n, n), _rel_err(c[:rows].to("cpu").double(), ref), tolerance, data)
    message = "%dx%d float32: %s TFLOP/s over %d runs; max rel err %s <= %g vs CPU float64" % (
        n,
        n,
        "%.2f" % tflops if tflops is not None else "?",
        runs,
        _fmt(data["max_rel_err"]),
        tolerance,
    )
    return message, data


def _conv_engine(dev):
    torch = dev.torch
    if dev.backend == "rocm":
        return "MIOpen"
    if dev.kind == "cuda":
        cudnn = torch.backends.cudnn
        if _try(cudnn.is_available, False) and cudnn.enabled:
            return "cuDNN %s" % _try(cudnn.version)
        return "native CUDA (cuDNN off)"
    if dev.is_cpu:
        mkldnn = getattr(torch.backends, "mkldnn", None)
        return "oneDNN" if mkldnn is not None and _try(mkldnn.is_available, False) else "native CPU"
    return dev.kind.upper()


def step_conv(dev):
    torch = dev.torch
    functional = torch.nn.functional
    tolerance = TOLERANCE["cpu" if dev.is_cpu else "gpu"]
    torch.manual_seed(4321)
    x, w = torch.randn(4, 32, 32, 32), torch.randn(32, 32, 3, 3)
    y = functional.conv2d(x.to(dev.name), w.to(dev.name), padding=1)
    dev.sync()
    ref = functional.conv2d(x.double(), w.double(), padding=1)
    data = {"engine": _conv_engine(dev), "input": [4, 32, 32, 32], "kernel": [32, 32, 3, 3]}
    _check("conv2d", _rel_err(y.to("cpu").double(), ref), tolerance, data)
    return "conv2d 4x32x32x32 * 32x32x3x3 through %s; max rel err %s <= %g" % (
        data["engine"],
        _fmt(data["max_rel_err"]),
        tolerance,
    ), data


def _autocast_support(dev, dtype_name):
    """None when autocast in this dtype should work here, else why not."""
    if dtype_name == "bfloat16" and dev.backend == "cuda" and dev.capability is not None:
        if tuple(dev.capability) < (8, 0):
            return "bfloat16 needs compute capability 8.0 or newer (this device: %d.%d)" % tuple(
                dev.capability
            )
    if dtype_name == "bfloat16" and dev.backend == "rocm":
        if not _try(dev.torch.cuda.is_bf16_supported, True):
            return "torch.cuda.is_bf16_supported() is False for this device"
    return None


def step_autocast(dev, dtype_name):
    why_not = _autocast_support(dev, dtype_name)
    if why_not:
        raise Skip(why_not)
    torch = dev.torch
    dtype = getattr(torch, dtype_name)
    tolerance = TOLERANCE[dtype_name]
    torch.manual_seed(99)
    a, b = torch.randn(AUTOCAST_N, AUTOCAST_N), torch.randn(AUTOCAST_N, AUTOCAST_N)
    da, db = a.to(dev.name), b.to(dev.name)
    try:
        context = torch.autocast(device_type=dev.kind, dtype=dtype)
    except (RuntimeError, ValueError) as exc:  # older torch: "unsupported autocast device_type"
        if "support" in str(exc):
            raise Skip("this torch has no %s autocast on %s (%s)" % (dtype_name, dev.kind, exc)) from None
        raise
    with context:
        c = torch.matmul(da, db)
    dev.sync()
    data = {"dtype": dtype_name, "n": AUTOCAST_N}
    if c.dtype == torch.float32:
        # torch warns "... the target dtype is not supported. Disabling autocast." and computes in fp32
        raise Skip("torch disabled %s autocast on %s (dtype not supported there)" % (dtype_name, dev.kind))
    if c.dtype != dtype:
        raise WrongResult("autocast matmul produced %s, not %s" % (c.dtype, dtype_name), data)
    ref = torch.matmul(a.double(), b.double())
    _check("%s autocast matmul" % dtype_name, _rel_err(c.to("cpu").double(), ref), tolerance, data)
    return "%s matmul under autocast; max rel err %s <= %g" % (
        dtype_name,
        _fmt(data["max_rel_err"]),
        tolerance,
    ), data


def step_sync(dev):
    dev.sync()
    return "synchronised", {}


# --- main -----------------------------------------------------------------------------------------


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="torch_child")
    parser.add_argument("--mode", choices=("import", "smoke"), default="import")
    parser.add_argument("--device", default="all")
    parser.add_argument("--budget", type=float, default=55.0)
    args = parser.parse_args(argv)
    if args.device == "all":
        args.device = None
    else:
        try:
            args.device = int(args.device)
        except ValueError:
            parser.error("--device must be 'all' or a device number")
    return args


def run(args, channel, warning_log):
    smoke = Smoke(channel, args.budget, warning_log)
    facts = {"devices": []}
    box = {}

    def do_import():
        import torch

        if getattr(torch, "__file__", None) is None:  # a folder without __init__.py: a namespace package
            raise ImportError("'torch' is a folder without __init__.py at %s: a leftover of an uninstall or "
                              "a broken install" % ", ".join(getattr(torch, "__path__", [])))
        box["torch"] = torch
        version = getattr(torch, "version", None)
        facts["torch_version"] = str(getattr(torch, "__version__", "")) or None
        facts["cuda_version"] = getattr(version, "cuda", None)
        facts["hip_version"] = getattr(version, "hip", None)
        channel.send("facts", facts)
        return "torch %s from %s" % (facts["torch_version"], os.path.dirname(torch.__file__ or "?")), {}

    if not smoke.step("import", None, do_import):
        channel.send("result", {"status": "import-error", "seconds": smoke.elapsed()})
        return
    torch = box["torch"]

    backend = choose_backend(torch, args.device)
    facts["backend"] = backend
    devices = []

    def do_init():
        try:
            devices.extend(init_backend(torch, backend, args.device, facts))
        finally:
            channel.send("facts", facts)
        if backend == "cpu":
            threads = _try(torch.get_num_threads)
            return "no accelerator: testing on the CPU (%s threads)" % threads, {"threads": threads}
        return "%s: %d device(s)" % (backend, len(facts["devices"])), {"backend": backend}

    initialised = smoke.step("init", None, do_init)
    for device in facts["devices"]:
        if initialised and device.get("error"):  # the others are tested; this one failed at its start
            smoke.fail("init", device["index"], device["error"])

    def do_versions():
        try:
            return read_versions(torch, backend, facts)
        finally:
            channel.send("facts", facts)

    smoke.step("versions", None, do_versions)

    if args.mode == "smoke":
        if not initialised:
            for name in DEVICE_STEPS:
                smoke.skip(name, None, "the %s backend did not initialise" % backend)
        for index in devices:
            capability = None
            for device in facts["devices"]:
                if device.get("index") == index and device.get("capability"):
                    capability = tuple(int(part) for part in device["capability"].split("."))
            run_device(smoke, Device(torch, backend, index, capability))

    # "ok": the child ran to the end. Failed steps are in the steps (and counted here).
    channel.send("result", {"status": "ok", "seconds": smoke.elapsed(), "failed_steps": smoke.failed})


def run_device(smoke, dev):
    index = dev.index
    if not smoke.step("alloc", index, lambda: step_alloc(dev)):
        for name in DEVICE_STEPS[1:]:
            smoke.skip(name, index, "allocating on the device failed")
        return
    smoke.step("matmul", index, lambda: step_matmul(dev))
    smoke.step("conv", index, lambda: step_conv(dev))
    smoke.step("autocast-fp16", index, lambda: step_autocast(dev, "float16"))
    smoke.step("autocast-bf16", index, lambda: step_autocast(dev, "bfloat16"))
    if not dev.is_cpu:
        smoke.step("sync", index, lambda: step_sync(dev))


def main(argv=None):
    args = parse_args(argv)
    channel = Channel()
    faulthandler.enable()  # a segfault prints the Python stack to stderr before the process dies
    with warnings.catch_warnings(record=True) as warning_log:
        warnings.simplefilter("always")
        run(args, channel, warning_log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
