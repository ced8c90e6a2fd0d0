"""A few NVML calls through ctypes: what the driver and the GPUs say, without any framework.

Records are namedtuples and ctypes is imported by query(): the launcher runs at every container
start, and dataclasses (through inspect) and ctypes cost milliseconds there that a CPU run never needs."""

from __future__ import annotations

from collections import namedtuple

DEFAULT_LIBRARY = "libnvidia-ml.so.1"
NVML_SUCCESS = 0
# nvmlBrandType_t values of data-center parts, the GPUs CUDA forward compatibility supports:
# NVML_BRAND_TESLA (V100, T4 and older) and NVML_BRAND_NVIDIA (A100, H100 and newer).
DATACENTER_BRANDS = frozenset({2, 14})


class NvmlError(Exception):
    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code


class Device(namedtuple("Device", "index name uuid memory_total capability brand")):
    """index: int; name, uuid: str; memory_total: int, bytes; capability: (major, minor);
    brand: nvmlBrandType_t, 0 (unknown) where the driver does not say."""

    __slots__ = ()

    @property
    def datacenter(self) -> bool:
        return self.brand in DATACENTER_BRANDS


class DriverInfo(namedtuple("DriverInfo", "driver_version cuda_version devices")):
    """driver_version: "550.54.15"; cuda_version: (major, minor), the newest CUDA the driver
    supports; devices: tuple of Device."""

    __slots__ = ()


def _text(buf) -> str:
    # The driver's strings are ASCII; a broken one must not stop the checks.
    return buf.value.decode("ascii", errors="replace")


def query(library: str = DEFAULT_LIBRARY) -> DriverInfo:
    """Everything the checks need, in one NVML session."""
    import ctypes

    class NvmlMemory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]

    try:
        lib = ctypes.CDLL(library)
    except OSError as exc:
        raise NvmlError(f"cannot load {library}: {exc}") from None
    lib.nvmlErrorString.restype = ctypes.c_char_p

    def call(fn: str, *args) -> None:
        code = getattr(lib, fn)(*args)
        if code != NVML_SUCCESS:
            text = (lib.nvmlErrorString(code) or b"?").decode("ascii", errors="replace")
            raise NvmlError(f"{fn} failed: {text} (NVML error {code})", code)

    call("nvmlInit_v2")
    try:
        buf = ctypes.create_string_buffer(96)
        call("nvmlSystemGetDriverVersion", buf, ctypes.c_uint(len(buf)))
        driver = _text(buf)
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
            brand = ctypes.c_int()
            # Only the forward-compatibility decision reads the brand: unknown rather than a failure.
            if lib.nvmlDeviceGetBrand(handle, ctypes.byref(brand)) != NVML_SUCCESS:
                brand.value = 0
            devices.append(Device(index, _text(name), _text(uuid), memory.total, (major.value, minor.value), brand.value))
    finally:
        lib.nvmlShutdown()
    return DriverInfo(driver, (cuda.value // 1000, cuda.value % 1000 // 10), tuple(devices))
