"""A few NVML calls through ctypes: what the driver and the GPUs say, without any framework.

BUILDKIT_PY_NVML_LIBRARY names another library with NVML's interface (tests build one).
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

LIBRARY_ENV = "BUILDKIT_PY_NVML_LIBRARY"
DEFAULT_LIBRARY = "libnvidia-ml.so.1"
NVML_SUCCESS = 0


class NvmlError(Exception):
    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


@dataclass(frozen=True)
class Device:
    index: int
    name: str
    uuid: str
    memory_total: int  # bytes
    capability: tuple[int, int]


@dataclass(frozen=True)
class DriverInfo:
    driver_version: str  # "550.54.15"
    cuda_version: tuple[int, int]  # the newest CUDA the driver supports
    devices: tuple[Device, ...]


def _load() -> ctypes.CDLL:
    name = os.environ.get(LIBRARY_ENV) or DEFAULT_LIBRARY
    try:
        return ctypes.CDLL(name)
    except OSError as exc:
        raise NvmlError(f"cannot load {name}: {exc}") from None


def query() -> DriverInfo:
    """Everything the checks need, in one NVML session."""
    lib = _load()
    lib.nvmlErrorString.restype = ctypes.c_char_p

    def call(fn: str, *args) -> None:
        code = getattr(lib, fn)(*args)
        if code != NVML_SUCCESS:
            text = lib.nvmlErrorString(code).decode(errors="replace")
            raise NvmlError(f"{fn} failed: {text} (NVML error {code})", code)

    call("nvmlInit_v2")
    try:
        buf = ctypes.create_string_buffer(96)
        call("nvmlSystemGetDriverVersion", buf, ctypes.c_uint(len(buf)))
        driver = buf.value.decode()
        cuda = ctypes.c_int()
        call("nvmlSystemGetCudaDriverVersion_v2", ctypes.byref(cuda))
        count = ctypes.c_uint()
        call("nvmlDeviceGetCount_v2", ctypes.byref(count))
        devices = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            call("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index), ctypes.byref(handle))
            name, uuid = ctypes.create_string_buffer(96), ctypes.create_string_buffer(96)
            call("nvmlDeviceGetName", handle, name, ctypes.c_uint(len(name)))
            call("nvmlDeviceGetUUID", handle, uuid, ctypes.c_uint(len(uuid)))
            memory = NvmlMemory()
            call("nvmlDeviceGetMemoryInfo", handle, ctypes.byref(memory))
            major, minor = ctypes.c_int(), ctypes.c_int()
            call("nvmlDeviceGetCudaComputeCapability", handle, ctypes.byref(major), ctypes.byref(minor))
            devices.append(Device(index, name.value.decode(), uuid.value.decode(), memory.total, (major.value, minor.value)))
    finally:
        lib.nvmlShutdown()
    return DriverInfo(driver, (cuda.value // 1000, cuda.value % 1000 // 10), tuple(devices))
