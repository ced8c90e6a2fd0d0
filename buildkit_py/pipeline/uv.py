"""uv's resolver as buildkit-py drives it: `uv pip compile` of an image's package set for its Python and platform,
against the indexes the build uses, with uv's messages said at the user's own lines. The lock (lock.py) and the
resolution (resolution.py) both run it."""


from __future__ import annotations

import bisect
import itertools
import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from ..catalog.matrix import UNRECORDED
from ..config import Config, default_ca_bundle
from ..errors import BuildError, ConfigError, show
from ..fsutil import read_text, write_private
from ..patterns import lazy_pattern
from ..sources.pip_config import without_credentials
from .plan import Plan

# The wheels uv may pick for an image: the platform's architecture, and the base's glibc (Plan.glibc) as the manylinux tag.
PYTHON_PLATFORMS = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}


UV_TIMEOUT = 900  # seconds: a cold resolve of torch with CUDA wheels downloads no wheel, yet reads large pages


def platform_of(plan: Plan) -> str:
    """The platform the plan's packages are resolved and locked for: the plan's, else linux/amd64."""
    platform = plan.platform or "linux/amd64"
    if platform not in PYTHON_PLATFORMS:
        raise ConfigError(f"a lock is made for {', '.join(PYTHON_PLATFORMS)}, not {show(platform)}", field="platform")
    return platform


def python_platform(plan: Plan, platform: str) -> str:
    """uv's --python-platform for the image: x86_64-manylinux_2_35 on Ubuntu 22.04, for instance."""
    return f"{PYTHON_PLATFORMS[platform]}-manylinux_{plan.glibc.replace('.', '_')}"


_UV_FOUND: list[str] = []


_UV_LOCK = threading.Lock()


def uv_binary() -> str:
    """uv, a dependency of buildkit-py (pyproject), else the one on PATH; looked up once, under a lock: the variants of
    one build plan in threads, and uv's lookup reads sysconfig, whose first read is not thread-safe."""
    with _UV_LOCK:
        if not _UV_FOUND:
            try:
                import uv

                _UV_FOUND.append(uv.find_uv_bin())
            except (ImportError, FileNotFoundError):
                found = shutil.which("uv")
                if found is None:
                    raise BuildError("uv is not installed: `pip install uv` (buildkit-py locks with uv's resolver)") \
                        from None
                _UV_FOUND.append(found)
        return _UV_FOUND[0]


def pip_conf_text(config: Config) -> str | None:
    """The index settings the build and resolver use: pip_index_url as a pip.conf, or the pip_conf file."""
    if config.pip_index_url:
        from ..sources.pip_config import index_pip_conf

        return index_pip_conf(config.pip_index_url)
    return read_text(config.pip_conf, "pip.conf") if config.pip_conf else None


def _user_indexes(pip_conf: str | None) -> list[str]:
    """The indexes a pip.conf names (PyPI unless it replaces it), without credentials."""
    from ..sources.pip_config import index_urls, uv_config

    settings = uv_config(pip_conf or "", "pip.conf")
    replaced = any(line.startswith(("index-url", "no-index")) for line in settings.splitlines())
    return ([] if replaced else ["https://pypi.org/simple"]) + [without_credentials(u) for u in index_urls(settings)]


def index_urls_of(plan: Plan, pip_conf: str | None) -> list[str]:
    """The indexes uv reads for the plan's package set, without credentials: the framework's, the pip.conf's (PyPI
    unless it replaces it), the requirements file's index options."""
    from ..sources.pip_config import option_urls

    fw = plan.framework
    return ([without_credentials(fw.index_url)] if fw and fw.index_url else []) + _user_indexes(pip_conf) + \
        [without_credentials(u) for u in option_urls(plan.requirements_index_options)]


@dataclass(frozen=True)
class Compile:
    """How one run of `uv pip compile` goes: with hashes (a lock) or without (a check), uv's extra arguments, its
    time limit, and the framework's requirement in place of the plan's (a range the resolution chooses the release
    in)."""

    hashes: bool
    extra: tuple[str, ...] = ()
    timeout: int = UV_TIMEOUT
    framework: str | None = None


