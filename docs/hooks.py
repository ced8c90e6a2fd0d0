"""MkDocs hook: the reference pages made at build time from the code itself, so they cannot drift from it.

- config.md: every key of the config's own key tables (buildkit_py.config._validators, config.job._JOB_FIELDS,
  config.cloudbuild._CLOUDBUILD_FIELDS), with what its validator allows, read from the validator's own refusal of a
  probe value;
- cli.md: every command of buildkit_py.cli.build_parser(), its flags and their help;
- python-api.md: buildkit_py.__all__ and buildkit_py.api.__all__, their signatures and docstrings;
- exit-codes.md: every error class of buildkit_py.errors with its exit_code and docstring, and the launcher's codes.

tests/test_docs.py calls the page functions directly and builds the site with `mkdocs build --strict`.
"""

from __future__ import annotations

import argparse
import html
import inspect
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# What each key is for: the validator says what is allowed, this says why one sets it. A key of the table without a
# line here stops the build (config_page), so a new key cannot go undocumented.
CONFIG_HELP = {
    "framework": "the framework and release: torch, tensorflow, jax, xgboost, scikit-learn or none; NAME==nightly; "
                 "NAME alone, or NAME with a range (tensorflow<2.17), is the newest known release that resolves "
                 "with the rest of the requirements",
    "cuda": "the CUDA version (default: the framework's stable default CUDA; torch: its PyPI wheel's)",
    "python": "the image's Python (default 3.11 where the framework supports it)",
    "gpu": "a GPU image (default: true for frameworks with CUDA builds)",
    "accelerator": "the Vertex AI GPU or TPU the job runs on: a CUDA build with kernels for it is chosen",
    "cuda_flavor": "which nvidia/cuda image flavour (auto: what the framework's wheels need)",
    "base_image": "override the resolved base (a Debian/Ubuntu image; Python is installed if missing)",
    "system_packages": "Debian packages for the image, optionally =VERSION",
    "pip": "PEP 508 requirements installed with the framework",
    "requirements": "the requirements file (or another tool's lock file) inside the trainer directory",
    "requirements_extras": "the extras of a uv.lock or poetry.lock the image installs (autopackage: those the "
                           "repository's own build installs, `uv sync --extra gpu`)",
    "requirements_groups": "the dependency groups of a uv.lock or poetry.lock the image installs (`--group train`, "
                           "`poetry install --with train`)",
    "env": "environment variables of the image",
    "hypertune": "install cloudml-hypertune",
    "import_check": "import what the trainer's entry point imports in the image before its code layer",
    "build_extensions": "build the trainer's compiled extensions in a stage of their own (autopackage finds them)",
    "keep_pip": "leave pip in the image's venv (uv installs without it), for trainers that run pip",
    "trainer": "what runs: module (or script), optional function, package_dir, default args, the repository's own "
               "command and processes_per_node (a number, or auto: one per GPU)",
    "package": "package mode's sdist name and version (default: the directory's name, 0.0.0)",
    "trainer_package": "the trainer's own distribution (name, version, entry_points), installed as metadata before "
                       "the code layer",
    "template": "your own Jinja2 template: {% extends base_template %} and override blocks",
    "image": "the repository the content and git tags go on (no tag here)",
    "python_mirror": "where uv fetches a standalone Python, when one is needed",
    "framework_index_url": "a mirror of the framework's own index (download.pytorch.org/whl/cuXYZ, NVIDIA's)",
    "tags": "more tags for the built image",
    "platform": "the image's platform (default: linux/amd64 for CUDA images)",
    "network": "the RUN steps' network",
    "ca_cert": "a CA bundle (PEM certificates, no key) for a TLS-intercepting proxy: a build secret",
    "pip_index_url": "the package index; credentials allowed: passed as a secret pip.conf, never echoed",
    "pip_conf": "a whole pip.conf, also a secret",
    "pip_google_auth": "index hosts that get a Google access token from Application Default Credentials, as every "
                       "Artifact Registry Python repository (*-python.pkg.dev) does",
    "builder": "which builder builds the image",
    "allow_secrets": "context files that look like secrets but are meant to ship",
    "allow_large": "context files over the size limit that are meant to ship",
    "job": "the Vertex AI CustomJob: the keys below",
    "hyperparameters": "a tuning study: the job becomes a HyperparameterTuningJob",
    "fallbacks": "job settings tried in order when creation is refused for capacity or quota",
    "model": "what a training pipeline (--pipeline) uploads to the Model Registry",
    "cloudbuild": "the Cloud Build settings of builder: cloudbuild: the keys below",
    "variants": "images built from one config: each entry a name and the top-level keys it overrides",
    "job.name": "the job's display name (default: generated, <base>_<YYYYMMDD_HHMMSS>)",
    "job.project": "the Google Cloud project",
    "job.region": "the Vertex AI region",
    "job.image": "the image the job runs (pinned by digest by plan and submit)",
    "job.machine_type": "the chief's machine (default: from the GPU, else n1-standard-4)",
    "job.accelerator_type": "the chief's GPU or TPU (default: the config's accelerator)",
    "job.accelerator_count": "GPUs per replica; sets BUILDKIT_PY_EXPECT_GPUS, which the launcher checks",
    "job.replica_count": "replicas in all: one chief (pool 0), the rest workers (pool 1)",
    "job.boot_disk_type": "the boot disk's type",
    "job.boot_disk_size_gb": "the boot disk's size",
    "job.tpu_topology": "a TPU job's topology; must match its machine type",
    "job.reservation": "a Compute Engine reservation to use",
    "job.workers": "the workers' pool (pool 1), where it differs from the chief's",
    "job.parameter_servers": "the parameter servers' pool (pool 2)",
    "job.reduction_server": "a reduction server pool (pool 2)",
    "job.evaluators": "the evaluators' pool (pool 3)",
    "job.command": "a command run behind the launcher instead of the trainer",
    "job.args": "the trainer's arguments, replacing the image's default args",
    "job.env": "environment variables of the job's containers",
    "job.processes_per_node": "this job's trainer processes per machine (a number, or auto: one per GPU), over "
                              "trainer.processes_per_node",
    "job.python_package": "package mode: an executor image, gs:// package URIs and the module to run",
    "job.timeout": "the job's longest run",
    "job.restart_job_on_worker_restart": "restart every replica when one restarts",
    "job.strategy": "the scheduling strategy (FLEX_START with max_wait_duration)",
    "job.max_wait_duration": "FLEX_START: how long to wait for the machines",
    "job.disable_retries": "no retries of a failed job",
    "job.service_account": "the identity the job runs as",
    "job.network": "the VPC network the job is peered with",
    "job.base_output_directory": "where the job writes (AIP_MODEL_DIR and the others)",
    "job.staging_bucket": "the staging bucket plan shows",
    "job.tensorboard": "a Vertex AI TensorBoard instance",
    "job.enable_web_access": "interactive shell access to the replicas",
    "job.labels": "the job's labels, beside buildkit-py-version, image-sha256 and git-commit",
    "cloudbuild.project": "the project the build runs in (default: job.project, $GOOGLE_CLOUD_PROJECT, ADC's project)",
    "cloudbuild.region": "the build's region (default: job.region, else us-central1)",
    "cloudbuild.bucket": "contexts and logs (default: PROJECT_cloudbuild; it must exist)",
    "cloudbuild.machine_type": "the build machine (UNSPECIFIED: e2-standard-2)",
    "cloudbuild.disk_size_gb": "the build machine's disk",
    "cloudbuild.timeout": "the build's longest run (default 1h, at most 24h)",
    "cloudbuild.worker_pool": "a private pool",
    "cloudbuild.service_account": "the build runs as it",
    "cloudbuild.ca_cert_secret": "a CA bundle from Secret Manager, for pip and apt in RUN steps",
    "cloudbuild.pip_conf_secret": "a pip.conf with index credentials, from Secret Manager",
    "cloudbuild.uv_conf_secret": "the same index as a uv.toml (uv installs), from Secret Manager",
}


