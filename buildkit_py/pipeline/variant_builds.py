"""Every variant built at once on a remote builder (Cloud Build): each build runs on its own machine there, so they
start together and are waited for together; each variant's progress carries its name, and one failure does not
hide the others' results."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from ..builders import cloudbuild
from ..config import Config
from ..errors import BuildError, BuildkitError
from ..progress import Reporter
from .build import BuildOptions, BuildResult, build_config


class _Named(Reporter):
    """One variant's progress on the shared reporter, each event starting with its name."""

    def __init__(self, name: str, to: Reporter):
        super().__init__(to.stream)
        self.name, self.to = name, to

    def message(self, text: str) -> None:
        self.to.message(f"[{self.name}] {text}")

    def build_line(self, line: str) -> None:
        self.to.build_line(f"[{self.name}] {line}")

    def push_progress(self, layer: str, current: int, total: int | None, status: str) -> None:
        self.to.push_progress(f"{self.name}/{layer}", current, total, status)

    def push_status(self, layer: str, status: str) -> None:
        self.to.push_status(f"{self.name}/{layer}" if layer else self.name, status)


def build_at_once(configs: Sequence[Config], options: BuildOptions, reporter: Reporter) -> tuple[tuple[str, BuildResult], ...]:
    """(variant, result) for every config, in config order; a BuildError naming each variant's outcome when any
    failed. Ctrl-C cancels every build still running."""
    with ThreadPoolExecutor(max_workers=len(configs)) as pool:
        futures = [pool.submit(build_config, c, options, _Named(c.variant or "", reporter)) for c in configs]
        try:
            outcomes = [_outcome(f) for f in futures]
        except KeyboardInterrupt:
            cloudbuild.CANCEL.set()  # each build's poll sees it, cancels its build and ends
            for f in futures:
                f.exception()
            raise
        finally:
            cloudbuild.CANCEL.clear()  # the next builds of this process (a notebook's) run
    failed = [(c.variant, o) for c, o in zip(configs, outcomes, strict=True) if isinstance(o, BuildkitError)]
    if failed:
        lines = [f"variant {c.variant}: " + (f"failed: {o}" if isinstance(o, BuildkitError) else
                                             f"built {o.pushed[0].image if o.pushed else o.tags[0]}")
                 for c, o in zip(configs, outcomes, strict=True)]
        error = BuildError(f"{len(failed)} of {len(configs)} variant builds failed:\n" + "\n".join(lines))
        error.exit_code = failed[0][1].exit_code
        raise error
    return tuple((c.variant or "", o) for c, o in zip(configs, outcomes, strict=True))


def _outcome(future) -> BuildResult | BuildkitError:
    try:
        return future.result()
    except BuildkitError as exc:
        return exc
