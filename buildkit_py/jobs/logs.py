"""A job's log entries from Cloud Logging (the v2 REST API's entries.list), read once or followed as the job runs.

Vertex AI writes what a job's containers print to Cloud Logging under the monitored resource `ml_job`
(`cloudml_job` for older jobs), labelled with the job's ID and the replica that printed it
(`workerpool0-0`, `workerpool1-2`: the task name) and, in a tuning job, the trial. These are the filters
`gcloud ai custom-jobs stream-logs` uses. Following polls for entries at or after the last timestamp seen,
skipping the insert IDs already shown at that timestamp: nothing is printed twice, nothing is lost when
a request fails and the next one picks up where it stopped.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import ServiceError
from ..errors import quoted as _clean  # the service's text on one line
from ..google import adc
from ..google.rest import SERVER_ERRORS, access_token, error_line, retrying, service_endpoint

ENDPOINT_ENV = "BUILDKIT_PY_LOGGING_ENDPOINT"
DEFAULT_ENDPOINT = "https://logging.googleapis.com"
PAGE_SIZE = 1000  # the API's most per page
RETRIES = 5  # a read is tried this many more times after a timeout, a dropped connection, a 429 or a 5xx
_TRANSIENT_HTTP = (429, *SERVER_ERRORS)  # Logging asks a reader to slow down with 429


def logging_endpoint(given: str | None, env: dict[str, str]) -> str:
    """--logging-endpoint, else $BUILDKIT_PY_LOGGING_ENDPOINT, else Cloud Logging's global endpoint."""
    return service_endpoint(given, env, flag="--logging-endpoint", env_name=ENDPOINT_ENV, default=DEFAULT_ENDPOINT)


def job_filter(job_id: str, since: str | None = None) -> str:
    """The Logging query for one job's entries, from `since` (an RFC 3339 timestamp) on."""
    parts = ['(resource.type="ml_job" OR resource.type="cloudml_job")', f'resource.labels.job_id="{job_id}"']
    if since:
        parts.append(f'timestamp>="{since}"')
    return " AND ".join(parts)


@dataclass(frozen=True)
class LogLine:
    """One line a replica printed (an entry with a multi-line message is several)."""

    timestamp: str  # RFC 3339, as the service wrote it
    severity: str  # DEFAULT, INFO, ERROR...
    task: str  # the replica: workerpool0-0 is the chief
    message: str
    trial: str | None = None  # a tuning job's trial

    def text(self) -> str:
        """The line for a terminal: what the replica printed, control characters escaped."""
        who = self.task + (f" trial {self.trial}" if self.trial else "")
        return f"{self.timestamp} {self.severity:<7} [{_clean(who, 80)}] {_clean(self.message, 100_000)}"

    def to_dict(self) -> dict:
        return {"timestamp": self.timestamp, "severity": self.severity, "task": self.task, "trial": self.trial,
                "message": self.message}


def lines_of(entry: Any) -> list[LogLine]:
    """An entry's message as lines, labelled with its replica and trial (gcloud's reading of the same labels)."""
    if not isinstance(entry, dict):
        return []
    labels = entry.get("labels") if isinstance(entry.get("labels"), dict) else {}
    resource = entry.get("resource") if isinstance(entry.get("resource"), dict) else {}
    resource_labels = resource.get("labels") if isinstance(resource.get("labels"), dict) else {}
    task = next((str(v) for v in (resource_labels.get("task_name"), labels.get("task_name"),
                                   labels.get("ml.googleapis.com/task_name")) if v), "unknown-task")
    trial = next((str(v) for v in (labels.get("trial_id"), labels.get("ml.googleapis.com/trial_id")) if v), None)
    payload = entry.get("jsonPayload")
    if isinstance(payload, dict):
        message = str(payload.get("message") or "")
    elif entry.get("textPayload") is not None:
        message = str(entry["textPayload"])
    else:
        message = ""
    stamp, severity = str(entry.get("timestamp", "")), str(entry.get("severity") or "DEFAULT")
    return [LogLine(stamp, severity, task, line, trial) for line in (message.rstrip("\n").splitlines() or [""])]


_HINTS = {
    "SERVICE_DISABLED": "the Cloud Logging API is not enabled in project {p}: gcloud services enable "
                        "logging.googleapis.com --project {p}",
    "PERMISSION_DENIED": "{who} cannot read logs in project {p}: grant it the Logs Viewer role "
                         "(roles/logging.viewer) on the project",
    "UNAUTHENTICATED": "refresh the credentials: gcloud auth application-default login",
}


