"""The Python API's reference, generated from the docstrings with pdoc: the public modules only (buildkit_py,
buildkit_py.api, buildkit_py.errors, buildkit_py.progress), as HTML. tests/test_public_api.py runs it with every
warning an error, so that a name that stops resolving or documenting fails the tests (and CI).

    python3 scripts/api_reference.py [OUTPUT_DIR]    # default: docs/api (not kept in git)
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PUBLIC = ("buildkit_py", "buildkit_py.api", "buildkit_py.errors", "buildkit_py.progress")


def generate(output: Path) -> list[Path]:
    """Write the reference into output; the pages written."""
    import pdoc
    import pdoc.render

    import buildkit_py
    from buildkit_py import api

    for module in (buildkit_py, api):  # names imported on first use (PEP 562): pdoc reads the module's __dict__
        for name in module.__all__:
            getattr(module, name)
    pdoc.render.configure(docformat="markdown", footer_text=f"buildkit-py {buildkit_py.__version__}",
                          search=False, show_source=False)
    # Only the public modules: the API package's stage modules (api.images...) are reached through api's names.
    # A package's spec adds its submodules; each pattern after it takes them out again.
    pdoc.pdoc("buildkit_py", r"!buildkit_py\.", "buildkit_py.api", r"!buildkit_py\.api\.", *PUBLIC[2:],
              output_directory=output)
    return sorted(output.rglob("*.html"))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    written = generate(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "api")
    print("\n".join(map(str, written)))
