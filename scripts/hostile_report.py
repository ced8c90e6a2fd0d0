#!/usr/bin/env python3
"""Feed a fixed corpus of hostile strings into every config key, from the file and as flags, and
print how each ends: refused (exit 2, the field named) or neutralised (a Dockerfile with the benign
instructions). Anything else (another exit code, a reshaped Dockerfile, a traceback) is a failure.

    python3 scripts/hostile_report.py [--json]
"""

from __future__ import annotations

import collections
import json
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from test_hostile import BENIGN, CORPUS, PLACES, instructions  # noqa: E402

from buildkit_py.config import load_config  # noqa: E402
from buildkit_py.errors import BuildkitError  # noqa: E402
from buildkit_py.pipeline.plan import make_plan  # noqa: E402
from buildkit_py.pipeline.render import MAX_LINE_BYTES, render_dockerfile  # noqa: E402


def main() -> int:
    outcomes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "trainer").mkdir()
        (root / "trainer" / "task.py").write_text("")

        def render(values: dict, as_flags: bool) -> str:
            base = {k: v for k, v in BENIGN.items() if not as_flags or k not in values}
            data = base if as_flags else {**base, **values}
            (root / "buildkit.yaml").write_text(yaml.safe_dump(data, allow_unicode=True))
            config = load_config(root / "buildkit.yaml", root, values if as_flags else None)
            return render_dockerfile(make_plan(config), root=root)

        for as_flags in (False, True):
            benign = instructions(render({}, as_flags))
            for name, where in PLACES:
                for text in CORPUS:
                    if not as_flags and "\udcff" in text:
                        continue  # YAML cannot hold it; argv can
                    try:
                        rendered = render(where(text), as_flags)
                    except BuildkitError as exc:
                        kind = "refused" if exc.exit_code == 2 else f"exit {exc.exit_code}"
                    except Exception as exc:  # noqa: BLE001 - any other exception is what this report looks for
                        kind = f"crash {type(exc).__name__}"
                    else:
                        same = instructions(rendered)[0] == benign[0]
                        short = all(len(line.encode()) <= MAX_LINE_BYTES for line in rendered.split("\n"))
                        kind = "neutralised" if same and short else "reshaped"
                    outcomes[f"{name} ({'flag' if as_flags else 'file'})"][kind] += 1
                    if kind not in ("refused", "neutralised"):
                        failures.append((name, as_flags, text[:60], kind))
    if "--json" in sys.argv:
        print(json.dumps({"fields": {k: dict(v) for k, v in outcomes.items()}, "failures": failures}, indent=2))
    else:
        total = collections.Counter()
        print("| field (source) | refused | neutralised | other |\n|---|---|---|---|")
        for field_name, counts in sorted(outcomes.items()):
            total.update(counts)
            other = sum(v for k, v in counts.items() if k not in ("refused", "neutralised"))
            print(f"| {field_name} | {counts['refused']} | {counts['neutralised']} | {other} |")
        other = sum(v for k, v in total.items() if k not in ("refused", "neutralised"))
        print(f"| **all {sum(total.values())} inputs** | {total['refused']} | {total['neutralised']} | {other} |")
        for failure in failures:
            print("FAIL", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
