"""The .dockerignore patterns, matched as Docker matches them (Go's filepath.Match per path element, `**`, `!`
exceptions, the last match wins)."""


from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from ..errors import ContextError, show

MAX_PATTERN_CHARS = 64 * 1024  # Docker's line reader (a Go bufio.Scanner) stops there too; a path is 4096 bytes at most


# Python's re backtracks where Go's regexp does not: each "**" between names multiplies the worst-case time of a
# match by the path's depth. Four keep a 40-deep path in milliseconds; real patterns use one or two.
MAX_DOUBLE_STARS = 4


_REGEX_SPECIALS = frozenset(".+()|{}$")  # special to a regex, plain to filepath.Match


# What patternmatcher writes as "(.*/)?": any run of directories. Segment by segment, so that a pattern with
# several "**" backtracks over a path's depth, not over its every character (Go's regexp never backtracks).
_ANY_DIRS = "(?:[^/\n]*/)*"


@dataclass(frozen=True)
class IgnorePattern:
    """One .dockerignore pattern, compiled: its text, whether `!` negates it, and how it matches."""

    text: str  # cleaned, without the leading "!"
    negated: bool
    kind: str  # "exact", "prefix", "suffix" or "regex": patternmatcher's shortcuts, quirks included
    regex: re.Pattern[str]

    def matches(self, path: str) -> bool:
        if self.kind == "exact":
            return path == self.text
        if self.kind == "prefix":
            return path.startswith(self.text[:-2])
        if self.kind == "suffix":
            suffix = self.text[2:]
            return path.endswith(suffix) or (suffix.startswith("/") and path == suffix[1:])
        return self.regex.fullmatch(path) is not None


def _go_clean(path: str) -> str:
    """Go's filepath.Clean: normpath, except that Go keeps no POSIX "//" root."""
    cleaned = posixpath.normpath(path)
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


@lru_cache(maxsize=1024)
def _compile(text: str, negated: bool, line: str) -> IgnorePattern:
    """Translate one cleaned pattern to a regex and a match kind, as patternmatcher's compile does; once a process
    for the same pattern (the warm process translates the default list before it forks)."""
    regex, kind, i = "", "exact", 0
    while i < len(text):
        start, ch = i, text[i]
        i += 1
        if text.startswith("**", start):
            i += 2 if text.startswith("/", i + 1) else 1  # "**/" means the same as "**"
            if i < len(text):
                if not regex.endswith(_ANY_DIRS):  # "**/**/" means "**/": one group, not two that backtrack
                    regex += _ANY_DIRS
                    if regex.count(_ANY_DIRS) > MAX_DOUBLE_STARS:
                        raise ContextError(f".dockerignore pattern {show(line)} has more than {MAX_DOUBLE_STARS} "
                                           '"**" between names; buildkit-py matches at most that many in one pattern')
                kind = "regex"
            elif kind == "exact":
                kind = "prefix"
            else:
                regex, kind = regex + ".*", "regex"
            if start == 0:
                kind = "suffix"
        elif ch in "*?":
            regex, kind = regex + ("[^/]*" if ch == "*" else "[^/]"), "regex"
        elif ch == "\\":
            if i == len(text):
                raise ContextError(f".dockerignore pattern {show(line)} ends in a backslash that escapes nothing")
            regex, kind, i = regex + re.escape(text[i]), "regex", i + 1
        elif ch == "[":
            regex, kind = regex + ch, "regex"
            if text.startswith("^", i):  # negates, as in Go
                regex, i = regex + "^", i + 1
            members, i = _class(text, i, line)
            regex += members
        elif ch == "]":
            regex, kind = regex + ch, "regex"
        else:
            regex += "\\" + ch if ch in _REGEX_SPECIALS else ch
    try:
        return IgnorePattern(text, negated, kind, re.compile(regex))
    except re.error as exc:
        raise ContextError(f".dockerignore pattern {show(line)} is invalid: {exc.msg}") from None


