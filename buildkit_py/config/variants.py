"""`variants:`: images built from one config, each a name and the top-level keys it overrides."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import show
from ..patterns import lazy_pattern
from .reading import _err, _Raw
from .values import _list, _pattern, _unknown_key

# A variant's name ends its image tags (bk-DIGEST-NAME) and names its CI matrix job and Make target.
_VARIANT_NAME = lazy_pattern(r"[a-z0-9][a-z0-9_.-]{0,31}", re.ASCII)
MAX_VARIANTS = 32


@dataclass(frozen=True)
class Variant:
    """A named set of overrides of the top-level keys (e.g. cuda: "12.8"), validated like them."""

    name: str
    values: tuple[tuple[str, Any], ...]


def _variants(raw: _Raw, path: tuple, value: Any, validators: dict[str, Callable]) -> tuple[Variant, ...]:
    allowed = ["name"] + [k for k in validators if k != "variants"]
    out: list[Variant] = []
    for i, item in enumerate(_list(raw, path, value, limit=MAX_VARIANTS)):
        where = path + (i,)
        if not isinstance(item, dict) or "name" not in item:
            raise _err(raw, where, f"{show(item)} must be a mapping with a name and the keys it overrides, "
                                   "e.g. {name: cu128, cuda: '12.8'}")
        name = _pattern(raw, where + ("name",), item["name"], _VARIANT_NAME,
                        "lowercase ASCII letters, digits, '.', '_' and '-', starting with a letter or digit, "
                        "at most 32 characters")
        if any(v.name == name for v in out):
            raise _err(raw, where + ("name",), f"variant {show(name)} is given twice")
        values = []
        for key, item_value in item.items():
            if key not in allowed:
                raise _unknown_key(raw, where, key, allowed)
            if key != "name" and item_value is not None:
                values.append((key, validators[key](raw, where + (key,), item_value)))
        out.append(Variant(name, tuple(values)))
    return tuple(out)
