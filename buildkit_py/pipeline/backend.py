"""The trainer's PEP 517 build backend, run away from the user's environment: the sdist built in an isolated
build environment (kept in the cache, one per requirement set and Python), and a computed setup.py's declared
metadata read by the backend's metadata hook in containers on the Docker engine (the hook is the trainer's code:
it never runs on this machine). pipeline/packaging.py makes the sdist reproducible and checks it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import venv
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from ..catalog.matrix import load_matrix
from ..errors import BuildError, ConfigError, show
from ..fsutil import cache_dir, leads_outside, read_toml, write_atomic
from ..sources.walk import included_files
from .context import LARGE_FILE_BYTES
from .render import render_project_dockerignore

SHOWN_LINES = 25  # of a failing backend's or pip's output


# ---------------------------------------------------------------------------------------------
# The isolated build environment


def _tail(text: str) -> str:
    lines = [ln for ln in text.strip().split("\n") if ln.strip()]
    return "\n".join("  " + ln for ln in lines[-SHOWN_LINES:])


class _BuildEnv:
    """A virtual environment with only the build requirements (no site-packages of this interpreter),
    kept under the cache and named by the requirements and this Python: the next build reuses it."""

    def __init__(self, requires: set[str]):
        key = json.dumps([sys.version, os.path.realpath(sys.executable), sorted(requires)])
        self.path = cache_dir() / "build-envs" / hashlib.sha256(key.encode()).hexdigest()[:16]
        self.requires = requires

    @property
    def python_executable(self) -> str:
        return str(self.path / "bin" / "python")

    def make_extra_environ(self) -> dict[str, str]:
        return {"PATH": os.pathsep.join([str(self.path / "bin"), os.environ.get("PATH", "")]), "PYTHONPATH": ""}

    def ensure(self) -> _BuildEnv:
        if (self.path / "bin" / "python").exists():
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".new-", dir=self.path.parent))
        try:
            venv.EnvBuilder(with_pip=False, symlinks=True).create(tmp)
            self.install(self.requires, tmp / "bin" / "python")
            try:
                os.rename(tmp, self.path)  # whole or not at all; a concurrent build may have won the race
            except OSError:
                if not (self.path / "bin" / "python").exists():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return self

    def install(self, requirements: set[str], python: Path | None = None) -> None:
        if not requirements:
            return
        # This interpreter's pip (the user's pip configuration: index, CA) installs into the environment.
        cmd = [sys.executable, "-m", "pip", "--python", str(python or self.python_executable), "install", "--no-input",
               "--disable-pip-version-check", "--no-warn-script-location", *sorted(requirements)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(
                f"cannot install the build requirements ({', '.join(sorted(requirements))}) into the isolated build "
                f"environment; the first build needs the package index (or the wheels in PIP_FIND_LINKS):\n"
                f"{_tail(proc.stdout + proc.stderr)}")


def _run_hook(cmd, cwd=None, extra_environ=None) -> None:
    """pyproject_hooks' runner: the backend's output is kept for the error message, not streamed."""
    proc = subprocess.run(cmd, cwd=cwd, env={**os.environ, **(extra_environ or {})}, capture_output=True, text=True)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd, proc.stdout, proc.stderr)


def backend_sdist(source: Path, outdir: Path) -> Path:
    import build

    try:
        requires = build.ProjectBuilder(source).build_system_requires
        env = _BuildEnv(requires).ensure()
        builder = build.ProjectBuilder.from_isolated_env(env, source, runner=_run_hook)
        env.install(set(builder.get_requires_for_build("sdist")) - requires)
        return Path(builder.build("sdist", outdir))
    except build.BuildBackendException as exc:
        cause = exc.exception
        output = (cause.stdout or "") + (cause.stderr or "") if isinstance(cause, subprocess.CalledProcessError) else str(cause)
        raise BuildError(f"the sdist build failed ({exc}):\n{_tail(output)}") from None
    except build.BuildException as exc:
        raise BuildError(f"the sdist build failed: {exc}") from None


def _metadata_key(root: Path) -> str:
    """What a computed install_requires can read, cheaply: the trainer's top-level files (setup.py, setup.cfg,
    pyproject.toml, the requirements or version files setup.py opens); the code below them is not hashed."""
    digest = hashlib.sha256(sys.version.encode())
    real_root = root.resolve()
    for path in sorted(p for p in root.iterdir() if p.is_file() and p.stat().st_size < LARGE_FILE_BYTES
                       and not leads_outside(p, real_root)):
        digest.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:24]


# ---------------------------------------------------------------------------------------------
# Declared metadata: the backend's metadata hook, in containers on the Docker engine


@dataclass(frozen=True)
class DeclaredMetadata:
    """The trainer build's metadata from its backend's hook: name, version, Requires-Dist and entry_points.txt."""

    name: str
    requires: tuple[str, ...]  # Requires-Dist, extras' requirements left out
    version: str
    entry_points: str  # entry_points.txt as the build wrote it ("" for none)


def declared_metadata(root: Path) -> DeclaredMetadata:
    """The trainer's own build's metadata, from the PEP 517 metadata hook (prepare_metadata_for_build_wheel), for a
    setup.py whose install_requires is computed. The hook is the trainer's code: it runs in a container on the
    Docker engine, never on this machine (_hook_in_container). Kept in the cache by the top-level files' content."""
    import email.parser

    cached = cache_dir() / "metadata" / f"{_metadata_key(root)}.json"
    try:
        data = json.loads(cached.read_text(encoding="utf-8"))
        return DeclaredMetadata(data["name"], tuple(data["requires"]), data["version"], data["entry_points"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    metadata, entry_points = _hook_in_container(root, included_files(root, render_project_dockerignore(root)))
    meta = email.parser.Parser().parsestr(metadata)
    # Requirements of extras (`; extra == "gpu"`) are not what `pip install .` installs.
    found = tuple(r for r in meta.get_all("Requires-Dist") or () if "extra ==" not in r.replace("extra==", "extra =="))
    out = DeclaredMetadata(str(meta.get("Name") or ""), found, str(meta.get("Version") or ""), entry_points)
    cached.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(cached, json.dumps({"name": out.name, "requires": list(found), "version": out.version,
                                     "entry_points": entry_points}))
    return out


# The hook's container: the default Python base (what a CPU plan starts from), a time limit, and where things go.
METADATA_TIMEOUT_S = 300
_REQS, _SRC, _OUT = "/buildkit-py/build-requires", "/buildkit-py/src", "/buildkit-py/out"
# Runs in the container, without network, as `python3 -c`: the backend's metadata hook (else a wheel build's
# dist-info) on the trainer's copy; its METADATA and entry_points.txt written to _OUT as JSON (the hook's own prints
# go to the container's log, shown when it fails).
_HOOK_SCRIPT = f"""
import importlib, json, os, sys, zipfile
backend, paths = json.loads(sys.argv[1])
os.chdir({_SRC!r})
sys.path[:0] = [os.path.join({_SRC!r}, p) for p in paths] + [{_REQS!r}]
module, _, attrs = backend.partition(":")
hooks = importlib.import_module(module)
for attr in filter(None, attrs.split(".")):
    hooks = getattr(hooks, attr)
work = "/tmp/buildkit-py-metadata"
os.makedirs(work)
if hasattr(hooks, "prepare_metadata_for_build_wheel"):
    info = os.path.join(work, hooks.prepare_metadata_for_build_wheel(work, {{}}))
else:
    with zipfile.ZipFile(os.path.join(work, hooks.build_wheel(work, {{}}))) as wheel:
        top = next(n.split("/")[0] for n in wheel.namelist() if n.split("/")[0].endswith(".dist-info"))
        wheel.extractall(work, [n for n in wheel.namelist() if n.startswith(top + "/")])
    info = os.path.join(work, top)
def text(name):
    path = os.path.join(info, name)
    return open(path, encoding="utf-8").read() if os.path.isfile(path) else ""
os.makedirs({_OUT!r}, exist_ok=True)
with open(os.path.join({_OUT!r}, "result.json"), "w", encoding="utf-8") as out:
    json.dump({{"metadata": text("METADATA"), "entry_points": text("entry_points.txt")}}, out)
"""


def _build_system(root: Path) -> tuple[list[str], str, list[str]]:
    """(requires, build-backend, backend-path) of the trainer's pyproject.toml, read without running anything; a
    setup.py alone gets setuptools' legacy backend, as pip and `build` give it."""
    pyproject = root / "pyproject.toml"
    data: dict = {}
    if pyproject.is_file():
        data = read_toml(pyproject, "pyproject.toml", root=root).get("build-system") or {}
    where = f"{pyproject}:[build-system]"
    if not isinstance(data, dict):
        raise ConfigError(f"{show(data)} is not a table", where=where)
    requires = data.get("requires", ["setuptools>=40.8.0"])
    backend = data.get("build-backend", "setuptools.build_meta:__legacy__")
    paths = data.get("backend-path", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) for r in requires):
        raise ConfigError(f"requires: {show(requires)} is not a list of requirements", where=where)
    for text in requires:  # each a PEP 508 requirement: never a pip option
        try:
            Requirement(text)
        except InvalidRequirement:
            raise ConfigError(f"requires: {show(text)} is not a PEP 508 requirement", where=where) from None
    if not isinstance(backend, str) or not re.fullmatch(r"[A-Za-z_][\w.]*(?::[A-Za-z_][\w.]*)?", backend, re.ASCII):
        raise ConfigError(f"build-backend: {show(backend)} is not a module path (module:object)", where=where)
    if not isinstance(paths, list) or not all(isinstance(p, str) and p and not p.startswith("/")
                                              and ".." not in p.split("/") for p in paths):
        raise ConfigError(f"backend-path: {show(paths)} is not a list of paths inside the trainer directory",
                          where=where)
    return requires, backend, paths


def _hook_in_container(root: Path, files: list[str]) -> tuple[str, str]:
    """(METADATA, entry_points.txt) from the trainer's build backend, in two containers of the default Python base on
    the Docker engine: the first, with the network (the package index) and no trainer code, installs the build
    requirements as wheels only (nothing of theirs runs) into a volume; the second, with no network, the volume
    read-only and only a copy of the trainer's files, runs the hook. Nothing of this machine is mounted into either."""
    from docker.errors import DockerException

    from ..clients.engine import engine_client
    from ..config import default_ca_bundle

    requires, backend, paths = _build_system(root)
    matrix = load_matrix()
    image = matrix.distros.cpu_image.format(python=matrix.distros.default_python)
    client = engine_client()
    volume = None
    try:
        volume = client.volumes.create(labels={"buildkit-py": "metadata-hook"})
        ca = default_ca_bundle()
        pip = ["python3", "-m", "pip", "install", "--quiet", "--no-input", "--disable-pip-version-check",
               "--only-binary=:all:", "--no-warn-script-location", "--target", _REQS, "--", *requires]
        # The host's network, as autopackage's builds use: the engine's default bridge may resolve no names.
        install = _ContainerRun(image, pip, {volume.name: {"bind": _REQS, "mode": "rw"}}, "host",
                                {"PIP_CERT": f"{_SRC}/ca.pem"} if ca else {})
        _container(client, install, files={"ca.pem": ca.read_bytes()} if ca else {},
                   what=f"installing the trainer's build requirements ({', '.join(requires)})")
        hook = _ContainerRun(image, ["python3", "-c", _HOOK_SCRIPT, json.dumps([backend, paths])],
                             {volume.name: {"bind": _REQS, "mode": "ro"}}, "none")
        _, result = _container(client, hook, tree=(root, files),
                               what="reading the trainer's metadata (setup.py's install_requires)")
    except DockerException as exc:
        raise BuildError(f"reading the trainer's metadata in a container failed: {show(str(exc))}") from None
    finally:
        if volume is not None:
            try:
                volume.remove(force=True)
            except DockerException:
                pass  # a volume the engine keeps holds only the build requirements' wheels
        client.close()
    try:
        data = json.loads(result)
        return str(data["metadata"]), str(data["entry_points"])
    except (ValueError, KeyError, TypeError):
        raise BuildError("reading the trainer's metadata in a container failed: its result is not readable") from None


@dataclass(frozen=True)
class _ContainerRun:
    """One of the hook's containers as the engine creates it: what it runs, the volumes it mounts, its network
    ("host" to reach the package index, "none" for the trainer's code) and its environment."""

    image: str
    command: list[str]
    volumes: dict
    network: str
    environment: dict[str, str] = field(default_factory=dict)


def _container(client, run: _ContainerRun, *, what: str, files: dict[str, bytes] | None = None,
               tree: tuple[Path, list[str]] | None = None) -> tuple[str, str]:
    """Run one container to its end: `files` (name -> bytes) and `tree` (the trainer's files) copied into _SRC before
    it starts; its log and _OUT/result.json ("" where there is none) back; removed whatever happens."""
    from docker.errors import DockerException, NotFound
    from requests.exceptions import RequestException

    try:
        client.images.get(run.image)
    except NotFound:
        client.images.pull(run.image)
    # No capabilities, no privilege gain, bounded processes: the hook is someone else's code.
    container = client.containers.create(run.image, run.command, volumes=run.volumes, network_mode=run.network,
                                         environment=run.environment, working_dir="/", detach=True,
                                         cap_drop=["ALL"], security_opt=["no-new-privileges"], pids_limit=512)
    try:
        archive = tempfile.TemporaryFile()  # noqa: SIM115 - closed below; a trainer's files need not fit in memory
        with archive, tarfile.open(fileobj=archive, mode="w") as tar:
            _add_bytes(tar, _SRC.lstrip("/"), None)
            for name, data in (files or {}).items():
                _add_bytes(tar, f"{_SRC.lstrip('/')}/{name}", data)
            if tree is not None:
                root, rels = tree
                for rel in rels:  # a symlink travels as a link: nothing outside the trainer directory is read
                    tar.add(root / rel, arcname=f"{_SRC.lstrip('/')}/{rel}", recursive=False, filter=_owned_by_root)
            tar.close()
            archive.seek(0)
            container.put_archive("/", archive)
        container.start()
        try:
            status = container.wait(timeout=METADATA_TIMEOUT_S).get("StatusCode", 1)
        except RequestException:  # the SDK's timeout is requests' own
            raise BuildError(f"{what} ran past {METADATA_TIMEOUT_S} s in its container: stopped") from None
        logs = container.logs().decode("utf-8", "replace")
        if status != 0:
            raise BuildError(f"{what} failed in its container (exit {status}):\n{_tail(logs)}")
        try:
            stream, _ = container.get_archive(f"{_OUT}/result.json")
        except NotFound:
            return logs, ""
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.extractfile("result.json")
            return logs, member.read().decode("utf-8") if member else ""
    finally:
        try:
            container.remove(force=True)
        except DockerException:
            pass


def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """The container's root, without capabilities, writes only what it owns (setuptools writes egg-info beside the
    sources): the copy is root's, whoever owns the trainer here."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes | None) -> None:
    info = tarfile.TarInfo(name)
    if data is None:
        info.type, info.mode = tarfile.DIRTYPE, 0o755
    else:
        info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data) if data is not None else None)
