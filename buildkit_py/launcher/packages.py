"""Vertex AI's PythonPackageSpec inside the container: fetch the package URIs, install them into the image's
Python with its own pip (so the image's pip configuration applies: index, CA, proxy), then run
`python -m MODULE ARGS`. Standard library only; the storage client is used for gs:// when the image has it.

A package is read from the /gcs/ mount Vertex AI provides, else fetched; downloads are kept under their
content digest, and the set of digests installed is recorded in the environment, so a restarted
container does not reinstall what it already has.

Modules for fetching and installing are imported where they are used: every container start
imports this module for command(), and most have no packages to install.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable

from .constants import (
    DEFAULT_PACKAGE_CACHE,
    GCS_MOUNT,
    PACKAGE_CACHE_ENV,
    PACKAGE_FETCH_FAILED,
    PACKAGE_INSTALL_FAILED,
    PACKAGE_URIS_ENV,
    PYTHON_MODULE_ENV,
    USAGE,
)

MARKER = ".buildkit-py-packages.json"  # in sys.prefix: the digests installed there
MAX_URIS = 100  # PythonPackageSpec's own limit
SHOWN_LINES = 25  # of pip's output on a failure
DOWNLOAD_TIMEOUT = 120  # seconds without data before a download is given up
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*", re.ASCII)
_URI = re.compile(r"[!-~]{1,4096}", re.ASCII)  # printable ASCII, no spaces: what a URI or path list carries here
_GS = re.compile(r"gs://([a-z0-9][a-z0-9._-]{1,220}[a-z0-9])/([!-~]+)", re.ASCII)


class PackageError(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def command(args: list[str], env: dict[str, str]) -> list[str]:
    """The trainer command: `python -m MODULE ARGS` when a module is set (the args are then the module's),
    else the command as given."""
    module = env.get(PYTHON_MODULE_ENV, "")
    if not module:
        if env.get(PACKAGE_URIS_ENV):
            raise PackageError(USAGE, f"{PACKAGE_URIS_ENV} is set but {PYTHON_MODULE_ENV} is not: name the module "
                                      "to run from the packages")
        return args
    if not _MODULE.fullmatch(module) or len(module) > 255:
        raise PackageError(USAGE, f"{PYTHON_MODULE_ENV}={module!r} is not a dotted Python module name (e.g. trainer.task)")
    return [sys.executable, "-m", module, *args]


def uris(env: dict[str, str]) -> list[str]:
    text = env.get(PACKAGE_URIS_ENV, "")
    found = [u.strip() for u in text.split(",") if u.strip()]
    if len(found) > MAX_URIS:
        raise PackageError(USAGE, f"{PACKAGE_URIS_ENV} names {len(found)} packages; at most {MAX_URIS}")
    for uri in found:
        if not _URI.fullmatch(uri):
            raise PackageError(USAGE, f"{PACKAGE_URIS_ENV}: {uri!r} is not a path or URI of printable ASCII")
    return found


def install(env: dict[str, str], log: Callable[[str], None]) -> bool:
    """Fetch and install the packages of PACKAGE_URIS_ENV into this interpreter's environment;
    True when pip ran (the trainer then needs a fresh interpreter: one started before the install
    has not read the new packages' .pth files)."""
    wanted = uris(env)
    if not wanted:
        return False
    import json
    import subprocess
    import time

    start = time.perf_counter()
    cache = env.get(PACKAGE_CACHE_ENV) or DEFAULT_PACKAGE_CACHE
    files = [fetch(uri, cache, env) for uri in wanted]
    digests = [_sha256(path) for path in files]
    marker = os.path.join(sys.prefix, MARKER)
    if _installed(marker) == digests:
        log(f"packages already installed (sha256 {', '.join(d[:16] for d in digests)})")
        return False
    cmd = [sys.executable, "-m", "pip", "install", "--no-input", "--disable-pip-version-check",
           "--no-warn-script-location", *files]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    except OSError as exc:
        raise PackageError(PACKAGE_INSTALL_FAILED, f"cannot run pip for {', '.join(wanted)}: {exc}") from None
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stdout + proc.stderr).strip().split("\n") if ln.strip()]
        tail = "\n".join("  " + ln for ln in lines[-SHOWN_LINES:])
        raise PackageError(PACKAGE_INSTALL_FAILED,
                           f"pip could not install {', '.join(wanted)} (exit code {proc.returncode}):\n{tail}")
    try:
        with open(marker, "w", encoding="utf-8") as handle:
            json.dump(digests, handle)
    except OSError:
        pass  # a read-only environment: the next start installs again
    log(f"installed {', '.join(wanted)} in {time.perf_counter() - start:.1f} s "
        f"(sha256 {', '.join(d[:16] for d in digests)})")
    return True


