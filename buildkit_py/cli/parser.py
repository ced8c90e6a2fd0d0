"""The parser: every command, its flags and their help. The flags every config or build command takes come from
the one table (flags.FLAGS), the job settings from flags.JOB_FLAGS. Options may stand anywhere before `--`; only
what follows `--` goes to the trainer."""

from __future__ import annotations

import argparse
import sys
from functools import lru_cache
from pathlib import Path

from ..errors import SHOWN_CHARS, terminal_line
from ..flags import CLOUDBUILD_HELP, FLAGS, JOB_FLAGS, cloudbuild_flag_name
from ..progress import MODES
from .commands import (
    cmd_autopackage,
    cmd_build,
    cmd_cancel,
    cmd_ci,
    cmd_dockerfile,
    cmd_doctor,
    cmd_executor_build,
    cmd_executor_list,
    cmd_job,
    cmd_lock,
    cmd_logs,
    cmd_make,
    cmd_matrix,
    cmd_package,
    cmd_plan,
    cmd_print,
    cmd_push,
    cmd_resolve,
    cmd_run,
    cmd_submit,
    cmd_tune,
    cmd_verify,
    cmd_versions,
)
from .output import VERSION, api

LOCKED_HELP = "fail (exit 2) unless buildkit.lock is there and current (CI)"


def _common(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: a subcommand's default must not overwrite `--debug` given before the subcommand.
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="on an error, also show its cause chain and traceback")


# How each form of flags.FLAGS is given to argparse.
_FLAG_FORMS = {"text": {}, "path": {"type": Path}, "repeat": {"action": "append"}, "on": {"action": "store_true"},
               "off": {"action": "store_false"},
               "switch": {"action": argparse.BooleanOptionalAction, "default": None}}


def _table_flags(group, which: str) -> None:
    """The flags of flags.FLAGS in one group (config or build), in the table's order."""
    for flag in FLAGS:
        if flag.group == which:
            names = (flag.name, flag.short) if flag.short else (flag.name,)
            group.add_argument(*names, dest=flag.dest, help=flag.help, **_FLAG_FORMS[flag.form],
                               **({"metavar": flag.metavar} if flag.metavar else {}))


def _config_flags(parser: argparse.ArgumentParser) -> None:
    _table_flags(parser.add_argument_group("config (flags override the config file)"), "config")


def _build_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("build (flags override the config file)")
    _table_flags(group, "build")
    group.add_argument("--progress", choices=MODES, default="auto",
                       help="progress display (auto: live on a terminal, plain lines otherwise)")
    _cloudbuild_flags(parser)


def _cloudbuild_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Cloud Build (--builder cloudbuild; flags override `cloudbuild:` in the config)")
    for key, text in CLOUDBUILD_HELP.items():
        group.add_argument(cloudbuild_flag_name(key), dest=f"cloudbuild_{key}", metavar=key.upper(), help=text,
                           type=int if key == "disk_size_gb" else None)
    group.add_argument("--cloudbuild-endpoint", metavar="URL", help="the Cloud Build API (default: "
                       "$BUILDKIT_PY_CLOUDBUILD_ENDPOINT, else https://cloudbuild.googleapis.com)")




def _job_flags(parser: argparse.ArgumentParser) -> None:
    # --image here is the job's image (a reference with tag or digest), not the config's `image` repository.
    parser.conflict_handler = "resolve"
    group = parser.add_argument_group("the Vertex AI job (flags override `job:` in the config)")
    group.add_argument("--image", dest="job_image", metavar="URI", help="the trainer image, e.g. "
                       "us-central1-docker.pkg.dev/PROJECT/REPO/trainer:v1 (pinned by digest when the registry gives one)")
    group.add_argument("--name", help="display name (default: <base>_<YYYYMMDD_HHMMSS>)")
    _job_setting_flags(group)
    group.add_argument("--target", choices=("vertex", "loopback"), default="vertex",
                       help="vertex (default); loopback: an API on this machine, loopback images allowed")
    group.add_argument("--project", help="Google Cloud project (default: job.project, $GOOGLE_CLOUD_PROJECT, ADC's)")
    group.add_argument("--region", help="e.g. us-central1 (default: job.region, else us-central1)")
    _legacy_flag(group)
    _pipeline_flags(group)


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(text.split(",")) if text else ()


