"""autopackage's stages, each timed and reported the moment it ends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..errors import mask_credentials
from ..progress import Reporter


@dataclass(frozen=True)
class Stage:
    """One stage (infer, render, build, push, run or submit): how long it took, what it did, whether it reused."""

    name: str
    seconds: float
    detail: str
    reused: bool = False

    def to_dict(self) -> dict:
        return {"stage": self.name, "seconds": round(self.seconds, 3), "detail": self.detail, "reused": self.reused}


@dataclass
class Ending:
    """What a running stage says when it ends: what it did, and whether it reused an earlier result."""

    detail: str
    reused: bool = False

    def says(self, detail: str, reused: bool = False) -> None:
        self.detail, self.reused = detail, reused


@dataclass
class Stages:
    """The pipeline's stages as they finish, each reported the moment it ends."""

    reporter: Reporter
    done: list[Stage] = field(default_factory=list)

    @contextmanager
    def stage(self, name: str) -> Iterator[Ending]:
        """`with stages.stage("build") as out: ... out.says(detail, reused)`."""
        out = Ending(name)
        start = time.monotonic()
        yield out
        # A stage's detail may quote an inferred requirement: a URL's credentials are masked in it.
        done = Stage(name, time.monotonic() - start, mask_credentials(str(out.detail)), bool(out.reused))
        self.done.append(done)
        self.reporter.message(f"[{done.name} {done.seconds:.2f}s] {done.detail}")
