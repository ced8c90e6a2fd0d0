"""Image storage of the Docker engine, shared by the backends that build into it (BuildKit, legacy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..clients.engine import engine_client, image_path, socket_call
from ..errors import BuildError, EngineError, show
from ..oci.refs import ImageRef
from ..progress import Reporter

if TYPE_CHECKING:
    from ..oci.client import PushResult


def _message(body) -> str:
    return show(str(body.get("message", ""))[:300]) if isinstance(body, dict) else ""


class EngineImages:
    _client = None

    @property
    def client(self):
        if self._client is None:
            self._client = engine_client()
        return self._client

    def image_id(self, ref: ImageRef) -> str | None:
        answer = socket_call("GET", image_path(str(ref)) + "/json")
        if answer is None:
            return self._engine_image_id(ref)
        status, body = answer
        if status == 404:
            return None
        if status != 200 or not isinstance(body, dict) or not isinstance(body.get("Id"), str):
            raise EngineError(f"the engine could not look up {ref}: HTTP {status} {_message(body)}")
        return body["Id"]

    def untag(self, ref: ImageRef) -> None:
        """Remove this name from the engine, keeping the image's layers (a later pull of the name fetches only
        what changed)."""
        answer = socket_call("DELETE", image_path(str(ref)) + "?noprune=1")
        if answer is None:
            from docker.errors import APIError, ImageNotFound

            try:
                self.client.api.remove_image(str(ref), noprune=True)
            except ImageNotFound:
                pass
            except APIError as exc:
                raise EngineError(f"the engine kept {ref}: {exc.explanation or exc}") from None
        elif answer[0] not in (200, 404):
            raise EngineError(f"the engine kept {ref}: HTTP {answer[0]} {_message(answer[1])}")

    def _engine_image_id(self, ref: ImageRef) -> str | None:
        from docker.errors import ImageNotFound

        try:
            return self.client.images.get(str(ref)).id
        except ImageNotFound:
            return None

    def tag(self, image_id: str, refs: Sequence[ImageRef]) -> None:
        """A refusal removes the tags this call added."""
        from docker.errors import APIError

        added: list[ImageRef] = []
        for ref in refs:
            existed = self._engine_image_id(ref) is not None  # by the SDK: the client is there already
            try:
                ok, why = self.client.api.tag(image_id, ref.repository, ref.tag), "no reason given"
            except APIError as exc:
                ok, why = False, exc.explanation or exc
            if not ok:
                for done in added:
                    try:
                        self.client.api.remove_image(str(done), noprune=True)
                    except APIError:
                        pass
                raise BuildError(f"the engine refused to tag {image_id} as {ref}: {why}")
            if not existed:
                added.append(ref)

    def pull(self, ref: ImageRef) -> str | None:
        """Bring an image from its registry into the engine, which fetches only the layers it lacks; its ID, or
        None when the registry or the engine refused (the caller builds instead)."""
        from docker.errors import DockerException
        from requests.exceptions import RequestException

        from ..oci.credentials import credentials_for

        creds = credentials_for(ref.registry)
        try:
            for chunk in self.client.api.pull(ref.repository, tag=ref.tag, stream=True, decode=True,
                                              auth_config=creds.auth_config() if creds else None):
                if "error" in chunk or "errorDetail" in chunk:
                    return None
        except (DockerException, RequestException):
            return None
        return self._engine_image_id(ref)

    def push(self, ref: ImageRef, reporter: Reporter) -> PushResult:
        from ..builders.engine_push import push  # loaded by a push only: planning and rendering never need it

        return push(ref, reporter, client=self.client)
