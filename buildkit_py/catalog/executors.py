"""Google's prebuilt training images (base_images/executors.yaml): `torch==2.4`, CPU or GPU, and a region
-> the image URI a PythonPackageSpec names as its executor."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..errors import ConfigError, DataError, ResolutionError, show
from ..patterns import lazy_pattern
from .matrix import load_matrix
from .resources import read_data, resource_dir

CATALOG = "executors.yaml"
_SPEC = lazy_pattern(r"(?P<name>[a-z][a-z0-9-]{0,31})==(?P<version>[0-9]{1,3}(?:\.[0-9]{1,4}){0,2})", re.ASCII)
_REGION = lazy_pattern(r"[a-z]{2,24}(?:-[a-z0-9]{1,24}){0,3}", re.ASCII)  # us-central1, europe-west4, us


@dataclass(frozen=True)
class Executor:
    """One of Google's prebuilt training images (base_images/executors.yaml), in a region's repository."""

    framework: str  # canonical name, "torch"
    version: str  # the series the image carries, "2.4" (its latest patch)
    python: str
    gpu: bool
    cuda: str | None  # the CUDA major of a GPU image
    image: str  # the image's name in the registry, "pytorch-gpu.2-4.py310"
    support_ends: str
    available_until: str
    uri: str  # in the region's repository, with the :latest tag the service requires

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class _Entry:
    """One series of a framework in executors.yaml: its Python, CUDA major, support dates, CPU and GPU image names."""

    version: str
    python: str
    cuda: str
    support_ends: str
    available_until: str
    cpu: str
    gpu: str


@dataclass(frozen=True)
class Catalog:
    """A catalog of Google's prebuilt images (executors.yaml, prediction.yaml): the registry of each multi-region and,
    per framework, the entries newest first."""

    registry: str  # "{multi_region}-docker.pkg.dev/vertex-ai/training"
    multi_regions: tuple[str, ...]
    default_multi_region: str
    frameworks: dict[str, tuple[Any, ...]]  # newest first: _Entry here, another entry type per catalog


def read_catalog(name: str, entry: type, what: str) -> Catalog:
    """A catalog of Google's prebuilt images in base_images/ (this one, or the serving images'):
    a registry per multi-region and, per framework, entries newest first (null values stay None)."""
    data = read_data(resource_dir("base_images") / name)
    try:
        frameworks = {fw: tuple(entry(**{k: None if v is None else str(v) for k, v in item.items()}) for item in entries)
                      for fw, entries in data["frameworks"].items()}
        return Catalog(data["registry"], tuple(data["multi_regions"]), data["default_multi_region"], frameworks)
    except (KeyError, TypeError, AttributeError) as exc:
        raise DataError(f"base_images/{name}: malformed {what} ({type(exc).__name__}: {exc})") from None


@lru_cache(maxsize=1)
def load_catalog() -> Catalog:
    return read_catalog(CATALOG, _Entry, "executor catalog")


def multi_region(region: str | None, catalog: Catalog) -> str:
    """The Artifact Registry multi-region for a Vertex AI region, as the Vertex AI SDK picks it."""
    if region is None:
        return catalog.default_multi_region
    if not _REGION.fullmatch(region):
        raise ConfigError(f"{show(region)} is not a region name such as us-central1 or europe-west4", field="--region")
    first = region.split("-", 1)[0]
    return first if first in catalog.multi_regions else catalog.default_multi_region


def is_spec(text: str) -> bool:
    """NAME==VERSION names a catalog entry; anything else given as an executor is an image reference."""
    return "==" in text


def known(catalog: Catalog) -> str:
    return "; ".join(f"{name} {', '.join(e.version for e in entries)}" for name, entries in catalog.frameworks.items())


def resolve_executor(spec: str, *, gpu: bool | None = None, region: str | None = None) -> Executor:
    catalog = load_catalog()
    match = _SPEC.fullmatch(spec)
    if not match:
        raise ConfigError(f"{show(spec)} is not an executor: NAME==VERSION (e.g. torch==2.4) or an image reference",
                          field="--executor")
    fw = load_matrix().framework(match["name"])
    name = fw.name if fw else match["name"]
    series = ".".join(match["version"].split(".")[:2])  # the images carry a series' latest patch
    entry = next((e for e in catalog.frameworks.get(name, ()) if e.version == series), None)
    if entry is None:
        raise ResolutionError(f"--executor: {spec} has no prebuilt training image; known: {known(catalog)} "
                              f"(base_images/{CATALOG}). For another version build one: "
                              f"buildkit-py executor build --framework {name}=={match['version']}")
    use_gpu = gpu if gpu is not None else bool(fw and fw.gpu)
    image = entry.gpu if use_gpu else entry.cpu
    registry = catalog.registry.format(multi_region=multi_region(region, catalog))
    return Executor(name, entry.version, entry.python, use_gpu, entry.cuda if use_gpu else None, image,
                    entry.support_ends, entry.available_until, f"{registry}/{image}:latest")


def catalog_entries(framework: str | None = None, *, region: str | None = None) -> list[Executor]:
    """Every image of the catalog (or of one framework), CPU and GPU, in the region's repository."""
    catalog = load_catalog()
    names = list(catalog.frameworks)
    if framework is not None:
        fw = load_matrix().framework(framework)
        canonical = fw.name if fw else framework
        if canonical not in catalog.frameworks:
            raise ResolutionError(f"{show(framework)} has no prebuilt training images; known: {known(catalog)}")
        names = [canonical]
    return [resolve_executor(f"{name}=={entry.version}", gpu=gpu, region=region)
            for name in names for entry in catalog.frameworks[name] for gpu in (False, True)]