def _cell(text: str) -> str:
    """Text in a Markdown table cell: HTML-escaped (a {% or <tag> in help is text) and no column breaks."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def config_tables() -> list[tuple[str, list[tuple[str, object]]]]:
    """The config's key tables, as (prefix, [(key, validator)]): the same objects load_config validates with."""
    from buildkit_py.config import _validators
    from buildkit_py.config.cloudbuild import _CLOUDBUILD_FIELDS
    from buildkit_py.config.job import _JOB_FIELDS

    top = _validators(REPO)
    return [("", list(top.items())), ("job.", list(_JOB_FIELDS.items())), ("cloudbuild.", list(_CLOUDBUILD_FIELDS.items()))]


def allowed(validator, key: str) -> str:
    """What the validator allows, in its own words: its refusal of a probe value (a list's of a probe item)."""
    from buildkit_py.config.reading import _Raw
    from buildkit_py.errors import ConfigError

    def refusal(value) -> str | None:
        try:
            validator(_Raw({}, "probe"), (key,), value)
        except ConfigError as exc:
            return exc.detail
        return None

    def words(text: str) -> str:
        if text.startswith("'?' is not a valid "):  # a parser's refusal: what it parses, not its complaint
            return "a valid " + text.removeprefix("'?' is not a valid ").split(":")[0]
        for prefix in ("'?' is not allowed: ", "the value is not allowed: ", "'?' must be ", "the value must be "):
            text = text.removeprefix(prefix)
        return text

    text = refusal("?")
    if text is None or " not found in " in text:  # a host file's validator looks for the file: no words of its own
        return "a path to a file"
    if text.endswith("must be a list"):
        item = refusal(["?"])
        return f"a list; each entry {words(item)}" if item else "a list"
    return words(text)


