"""The command-line flag of each config key: the command line defines them, and the config's errors name them
(a value set by a flag is named as its flag). Apart from config.py, so that building the parser loads no config."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Flag:
    """A flag every config command (config) or build command (build) takes: a config key it overrides (`key` is a
    Project override, the config's errors name the flag), or one of the command's own options (`option`).
    The command line builds its parser from this table; `dest` is the argparse destination and the key."""

    dest: str
    help: str
    form: str = "text"  # text; path; switch: --X/--no-X (None: the config's); on: store_true; off: --no-X, store_false
    # (dest True by default); repeat: once per value
    group: str = "config"  # config | build
    option: bool = False  # not a config key: a field of the command's own options (Project, BuildOptions)
    flag: str | None = None  # default: --dest-with-dashes
    metavar: str | None = None
    short: str | None = None

    @property
    def name(self) -> str:
        return self.flag or "--" + self.dest.replace("_", "-")


_PLATFORM_HELP = ("the image's platform: linux/amd64 or linux/arm64, or several comma-separated (linux/amd64,"
                  "linux/arm64: one image index) (default: the one the accelerator's machines run, e.g. linux/arm64 "
                  "for NVIDIA_GB200; else linux/amd64 for CUDA images)")
FLAGS = (
    Flag("config", "buildkit.yaml or pyproject.toml (default: found in --dir)", "path", option=True),
    Flag("dir", "trainer directory and build context (default: .)", "path", option=True),
    Flag("framework", "e.g. torch==2.5.1, tensorflow==2.15.1, jax==nightly, none"),
    Flag("python", "Python version, e.g. 3.11"),
    Flag("cuda", "CUDA version, e.g. 12.4 (default: from the framework)"),
    Flag("accelerator", "the Vertex AI GPU the job runs on, e.g. NVIDIA_TESLA_T4: a CUDA build with kernels for it is "
         "chosen"),
    Flag("cuda_flavor", "nvidia/cuda flavour: auto (default), base, runtime, cudnn-runtime, devel"),
    Flag("base_image", "use this base image instead of the resolved one"),
    Flag("gpu", "build for GPUs", "switch"),
    Flag("hypertune", "install cloudml-hypertune (default: yes)", "switch"),
    Flag("import_check", "import what the trainer imports in the image before its code layer (default: yes)", "switch"),
    Flag("build_extensions", "build the trainer directory's compiled extensions (setup.py ext_modules, Cython) in a "
         "stage of their own and copy them beside the code (default: no; autopackage finds them)", "switch"),
    Flag("keep_pip", "leave pip in the image's venv (default: no; uv installs the packages)", "switch"),
    Flag("requirements", "a requirements file in the trainer directory"),
    Flag("template", "your own Dockerfile template in the trainer directory"),
    Flag("image", "repository for the content and git tags, e.g. 127.0.0.1:5000/trainer"),
    Flag("python_mirror", "mirror for standalone Python downloads (UV_PYTHON_INSTALL_MIRROR)"),
    Flag("framework_index_url", "a mirror of the framework's own index (PyTorch's cuXYZ, NVIDIA's), no credentials"),
    Flag("variant", "one of the config's variants: its overrides apply and its name ends the tags", option=True),
    Flag("platform", _PLATFORM_HELP),
    Flag("tags", "also tag as REF (repeatable); without a tag part it gets the content tag", "repeat", "build",
         flag="--tag", metavar="REF", short="-t"),
    Flag("network", "network for RUN steps: default, host or none", group="build"),
    Flag("ca_cert", "CA bundle for pip/apt behind a TLS-intercepting proxy, passed as a BuildKit secret (default: the "
         "file named by PIP_CERT, REQUESTS_CA_BUNDLE or SSL_CERT_FILE)", group="build"),
    Flag("pip_index_url", "pip index URL, credentials allowed: passed as a secret pip.conf", group="build"),
    Flag("pip_conf", "a pip.conf passed as a BuildKit secret", group="build"),
    Flag("builder", "build backend: auto (BuildKit), buildkit, legacy, buildah (no Docker engine) or cloudbuild (Google "
         "Cloud Build: no engine here)", group="build"),
    Flag("cache_ref", "registry cache: reuse the layers of REF (e.g. REPO-cache:buildcache) and, with --push, refresh "
         "it", group="build", option=True, metavar="REF"),
    Flag("allow_secrets", "let a file that looks like a secret into the build context (repeatable)", "repeat", "build",
         flag="--allow-secret", metavar="PATTERN"),
    Flag("allow_large", "let a very large file into the build context (repeatable)", "repeat", "build",
         flag="--allow-large", metavar="PATTERN"),
    Flag("docker", "docker client to run BuildKit with (default: $BUILDKIT_PY_DOCKER or found)", group="build",
         option=True),
    Flag("no_cache", "rebuild every layer", "on", "build", option=True),
    Flag("offline", "do not resolve the image's requirements against the package indexes before building (also "
         "BUILDKIT_PY_OFFLINE=1); said in the output", "on", "build", option=True),
    Flag("fast_path", "with --push: build and push through the engine even when only the code changed", "off", "build",
         option=True, flag="--no-fast-path"),
    Flag("attest", "with --push: attach no SBOM and provenance to the pushed image", "off", "build", option=True,
         flag="--no-attest"),
)
OVERRIDES = tuple(f.dest for f in FLAGS if not f.option)  # the config keys a flag overrides, as Project overrides
_FLAG_NAMES = {f.dest: f.name for f in FLAGS if not f.option}


def flag_name(key: str) -> str:
    """The command-line flag that sets a config key."""
    return _FLAG_NAMES.get(key) or "--" + key.replace("_", "-")


def cloudbuild_flag_name(key: str) -> str:
    """The flag that sets a key of `cloudbuild:` (--cloudbuild-KEY)."""
    return "--cloudbuild-" + key.replace("_", "-")


# The flag of each key of `cloudbuild:` (cloudbuild_flag_name), with its help.
CLOUDBUILD_HELP = {
    "project": "project the build runs in (default: job.project, $GOOGLE_CLOUD_PROJECT, ADC's)",
    "region": "region of the build (default: job.region, else us-central1)",
    "bucket": "bucket for build contexts and logs (default: PROJECT_cloudbuild)",
    "machine_type": "e.g. E2_HIGHCPU_8 (default: the service's)",
    "disk_size_gb": "build disk size in GB (10-4000)",
    "timeout": "build timeout, e.g. 90m (default: 1h, at most 24h)",
    "worker_pool": "private pool: projects/P/locations/R/workerPools/NAME",
    "service_account": "service account email the build runs as",
    "ca_cert_secret": "Secret Manager version holding a CA bundle: projects/P/secrets/NAME/versions/V",
    "pip_conf_secret": "Secret Manager version holding a pip.conf (index credentials)",
    "uv_conf_secret": "Secret Manager version holding the same index settings as a uv.toml",
}


@dataclass(frozen=True)
class JobFlag:
    """A job setting every job command takes (job, plan, submit, autopackage) and the Python API keyword of the
    same name (a JobOptions field): it fills or overrides the config's key of that name under `job:`."""

    key: str
    flag: str
    metavar: str
    help: str
    form: str = "text"  # text; int; list: ARG,ARG...; labels: KEY=VALUE,...; pools: repeated gcloud worker pool specs


# gcloud's names where gcloud has the flag (--args, --labels, --service-account, --worker-pool-spec); --job-network
# and --job-timeout because --network (RUN steps) and --timeout (requests) mean other things here.
JOB_FLAGS = (
    JobFlag("machine_type", "--machine-type", "TYPE", "e.g. n1-standard-8, g2-standard-12, a3-highgpu-8g"),
    JobFlag("accelerator_type", "--accelerator-type", "TYPE", "e.g. NVIDIA_TESLA_T4, NVIDIA_L4 (default: the config's "
            "accelerator)"),
    JobFlag("accelerator_count", "--accelerator-count", "N", "GPUs per machine", "int"),
    JobFlag("replica_count", "--replica-count", "N", "total replicas: one chief and N-1 workers", "int"),
    JobFlag("worker_pool_specs", "--worker-pool-spec", "SPEC", "gcloud's form, once per pool (chief, workers, "
            "parameter servers, evaluators): machine-type=T,replica-count=N,accelerator-type=A,accelerator-count=N; "
            "the pools given replace the config's", "pools"),
    JobFlag("processes_per_node", "--processes-per-node", "N|auto", "trainer processes per machine, each with torchrun's "
            "variables (auto: one per GPU; default: trainer.processes_per_node, else one, or what the command's "
            "torchrun, accelerate or deepspeed starts)"),
    JobFlag("args", "--args", "ARG,...", "the trainer's arguments in the job (replace job.args)", "list"),
    JobFlag("strategy", "--strategy", "NAME", "STANDARD, SPOT or FLEX_START (with --max-wait-duration)"),
    JobFlag("max_wait_duration", "--max-wait-duration", "DURATION", "FLEX_START: how long to wait for machines, "
            "e.g. 30m"),
    JobFlag("timeout", "--job-timeout", "DURATION", "the job's longest run, e.g. 7d or 3600"),
    JobFlag("service_account", "--service-account", "EMAIL", "the identity the job runs as"),
    JobFlag("network", "--job-network", "NETWORK", "VPC peering: projects/PROJECT_NUMBER/global/networks/NAME"),
    JobFlag("base_output_directory", "--base-output-directory", "GS_URI", "gs://BUCKET/PATH (AIP_MODEL_DIR and the "
            "checkpoint and TensorBoard directories under it)"),
    JobFlag("labels", "--labels", "KEY=VALUE,...", "the job's labels (each overrides the config's label of its key)",
            "labels"),
)
_JOB_FLAG_NAMES = {f.key: f.flag for f in JOB_FLAGS}


def job_flag_name(key: str) -> str:
    """The command-line flag that sets a key under `job:`."""
    return _JOB_FLAG_NAMES.get(key) or flag_name(key)
