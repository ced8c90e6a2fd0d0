"""Each command: its options made from the parsed arguments, the API called, the result printed."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import ConfigError
from ..flags import CLOUDBUILD_HELP, OVERRIDES
from ..progress import reporter
from .output import (
    api,
    print_build,
    print_generated,
    print_job_end,
    print_json,
    print_plan,
    print_resolved,
    print_warnings,
    say,
)


def _project(args: argparse.Namespace) -> api.Project:
    overrides = tuple((key, getattr(args, key)) for key in OVERRIDES
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


def cmd_resolve(args: argparse.Namespace) -> int:
    resolved = api.resolve(_project(args))
    if args.json:
        print_json(resolved.to_dict())
        return 0
    if isinstance(resolved, api.Plan):
        print_resolved(resolved)
        return 0
    for plan in resolved.plans:  # a multi-platform image: each platform's plan under its name
        say(f"platform    {plan.platform}")
        print_resolved(plan)
    return 0


def cmd_dockerfile(args: argparse.Namespace) -> int:
    result = api.dockerfile(_project(args), args.output, resolve=args.resolve)
    for note in result.notes:
        say(f"note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict()))
    elif result.written:
        say("wrote " + ", ".join(map(str, result.written)), file=sys.stderr)
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
            print_json(result.to_dict())
            return 0
        for name, build in result.builds:
            say(f"variant {name}")
            print_build(build, False)
        return 0
    return print_build(api.build(_project(args), _build_options(args), progress=args.progress), args.json)


def cmd_lock(args: argparse.Namespace) -> int:
    options = api.LockOptions(upgrade=args.upgrade, upgrade_packages=tuple(args.upgrade_packages or ()), check=args.check)
    result = api.lock(_project(args), options)
    if args.json:
        print_json(result.to_dict())
    elif args.check:
        for line in result.stale:
            say(f"stale: {line}")
        if not result.stale:
            say(f"{result.path} is current")
    else:
        for image in result.images:
            name = (image.variant or "config") + (f"@{image.platform}" if image.several else "")
            say(f"{name}: {image.base_image}@{image.base_digest}, {len(image.packages)} packages, lock {image.digest}")
        say(f"wrote {result.path}", file=sys.stderr)
    return 1 if result.stale else 0


def cmd_make(args: argparse.Namespace) -> int:
    return print_generated(api.make(_project(args), args.output), args.json)


def cmd_ci(args: argparse.Namespace) -> int:
    return print_generated(api.ci(_project(args), args.flavour, args.output), args.json)


def cmd_print(args: argparse.Namespace) -> int:
    value = api.print_value(_project(args), args.name)
    if args.json:
        print(json.dumps({args.name: value}))
    else:
        say(value)
    return 0


def _directory(args: argparse.Namespace, name: str) -> None:
    """The trainer directory given as the positional NAME stands for --dir; both at once are refused."""
    if args.path is not None and args.dir is not None:
        raise ConfigError(f"give the trainer directory as {name} or --dir, not both", field=name)
    if args.path is not None:
        args.dir = args.path


def cmd_package(args: argparse.Namespace) -> int:
    _directory(args, "PATH")
    options = api.PackageOptions(module=args.module, script=args.script, name=args.name, version=args.version,
                                 out=args.out, stage=args.stage)
    result = api.package(_project(args), options)
    if args.json:
        print_json(result.to_dict())
        return 0
    sdist = result.sdist
    say(f"sdist   {sdist.path} ({sdist.size} bytes, {len(sdist.files)} files)")
    say(f"sha256  {sdist.sha256}")
    say(f"module  {sdist.module}")
    if result.staged:
        say(f"uri     {result.uri}{'' if result.staged.uploaded else ' (already there)'}")
    return 0


def cmd_executor_build(args: argparse.Namespace) -> int:
    return print_build(api.executor_build(_project(args), _build_options(args), reporter(args.progress)), args.json)


def cmd_executor_list(args: argparse.Namespace) -> int:
    found = api.executors(args.framework, args.region)
    if args.json:
        print_json([e.to_dict() for e in found])
        return 0
    for e in found:
        say(f"{e.framework}=={e.version} {'GPU (CUDA ' + e.cuda + ')' if e.gpu else 'CPU':<13} Python {e.python}  "
              f"{e.uri}  (support ends {e.support_ends}, available until {e.available_until})")
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    result = api.push(args.ref, progress=args.progress)
    if args.json:
        print(json.dumps(result.__dict__))
    else:
        say(result.image)
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    result = api.verify(args.image, lock=args.lock, progress=args.progress)
    if args.json:
        print_json(result.to_dict())
    else:
        say(f"{result.image}: SBOM {result.sbom} and provenance {result.provenance} verified ({result.listed})")
        for check in result.checks:
            say(f"  {check}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    findings = api.doctor(args.gpus)
    if args.json:
        print_json([f.__dict__ for f in findings])
    else:
        for f in findings:
            say(f"{'ok ' if f.ok else 'FAIL'} {f.name:<9} {f.message}")
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
        print_json(result.to_dict())
    else:
        say(f"job {result.job_id}: exit code {result.exit_code}; outputs in {result.output_dir}")
        for metric in result.metrics:
            say("metric " + json.dumps(metric))
    return result.exit_code


def cmd_versions(args: argparse.Namespace) -> int:
    out = api.versions(args.framework, args.accelerator).to_dict()
    if args.json:
        print_json(out)
        return 0
    for name, series in out.items():
        say(name)
        for key, info in series.items():
            cuda = ", ".join(info["cuda"]) or "CPU only"
            build = f"TPU build {info['tpu']}" if info.get("tpu") else f"CUDA {cuda}"
            say(f"  {key:<8} releases {', '.join(info['releases']) or '(nightly)'}; {build}; "
                  f"Python {', '.join(info['python'])}" + (f"; GPU: {info['gpu_build']}" if info.get("gpu_build") else ""))
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    options = api.MatrixOptions(frameworks=tuple(args.frameworks), timeout=args.timeout)
    check = api.matrix_check if args.action == "check" else api.matrix_refresh
    report = check(_project(args), options)
    if args.json:
        print_json(report.to_dict())
    else:
        for finding in report.findings:
            say(f"{'FAIL' if finding.problem else 'info'} {finding.message}")
        checked = ", ".join(f"{name} {count}" for name, count in report.checked)
        say(f"checked {checked} releases against {report.index}: {len(report.problems)} problem(s)")
        if report.overlay:
            added = ", ".join(f"{f}=={r}" for f, r in report.added) or "nothing new"
            say(f"wrote {report.overlay}: {added}")
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


def cmd_job(args: argparse.Namespace) -> int:
    as_json = args.json or (args.output is not None and args.output.suffix == ".json" and not args.yaml)
    result = api.job(_project(args), _job_options(args), args.output, as_json)
    for note in result.notes + result.job.notes:
        say(f"note: {note}", file=sys.stderr)
    for field in result.not_converted:
        say(f"not converted: {field}", file=sys.stderr)
    if result.written:
        say(f"wrote {result.written} ({result.job.kind[:-1]})", file=sys.stderr)
    else:
        sys.stdout.write(result.text)
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    result = api.plan(_project(args), _job_options(args), _submit_options(args))
    print_warnings(result.warnings)
    if args.json:
        print_json(result.to_dict())
    else:
        print_plan(result)
    return result.failed[0].exit_code if result.failed else 0


def cmd_submit(args: argparse.Namespace) -> int:
    if args.dry_run:
        return cmd_plan(args)

    out = sys.stderr if args.json else sys.stdout

    def on_state(state: str, job: dict) -> None:
        say(f"state {state}", file=out, flush=True)

    result = api.submit(_project(args), _job_options(args), _submit_options(args), on_state,
                        on_line=lambda line: say(line.text(), file=out, flush=True))
    print_warnings(result.warnings)
    if args.json:
        print_json(result.to_dict())
    else:
        for tried in result.tried:
            say(f"refused {tried}")
        say(f"name    {result.name}")
        say(f"console {result.console_url}")
        if args.wait:
            say(f"end     {result.state}")
        if result.model:
            say(f"model   {result.model}")
    print_job_end(result.state, result.error, result.last_lines)
    return 1 if result.failed else 0


def cmd_logs(args: argparse.Namespace) -> int:
    result = api.logs(args.job, _submit_options(args), project=args.project, region=args.region, follow=args.follow,
                      on_line=None if args.json else lambda line: say(line.text(), flush=True),
                      **({"poll_interval": args.poll} if args.poll is not None else {}))
    if args.json:
        print_json(result.to_dict())
    elif result.error:
        say(f"buildkit-py: the job ended in {result.state}: {result.error}", file=sys.stderr)
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    result = api.cancel(args.job_name, _submit_options(args), project=args.project, region=args.region)
    if args.json:
        print_json(result.to_dict())
    else:
        say(f"cancel requested for {result.name}: now {result.state}")
    return 0


def cmd_autopackage(args: argparse.Namespace) -> int:
    _directory(args, "DIR")
    options = api.AutopackageOptions(target=args.target, mode=args.mode, dry_run=args.dry_run, write_config=args.write_config,
                                     strict=args.strict, dockerfile=args.dockerfile, with_launcher=args.with_launcher,
                                     module=args.module, script=args.script, build=_build_options(args),
                                     gpus=args.gpus, output=args.output,
                                     args=tuple(args.trainer_args), submit=_submit_options(args),
                                     job=api.JobOptions(project=args.project, region=args.region, pipeline=args.pipeline,
                                                        from_aiplatform=args.from_aiplatform, job_config=args.job_config,
                                                        serving_image=args.serving_image, model_name=args.model_name,
                                                        **_job_settings(args)))
    result = api.autopackage(_project(args), options, progress="json" if args.json else args.progress)
    print_warnings(result.submitted.warnings if result.submitted else ())
    if args.json:
        print_json(result.to_dict())
        return result.exit_code
    found = result.inferred
    if found.dockerfile and args.dockerfile:
        say(f"dockerfile   {found.dockerfile} (built as it is)")
    else:
        say(f"trainer      {found.trainer or 'from ' + str(found.config_file)}")
        say(f"requirements {found.requirements or 'none'}{' + ' + str(len(found.pip)) + ' in pip' if found.pip else ''}")
        for source in found.sources:
            say(f"  {source.requirement:<30} {source.source}")
        say(f"framework    {found.framework + ' (' + str(found.framework_from) + ')' if found.framework else 'none found'}")
        if found.framework_reason:
            say(f"             {found.framework_reason}")
    for stage in result.stages:
        say(f"{stage.name:<7} {stage.seconds:6.2f}s  {stage.detail}")
    for step in result.next_steps:
        say(f"would   {step}")
    if result.submitted:
        say(f"name    {result.submitted.name}")
        say(f"console {result.submitted.console_url}")
        say(f"state   {result.submitted.state}")
        if result.submitted.model:
            say(f"model   {result.submitted.model}")
        print_job_end(result.submitted.state, result.submitted.error, result.submitted.last_lines)
    if result.written:
        say(f"wrote {result.written}")
    return result.exit_code


def cmd_tune(args: argparse.Namespace) -> int:
    if not args.local:
        raise ConfigError("only --local studies run here; the service's study is `buildkit-py submit` with the "
                          "config's hyperparameters", field="--local")
    options = api.TuneOptions(image=args.run_image, build=_build_options(args), gpus=args.gpus, output=args.output,
                              args=tuple(args.trainer_args), trial_timeout=args.trial_timeout, seed=args.seed)
    study = api.tune(_project(args), options, progress="json" if args.json else args.progress)
    if args.json:
        print_json(study.to_dict())
        return 0 if study.state == "SUCCEEDED" else 1
    names = [n for n, _ in study.trials[0].params] if study.trials else []
    say("  ".join([f"{'trial':<5}", f"{'state':<9}", f"{study.metric:>12}", f"{'seconds':>7}", *names]))
    for t in study.trials:
        metric = f"{t.metric:.6g}" if t.metric is not None else "-"
        say("  ".join([f"{t.id:<5}", f"{t.state:<9}", f"{metric:>12}", f"{t.seconds:7.1f}",
                         *(str(v) for _, v in t.params)]) + (f"  ({t.error})" if t.error else ""))
    best = study.best
    say(f"best    {'trial ' + best.id + ': ' + study.metric + '=' + format(best.metric, '.6g') if best else 'none'} "
          f"({study.goal}, {study.algorithm}); study {study.state}; outputs in {study.output_dir}")
    for note in study.notes:
        say(f"note: {note}")
    return 0 if study.state == "SUCCEEDED" else 1
