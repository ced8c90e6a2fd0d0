"""Vertex AI TrainingPipelines: the CustomJob (or HyperparameterTuningJob) that vertex.py builds, run as the
pipeline's training task, after which the service uploads the trained model to the Model Registry with a
serving container (`buildkit-py job|plan|submit --pipeline`).

What the service expects (Vertex AI docs, "Create training pipelines", read 2026-11-22 through this project's
search tool; the task schemas' fields as the v1 discovery document gives them):
- trainingTaskDefinition custom_task_1.0.0.yaml takes a CustomJobSpec as trainingTaskInputs; the model is
  uploaded from modelToUpload.artifactUri when set, else from baseOutputDirectory/model (AIP_MODEL_DIR).
- hyperparameter_tuning_task_1.0.0.yaml takes studySpec, maxTrialCount, parallelTrialCount,
  maxFailedTrialCount and trialJobSpec; the best trial's model is found under baseOutputDirectory, which
  is therefore required.
- modelToUpload names the serving container (containerSpec.imageUri); when the pipeline succeeds, its
  modelToUpload.name is the uploaded model's resource name.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, replace
from functools import lru_cache

from ..catalog.executors import Catalog, multi_region, read_catalog
from ..catalog.matrix import load_matrix
from ..config import ModelConfig
from ..errors import BuildkitError, ConfigError
from ..oci.refs import parse_ref
from . import preflight
from .vertex import LABEL_DIGEST, LABEL_GIT, LABEL_VERSION, VertexJob, pullable

KIND = "trainingPipelines"
SCHEMAS = "gs://google-cloud-aiplatform/schema/trainingjob/definition/"
CUSTOM_TASK = SCHEMAS + "custom_task_1.0.0.yaml"
TUNING_TASK = SCHEMAS + "hyperparameter_tuning_task_1.0.0.yaml"
CATALOG = "prediction.yaml"
_TUNING_INPUTS = ("studySpec", "maxTrialCount", "parallelTrialCount", "maxFailedTrialCount", "trialJobSpec")
_LINEAGE = (LABEL_VERSION, LABEL_DIGEST, LABEL_GIT)


@dataclass(frozen=True)
class _Entry:
    """One series of a framework in prediction.yaml: its support dates, CPU and GPU image names."""

    version: str
    support_ends: str
    available_until: str
    cpu: str
    gpu: str | None


@dataclass(frozen=True)
class ServingImage:
    """A prebuilt prediction image of the catalog."""

    framework: str
    version: str
    gpu: bool
    support_ends: str
    available_until: str
    uri: str  # in the region's repository, with the :latest tag the service requires


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    return read_catalog(CATALOG, _Entry, "prediction image catalog")


def _known(catalog: Catalog) -> str:
    return "; ".join(f"{name} {', '.join(e.version for e in entries)}" for name, entries in catalog.frameworks.items())


def prebuilt(framework: str, version: str, *, gpu: bool, region: str | None, field: str) -> ServingImage:
    """The catalog's serving image for a framework release (its series, e.g. 2.4 for 2.4.1), CPU or GPU."""
    catalog = load_catalog()
    fw = load_matrix().framework(framework)
    name = fw.name if fw else framework
    series = ".".join(version.split(".")[:2])
    entry = next((e for e in catalog.frameworks.get(name, ()) if e.version == series), None)
    if entry is None:
        raise ConfigError(f"{name} {version} has no prebuilt prediction image (known: {_known(catalog)}; "
                          f"base_images/{CATALOG}): give your own serving image with --serving-image IMAGE (or "
                          "model.serving_image), or NAME==VERSION of a prebuilt one your model loads in", field=field)
    if gpu and entry.gpu is None:
        raise ConfigError(f"{name} {entry.version} has CPU prediction images only: drop model.serving_gpu",
                          field="model.serving_gpu")
    image = entry.gpu if gpu else entry.cpu
    host = catalog.registry.format(multi_region=multi_region(region, catalog))
    return ServingImage(name, entry.version, gpu, entry.support_ends, entry.available_until, f"{host}/{image}:latest")


def serving_image(model: ModelConfig, framework: tuple[str, str] | None, *, region: str | None,
                  target: str) -> tuple[str, ServingImage | None]:
    """The serving image's URI (and its catalog entry when prebuilt): the user's image, NAME==VERSION of the
    catalog, else the catalog's image for the trainer's framework release."""
    field = "model.serving_image"
    spec = model.serving_image
    if spec is not None and "==" not in spec:
        return str(pullable(spec, target, field)), None
    if spec is not None:
        name, version = spec.split("==", 1)
    elif framework is not None:
        name, version = framework
    else:
        raise ConfigError("a training pipeline needs a serving image and the config names no framework to pick a "
                          f"prebuilt one: give --serving-image IMAGE (or NAME==VERSION of {_known(load_catalog())}; "
                          f"base_images/{CATALOG}), or set model.serving_image", field=field)
    found = prebuilt(name, version, gpu=model.serving_gpu, region=region, field=field)
    return found.uri, found


