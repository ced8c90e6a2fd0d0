"""One error hierarchy: every failure the user can cause or meet has a message and an exit code."""

from __future__ import annotations

SHOWN_CHARS = 120  # a 70,000-character value is named by its start and its length


def show(value: object) -> str:
    """A user's value in a message: escaped (repr), so control characters, line separators and
    terminal escapes stay visible and inert, and cut short when long."""
    text = repr(value)
    if len(text) > SHOWN_CHARS:
        size = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters as written"
        text = f"{text[:SHOWN_CHARS]}... ({size})"
    return text


class BuildkitError(Exception):
    """Base of all errors buildkit-py reports to the user (never a traceback)."""

    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(BuildkitError):
    """The config (file or flags) is malformed or names something not allowed."""

    exit_code = 2

    def __init__(self, message: str, *, field: str | None = None, where: str | None = None):
        prefix = ""
        if where:
            prefix += f"{where}: "
        if field:
            prefix += f"{field}: "
        super().__init__(prefix + message)
        self.detail = message  # without the position and field, to restate under another name
        self.field = field
        self.where = where


class ResolutionError(BuildkitError):
    """The config is well-formed but no base image / wheel combination satisfies it."""

    exit_code = 2


class DataError(BuildkitError):
    """The version tables in base_images/ are malformed (a bug in the shipped data)."""

    exit_code = 3


class RenderError(BuildkitError):
    """A template could not be rendered (missing block, syntax error in a user template)."""

    exit_code = 4


class ContextError(BuildkitError):
    """The build context is unsafe (secrets in it) or unreadable."""

    exit_code = 2


class EngineError(BuildkitError):
    """No usable Docker engine or BuildKit client."""

    exit_code = 5


class BuildError(BuildkitError):
    """The image build failed."""

    exit_code = 6


class ImportCheckError(BuildError):
    """The image cannot import a module the trainer imports: the build's import check stopped it."""


class RegistryError(BuildkitError):
    """Authentication or push to a registry failed."""

    exit_code = 7


class StageError(BuildkitError):
    """A package could not be uploaded to its stage (a bucket or a directory): the registry's exit code."""

    exit_code = 7


class RunError(BuildkitError):
    """A local run could not start its containers."""

    exit_code = 8


class PackageIndexError(BuildkitError):
    """The package index (PyPI or the user's mirror) could not be read: `matrix check|refresh`."""

    exit_code = 9

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status  # the HTTP status, when the index answered


class ServiceError(BuildkitError):
    """A Google Cloud API (Vertex AI, Cloud Build) could not be reached, or refused the request (its message, one line)."""

    exit_code = 10

    def __init__(self, message: str, *, status: str | None = None, http_status: int | None = None,
                 transient: bool = False):
        super().__init__(message)
        self.status = status  # google.rpc.Code name (RESOURCE_EXHAUSTED...), when the service answered
        self.http_status = http_status
        self.transient = transient  # a timeout, a dropped connection, a 5xx: trying again may help


class WaitInterrupted(BuildkitError):
    """Ctrl-C while following a job: the job keeps running; the message says how to cancel it."""

    exit_code = 130


class OutputError(BuildkitError):
    """A result could not be written where the user asked."""

    exit_code = 2
