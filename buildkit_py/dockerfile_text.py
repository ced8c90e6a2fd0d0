"""A Dockerfile's instructions as plain text: what the fast path (is the last layer the code?) and inference (what does
a training Dockerfile run?) read of one, without a parser of the whole syntax."""

from __future__ import annotations

import json


def instructions(text: str) -> list[tuple[int, str, str]]:
    """(line, KEYWORD, arguments) per instruction: continuation lines joined, comment and blank lines dropped (inside a
    continuation too, as the builder drops them); line is where the instruction starts."""
    found: list[tuple[int, str, str]] = []
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        keyword, _, rest = (pending + stripped).partition(" ")
        found.append((start, keyword.upper(), rest.strip()))
        pending = ""
    return found


def exec_form(arguments: str) -> list[str] | None:
    """The words of an exec-form argument list (`["python", "-m", "x"]`); None for anything else."""
    try:
        words = json.loads(arguments)
    except (ValueError, RecursionError):  # not JSON, or arrays nested thousands deep: not an exec form either
        return None
    return words if isinstance(words, list) and all(isinstance(w, str) for w in words) else None
