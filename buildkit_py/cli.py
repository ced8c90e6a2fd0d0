"""Command line: parses arguments, calls the API, prints results. No logic of its own.

Options may stand anywhere before `--`; only what follows `--` goes to the trainer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

from . import __version__, api
from .errors import BuildkitError
from .progress import reporter

PROGRESS = ("auto", "plain", "tty", "json")
INTERNAL_ERROR = 70  # EX_SOFTWARE: a bug of ours, not the user's input


def _common(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: a subcommand's default must not overwrite `--debug` given before the subcommand.
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="on an error, also show its cause chain and traceback")


def _config_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("config (flags override the config file)")
    group.add_argument("--config", type=Path, help="buildkit.yaml or pyproject.toml (default: found in --dir)")
    group.add_argument("--dir", type=Path, default=None, help="trainer directory and build context (default: .)")
    group.add_argument("--framework", help="e.g. torch==2.5.1, tensorflow==2.15.1, jax==nightly, none")
    group.add_argument("--python", help="Python version, e.g. 3.11")
    group.add_argument("--cuda", help="CUDA version, e.g. 12.4 (default: from the framework)")
    group.add_argument("--base-image", help="use this base image instead of the resolved one")
    group.add_argument("--gpu", action=argparse.BooleanOptionalAction, default=None, help="build for GPUs")
    group.add_argument("--hypertune", action=argparse.BooleanOptionalAction, default=None,
                       help="install cloudml-hypertune (default: yes)")
    group.add_argument("--requirements", help="a requirements file in the trainer directory")
    group.add_argument("--template", help="your own Dockerfile template in the trainer directory")
    group.add_argument("--image", help="repository for the content and git tags, e.g. 127.0.0.1:5000/trainer")
    group.add_argument("--python-mirror", help="mirror for standalone Python downloads (UV_PYTHON_INSTALL_MIRROR)")


def _build_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("build (flags override the config file)")
    group.add_argument("--tag", "-t", action="append", metavar="REF", dest="tags",
                       help="also tag as REF (repeatable); without a tag part it gets the content tag")
    group.add_argument("--platform", help="target platform (default: linux/amd64 for CUDA images)")
    group.add_argument("--network", help="network for RUN steps: default, host or none")
    group.add_argument("--ca-cert",
                       help="CA bundle for pip/apt behind a TLS-intercepting proxy, passed as a BuildKit secret "
                            "(default: the file named by PIP_CERT, REQUESTS_CA_BUNDLE or SSL_CERT_FILE)")
    group.add_argument("--pip-index-url", help="pip index URL, credentials allowed: passed as a secret pip.conf")
    group.add_argument("--pip-conf", help="a pip.conf passed as a BuildKit secret")
    group.add_argument("--builder", help="build backend: auto (BuildKit), buildkit or legacy")
    group.add_argument("--allow-secret", action="append", metavar="PATTERN", dest="allow_secrets",
                       help="let a file that looks like a secret into the build context (repeatable)")
    group.add_argument("--allow-large", action="append", metavar="PATTERN", dest="allow_large",
                       help="let a very large file into the build context (repeatable)")
    group.add_argument("--docker", help="docker client to run BuildKit with (default: $BUILDKIT_PY_DOCKER or found)")
    group.add_argument("--no-cache", action="store_true", help="rebuild every layer")
    group.add_argument("--progress", choices=PROGRESS, default="auto",
                       help="progress display (auto: live on a terminal, plain lines otherwise)")


_OVERRIDES = ("framework", "python", "cuda", "base_image", "gpu", "hypertune", "requirements", "template", "image",
              "python_mirror", "tags", "platform", "network", "ca_cert", "pip_index_url", "pip_conf", "builder",
              "allow_secrets", "allow_large")


def _project(args: argparse.Namespace) -> api.Project:
    overrides = tuple((key, getattr(args, key)) for key in _OVERRIDES
                      if getattr(args, key, None) is not None)
    return api.Project(config=args.config, directory=args.dir, overrides=overrides)


def _build_options(args: argparse.Namespace) -> api.BuildOptions:
    return api.BuildOptions(push=getattr(args, "push", False), docker=args.docker, no_cache=args.no_cache)


def _print_json(value) -> None:
    print(json.dumps(value, indent=2))


def cmd_resolve(args: argparse.Namespace) -> int:
    plan = api.resolve(_project(args))
    if args.json:
        _print_json(plan.to_dict())
        return 0
    fw = plan.framework
    rows = [
        ("base image", plan.base_image),
        ("CUDA", plan.cuda or "none"),
        ("cuDNN", plan.cudnn or "none"),
        ("Python", f"{plan.python.version} ({plan.python.install})"),
        ("framework", fw.requirement if fw else "none"),
        ("index URL", (fw.index_url if fw else None) or "PyPI"),
        ("hypertune", plan.hypertune or "no"),
        ("entrypoint", json.dumps(list(plan.entrypoint + plan.cmd)) if plan.entrypoint else "none"),
    ]
    for name, value in rows:
        print(f"{name:<11} {value}")
    return 0


def cmd_dockerfile(args: argparse.Namespace) -> int:
    result = api.dockerfile(_project(args), args.output)
    if args.json:
        print(json.dumps(result.to_dict()))
    elif result.written:
        print("wrote " + ", ".join(map(str, result.written)), file=sys.stderr)
    else:
        sys.stdout.write(result.dockerfile)
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    result = api.build(_project(args), _build_options(args), reporter(args.progress))
    if args.json:
        _print_json(result.to_dict())
        return 0
    print(f"image {result.image_id}{'' if result.built else ' (up to date)'}")
    for tag in result.tags:
        print(f"tag   {tag}")
    for pushed in result.pushed:
        print(f"push  {pushed.image}")
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    result = api.push(args.ref, reporter(args.progress))
    if args.json:
        print(json.dumps(result.__dict__))
    else:
        print(result.image)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    findings = api.doctor(args.gpus)
    if args.json:
        _print_json([f.__dict__ for f in findings])
    else:
        for f in findings:
            print(f"{'ok ' if f.ok else 'FAIL'} {f.name:<9} {f.message}")
    # GPU and cluster failures are what a job would die of; missing build tools are only reported.
    return next((f.code for f in findings if not f.ok and f.code), 0)


def cmd_run(args: argparse.Namespace) -> int:
    options = api.RunOptions(image=args.run_image, gpus=args.gpus, workers=args.workers, output=args.output,
                             args=tuple(args.trainer_args), build=_build_options(args))
    result = api.run(_project(args), options, reporter(args.progress))
    if args.json:
        _print_json(result.to_dict())
    else:
        print(f"job {result.job_id}: exit code {result.exit_code}; outputs in {result.output_dir}")
        for metric in result.metrics:
            print("metric " + json.dumps(metric))
    return result.exit_code


def cmd_versions(args: argparse.Namespace) -> int:
    out = api.versions(args.framework).to_dict()
    if args.json:
        _print_json(out)
        return 0
    for name, series in out.items():
        print(name)
        for key, info in series.items():
            cuda = ", ".join(info["cuda"]) or "CPU only"
            print(f"  {key:<8} releases {', '.join(info['releases']) or '(nightly)'}; CUDA {cuda}; "
                  f"Python {', '.join(info['python'])}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="buildkit-py",
        description="Turn an ML trainer into a container image and a Vertex AI / AI Platform training job.",
        epilog="Options may stand anywhere before `--`; `run` passes what follows `--` to the trainer.",
    )
    parser.add_argument("--version", action="version", version=f"buildkit-py {__version__}")
    _common(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, func, *, config: bool = False, build: bool = False, json_help: str = ""):
        p = sub.add_parser(name, help=help_text, description=help_text)
        _common(p)
        if config:
            _config_flags(p)
        if build:
            _build_flags(p)
        if json_help:
            p.add_argument("--json", action="store_true", help=json_help)
        p.set_defaults(func=func, takes_trailing=False)
        return p

    command("resolve", "print the resolved plan: base image, CUDA, cuDNN, Python, framework wheel", cmd_resolve,
            config=True, json_help="print the plan as JSON")

    p = command("dockerfile", "render the Dockerfile (stdout, or -o FILE plus FILE.dockerignore)", cmd_dockerfile,
                config=True, json_help="print the Dockerfile and .dockerignore (or their paths) as JSON")
    p.add_argument("-o", "--output", type=Path, help="write the Dockerfile here and FILE.dockerignore beside it")

    p = command("build", "build the image with BuildKit (and push it with --push)", cmd_build, config=True, build=True,
                json_help="print the result (image, tags, digests) as JSON")
    p.add_argument("--push", action="store_true", help="push every tag after the build")

    p = command("push", "push a local image to its registry and print the digest", cmd_push,
                json_help="print image, digest and size as JSON")
    p.add_argument("ref", metavar="REF", help="e.g. us-central1-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG")
    p.add_argument("--progress", choices=PROGRESS, default="auto")

    p = command("doctor", "run the launcher's GPU and cluster checks here, and check the build tools", cmd_doctor,
                json_help="print the findings as JSON")
    p.add_argument("--gpus", type=int, help="fail unless this many GPUs are visible and usable")

    p = command("run", "run the image locally the way Vertex AI runs it (CLUSTER_SPEC, AIP_* dirs)", cmd_run,
                config=True, build=True, json_help="print job id, exit codes, outputs and metrics as JSON")
    p.add_argument("run_image", nargs="?", metavar="IMAGE", help="image to run (default: build the config's image first)")
    p.add_argument("--gpus", type=int, default=0, help="GPUs per container (passed as --gpus and checked)")
    p.add_argument("--workers", type=int, default=0, help="worker containers besides the chief")
    p.add_argument("--output", type=Path, help="local directory for AIP_MODEL_DIR etc. (default: buildkit-output/JOB)")
    p.set_defaults(takes_trailing=True)
    p.usage = "buildkit-py run [IMAGE] [options] [-- TRAINER ARGS...]"

    p = command("versions", "list the framework releases, CUDA versions and Pythons buildkit-py knows", cmd_versions,
                json_help="print as JSON")
    p.add_argument("framework", nargs="?", help="one framework (default: all)")
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """Split off what follows the first `--` (the trainer's arguments), then parse the options,
    wherever they stand."""
    trailing: list[str] | None = None
    if "--" in argv:
        cut = argv.index("--")
        argv, trailing = argv[:cut], argv[cut + 1:]
    parser = build_parser()
    args = parser.parse_args(argv)
    if trailing is not None and not args.takes_trailing:
        parser.error(f"`{args.command}` takes no trainer arguments after `--`")
    args.trainer_args = trailing or []
    return args


def _report(exc: BaseException, debug: bool) -> None:
    if not debug:
        return
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:  # __context__ too: `from None` hides it, --debug shows it
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    for i, item in enumerate(chain):
        print(("" if i == 0 else "caused by: ") + "".join(traceback.format_exception(item, chain=False)).rstrip(),
              file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    debug = getattr(args, "debug", False)
    try:
        code = args.func(args)
        sys.stdout.flush()
        return code
    except BuildkitError as exc:
        print(f"buildkit-py: error: {exc}", file=sys.stderr)
        _report(exc, debug)
        return exc.exit_code
    except KeyboardInterrupt:
        print("buildkit-py: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`resolve --json | head`): end quietly, as a killed pipeline member would.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        where = f" {exc.filename!r}:" if exc.filename else ""
        print(f"buildkit-py: error:{where} {exc.strerror or exc}", file=sys.stderr)
        _report(exc, debug)
        return 1
    except Exception as exc:  # a bug of ours: say so in one line; --debug shows where
        print(f"buildkit-py: internal error: {type(exc).__name__}: {exc} "
              "(run again with --debug for the traceback, and please report it)", file=sys.stderr)
        _report(exc, debug)
        return INTERNAL_ERROR


if __name__ == "__main__":
    sys.exit(main())
