"""The trainer's own distribution in the image, metadata only, as `pip install .` would leave it (run once, at
build time, by the Dockerfile step before the code layer): NAME-VERSION.dist-info in the venv's site-packages
(METADATA, entry_points.txt, INSTALLER, RECORD) and a script in the venv's bin/ for each console or GUI script.
The code is not copied: it is the image's next layer, on PYTHONPATH, so a code edit stays that one layer.

    python -m buildkit_launcher.distinfo '{"name": ..., "version": ..., "entry_points": {GROUP: ["NAME = mod:attr"]}}'

Standard library only. The data was checked by buildkit-py's config; anything else exits 2 here, naming it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import sys
import sysconfig

_ENTRY = re.compile(r"\s*([^=\s][^=]*?)\s*=\s*([A-Za-z_][\w.]*)(?::([A-Za-z_][\w.]*))?\s*(?:\[[^\]]*\])?\s*", re.ASCII)
_SCRIPT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", re.ASCII)
_SCRIPT_TEXT = """#!{python}
import sys
from {module} import {head}
if __name__ == "__main__":
    sys.exit({call}())
"""


def _fail(message: str) -> None:
    print(f"buildkit_launcher.distinfo: {message}", file=sys.stderr)
    raise SystemExit(2)


def _record_line(root: str, path: str) -> str:
    with open(path, "rb") as f:
        digest = base64.urlsafe_b64encode(hashlib.sha256(f.read()).digest()).rstrip(b"=").decode()
    return f"{os.path.relpath(path, root)},sha256={digest},{os.path.getsize(path)}"


def install(data: dict) -> list[str]:
    """Write the dist-info and the scripts; the paths written."""
    name, version, groups = data.get("name"), data.get("version"), data.get("entry_points") or {}
    if not (isinstance(name, str) and isinstance(version, str) and isinstance(groups, dict)):
        _fail(f"expected name, version and entry_points, got {data!r}")
    site = sysconfig.get_paths()["purelib"]
    bin_dir = os.path.dirname(sys.executable)
    info = os.path.join(site, f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info")
    os.makedirs(info, exist_ok=True)
    written = []
    files = {"METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", "INSTALLER": "buildkit-py\n"}
    if groups:
        files["entry_points.txt"] = "".join(f"[{group}]\n" + "".join(f"{e}\n" for e in entries) + "\n"
                                            for group, entries in groups.items())
    for file_name, text in files.items():
        path = os.path.join(info, file_name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        written.append(path)
    for group in ("console_scripts", "gui_scripts"):
        for entry in groups.get(group, ()):
            match = _ENTRY.fullmatch(entry)
            if not match or not _SCRIPT.fullmatch(match.group(1)) or match.group(3) is None:
                _fail(f"{entry!r} ({group}) is not `NAME = module:attr`")
            script, module, attr = match.groups()
            path = os.path.join(bin_dir, script)
            with open(path, "w", encoding="utf-8") as f:
                f.write(_SCRIPT_TEXT.format(python=sys.executable, module=module, head=attr.split(".")[0], call=attr))
            os.chmod(path, 0o755)
            written.append(path)
    record = os.path.join(info, "RECORD")
    with open(record, "w", encoding="utf-8") as f:
        f.write("".join(_record_line(site, p) + "\n" for p in written) + f"{os.path.relpath(record, site)},,\n")
    return [*written, record]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        _fail("expected one argument: the distribution as JSON")
    try:
        data = json.loads(argv[0])
    except ValueError as exc:
        _fail(f"the argument is not JSON: {exc}")
    if not isinstance(data, dict):
        _fail("the argument is not a JSON object")
    for path in install(data):
        print(f"buildkit_launcher.distinfo: wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
