"""A submitted job followed: its states and log lines to its end (what submit's wait and logs --follow share), its
log read from Cloud Logging (logs), and its cancellation (cancel)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .jobtypes import CancelResult, LogsResult, SubmitOptions, check_poll
from .project import checked, option_names, options_from, options_of, refuse_unknown

# Imported where used, for start-up time (see this package's docstring).
if TYPE_CHECKING:
    from ..jobs.logs import LogLine


LAST_LINES = 40  # a failed job's last lines kept in the result


def follow_job(client: Any, name: str, submit_options: SubmitOptions, on_state: Callable[[str, dict], None],
               on_line: Callable[[LogLine], None] | None, *,
               log_optional: bool = True) -> tuple[dict, tuple[LogLine, ...], tuple[str, ...]]:
    """Follow the job to its end: its states to on_state and, unless stream_logs is off, its log lines to on_line as
    they come. log_optional: a log that cannot be read (the Logging API off, no logs.viewer) stops the lines, not
    the wait, and why is in the warnings; else it is raised. Answers the ended job, its last lines and the
    warnings."""
    from collections import deque

    from ..jobs import logs as jobs_logs
    from ..jobs import submit as jobs_submit

    if not submit_options.stream_logs:
        return client.wait(name, on_state, poll=submit_options.poll_interval), (), ()
    read = client.watch(name, on_state)
    # No retries inside a read: the next poll is the retry, and the job's state is not held up meanwhile.
    follower = jobs_logs.Follower(_log_reader(client, submit_options, retries=0), None)
    last: deque[LogLine] = deque(maxlen=LAST_LINES)
    final: list[dict] = []
    warned: list[str] = []

    def finished() -> bool:
        job, ended = read()
        if follower.job_id is None:
            follower.job_id = jobs_submit.logged_job_id(job)
        if ended:
            final.append(job)
        return ended

    def shown(line: LogLine) -> None:
        last.append(line)
        if on_line is not None:
            on_line(line)

    jobs_logs.follow(follower, finished, shown, poll=submit_options.poll_interval,
                     on_error=(lambda exc: warned.append(f"the job's log cannot be shown: {exc}")) if log_optional
                     else None)
    return final[-1], tuple(last), tuple(warned)


def _log_reader(client: Any, submit_options: SubmitOptions, retries: int | None = None) -> Any:
    """Cloud Logging for the project and credentials of a Vertex AI client (a jobs.logs.LogReader)."""
    from ..jobs import logs as jobs_logs

    base = jobs_logs.logging_endpoint(submit_options.logging_endpoint, dict(os.environ))
    return jobs_logs.LogReader(base, client.project, client.credentials, timeout=submit_options.timeout, retries=retries)


def logs(job: str, submit_options: SubmitOptions | None = None, *, project: str | None = None,
         region: str | None = None, follow: bool = False, on_line: Callable[[LogLine], None] | None = None,
         **settings: Any) -> LogsResult:
    """A job's log entries from Cloud Logging, oldest first, each labelled with its replica (workerpool0-0 is the
    chief) and, in a tuning job, its trial. JOB is the job's resource name or console URL as submit prints them, or
    its ID with project and region. follow: show the lines as the job writes them (to on_line) until it ends.

    submit_options: SubmitOptions, or its fields as keywords (api_endpoint=, logging_endpoint=, poll_interval=,
    timeout=).
    """
    from ..jobs import submit as jobs_submit

    submit_options = options_from(options_of(submit_options, SubmitOptions, "submit_options"), settings)
    refuse_unknown(settings, "logs", ["submit_options", "project", "region", "follow", "on_line",
                                      *option_names(submit_options)])
    job = checked(job, "str", "JOB")
    project, region = checked(project, "str | None", "--project"), checked(region, "str | None", "--region")
    follow = checked(follow, "bool", "--follow")
    on_line = checked(on_line, "Callable[[LogLine], None] | None", "on_line")
    check_poll(submit_options)
    ref = jobs_submit.job_reference(job, project, region)
    base = jobs_submit.api_endpoint(submit_options.api_endpoint, ref.region, dict(os.environ))
    credentials, _ = jobs_submit.default_credentials()
    client = jobs_submit.Client(base, ref.project, ref.region, credentials, timeout=submit_options.timeout)
    found = client.lookup(ref)
    name = str(found.get("name") or ref.name(ref.kind or "customJobs"))
    if follow:
        final, last, _ = follow_job(client, name, replace(submit_options, stream_logs=True), lambda state, job: None,
                                    on_line, log_optional=False)
        return LogsResult(name, str(final.get("state")), last, jobs_submit.job_error(final))
    from ..jobs import logs as jobs_logs

    lines = []
    for line in jobs_logs.Follower(_log_reader(client, submit_options), jobs_submit.logged_job_id(found)).read():
        lines.append(line)
        if on_line is not None:
            on_line(line)
    return LogsResult(name, str(found.get("state")), tuple(lines), jobs_submit.job_error(found))


def cancel(name: str, submit_options: SubmitOptions | None = None, *, project: str | None = None,
           region: str | None = None, **settings: Any) -> CancelResult:
    """Ask the service to cancel the job; it ends in JOB_STATE_CANCELLED (or had already ended). NAME is the
    resource name or console URL submit prints, or the job's ID with project and region.

    submit_options: SubmitOptions, or its fields as keywords (api_endpoint=, timeout=).
    """
    from ..jobs import submit as jobs_submit

    submit_options = options_from(options_of(submit_options, SubmitOptions, "submit_options"), settings)
    refuse_unknown(settings, "cancel", ["submit_options", "project", "region", *option_names(submit_options)])
    name = checked(name, "str", "NAME")
    project, region = checked(project, "str | None", "--project"), checked(region, "str | None", "--region")

    ref = jobs_submit.job_reference(name, project, region, field="NAME")
    base = jobs_submit.api_endpoint(submit_options.api_endpoint, ref.region, dict(os.environ))
    credentials, _ = jobs_submit.default_credentials()
    client = jobs_submit.Client(base, ref.project, ref.region, credentials, timeout=submit_options.timeout)
    name = ref.name(ref.kind) if ref.kind else str(client.lookup(ref).get("name") or ref.name("customJobs"))
    client.cancel(name)
    return CancelResult(name, str(client.get(name).get("state")))
