"""Stage a package where jobs read it: gs://BUCKET/PREFIX, file:///DIR or a local directory.

The object's name holds the package's content digest (PREFIX/DIGEST/NAME-VERSION.tar.gz; the file name
stays the sdist's own, so pip reads the name and version from it): an unchanged package is found where it
was and not uploaded again. Uploads are whole or nothing: a GCS object appears only when its upload
completes (and `ifGenerationMatch=0` never replaces one), a local file by an atomic rename.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, StageError, show
from ..fsutil import path_problem
from ..patterns import lazy_pattern

DIGEST_CHARS = 16  # of the sha256, as in the images' content tags
RETRY_SECONDS = 60.0  # transient GCS errors (5xx, dropped connections) are retried this long
# Bucket names as Cloud Storage allows them; object prefixes of plain characters, no empty or dot segments.
_BUCKET = lazy_pattern(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]", re.ASCII)
_PREFIX = lazy_pattern(r"[A-Za-z0-9_~+=@,-][A-Za-z0-9._~+=@,-]*(?:/[A-Za-z0-9_~+=@,-][A-Za-z0-9._~+=@,-]*)*", re.ASCII)


@dataclass(frozen=True)
class Staged:
    """A staged package: the URI jobs read it from, and whether this call uploaded it."""

    uri: str  # where jobs read the package: gs://... or file://...
    uploaded: bool  # False: the same package (by digest) was already there

    def to_dict(self) -> dict:
        return {"uri": self.uri, "uploaded": self.uploaded}


@dataclass(frozen=True)
class Stage:
    """A parsed --stage: a bucket and prefix, or a local directory."""

    bucket: str | None
    prefix: str  # object name prefix (GCS) ; "" at the bucket's top
    directory: Path | None


def parse_stage(text: str) -> Stage:
    field = "--stage"
    if "\0" in text or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise ConfigError(f"{show(text)} is not allowed: control characters", field=field)
    if text.startswith("gs://"):
        bucket, _, prefix = text[len("gs://"):].partition("/")
        prefix = prefix.strip("/")
        if not _BUCKET.fullmatch(bucket):
            raise ConfigError(f"{show(text)}: {show(bucket)} is not a Cloud Storage bucket name (lowercase letters, "
                              "digits, '-', '_' and '.', 3 to 222 characters)", field=field)
        if prefix and not _PREFIX.fullmatch(prefix):
            raise ConfigError(f"{show(text)}: the prefix {show(prefix)} is not allowed: letters, digits and . _ ~ + = @ , - "
                              "between '/', no empty segments, none starting with '.'", field=field)
        return Stage(bucket, prefix, None)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        if scheme != "file":
            raise ConfigError(f"{show(text)} is not a stage: use gs://BUCKET/PREFIX, file:///DIR or a directory", field=field)
        text = text[len("file://"):]
        if not text.startswith("/"):
            raise ConfigError("a file:// stage needs an absolute path: file:///DIR", field=field)
    problem = path_problem(text)
    if problem:  # said before a directory is made, not as the first system call's error
        raise ConfigError(f"{show(text)} is not allowed: {problem}", field=field)
    return Stage(None, "", Path(text).absolute())


def object_name(prefix: str, sha256: str, filename: str) -> str:
    return "/".join(p for p in (prefix, sha256[:DIGEST_CHARS], filename) if p)


def stage(path: Path, sha256: str, where: Stage) -> Staged:
    name = object_name(where.prefix, sha256, path.name)
    if where.bucket is not None:
        return to_gcs(path, sha256, where.bucket, name)
    return _to_directory(path, sha256, where.directory / name)


def _to_directory(path: Path, sha256: str, target: Path) -> Staged:
    try:
        if target.exists():
            if hashlib.sha256(target.read_bytes()).hexdigest() != sha256:
                raise StageError(f"{show(str(target))} exists with other content; it was not made by buildkit-py (remove it)")
            return Staged(target.as_uri(), uploaded=False)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(path.read_bytes())
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise StageError(f"cannot stage the package in {show(str(target.parent))}: {exc.strerror or exc}") from None
    return Staged(target.as_uri(), uploaded=True)


def to_gcs(path: Path, sha256: str, bucket: str, name: str) -> Staged:
    """Upload a file to gs://BUCKET/NAME unless an object of its size is there (its name holds its digest)."""
    uri = f"gs://{bucket}/{name}"
    try:
        from google.api_core import exceptions
        from google.api_core.retry import Retry
        from google.auth.exceptions import GoogleAuthError
        from google.cloud import storage
        from google.cloud.storage.retry import DEFAULT_RETRY
    except ImportError:
        raise StageError("staging to gs:// needs google-cloud-storage: pip install 'buildkit-py[gcs]'") from None
    retry: Retry = DEFAULT_RETRY.with_deadline(RETRY_SECONDS)
    size = path.stat().st_size
    try:
        # Application Default Credentials; STORAGE_EMULATOR_HOST points the client at another endpoint.
        blob = storage.Client().bucket(bucket).blob(name)
        try:
            blob.reload(retry=retry)
            return _existing(blob, size, uri)
        except exceptions.NotFound:
            pass
        try:
            blob.upload_from_filename(str(path), content_type="application/gzip", if_generation_match=0, retry=retry)
        except exceptions.PreconditionFailed:  # a concurrent run uploaded it first
            blob.reload(retry=retry)
            return _existing(blob, size, uri)
    except exceptions.NotFound:
        raise StageError(f"cannot upload {uri}: bucket {bucket!r} does not exist (or is not visible to these "
                         "credentials)") from None
    except exceptions.Forbidden as exc:
        raise StageError(f"cannot upload {uri}: access denied ({exc.message}); the credentials need "
                         "storage.objects.create and storage.objects.get on the bucket") from None
    except (exceptions.GoogleAPIError, GoogleAuthError, OSError) as exc:  # requests' errors are OSErrors
        raise StageError(f"cannot upload {uri}: {exc}; nothing was stored") from None
    return Staged(uri, uploaded=True)


def _existing(blob, size: int, uri: str) -> Staged:
    if blob.size != size:
        raise StageError(f"{uri} exists with another size ({blob.size} bytes, the file has {size}); it was not "
                         "made by buildkit-py (remove it)")
    return Staged(uri, uploaded=False)
