"""Names shared by the launcher, the Dockerfile template (through the Plan) and the tool: the
environment variables the launcher reads and its exit codes. Defined here only, since this
package is the one part that runs inside images and may import nothing from the tool."""

from __future__ import annotations

# Switches a job or a local run sets.
EXPECT_GPUS_ENV = "BUILDKIT_PY_EXPECT_GPUS"  # GPUs the job asked for; unset or 0: a CPU run may proceed
SKIP_GPU_CHECK_ENV = "BUILDKIT_PY_SKIP_GPU_CHECK"  # 1: skip the GPU checks
QUIET_ENV = "BUILDKIT_PY_LAUNCHER_QUIET"  # 1: no log lines on success (warnings still show)
PROBE_ENV = "BUILDKIT_PY_PROBE"  # torch | tensorflow: also ask the framework
NVML_LIBRARY_ENV = "BUILDKIT_PY_NVML_LIBRARY"  # another library with NVML's interface (tests)
CUDA_COMPAT_DIR_ENV = "BUILDKIT_PY_CUDA_COMPAT_DIR"  # where the image's cuda-compat libraries are
# Trainer processes on each machine: a number, or "auto" (one per visible GPU); unset: one, or what the entry's own
# launcher (torchrun, accelerate, deepspeed) starts. Vertex AI runs one container per machine: using its GPUs is ours.
PROCESSES_ENV = "BUILDKIT_PY_PROCESSES_PER_NODE"
AUTO_PROCESSES = "auto"
MAX_PROCESSES_PER_NODE = 64
# Where a machine without a cluster (one replica) rendezvous its processes: torchrun's defaults.
LOCAL_MASTER_ADDR = "127.0.0.1"
LOCAL_MASTER_PORT = "29500"
STOP_GRACE_SECONDS = 30  # after one process fails, the others get SIGTERM, then SIGKILL past this (torchrun's rule)

# Vertex AI's PythonPackageSpec, for executor images (and any image with the launcher): install the
# packages into the image's Python, then run `python -m MODULE` with the container's arguments.
PACKAGE_URIS_ENV = "BUILDKIT_PY_PACKAGE_URIS"  # comma-separated: paths, file://, https://, gs:// (via /gcs/)
PYTHON_MODULE_ENV = "BUILDKIT_PY_PYTHON_MODULE"
PACKAGE_CACHE_ENV = "BUILDKIT_PY_PACKAGE_CACHE"  # where downloads are kept by digest (default below)
DEFAULT_PACKAGE_CACHE = "/tmp/buildkit-py/packages"
GCS_MOUNT = "/gcs"  # Vertex AI mounts Cloud Storage here (Cloud Storage FUSE): gs://B/O is /gcs/B/O

# Set by buildkit-py's Dockerfile from base_images/cuda.yaml.
MIN_DRIVER_ENV = "BUILDKIT_PY_MIN_DRIVER"  # the driver the image's CUDA release ships with
COMPAT_DRIVER_ENV = "BUILDKIT_PY_COMPAT_DRIVER"  # the floor of the image's CUDA major (minor-version compat)
FORWARD_COMPAT_ENV = "BUILDKIT_PY_FORWARD_COMPAT_BRANCHES"  # driver branches cuda-compat supports, "535,570"
# Set by buildkit-py's Dockerfile from base_images/frameworks/*.yaml: the GPU architectures the
# framework build carries, as torch.cuda.get_arch_list() names them, "sm_75,sm_80,compute_120".
CUDA_ARCHS_ENV = "BUILDKIT_PY_CUDA_ARCHS"

# TPUs (Vertex AI TPU VMs). The job spec sets the expected chips; the Dockerfile (through the Plan)
# sets the accelerator the image was built for and where its framework's libtpu lives.
EXPECT_TPU_ENV = "BUILDKIT_PY_EXPECT_TPU_CHIPS"  # TPU chips the job's machine has; unset or 0: no TPU expected
TPU_TYPE_ENV = "BUILDKIT_PY_TPU"  # the TPU accelerator type the image was built for, e.g. TPU_V5_LITEPOD
TPU_RUNTIME_ENV = "BUILDKIT_PY_TPU_RUNTIME"  # absolute path of the libtpu.so the framework loads
DEV_DIR_ENV = "BUILDKIT_PY_DEV_DIR"  # where device nodes are (tests point it at a stand-in layout)
DEFAULT_DEV_DIR = "/dev"
SYS_DIR_ENV = "BUILDKIT_PY_SYS_DIR"  # where sysfs is (tests point it at a stand-in)
DEFAULT_SYS_DIR = "/sys"
SKIP_TPU_CHECK_ENV = "BUILDKIT_PY_SKIP_TPU_CHECK"  # 1: skip the TPU checks (the GPU switch does not)

# Set by the image (nvidia/cuda bases) or the container runtime.
CUDA_VERSION_ENV = "CUDA_VERSION"
CUDNN_VERSION_ENV = "NV_CUDNN_VERSION"
CUDA_VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"
NVIDIA_VISIBLE_ENV = "NVIDIA_VISIBLE_DEVICES"

DEFAULT_CUDA_COMPAT_DIR = "/usr/local/cuda/compat"  # where nvidia/cuda images install cuda-compat

# NCCL moves data between the GPUs of one machine through /dev/shm; Docker's default of 64 MiB
# makes multi-GPU jobs fail or crawl. 1 GiB is the smallest size NVIDIA's and PyTorch's guides give.
SHM_PATH_ENV = "BUILDKIT_PY_SHM_PATH"  # where shared memory is mounted (tests point it elsewhere)
DEFAULT_SHM_PATH = "/dev/shm"
SHM_MIN_BYTES = 1 << 30

# Exit codes, one per failure, so a job's status says which check failed.
NO_DRIVER = 10
NVML_FAILED = 11
TOO_FEW_GPUS = 12
DRIVER_TOO_OLD = 13
ARCH_UNSUPPORTED = 14
VISIBLE_DEVICES = 15
CUDNN_MISSING = 16
FRAMEWORK_NO_GPU = 17
TPU_NOT_VISIBLE = 18  # fewer TPU chips visible than the job asked for
TPU_RUNTIME_MISSING = 19  # the TPU runtime library (libtpu) is not where the framework loads it
BAD_CLUSTER = 20
USAGE = 21
PACKAGE_FETCH_FAILED = 30  # a package URI could not be read or downloaded
PACKAGE_INSTALL_FAILED = 31  # pip could not install the packages

# The build's import check (buildkit_launcher.imports, run by the Dockerfile before the code layer): the modules the
# trainer's entry point reaches, written into the build context by buildkit-py and copied to the image's temp dir; a
# module that fails prints one line starting with the marker, which the tool reads back from the build's output.
IMPORTS_CONTEXT_FILE = ".buildkit-py/imports.json"
IMPORTS_IMAGE_FILE = "/tmp/buildkit-py/imports.json"
IMPORT_FAILED_MARKER = "buildkit-py import check failed:"
IMPORT_CHECKING_MARKER = "buildkit-py import check: importing"
