"""How the tool shows what it does. Long operations report progress: a live display on a terminal or in a Jupyter
notebook, plain lines in CI, records of the `logging` module for pipelines (Airflow, Kubeflow), JSON lines for
machines, or nothing (quiet); producers call a Reporter's methods and never print themselves. Results show in Jupyter
as HTML tables in which every value is escaped, so that a hostile string (a trainer's output, a registry's error, a
config value) shows as text and never becomes markup. Standard library only: every command imports the result classes."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections import deque
from collections.abc import Iterable, Mapping
from html import escape
from typing import TYPE_CHECKING, Any, TextIO

from .errors import ConfigError, show, terminal_line

if TYPE_CHECKING:
    from .jobs.logs import LogLine

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
        # one line: a note quotes names from the trainer's files, which no character of may act on a terminal
        self._write(terminal_line(f"buildkit-py: {text}", lines=False))

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

    def job_state(self, name: str, state: str) -> None:
        """A submitted job's state changed (submit with wait)."""
        self._write(terminal_line(f"buildkit-py: {name}: {state}", lines=False))

    def job_log(self, line: LogLine) -> None:
        """A line of the submitted job's log (submit with wait)."""
        self._write(line.text())

    def finish(self) -> None:
        """The operation ended (or failed): show what is still held back."""


class QuietReporter(Reporter):
    """Nothing: the result (or the error raised) says what happened."""

    mode = "quiet"

    def _write(self, text: str) -> None:
        pass

    def push_progress(self, layer: str, current: int, total: int | None, status: str) -> None:
        pass


class LogReporter(Reporter):
    """Records of the `buildkit_py` logger (INFO), one per line as plain mode writes them: for pipeline code whose
    runner (Airflow, a Kubeflow component) collects logging."""

    mode = "log"

    def _write(self, text: str) -> None:
        import logging  # here: every command imports this module, and only this mode needs logging

        logging.getLogger("buildkit_py").info("%s", text)


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

    def job_state(self, name: str, state: str) -> None:
        self._event(event="job-state", name=name, state=state)

    def job_log(self, line: LogLine) -> None:
        self._event(event="job-log", **line.to_dict())


class NotebookReporter(Reporter):
    """A live display in a Jupyter notebook: one output area, updated in place, with the latest build steps and
    messages, each layer's push bytes and the job's state. Every text is escaped (notebook.html_table)."""

    mode = "notebook"
    TAIL = 12  # build lines and messages shown
    INTERVAL = 0.25  # seconds between updates for build lines and byte counts; state changes show at once

    def __init__(self, stream: TextIO | None = None):
        super().__init__(stream)
        self.lines: deque[str] = deque(maxlen=self.TAIL)
        self.layers: dict[str, str] = {}
        self.state: tuple[str, str] | None = None
        self._handle = None
        self._shown = 0.0
        self._held = False  # an update waits for the next (INTERVAL)

    def message(self, text: str) -> None:
        self.lines.append(text)
        self._show(now=True)

    def build_line(self, line: str) -> None:
        self.lines.append(line)
        self._show()

    def push_progress(self, layer: str, current: int, total: int | None, status: str) -> None:
        self.layers[layer[:12]] = f"{status} {_mib(current)}/{_mib(total)}" if total else f"{status} {_mib(current)}"
        self._show()

    def push_status(self, layer: str, status: str) -> None:
        self.layers[layer[:12] or "push"] = status
        self._show(now=True)

    def job_state(self, name: str, state: str) -> None:
        self.state = (name, state)
        self._show(now=True)

    def job_log(self, line: LogLine) -> None:
        self.lines.append(line.text())
        self._show()

    def finish(self) -> None:
        if self._held:
            self._show(now=True)

    def html(self) -> str:
        rows = [("steps", "\n".join(self.lines))] if self.lines else []
        rows += [(f"push {layer}", status) for layer, status in self.layers.items()]
        rows += [("job", f"{self.state[0]}: {self.state[1]}")] if self.state else []
        return html_table(rows, caption="buildkit-py").replace("\n", "<br>")

    def _show(self, now: bool = False) -> None:
        moment = time.monotonic()
        self._held = not now and moment - self._shown < self.INTERVAL
        if self._held:
            return
        self._shown = moment
        from IPython.display import HTML, display

        if self._handle is None:
            self._handle = display(HTML(self.html()), display_id=True)
        else:
            self._handle.update(HTML(self.html()))


def _mib(n: int | None) -> str:
    return "?" if n is None else f"{n / 1048576:.1f} MiB"


def _in_kernel() -> bool:
    """This code runs in a Jupyter kernel (IPython's shell there has a kernel; a terminal IPython's has none)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and hasattr(shell, "kernel")


REPORTERS: dict[str, type[Reporter]] = {
    r.mode: r for r in (Reporter, TtyReporter, JsonReporter, NotebookReporter, LogReporter, QuietReporter)}
MODES = ("auto", *REPORTERS)  # the values of --progress and of the API's progress= keyword


def reporter(mode: str | Reporter | None = "auto", stream: TextIO | None = None) -> Reporter:
    """A Reporter as given, or made for a mode. auto (or None): a live display in a Jupyter kernel or on a
    terminal, plain lines otherwise (CI=true forces plain)."""
    if isinstance(mode, Reporter):
        return mode
    if mode is None:
        mode = "auto"
    if not isinstance(mode, str) or mode not in MODES:
        raise ConfigError(f"{show(mode)} is not allowed: one of {', '.join(MODES)}, or a buildkit_py.progress.Reporter",
                          field="--progress")
    stream = stream or sys.stderr
    if mode == "auto":
        # A Jupyter kernel's streams are no terminals; its output area is the live display.
        mode = ("notebook" if _in_kernel()
                else "tty" if stream.isatty() and os.environ.get("CI", "").lower() not in ("1", "true") else "plain")
    return REPORTERS[mode](stream)
