"""The documentation's worked examples, run: every console block on a page carries a marker, and the ones marked
`run` are executed against the loopback test environment, their input files written from the page, their output's
stable parts compared with what the page shows. An example cannot drift from what the code does.

The markers, an HTML comment on the line before a fenced block (invisible on the site):

- `<!-- run: NAME [from=DIR] [exit=N] -->` before a file block (```` ```yaml title="buildkit.yaml" ````): the file
  is written, at its title's path, into example NAME's own directory (a fresh one per page and name). `from=DIR`
  on an example's first block copies the repository's DIR there first.
- The same before a ```` ```console ```` block: its `$ ` lines run there in order, through bash, with
  `buildkit-py` and `autopackage` on PATH; the lines after a command are the output it must print (stdout and
  stderr as a terminal shows them), compared in order, each a line of the output (spaces collapsed, `...`
  standing for any text), lines the page leaves out allowed. Every command must exit 0, except the block's last
  when the marker says `exit=N`.
- `<!-- illustration -->` before a console block that is not run (a cloud command, a GPU machine's output).

BUILDKIT_DOCS_OUTPUTS=DIR saves what each command printed, whole, for writing the page from it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import REPO, SESSION_CACHE

DOCS = REPO / "docs"
MARKER = re.compile(r"^<!--\s*(run:\s*(?P<name>[\w.-]+)(?P<options>[^>]*?)|illustration)\s*-->\s*$")
FENCE = re.compile(r"^(?P<fence>```+)(?P<lang>[\w-]*)(?P<info>.*)$")
TITLE = re.compile(r'title="([^"]+)"')
COMMAND_TIMEOUT = 600
OUTPUTS_ENV = "BUILDKIT_DOCS_OUTPUTS"  # a directory: each command's whole output is saved there, to write the page from


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    title: str
    text: str
    marker: str  # "", "illustration" or the run example's name
    options: dict[str, str] = field(default_factory=dict)


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a page, each with the marker on the line before it."""
    found, lines = [], path.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opened = FENCE.match(lines[index])
        if not opened:
            index += 1
            continue
        end = next((n for n in range(index + 1, len(lines)) if lines[n].startswith(opened["fence"])), len(lines))
        marked = MARKER.match(lines[index - 1]) if index else None
        name = (marked["name"] or "illustration") if marked else ""
        said = (marked["options"] or "").split() if marked and marked["name"] else []
        options = dict(o.partition("=")[::2] for o in said)
        title = TITLE.search(opened["info"])
        found.append(Block(str(path.relative_to(DOCS)), index + 1, opened["lang"], title[1] if title else "",
                           "\n".join(lines[index + 1:end]), name, options))
        index = end + 1
    return found


PAGES = sorted(p for p in DOCS.rglob("*.md"))
ALL_BLOCKS = [b for page in PAGES for b in blocks(page)]
EXAMPLES = sorted({(b.page, b.marker) for b in ALL_BLOCKS if b.marker not in ("", "illustration")})


def test_every_console_block_says_whether_it_runs():
    unmarked = [f"{b.page}:{b.line}" for b in ALL_BLOCKS if b.lang == "console" and not b.marker]
    assert not unmarked, f"console blocks without <!-- run: NAME --> or <!-- illustration -->: {unmarked}"
    bad = [f"{b.page}:{b.line}" for b in ALL_BLOCKS
           if b.marker not in ("", "illustration") and b.lang != "console" and not b.title]
    assert not bad, f"a run-marked file block needs title=\"PATH\": {bad}"
    assert len(EXAMPLES) >= 20, EXAMPLES


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """A console block's (command, expected output lines); a command line ending in \\ goes on on the next."""
    runs: list[tuple[str, list[str]]] = []
    pending = ""
    for line in block.text.splitlines():
        if pending:
            pending = pending[:-1] + line.strip()
        elif line.startswith("$ "):
            pending = line[2:]
        else:
            assert runs, f"{block.page}:{block.line}: output before the first command"
            runs[-1][1].append(line)
            continue
        if not pending.endswith("\\"):
            runs.append((pending, []))
            pending = ""
    assert runs, f"{block.page}:{block.line}: a run-marked console block without a command"
    return runs


def _words(line: str) -> str:
    return " ".join(line.split())


def matches(expected: list[str], output: str) -> str:
    """'' when every non-empty expected line is an output line, in order (spaces collapsed, `...` any text); else the
    first line that is not."""
    got = [_words(line) for line in output.splitlines()]
    at = 0
    for want in (_words(line) for line in expected):
        if not want or want == "...":
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in want.split("...")) + r"\Z")
        hit = next((n for n in range(at, len(got)) if pattern.match(got[n])), None)
        if hit is None:
            return want
        at = hit + 1
    return ""