def _key_values(text: str) -> dict[str, str]:
    pairs = [item.partition("=") for item in text.split(",")] if text else []
    if any(not eq for _, eq, _ in pairs):
        raise argparse.ArgumentTypeError("KEY=VALUE pairs, separated by commas")
    return {key: value for key, _, value in pairs}


_FORMS = {"text": {}, "int": {"type": int}, "list": {"type": _comma_list}, "labels": {"type": _key_values},
          "pools": {"action": "append", "default": []}}


def _job_setting_flags(group) -> None:
    """The job settings every job command takes, from the one table (flags.JOB_FLAGS)."""
    for flag in JOB_FLAGS:
        group.add_argument(flag.flag, dest=f"job_{flag.key}", metavar=flag.metavar, help=flag.help, **_FORMS[flag.form])


def _legacy_flag(group) -> None:
    group.add_argument("--from-aiplatform", type=Path, metavar="CONFIG_YAML",
                       help="a legacy AI Platform Training config.yaml (trainingInput) decides the job's machines, GPUs and "
                       "image; flags override it, the config's job fills only what it leaves out")
    group.add_argument("--job-config", type=Path, metavar="FILE",
                       help="the file `gcloud ai custom-jobs create --config` (a CustomJobSpec) or `gcloud ai "
                       "hp-tuning-jobs create --config` takes decides the job the same way; ${VAR} and {NAME} filled "
                       "from the environment; the image built (or --image) replaces its imageUri")


def _pipeline_flags(group) -> None:
    group.add_argument("--pipeline", action="store_true", help="a TrainingPipeline: the job, then its model uploaded to "
                       "the Model Registry with a serving image (needs job.base_output_directory)")
    group.add_argument("--serving-image", metavar="IMAGE", help="with --pipeline: the model's serving container, or "
                       "NAME==VERSION of a prebuilt prediction image (default: the prebuilt one for the framework)")
    group.add_argument("--model-name", help="with --pipeline: the uploaded model's display name (default: the "
                       "pipeline's)")


def _api_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api-endpoint", metavar="URL", help="the Vertex AI API (default: $BUILDKIT_PY_API_ENDPOINT, "
                        "else https://REGION-aiplatform.googleapis.com)")
    parser.add_argument("--logging-endpoint", metavar="URL", help="the Cloud Logging API, for the job's log (default: "
                        "$BUILDKIT_PY_LOGGING_ENDPOINT, else https://logging.googleapis.com)")


def _wait_flags(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--wait", action="store_true", help=help_text)
    parser.add_argument("--no-logs", action="store_true", help="with --wait: follow the job's state only, not the "
                        "lines its replicas print (read from Cloud Logging as it runs)")


def _skip_image_check_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--skip-image-check", action="store_true",
                        help="go on when this machine cannot reach the image's registry (VPC Service Controls, Google's "
                        "network only): the image is not checked and the job names it by tag, not pinned by digest")


class _Parser(argparse.ArgumentParser):
    """argparse, with a bad value echoed as any other message shows a value: one bounded line, escaped."""

    def error(self, message: str):
        self.print_usage(sys.stderr)
        line = terminal_line(message.replace("\n", " "))
        if len(line) > 4 * SHOWN_CHARS:
            line = line[:4 * SHOWN_CHARS] + "..."
        self.exit(2, f"{self.prog}: error: {line}\n")


class _Unused:
    """What a command's own flags are added to when another command was given: nothing (argparse parses only the
    command given; its siblings' subparsers and their arguments were most of a short command's start-up)."""

    def __getattr__(self, _name: str):
        return lambda *_args, **_kwargs: self