def config_page() -> str:
    from buildkit_py.config import Config

    defaults = {f.name: f.default for f in Config.__dataclass_fields__.values()}
    missing = [prefix + key for prefix, table in config_tables() for key, _ in table if prefix + key not in CONFIG_HELP]
    if missing:
        raise SystemExit(f"docs/hooks.py: config keys without a line in CONFIG_HELP: {', '.join(missing)}")
    out = ["# Config reference", "",
           "Generated from the config's own key table (`buildkit_py/config/`) each time the site is built: the "
           "*allowed* column is each validator's own answer to a wrong value. `buildkit.yaml` in the trainer "
           "directory (or `[tool.buildkit-py]` in its `pyproject.toml`); every key but `system_packages`, `pip`, "
           "`env` and `trainer` can be overridden by a flag of the same name (`--base-image`, `--ca-cert`, ...; lists "
           "take one flag per entry). Flags and the file go through the same checks; see "
           "[the config's rules](concepts.md#the-config).", ""]
    for prefix, table in config_tables():
        title = {"": "Top-level keys", "job.": "`job:` keys", "cloudbuild.": "`cloudbuild:` keys"}[prefix]
        out += [f"## {title}", "", "| key | what it is for | allowed | default |", "|---|---|---|---|"]
        for key, validator in table:
            default = defaults.get(key) if not prefix else None
            shown = "" if default in (None, (), "") or not isinstance(default, (str, bool, int)) else f"`{default}`"
            out.append(f"| `{prefix}{key}` | {_cell(CONFIG_HELP[prefix + key])} | {_cell(allowed(validator, key))} "
                       f"| {shown} |")
        out.append("")
    return "\n".join(out)


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.ArgumentParser, str]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                nested = _subcommands(sub, f"{prefix}{name} ")
                out += nested or [(f"{prefix}{name}", sub, helps.get(name, sub.description or ""))]
    return out


def commands() -> list[tuple[str, list[argparse.Action], str]]:
    """(command, its optional flags, its help) for every command of the parser, nested ones (executor build) whole."""
    from buildkit_py import cli

    return [(name, [a for a in sub._actions if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))], text)
            for name, sub, text in _subcommands(cli.build_parser())]


