"""The command-line flag of each config key: the command line defines them, and the config's errors name them
(a value set by a flag is named as its flag). Apart from config.py, so that building the parser loads no config."""

from __future__ import annotations

from dataclasses import dataclass

_FLAG_NAMES = {"tags": "--tag", "allow_secrets": "--allow-secret", "allow_large": "--allow-large"}


def flag_name(key: str) -> str:
    """The command-line flag that sets a config key."""
    return _FLAG_NAMES.get(key) or "--" + key.replace("_", "-")


def cloudbuild_flag_name(key: str) -> str:
    """The flag that sets a key of `cloudbuild:` (--cloudbuild-KEY)."""
    return "--cloudbuild-" + key.replace("_", "-")


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
