"""`cloudbuild:`: where and on what Google Cloud Build builds the image (builder: cloudbuild;
buildkit_py/builders/cloudbuild.py). Each key is also a flag, --cloudbuild-KEY, since job: has keys of the same names."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import show
from ..patterns import lazy_pattern
from .job import _JOB_FIELDS
from .reading import _err, _Raw
from .values import _choice, _duration, _int, _mapping, _pattern

CLOUDBUILD_MACHINE_TYPES = ("UNSPECIFIED", "E2_MEDIUM", "E2_STANDARD_2", "E2_HIGHCPU_8", "E2_HIGHCPU_32", "N1_HIGHCPU_8",
                            "N1_HIGHCPU_32")  # BuildOptions.MachineType, google-cloud-build 3.43.0 (checked 2026-11-24)
MAX_CLOUDBUILD_TIMEOUT = 86400  # Build.timeout: at most 24 h (Cloud Build documentation, checked 2026-11-24)
_BUCKET_NAME = lazy_pattern(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]", re.ASCII)
_WORKER_POOL = lazy_pattern(r"projects/[a-z0-9-]{1,30}/locations/[a-z0-9-]{1,40}/workerPools/[a-z0-9-]{1,63}", re.ASCII)
_SECRET_VERSION = lazy_pattern(r"projects/[a-z0-9-]{1,30}/secrets/[A-Za-z0-9_-]{1,255}/versions/(?:[0-9]{1,20}|latest)",
                             re.ASCII)
_SECRET_RULE = "a Secret Manager secret version: projects/PROJECT/secrets/NAME/versions/VERSION (a number or latest)"


@dataclass(frozen=True)
class CloudBuildConfig:
    """`cloudbuild:`: where and on what Cloud Build builds the image, as whom, and the secrets its RUN steps get."""

    project: str | None = None  # default: job.project, $GOOGLE_CLOUD_PROJECT, ADC's project
    region: str | None = None  # default: job.region, else us-central1
    bucket: str | None = None  # for contexts and logs; default: PROJECT_cloudbuild (as gcloud builds submit)
    machine_type: str | None = None
    disk_size_gb: int | None = None
    timeout: int | None = None  # seconds; default 1 h
    worker_pool: str | None = None
    service_account: str | None = None  # an email; the build runs as it
    # What the build's RUN steps get as secrets, from Secret Manager: never in the request, a step or a log.
    ca_cert_secret: str | None = None
    pip_conf_secret: str | None = None
    uv_conf_secret: str | None = None


_CLOUDBUILD_FIELDS: dict[str, Callable[[_Raw, tuple, Any], Any]] = {
    "project": _JOB_FIELDS["project"],
    "region": _JOB_FIELDS["region"],
    "bucket": lambda r, p, v: _pattern(r, p, v, _BUCKET_NAME, "a Cloud Storage bucket name: lowercase letters, digits, "
                                                           "'-', '_' and '.', 3 to 222 characters"),
    "machine_type": lambda r, p, v: _choice(r, p, v, CLOUDBUILD_MACHINE_TYPES),
    "disk_size_gb": lambda r, p, v: _int(r, p, v, 10, 4000),
    "timeout": lambda r, p, v: _cloudbuild_timeout(r, p, v),
    "worker_pool": lambda r, p, v: _pattern(r, p, v, _WORKER_POOL, "projects/PROJECT/locations/REGION/workerPools/NAME"),
    "service_account": _JOB_FIELDS["service_account"],
    "ca_cert_secret": lambda r, p, v: _pattern(r, p, v, _SECRET_VERSION, _SECRET_RULE),
    "pip_conf_secret": lambda r, p, v: _pattern(r, p, v, _SECRET_VERSION, _SECRET_RULE),
    "uv_conf_secret": lambda r, p, v: _pattern(r, p, v, _SECRET_VERSION, _SECRET_RULE),
}
CLOUDBUILD_KEYS = tuple(_CLOUDBUILD_FIELDS)


def _cloudbuild_timeout(raw: _Raw, path: tuple, value: Any) -> int:
    seconds = _duration(raw, path, value)
    if seconds > MAX_CLOUDBUILD_TIMEOUT:
        raise _err(raw, path, f"{show(value)} is not allowed: Cloud Build allows at most 24h")
    return seconds


def _cloudbuild(raw: _Raw, path: tuple, value: Any) -> CloudBuildConfig:
    data = _mapping(raw, path, value, list(_CLOUDBUILD_FIELDS), "Cloud Build settings")
    return CloudBuildConfig(**{k: _CLOUDBUILD_FIELDS[k](raw, path + (k,), v) for k, v in data.items()})
