"""Cloud Logging's entries.list (v2 REST) as a loopback stand-in, served beside the Vertex AI stand-in.

- POST /v2/entries:list with the request body the real API takes (resourceNames, filter, orderBy, pageSize,
  pageToken). resourceNames is required and must name the project; pageSize is at most 1000; orderBy is
  `timestamp asc` or `timestamp desc`; a page token is valid only with the filter it came from (the service's
  "page token doesn't match arguments"). Anything else: 400 INVALID_ARGUMENT, as the service answers.
- The filter is parsed, not matched whole: the clauses Vertex AI's jobs are read with (resource.type,
  resource.labels.job_id, resource.labels.task_name, timestamp with >=, >, <=, <), joined by AND, with one
  parenthesised OR of resource types. An unknown field or operator: 400 "Unparseable filter".
- Entries are LogEntry JSON as Vertex AI writes them (resource ml_job with job_id and task_name labels,
  textPayload or jsonPayload.message, RFC 3339 timestamps with nanoseconds, insertId).
- `refuse` queues answers for the next calls: (HTTP status, google.rpc.Status JSON) or "drop" (the connection
  closes before any answer); `page_size` caps pages below what the client asks, to exercise paging.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading

TIME_OPS = (">=", "<=", ">", "<")
_CLAUSE = re.compile(r'(resource\.type|resource\.labels\.job_id|resource\.labels\.task_name|timestamp)'
                     r'\s*(>=|<=|=|>|<)\s*"([^"\\]*)"')


def parse_filter(text: str) -> list[list[tuple[str, str, str]]] | None:
    """The filter as AND-ed groups of OR-ed (field, op, value) clauses; None when it is not one we read."""
    groups = []
    for part in re.split(r"\s+AND\s+", text.strip()):
        inner = part[1:-1] if part.startswith("(") and part.endswith(")") else part
        clauses = []
        for alt in re.split(r"\s+OR\s+", inner):
            match = _CLAUSE.fullmatch(alt.strip())
            if not match or (match[1] != "timestamp" and match[2] != "="):
                return None
            clauses.append((match[1], match[2], match[3]))
        groups.append(clauses)
    return groups


def _when(text: str) -> dt.datetime:
    head, _, tail = text.partition(".")
    digits = tail.rstrip("Z")
    return dt.datetime.fromisoformat(head + "+00:00") + dt.timedelta(microseconds=int((digits + "000000")[:6] or 0))


def _matches(entry: dict, groups: list[list[tuple[str, str, str]]]) -> bool:
    def one(field: str, op: str, value: str) -> bool:
        if field == "timestamp":
            have, want = _when(entry["timestamp"]), _when(value)
            return {">=": have >= want, ">": have > want, "<=": have <= want, "<": have < want, "=": have == want}[op]
        got = entry["resource"]["type"] if field == "resource.type" else \
            entry["resource"]["labels"].get(field.rsplit(".", 1)[1])
        return got == value

    return all(any(one(*c) for c in group) for group in groups)


def stamp(moment: dt.datetime) -> str:
    """RFC 3339 with nanoseconds, as the service writes timestamps."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "123Z"


class FakeLogging:
    def __init__(self, project: str = "fake-project"):
        self.project = project
        self.entries: list[dict] = []
        self.requests: list[dict] = []  # every entries.list body, as sent
        self.refuse: list = []
        self.page_size: int | None = None
        self.script: dict[str, list[tuple[str, str, str]]] = {}  # job state -> (task, severity, text) written then
        self.lock = threading.Lock()

    def write(self, job_id: str, task: str, text: str, severity: str = "INFO", *, json_payload: bool = False,
              at: dt.datetime | None = None, trial: str | None = None) -> dict:
        """One entry as Vertex AI writes a replica's line."""
        moment = at or dt.datetime.now(dt.UTC)
        with self.lock:
            entry = {"logName": f"projects/{self.project}/logs/{task}", "insertId": f"id{len(self.entries):06d}",
                     "resource": {"type": "ml_job", "labels": {"job_id": job_id, "project_id": self.project,
                                                               "task_name": task}},
                     "timestamp": stamp(moment), "receiveTimestamp": stamp(dt.datetime.now(dt.UTC)),
                     "severity": severity, "labels": {"ml.googleapis.com/endpoint": ""}}
            if trial:
                entry["labels"]["ml.googleapis.com/trial_id"] = trial
            if json_payload:
                entry["jsonPayload"] = {"message": text, "levelname": severity}
            else:
                entry["textPayload"] = text
            self.entries.append(entry)
        return entry

    def job_moved(self, name: str, state: str) -> None:
        """The Vertex stand-in moved a job: write what the script says its replicas print in that state."""
        job_id = name.rsplit("/", 1)[1]
        for task, severity, text in self.script.get(state, []):
            self.write(job_id, task, text, severity)

    def answer(self, raw: bytes) -> tuple[int, dict] | str:
        from vertex_loopback import bad_request, status

        try:
            body = json.loads(raw)
        except ValueError:
            return status(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
        self.requests.append(body)
        if self.refuse:
            return self.refuse.pop(0)
        if not isinstance(body, dict) or body.get("resourceNames") != [f"projects/{self.project}"]:
            return bad_request("resource_names", "resource_names must name this project")
        size = body.get("pageSize", 50)
        if not isinstance(size, int) or not 0 < size <= 1000:
            return bad_request("page_size", "page_size must be between 1 and 1000")
        order = body.get("orderBy", "timestamp asc")
        if order not in ("timestamp asc", "timestamp desc"):
            return bad_request("order_by", f"Invalid order_by: {order}")
        text = body.get("filter", "")
        groups = parse_filter(text)
        if groups is None:
            return bad_request("filter", f"Unparseable filter: {text}")
        start = 0
        token = body.get("pageToken")
        if token:
            issued, _, offset = str(token).partition(":")
            if issued != str(hash(text) & 0xFFFFFFFF) or not offset.isdigit():
                return bad_request("page_token", "page token doesn't match arguments")
            start = int(offset)
        with self.lock:
            found = sorted((e for e in self.entries if _matches(e, groups)), key=lambda e: _when(e["timestamp"]),
                           reverse=order == "timestamp desc")
        size = min(size, self.page_size or size)
        page = found[start:start + size]
        answer: dict = {"entries": page} if page else {}
        if start + size < len(found):
            answer["nextPageToken"] = f"{hash(text) & 0xFFFFFFFF}:{start + size}"
        return 200, answer
