"""tune --local: the config's hyperparameter study, run on this machine."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, show
from ..fsutil import reads_once
from ..oci.refs import parse_ref
from ..pipeline.build import BuildOptions, build_config
from .builds import check_build_options
from .project import MAX_GPUS, Progress, Source, arguments, check_count, load, options_of, reporting, runs_dir
from .runs import local_processes

# Imported where used, for start-up time (see this package's docstring).
if TYPE_CHECKING:
    from ..jobs import tune as jobs_tune

MAX_TRIAL_TIMEOUT = 7 * 24 * 3600  # the service's longest job timeout


@dataclass(frozen=True)
class TuneOptions:
    """How `tune --local` runs the study: its flags (each keyword of tune() sets the field of its name)."""

    image: str | None = None  # default: build the project's image first
    build: BuildOptions = field(default_factory=BuildOptions)
    gpus: int = 0  # per trial
    output: Path | None = None  # default: a directory under ~/.cache/buildkit-py/runs; one trial-N directory each
    args: tuple[str, ...] = ()  # the trainer's args before the parameters (default: the image's)
    trial_timeout: float | None = None  # seconds (default: the config's job.timeout; none: no limit)
    seed: int | None = None  # for random search and optuna's sampler


@reads_once
def tune(source: Source = None, /, options: TuneOptions | None = None, *, progress: Progress = None,
         **settings: Any) -> jobs_tune.Study:
    """Run the config's `hyperparameters` study on this machine with the image, trials as local runs (see
    jobs/tune.py): the study's trials (parameters, state, metric) and the best.

    source: a Project, the trainer directory or config file, a config dict, or None (the working directory).
    options: TuneOptions; its fields, and its build's, may also be keywords (image= is the image to run, gpus=,
    trial_timeout=, seed=...).
    progress: as build's.
    settings: config keys as their flags set them (hyperparameters={...} too), config, dir, variant.
    """
    from ..jobs import tune as jobs_tune

    project, options = arguments("tune", source, settings, options_of(options, TuneOptions, "options"),
                                 takes=("options", "progress"))

    check_count("--gpus", options.gpus, MAX_GPUS)
    timeout = options.trial_timeout
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not 0 < timeout <= MAX_TRIAL_TIMEOUT):
        raise ConfigError(f"{show(timeout)} is not allowed: seconds, more than 0 and at most {MAX_TRIAL_TIMEOUT}",
                          field="--trial-timeout")
    if options.output is not None and options.output.exists() and not options.output.is_dir():
        raise ConfigError(f"{show(str(options.output))} exists and is not a directory", field="--output")
    check_build_options(options.build)
    config = load(project)
    if config.hyperparameters is None:
        raise ConfigError(f"{config.source} has no `hyperparameters:` study (metric, goal, max_trials, "
                          "parallel_trials, params) to run", field="hyperparameters")
    jobs_tune.check_search(config.hyperparameters)
    network = config.network or "host"
    with reporting(progress) as reporter:
        if options.image is not None:
            image = str(parse_ref(options.image, field="IMAGE"))
        else:
            image = build_config(replace(config, network=network), options.build, reporter).tags[0]
        output = (options.output or runs_dir(config, "study")).resolve()
        trial = jobs_tune.TrialRun(network, options.args, options.gpus,
                                   timeout if timeout is not None else (config.job.timeout if config.job else None),
                                   local_processes(config, None, 0, options.gpus))
        return jobs_tune.run_study(image, config.hyperparameters, trial, output=output, reporter=reporter,
                                   seed=options.seed)
