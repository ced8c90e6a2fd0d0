"""The TPU tables: the TPU types and machine types Vertex AI offers (tpus.yaml), and a framework's `tpu:` section
(frameworks/*.yaml), which says what its TPU build of a release installs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..patterns import lazy_pattern
from .reading import _PYTHON, _RELEASE, _load, _need, _strings, _text, version_key

_URL = lazy_pattern(r"https://[A-Za-z0-9.-]{1,253}(?:/[A-Za-z0-9._~/-]{0,200})?", re.ASCII)
_TPU_SPEC_KEYS = {"requirement", "index_url", "libtpu", "from", "releases"}
_REQUIREMENT = lazy_pattern(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}(?:\[[a-z0-9-]{1,32}\])?(?:==[0-9][0-9a-z.]{0,31})?",
                          re.ASCII)
_TOPOLOGY = lazy_pattern(r"[1-9][0-9]{0,2}(?:x[1-9][0-9]{0,2}){1,2}", re.ASCII)


@dataclass(frozen=True)
class TpuMachine:
    """A TPU machine type of Vertex AI (tpus.yaml): its chips per VM, topology and the accelerator count to send."""

    name: str  # Vertex AI machine type, "ct5lp-hightpu-4t"
    chips: int  # TPU chips of one VM
    topology: str | None  # machineSpec.tpuTopology; None: the type takes none
    accelerator_count: int | None  # sent with acceleratorType; None: neither is sent


@dataclass(frozen=True)
class Tpu:
    """A TPU type of Vertex AI (tpus.yaml): its generation, machine types and the oldest releases documented for it;
    why_not where Vertex AI custom training does not take it."""

    name: str  # "TPU_V5_LITEPOD"
    generation: str  # "v5e"
    in_client: bool  # in google-cloud-aiplatform's AcceleratorType
    machines: dict[str, TpuMachine]
    min: dict[str, str]  # framework (or "python") -> the oldest release the service documents
    undocumented: tuple[str, ...] = ()  # frameworks the service's page does not name for it
    why_not: str | None = None  # set when Vertex AI custom training does not take it


@dataclass(frozen=True)
class TpuBuild:
    """One framework release's TPU build."""

    requirement: str  # "jax[tpu]==0.8.1"
    index_url: str | None
    companion: str | None  # installed after it: "torch_xla[tpu]==2.8.1"
    python: tuple[str, ...]
    system_libtpu: bool  # the framework loads /lib/libtpu.so, not the wheel's libtpu/libtpu.so


@dataclass(frozen=True)
class TpuSpec:
    """A framework's `tpu:` section."""

    requirement: str  # what pip installs, ==RELEASE appended
    index_url: str | None
    system_libtpu: bool
    first: str | None  # every release from this one on has a TPU build (`from`)
    releases: dict[str, tuple[tuple[str, ...] | None, str | None]]  # release -> (python, companion)

    def build(self, release: str, series_python: tuple[str, ...]) -> TpuBuild | None:
        if release in self.releases:
            python, companion = self.releases[release]
        elif self.first is not None and release != "nightly" and version_key(release) >= version_key(self.first):
            python, companion = None, None
        else:
            return None
        return TpuBuild(f"{self.requirement}=={release}", self.index_url, companion, python or series_python,
                        self.system_libtpu)


def _tpu_spec(data: Any, where: str) -> TpuSpec:
    if not isinstance(data, dict) or set(data) - _TPU_SPEC_KEYS:
        raise DataError(f"{where}: must be a mapping of {', '.join(sorted(_TPU_SPEC_KEYS))}")
    if data.get("libtpu") not in ("venv", "system"):
        raise DataError(f"{where}: libtpu must be venv (the wheel's libtpu/libtpu.so) or system (/lib/libtpu.so)")
    releases = {}
    for release, fields in (data.get("releases") or {}).items():
        rw = f"{where}: releases.{release}"
        if not isinstance(fields, dict) or set(fields) - {"python", "companion"}:
            raise DataError(f"{rw}: must map python and companion")
        python = _strings(fields["python"], rw, _PYTHON) if "python" in fields else None
        releases[str(_text({"r": release}, "r", rw, _RELEASE))] = (python, _text(fields, "companion", rw, _REQUIREMENT))
    first = _text(data, "from", where, _RELEASE)
    if first is None and not releases:
        raise DataError(f"{where}: give `from` or `releases`")
    return TpuSpec(str(_text(data, "requirement", where, _REQUIREMENT)), _text(data, "index_url", where, _URL),
                   data["libtpu"] == "system", first, releases)


def _tpus(root: Path) -> dict[str, Tpu]:
    data = _need(_load(root / "tpus.yaml"), "tpus", dict, "tpus.yaml")
    out = {}
    for name, item in data.items():
        where = f"tpus.yaml: {name}"
        machines = {}
        for machine, spec in _need(item, "machines", dict, where).items():
            mw = f"{where}: machines.{machine}"
            chips, count = _need(spec, "chips", int, mw), spec.get("accelerator_count")
            if count is not None and (type(count) is not int or count < 1):
                raise DataError(f"{mw}: accelerator_count must be a whole number or null")
            machines[machine] = TpuMachine(machine, chips, _text(spec, "topology", mw, _TOPOLOGY), count)
        minimum = _need(item, "min", dict, where)
        for key in minimum:
            _text(minimum, key, f"{where}: min", _RELEASE)
        offered = item.get("offered", True)
        out[name] = Tpu(name, _need(item, "generation", str, where), bool(item.get("in_client")), machines,
                        dict(minimum), _strings(item.get("undocumented", []), where),
                        None if offered else _need(item, "why", str, where))
    return out
