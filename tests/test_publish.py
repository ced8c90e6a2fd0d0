"""One way from a build to the registry: the builder made once a command (builders.Backend) and the publisher
(pipeline.publish) every push goes through."""

from __future__ import annotations

import io
import shutil
import threading
import time

import pytest

from buildkit_py.builders import Backend, builder_class
from buildkit_py.pipeline.buildtypes import BuildOptions, BuildResult
from buildkit_py.pipeline.publish import Made, publish
from buildkit_py.progress import Reporter
from conftest import REPO

QUICKSTART = REPO / "examples" / "quickstart"


def _counting(monkeypatch, name: str) -> list[str | None]:
    """The backend class's `create` replaced by one that records each call (and takes a while, so that calls from
    several threads overlap), then makes the builder as before."""
    cls = builder_class(name)
    real = cls.create.__func__
    calls: list[str | None] = []

    def create(klass, docker):
        calls.append(docker)
        time.sleep(0.05)
        return real(klass, docker)

    monkeypatch.setattr(cls, "create", classmethod(create))
    return calls


def test_the_backend_makes_its_builder_once_whoever_asks_first(monkeypatch, testenv):
    calls = _counting(monkeypatch, "legacy")
    backend = Backend("legacy", testenv["BUILDKIT_DOCKER"])
    made: list[object] = []
    threads = [threading.Thread(target=lambda: made.append(backend.made())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [testenv["BUILDKIT_DOCKER"]]
    assert len(made) == 4 and all(m is made[0] for m in made)


def test_a_builder_that_cannot_be_made_is_tried_once(monkeypatch):
    """The background start failed (no engine answers): the stage that needs the builder gets that error, without
    probing again."""
    from buildkit_py.errors import EngineError

    cls = builder_class("legacy")
    calls: list[str | None] = []

    def create(klass, docker):
        calls.append(docker)
        raise EngineError("no Docker engine answers at unix:///nowhere")

    monkeypatch.setattr(cls, "create", classmethod(create))
    backend = Backend("legacy", "unix:///nowhere")
    for _ in range(2):
        with pytest.raises(EngineError, match="no Docker engine answers"):
            backend.made()
    assert calls == ["unix:///nowhere"]


def test_a_result_in_the_registry_already_is_only_attested(tmp_path):
    """An appended edit (or a remote builder's image) is in the registry: the publisher pushes nothing and needs no
    engine; without --attest it hands the result back as it is."""
    from buildkit_py.oci.client import PushResult
    from buildkit_py.oci.refs import parse_ref

    pushed = (PushResult("r.example/x@sha256:" + "1" * 64, "v1", "sha256:" + "1" * 64, None),)
    result = BuildResult("sha256:" + "2" * 64, ("r.example/x:v1",), True, "3" * 64, recipe=None, pushed=pushed)
    said = io.StringIO()
    out = publish(Made(result, (parse_ref("r.example/x:v1"),), None), BuildOptions(push=True, attest=False),
                  Reporter(said))
    assert out is result and said.getvalue() == ""


@pytest.mark.e2e
def test_autopackage_makes_one_builder_for_its_build_and_its_push(monkeypatch, testenv, tmp_path):
    """A local target builds in the engine and then pushes: one builder (its probes run once) for both stages."""
    import buildkit_py as bk

    root = tmp_path / "quick"
    shutil.copytree(QUICKSTART / "trainer", root / "trainer")
    (root / "trainer" / "task.py").write_text((root / "trainer" / "task.py").read_text()
                                              + f"# {time.time_ns()}\n")  # new content: built and pushed
    for name, value in testenv.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("BUILDKIT_PY_DOCKER", testenv["BUILDKIT_DOCKER"])
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    calls = _counting(monkeypatch, "auto")
    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/publish-e2e/quick"
    result = bk.autopackage(root, target="local", image=image, progress="quiet")
    stages = {s.name: s for s in result.stages}
    assert stages["push"].detail.startswith("pushed ") and result.run is not None and result.run.exit_code == 0
    assert len(calls) == 1, calls