def _flag(action: argparse.Action) -> str:
    if not action.option_strings:  # a positional argument
        metavar = action.metavar or action.dest.upper()
        return f"`{metavar if isinstance(metavar, str) else ' '.join(metavar)}`"
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return f"`{names}`"
    metavar = action.metavar or action.dest.upper()
    return f"`{names} {metavar if isinstance(metavar, str) else ' '.join(metavar)}`"


def _help(action: argparse.Action) -> str:
    choices = f"one of {', '.join(map(str, action.choices))}" if action.choices else ""
    return "; ".join(part for part in (action.help or "", choices) if part and part != argparse.SUPPRESS)


def cli_page() -> str:
    table = commands()
    # A flag most commands share (the config's, the build's) is listed once, with the commands taking it.
    users: dict[tuple, list[str]] = {}
    for name, flags, _ in table:
        for action in flags:
            users.setdefault((tuple(action.option_strings), action.help), []).append(name)
    shared = {key for key, names in users.items() if len(names) >= 4 and key[0]}
    out = ["# Command-line reference", "",
           "Generated from the parser (`buildkit_py.cli.build_parser()`) each time the site is built. Options may stand "
           "anywhere before `--`; only `run`, `autopackage` and `tune` take trainer arguments, after `--`. `--debug`, "
           "anywhere on the command line, adds an error's cause chain. `autopackage` is also a command of its own.", ""]
    for name, flags, text in table:
        out += [f"## `buildkit-py {name}`", "", _cell(text or ""), ""]
        own = [a for a in flags if (tuple(a.option_strings), a.help) not in shared]
        if own:
            out += ["| argument | what it does |", "|---|---|"]
            out += [f"| {_flag(a)} | {_cell(_help(a))} |" for a in own]
            out.append("")
        if len(own) < len(flags):
            out += [f"Also the [shared flags](#shared-flags) that name `{name}`.", ""]
    out += ["## Shared flags", "", "| flag | what it does | commands |", "|---|---|---|"]
    seen = set()
    for _, flags, _ in table:
        for action in flags:
            key = (tuple(action.option_strings), action.help)
            if key in shared and key not in seen:
                seen.add(key)
                out.append(f"| {_flag(action)} | {_cell(_help(action))} | {', '.join(users[key])} |")
    return "\n".join(out) + "\n"


def api_page() -> str:
    import buildkit_py
    from buildkit_py import api

    out = ["# Python API reference", "",
           "Generated from the docstrings each time the site is built: the names of `buildkit_py.__all__` and "
           "`buildkit_py.api.__all__`. The full reference with every field, the errors and the progress modes: "
           "`python3 scripts/api_reference.py DIR` (pdoc). Usage: [the Python API](python-api-guide.md).", ""]
    for module, names in (("buildkit_py", buildkit_py.__all__), ("buildkit_py.api", api.__all__)):
        out += [f"## `{module}`", ""]
        owner = buildkit_py if module == "buildkit_py" else api
        for name in names:
            obj = getattr(owner, name)
            if not (inspect.isclass(obj) or callable(obj)):
                continue
            try:
                signature = str(inspect.signature(obj))
            except (TypeError, ValueError):
                signature = ""
            kind = "class " if inspect.isclass(obj) else ""
            out += [f"### `{module}.{name}`", "", "```python", f"{kind}{name}{signature}", "```", ""]
            out += _docstring(inspect.getdoc(obj) or "") + [""]
    return "\n".join(out)


def _docstring(doc: str) -> list[str]:
    """A docstring as Markdown: its `name: text` paragraphs (the parameters) as a list, the rest as prose."""
    out, in_item = [], False
    for line in doc.splitlines():
        item = re.match(r"([A-Za-z_]\w*): (.*)", line)
        if item:
            out.append(f"- `{item[1]}`: {_cell(item[2])}")
        elif line.strip():
            out.append(("  " if in_item else "") + _cell(line))
        else:
            out.append("")
        in_item = bool(item) or (in_item and bool(line.strip()))
    return out