@pytest.fixture(scope="module")
def shims(tmp_path_factory) -> Path:
    """`buildkit-py` and `autopackage` as the installed console scripts run them, from this checkout."""
    bin_dir = tmp_path_factory.mktemp("bin")
    for name, main in (("buildkit-py", "main"), ("autopackage", "autopackage_main")):
        script = bin_dir / name
        script.write_text(f'#!{sys.executable}\nimport sys\nfrom buildkit_py.cli import {main}\nsys.exit({main}())\n')
        script.chmod(0o755)
    return bin_dir


@pytest.fixture
def vertex(tmp_path_factory):
    """The Vertex AI and Cloud Logging stand-ins on loopback, as the `fake` fixture has them, for `submit` and `logs`:
    one per example, so its first job is .../customJobs/1000. A job's replica prints what the quickstart trainer
    does, as the stand-in's script (tests/logging_loopback.py) writes it into the log."""
    from vertex_loopback import FakeVertex, new_key_file

    from buildkit_py.jobs import logs, submit

    server = FakeVertex()
    server.logging.project = "my-project"  # the project the pages submit to
    server.logging.script = {"JOB_STATE_RUNNING": [("workerpool0-0", "INFO", "trained: w=2.9987 b=0.4973 rmse=0.1006")]}
    key, public = new_key_file(tmp_path_factory.mktemp("key"), f"{server.url}/token")
    server.public_key = public
    with server:
        yield {"GOOGLE_APPLICATION_CREDENTIALS": str(key), submit.ENDPOINT_ENV: server.url, logs.ENDPOINT_ENV: server.url}


@pytest.mark.parametrize("page,name", EXAMPLES, ids=[f"{p}::{n}" for p, n in EXAMPLES])
def test_the_example_runs_as_the_page_shows(page, name, tmp_path, testenv, shims, vertex):
    work = tmp_path / "work"
    work.mkdir()
    env = {"PATH": f"{shims}:{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(REPO / ".testenv"),
           "XDG_CACHE_HOME": str(SESSION_CACHE), "BUILDKIT_PY_OFFLINE": "1", "CI": "true", "COLUMNS": "120",
           "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "REPO": str(REPO),
           # A TLS-intercepting proxy's CA bundle, as the user's shell has it (a build's default --ca-cert), as run_cli
           **{k: os.environ[k] for k in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE") if k in os.environ},
           **testenv, **vertex}
    mine = [b for b in ALL_BLOCKS if b.page == page and b.marker == name]
    if "from" in mine[0].options:
        shutil.copytree(REPO / mine[0].options["from"], work, dirs_exist_ok=True)
    for block in mine:
        if block.lang != "console":
            target = work / block.title
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text + "\n", encoding="utf-8")
            continue
        runs = commands(block)
        for number, (command, expected) in enumerate(runs):
            # One stream, as a terminal shows the messages (stderr) and the results (stdout) interleaved.
            done = subprocess.run(["bash", "-c", command], cwd=work, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=COMMAND_TIMEOUT)
            output = done.stdout
            if os.environ.get(OUTPUTS_ENV):  # for the page's author: what each command printed, whole
                saved = Path(os.environ[OUTPUTS_ENV]) / f"{page.replace('/', '-')}-{name}-{block.line}-{number}.txt"
                saved.parent.mkdir(parents=True, exist_ok=True)
                saved.write_text(f"$ {command}\n{output}", encoding="utf-8")
            want = int(block.options.get("exit", 0)) if number == len(runs) - 1 else 0
            where = f"{page}:{block.line}: $ {command}"
            assert done.returncode == want, f"{where}\nexit {done.returncode}, the page says {want}\n{output[-4000:]}"
            missing = matches(expected, output)
            assert not missing, f"{where}\nthe page shows a line the output lacks:\n  {missing}\noutput:\n{output[-4000:]}"


def test_the_comparison_is_of_lines_in_order():
    output = "base image  nvidia/cuda:12.4.1-base-ubuntu22.04\nCUDA        12.4.1\ndigest sha256:abc123\n"
    assert matches(["CUDA 12.4.1", "digest sha256:..."], output) == ""
    assert matches(["base image nvidia/cuda:12.4.1-base-ubuntu22.04", "", "...", "CUDA 12.4.1"], output) == ""
    assert matches(["CUDA 12.8.1"], output) == "CUDA 12.8.1"
    assert matches(["CUDA 12.4.1", "base image ..."], output) == "base image ..."  # order counts
    assert matches(["CUDA 12"], output) == "CUDA 12"  # a whole line, not a part of one
