"""The documentation site: it builds with every MkDocs warning an error (links and anchors included), its generated
references name every config key, command, flag and exit code, README.md's links into docs/ resolve, and external
links are well formed (CI does not fetch them: it has no guaranteed network to them)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from buildkit_py import cli, config, errors

REPO = Path(__file__).resolve().parent.parent
INSTALL_HINT = "mkdocs is not installed: pip install -e '.[docs]' (or '.[test]'), which brings mkdocs and mkdocs-material"


def _hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.fail(INSTALL_HINT)
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=REPO,
                          capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_site_builds_with_warnings_as_errors(site):
    for page in ("index.html", "config/index.html", "cli/index.html", "python-api/index.html",
                 "exit-codes/index.html", "recipes/aiplatform/index.html"):
        assert (site / page).is_file(), page


def test_a_broken_link_fails_the_build(tmp_path):
    """The link check is real: a page pointing at a missing page or anchor stops --strict."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.fail(INSTALL_HINT)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[there](concepts.md#no-such-anchor)\n")
    (docs / "concepts.md").write_text("# Concepts\n\n## The config\n")
    settings = (REPO / "mkdocs.yml").read_text()
    settings = re.sub(r"(?ms)^hooks:.*?(?=^\S)", "", settings)
    settings = re.sub(r"(?ms)^nav:.*", "", settings)
    (tmp_path / "mkdocs.yml").write_text(settings)
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "out")],
                          cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
                          timeout=300)
    assert done.returncode != 0
    assert "no-such-anchor" in done.stdout + done.stderr


def test_the_config_reference_names_every_key():
    page = _hooks().config_page()
    for key in config.KEYS:
        assert f"| `{key}` |" in page, key
    for key in config.JOB_KEYS:
        assert f"| `job.{key}` |" in page, key
    for key in config.CLOUDBUILD_KEYS:
        assert f"| `cloudbuild.{key}` |" in page, key
    # what a validator allows is its own words, not a copy
    assert "one of auto, buildkit, legacy, buildah, cloudbuild" in page
    assert "one of STANDARD, SPOT, FLEX_START" in page


def _parser_commands(parser: argparse.ArgumentParser, prefix=""):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                nested = list(_parser_commands(sub, f"{prefix}{name} "))
                yield from nested or [(f"{prefix}{name}", sub)]


def _flags(row: str) -> set[str]:
    """The option strings of a table row's first cell, `-o, --output OUTPUT`."""
    cells = row.split("|")
    return set(re.findall(r"(?<![\w-])-{1,2}[A-Za-z][\w-]*", cells[1])) if len(cells) > 2 else set()


def test_the_cli_reference_names_every_command_and_flag():
    page = _hooks().cli_page()
    sections = {m[1]: m[2] for m in re.finditer(r"(?ms)^## `buildkit-py ([^`]+)`\n(.*?)(?=^## )", page)}
    shared = page[page.index("## Shared flags"):]
    commands = list(_parser_commands(cli.build_parser()))
    assert len(commands) > 20
    for name, sub in commands:
        assert name in sections, name
        for action in sub._actions:
            for option in action.option_strings:
                if option in ("-h", "--help"):
                    continue
                in_section = any(option in _flags(line) for line in sections[name].splitlines())
                rows = [line for line in shared.splitlines() if option in _flags(line)]
                in_shared = any(name in row.rstrip(" |").rsplit("|", 1)[-1].strip().split(", ") for row in rows)
                assert in_section or in_shared, (name, option)


def test_the_exit_codes_page_names_every_error_class():
    page = _hooks().exit_codes_page()
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.BuildkitError)]
    assert len(classes) > 10
    for cls in classes:
        assert f"| {cls.exit_code} | `{cls.__name__}` |" in page, cls
    assert f"| {cli.INTERNAL_ERROR} | internal error |" in page


