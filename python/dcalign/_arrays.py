"""How dcalign's Python API takes arrays: NumPy arrays and anything np.asarray takes on the host,
any ``__dlpack__`` array (a torch tensor, a CuPy array) through DLPack, arrays in CUDA device
memory aligned where they are, and results returned in the caller's kind of array."""
from __future__ import annotations

import json
from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import _core

# DLPack device types (dlpack.h, DLDeviceType) named in errors.
_DLPACK_DEVICES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal",
                   9: "vpi", 10: "rocm", 11: "rocm_host", 13: "cuda_managed", 14: "oneapi"}


class _Kind:
    """How to hand a NumPy result back in the caller's kind of array: NumPy for NumPy (and
    for lists and other np.asarray inputs), else the producing library's from_dlpack."""

    def __init__(self, from_dlpack: Any = None, library: str = "numpy",
                 gpu: Optional[int] = None) -> None:
        self.from_dlpack = from_dlpack
        self.library = library
        self.gpu = gpu  # the CUDA device the caller's array was on (results go back there)

    def __call__(self, x: Any) -> Any:
        if self.gpu is not None and isinstance(x, np.ndarray):
            x = _core._host_to_device(x, self.gpu)  # one copy to the caller's GPU
        return x if self.from_dlpack is None else self.from_dlpack(x)


def _library_from_dlpack(x: Any) -> Tuple[Any, str]:
    """The from_dlpack of the library whose type x is (torch, cupy, jax.numpy, ...)."""
    import importlib

    top = type(x).__module__.split(".")[0]
    for name in (top, top + ".numpy"):  # jax: jax.numpy.from_dlpack
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        fn = getattr(mod, "from_dlpack", None)
        if callable(fn):
            return fn, top
    return None, top


def _to_numpy(x: Any, what: str) -> Tuple[np.ndarray, "_Kind"]:
    """(array, kind). A NumPy array is used as it is. An object with ``__dlpack__`` on the CPU
    (a PyTorch, CuPy-host, JAX or NumPy array) is viewed through ``np.from_dlpack`` without a
    copy; the result is handed back through its library's from_dlpack, also without a copy
    where that library imports a NumPy array's DLPack capsule (PyTorch, JAX do). An array in
    CUDA device memory (a module with the CUDA backend) is copied to the host once (gathered on
    the device first) and the result copied back to that GPU once. Anything else goes through
    np.asarray. Arrays on other devices are refused with the device named."""
    if isinstance(x, np.ndarray):
        return x, _Kind()
    if hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__"):
        try:
            dev_type, dev_id = x.__dlpack_device__()
        except Exception as e:  # noqa: BLE001  (a producer's own error, reported as such)
            raise ValueError(f"{what}: __dlpack_device__() failed: {e}") from e
        dev_type = int(dev_type)
        if dev_type == 2 and _core._built_with_cuda:  # CUDA: one copy each way
            if hasattr(x, "requires_grad") and getattr(x, "requires_grad"):
                x = x.detach()
            fn, library = _library_from_dlpack(x)
            try:
                capsule = x.__dlpack__(stream=1)  # the producer's work first (legacy stream)
            except (TypeError, BufferError, RuntimeError) as e:
                raise ValueError(f"{what}: cannot read the {library} array through DLPack: "
                                 f"{e}") from e
            return _core._dlpack_to_host(capsule, what), _Kind(fn, library, gpu=int(dev_id))
        if dev_type not in (1, 3, 13):  # CPU, CUDA host (pinned), CUDA managed: host-readable
            name = _DLPACK_DEVICES.get(dev_type, f"device type {dev_type}")
            raise ValueError(
                f"{what}: array on {name}:{dev_id}; the Python bindings compute on the host and "
                "take host arrays (move it to the CPU first, e.g. .cpu() or np.asarray)")
        if hasattr(x, "requires_grad") and getattr(x, "requires_grad"):
            x = x.detach()  # PyTorch refuses to export a tensor that requires grad
        fn, library = _library_from_dlpack(x)
        try:
            arr = np.from_dlpack(x)
        except (TypeError, BufferError, RuntimeError) as e:
            raise ValueError(f"{what}: cannot read the {library} array through DLPack: {e}") from e
        return arr, _Kind(fn, library)
    return np.asarray(x), _Kind()


def _gpu_array(x: Any) -> bool:
    """Whether x is an array in CUDA device (or managed) memory, seen through DLPack."""
    if isinstance(x, np.ndarray) or not (hasattr(x, "__dlpack__") and
                                         hasattr(x, "__dlpack_device__")):
        return False
    try:
        dev_type = int(x.__dlpack_device__()[0])
    except Exception:  # noqa: BLE001  (_to_numpy reports the producer's error)
        return False
    return dev_type in (2, 13)


def _align_on_device(anchors: Any, method: str, options: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
    """align() for anchors in GPU memory: the CUDA backend reads them there (gathered once on the
    device into dcalign's layout unless they have it) and G stays there, handed back through the
    caller's from_dlpack without a copy. The producer is given DLPack stream 1 (the legacy
    default stream), on which the backend runs, so its pending work on the array comes first."""
    dev_type, dev_id = anchors.__dlpack_device__()
    where = f"{_DLPACK_DEVICES.get(int(dev_type), dev_type)}:{dev_id}"
    if not _core._built_with_cuda:
        raise ValueError(f"anchors: array on {where}, but this dcalign module was built without "
                         "its CUDA backend (pip install . where nvcc is found); move it to the "
                         "host first (e.g. .cpu())")
    if options.get("device", "cuda") != "cuda":
        raise ValueError(f"anchors: array on {where} but device={options['device']!r}; leave "
                         "device out (the array's device is used) or move the array")
    if not isinstance(method, str):
        raise TypeError(f"method must be a str, got {type(method).__name__}")
    if hasattr(anchors, "requires_grad") and getattr(anchors, "requires_grad"):
        anchors = anchors.detach()  # PyTorch refuses to export a tensor that requires grad
    fn, library = _library_from_dlpack(anchors)
    opts = dict(options)
    opts.pop("device", None)
    try:
        capsule = anchors.__dlpack__(stream=1)
    except (TypeError, BufferError, RuntimeError) as e:
        raise ValueError(f"anchors: cannot read the {library} array through DLPack: {e}") from e
    G, report_json, copied = _core._align_dlpack(capsule, method, opts)
    report = json.loads(report_json)
    report["input_copied"] = bool(copied)
    return (G if fn is None else fn(G)), report


def _precision(x: np.ndarray, what: str) -> str:
    if x.dtype.kind == "f" and x.dtype.itemsize == 8:
        return "f64"
    if x.dtype.kind == "f" and x.dtype.itemsize == 4:
        return "f32"
    raise ValueError(f"{what} must be float32 or float64, got dtype {x.dtype}")


def _float_dtype(x: np.ndarray) -> str:
    """User-side functions: float32 stays float32, everything else is computed in float64."""
    return "f32" if x.dtype == np.float32 else "f64"


def _dc(x: np.ndarray) -> bool:
    if x.dtype == np.float64:
        return _core._dc_layout_f64(x)
    if x.dtype == np.float32:
        return _core._dc_layout_f32(x)
    return False
