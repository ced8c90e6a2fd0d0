"""How long operations report progress: a live display on a terminal, plain lines in CI, or JSON
lines for machines. Producers call these methods; they never print themselves."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TextIO


class Reporter:
    """Plain lines: one per event, nothing rewritten (CI logs)."""

    mode = "plain"

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self._last_push: dict[str, float] = {}

    def _write(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        self._write(f"buildkit-py: {text}")

    def build_line(self, line: str) -> None:
        self._write(line)

    def push_progress(self, layer: str, current: int, total: int | None, status: str) -> None:
        # Plain mode throttles byte counts to one line per layer every 2 s, plus the final state.
        now = time.monotonic()
        done = total is not None and current >= total
        if not done and now - self._last_push.get(layer, 0.0) < 2.0:
            return
        self._last_push[layer] = now
        size = f"{_mib(current)}/{_mib(total)}" if total else _mib(current)
        self._write(f"push {layer[:12]}: {status} {size}")

    def push_status(self, layer: str, status: str) -> None:
        self._write(f"push {layer[:12]}: {status}" if layer else f"push: {status}")


class TtyReporter(Reporter):
    """A live display: push byte counts rewrite one status line in place."""

    mode = "tty"

    def push_progress(self, layer: str, current: int, total: int | None, status: str) -> None:
        size = f"{_mib(current)}/{_mib(total)}" if total else _mib(current)
        self.stream.write(f"\r\x1b[2Kpush {layer[:12]}: {status} {size}")
        self.stream.flush()

    def push_status(self, layer: str, status: str) -> None:
        self.stream.write("\r\x1b[2K")
        super().push_status(layer, status)


class JsonReporter(Reporter):
    """JSON lines on stderr, one object per event."""

    mode = "json"

    def _event(self, **fields) -> None:
        self._write(json.dumps(fields))

    def message(self, text: str) -> None:
        self._event(event="message", text=text)

    def build_line(self, line: str) -> None:
        self._event(event="build", line=line)

    def push_progress(self, layer: str, current: int, total: int | None, status: str) -> None:
        self._event(event="push-progress", layer=layer, current=current, total=total, status=status)

    def push_status(self, layer: str, status: str) -> None:
        self._event(event="push", layer=layer, status=status)


def _mib(n: int | None) -> str:
    return "?" if n is None else f"{n / 1048576:.1f} MiB"


def reporter(mode: str = "auto", stream: TextIO | None = None) -> Reporter:
    """auto: live display on a terminal, plain lines otherwise (CI=true forces plain)."""
    stream = stream or sys.stderr
    if mode == "auto":
        mode = "tty" if stream.isatty() and os.environ.get("CI", "").lower() not in ("1", "true") else "plain"
    return {"plain": Reporter, "tty": TtyReporter, "json": JsonReporter}[mode](stream)
