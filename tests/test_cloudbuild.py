"""The Cloud Build request and context archive, without a service: every option the config allows makes a Build the
official types accept, secrets appear only by version name, the same content makes the same archive bytes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from google.cloud.devtools import cloudbuild_v1

from buildkit_py.builders.base import BuildRequest
from buildkit_py.builders.cloudbuild import CloudBuildSettings, build_body, context_archive, settings
from buildkit_py.config import load_config
from buildkit_py.errors import ConfigError
from buildkit_py.oci.refs import parse_ref
from conftest import CA_BUNDLE


def request(root: Path, **fields) -> BuildRequest:
    (root / "context").mkdir(parents=True, exist_ok=True)
    (root / "context" / "task.py").write_text("print('hi')\n")
    (root / "Dockerfile").write_text("FROM scratch\n")
    tags = (parse_ref("us-docker.pkg.dev/p/r/trainer:bk-1"), parse_ref("us-docker.pkg.dev/p/r/trainer:git-abc"))
    return BuildRequest(context_dir=root / "context", dockerfile=root / "Dockerfile", labels=(("a.b", "c d$x"),),
                        platform="linux/amd64", network="host", tags=tags, **fields)


def test_every_option_makes_a_build_the_official_types_accept(tmp_path):
    conf = CloudBuildSettings(endpoint="https://cloudbuild.googleapis.com", project="my-project", region="europe-west4",
                              bucket="my-bucket", timeout=5400, machine_type="E2_HIGHCPU_8", disk_size_gb=200,
                              worker_pool="projects/p/locations/europe-west4/workerPools/pool",
                              service_account="builder@my-project.iam.gserviceaccount.com",
                              secrets=(("buildkit-ca", "projects/p/secrets/ca/versions/1"),
                                       ("buildkit-pip-conf", "projects/p/secrets/pip/versions/latest")))
    body = build_body(request(tmp_path, no_cache=True), conf, "buildkit-py/contexts/abc.tar.gz")
    build = cloudbuild_v1.Build.from_json(json.dumps(body))  # an unknown or mistyped field raises
    assert build.options.machine_type == cloudbuild_v1.BuildOptions.MachineType.E2_HIGHCPU_8
    assert build.options.disk_size_gb == 200 and build.options.pool.name.endswith("/workerPools/pool")
    assert build.service_account == "projects/my-project/serviceAccounts/builder@my-project.iam.gserviceaccount.com"
    assert build.timeout.total_seconds() == 5400 and build.logs_bucket == "gs://my-bucket/buildkit-py/logs"
    script = build.steps[0].args[1]
    # Cloud Build substitutes $NAME: every dollar the shell needs is doubled, the label's included.
    assert "$" not in script.replace("$$", "")
    assert '"c d$$x"' in script or "'a.b=c d$$x'" in script
    assert "--no-cache" in script and "--secret" in script and "DOCKER_BUILDKIT=1" in build.steps[0].env
    assert sorted(build.steps[0].secret_env) == ["BUILDKIT_PY_CA", "BUILDKIT_PY_PIP_CONF"]
    assert list(build.images)[-1] == "us-docker.pkg.dev/p/r/trainer:buildcache"


def test_the_same_content_makes_the_same_archive(tmp_path):
    first = context_archive(request(tmp_path / "a"), tmp_path / "a.tar.gz")
    second_request = request(tmp_path / "b")
    os.utime(second_request.context_dir / "task.py", (12345, 12345))
    assert context_archive(second_request, tmp_path / "b.tar.gz") == first
    (second_request.context_dir / "task.py").write_text("print('edited')\n")
    assert context_archive(second_request, tmp_path / "c.tar.gz") != first


@pytest.mark.parametrize("yaml_text, field", [
    ("pip_index_url: https://user:pw@index/simple\n", "cloudbuild.pip_conf_secret"),
    ("ca_cert: ca.pem\n", "cloudbuild.ca_cert_secret"),
])
def test_local_secrets_are_refused_without_their_secret_manager_version(tmp_path, monkeypatch, yaml_text, field):
    from vertex_loopback import new_key_file

    key, _ = new_key_file(tmp_path, "http://127.0.0.1:9/token")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    bundle = Path(CA_BUNDLE).read_text()
    (tmp_path / "ca.pem").write_text(bundle[bundle.rindex("-----BEGIN CERTIFICATE-----"):])
    (tmp_path / "buildkit.yaml").write_text("framework: none\nbuilder: cloudbuild\n" + yaml_text)
    config = load_config(directory=tmp_path)
    with pytest.raises(ConfigError) as caught:
        settings(config, None, {})
    assert caught.value.field == field and "pw@" not in str(caught.value)


@pytest.mark.parametrize("yaml_text, env, expected", [
    ("", {}, ("fake-project", "us-central1", "fake-project_cloudbuild")),  # ADC's project (the key file's)
    ("", {"GOOGLE_CLOUD_PROJECT": "env-project"}, ("env-project", "us-central1", "env-project_cloudbuild")),
    ("job: {project: job-project, region: europe-west4}\n", {"GOOGLE_CLOUD_PROJECT": "env-project"},
     ("job-project", "europe-west4", "job-project_cloudbuild")),
    ("job: {project: job-project, region: europe-west4}\ncloudbuild: {project: cb-project, region: asia-east1, "
     "bucket: my-bucket}\n", {}, ("cb-project", "asia-east1", "my-bucket")),
], ids=["adc", "env", "job", "cloudbuild"])
def test_defaults_come_from_job_then_the_environment_then_adc(tmp_path, monkeypatch, yaml_text, env, expected):
    from vertex_loopback import new_key_file

    key, _ = new_key_file(tmp_path, "http://127.0.0.1:9/token")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    (tmp_path / "buildkit.yaml").write_text("framework: none\nbuilder: cloudbuild\n" + yaml_text)
    conf = settings(load_config(directory=tmp_path), None, env)
    assert (conf.project, conf.region, conf.bucket) == expected
    assert conf.endpoint == "https://cloudbuild.googleapis.com" and conf.timeout == 3600


def test_a_project_from_the_environment_is_checked(tmp_path, monkeypatch):
    from vertex_loopback import new_key_file

    key, _ = new_key_file(tmp_path, "http://127.0.0.1:9/token")
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    (tmp_path / "buildkit.yaml").write_text("framework: none\nbuilder: cloudbuild\n")
    with pytest.raises(ConfigError) as caught:
        settings(load_config(directory=tmp_path), None, {"GOOGLE_CLOUD_PROJECT": "p/../../x"})
    assert caught.value.field == "$GOOGLE_CLOUD_PROJECT"