def error_classes() -> list[type]:
    from buildkit_py import errors

    return sorted((obj for obj in vars(errors).values()
                   if inspect.isclass(obj) and issubclass(obj, errors.BuildkitError)), key=lambda c: (c.exit_code, c.__name__))


def exit_codes_page() -> str:
    from buildkit_py import cli
    from buildkit_py.launcher import constants

    out = ["# Troubleshooting by exit code", "",
           "Generated from the error classes of `buildkit_py.errors` (their `exit_code` and docstrings) and the "
           "launcher's codes each time the site is built. Every error is one line on stderr naming the field, the "
           "value and what is allowed; `--debug` adds the cause chain.", "",
           "## buildkit-py", "", "| exit code | error | what it means |", "|---|---|---|"]
    rows = [(cls.exit_code, f"`{cls.__name__}`", inspect.getdoc(cls) or "") for cls in error_classes()]
    rows.append((cli.INTERNAL_ERROR, "internal error", "a bug of buildkit-py's, not of the input: please report it "
                 "with the `--debug` output"))
    out += [f"| {code} | {name} | {_cell(text)} |" for code, name, text in sorted(rows, key=lambda row: row[0])]
    unknown = sorted(set(LAUNCHER_CODES) - set(vars(constants)))
    if unknown:
        raise SystemExit(f"docs/hooks.py: LAUNCHER_CODES names no launcher exit code: {', '.join(unknown)}")
    out += ["",
            "A command's own results use codes too: `lock --check` and `matrix check` exit 1 when they find something "
            "stale or missing, a job that fails under `--wait` exits 1, and `run` exits with the trainer's own code.", "",
            "## The launcher (inside the image)", "",
            "The image's ENTRYPOINT checks the machine before the trainer starts ([the launcher](launcher.md)).", "",
            "| exit code | name | what it means |", "|---|---|---|"]
    for name, value in sorted(((n, v) for n, v in vars(constants).items() if n.isupper() and isinstance(v, int)
                               and n in LAUNCHER_CODES), key=lambda item: item[1]):
        out.append(f"| {value} | `{name}` | {_cell(LAUNCHER_CODES[name])} |")
    return "\n".join(out) + "\n"


LAUNCHER_CODES = {
    "NO_DRIVER": "no driver in the container (started without --gpus or the NVIDIA runtime)",
    "NVML_FAILED": "the driver does not answer",
    "TOO_FEW_GPUS": "fewer GPUs than expected (BUILDKIT_PY_EXPECT_GPUS)",
    "DRIVER_TOO_OLD": "the driver is too old for the image's CUDA; the message names the driver needed",
    "ARCH_UNSUPPORTED": "the GPU's architecture is not in the framework build (BUILDKIT_PY_CUDA_ARCHS, or the probe)",
    "VISIBLE_DEVICES": "CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES hide the GPUs asked for",
    "CUDNN_MISSING": "cuDNN is missing",
    "FRAMEWORK_NO_GPU": "the framework sees no GPU (BUILDKIT_PY_PROBE)",
    "TPU_NOT_VISIBLE": "fewer TPU chips visible than expected",
    "TPU_RUNTIME_MISSING": "the TPU runtime (libtpu) is missing or unusable",
    "BAD_CLUSTER": "a malformed CLUSTER_SPEC or TF_CONFIG (the field is named)",
    "USAGE": "usage, or a malformed BUILDKIT_PY_* switch",
    "PACKAGE_FETCH_FAILED": "an executor image could not fetch a package (the URI is named)",
    "PACKAGE_INSTALL_FAILED": "pip could not install the packages (its error is shown)",
}

PAGES = {"config.md": config_page, "cli.md": cli_page, "python-api.md": api_page, "exit-codes.md": exit_codes_page}


def on_files(files, config):
    """Add the generated pages to the site (MkDocs 1.6: File.generated)."""
    from mkdocs.structure.files import File

    if str(REPO) not in sys.path:  # the checkout's package, also where another one is installed
        sys.path.insert(0, str(REPO))
    for name, make in PAGES.items():
        files.append(File.generated(config, name, content=make()))
    return files
