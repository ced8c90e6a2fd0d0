"""Requirements files as pip reads them: logical lines (continuations joined, comments dropped), and whether
the file asks for hash checking. Light on purpose: the plan reads it for every Dockerfile."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import shown_name
from ..fsutil import TREE, asked_once
from ..patterns import lazy_pattern

MAX_INCLUDES = 16  # requirements files in one chain of -r / -c includes; real projects chain two or three
INCLUDES = ("-r", "--requirement", "-c", "--constraint")
# Options of a requirements file that uv honours in the copied file (checked with uv 0.13.0, 2026-11-24).
KEPT_OPTIONS = frozenset({"-i", "--index-url", "--extra-index-url", "--no-index", "--pre", "--prefer-binary",
                          "--only-binary", "--no-binary", "--require-hashes"})

# pip's hash-checking mode: a per-requirement --hash, or --require-hashes on a line of its own.
_HASH_CHECKED = lazy_pattern(r"(?:^|\s)--(?:hash(?:=|\s)|require-hashes(?:\s|$))")


def parse_problem(exc: Exception) -> str:
    """packaging's refusal of a requirement on one line (it quotes the text and a caret on lines of their own), with
    any character a terminal would act on escaped (the quoted text is the user's)."""
    from ..errors import terminal_line

    return terminal_line(" ".join(str(exc).split())[:200], lines=False)


_COMMENT = lazy_pattern(r"(^|\s)#.*")  # a comment, as pip strips it: at the start or after a blank


def requirement_lines(text: str, source: str) -> list[tuple[str, str]]:
    """(requirement, "file:line") for each requirement of a requirements file; continuations joined,
    comments dropped, as pip reads them. A text is parsed once a command (inference, the plan, the resolution, the
    lock, packaging and the SBOM all read the same file)."""
    shown = shown_name(source)
    parsed: tuple[tuple[str, int], ...] = asked_once(("requirement lines", text),  # type: ignore[assignment]
                                                     lambda: _logical_lines(text))
    return [(line, f"{shown}:{start}") for line, start in parsed]


def _logical_lines(text: str) -> tuple[tuple[str, int], ...]:
    """(logical line, the number of its first physical line)."""
    out: list[tuple[str, int]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        line = _COMMENT.sub("", pending + line).strip()
        pending = ""
        if line:
            out.append((line, start))
    return tuple(out)


_PIN = lazy_pattern(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", re.ASCII)


def pinned(text: str) -> tuple[list[tuple[str, str, tuple[str, ...]]], list[str]]:
    """The NAME==VERSION lines of a hash-pinned requirements file (a lock's, uv's compile output) as (lowercased name,
    version, sorted --hash values), sorted by name; and the requirement lines that are not such a pin. Option lines
    (an index, --require-hashes) are neither."""
    found, other = [], []
    for line, _ in requirement_lines(text, ""):
        if line.startswith("-"):
            continue
        match = _PIN.match(line)
        if not match:
            other.append(line)
            continue
        hashes = tuple(sorted(word.split("=", 1)[1] for word in line.split() if word.startswith("--hash=")))
        found.append((match.group(1).lower(), match.group(2), hashes))
    return sorted(found, key=lambda pin: pin[0]), other


def asks_hashes(line: str) -> bool:
    """Whether a logical line asks for pip's hash-checking mode."""
    return _HASH_CHECKED.search(line) is not None


def hash_checked(text: str, source: str) -> str | None:
    """Where the file first asks for hash checking ("requirements.txt:3"), or None."""
    return next((where for line, where in requirement_lines(text, source) if asks_hashes(line)), None)


def option(text: str) -> tuple[str, str]:
    """(option, value) of an option line: "-r x.txt", "--index-url=URL"."""
    head, _, rest = text.partition(" ")
    if "=" in head:
        head, _, value = head.partition("=")
        return head, (value + " " + rest).strip()
    return head, rest.strip()


def included_lines(root: Path, name: str, follow: tuple[str, ...] = INCLUDES
                   ) -> tuple[list[tuple[str, str, bool]], tuple[str, ...]]:
    """(line, "file:line", whether from a constraints file) for each logical line of the requirements file NAME
    (relative to ROOT, the trainer directory) and of the files its `follow` options include, in pip's order; and the
    included files. Each file is read inside ROOT, so that what a tool is handed holds no line buildkit-py has not
    read; an include leading outside ROOT, missing, in a loop or past MAX_INCLUDES deep is a ConfigError naming the
    line. The chain is followed once a command (the plan, the resolution, the lock and the resolver's input all ask):
    a file the command writes under ROOT makes the next call follow it again."""
    lines, included = asked_once((TREE, os.path.realpath(root), "requirements", name, follow),  # type: ignore[misc]
                                 lambda: _followed(root, name, follow))
    return list(lines), included


def _followed(root: Path, name: str, follow: tuple[str, ...]) -> tuple[tuple[tuple[str, str, bool], ...], tuple[str, ...]]:
    """included_lines' work. Iterative: a long chain costs no stack."""
    from ..errors import ConfigError, show
    from ..fsutil import leads_outside, read_text

    real_root = root.resolve()
    lines: list[tuple[str, str, bool]] = []
    included: list[str] = []
    chain = [name]
    stack = [(iter(requirement_lines(read_text(root / name, "requirements file", root=root), name)), False)]
    while stack:
        step = next(stack[-1][0], None)
        if step is None:
            stack.pop()
            chain.pop()
            continue
        text, where = step
        constraint = stack[-1][1]
        key, value = option(text) if text.startswith("-") else ("", "")
        if key not in follow:
            lines.append((text, where, constraint))
            continue
        target = Path(os.path.normpath(root / chain[-1] / ".." / value))
        if not value or leads_outside(target, real_root) or not target.is_file():
            raise ConfigError(f"{show(text)}: {show(value)} is not a file in the trainer directory", where=where)
        rel = Path(os.path.realpath(target)).relative_to(real_root).as_posix()
        if rel in chain:
            raise ConfigError(f"{show(text)} includes {show(rel)} again (a loop)", where=where)
        if len(chain) >= MAX_INCLUDES:
            raise ConfigError(f"{show(text)} makes a chain of more than {MAX_INCLUDES} requirements files; "
                              f"buildkit-py follows at most {MAX_INCLUDES} -r / -c includes deep", where=where)
        chain.append(rel)
        included.append(rel)
        stack.append((iter(requirement_lines(read_text(real_root / rel, "requirements file", root=root), rel)),
                      constraint or key in ("-c", "--constraint")))
    return tuple(lines), tuple(included)


_SEPARATORS = lazy_pattern(r"[-_.]+")  # PEP 503: runs of them are one hyphen
_NAME = lazy_pattern(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?=\s*(?:\[|[<>=!~;@]|$))", re.ASCII)


def requirement_name(line: str) -> str | None:
    """The distribution a requirement names, PEP 503-normalised (None for an option, a path or a URL), read without
    packaging's parser, which the plan does not load."""
    match = None if line.startswith("-") else _NAME.match(line)
    return _SEPARATORS.sub("-", match.group(1)).lower() if match else None


def requirement_names(text: str, source: str) -> tuple[str, ...]:
    """The distributions a requirements file's requirements name (options, paths and URLs left out)."""
    return tuple(name for line, _ in requirement_lines(text, source) if (name := requirement_name(line)))


# A wheel or sdist named by its file: a path on this machine, whatever its directory
_ARCHIVE = lazy_pattern(r".*\.(?:whl|tar\.gz|tgz|zip|tar\.bz2)", re.ASCII | re.IGNORECASE)
# A distribution name (with extras) and a version operator: how a requirement starts
_VERSIONED = lazy_pattern(r"[A-Za-z0-9][A-Za-z0-9._-]*\s*(?:\[[^\]]*\])?\s*(?:===?|[<>!~]=|[<>])", re.ASCII)


def local_path(text: str) -> bool:
    """Whether a requirement line names a path on this machine (a directory, an archive, a file: URL). A name and a
    version operator start a requirement, however malformed what follows is (`numpy>=1.16.4/1.16.6`): never a path."""
    if _VERSIONED.match(text):
        return False
    return ("file:" in text.lower() or _ARCHIVE.fullmatch(text) is not None
            or (("/" in text or text.startswith(".")) and "://" not in text))


def resolver_input(root: Path, name: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(requirements, constraints) of the requirements file NAME for a resolver (uv) to take instead of the file:
    its lines and its includes', read inside ROOT (the trainer directory), each with where it is ("file:line", for
    the resolver's messages); an option only where the image's installer honours it, never a path on this machine
    (the resolver would read or build it). Anything else is a ConfigError naming the line."""
    from ..errors import ConfigError, show

    requirements: list[tuple[str, str]] = []
    constraints: list[tuple[str, str]] = []
    for text, where, constraint in included_lines(root, name)[0]:
        key, value = option(text) if text.startswith("-") else ("", text)
        url = value.startswith(("https://", "http://", "git+https://"))
        if key and key not in KEPT_OPTIONS and not (key in ("-f", "--find-links", "-e", "--editable") and url):
            raise ConfigError(f"{show(text)}: the option {show(key)} is not one buildkit-py hands to the resolver; "
                              f"allowed: {', '.join(sorted(KEPT_OPTIONS))}, -r, -c, -f URL, -e URL", where=where)
        if key in ("-i", "--index-url", "--extra-index-url") and not value.startswith(("https://", "http://")):
            raise ConfigError(f"{show(text)}: an index is an http(s) URL the image's build can reach, not a path on "
                              "this machine", where=where)
        if not key and local_path(text):
            raise ConfigError(f"{show(text)} is a path on this machine: publish the package to an index, or name it "
                              "by an http(s) URL", where=where)
        (constraints if constraint else requirements).append((text, where))
    return requirements, constraints
