"""`verify`: an image's SBOM and provenance, read back from its registry and checked (pipeline/attest.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, show
from ..fsutil import reads_once
from ..oci.refs import parse_ref
from ..progress import HtmlRepr
from .project import Progress, checked, refuse_unknown, reporting


@dataclass(frozen=True)
class VerifyResult(HtmlRepr):
    """A verified image: repository@digest, where its attestations are listed (the referrers API or the tag schema),
    the digests of the SBOM and provenance checked, the SBOM's Python packages and each check that passed."""

    image: str
    listed: str
    sbom: str
    provenance: str
    packages: int
    checks: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"image": self.image, "listed": self.listed, "sbom": self.sbom, "provenance": self.provenance,
                "packages": self.packages, "checks": list(self.checks)}


@reads_once
def verify(image: str, /, lock: str | os.PathLike | None = None, *, progress: Progress = None,
           **settings: Any) -> VerifyResult:
    """Fetch IMAGE's SBOM and provenance from its registry and check them: both name the image's digest, the SBOM is
    the one the provenance names, the image's labels are the provenance's; with lock (a buildkit.lock), the SBOM's
    Python packages are exactly the lock's. A failed check raises AttestationError (exit 11) naming the digest or
    package."""
    from ..pipeline.attest import verify as verify_image
    from ..pipeline.lock import read_lock

    refuse_unknown(settings, "verify", ["lock", "progress"])
    ref = parse_ref(checked(image, "str", "IMAGE"), field="IMAGE")
    path = None
    if lock is not None:
        path = Path(checked(lock, "Path", "--lock"))
        if not path.is_file():
            raise ConfigError(f"{show(str(path))} is not a file: a buildkit.lock", field="--lock")
    parsed = read_lock(path) if path is not None else None  # a lock that is not one is refused before any request
    with reporting(progress) as reporter:
        found = verify_image(ref, parsed, reporter)
    return VerifyResult(found.image, found.listed, found.sbom, found.provenance, found.packages, found.checks)
