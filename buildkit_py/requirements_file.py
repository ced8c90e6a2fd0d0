"""Requirements files as pip reads them: logical lines (continuations joined, comments dropped), and whether
the file asks for hash checking. Light on purpose: the plan reads it for every Dockerfile."""

from __future__ import annotations

import re

from .errors import shown_name

# pip's hash-checking mode: a per-requirement --hash, or --require-hashes on a line of its own.
_HASH_CHECKED = re.compile(r"(?:^|\s)--(?:hash(?:=|\s)|require-hashes(?:\s|$))")


def requirement_lines(text: str, source: str) -> list[tuple[str, str]]:
    """(requirement, "file:line") for each requirement of a requirements file; continuations joined,
    comments dropped, as pip reads them."""
    out: list[tuple[str, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1]
            continue
        line = re.sub(r"(^|\s)#.*", "", pending + line).strip()
        pending = ""
        if line:
            out.append((line, f"{shown_name(source)}:{start}"))
    return out


def hash_checked(text: str, source: str) -> str | None:
    """Where the file first asks for hash checking ("requirements.txt:3"), or None."""
    return next((where for line, where in requirement_lines(text, source) if _HASH_CHECKED.search(line)), None)


_NAME = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?=\s*(?:\[|[<>=!~;@]|$))", re.ASCII)


def requirement_name(line: str) -> str | None:
    """The distribution a requirement names, PEP 503-normalised (None for an option, a path or a URL), read without
    packaging's parser, which the plan does not load."""
    match = None if line.startswith("-") else _NAME.match(line)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else None


def requirement_names(text: str, source: str) -> tuple[str, ...]:
    """The distributions a requirements file's requirements name (options, paths and URLs left out)."""
    return tuple(name for line, _ in requirement_lines(text, source) if (name := requirement_name(line)))