def _installed(marker: str) -> list[str] | None:
    import json

    try:
        with open(marker, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, list) else None


def _sha256(path: str) -> str:
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(uri: str, cache: str, env: dict[str, str]) -> str:
    """A local file holding the package; the URI is named in every failure."""
    import urllib.parse

    try:
        if uri.startswith("gs://"):
            return _from_gcs(uri, cache)
        if uri.startswith(("https://", "http://")):
            return _keep(cache, _basename(urllib.parse.urlsplit(uri).path, uri),
                         lambda handle: _download(uri, handle, env))
        if uri.startswith("file://"):
            parts = urllib.parse.urlsplit(uri)
            if parts.netloc not in ("", "localhost"):
                raise PackageError(PACKAGE_FETCH_FAILED, f"cannot fetch {uri}: file:// URIs name this machine's files only")
            path = urllib.parse.unquote(parts.path)
        elif "://" in uri:
            raise PackageError(PACKAGE_FETCH_FAILED, f"cannot fetch {uri}: the schemes are gs://, https://, http:// and "
                                                     "file://, or a path")
        else:
            path = uri
        if not os.path.isfile(path):
            raise PackageError(PACKAGE_FETCH_FAILED, f"cannot fetch {uri}: no such file")
        return path
    except OSError as exc:
        raise PackageError(PACKAGE_FETCH_FAILED, f"cannot fetch {uri}: {exc}") from None


def _basename(path: str, uri: str) -> str:
    # pip reads the name and version from the file name: keep it as the URI has it.
    import urllib.parse

    name = urllib.parse.unquote(path.rsplit("/", 1)[-1])
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise PackageError(PACKAGE_FETCH_FAILED, f"cannot fetch {uri}: it names no file")
    return name


def _keep(cache: str, name: str, write: Callable) -> str:
    """Write a download to a temp file, then keep it under its digest: cache/SHA256/NAME."""
    import tempfile

    os.makedirs(cache, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".download-", dir=cache)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        target_dir = os.path.join(cache, _sha256(tmp))
        os.makedirs(target_dir, exist_ok=True)
        target = os.path.join(target_dir, name)
        os.replace(tmp, target)
        return target
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _download(uri: str, handle, env: dict[str, str]) -> None:
    import shutil
    import ssl
    import urllib.error
    import urllib.request

    # The CA the image's pip uses, so a TLS-intercepting proxy works for both.
    cafile = next((env[k] for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE") if env.get(k)), None)
    context = ssl.create_default_context(cafile=cafile)
    try:
        with urllib.request.urlopen(uri, timeout=DOWNLOAD_TIMEOUT, context=context) as response:
            shutil.copyfileobj(response, handle)
    except urllib.error.HTTPError as exc:
        raise PackageError(PACKAGE_FETCH_FAILED, f"cannot fetch {uri}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError, ssl.SSLError) as exc:
        raise PackageError(PACKAGE_FETCH_FAILED, f"cannot fetch {uri}: {getattr(exc, 'reason', exc)}") from None


def _from_gcs(uri: str, cache: str) -> str:
    match = _GS.fullmatch(uri)
    if not match:
        raise PackageError(PACKAGE_FETCH_FAILED, f"cannot fetch {uri}: not gs://BUCKET/OBJECT")
    bucket, name = match.groups()
    mounted = os.path.join(GCS_MOUNT, bucket, name)
    if os.path.isfile(mounted):
        return mounted
    try:
        from google.cloud import storage
    except ImportError:
        raise PackageError(PACKAGE_FETCH_FAILED, f"cannot fetch {uri}: {mounted} does not exist (Vertex AI mounts "
                                                 "buckets at /gcs/) and google-cloud-storage is not installed") from None
    try:
        blob = storage.Client().bucket(bucket).blob(name)
        return _keep(cache, _basename(name, uri), blob.download_to_file)
    except PackageError:
        raise
    except Exception as exc:  # the client's errors (not found, denied, no credentials) are not stdlib types
        raise PackageError(PACKAGE_FETCH_FAILED, f"cannot fetch {uri}: {type(exc).__name__}: {exc}") from None
