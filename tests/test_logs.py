"""`buildkit-py logs` and the log lines of `submit --wait`, against the Cloud Logging stand-in (tests/logging_loopback.py)
served beside the Vertex AI one: real request and answer shapes, paging, a filter it parses, refusals."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from logging_loopback import parse_filter
from test_submit import CONFIG, main, submit_args
from vertex_loopback import status

from buildkit_py.errors import ServiceError
from buildkit_py.jobs import logs as jobs_logs
from buildkit_py.jobs import submit as jobs_submit

JOB = "projects/fake-project/locations/us-central1/customJobs/1000"
CONSOLE = "https://console.cloud.google.com/vertex-ai/locations/us-central1/training/1000/cpu?project=fake-project"


@pytest.fixture
def trainer(project):
    return project({"buildkit.yaml": CONFIG, "trainer/__init__.py": "", "trainer/task.py": "print('hi')\n"})


@pytest.fixture
def no_waiting(monkeypatch):
    monkeypatch.setattr(jobs_logs, "RETRIES", 1)
    monkeypatch.setattr(jobs_logs.time, "sleep", lambda seconds: None)


def a_job(fake, state: str = "JOB_STATE_RUNNING", name: str = JOB) -> None:
    fake.jobs[name] = {"name": name, "state": state, "displayName": "t"}
    if state == "JOB_STATE_FAILED":
        fake.jobs[name]["error"] = {"code": 3, "message": "The replica workerpool0-0 exited with a non-zero status of 1."}
    fake.steps[name] = 99  # stays where it is


def lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.strip()]


def test_every_page_is_read_in_order_each_line_labelled_with_its_replica(fake, capsys, no_waiting):
    a_job(fake, "JOB_STATE_FAILED")
    start = dt.datetime(2026, 11, 27, 10, 0, tzinfo=dt.UTC)
    for i in range(7):
        fake.logging.write("1000", f"workerpool{i % 2}-{i // 2}", f"step {i}", at=start + dt.timedelta(seconds=i))
    fake.logging.write("1000", "workerpool0-0", "Traceback (most recent call last):\n  boom", "ERROR",
                       json_payload=True, at=start + dt.timedelta(seconds=8))
    fake.logging.write("2000", "workerpool0-0", "another job's line", at=start)
    fake.logging.page_size = 3
    code, out, err = main(capsys, "logs", JOB)
    assert code == 0, err
    got = lines(out)
    assert [line.split("] ", 1)[1] for line in got] == [f"step {i}" for i in range(7)] + [
        "Traceback (most recent call last):", "  boom"]
    assert got[1].split()[2] == "[workerpool1-0]" and got[0].split()[1] == "INFO"
    assert got[-1].split()[1] == "ERROR"
    assert len(fake.logging.requests) == 3  # 8 entries of this job, 3 a page
    first = fake.logging.requests[0]
    assert first["resourceNames"] == ["projects/fake-project"] and first["orderBy"] == "timestamp asc"
    assert parse_filter(first["filter"]) is not None and 'job_id="1000"' in first["filter"]
    assert "ended in JOB_STATE_FAILED" in err


@pytest.mark.parametrize("given", [JOB, CONSOLE, "1000"])
def test_a_job_is_named_as_submit_prints_it_or_by_its_id(fake, capsys, given):
    a_job(fake, "JOB_STATE_SUCCEEDED")
    fake.logging.write("1000", "workerpool0-0", "hello")
    extra = ["--project", "fake-project", "--region", "us-central1"] if given == "1000" else []
    code, out, err = main(capsys, "logs", given, "--json", *extra)
    assert code == 0, err
    result = json.loads(out)
    assert result["name"] == JOB and [line["message"] for line in result["lines"]] == ["hello"]
    assert result["lines"][0]["task"] == "workerpool0-0"


def test_a_tuning_jobs_console_url_finds_the_tuning_job_and_its_trials(fake, capsys):
    name = "projects/fake-project/locations/us-central1/hyperparameterTuningJobs/1000"
    a_job(fake, "JOB_STATE_SUCCEEDED", name)
    fake.logging.write("1000", "workerpool0-0", "trial line", trial="3")
    code, out, err = main(capsys, "logs", CONSOLE)
    assert code == 0, err
    assert "[workerpool0-0 trial 3] trial line" in out


@pytest.mark.parametrize("given, fragment", [
    ("1000", "give --project and --region"),
    ("https://console.cloud.google.com/vertex-ai/training?x=1", "not a job's console URL"),
    ("projects/P/locations/r/customJobs/1", "not a job name"),
    ("10\n00", "not a job ID"),
])
def test_a_job_it_cannot_name_is_refused_in_one_line(fake, capsys, given, fragment):
    extra = ["--project", "fake-project", "--region", "us-central1"] if given == "10\n00" else []
    code, out, err = main(capsys, "logs", given, *extra)
    assert code == 2 and fragment in err and len(err.strip().splitlines()) == 1, err


def test_follow_shows_each_line_once_until_the_job_ends_and_resumes_after_a_dropped_read(fake, capsys, no_waiting):
    fake.states = ("JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED")
    fake.logging.script = {"JOB_STATE_RUNNING": [("workerpool0-0", "INFO", "epoch"), ("workerpool1-0", "INFO", "w")],
                           "JOB_STATE_SUCCEEDED": [("workerpool0-0", "INFO", "done")]}
    a_job(fake, "JOB_STATE_QUEUED")
    fake.steps[JOB] = 0
    fake.logging.refuse = ["drop", "drop"]  # the first read fails through its retry: picked up at the next poll
    code, out, err = main(capsys, "logs", JOB, "--follow", "--poll", "0.01")
    assert code == 0, err
    assert [line.split("] ", 1)[1] for line in lines(out)] == ["epoch", "w", "epoch", "w", "done"]
    assert len(set(lines(out))) == 5  # two entries said "epoch": each shown once, none twice


def test_an_entry_that_arrives_late_is_still_shown_once(fake, no_waiting):
    a_job(fake)
    reader = jobs_logs.LogReader(fake.url, "fake-project", jobs_submit.default_credentials()[0])
    follower = jobs_logs.Follower(reader, "1000")
    now = dt.datetime.now(dt.UTC)
    fake.logging.write("1000", "workerpool0-0", "first", at=now)
    assert [line.message for line in follower.read()] == ["first"]
    fake.logging.write("1000", "workerpool1-0", "written earlier, ingested later", at=now - dt.timedelta(seconds=30))
    fake.logging.write("1000", "workerpool0-0", "second", at=now + dt.timedelta(seconds=1))
    assert [line.message for line in follower.read()] == ["written earlier, ingested later", "second"]
    assert list(follower.read()) == []


@pytest.mark.parametrize("answer, fragments", [
    (status(403, "PERMISSION_DENIED", "Permission denied for logs", {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "IAM_PERMISSION_DENIED"}),
     ["trainer@fake-project.iam.gserviceaccount.com cannot read logs in project fake-project", "roles/logging.viewer"]),
    (status(403, "PERMISSION_DENIED", "Cloud Logging API has not been used in project fake-project", {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED"}),
     ["gcloud services enable logging.googleapis.com --project fake-project"]),
])
def test_permission_and_disabled_api_say_what_to_grant_or_enable(fake, capsys, answer, fragments):
    a_job(fake, "JOB_STATE_SUCCEEDED")
    fake.logging.refuse = [answer]
    code, out, err = main(capsys, "logs", JOB)
    assert code == 10 and len(err.strip().splitlines()) == 1, err
    for fragment in fragments:
        assert fragment in err


def test_quota_answers_are_retried(fake, capsys, no_waiting):
    a_job(fake, "JOB_STATE_SUCCEEDED")
    fake.logging.write("1000", "workerpool0-0", "hello")
    fake.logging.refuse = [status(429, "RESOURCE_EXHAUSTED", "Quota exceeded for ReadRequestsPerMinutePerProject")]
    code, out, err = main(capsys, "logs", JOB)
    assert code == 0, err
    assert "hello" in out and len(fake.logging.requests) == 2


def test_a_line_cannot_write_to_the_terminal(fake, capsys):
    a_job(fake, "JOB_STATE_SUCCEEDED")
    fake.logging.write("1000", "workerpool0-0", "\x1b[2J\x1b]0;pwned\x07 cleared\u202e")
    code, out, err = main(capsys, "logs", JOB)
    assert code == 0, err
    assert "\x1b" not in out and "\u202e" not in out and "\\x1b[2J" in out


def test_submit_wait_streams_the_jobs_lines_and_a_failure_ends_with_its_last_lines(fake, trainer, capsys, no_waiting):
    from test_submit import REGISTRY, REPO_NAME, push_image

    push_image(REGISTRY, REPO_NAME, "amd64")
    fake.states = ("JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_FAILED")
    fake.logging.script = {"JOB_STATE_RUNNING": [("workerpool0-0", "INFO", "loading data")],
                           "JOB_STATE_FAILED": [("workerpool0-0", "ERROR", "Traceback (most recent call last):\n"
                                                 "ValueError: bad shape")]}
    code, out, err = main(capsys, *submit_args(trainer, "--wait"))
    assert code == 1
    streamed = lines(out)
    assert streamed.index("state JOB_STATE_RUNNING") < next(i for i, line in enumerate(streamed)
                                                             if line.endswith("loading data"))
    assert any(line.endswith("ValueError: bad shape") for line in streamed)
    tail = err.splitlines()
    assert tail[-1].startswith("buildkit-py: the job ended in JOB_STATE_FAILED: code 3")
    assert tail[-2].endswith("ValueError: bad shape") and "last 3 lines" in tail[-5]
    code, out, err = main(capsys, *submit_args(trainer, "--wait", "--json"))
    assert [line["message"] for line in json.loads(out)["last_lines"]][-1] == "ValueError: bad shape"


def test_submit_wait_goes_on_without_lines_when_the_log_is_refused(fake, trainer, capsys):
    from test_submit import REGISTRY, REPO_NAME, push_image

    push_image(REGISTRY, REPO_NAME, "amd64")
    fake.logging.refuse = [status(403, "PERMISSION_DENIED", "denied")] * 5
    code, out, err = main(capsys, *submit_args(trainer, "--wait"))
    assert code == 0, err
    assert "end     JOB_STATE_SUCCEEDED" in out
    assert "the job's log cannot be shown" in err and "roles/logging.viewer" in err
    assert len(fake.logging.requests) == 1  # refused once: not asked again at every poll


def test_no_logs_follows_the_state_alone(fake, trainer, capsys):
    from test_submit import REGISTRY, REPO_NAME, push_image

    push_image(REGISTRY, REPO_NAME, "amd64")
    code, out, err = main(capsys, *submit_args(trainer, "--wait", "--no-logs"))
    assert code == 0, err
    assert not fake.logging.requests


def test_the_python_api_streams_to_on_line_and_checks_its_keywords(fake):
    import buildkit_py as bk
    from buildkit_py.errors import ConfigError

    a_job(fake, "JOB_STATE_SUCCEEDED")
    fake.logging.write("1000", "workerpool0-0", "hello")
    seen = []
    result = bk.logs(JOB, on_line=seen.append)
    assert [line.message for line in seen] == ["hello"] and result.lines == tuple(seen)
    with pytest.raises(ConfigError, match="follow"):
        bk.logs(JOB, follow="yes")
    with pytest.raises(ConfigError, match="not a keyword of logs"):
        bk.logs(JOB, tail=3)


def test_an_unreachable_logging_api_is_a_service_error(fake, no_waiting, monkeypatch):
    from conftest import socket_closed

    a_job(fake, "JOB_STATE_SUCCEEDED")
    with socket_closed() as url:
        reader = jobs_logs.LogReader(url, "fake-project", jobs_submit.default_credentials()[0])
        with pytest.raises(ServiceError, match="cannot reach the Cloud Logging API") as caught:
            list(jobs_logs.Follower(reader, "1000").read())
    assert caught.value.transient


def test_the_stand_in_refuses_what_the_service_refuses(fake):
    assert parse_filter('resource.labels.job_id="1" AND textPayload:"x"') is None
    assert parse_filter('timestamp=>"x"') is None
    assert fake.logging.answer(json.dumps({"resourceNames": ["projects/other"], "filter": ""}).encode())[0] == 400
    assert fake.logging.answer(json.dumps({"resourceNames": ["projects/fake-project"], "filter": "",
                                           "pageToken": "123:3"}).encode())[0] == 400


def test_an_unreachable_log_never_holds_a_finished_jobs_wait(fake, trainer, capsys, no_waiting, monkeypatch):
    from test_submit import REGISTRY, REPO_NAME, push_image

    from conftest import socket_closed

    push_image(REGISTRY, REPO_NAME, "amd64")
    with socket_closed() as url:
        monkeypatch.setenv(jobs_logs.ENDPOINT_ENV, url)
        code, out, err = main(capsys, *submit_args(trainer, "--wait"))
    assert code == 0, err
    assert "end     JOB_STATE_SUCCEEDED" in out
    assert "the job's log cannot be shown" in err and "cannot reach the Cloud Logging API" in err