def test_the_python_api_reference_names_every_public_name():
    import buildkit_py
    from buildkit_py import api

    page = _hooks().api_page()
    for name in api.__all__:
        if callable(getattr(api, name)):
            assert f"### `buildkit_py.api.{name}`" in page, name
    assert "### `buildkit_py.submit`" in page and buildkit_py.submit.__doc__.split("\n")[0].strip()[:40] in page


LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_readme_links_into_docs_resolve(site):
    links = [link for link in LINK.findall((REPO / "README.md").read_text()) if link.startswith("docs/")]
    assert len(links) >= 8, links
    generated = set(_hooks().PAGES)
    for link in links:
        path, _, anchor = link.partition("#")
        page = path.removeprefix("docs/")
        assert (REPO / path).is_file() or page in generated, link
        if anchor:
            html = (site / page.removesuffix(".md") / "index.html").read_text()
            assert f'id="{anchor}"' in html, link


def test_external_links_are_well_formed():
    texts = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    seen = 0
    for path in texts:
        for url in re.findall(r"https?://[^\s)`'\"<>]+", path.read_text()):
            parts = urlsplit(url)
            seen += 1
            assert parts.scheme == "https" or parts.hostname in ("127.0.0.1", "localhost"), (path.name, url)
            assert parts.hostname and "." in parts.hostname or parts.hostname in ("localhost",), (path.name, url)
    assert seen > 5


# The pages a user works from: each a task, a worked example the tests run (tests/test_docs_examples.py), the rules
# in short, then what to do when it fails.
TASK_PAGES = ("getting-started.md", "autopackage.md", "commands.md", "building.md", "locking.md", "attestations.md",
              "packages.md", "jobs.md", "launcher.md", "python-api-guide.md", "benchmarks.md",
              *(f"recipes/{p.name}" for p in sorted((REPO / "docs" / "recipes").glob("*.md"))))
MOST_WORDS = 120


def _prose(text: str) -> list[str]:
    """A page's paragraphs and list items (fenced blocks, tables, headings and HTML comments left out), each joined
    into one line."""
    text = re.sub(r"(?ms)^(```+).*?^\1\s*$", "", text)
    pieces, current = [], []
    for line in text.splitlines() + [""]:
        stripped = line.strip()
        starts_item = re.match(r"^\s*([-*]|\d+\.)\s", line)
        if not stripped or stripped.startswith(("#", "|", "<!--")) or starts_item:
            if current:
                pieces.append(" ".join(current))
            current = [re.sub(r"^\s*([-*]|\d+\.)\s", "", line).strip()] if starts_item else []
            continue
        current.append(stripped)
    return [p for p in pieces if p]


def test_no_paragraph_or_list_item_runs_over_120_words():
    long = []
    for path in sorted((REPO / "docs").rglob("*.md")):
        for piece in _prose(path.read_text(encoding="utf-8")):
            if len(piece.split()) > MOST_WORDS:
                long.append(f"{path.relative_to(REPO / 'docs')}: {len(piece.split())} words: {piece[:70]}...")
    assert not long, "\n".join(long)


def test_the_prose_counter_sees_paragraphs_and_items():
    pieces = _prose("# T\n\nOne two\nthree.\n\n- a b\n  c\n- d\n\n```sh\nx y z\n```\n| a | b |\n")
    assert pieces == ["One two three.", "a b c", "d"]


@pytest.mark.parametrize("page", TASK_PAGES)
def test_a_task_page_opens_with_its_task_and_ends_with_its_failures(page):
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    first = _prose(text.split("\n", 1)[1])[0]
    assert len(re.findall(r"[.!?](\s|$)", first)) == 1 and len(first.split()) <= 40, f"{page}: task sentence: {first}"
    assert re.search(r"(?m)^## When it fails\s*$", text), f"{page}: no '## When it fails' section"
    assert re.search(r"(?m)^<!-- run: ", text), f"{page}: no worked example the tests run"
