"""Command line: parses arguments, calls the pipeline, prints results. No logic of its own."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import __version__
from .build import BuildOptions, build
from .builders import BUILDERS
from .config import load_config
from .doctor import diagnose
from .errors import BuildkitError
from .fsutil import write_atomic
from .jobs.local import run_local
from .matrix import load_matrix
from .plan import make_plan
from .progress import reporter
from .refs import parse_ref
from .registry import push
from .render import render_dockerfile, render_project_dockerignore
from .resources import LAUNCHER_CONTEXT_DIR, launcher_sources


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


def _load(args: argparse.Namespace):
    overrides = {
        "framework": args.framework,
        "python": args.python,
        "cuda": args.cuda,
        "base_image": args.base_image,
        "gpu": args.gpu,
        "hypertune": args.hypertune,
    }
    directory = args.dir or (args.config.parent if args.config else Path.cwd())
    return load_config(args.config, directory, overrides)


def cmd_resolve(args: argparse.Namespace) -> int:
    plan = make_plan(_load(args))
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
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
        ("entrypoint", " ".join(plan.entrypoint + plan.cmd) or "none"),
    ]
    for name, value in rows:
        print(f"{name:<11} {value}")
    return 0


def cmd_dockerfile(args: argparse.Namespace) -> int:
    config = _load(args)
    dockerfile = render_dockerfile(make_plan(config), root=config.root)
    dockerignore = render_project_dockerignore(config.root)
    if args.output:
        # BuildKit reads <Dockerfile>.dockerignore before the context's own .dockerignore.
        ignore_path = args.output.with_name(args.output.name + ".dockerignore")
        write_atomic(args.output, dockerfile)
        write_atomic(ignore_path, dockerignore)
        # The Dockerfile COPYs the launcher from the context: put it there for `docker build`.
        for rel, source in launcher_sources():
            write_atomic(config.root / rel, source.read_text(encoding="utf-8"))
        launcher = config.root / LAUNCHER_CONTEXT_DIR
        if args.json:
            print(json.dumps({"dockerfile": str(args.output), "dockerignore": str(ignore_path), "launcher": str(launcher)}))
        else:
            print(f"wrote {args.output}, {ignore_path} and {launcher}/", file=sys.stderr)
    elif args.json:
        print(json.dumps({"dockerfile": dockerfile, "dockerignore": dockerignore}))
    else:
        sys.stdout.write(dockerfile)
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    options = BuildOptions(
        tags=tuple(args.tag or ()),
        push=args.push,
        platform=args.platform,
        network=args.network,
        ca_cert=args.ca_cert,
        pip_index_url=args.pip_index_url,
        pip_conf=args.pip_conf,
        builder=args.builder,
        docker=args.docker,
        no_cache=args.no_cache,
        allow_secrets=tuple(args.allow_secret or ()),
    )
    result = build(_load(args), options, reporter(args.progress))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    print(f"image {result.image_id}{'' if result.built else ' (up to date)'}")
    for tag in result.tags:
        print(f"tag   {tag}")
    for pushed in result.pushed:
        print(f"push  {pushed.image}")
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    result = push(parse_ref(args.ref, field="REF"), reporter(args.progress))
    if args.json:
        print(json.dumps(result.__dict__))
    else:
        print(result.image)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    findings = diagnose(args.gpus)
    if args.json:
        print(json.dumps([f.__dict__ for f in findings], indent=2))
    else:
        for f in findings:
            print(f"{'ok ' if f.ok else 'FAIL'} {f.name:<9} {f.message}")
    # GPU and cluster failures are what a job would die of; missing build tools are only reported.
    return next((f.code for f in findings if not f.ok and f.code), 0)


def cmd_run(args: argparse.Namespace) -> int:
    rep = reporter(args.progress)
    image = args.image
    if image is None:
        image = build(_load(args), BuildOptions(network=args.network), rep).tags[0]
    trainer_args = args.args[1:] if args.args[:1] == ["--"] else args.args
    result = run_local(image, workers=args.workers, gpus=args.gpus, output=args.output, args=tuple(trainer_args),
                       reporter=rep, network=args.network)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(f"job {result.job_id}: exit code {result.exit_code}; outputs in {result.output_dir}")
        for metric in result.metrics:
            print("metric " + json.dumps(metric))
    return result.exit_code


def cmd_versions(args: argparse.Namespace) -> int:
    matrix = load_matrix()
    names = [args.framework] if args.framework else sorted(matrix.frameworks)
    out = {}
    for name in names:
        fw = matrix.framework(name)
        if fw is None:
            raise BuildkitError(f"framework: unknown framework {name!r}; known: {', '.join(sorted(matrix.frameworks))}")
        out[fw.name] = {
            s.series: {"releases": list(s.releases), "cuda": list(s.cuda), "python": list(s.python)}
            for s in fw.series + ((fw.nightly,) if fw.nightly else ())
        }
    if args.json:
        print(json.dumps(out, indent=2))
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
    )
    parser.add_argument("--version", action="version", version=f"buildkit-py {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("resolve", help="print the resolved plan: base image, CUDA, cuDNN, Python, framework wheel")
    _config_flags(p)
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=cmd_resolve)

    p = sub.add_parser("dockerfile", help="render the Dockerfile (stdout, or -o FILE plus FILE.dockerignore)")
    _config_flags(p)
    p.add_argument("-o", "--output", type=Path, help="write the Dockerfile here and FILE.dockerignore beside it")
    p.add_argument("--json", action="store_true", help="print the Dockerfile and .dockerignore (or their paths) as JSON")
    p.set_defaults(func=cmd_dockerfile)

    p = sub.add_parser("build", help="build the image with BuildKit (and push it with --push)")
    _config_flags(p)
    p.add_argument("--tag", "-t", action="append", metavar="REF",
                   help="also tag as REF (repeatable); without a tag part it gets the content tag")
    p.add_argument("--push", action="store_true", help="push every tag after the build")
    p.add_argument("--platform", help="target platform (default: linux/amd64 for CUDA images)")
    p.add_argument("--network", help="network for RUN steps, e.g. host")
    p.add_argument("--ca-cert", type=Path,
                   help="CA bundle for pip/apt behind a TLS-intercepting proxy, passed as a BuildKit secret "
                        "(default: the file named by PIP_CERT, REQUESTS_CA_BUNDLE or SSL_CERT_FILE)")
    p.add_argument("--pip-index-url", help="pip index URL, credentials allowed: passed as a secret pip.conf")
    p.add_argument("--pip-conf", type=Path, help="a pip.conf passed as a BuildKit secret")
    p.add_argument("--builder", choices=BUILDERS, default="auto", help="build backend (default: auto = BuildKit)")
    p.add_argument("--docker", help="docker client to run BuildKit with (default: $BUILDKIT_PY_DOCKER or found)")
    p.add_argument("--no-cache", action="store_true", help="rebuild every layer")
    p.add_argument("--allow-secret", action="append", metavar="PATTERN",
                   help="let a file that looks like a secret into the build context (repeatable)")
    p.add_argument("--progress", choices=("auto", "plain", "tty", "json"), default="auto",
                   help="progress display (auto: live on a terminal, plain lines otherwise)")
    p.add_argument("--json", action="store_true", help="print the result (image, tags, digests) as JSON")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("push", help="push a local image to its registry and print the digest")
    p.add_argument("ref", metavar="REF", help="e.g. us-central1-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG")
    p.add_argument("--progress", choices=("auto", "plain", "tty", "json"), default="auto")
    p.add_argument("--json", action="store_true", help="print image, digest and size as JSON")
    p.set_defaults(func=cmd_push)

    p = sub.add_parser("doctor", help="run the launcher's GPU and cluster checks here, and check the build tools")
    p.add_argument("--gpus", type=int, help="fail unless this many GPUs are visible and usable")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("run", help="run the image locally the way Vertex AI runs it (CLUSTER_SPEC, AIP_* dirs)")
    p.add_argument("image", nargs="?", help="image to run (default: build the config's image first)")
    _config_flags(p)
    p.add_argument("--gpus", type=int, default=0, help="GPUs per container (passed as --gpus and checked)")
    p.add_argument("--workers", type=int, default=0, help="worker containers besides the chief")
    p.add_argument("--output", type=Path, help="local directory for AIP_MODEL_DIR etc. (default: buildkit-output/JOB)")
    p.add_argument("--network", default="host", help="container network (default: host, for loopback rendezvous)")
    p.add_argument("--progress", choices=("auto", "plain", "tty", "json"), default="auto")
    p.add_argument("--json", action="store_true", help="print job id, exit codes, outputs and metrics as JSON")
    p.add_argument("args", nargs=argparse.REMAINDER, help="-- ARGS: replace the trainer's default args")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("versions", help="list the framework releases, CUDA versions and Pythons buildkit-py knows")
    p.add_argument("framework", nargs="?", help="one framework (default: all)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=cmd_versions)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BuildkitError as exc:
        print(f"buildkit-py: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("buildkit-py: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
