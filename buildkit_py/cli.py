"""Command line: parses arguments, calls the API, prints results. No logic of its own.

Options may stand anywhere before `--`; only what follows `--` goes to the trainer.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path

from . import __version__
from .errors import SHOWN_CHARS, BuildkitError, ConfigError, show, terminal_line
from .progress import MODES, reporter


def _lazy(name: str):
    """The module, executed on first attribute access (importlib's documented LazyLoader recipe): the API
    and all it imports cost nothing to `--version`, whose answer needs none of it."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


api = _lazy(f"{__package__}.api")
VERSION = f"buildkit-py {__version__}"

LOCKED_HELP = "fail (exit 2) unless buildkit.lock is there and current (CI)"
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
    group.add_argument("--accelerator", help="the Vertex AI GPU the job runs on, e.g. NVIDIA_TESLA_T4: a CUDA build "
                                             "with kernels for it is chosen")
    group.add_argument("--cuda-flavor", help="nvidia/cuda flavour: auto (default), base, runtime, cudnn-runtime, devel")
    group.add_argument("--base-image", help="use this base image instead of the resolved one")
    group.add_argument("--gpu", action=argparse.BooleanOptionalAction, default=None, help="build for GPUs")
    group.add_argument("--hypertune", action=argparse.BooleanOptionalAction, default=None,
                       help="install cloudml-hypertune (default: yes)")
    group.add_argument("--import-check", action=argparse.BooleanOptionalAction, default=None,
                       help="import what the trainer imports in the image before its code layer (default: yes)")
    group.add_argument("--build-extensions", action=argparse.BooleanOptionalAction, default=None,
                       help="build the trainer directory's compiled extensions (setup.py ext_modules, Cython) in a stage "
                            "of their own and copy them beside the code (default: no; autopackage finds them)")
    group.add_argument("--keep-pip", action=argparse.BooleanOptionalAction, default=None,
                       help="leave pip in the image's venv (default: no; uv installs the packages)")
    group.add_argument("--requirements", help="a requirements file in the trainer directory")
    group.add_argument("--template", help="your own Dockerfile template in the trainer directory")
    group.add_argument("--image", help="repository for the content and git tags, e.g. 127.0.0.1:5000/trainer")
    group.add_argument("--python-mirror", help="mirror for standalone Python downloads (UV_PYTHON_INSTALL_MIRROR)")
    group.add_argument("--framework-index-url",
                       help="a mirror of the framework's own index (PyTorch's cuXYZ, NVIDIA's), no credentials")
    group.add_argument("--variant", help="one of the config's variants: its overrides apply and its name ends the tags")
    group.add_argument("--platform", help="the image's platform: linux/amd64 or linux/arm64, or several comma-separated "
                       "(linux/amd64,linux/arm64: one image index) (default: the one the accelerator's machines run, "
                       "e.g. linux/arm64 for NVIDIA_GB200; else linux/amd64 for CUDA images)")


def _build_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("build (flags override the config file)")
    group.add_argument("--tag", "-t", action="append", metavar="REF", dest="tags",
                       help="also tag as REF (repeatable); without a tag part it gets the content tag")
    group.add_argument("--network", help="network for RUN steps: default, host or none")
    group.add_argument("--ca-cert",
                       help="CA bundle for pip/apt behind a TLS-intercepting proxy, passed as a BuildKit secret "
                            "(default: the file named by PIP_CERT, REQUESTS_CA_BUNDLE or SSL_CERT_FILE)")
    group.add_argument("--pip-index-url", help="pip index URL, credentials allowed: passed as a secret pip.conf")
    group.add_argument("--pip-conf", help="a pip.conf passed as a BuildKit secret")
    group.add_argument("--builder", help="build backend: auto (BuildKit), buildkit, legacy, buildah (no Docker engine) or "
                       "cloudbuild (Google Cloud Build: no engine here)")
    group.add_argument("--cache-ref", metavar="REF", help="registry cache: reuse the layers of REF (e.g. "
                       "REPO-cache:buildcache) and, with --push, refresh it")
    group.add_argument("--allow-secret", action="append", metavar="PATTERN", dest="allow_secrets",
                       help="let a file that looks like a secret into the build context (repeatable)")
    group.add_argument("--allow-large", action="append", metavar="PATTERN", dest="allow_large",
                       help="let a very large file into the build context (repeatable)")
    group.add_argument("--docker", help="docker client to run BuildKit with (default: $BUILDKIT_PY_DOCKER or found)")
    group.add_argument("--no-cache", action="store_true", help="rebuild every layer")
    group.add_argument("--offline", action="store_true", help="do not resolve the image's requirements against the "
                       "package indexes before building (also BUILDKIT_PY_OFFLINE=1); said in the output")
    group.add_argument("--no-fast-path", action="store_false", dest="fast_path",
                       help="with --push: build and push through the engine even when only the code changed")
    group.add_argument("--no-attest", action="store_false", dest="attest",
                       help="with --push: attach no SBOM and provenance to the pushed image")
    group.add_argument("--progress", choices=MODES, default="auto",
                       help="progress display (auto: live on a terminal, plain lines otherwise)")
    _cloudbuild_flags(parser)


def _cloudbuild_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("Cloud Build (--builder cloudbuild; flags override `cloudbuild:` in the config)")
    for key, text in CLOUDBUILD_HELP.items():
        group.add_argument(api.cloudbuild_flag_name(key), dest=f"cloudbuild_{key}", metavar=key.upper(), help=text,
                           type=int if key == "disk_size_gb" else None)
    group.add_argument("--cloudbuild-endpoint", metavar="URL", help="the Cloud Build API (default: "
                       "$BUILDKIT_PY_CLOUDBUILD_ENDPOINT, else https://cloudbuild.googleapis.com)")


CLOUDBUILD_HELP = {
    "project": "project the build runs in (default: job.project, $GOOGLE_CLOUD_PROJECT, ADC's)",
    "region": "region of the build (default: job.region, else us-central1)",
    "bucket": "bucket for build contexts and logs (default: PROJECT_cloudbuild)",
    "machine_type": "e.g. E2_HIGHCPU_8 (default: the service's)",
    "disk_size_gb": "build disk size in GB (10-4000)",
    "timeout": "build timeout, e.g. 90m (default: 1h, at most 24h)",
    "worker_pool": "private pool: projects/P/locations/R/workerPools/NAME",
    "service_account": "service account email the build runs as",
    "ca_cert_secret": "Secret Manager version holding a CA bundle: projects/P/secrets/NAME/versions/V",
    "pip_conf_secret": "Secret Manager version holding a pip.conf (index credentials)",
    "uv_conf_secret": "Secret Manager version holding the same index settings as a uv.toml",
}


_OVERRIDES = ("framework", "python", "cuda", "accelerator", "cuda_flavor", "base_image", "gpu", "hypertune",
              "import_check", "build_extensions", "keep_pip",
              "requirements", "template", "image", "python_mirror", "framework_index_url", "tags", "platform", "network", "ca_cert",
              "pip_index_url", "pip_conf", "builder", "allow_secrets", "allow_large")


def _project(args: argparse.Namespace) -> api.Project:
    overrides = tuple((key, getattr(args, key)) for key in _OVERRIDES
                      if getattr(args, key, None) is not None)
    cloudbuild = {k: v for k in CLOUDBUILD_HELP if (v := getattr(args, f"cloudbuild_{k}", None)) is not None}
    if cloudbuild:
        overrides += (("cloudbuild", cloudbuild),)
    return api.Project(config=args.config, directory=args.dir, overrides=overrides, variant=getattr(args, "variant", None))


def _build_options(args: argparse.Namespace) -> api.BuildOptions:
    return api.BuildOptions(push=getattr(args, "push", False), docker=args.docker, no_cache=args.no_cache,
                            cache_ref=args.cache_ref, locked=getattr(args, "locked", False),
                            cloudbuild_endpoint=args.cloudbuild_endpoint, fast_path=args.fast_path,
                            offline=args.offline, attest=args.attest)


def _say(text: str, *, file=None, flush: bool = False) -> None:
    """One line of a command's report for a human: names and values from the trainer's files and the config are
    in it as they are, so every character a terminal would act on is escaped, a line break too (a file named
    `a\\nRUN x` must not print a line of its own), and credentials are masked."""
    print(terminal_line(text, lines=False), file=file, flush=flush)


def _print_json(value) -> None:
    print(json.dumps(value, indent=2))


def cmd_resolve(args: argparse.Namespace) -> int:
    resolved = api.resolve(_project(args))
    if args.json:
        _print_json(resolved.to_dict())
        return 0
    if isinstance(resolved, api.Plan):
        _print_resolved(resolved)
        return 0
    for plan in resolved.plans:  # a multi-platform image: each platform's plan under its name
        _say(f"platform    {plan.platform}")
        _print_resolved(plan)
    return 0


def _print_resolved(plan: api.Plan) -> None:
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
    if plan.gpu and plan.base_kind == "cuda":
        rows[1:1] = [("flavour", plan.cuda_flavor), ("GPU archs", ", ".join(plan.cuda_archs) or "not recorded")]
    if plan.accelerator:
        rows.insert(1, ("accelerator", plan.accelerator))
    if plan.platform and plan.platform != "linux/amd64":  # the default goes unsaid, as before there were others
        rows.insert(1, ("platform", plan.platform))
    if plan.tpu:  # what the TPU build adds, and the libtpu the framework loads
        rows[-2:-2] = ([("TPU extra", plan.tpu_companion)] if plan.tpu_companion else []) + [("libtpu", plan.tpu_runtime)]
    for name, value in rows:
        _say(f"{name:<11} {value}")
    for note in plan.notes:
        _say(f"note: {note}")


def cmd_dockerfile(args: argparse.Namespace) -> int:
    result = api.dockerfile(_project(args), args.output, resolve=args.resolve)
    for note in result.notes:
        _say(f"note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict()))
    elif result.written:
        _say("wrote " + ", ".join(map(str, result.written)), file=sys.stderr)
    elif result.platforms:  # one Dockerfile per platform, each after a comment line naming it
        sys.stdout.write("\n".join(f"# platform: {platform}\n{text}" for platform, text in result.platforms))
    else:
        sys.stdout.write(result.dockerfile)
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    if args.all_variants:
        if args.variant is not None:
            raise ConfigError("give --variant NAME or --all-variants, not both", field="--all-variants")
        result = api.build_variants(_project(args), _build_options(args), reporter(args.progress))
        if args.json:
            _print_json(result.to_dict())
            return 0
        for name, build in result.builds:
            _say(f"variant {name}")
            _print_build(build, False)
        return 0
    return _print_build(api.build(_project(args), _build_options(args), progress=args.progress), args.json)


def cmd_lock(args: argparse.Namespace) -> int:
    options = api.LockOptions(upgrade=args.upgrade, upgrade_packages=tuple(args.upgrade_packages or ()), check=args.check)
    result = api.lock(_project(args), options)
    if args.json:
        _print_json(result.to_dict())
    elif args.check:
        for line in result.stale:
            _say(f"stale: {line}")
        if not result.stale:
            _say(f"{result.path} is current")
    else:
        for image in result.images:
            name = (image.variant or "config") + (f"@{image.platform}" if image.several else "")
            _say(f"{name}: {image.base_image}@{image.base_digest}, {len(image.packages)} packages, lock {image.digest}")
        _say(f"wrote {result.path}", file=sys.stderr)
    return 1 if result.stale else 0


def _print_generated(result: api.GeneratedFile, as_json: bool) -> int:
    if as_json:
        print(json.dumps(result.to_dict()))
    elif result.written:
        _say(f"wrote {result.written}", file=sys.stderr)
    else:
        sys.stdout.write(result.text)
    return 0


def cmd_make(args: argparse.Namespace) -> int:
    return _print_generated(api.make(_project(args), args.output), args.json)


def cmd_ci(args: argparse.Namespace) -> int:
    return _print_generated(api.ci(_project(args), args.flavour, args.output), args.json)


def cmd_print(args: argparse.Namespace) -> int:
    value = api.print_value(_project(args), args.name)
    if args.json:
        print(json.dumps({args.name: value}))
    else:
        _say(value)
    return 0


def _print_build(result: api.BuildResult, as_json: bool) -> int:
    if as_json:
        _print_json(result.to_dict())
        return 0
    _say(f"image {result.image_id}{'' if result.built else ' (up to date)'}")
    for tag in result.tags:
        _say(f"tag   {tag}")
    for pushed in result.pushed:
        _say(f"push  {pushed.image}")
    return 0


def cmd_package(args: argparse.Namespace) -> int:
    if args.path is not None and args.dir is not None:
        raise ConfigError("give the trainer directory as PATH or --dir, not both", field="PATH")
    if args.path is not None:
        args.dir = args.path
    options = api.PackageOptions(module=args.module, script=args.script, name=args.name, version=args.version,
                                 out=args.out, stage=args.stage)
    result = api.package(_project(args), options)
    if args.json:
        _print_json(result.to_dict())
        return 0
    sdist = result.sdist
    _say(f"sdist   {sdist.path} ({sdist.size} bytes, {len(sdist.files)} files)")
    _say(f"sha256  {sdist.sha256}")
    _say(f"module  {sdist.module}")
    if result.staged:
        _say(f"uri     {result.uri}{'' if result.staged.uploaded else ' (already there)'}")
    return 0


def cmd_executor_build(args: argparse.Namespace) -> int:
    return _print_build(api.executor_build(_project(args), _build_options(args), reporter(args.progress)), args.json)


def cmd_executor_list(args: argparse.Namespace) -> int:
    found = api.executors(args.framework, args.region)
    if args.json:
        _print_json([e.to_dict() for e in found])
        return 0
    for e in found:
        _say(f"{e.framework}=={e.version} {'GPU (CUDA ' + e.cuda + ')' if e.gpu else 'CPU':<13} Python {e.python}  "
              f"{e.uri}  (support ends {e.support_ends}, available until {e.available_until})")
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    result = api.push(args.ref, progress=args.progress)
    if args.json:
        print(json.dumps(result.__dict__))
    else:
        _say(result.image)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    result = api.verify(args.image, lock=args.lock, progress=args.progress)
    if args.json:
        _print_json(result.to_dict())
    else:
        _say(f"{result.image}: SBOM {result.sbom} and provenance {result.provenance} verified ({result.listed})")
        for check in result.checks:
            _say(f"  {check}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    findings = api.doctor(args.gpus)
    if args.json:
        _print_json([f.__dict__ for f in findings])
    else:
        for f in findings:
            _say(f"{'ok ' if f.ok else 'FAIL'} {f.name:<9} {f.message}")
    # GPU and cluster failures are what a job would die of; missing build tools are only reported.
    return next((f.code for f in findings if not f.ok and f.code), 0)


def cmd_run(args: argparse.Namespace) -> int:
    options = api.RunOptions(image=args.run_image, gpus=args.gpus, workers=args.workers,
                             processes_per_node=args.processes_per_node, output=args.output,
                             args=tuple(args.trainer_args), build=_build_options(args), executor=args.executor,
                             packages=tuple(args.packages or ()), module=args.module, region=args.region,
                             legacy=args.legacy, parameter_servers=args.ps)
    result = api.run(_project(args), options, progress=args.progress)
    if args.json:
        _print_json(result.to_dict())
    else:
        _say(f"job {result.job_id}: exit code {result.exit_code}; outputs in {result.output_dir}")
        for metric in result.metrics:
            _say("metric " + json.dumps(metric))
    return result.exit_code


def cmd_versions(args: argparse.Namespace) -> int:
    out = api.versions(args.framework, args.accelerator).to_dict()
    if args.json:
        _print_json(out)
        return 0
    for name, series in out.items():
        _say(name)
        for key, info in series.items():
            cuda = ", ".join(info["cuda"]) or "CPU only"
            build = f"TPU build {info['tpu']}" if info.get("tpu") else f"CUDA {cuda}"
            _say(f"  {key:<8} releases {', '.join(info['releases']) or '(nightly)'}; {build}; "
                  f"Python {', '.join(info['python'])}" + (f"; GPU: {info['gpu_build']}" if info.get("gpu_build") else ""))
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    options = api.MatrixOptions(frameworks=tuple(args.frameworks), timeout=args.timeout)
    check = api.matrix_check if args.action == "check" else api.matrix_refresh
    report = check(_project(args), options)
    if args.json:
        _print_json(report.to_dict())
    else:
        for finding in report.findings:
            _say(f"{'FAIL' if finding.problem else 'info'} {finding.message}")
        checked = ", ".join(f"{name} {count}" for name, count in report.checked)
        _say(f"checked {checked} releases against {report.index}: {len(report.problems)} problem(s)")
        if report.overlay:
            added = ", ".join(f"{f}=={r}" for f, r in report.added) or "nothing new"
            _say(f"wrote {report.overlay}: {added}")
    # check: 1 when the data disagrees with the index, like diff; refresh has done its work either way.
    return 1 if args.action == "check" and report.problems else 0


def _job_options(args: argparse.Namespace) -> api.JobOptions:
    return api.JobOptions(image=args.job_image, name=args.name, project=args.project, region=args.region,
                          target=args.target, from_aiplatform=args.from_aiplatform, job_config=args.job_config,
                          pipeline=args.pipeline,
                          serving_image=args.serving_image, model_name=args.model_name, **_job_settings(args))


def _job_settings(args: argparse.Namespace) -> dict:
    return {flag.key: tuple(value) if flag.form == "pools" else value
            for flag in api.JOB_FLAGS if (value := getattr(args, f"job_{flag.key}")) is not None}


def _submit_options(args: argparse.Namespace) -> api.SubmitOptions:
    return api.SubmitOptions(api_endpoint=args.api_endpoint, wait=getattr(args, "wait", False),
                             logging_endpoint=args.logging_endpoint, stream_logs=not getattr(args, "no_logs", False),
                             **({"poll_interval": args.poll} if getattr(args, "poll", None) is not None else {}),
                             skip_image_check=getattr(args, "skip_image_check", False))


def _print_warnings(warnings: tuple[str, ...]) -> None:
    for warning in warnings:
        _say(f"buildkit-py: warning: {warning}", file=sys.stderr)


def cmd_job(args: argparse.Namespace) -> int:
    as_json = args.json or (args.output is not None and args.output.suffix == ".json" and not args.yaml)
    result = api.job(_project(args), _job_options(args), args.output, as_json)
    for note in result.notes + result.job.notes:
        _say(f"note: {note}", file=sys.stderr)
    for field in result.not_converted:
        _say(f"not converted: {field}", file=sys.stderr)
    if result.written:
        _say(f"wrote {result.written} ({result.job.kind[:-1]})", file=sys.stderr)
    else:
        sys.stdout.write(result.text)
    return 0


def _print_plan(result: api.PlanResult) -> None:
    _say(f"Vertex AI plan: {result.method} {result.url}")
    _say(f"  + {result.job.kind[:-1]} {json.dumps(result.job.display_name)}")
    for line in json.dumps(result.job.resource, indent=2).splitlines():
        _say(f"    {line}")
    _say("checks:")
    for check in result.checks:
        mark = "info" if check.ok is None else "ok" if check.ok else "FAIL"
        _say(f"  {mark:<5} {check.name:<12} {check.detail}")
    for note in result.job.notes:
        _say(f"note: {note}")


def cmd_plan(args: argparse.Namespace) -> int:
    result = api.plan(_project(args), _job_options(args), _submit_options(args))
    _print_warnings(result.warnings)
    if args.json:
        _print_json(result.to_dict())
    else:
        _print_plan(result)
    return result.failed[0].exit_code if result.failed else 0


def cmd_submit(args: argparse.Namespace) -> int:
    if args.dry_run:
        return cmd_plan(args)

    out = sys.stderr if args.json else sys.stdout

    def on_state(state: str, job: dict) -> None:
        _say(f"state {state}", file=out, flush=True)

    result = api.submit(_project(args), _job_options(args), _submit_options(args), on_state,
                        on_line=lambda line: _say(line.text(), file=out, flush=True))
    _print_warnings(result.warnings)
    if args.json:
        _print_json(result.to_dict())
    else:
        for tried in result.tried:
            _say(f"refused {tried}")
        _say(f"name    {result.name}")
        _say(f"console {result.console_url}")
        if args.wait:
            _say(f"end     {result.state}")
        if result.model:
            _say(f"model   {result.model}")
    _print_job_end(result.state, result.error, result.last_lines)
    return 1 if result.failed else 0


def _print_job_end(state: str, error: str | None, last_lines: tuple) -> None:
    """A failed job's end on stderr: the service's error, after the job's own last lines (what it died of)."""
    if not error:
        return
    if last_lines:
        _say(f"buildkit-py: the job's last {len(last_lines)} lines:", file=sys.stderr)
        for line in last_lines:
            _say(f"  {line.text()}", file=sys.stderr)
    _say(f"buildkit-py: the job ended in {state}: {error}", file=sys.stderr)


def cmd_logs(args: argparse.Namespace) -> int:
    result = api.logs(args.job, _submit_options(args), project=args.project, region=args.region, follow=args.follow,
                      on_line=None if args.json else lambda line: _say(line.text(), flush=True),
                      **({"poll_interval": args.poll} if args.poll is not None else {}))
    if args.json:
        _print_json(result.to_dict())
    elif result.error:
        _say(f"buildkit-py: the job ended in {result.state}: {result.error}", file=sys.stderr)
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    result = api.cancel(args.job_name, _submit_options(args), project=args.project, region=args.region)
    if args.json:
        _print_json(result.to_dict())
    else:
        _say(f"cancel requested for {result.name}: now {result.state}")
    return 0


def cmd_autopackage(args: argparse.Namespace) -> int:
    if args.path is not None and args.dir is not None:
        raise ConfigError("give the trainer directory as DIR or --dir, not both", field="DIR")
    if args.path is not None:
        args.dir = args.path
    options = api.AutopackageOptions(target=args.target, mode=args.mode, dry_run=args.dry_run, write_config=args.write_config,
                                     strict=args.strict, dockerfile=args.dockerfile, with_launcher=args.with_launcher,
                                     build=_build_options(args),
                                     gpus=args.gpus, output=args.output,
                                     args=tuple(args.trainer_args), submit=_submit_options(args),
                                     job=api.JobOptions(project=args.project, region=args.region, pipeline=args.pipeline,
                                                        from_aiplatform=args.from_aiplatform, job_config=args.job_config,
                                                        serving_image=args.serving_image, model_name=args.model_name,
                                                        **_job_settings(args)))
    result = api.autopackage(_project(args), options, progress="json" if args.json else args.progress)
    _print_warnings(result.submitted.warnings if result.submitted else ())
    if args.json:
        _print_json(result.to_dict())
        return result.exit_code
    found = result.inferred
    if found.dockerfile and args.dockerfile:
        _say(f"dockerfile   {found.dockerfile} (built as it is)")
    else:
        _say(f"trainer      {found.trainer or 'from ' + str(found.config_file)}")
        _say(f"requirements {found.requirements or 'none'}{' + ' + str(len(found.pip)) + ' in pip' if found.pip else ''}")
        for source in found.sources:
            _say(f"  {source.requirement:<30} {source.source}")
        _say(f"framework    {found.framework + ' (' + str(found.framework_from) + ')' if found.framework else 'none found'}")
        if found.framework_reason:
            _say(f"             {found.framework_reason}")
    for stage in result.stages:
        _say(f"{stage.name:<7} {stage.seconds:6.2f}s  {stage.detail}")
    for step in result.next_steps:
        _say(f"would   {step}")
    if result.submitted:
        _say(f"name    {result.submitted.name}")
        _say(f"console {result.submitted.console_url}")
        _say(f"state   {result.submitted.state}")
        if result.submitted.model:
            _say(f"model   {result.submitted.model}")
        _print_job_end(result.submitted.state, result.submitted.error, result.submitted.last_lines)
    if result.written:
        _say(f"wrote {result.written}")
    return result.exit_code


def cmd_tune(args: argparse.Namespace) -> int:
    if not args.local:
        raise ConfigError("only --local studies run here; the service's study is `buildkit-py submit` with the "
                          "config's hyperparameters", field="--local")
    options = api.TuneOptions(image=args.run_image, build=_build_options(args), gpus=args.gpus, output=args.output,
                              args=tuple(args.trainer_args), trial_timeout=args.trial_timeout, seed=args.seed)
    study = api.tune(_project(args), options, progress="json" if args.json else args.progress)
    if args.json:
        _print_json(study.to_dict())
        return 0 if study.state == "SUCCEEDED" else 1
    names = [n for n, _ in study.trials[0].params] if study.trials else []
    _say("  ".join([f"{'trial':<5}", f"{'state':<9}", f"{study.metric:>12}", f"{'seconds':>7}", *names]))
    for t in study.trials:
        metric = f"{t.metric:.6g}" if t.metric is not None else "-"
        _say("  ".join([f"{t.id:<5}", f"{t.state:<9}", f"{metric:>12}", f"{t.seconds:7.1f}",
                         *(str(v) for _, v in t.params)]) + (f"  ({t.error})" if t.error else ""))
    best = study.best
    _say(f"best    {'trial ' + best.id + ': ' + study.metric + '=' + format(best.metric, '.6g') if best else 'none'} "
          f"({study.goal}, {study.algorithm}); study {study.state}; outputs in {study.output_dir}")
    for note in study.notes:
        _say(f"note: {note}")
    return 0 if study.state == "SUCCEEDED" else 1


def autopackage_main(argv: list[str] | None = None) -> int:
    """The `autopackage` console script: `buildkit-py autopackage`."""
    return main(["autopackage", *(sys.argv[1:] if argv is None else argv)])


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
    for flag in api.JOB_FLAGS:
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


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; only: the command given, whose shared flags alone are added (each command's own few are added
    anyway): about 600 arguments are most of a short command's parsing time."""
    parser = _Parser(
        prog="buildkit-py",
        description="Turn an ML trainer into a container image and a Vertex AI / AI Platform training job.",
        epilog="Options may stand anywhere before `--`; run, autopackage and tune pass what follows `--` to the trainer.",
    )
    parser.add_argument("--version", action="version", version=VERSION)
    _common(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, func, *, config: bool = False, build: bool = False, json_help: str = "",
                parent=sub, under: str | None = None):
        p = parent.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func, takes_trailing=False)
        if only is not None and (under or name) != only:
            return p
        _common(p)
        if config:
            _config_flags(p)
        if build:
            _build_flags(p)
        if json_help:
            p.add_argument("--json", action="store_true", help=json_help)
        return p

    command("resolve", "print the resolved plan: base image, CUDA, cuDNN, Python, framework wheel", cmd_resolve,
            config=True, json_help="print the plan as JSON")

    p = command("dockerfile", "render the Dockerfile (stdout, or -o FILE plus FILE.dockerignore)", cmd_dockerfile,
                config=True, json_help="print the Dockerfile and .dockerignore (or their paths) as JSON")
    p.add_argument("-o", "--output", type=Path, help="write the Dockerfile here and FILE.dockerignore beside it")
    p.add_argument("--resolve", action="store_true", help="resolve the requirements against the index first, as "
                   "`resolve` and a build do (default: render without the network, with the choice an earlier "
                   "resolution of the same inputs made)")

    p = command("build", "build the image with BuildKit (and push it with --push)", cmd_build, config=True, build=True,
                json_help="print the result (image, tags, digests) as JSON")
    p.add_argument("--push", action="store_true", help="push every tag after the build")
    p.add_argument("--all-variants", action="store_true", help="build every variant of the config, one image each")
    p.add_argument("--locked", action="store_true", help=LOCKED_HELP)

    p = command("lock", "write buildkit.lock: each image's base digest and its packages with sha256 hashes (uv)",
                cmd_lock, config=True, build=True, json_help="print the result as JSON")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when the lock is stale (inputs changed, "
                   "a base tag moved)")
    p.add_argument("--upgrade", action="store_true", help="re-resolve every package (default: keep the locked versions)")
    p.add_argument("--upgrade-package", action="append", metavar="NAME", dest="upgrade_packages",
                   help="re-resolve this package only (repeatable)")

    p = command("make", "write buildkit.mk, Make targets for image, push, package, run... (include it in your Makefile)",
                cmd_make, config=True, json_help="print the text (or the path written) as JSON")
    p.add_argument("-o", "--output", type=Path, help="write it here (e.g. buildkit.mk) instead of stdout")

    p = command("ci", "write a CI pipeline that builds with a registry cache, pushes and saves the digest", cmd_ci,
                config=True, json_help="print the text (or the path written) as JSON")
    p.add_argument("flavour", metavar="FLAVOUR", help="github, cloudbuild or gitlab")
    p.add_argument("-o", "--output", type=Path, help="write it here (e.g. .github/workflows/image.yml) instead of stdout")

    p = command("print", "print one value for Make and shell scripts: " + ", ".join(api.PRINTABLE), cmd_print,
                config=True, build=True, json_help="print {NAME: value} as JSON")
    p.add_argument("name", metavar="NAME", help=", ".join(api.PRINTABLE))

    p = command("push", "push a local image to its registry and print the digest", cmd_push,
                json_help="print image, digest and size as JSON")
    p.add_argument("ref", metavar="REF", help="e.g. us-central1-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG")
    p.add_argument("--progress", choices=MODES, default="auto")

    p = command("verify", "fetch a pushed image's SBOM and provenance from its registry and check them against the "
                "image (and a buildkit.lock)", cmd_verify, json_help="print the image, the attestations and the checks as JSON")
    p.add_argument("image", metavar="IMAGE", help="REPOSITORY:TAG or REPOSITORY@sha256:...")
    p.add_argument("--lock", metavar="FILE", help="a buildkit.lock: the SBOM's Python packages must be its own")
    p.add_argument("--progress", choices=MODES, default="auto")

    p = command("doctor", "run the launcher's GPU and cluster checks here, and check the build tools", cmd_doctor,
                json_help="print the findings as JSON")
    p.add_argument("--gpus", type=int, help="fail unless this many GPUs are visible and usable")

    p = command("run", "run the image locally the way Vertex AI runs it (CLUSTER_SPEC, AIP_* dirs)", cmd_run,
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

    p = command("package", "build the trainer as a reproducible sdist (and stage it) for prebuilt containers",
                cmd_package, config=True, json_help="print the sdist (path, sha256, size, module) and its URI as JSON")
    p.add_argument("path", nargs="?", type=Path, metavar="PATH", help="the trainer directory (default: --dir or .)")
    p.add_argument("--module", help="the module to run, python -m MODULE (default: the config's trainer)")
    p.add_argument("--script", help="a single .py script, packaged as aiplatform_custom_trainer_script.task")
    p.add_argument("--name", help="distribution name (default: the config's package.name, else the directory's name)")
    p.add_argument("--version", help="PEP 440 version (default: the config's package.version, else 0.0.0)")
    p.add_argument("--out", type=Path, help="directory for the sdist (default: ./dist)")
    p.add_argument("--stage", metavar="URI", help="upload to gs://BUCKET/PREFIX, file:///DIR or a directory; the object "
                                                  "name holds the content digest")

    p = sub.add_parser("executor", help="executor images: build one, or list Google's prebuilt training images",
                       description="executor images run a trainer shipped as a Python package")
    _common(p)
    executor = p.add_subparsers(dest="executor_command", required=True, metavar="SUBCOMMAND")
    p = command("build", "build an executor image: framework, hypertune and the launcher, no trainer code",
                cmd_executor_build, config=True, build=True, json_help="print the result (image, tags, digests) as JSON",
                parent=executor, under="executor")
    p.add_argument("--push", action="store_true", help="push every tag after the build")
    p.add_argument("--locked", action="store_true", help=LOCKED_HELP)
    p = command("list", "list Google's prebuilt training images (base_images/executors.yaml)", cmd_executor_list,
                json_help="print as JSON", parent=executor, under="executor")
    p.add_argument("framework", nargs="?", help="one framework (default: all)")
    p.add_argument("--region", help="the job's region: picks the us, europe or asia repository")

    p = command("versions", "list the framework releases, CUDA versions and Pythons buildkit-py knows", cmd_versions,
                json_help="print as JSON")
    p.add_argument("framework", nargs="?", help="one framework (default: all)")
    p.add_argument("--accelerator", help="only the releases and CUDA builds with kernels for this Vertex AI GPU, "
                                         "e.g. NVIDIA_TESLA_V100")

    p = command("matrix", "check the version data against the package index (check), or also write the releases "
                "it lacks to your overlay (refresh)", cmd_matrix, json_help="print the findings as JSON")
    p.add_argument("action", choices=("check", "refresh"))
    p.add_argument("frameworks", nargs="*", metavar="FRAMEWORK", help="default: all")
    p.add_argument("--config", type=Path, help="buildkit.yaml whose pip_index_url and ca_cert to use")
    p.add_argument("--dir", type=Path, default=None, help="directory to find the config in (default: .)")
    p.add_argument("--pip-index-url", help="the index to read (default: pip_index_url, $PIP_INDEX_URL, else PyPI)")
    p.add_argument("--ca-cert", help="CA bundle for the index (default: PIP_CERT, REQUESTS_CA_BUNDLE, SSL_CERT_FILE)")
    p.add_argument("--timeout", type=float, help="seconds per request")

    p = command("autopackage", "from a trainer directory to a running job: infer the module, requirements and "
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

    p = command("tune", "run the config's hyperparameter study on this machine: grid, random or Bayesian (optuna) "
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

    p = command("job", "write the Vertex AI CustomJob (or HyperparameterTuningJob) for the config and flags", cmd_job,
                config=True, json_help="print the job resource as JSON (default YAML)")
    _job_flags(p)
    p.add_argument("--yaml", action="store_true", help="print YAML (the default)")
    p.add_argument("-o", "--output", type=Path, help="write the spec here (JSON when the name ends .json)")

    p = command("plan", "check the job before submitting: image in its registry, platform, machine and GPU fit, "
                "strategy, staging; print the request", cmd_plan, config=True, json_help="print request and checks as JSON")
    _job_flags(p)
    _api_flags(p)
    _skip_image_check_flag(p)

    p = command("submit", "submit the job to Vertex AI (after the plan's checks) and print its name and console URL",
                cmd_submit, config=True, json_help="print name, console URL and state as JSON")
    _job_flags(p)
    _api_flags(p)
    _skip_image_check_flag(p)
    _wait_flags(p, "follow the job until it ends, showing its log; exit 1 when it fails")
    p.add_argument("--dry-run", action="store_true", help="only the plan: nothing is sent")
    p.add_argument("--poll", type=float, help=argparse.SUPPRESS)

    p = command("cancel", "cancel a Vertex AI job", cmd_cancel, json_help="print name and state as JSON")
    p.add_argument("job_name", metavar="NAME", help="projects/P/locations/R/customJobs/ID as submit prints it, or an ID "
                                                    "with --project and --region")
    p.add_argument("--project", help="with a bare ID")
    p.add_argument("--region", help="with a bare ID")
    _api_flags(p)
    p = command("logs", "print a Vertex AI job's log from Cloud Logging (each line with its replica)", cmd_logs,
                json_help="print the lines, the state and the error as JSON")
    p.add_argument("job", metavar="JOB", help="the job's name or console URL as submit prints them, or its ID with "
                                              "--project and --region")
    p.add_argument("--project", help="with a bare ID")
    p.add_argument("--region", help="with a bare ID")
    p.add_argument("--follow", "-f", action="store_true", help="show the lines as they come until the job ends")
    p.add_argument("--poll", type=float, metavar="SECONDS", help="with --follow: seconds between reads (default 15)")
    _api_flags(p)
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """Split off what follows the first `--` (the trainer's arguments), then parse the options,
    wherever they stand."""
    trailing: list[str] | None = None
    if "--" in argv:
        cut = argv.index("--")
        argv, trailing = argv[:cut], argv[cut + 1:]
    # The command is the first word: no option before it takes a value.
    parser = build_parser(next((word for word in argv if not word.startswith("-")), None))
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
    if "--version" in argv and set(argv) <= {"--version", "--debug"}:  # argparse's answer, without building the parser
        print(VERSION)
        return 0
    args = parse(argv)
    debug = getattr(args, "debug", False)
    try:
        code = args.func(args)
        sys.stdout.flush()
        return code
    except BuildkitError as exc:
        print(terminal_line(f"buildkit-py: error: {exc}"), file=sys.stderr)
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
        where = f" {show(exc.filename)}:" if exc.filename else ""
        print(f"buildkit-py: error:{where} {exc.strerror or exc}", file=sys.stderr)
        _report(exc, debug)
        return 1
    except Exception as exc:  # a bug of ours: say so in one line; --debug shows where
        print(terminal_line(f"buildkit-py: internal error: {type(exc).__name__}: {show(str(exc))} ")
              + "(run again with --debug for the traceback, and please report it)", file=sys.stderr)
        _report(exc, debug)
        return INTERNAL_ERROR


if __name__ == "__main__":
    sys.exit(main())