def build_pipeline(job: VertexJob, model: ModelConfig, framework: tuple[str, str] | None, *, region: str | None,
                   target: str) -> VertexJob:
    """The TrainingPipeline around the job, as the v1 REST API takes it; a VertexJob of kind trainingPipelines,
    so plan and submit treat it like a job."""
    tuning = job.kind == "hyperparameterTuningJobs"
    spec = job.custom_job_spec()
    base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if tuning and base is None:
        raise ConfigError("a tuning pipeline uploads the best trial's model from under job.base_output_directory: set "
                          "it (gs://BUCKET/PATH)", field="job.base_output_directory")
    if tuning and model.artifact_uri:
        raise ConfigError("a tuning pipeline takes the best trial's model from under job.base_output_directory: drop "
                          "model.artifact_uri", field="model.artifact_uri")
    if base is None and model.artifact_uri is None:
        raise ConfigError("a training pipeline uploads the model the trainer saves in AIP_MODEL_DIR, which is "
                          "job.base_output_directory + /model: set job.base_output_directory (gs://BUCKET/PATH), or "
                          "model.artifact_uri to where the trainer writes it", field="job.base_output_directory")
    uri, found = serving_image(model, framework, region=region, target=target)
    labels = dict(model.labels)
    for key in _LINEAGE:  # the model keeps the image, version and commit it was trained with
        if key in job.resource.get("labels", {}):
            labels.setdefault(key, job.resource["labels"][key])
    if len(labels) > 64:
        raise ConfigError("with buildkit-py's lineage labels there are more than 64 labels: drop some",
                          field="model.labels")
    upload = {"displayName": model.name or job.display_name, "containerSpec": {"imageUri": uri}}
    if model.description:
        upload["description"] = model.description
    if model.artifact_uri:
        upload["artifactUri"] = model.artifact_uri
    if labels:
        upload["labels"] = labels
    if tuning:
        inputs = {k: job.resource[k] for k in _TUNING_INPUTS if k in job.resource}
    else:
        inputs = spec
    resource = {"displayName": job.display_name, "trainingTaskDefinition": TUNING_TASK if tuning else CUSTOM_TASK,
                "trainingTaskInputs": inputs, "modelToUpload": upload, "labels": job.resource.get("labels", {})}
    if tuning:
        notes = [f"the best trial's model is uploaded from under {base.rstrip('/')}/ (each trial's AIP_MODEL_DIR)"]
    else:
        notes = [f"the model is uploaded from {model.artifact_uri or base.rstrip('/') + '/model/ (AIP_MODEL_DIR)'}"]
    if found is not None:
        today = _dt.date.today().isoformat()  # the catalog's dates are ISO dates: they compare as text
        support = ("patch support ended " if found.support_ends < today else "patched until ") + found.support_ends
        notes.append(f"serving image {found.uri}: prebuilt {found.framework} {found.version} "
                     f"{'GPU' if found.gpu else 'CPU'}, {support}, available until {found.available_until} "
                     f"(base_images/{CATALOG})")
    return replace(job, kind=KIND, resource=resource, notes=job.notes + tuple(notes))


def serving_check(job: VertexJob) -> preflight.Check:
    """The serving image: a HEAD of its manifest when it is the user's, what the catalog says when prebuilt."""
    uri = job.resource["modelToUpload"]["containerSpec"]["imageUri"]
    if uri.startswith(tuple(load_catalog().registry.format(multi_region=r) + "/"
                            for r in load_catalog().multi_regions)):
        return preflight.Check("serving", None, f"{uri}: a prebuilt prediction image (not read from here)")
    ref = parse_ref(uri, field="model.serving_image")
    try:
        found = preflight.manifest(ref)
    except BuildkitError as exc:
        return preflight.Check("serving", False, f"serving image: {exc}", exc.exit_code)
    return preflight.Check("serving", True, f"{ref.repository}@{found.digest} is in its registry")


def uploaded_model(pipeline: dict) -> str | None:
    """The uploaded model's resource name, which the service fills in when the pipeline succeeds."""
    upload = pipeline.get("modelToUpload")
    name = upload.get("name") if isinstance(upload, dict) else None
    return name if isinstance(name, str) and name else None
