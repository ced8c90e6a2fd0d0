"""A stand-in of the Cloud Build v1 REST API on loopback that really builds.

Every request body is parsed with the official types (google-cloud-build's cloudbuild_v1.Build: an unknown or
mistyped field is refused as the service refuses it). A build fetches its source from the loopback storage
stand-in with google-cloud-storage, resolves `availableSecrets` from a stand-in Secret Manager (version name ->
value), runs its steps on this machine against the test Docker engine (the docker builder's `docker` is the
Debian client with BuildKit built in), pushes `images` to the loopback registry and reports status, log
(gs://LOGS_BUCKET/log-ID.txt) and results.images[].digest the way Cloud Build does.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.parse
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from google.cloud.devtools import cloudbuild_v1
from google.protobuf.json_format import ParseError
from vertex_loopback import send_json

from conftest import LoopbackServer

DOCKER_BUILDER = "gcr.io/cloud-builders/docker"
SECRET_BYTES = 65536  # Secret Manager's limit on a secret version's payload
BUILDS = re.compile(r"/v1/projects/([^/]+)/locations/([^/]+)/builds(?:/([^/:]+))?(:cancel)?")


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def status(code: int, name: str, message: str, *details: dict) -> tuple[int, dict]:
    return code, {"error": {"code": code, "message": message, "status": name, "details": list(details)}}


def service_disabled(project: str) -> tuple[int, dict]:
    """What Google answers when the Cloud Build API is not enabled in the project."""
    return status(403, "PERMISSION_DENIED", f"Cloud Build API has not been used in project {project} before or it is "
                  "disabled.", {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
                                "domain": "googleapis.com", "metadata": {"service": "cloudbuild.googleapis.com",
                                                                         "consumer": f"projects/{project}"}})


class CloudBuildStandIn:
    def __init__(self, gcs, docker_env: dict[str, str], tokens: set[str], secrets: dict[str, bytes] | None = None,
                 docker_client: str = "/usr/bin/docker"):
        self.gcs, self.docker_env, self.tokens = gcs, docker_env, tokens
        self.secrets = dict(secrets or {})  # Secret Manager: version name -> value
        assert all(len(v) <= SECRET_BYTES for v in self.secrets.values()), "Secret Manager holds at most 64 KiB a value"
        self.refuse: dict[str, tuple[int, dict]] = {}  # project -> the error every call for it gets
        # The metadata server a step reaches (GCE_METADATA_HOST): the build's service account's access token.
        self.metadata_token = f"ya29.build-sa-{uuid.uuid4().hex[:12]}"
        self.metadata_asked: list[bool] = []  # per token request: whether it carried Metadata-Flavor: Google
        self.builds: dict[str, dict] = {}  # id -> the Build resource (JSON), as GET answers
        self.bodies: list[dict] = []  # every create body, as sent
        self.cancelled: list[str] = []
        self.answer_delay = 0.0  # seconds a create's answer waits once the build runs: a slow network
        self._procs: dict[str, subprocess.Popen] = {}
        self._bin = Path(tempfile.mkdtemp(prefix="cloudbuild-standin-"))
        (self._bin / "docker").symlink_to(docker_client)  # what `docker` is inside the docker builder's step
        self.lock = threading.Lock()
        self.server = LoopbackServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> CloudBuildStandIn:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        for proc in list(self._procs.values()):
            proc.kill()
        self.server.shutdown()
        self.server.server_close()

    # -- the API --------------------------------------------------------------------------------------------

    def _create(self, project: str, region: str, raw: bytes) -> tuple[int, dict]:
        try:
            cloudbuild_v1.Build.from_json(raw.decode())  # the official types: unknown fields are refused
        except (ParseError, ValueError, UnicodeDecodeError) as exc:
            return status(400, "INVALID_ARGUMENT", f"Invalid JSON payload received. {exc}")
        body = json.loads(raw)
        self.bodies.append(body)
        problem = self._check(body, project)
        if problem:
            return status(400, "INVALID_ARGUMENT", problem)
        build_id = str(uuid.uuid4())
        build = {**body, "id": build_id, "projectId": project, "status": "QUEUED", "createTime": _now(),
                 "name": f"projects/{project}/locations/{region}/builds/{build_id}",
                 "logUrl": f"{self.url}/logs/{build_id}"}
        with self.lock:
            self.builds[build_id] = build
        threading.Thread(target=self._run, args=(build_id,), daemon=True).start()
        time.sleep(self.answer_delay)
        operation = {"name": f"projects/{project}/locations/{region}/operations/{uuid.uuid4()}",
                     "metadata": {"@type": "type.googleapis.com/google.devtools.cloudbuild.v1.BuildOperationMetadata",
                                  "build": build}}
        return 200, operation

    def _check(self, body: dict, project: str) -> str | None:
        """What the service refuses at creation (a small part of it)."""
        names = {s["env"] for s in (body.get("availableSecrets") or {}).get("secretManager", [])}
        for step in body.get("steps", []):
            for name in step.get("secretEnv", []):
                if name not in names:
                    return f"secretEnv {name} is not defined in availableSecrets"
        if body.get("serviceAccount") and not (body.get("logsBucket") or (body.get("options") or {}).get("logging")):
            return "if 'build.service_account' is specified, the build must either specify a logs bucket or logging"
        return None

    # -- running a build --------------------------------------------------------------------------------------

    def _log(self, build: dict, lines: list[str]) -> None:
        bucket, _, prefix = build["logsBucket"][len("gs://"):].partition("/")
        name = "/".join(p for p in (prefix, f"log-{build['id']}.txt") if p)
        self.gcs.objects[(bucket, name)] = ("".join(line + "\n" for line in lines)).encode()

    def _set(self, build_id: str, **fields) -> None:
        with self.lock:
            if self.builds[build_id]["status"] in ("QUEUED", "WORKING"):  # a cancelled or timed-out build stays so
                self.builds[build_id].update(fields)

    def _run(self, build_id: str) -> None:
        build = self.builds[build_id]
        lines: list[str] = []
        self._set(build_id, status="WORKING", startTime=_now())
        # The service stops a build at its timeout (from its start, not counting the queue).
        timer = threading.Timer(float(build.get("timeout", "600s").rstrip("s")), self._stop, (build_id, "TIMEOUT"))
        timer.daemon = True
        timer.start()
        try:
            self._work(build_id, build, lines)
        finally:
            timer.cancel()

    def _work(self, build_id: str, build: dict, lines: list[str]) -> None:
        with tempfile.TemporaryDirectory(prefix="cloudbuild-workspace-") as workspace:
            try:
                self._fetch(build["source"]["storageSource"], Path(workspace))
                lines.append("FETCHSOURCE")
                self._log(build, lines)
                secrets = {s["env"]: self.secrets[s["versionName"]]
                           for s in (build.get("availableSecrets") or {}).get("secretManager", [])
                           if s["versionName"] in self.secrets}
                for index, step in enumerate(build["steps"]):
                    code = self._step(build_id, index, step, secrets, Path(workspace), lines)
                    if self.builds[build_id]["status"] in ("CANCELLED", "TIMEOUT"):
                        lines.append(f"ERROR: {self.builds[build_id]['status']}")
                        self._log(build, lines)
                        return
                    if code != 0:
                        detail = (f'Build step failure: build step {index} "{step["name"]}" failed: step exited with '
                                  f"non-zero status: {code}")
                        lines.append(f"ERROR: {detail}")
                        self._log(build, lines)
                        self._set(build_id, status="FAILURE", statusDetail=detail, finishTime=_now(),
                                  failureInfo={"type": "USER_BUILD_STEP", "detail": detail})
                        return
                images = []
                lines.append("PUSH")
                for image in build.get("images", []):
                    push = subprocess.run([str(self._bin / "docker"), "push", image], capture_output=True, text=True,
                                          env={**os.environ, **self.docker_env})
                    lines += [f"Pushing {image}", *push.stdout.splitlines()]
                    digest = re.search(r"digest: (sha256:[0-9a-f]{64})", push.stdout)
                    if push.returncode != 0 or not digest:
                        raise RuntimeError(f"push of {image} failed: {push.stderr[-500:]}")
                    images.append({"name": image, "digest": digest[1]})
                lines.append("DONE")
                self._log(build, lines)
                self._set(build_id, status="SUCCESS", finishTime=_now(), results={"images": images})
            except Exception as exc:  # the service's own failure
                lines.append(f"ERROR: {exc}")
                self._log(build, lines)
                self._set(build_id, status="INTERNAL_ERROR", statusDetail=str(exc)[:500], finishTime=_now())

    def _fetch(self, source: dict, workspace: Path) -> None:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        client = storage.Client(project="cloudbuild-standin", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": self.gcs.url})
        data = client.bucket(source["bucket"]).blob(source["object"]).download_as_bytes()
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            tar.extractall(workspace, filter="data")

    def _step(self, build_id: str, index: int, step: dict, secrets: dict[str, bytes], workspace: Path,
              lines: list[str]) -> int:
        if step["name"] != DOCKER_BUILDER:
            lines.append(f"ERROR: the stand-in runs only {DOCKER_BUILDER} steps, not {step['name']}")
            return 1
        # Cloud Build's substitution: $$ is a dollar; this stand-in knows no other substitution.
        args = [a.replace("$$", "$") for a in step.get("args", [])]
        env = {"PATH": f"{self._bin}:/usr/bin:/bin", "HOME": str(workspace), **self.docker_env,
               "GCE_METADATA_HOST": self.url.split("://", 1)[1]}
        env.update(e.split("=", 1) for e in step.get("env", []))
        env.update({name: secrets[name].decode() for name in step.get("secretEnv", []) if name in secrets})
        prefix = f'Step #{index} - "{step.get("id", index)}": '
        lines.append(f'Starting Step #{index} - "{step.get("id", index)}"')
        proc = subprocess.Popen([step.get("entrypoint", "docker"), *args], cwd=workspace / step.get("dir", ""),
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        self._procs[build_id] = proc
        last = time.monotonic()
        for line in proc.stdout:
            lines.append(prefix + line.rstrip("\n"))
            if time.monotonic() - last > 0.5:
                self._log(self.builds[build_id], lines)
                last = time.monotonic()
        code = proc.wait()
        self._procs.pop(build_id, None)
        lines.append(f'Finished Step #{index} - "{step.get("id", index)}"')
        self._log(self.builds[build_id], lines)
        return code

    def _cancel(self, build_id: str) -> tuple[int, dict]:
        if build_id not in self.builds:
            return status(404, "NOT_FOUND", f"build {build_id} not found")
        self.cancelled.append(build_id)
        self._stop(build_id, "CANCELLED")
        return 200, self.builds[build_id]

    def _stop(self, build_id: str, state: str) -> None:
        with self.lock:
            if self.builds[build_id]["status"] not in ("QUEUED", "WORKING"):
                return
            self.builds[build_id].update(status=state, finishTime=_now())
        proc = self._procs.get(build_id)
        if proc:
            proc.kill()

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, code: int, body: dict) -> None:
                send_json(self, code, body)

            def _route(self, method: str) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path == "/computeMetadata/v1/instance/service-accounts/default/token":
                    flavoured = self.headers.get("Metadata-Flavor") == "Google"
                    fake.metadata_asked.append(flavoured)
                    if not flavoured:  # what the metadata server answers a request without the header
                        return self._send(403, {"error": "Missing required header: Metadata-Flavor"})
                    return self._send(200, {"access_token": fake.metadata_token, "expires_in": 3599,
                                            "token_type": "Bearer"})
                header = self.headers.get("Authorization", "")
                if not (header.startswith("Bearer ") and header[7:] in fake.tokens):
                    return self._send(*status(401, "UNAUTHENTICATED", "Request had invalid authentication credentials."))
                match = BUILDS.fullmatch(urllib.parse.urlsplit(self.path).path)
                if not match:
                    return self._send(*status(404, "NOT_FOUND", f"no such method {self.path}"))
                project, region, build_id, cancel = match.groups()
                if project in fake.refuse:
                    return self._send(*fake.refuse[project])
                if method == "POST" and not build_id:
                    return self._send(*fake._create(project, region, raw))
                if method == "POST" and cancel:
                    return self._send(*fake._cancel(build_id))
                if method == "GET" and build_id in fake.builds:
                    with fake.lock:
                        return self._send(200, dict(fake.builds[build_id]))
                return self._send(*status(404, "NOT_FOUND", f"build {build_id} not found"))

            def do_GET(self) -> None:  # noqa: N802
                self._route("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._route("POST")

        return Handler