def compile_requirements(config: Config, plan: Plan, platform: str, work: Path, how: Compile
                         ) -> tuple[subprocess.CompletedProcess | None, tuple[str, ...]]:
    """`uv pip compile` of the image's package set (the framework, hypertune, the config's packages and the
    requirements file) for its Python and platform, against the indexes the build uses; the output in work/out.txt.
    (the finished process, or None when it ran past the time limit; the indexes, without credentials)."""
    hashes, extra, timeout, framework = how.hashes, how.extra, how.timeout, how.framework
    fw = plan.framework
    exported = plan.requirements_export  # another tool's lock: its exported lines (exact pins, so uv starts there)
    # Each line of uv's input with where the user wrote it: uv's messages name its line of in.txt, a file of ours.
    lines = ([(framework or fw.requirement, "framework")] if fw else []) + \
        ([(plan.hypertune, "hypertune")] if plan.hypertune else []) + \
        [(p, f"pip[{i}]") for i, p in enumerate(plan.pip)] + ([(f"-r {exported.source}", exported.origin)] if exported else [])
    constraints: list[tuple[str, str]] = []
    if plan.requirements and not exported:
        # The lines buildkit-py read and checked, never the file: uv would follow its includes wherever they lead.
        from ..sources.requirements import resolver_input

        requirements, constraints = resolver_input(config.root, plan.requirements)
        lines += requirements + ([("-c constraints.txt", plan.requirements)] if constraints else [])
        (work / "constraints.txt").write_text("".join(line + "\n" for line, _ in constraints))
    (work / "in.txt").write_text("".join(line + "\n" for line, _ in lines))
    args = [uv_binary(), "pip", "compile", "in.txt", "-o", "out.txt", "--no-header", "--no-annotate",
            "--python-version", plan.python.version, "--python-platform", python_platform(plan, platform), "--quiet"]
    args += ["--generate-hashes"] if hashes else []
    if fw and fw.source == UNRECORDED:  # a release the data does not describe: its wheels say which Python it takes
        args += ["--only-binary", fw.name]
    if fw and fw.overrides:  # what the image's installs drop (templates/macros.j2 `install`)
        (work / "overrides.txt").write_text("".join(line + "\n" for line in fw.overrides))
        args += ["--overrides", "overrides.txt"]
    if fw and fw.pre:
        args.append("--prerelease=allow")
    if fw and fw.index_url:
        args += ["--extra-index-url", fw.index_url, "--index-strategy", "unsafe-best-match"]
    pip_conf = pip_conf_text(config)
    if pip_conf is not None:
        from ..sources.pip_config import uv_config

        write_private(work / "uv.toml", uv_config(pip_conf, str(config.pip_conf or "pip_index_url")).encode())
        args += ["--config-file", "uv.toml"]
    else:
        args.append("--no-config")
    indexes = index_urls_of(plan, pip_conf)
    env = dict(os.environ)
    ca = config.ca_cert or default_ca_bundle()
    if ca:
        env["SSL_CERT_FILE"] = str(ca)
    from ..sources.pip_config import google_logins, logins_netrc, refusal_hint, url_credentials

    credentials = url_credentials(config.pip, "pip")
    logins = google_logins(plan.google_indexes)  # minted here: only a run of uv needs them
    if credentials or logins:  # plan.pip holds the URLs without them: uv reads them as the build's uv does
        write_private(work / "netrc", logins_netrc(credentials, logins).encode())
        env["NETRC"] = str(work / "netrc")
    try:
        done = subprocess.run([*args, *extra], cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        done = None
    if done is not None:
        done.stderr = _users_lines(done.stderr, {"in.txt": lines, "constraints.txt": constraints})
    hint = refusal_hint(done.stderr, plan.google_indexes, logins.identity) \
        if logins is not None and done is not None and done.returncode != 0 else None
    if hint:  # in uv's own form: what the callers' messages keep of its output
        done.stderr = f"{done.stderr.rstrip()}\nhint: {hint}\n"
    return done, tuple(dict.fromkeys(indexes))


_INPUT_PLACE = lazy_pattern(r"(?:in )?`(in\.txt|constraints\.txt)` at (line|position) ([0-9]+)")


def _users_lines(stderr: str, written: dict[str, list[tuple[str, str]]]) -> str:
    """uv's message with each "in `in.txt` at line N" (or "at position P", a character of it), a file of ours, said
    as where that line came from. written: each of our files' lines, one per line, with where each came from."""
    def where(m: re.Match) -> str:
        lines, number = written[m.group(1)], int(m.group(3))
        if m.group(2) == "position":  # a character of the file: the line it falls in
            ends = list(itertools.accumulate(len(text) + 1 for text, _ in lines))
            number = bisect.bisect_right(ends, number) + 1
        return f"at {lines[number - 1][1]}" if 0 < number <= len(lines) else "in the requirements"
    return _INPUT_PLACE.sub(where, stderr)
