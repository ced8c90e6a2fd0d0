"""The trainer as a reproducible sdist, staged for Vertex AI's prebuilt containers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import distribution_name, pep440_version
from ..fsutil import reads_once
from ..pipeline import lock as _lock
from ..pipeline.plan import make_plan
from ..progress import HtmlRepr
from .project import Source, arguments, load, options_of, with_trainer

# Imported where used, for start-up time (see this package's docstring).
if TYPE_CHECKING:
    from ..google.storage import Staged
    from ..pipeline.packaging import Sdist


@dataclass(frozen=True)
class PackageOptions:
    """What `package` makes: its flags (each keyword of package() sets the field of its name)."""

    module: str | None = None  # default: the config's trainer
    script: str | None = None  # a single script, packaged as Vertex AI's SDK packages one
    name: str | None = None  # default: the config's package.name, else the directory's name
    version: str | None = None  # default: the config's package.version, else 0.0.0
    out: Path | None = None  # default: ./dist
    stage: str | None = None  # gs://BUCKET/PREFIX, file:///DIR or a directory


@dataclass(frozen=True)
class PackageResult(HtmlRepr):
    """The sdist (path, sha256, size, module) and, when staged, where it went."""

    sdist: Sdist
    staged: Staged | None

    @property
    def uri(self) -> str:
        """Where a job finds the sdist: the stage's URI, else the file's."""
        return self.staged.uri if self.staged else self.sdist.path.resolve().as_uri()

    def to_dict(self) -> dict:
        return {**self.sdist.to_dict(), "uri": self.uri, "uploaded": self.staged.uploaded if self.staged else None}


@reads_once
def package(source: Source = None, /, options: PackageOptions | None = None, **settings: Any) -> PackageResult:
    """The trainer as a reproducible sdist (checked: the module is in it), staged when asked.

    source: a Project, the trainer directory or config file, a config dict, or None (the working directory).
    options: PackageOptions; its fields may also be keywords (module=, script=, name=, version=, out=, stage=).
    settings: config keys as their flags set them, config, dir, variant.
    """
    from ..google.storage import parse_stage, stage
    from ..pipeline.packaging import build_sdist

    project, options = arguments("package", source, settings, options_of(options, PackageOptions, "options"), takes=("options",))

    name = distribution_name(options.name, "--name") if options.name is not None else None
    version = pep440_version(options.version, "--version") if options.version is not None else None
    where = parse_stage(options.stage) if options.stage is not None else None
    config = load(with_trainer(project, options.module, options.script))
    pins = _lock.pins(config, make_plan(config)) if _lock.lock_path(config).is_file() else {}
    sdist = build_sdist(config, options.out or Path("dist"), name=name, version=version, pins=pins)
    return PackageResult(sdist, stage(sdist.path, sdist.sha256, where) if where else None)