class LogReader:
    """Cloud Logging's entries.list for one project."""

    def __init__(self, base: str, project: str, credentials: Any, *, timeout: float = 60.0, backoff: float = 1.0,
                 retries: int | None = None):
        import requests

        self.base, self.project, self.credentials = base, project, credentials
        self.timeout, self.backoff = timeout, backoff
        self.retries = RETRIES if retries is None else retries
        self._requests, self._session = requests, requests.Session()

    def _page(self, query: str, token: str | None) -> dict:
        body: dict[str, Any] = {"resourceNames": [f"projects/{self.project}"], "filter": query,
                                "orderBy": "timestamp asc", "pageSize": PAGE_SIZE}
        if token:
            body["pageToken"] = token
        headers = {"Authorization": f"Bearer {access_token(self.credentials)}", "Accept": "application/json"}
        try:
            response = self._session.post(f"{self.base}/v2/entries:list", json=body, headers=headers,
                                          timeout=self.timeout, allow_redirects=False)
        except self._requests.exceptions.RequestException as exc:
            raise ServiceError(f"cannot reach the Cloud Logging API at {self.base}: {_clean(type(exc).__name__)}",
                               transient=True) from None
        if response.status_code >= 300:
            line, status = error_line(response.status_code, response.text)
            reason = "SERVICE_DISABLED" if "SERVICE_DISABLED" in line else status
            hint = _HINTS.get(reason or "")
            who = adc.identity(self.credentials, "the credentials' account")
            raise ServiceError("Cloud Logging refused entries.list: "
                               + (hint.format(p=self.project, who=who) + f" ({line})" if hint else line),
                               status=status, http_status=response.status_code,
                               transient=response.status_code in _TRANSIENT_HTTP)
        try:
            answer = response.json() if response.content else {}
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise ServiceError(f"the Cloud Logging API at {self.base} answered entries.list with something not "
                               "a JSON object")
        return answer

    def _retrying(self, query: str, token: str | None) -> dict:
        return retrying(lambda: self._page(query, token), retries=self.retries, backoff=self.backoff)

    def entries(self, query: str) -> Iterator[dict]:
        """Every entry the query matches, oldest first, page after page."""
        token: str | None = None
        while True:
            page = self._retrying(query, token)
            entries = page.get("entries") or []
            yield from (e for e in entries if isinstance(e, dict))
            token = page.get("nextPageToken")
            if not token or not isinstance(token, str):
                return


class Follower:
    """What has been shown of one job's log: each read returns only entries not shown before. Entries reach Cloud
    Logging up to a few minutes late, with the timestamp of when they were written: each read looks LAG back
    from the newest entry shown, and the insert IDs already shown in that window are skipped."""

    LAG = dt.timedelta(minutes=3)

    def __init__(self, reader: LogReader, job_id: str | None):
        self.reader, self.job_id = reader, job_id  # None: not known yet (a pipeline that has not started its job)
        self.newest: dt.datetime | None = None
        self.shown: dict[str, dt.datetime] = {}  # insert ID -> timestamp, for the entries inside the window

    def read(self) -> Iterator[LogLine]:
        """The lines since the last read, as their pages come: a failure mid-way keeps what was shown, and the next
        read goes on from it."""
        if self.job_id is None:
            return
        since = None if self.newest is None else _rfc3339(self.newest - self.LAG)
        for entry in self.reader.entries(job_filter(self.job_id, since)):
            stamp = _parsed_time(entry.get("timestamp"))
            key = str(entry.get("insertId") or "") or f"{entry.get('timestamp')}\0{entry.get('textPayload')}"
            if key in self.shown:
                continue
            self.shown[key] = stamp
            if self.newest is None or stamp > self.newest:
                self.newest = stamp
            yield from lines_of(entry)
        if self.newest is not None:
            edge = self.newest - self.LAG
            self.shown = {k: t for k, t in self.shown.items() if t >= edge}


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _parsed_time(value: Any) -> dt.datetime:
    """An RFC 3339 timestamp (nanoseconds cut to microseconds); the epoch for one that is not."""
    text = str(value or "")
    head, dot, tail = text.partition(".")
    if dot:  # 2026-11-27T10:00:00.123456789Z -> .123456 and the zone
        digits = len(tail) - len(tail.lstrip("0123456789"))
        text = f"{head}.{tail[:min(digits, 6)] or '0'}{tail[digits:]}"
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return _EPOCH
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


FINAL_READS = 3  # reads of a job's last lines tried after it ended, when the log cannot be reached


def follow(follower: Follower, finished: Callable[[], bool], on_line: Callable[[LogLine], None], *, poll: float,
           on_error: Callable[[ServiceError], None] | None = None) -> None:
    """Show the job's lines as they come until it has ended, then the last ones it wrote. A read that fails (the
    network gone) is tried again at the next poll, from where it stopped; once the job has ended, FINAL_READS times.
    A refusal (no permission, the API off), or a log still unreachable after the end, is raised, or, given
    on_error, handed to it: the job is then followed to its end without its lines."""
    reading, final_reads = True, 0
    while True:
        done = finished()  # asked before the read: lines written before the end are all in the last read
        if reading:
            try:
                for line in follower.read():
                    on_line(line)
            except ServiceError as exc:
                final_reads += done
                if exc.transient and final_reads < FINAL_READS:
                    done = False  # read again: the job's last lines are still to come
                elif on_error is None:
                    raise
                else:
                    on_error(exc)
                    reading = False
        if done:
            return
        time.sleep(poll)
