"""A loopback HTTP server that behaves like the Vertex AI v1 REST API for training jobs, and like
Google's OAuth token endpoint, for tests where the real service cannot be reached.

- POST /token: a service-account JWT bearer grant (the assertion's signature is verified with the
  key file's public key); answers an access token.
- Every /v1/ call must carry one of the tokens it issued (else 401 UNAUTHENTICATED).
- POST .../customJobs and .../hyperparameterTuningJobs: the body is parsed with the official
  google.cloud.aiplatform_v1 types (unknown or misspelled fields: 400 INVALID_ARGUMENT with a
  google.rpc.BadRequest); the job is stored and answered as the service answers it (name, state,
  createTime; enums by name, camelCase).
- POST .../trainingPipelines: the TrainingPipeline is parsed strictly, then its trainingTaskInputs as the
  task definition says (custom_task_1.0.0.yaml: a CustomJobSpec; hyperparameter_tuning_task_1.0.0.yaml: the
  fields of a HyperparameterTuningJob's study and trial spec); the service's refusals for an unknown task
  definition, a model without a serving container and a model without artifacts (no baseOutputDirectory
  and no artifactUri) are 400 INVALID_ARGUMENT. A pipeline walks `pipeline_states`; when it succeeds, its
  modelToUpload carries the uploaded model's resource name and trainingTaskMetadata its backing job.
- GET of a job moves it one step along `states`; list with filter labels.KEY="VALUE"; :cancel.
- POST /v2/entries:list: Cloud Logging (logging_loopback.FakeLogging), which the job's moves write to.
- `refuse` queues answers for the next creates: (HTTP status, google.rpc.Status JSON) or "drop"
  (the job is created, then the connection closes before the answer, as after a timeout).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from google.auth import jwt
from google.cloud import aiplatform_v1
from google.protobuf import json_format
from logging_loopback import FakeLogging

from conftest import LoopbackServer

TYPES = {"customJobs": aiplatform_v1.CustomJob, "hyperparameterTuningJobs": aiplatform_v1.HyperparameterTuningJob,
         "trainingPipelines": aiplatform_v1.TrainingPipeline}
COLLECTION = re.compile(r"/v1/projects/([a-z0-9-]+)/locations/([a-z0-9-]+)/"
                        r"(customJobs|hyperparameterTuningJobs|trainingPipelines)")
JOB = re.compile(COLLECTION.pattern + r"/([0-9]+)(:cancel)?")
STATES = ("JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED")
PIPELINE_STATES = ("PIPELINE_STATE_PENDING", "PIPELINE_STATE_RUNNING", "PIPELINE_STATE_SUCCEEDED")
SCHEMAS = "gs://google-cloud-aiplatform/schema/trainingjob/definition/"
CUSTOM_TASK, TUNING_TASK = SCHEMAS + "custom_task_1.0.0.yaml", SCHEMAS + "hyperparameter_tuning_task_1.0.0.yaml"
TUNING_INPUTS = ("studySpec", "maxTrialCount", "parallelTrialCount", "maxFailedTrialCount", "trialJobSpec")


def status(code: int, name: str, message: str, *details: dict) -> tuple[int, dict]:
    """A google.rpc.Status error as the REST API sends it."""
    return code, {"error": {"code": code, "message": message, "status": name, "details": list(details)}}


def bad_request(field: str, description: str) -> tuple[int, dict]:
    return status(400, "INVALID_ARGUMENT", description, {"@type": "type.googleapis.com/google.rpc.BadRequest",
                                                         "fieldViolations": [{"field": field, "description": description}]})


def pipeline_problem(body: dict) -> tuple[int, dict] | None:
    """What the service refuses in a TrainingPipeline its type alone does not: the task's inputs by the task
    definition's schema, a model to upload without a serving container or without artifacts."""
    definition, inputs = body.get("trainingTaskDefinition"), body.get("trainingTaskInputs")
    if definition not in (CUSTOM_TASK, TUNING_TASK):
        return bad_request("training_task_definition", f"Training task definition {definition!r} is not supported.")
    if not isinstance(inputs, dict):
        return bad_request("training_task_inputs", "Training task inputs must be an object.")
    try:
        if definition == CUSTOM_TASK:
            json_format.ParseDict(inputs, aiplatform_v1.CustomJobSpec.pb(aiplatform_v1.CustomJobSpec()))
            spec = inputs
        else:
            extra = sorted(set(inputs) - set(TUNING_INPUTS))
            if extra:
                raise json_format.ParseError(f"unknown fields {extra}")
            tuning = aiplatform_v1.HyperparameterTuningJob
            json_format.ParseDict({"displayName": "x", **inputs}, tuning.pb(tuning()))
            spec = inputs.get("trialJobSpec", {})
    except json_format.ParseError as exc:
        return bad_request("training_task_inputs", f"Training task inputs do not match {definition}: {str(exc)[:300]}")
    model = body.get("modelToUpload")
    if model is not None:
        if not model.get("containerSpec", {}).get("imageUri"):
            return bad_request("model_to_upload.container_spec.image_uri", "The model to upload needs a container image.")
        base = spec.get("baseOutputDirectory", {}).get("outputUriPrefix")
        if not base and (definition == TUNING_TASK or not model.get("artifactUri")):
            return bad_request("model_to_upload.artifact_uri", "Either base_output_directory in the training task "
                               "inputs or model_to_upload.artifact_uri must be set.")
    return None


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



