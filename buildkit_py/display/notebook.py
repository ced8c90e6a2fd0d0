"""How results and progress look in Jupyter: HTML tables in which every value is escaped, so that a
hostile string (a trainer's output, a registry's error, a config value) shows as text and never
becomes markup. Standard library only: every command imports the result classes."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from html import escape
from typing import Any

MAX_ITEMS = 50  # a list or mapping longer than this shows its first items and the count


def html_value(value: Any, depth: int = 0) -> str:
    """One value as escaped HTML: a mapping as a nested table, a list as lines."""
    if isinstance(value, Mapping) and depth < 3:
        return html_table(value.items(), depth=depth + 1)
    if isinstance(value, (list, tuple)) and depth < 3:
        items = [html_value(v, depth + 1) for v in value[:MAX_ITEMS]]
        more = [f"... ({len(value)} items)"] if len(value) > MAX_ITEMS else []
        return "<br>".join(items + more) or "<i>none</i>"
    if value is None:
        return "<i>none</i>"
    return escape(str(value))


def html_table(rows: Iterable[tuple[Any, Any]], caption: str | None = None, depth: int = 0) -> str:
    """Rows of (name, value) as an escaped HTML table."""
    rows = list(rows)
    body = "".join(f"<tr><th style='text-align:left'>{escape(str(k))}</th><td style='text-align:left'>"
                   f"{html_value(v, depth)}</td></tr>" for k, v in rows[:MAX_ITEMS])
    if len(rows) > MAX_ITEMS:
        body += f"<tr><td colspan='2'>... ({len(rows)} entries)</td></tr>"
    head = f"<caption style='text-align:left'><b>{escape(caption)}</b></caption>" if caption else ""
    return f"<table>{head}{body}</table>"


class HtmlRepr:
    """Mixed into result dataclasses: Jupyter shows the result as a table of what its to_dict() (or its fields) holds."""

    def _repr_html_(self) -> str:
        to_dict = getattr(self, "to_dict", None)
        data = to_dict() if to_dict is not None else dataclasses.asdict(self)  # type: ignore[call-overload]
        rows = data.items() if isinstance(data, Mapping) else [("value", data)]
        return html_table(rows, caption=type(self).__name__)