class _Commands:
    """Adds commands to a subparsers action; only: the command given, the one added whole (the others not at all,
    unless it names none of them: then every command, for argparse's message naming them). under: the command these
    are subcommands of (executor)."""

    def __init__(self, parent, only: str | None, under: str | None = None) -> None:
        self.parent, self.only, self.under = parent, only, under
        self.found = False  # whether `only` named one of the commands added

    def wants(self, name: str) -> bool:
        """Whether command NAME is added whole."""
        return self.only is None or (self.under or name) == self.only

    def add(self, name: str, help_text: str, func, *, config: bool = False, build: bool = False,
            json_help: str = ""):
        if not self.wants(name):
            return _Unused()
        self.found = True
        p = self.parent.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func, takes_trailing=False)
        _common(p)
        if config:
            _config_flags(p)
        if build:
            _build_flags(p)
        if json_help:
            p.add_argument("--json", action="store_true", help=json_help)
        return p


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; only: the command given, the only one built (the first word that is no option), where it is
    one."""
    parser = _Parser(
        prog="buildkit-py",
        description="Turn an ML trainer into a container image and a Vertex AI / AI Platform training job.",
        epilog="Options may stand anywhere before `--`; run, autopackage and tune pass what follows `--` to the trainer.",
    )
    parser.add_argument("--version", action="version", version=VERSION)
    _common(parser)
    command = _Commands(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"), only)
    for commands in (_image_commands, _registry_commands, _run_commands, _executor_commands, _data_commands,
                     _autopackage_commands, _job_commands):
        commands(command)
    return parser if command.found or only is None else build_parser()


def _image_commands(command: _Commands) -> None:
    """resolve, dockerfile, build, lock, make, ci, print."""
    command.add("resolve", "print the resolved plan: base image, CUDA, cuDNN, Python, framework wheel", cmd_resolve,
                config=True, json_help="print the plan as JSON")

    p = command.add("dockerfile", "render the Dockerfile (stdout, or -o FILE plus FILE.dockerignore)", cmd_dockerfile,
                    config=True, json_help="print the Dockerfile and .dockerignore (or their paths) as JSON")
    p.add_argument("-o", "--output", type=Path, help="write the Dockerfile here and FILE.dockerignore beside it")
    p.add_argument("--resolve", action="store_true", help="resolve the requirements against the index first, as "
                   "`resolve` and a build do (default: render without the network, with the choice an earlier "
                   "resolution of the same inputs made)")

    p = command.add("build", "build the image with BuildKit (and push it with --push)", cmd_build, config=True, build=True,
                    json_help="print the result (image, tags, digests) as JSON")
    p.add_argument("--push", action="store_true", help="push every tag after the build")
    p.add_argument("--all-variants", action="store_true", help="build every variant of the config, one image each")
    p.add_argument("--locked", action="store_true", help=LOCKED_HELP)

    p = command.add("lock", "write buildkit.lock: each image's base digest and its packages with sha256 hashes (uv)",
                    cmd_lock, config=True, build=True, json_help="print the result as JSON")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when the lock is stale (inputs changed, "
                   "a base tag moved)")
    p.add_argument("--upgrade", action="store_true", help="re-resolve every package (default: keep the locked versions)")
    p.add_argument("--upgrade-package", action="append", metavar="NAME", dest="upgrade_packages",
                   help="re-resolve this package only (repeatable)")

    p = command.add("make", "write buildkit.mk, Make targets for image, push, package, run... (include it in your Makefile)",
                    cmd_make, config=True, json_help="print the text (or the path written) as JSON")
    p.add_argument("-o", "--output", type=Path, help="write it here (e.g. buildkit.mk) instead of stdout")

    p = command.add("ci", "write a CI pipeline that builds with a registry cache, pushes and saves the digest", cmd_ci,
                    config=True, json_help="print the text (or the path written) as JSON")
    p.add_argument("flavour", metavar="FLAVOUR", help="github, cloudbuild or gitlab")
    p.add_argument("-o", "--output", type=Path, help="write it here (e.g. .github/workflows/image.yml) instead of stdout")

    printable = ", ".join(api.PRINTABLE) if command.wants("print") else ""  # its module loads the config's
    p = command.add("print", "print one value for Make and shell scripts: " + printable, cmd_print,
                    config=True, build=True, json_help="print {NAME: value} as JSON")
    p.add_argument("name", metavar="NAME", help=printable)


def _registry_commands(command: _Commands) -> None:
    """push, verify, doctor."""
    p = command.add("push", "push a local image to its registry and print the digest", cmd_push,
                    json_help="print image, digest and size as JSON")
    p.add_argument("ref", metavar="REF", help="e.g. us-central1-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG")
    p.add_argument("--progress", choices=MODES, default="auto")

    p = command.add("verify", "fetch a pushed image's SBOM and provenance from its registry and check them against the "
                    "image (and a buildkit.lock)", cmd_verify, json_help="print the image, the attestations and the checks as JSON")
    p.add_argument("image", metavar="IMAGE", help="REPOSITORY:TAG or REPOSITORY@sha256:...")
    p.add_argument("--lock", metavar="FILE", help="a buildkit.lock: the SBOM's Python packages must be its own")
    p.add_argument("--progress", choices=MODES, default="auto")

    p = command.add("doctor", "run the launcher's GPU and cluster checks here, and check the build tools", cmd_doctor,
                    json_help="print the findings as JSON")
    p.add_argument("--gpus", type=int, help="fail unless this many GPUs are visible and usable")


def _run_commands(command: _Commands) -> None:
    """run, package: the image or the sdist, on this machine."""
    p = command.add("run", "run the image locally the way Vertex AI runs it (CLUSTER_SPEC, AIP_* dirs)", cmd_run,
                    config=True, build=True, json_help="print job id, exit codes, outputs and metrics as JSON")
    p.add_argument("run_image", nargs="?", metavar="IMAGE", help="image to run (default: build the config's image first)")
    p.add_argument("--gpus", type=int, default=0, help="GPUs per container (passed as --gpus and checked)")
    p.add_argument("--workers", type=int, default=0, help="worker containers besides the chief")
    p.add_argument("--processes-per-node", metavar="N|auto", help="trainer processes in each container, each with "
                   "torchrun's variables (auto: one per GPU; default: trainer.processes_per_node, else one)")
    p.add_argument("--output", type=Path, help="local directory for AIP_MODEL_DIR etc. (default: under ~/.cache/buildkit-py/runs)")
    p.add_argument("--legacy", action="store_true", help="as AI Platform Training ran it: TF_CONFIG with master, worker "
                   "and ps tasks instead of CLUSTER_SPEC, and --job-dir after the trainer's arguments")
    p.add_argument("--ps", type=int, default=0, help="parameter server containers (with --legacy)")
    group = p.add_argument_group("a Python package on an executor image (Vertex AI's PythonPackageSpec)")
    group.add_argument("--executor", metavar="IMAGE", help="an executor image (buildkit-py executor build), or NAME==VERSION "
                       "of Google's prebuilt training images (buildkit-py executor list)")
    group.add_argument("--package", action="append", metavar="DIST", dest="packages",
                       help="an sdist to install at start: a path, file://, https:// or gs:// URI (repeatable)")
    group.add_argument("--module", help="the module to run, python -m MODULE (default: the config's trainer)")
    group.add_argument("--region", help="picks a prebuilt image's regional repository, e.g. europe-west4")
    p.set_defaults(takes_trailing=True)
    p.usage = "buildkit-py run [IMAGE | --executor IMAGE --package DIST] [options] [-- TRAINER ARGS...]"

    p = command.add("package", "build the trainer as a reproducible sdist (and stage it) for prebuilt containers",
                    cmd_package, config=True, json_help="print the sdist (path, sha256, size, module) and its URI as JSON")
    p.add_argument("path", nargs="?", type=Path, metavar="PATH", help="the trainer directory (default: --dir or .)")
    p.add_argument("--module", help="the module to run, python -m MODULE (default: the config's trainer)")
    p.add_argument("--script", help="a single .py script, packaged as aiplatform_custom_trainer_script.task")
    p.add_argument("--name", help="distribution name (default: the config's package.name, else the directory's name)")
    p.add_argument("--version", help="PEP 440 version (default: the config's package.version, else 0.0.0)")
    p.add_argument("--out", type=Path, help="directory for the sdist (default: ./dist)")
    p.add_argument("--stage", metavar="URI", help="upload to gs://BUCKET/PREFIX, file:///DIR or a directory; the object "
                                                  "name holds the content digest")


def _executor_commands(command: _Commands) -> None:
    """executor build, executor list."""
    if not command.wants("executor"):
        return
    command.found = True
    p = command.parent.add_parser("executor", help="executor images: build one, or list Google's prebuilt training "
                                  "images", description="executor images run a trainer shipped as a Python package")
    _common(p)
    executor = _Commands(p.add_subparsers(dest="executor_command", required=True, metavar="SUBCOMMAND"), command.only,
                         under="executor")
    p = executor.add("build", "build an executor image: framework, hypertune and the launcher, no trainer code",
                     cmd_executor_build, config=True, build=True, json_help="print the result (image, tags, digests) as JSON")
    p.add_argument("--push", action="store_true", help="push every tag after the build")
    p.add_argument("--locked", action="store_true", help=LOCKED_HELP)
    p = executor.add("list", "list Google's prebuilt training images (base_images/executors.yaml)", cmd_executor_list,
                     json_help="print as JSON")
    p.add_argument("framework", nargs="?", help="one framework (default: all)")
    p.add_argument("--region", help="the job's region: picks the us, europe or asia repository")


def _data_commands(command: _Commands) -> None:
    """versions, matrix: the version data."""
    p = command.add("versions", "list the framework releases, CUDA versions and Pythons buildkit-py knows", cmd_versions,
                    json_help="print as JSON")
    p.add_argument("framework", nargs="?", help="one framework (default: all)")
    p.add_argument("--accelerator", help="only the releases and CUDA builds with kernels for this Vertex AI GPU, "
                                         "e.g. NVIDIA_TESLA_V100")

    p = command.add("matrix", "check the version data against the package index (check), or also write the releases "
                    "it lacks to your overlay (refresh)", cmd_matrix, json_help="print the findings as JSON")
    p.add_argument("action", choices=("check", "refresh"))
    p.add_argument("frameworks", nargs="*", metavar="FRAMEWORK", help="default: all")
    p.add_argument("--config", type=Path, help="buildkit.yaml whose pip_index_url and ca_cert to use")
    p.add_argument("--dir", type=Path, default=None, help="directory to find the config in (default: .)")
    p.add_argument("--pip-index-url", help="the index to read (default: pip_index_url, $PIP_INDEX_URL, else PyPI)")
    p.add_argument("--ca-cert", help="CA bundle for the index (default: PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE)")
    p.add_argument("--timeout", type=float, help="seconds per request")


def _autopackage_commands(command: _Commands) -> None:
    """autopackage, tune."""
    p = command.add("autopackage", "from a trainer directory to a running job: infer the module, requirements and "
                    "framework pin, then build, push and run locally", cmd_autopackage, config=True, build=True,
                    json_help="print what was inferred, each stage and the run as JSON")
    p.add_argument("path", nargs="?", type=Path, metavar="DIR", help="the trainer directory (default: --dir or .)")
    p.add_argument("--target", help="local: build, push to the image's registry when --image names one, and run here "
                   "with the cloud's environment; vertex: build, push, submit (default: vertex when a project is "
                   "configured, else local); loopback: a Vertex AI API on this machine")
    p.add_argument("--mode", default="container", help="container (default): a trainer image; package: an sdist of the "
                   "trainer run on an executor image (framework, hypertune, launcher; no trainer code)")
    p.add_argument("--project", help="Google Cloud project for --target vertex (default: job.project, $GOOGLE_CLOUD_PROJECT)")
    p.add_argument("--region", help="region for --target vertex (default: job.region, else us-central1)")
    _wait_flags(p, "with vertex: follow the job until it ends, showing its log; exit 1 when it fails")
    _job_setting_flags(p.add_argument_group("the Vertex AI job, with --target vertex (flags override `job:` in the "
                                            "config)"))
    _legacy_flag(p)
    _pipeline_flags(p)
    p.add_argument("--poll", type=float, help=argparse.SUPPRESS)
    _api_flags(p)
    _skip_image_check_flag(p)
    p.add_argument("--module", help="the trainer to run, python -m MODULE (default: inferred)")
    p.add_argument("--script", help="a script of DIR to run as the trainer, e.g. train.py (default: inferred)")
    p.add_argument("--dry-run", action="store_true", help="infer and print the plan; build, push and run nothing")
    p.add_argument("--write-config", action="store_true", help="save what was inferred as buildkit.yaml in DIR")
    p.add_argument("--strict", action="store_true", help="exit 2 when the trainer imports what its requirements do not "
                   "declare (default: add it, with a note)")
    p.add_argument("--dockerfile", action="store_true", help="build DIR's own Dockerfile as it is instead of rendering "
                   "one (nothing inferred); by default it is ignored, with a note")
    p.add_argument("--with-launcher", action="store_true", help="with --dockerfile: run buildkit-py's launcher (GPU, "
                   "driver and cluster checks) before the Dockerfile's own ENTRYPOINT/CMD (exec form)")
    p.add_argument("--gpus", type=int, default=0, help="GPUs for the local run")
    p.add_argument("--output", type=Path, help="directory for the run's outputs (default: ~/.cache/buildkit-py/runs/...)")
    p.set_defaults(takes_trailing=True)

    p = command.add("tune", "run the config's hyperparameter study on this machine: grid, random or Bayesian (optuna) "
                    "search, parallel trials, each as the service runs it", cmd_tune, config=True, build=True,
                    json_help="print the trials and the best as JSON")
    p.add_argument("run_image", nargs="?", metavar="IMAGE", help="image to run (default: build the config's image first)")
    p.add_argument("--local", action="store_true", help="run the trials here (required: the service's study is `submit`)")
    p.add_argument("--gpus", type=int, default=0, help="GPUs per trial")
    p.add_argument("--output", type=Path, help="directory for the trials' outputs (default: under ~/.cache/buildkit-py/runs)")
    p.add_argument("--trial-timeout", type=float, help="seconds before a trial is stopped and counted failed "
                   "(default: job.timeout)")
    p.add_argument("--seed", type=int, help="seed for random search and optuna")
    p.set_defaults(takes_trailing=True)


def _job_commands(command: _Commands) -> None:
    """job, plan, submit, cancel, logs: the Vertex AI job."""
    p = command.add("job", "write the Vertex AI CustomJob (or HyperparameterTuningJob) for the config and flags", cmd_job,
                    config=True, json_help="print the job resource as JSON (default YAML)")
    _job_flags(p)
    p.add_argument("--yaml", action="store_true", help="print YAML (the default)")
    p.add_argument("-o", "--output", type=Path, help="write the spec here (JSON when the name ends .json)")

    p = command.add("plan", "check the job before submitting: image in its registry, platform, machine and GPU fit, "
                    "strategy, staging; print the request", cmd_plan, config=True, json_help="print request and checks as JSON")
    _job_flags(p)
    _api_flags(p)
    _skip_image_check_flag(p)

    p = command.add("submit", "submit the job to Vertex AI (after the plan's checks) and print its name and console URL",
                    cmd_submit, config=True, json_help="print name, console URL and state as JSON")
    _job_flags(p)
    _api_flags(p)
    _skip_image_check_flag(p)
    _wait_flags(p, "follow the job until it ends, showing its log; exit 1 when it fails")
    p.add_argument("--dry-run", action="store_true", help="only the plan: nothing is sent")
    p.add_argument("--poll", type=float, help=argparse.SUPPRESS)

    p = command.add("cancel", "cancel a Vertex AI job", cmd_cancel, json_help="print name and state as JSON")
    p.add_argument("job_name", metavar="NAME", help="projects/P/locations/R/customJobs/ID as submit prints it, or an ID "
                                                    "with --project and --region")
    p.add_argument("--project", help="with a bare ID")
    p.add_argument("--region", help="with a bare ID")
    _api_flags(p)
    p = command.add("logs", "print a Vertex AI job's log from Cloud Logging (each line with its replica)", cmd_logs,
                    json_help="print the lines, the state and the error as JSON")
    p.add_argument("job", metavar="JOB", help="the job's name or console URL as submit prints them, or its ID with "
                                              "--project and --region")
    p.add_argument("--project", help="with a bare ID")
    p.add_argument("--region", help="with a bare ID")
    p.add_argument("--follow", "-f", action="store_true", help="show the lines as they come until the job ends")
    p.add_argument("--poll", type=float, metavar="SECONDS", help="with --follow: seconds between reads (default 15)")
    _api_flags(p)


@lru_cache(maxsize=32)
def parser_for(word: str | None) -> argparse.ArgumentParser:
    """The parser `parse` uses for a command word, built once a process (parsing leaves a parser as it was): the warm
    process builds its commands' before it forks, and each child parses with them."""
    return build_parser(word)


def parse(argv: list[str]) -> argparse.Namespace:
    """Split off what follows the first `--` (the trainer's arguments), then parse the options,
    wherever they stand."""
    trailing: list[str] | None = None
    if "--" in argv:
        cut = argv.index("--")
        argv, trailing = argv[:cut], argv[cut + 1:]
    # The command is the first word: no option before it takes a value.
    parser = parser_for(next((word for word in argv if not word.startswith("-")), None))
    args = parser.parse_args(argv)
    if trailing is not None and not args.takes_trailing:
        parser.error(f"`{args.command}` takes no trainer arguments after `--`")
    args.trainer_args = trailing or []
    return args
