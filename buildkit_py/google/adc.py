"""Google Application Default Credentials through google-auth: the one place the tool asks for them, for the Vertex AI
and Cloud Build clients, the registry and the Artifact Registry Python indexes alike (GOOGLE_APPLICATION_CREDENTIALS
honoured: a service-account key file's token_uri says where tokens come from)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import BuildkitError, quoted

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# Artifact Registry (Docker and Python repositories) and gcr.io take an access token as this user's password.
TOKEN_LOGIN = "oauth2accesstoken"
LOGIN_HINT = "run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS"


def default(error: type[BuildkitError], hint: str = LOGIN_HINT) -> tuple[Any, str | None]:
    """(credentials, their project); none found is an `error` saying how to get them."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        return google.auth.default(scopes=[SCOPE])
    except DefaultCredentialsError as exc:
        raise error(f"no Google Application Default Credentials ({quoted(exc)}); {hint}") from None


def token(credentials: Any, error: type[BuildkitError], what: str, hint: str = "", fresh: bool = False) -> str:
    """A current access token, refreshed when it has expired (fresh: always, for a token that must outlast a long
    push); a refusal is an `error` naming `what` it was for."""
    if fresh or not credentials.valid:
        from google.auth.transport.requests import Request

        try:
            credentials.refresh(Request())
        except Exception as exc:  # google-auth raises several types; all mean "no token"
            raise error(f"could not get an access token {what}: {quoted(exc)}{hint}") from None
    return credentials.token


@dataclass(frozen=True)
class Identity:
    """Who credentials act as, for a message saying what to grant: as a message names it, and the address where
    one is known (IAM's member then follows from it)."""

    said: str
    email: str | None = None

    def __str__(self) -> str:
        return self.said

    @property
    def member(self) -> str:
        """The IAM member of `gcloud ... add-iam-policy-binding --member`; MEMBER where no address is known."""
        if self.email is None:
            return "MEMBER"
        kind = "serviceAccount" if self.email.endswith(".gserviceaccount.com") else "user"
        return f"{kind}:{self.email}"


def identity(credentials: Any, unknown: str = "the account of `gcloud auth application-default login`") -> Identity:
    """Who the credentials act as: a service account's address, the account of user credentials, else `unknown`."""
    email = getattr(credentials, "service_account_email", None)  # key files, the metadata server (after a refresh)
    if isinstance(email, str) and "@" in email:
        return Identity(email, email)
    account = getattr(credentials, "account", None)  # gcloud's user credentials name their account
    if isinstance(account, str) and account:
        return Identity(account, account if "@" in account else None)
    return Identity(unknown)