def _class(text: str, i: int, line: str) -> tuple[str, int]:
    """A [...] class from just after its "[" (and "^"): its regex up to the "]" that closes it, and the index
    after that.

    patternmatcher passes a class to Go's regexp as written, but for "?", "*" and "**", which become "[^/]",
    "[^/]*" and "(.*/)?" there too (so the "]" of "[^/]" closes the class). Go reads each character as a
    member, and a "-" between two members as a range. Each member is escaped here, so that Python's re reads
    it as Go does: unescaped, it would take "[", "--", "&&", "~~" or "||" for set operations, and warn."""
    regex, start = "", i
    can_range = ends_range = False  # a member may start a range unless it ends one
    while i < len(text):
        ch = text[i]
        if ch == "]" and i > start:  # a "]" first in a class is a member, in Go as in Python
            return regex + ch, i + 1
        if text.startswith("[:", i):
            raise ContextError(f".dockerignore pattern {show(line)} has a POSIX class such as [:alpha:], which "
                               "buildkit-py does not support; list the characters or a range, e.g. [a-zA-Z]")
        i += 1
        if ch == "-" and can_range and i < len(text) and text[i] != "]":
            regex, can_range, ends_range = regex + ch, False, True
            continue
        closes = ""
        if ch == "*" and text.startswith("*", i):
            i += 2 if text.startswith("/", i + 1) else 1
            members = "(.*/)?" if i < len(text) else ".*"
        elif ch in "*?":
            members, closes = "[^/", "]*" if ch == "*" else "]"
        elif ch == "\\":
            if i == len(text):
                raise ContextError(f".dockerignore pattern {show(line)} ends in a backslash that escapes nothing")
            members, i = text[i], i + 1
        else:
            members = ch
        for member in members:
            regex += re.escape(member)
            can_range, ends_range = not ends_range, False
        if closes:
            return regex + closes, i
    return regex, i  # unterminated: re.compile says so


def parse_ignore(ignore_text: str) -> list[IgnorePattern]:
    patterns: list[IgnorePattern] = []
    for line in ignore_text.removeprefix("\ufeff").split("\n"):
        if line.startswith("#") or not line.strip():  # only a "#" in the first column starts a comment
            continue
        if len(line) > MAX_PATTERN_CHARS:
            raise ContextError(f".dockerignore line {show(line)} is longer than {MAX_PATTERN_CHARS} characters")
        if "\0" in line:
            raise ContextError(f".dockerignore pattern {show(line)} has a NUL character, which no path can hold; "
                               "is the file text?")
        body = line.strip()
        negated = body.startswith("!")
        if negated:
            body = body[1:].strip()
            if not body:
                raise ContextError('.dockerignore has a lone "!": an exception must name what it re-includes')
        body = _go_clean(body)
        if len(body) > 1 and body.startswith("/"):  # patterns are relative to the context root
            body = body[1:]
        patterns.append(_compile(body, negated, line.strip()))
    return patterns


def matching_patterns(path: str, patterns: Sequence[IgnorePattern]) -> int:
    """The patterns that match the path itself, one bit each (pattern i is bit i)."""
    return sum(1 << i for i, pattern in enumerate(patterns) if pattern.matches(path))


def is_excluded(hits: int, patterns: Sequence[IgnorePattern], *, excluded: bool = False) -> bool:
    """The last pattern that matches the path or one of its parent directories decides (hits: those patterns,
    the parents' carried down the walk, so that a deep path costs no more than a shallow one); `excluded` is the
    state when none matches."""
    for i, pattern in enumerate(patterns):
        # A pattern that could only confirm the current state need not be tried.
        if pattern.negated == excluded and hits >> i & 1:
            excluded = not pattern.negated
    return excluded


def may_reinclude(directory: str, patterns: Sequence[IgnorePattern], min_depth: int = 0) -> bool:
    """Whether some "!" pattern could match this excluded directory, a parent of it or anything below it;
    with `min_depth`, only a pattern that reaches at least that many parts deep counts."""
    parts = directory.split("/")
    return any(p.negated and _may_reach(p.text, parts, min_depth) for p in patterns)


def _may_reach(text: str, parts: list[str], min_depth: int) -> bool:
    if "[" in text or "\\" in text:  # a class or an escape may hide a "/": cannot split safely, so assume yes
        return True
    pieces = text.split("/")
    if len(pieces) < min_depth and "**" not in text:
        return False
    for piece, part in zip(pieces, parts, strict=False):
        if "**" in piece:
            return True
        regex = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in piece)
        if not re.fullmatch(regex, part):
            return False
    return True
