"""Regular expressions compiled on first use: a command pays only for the patterns it runs (issue 41: about 180 of
them were compiled at import, most of them by modules whose other patterns a short command never uses)."""

from __future__ import annotations

import re

# What the code asks of a compiled pattern; each becomes an attribute of the instance once compiled.
_ATTRIBUTES = ("match", "search", "fullmatch", "sub", "subn", "split", "findall", "finditer",
               "pattern", "flags", "groups", "groupindex")


class LazyPattern:
    """Stands for re.compile(pattern, flags) until first used, then behaves as it at no cost per call: compiling
    puts the compiled pattern's bound methods on the instance, where a lookup finds them without __getattr__."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = (pattern, flags)
        _MADE.append(self)

    def __getattr__(self, name: str):
        if name not in _ATTRIBUTES:  # dunders (copy, pickle) and _source itself while not set: no compile for those
            raise AttributeError(name)
        compiled = re.compile(*self._source)
        for attribute in _ATTRIBUTES:
            setattr(self, attribute, getattr(compiled, attribute))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_pattern({self._source[0]!r}, {self._source[1]!r})"


_MADE: list[LazyPattern] = []  # every one made: module constants, so the list stays as long as the modules


def lazy_pattern(pattern: str, flags: int = 0) -> LazyPattern:
    return LazyPattern(pattern, flags)


def compile_all() -> None:
    """Compile every pattern the loaded modules made: the warm process does, once, before it forks (its children
    inherit them compiled, where each would compile those it uses on every command)."""
    for made in _MADE:
        made.match  # noqa: B018 - the attribute's first lookup compiles
