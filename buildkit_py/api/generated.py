"""The files buildkit-py writes for other tools: buildkit.mk for Make, CI pipelines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config.reading import DEFAULTS_SOURCE
from ..errors import ConfigError, show
from ..fsutil import reads_once, write_atomic
from ..progress import HtmlRepr
from .project import Project, checked, load, output_file, project_from


@dataclass(frozen=True)
class GeneratedFile(HtmlRepr):
    """A generated file's text, and where it was written (with output)."""

    text: str
    written: Path | None = None

    def to_dict(self) -> dict:
        return {"path": str(self.written)} if self.written else {"text": self.text}


def _generated(text: str, output: Path | None) -> GeneratedFile:
    if output is not None:
        write_atomic(output, text)
    return GeneratedFile(text, output)


@reads_once
def make(project: Project, output: Path | None = None) -> GeneratedFile:
    """buildkit.mk: Make targets that each run one buildkit-py command, for `include buildkit.mk`."""
    from ..tools.makefile import render_makefile

    output = output_file(output, "--output")
    project = project_from(project, {}, "make")
    config = load(project)
    return _generated(render_makefile(config, project.config, output.parent if output else Path.cwd()), output)


@reads_once
def ci(project: Project, flavour: str, output: Path | None = None) -> GeneratedFile:
    """A CI pipeline (github, cloudbuild or gitlab) that builds every variant with a registry cache and pushes."""
    from ..tools.ci import CI_FLAVOURS, render_ci

    output = output_file(output, "--output")
    if checked(flavour, "str", "FLAVOUR") not in CI_FLAVOURS:
        raise ConfigError(f"{show(flavour)} is not a CI flavour buildkit-py writes; one of {', '.join(CI_FLAVOURS)}",
                          field="FLAVOUR")
    project = project_from(project, {}, "ci")
    config = load(project)
    if config.source == DEFAULTS_SOURCE:  # the pipeline runs `buildkit-py build --config FILE`: a file to commit
        raise ConfigError(f"no config in {show(str(config.root))} (buildkit.yaml, or pyproject.toml's "
                          "[tool.buildkit-py]): the pipeline builds from one; write it (`autopackage DIR --write-config` "
                          "saves what it infers) or pass --config", field="--config")
    return _generated(render_ci(config, project.config, flavour), output)
