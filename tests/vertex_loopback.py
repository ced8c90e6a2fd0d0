"""A loopback HTTP server that behaves like the Vertex AI v1 REST API for training jobs, and like
Google's OAuth token endpoint, for tests where the real service cannot be reached.

- POST /token: a service-account JWT bearer grant (the assertion's signature is verified with the
  key file's public key); answers an access token.
- Every /v1/ call must carry one of the tokens it issued (else 401 UNAUTHENTICATED).
- POST .../customJobs and .../hyperparameterTuningJobs: the body is parsed with the official
  google.cloud.aiplatform_v1 types (unknown or misspelled fields: 400 INVALID_ARGUMENT with a
  google.rpc.BadRequest); the job is stored and answered as the service answers it (name, state,
  createTime; enums by name, camelCase).
- GET of a job moves it one step along `states`; list with filter labels.KEY="VALUE"; :cancel.
- `refuse` queues answers for the next creates: (HTTP status, google.rpc.Status JSON) or "drop"
  (the job is created, then the connection closes before the answer, as after a timeout).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from google.auth import jwt
from google.cloud import aiplatform_v1
from google.protobuf import json_format

TYPES = {"customJobs": aiplatform_v1.CustomJob, "hyperparameterTuningJobs": aiplatform_v1.HyperparameterTuningJob}
COLLECTION = re.compile(r"/v1/projects/([a-z0-9-]+)/locations/([a-z0-9-]+)/(customJobs|hyperparameterTuningJobs)")
JOB = re.compile(COLLECTION.pattern + r"/([0-9]+)(:cancel)?")
STATES = ("JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED")


def status(code: int, name: str, message: str, *details: dict) -> tuple[int, dict]:
    """A google.rpc.Status error as the REST API sends it."""
    return code, {"error": {"code": code, "message": message, "status": name, "details": list(details)}}


def new_key_file(directory: Path, token_uri: str) -> tuple[Path, str]:
    """A service-account key file (a fresh RSA key) whose token_uri is ours; and its public key (PEM)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    path = directory / "sa-key.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "fake-project", "private_key_id": "k1", "private_key": private,
        "client_email": "trainer@fake-project.iam.gserviceaccount.com", "client_id": "1", "token_uri": token_uri,
    }))
    return path, public


class FakeVertex:
    def __init__(self, public_key: str | None = None, states: tuple[str, ...] = STATES):
        self.public_key = public_key
        self.states = states
        self.tokens: set[str] = set()
        self.jobs: dict[str, dict] = {}  # name -> the stored resource (JSON, as the service answers)
        self.steps: dict[str, int] = {}
        self.calls: list[tuple[str, str]] = []  # (method, path) of every /v1/ call
        self.bodies: list[dict] = []  # every create body, as parsed
        self.refuse: list = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeVertex:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- the API --------------------------------------------------------------------------------

    def _token(self, form: dict[str, str]) -> tuple[int, dict]:
        if form.get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer":
            return 400, {"error": "unsupported_grant_type"}
        try:
            # google-auth addresses the assertion to Google's token URI whatever token_uri it posts to
            claims = jwt.decode(form.get("assertion", ""), certs=self.public_key,
                                audience=[f"{self.url}/token", "https://oauth2.googleapis.com/token"])
        except ValueError as exc:
            return 400, {"error": "invalid_grant", "error_description": str(exc)}
        token = f"ya29.fake-{len(self.tokens)}-{claims['iss'].split('@')[0]}"
        self.tokens.add(token)
        return 200, {"access_token": token, "expires_in": 3600, "token_type": "Bearer"}

    def _create(self, project: str, region: str, kind: str, raw: bytes) -> tuple[int, dict]:
        try:
            body = json.loads(raw)
            message = TYPES[kind].pb(TYPES[kind]())
            json_format.ParseDict(body, message)  # unknown fields fail, as the service refuses them
        except (ValueError, json_format.ParseError) as exc:
            return status(400, "INVALID_ARGUMENT", "Invalid JSON payload received.",
                          {"@type": "type.googleapis.com/google.rpc.BadRequest",
                           "fieldViolations": [{"field": "", "description": str(exc)[:300]}]})
        self.bodies.append(body)
        if self.refuse:
            answer = self.refuse.pop(0)
            if answer != "drop":
                return answer
        with self.lock:
            job_id = str(1000 + len(self.jobs))
            name = f"projects/{project}/locations/{region}/{kind}/{job_id}"
            now = dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")
            typed = TYPES[kind].from_json(json.dumps(body))
            typed.name, typed.state, typed.create_time = name, "JOB_STATE_QUEUED", now
            self.jobs[name] = json.loads(TYPES[kind].to_json(typed, use_integers_for_enums=False))
            self.steps[name] = 0
        return 200, self.jobs[name]

    def _get(self, name: str) -> tuple[int, dict]:
        with self.lock:
            job = self.jobs[name]
            if job["state"] == "JOB_STATE_CANCELLING":
                job["state"] = "JOB_STATE_CANCELLED"
            elif job["state"] not in ("JOB_STATE_CANCELLED",) and self.steps[name] < len(self.states):
                job["state"] = self.states[self.steps[name]]
                self.steps[name] += 1
                if job["state"] == "JOB_STATE_FAILED":
                    job["error"] = {"code": 3, "message": "The replica workerpool0-0 exited with a non-zero status of 1."}
            return 200, job

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json; charset=UTF-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self) -> bool:
                header = self.headers.get("Authorization", "")
                if header.startswith("Bearer ") and header[7:] in fake.tokens:
                    return True
                self._send(*status(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. "
                                   "Expected OAuth 2 access token."))
                return False

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                path = urllib.parse.urlsplit(self.path).path
                if path == "/token":
                    form = dict(urllib.parse.parse_qsl(raw.decode()))
                    self._send(*fake._token(form))
                    return
                fake.calls.append(("POST", path))
                if not self._authorized():
                    return
                match = JOB.fullmatch(path)
                if match and match[5] and path[4:-7] in fake.jobs:
                    fake.jobs[path[4:-7]]["state"] = "JOB_STATE_CANCELLING"
                    self._send(200, {})
                    return
                match = COLLECTION.fullmatch(path)
                if not match:
                    self._send(*status(404, "NOT_FOUND", f"no such path {path}"))
                    return
                dropped = bool(fake.refuse) and fake.refuse[0] == "drop"
                answer = fake._create(match[1], match[2], match[3], raw)
                if dropped:
                    self.close_connection = True  # created, but the answer is lost
                    self.connection.shutdown(2)
                    return
                self._send(*answer)

            def do_GET(self) -> None:  # noqa: N802
                split = urllib.parse.urlsplit(self.path)
                fake.calls.append(("GET", split.path))
                if not self._authorized():
                    return
                name = split.path[4:]
                if name in fake.jobs:
                    self._send(*fake._get(name))
                    return
                match = COLLECTION.fullmatch(split.path)
                if not match:
                    self._send(*status(404, "NOT_FOUND", f"The CustomJob does not exist: {name}"))
                    return
                wanted = dict(urllib.parse.parse_qsl(split.query)).get("filter", "")
                label = re.fullmatch(r'labels\.([a-z0-9_-]+)="([^"]*)"', wanted)
                found = [j for n, j in fake.jobs.items() if n.startswith(name + "/")
                         and (not label or j.get("labels", {}).get(label[1]) == label[2])]
                self._send(200, {match[3]: found} if found else {})

        return Handler