def send_json(handler: BaseHTTPRequestHandler, code: int, body: dict) -> None:
    """A JSON answer as Google's REST APIs give it (the loopback stand-ins share it)."""
    data = json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json; charset=UTF-8")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)

class FakeVertex:
    def __init__(self, public_key: str | None = None, states: tuple[str, ...] = STATES,
                 pipeline_states: tuple[str, ...] = PIPELINE_STATES):
        self.public_key = public_key
        self.states = states
        self.pipeline_states = pipeline_states
        self.tokens: set[str] = set()
        self.jobs: dict[str, dict] = {}  # name -> the stored resource (JSON, as the service answers)
        self.steps: dict[str, int] = {}
        self.calls: list[tuple[str, str]] = []  # (method, path) of every /v1/ call
        self.bodies: list[dict] = []  # every create body, as parsed
        self.refuse: list = []
        self.logging = FakeLogging()  # Cloud Logging's entries.list on the same server: its tokens are ours
        self.lock = threading.Lock()
        self.server = LoopbackServer(("127.0.0.1", 0), self._handler())
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
        problem = pipeline_problem(body) if kind == "trainingPipelines" else None
        if problem:
            return problem
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
            typed.name, typed.create_time = name, now
            typed.state = "PIPELINE_STATE_PENDING" if kind == "trainingPipelines" else "JOB_STATE_QUEUED"
            self.jobs[name] = json.loads(TYPES[kind].to_json(typed, use_integers_for_enums=False))
            self.steps[name] = 0
        return 200, self.jobs[name]

    def _get(self, name: str) -> tuple[int, dict]:
        with self.lock:
            job = self.jobs[name]
            states = self.pipeline_states if "/trainingPipelines/" in name else self.states
            if job["state"].endswith("_CANCELLING"):
                job["state"] = job["state"].replace("_CANCELLING", "_CANCELLED")
            elif not job["state"].endswith("_CANCELLED") and self.steps[name] < len(states):
                job["state"] = states[self.steps[name]]
                self.steps[name] += 1
                self.logging.job_moved(name, job["state"])
                if job["state"] in ("JOB_STATE_FAILED", "PIPELINE_STATE_FAILED"):
                    job["error"] = {"code": 3, "message": "The replica workerpool0-0 exited with a non-zero status of 1."}
                if job["state"] == "PIPELINE_STATE_SUCCEEDED":
                    self._uploaded(name, job)
            return 200, job

    def _uploaded(self, name: str, pipeline: dict) -> None:
        """What a succeeded pipeline says: its backing job and the model it uploaded (into its project and location)."""
        parent, number = name.split("/trainingPipelines/")
        if pipeline["trainingTaskDefinition"] == TUNING_TASK:
            pipeline["trainingTaskMetadata"] = {"backingHyperparameterTuningJob": f"{parent}/hyperparameterTuningJobs/{number}",
                                                "bestTrialBackingCustomJob": f"{parent}/customJobs/{number}"}
        else:
            pipeline["trainingTaskMetadata"] = {"backingCustomJob": f"{parent}/customJobs/{number}"}
        pipeline["modelToUpload"].update(name=f"{parent}/models/{4000 + int(number)}", versionId="1")

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _send(self, code: int, body: dict) -> None:
                send_json(self, code, body)

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
                if path == "/v2/entries:list":
                    answer = fake.logging.answer(raw)
                    if answer == "drop":
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    self._send(*answer)
                    return
                match = JOB.fullmatch(path)
                if match and match[5] and path[4:-7] in fake.jobs:
                    kind = "PIPELINE" if match[3] == "trainingPipelines" else "JOB"
                    fake.jobs[path[4:-7]]["state"] = f"{kind}_STATE_CANCELLING"
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

