"""`model:`: what a training pipeline uploads to the Model Registry (buildkit_py/jobs/pipeline.py builds the
TrainingPipeline)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import show
from ..patterns import lazy_pattern
from .job import _GCS_URI, _JOB_FIELDS, _labels
from .reading import _err, _Raw
from .values import _bool, _mapping, _pattern, _ref, _string

# NAME==VERSION of the prebuilt prediction images (base_images/prediction.yaml), as executors are named
_SERVING_SPEC = lazy_pattern(r"[a-z][a-z0-9-]{0,31}==[0-9]{1,3}(?:\.[0-9]{1,4}){0,2}", re.ASCII)
MAX_MODEL_DESCRIPTION = 2048


@dataclass(frozen=True)
class ModelConfig:
    """`model:`: what a training pipeline uploads to the Model Registry: serving image, name, labels and artifacts."""

    serving_image: str | None = None  # an image reference, or NAME==VERSION; None: the prebuilt image for the framework
    serving_gpu: bool = False  # the prebuilt image's GPU build (CPU serving by default)
    name: str | None = None  # the model's display name; default the pipeline's
    description: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    artifact_uri: str | None = None  # default: the service's, base_output_directory/model


def _serving_image(raw: _Raw, path: tuple, value: Any) -> str:
    text = _string(raw, path, value)
    if "==" in text:
        if not _SERVING_SPEC.fullmatch(text):
            raise _err(raw, path, f"{show(text)} is not allowed: NAME==VERSION of a prebuilt prediction image (e.g. "
                                  "torch==2.4) or an image reference")
        return text
    return str(_ref(raw, path, text))


_MODEL_FIELDS: dict[str, Callable[[_Raw, tuple, Any], Any]] = {
    "serving_image": _serving_image,
    "serving_gpu": _bool,
    "name": _JOB_FIELDS["name"],
    "description": lambda r, p, v: _string(r, p, v, limit=MAX_MODEL_DESCRIPTION),
    "labels": _labels,
    "artifact_uri": lambda r, p, v: _pattern(r, p, v, _GCS_URI, "a gs://BUCKET/PATH URI (the directory of the model's "
                                                                 "artifacts)"),
}


def _model(raw: _Raw, path: tuple, value: Any) -> ModelConfig:
    data = _mapping(raw, path, value, list(_MODEL_FIELDS), ", ".join(_MODEL_FIELDS))
    return ModelConfig(**{k: _MODEL_FIELDS[k](raw, path + (k,), v) for k, v in data.items()})


def model_flag(key: str, value: Any, flag: str) -> Any:
    """A model setting given as a flag (--serving-image, --model-name), checked by the config key's validator."""
    raw = _Raw(data={}, source=flag, positions={("model", key): flag}, flags={"model"})
    return _MODEL_FIELDS[key](raw, ("model", key), value)
