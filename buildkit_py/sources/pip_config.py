"""A pip.conf's package index settings as uv reads them (a uv.toml): what the build passes its installer, uv, as a
secret beside the pip.conf, and what `lock` and the resolution before a build hand `uv pip compile`. And the
logins uv sends to an index's host, passed the same way, as a netrc: the credentials in a requirement's URL, cut out
of it, and an access token for each Artifact Registry Python repository, minted where the build runs."""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ConfigError, PackageIndexError
from ..patterns import lazy_pattern

if TYPE_CHECKING:
    from ..google.adc import Identity

# A URL's userinfo, up to its last "@" before the path (as URL parsers read it: a password may hold a raw "@").
# Bounded, and a scheme starts a word: a 900 KB line without "://" is read once, not once per character.
_URL_USERINFO = lazy_pattern(r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]{0,31}://)(?P<userinfo>[^/\s]{0,2048})@"
                           r"(?P<host>[^/:\s?#]+)")


@dataclass(frozen=True)
class Credential:
    """A login a requirement's URL carried, for its host: what the build's netrc secret holds."""

    host: str
    login: str
    password: str | None  # None: a lone token (https://TOKEN@host), sent as the user name as pip sends it


@dataclass(frozen=True)
class GoogleLogins:
    """Access tokens of Application Default Credentials for the Artifact Registry indexes a build or lock reads, and
    whose they are: what a refusal says needs roles/artifactregistry.reader."""

    credentials: tuple[Credential, ...]
    identity: Identity


# Artifact Registry's Python repositories: REGION-python.pkg.dev (and the multi-regions us-, europe-, asia-).
_GOOGLE_INDEX = lazy_pattern(r"[a-z0-9]+(?:-[a-z0-9]+)*-python\.pkg\.dev", re.ASCII)
_URL_OPTIONS = ("-i", "--index-url", "--extra-index-url", "-f", "--find-links")
READER_ROLE = "roles/artifactregistry.reader"

# pip.conf keys an install reads ([install] over [global]) -> uv.toml keys; uv takes lists where pip
# takes whitespace-separated values. Other pip keys (timeout, retries, cert) have no uv.toml form:
# the CA bundle reaches uv as SSL_CERT_FILE.
_UV_KEYS = {"index-url": ("index-url", False), "extra-index-url": ("extra-index-url", True),
            "find-links": ("find-links", True), "trusted-host": ("allow-insecure-host", True),
            "no-index": ("no-index", None)}


def index_pip_conf(index_url: str) -> str:
    """pip_index_url as a pip.conf. The URL is one line of printable ASCII (checked in config), so it cannot add a
    section."""
    return f"[global]\nindex-url = {index_url}\n"


def uv_config(pip_conf: str, where: str) -> str:
    """The index settings of a pip.conf as a uv.toml."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(pip_conf, source=where)
    except configparser.Error as exc:
        # Its lines may carry credentials: name the kind of error, never the text.
        line = getattr(exc, "lineno", None)
        raise ConfigError(f"the pip.conf cannot be read as an INI file ({type(exc).__name__})", field="pip_conf",
                          where=f"{where}:{line}" if line else where) from None
    settings: dict[str, str] = {}
    for section in ("global", "install"):
        if parser.has_section(section):
            settings.update({k.replace("_", "-"): v for k, v in parser.items(section) if k.replace("_", "-") in _UV_KEYS})
    lines = []
    if "extra-index-url" in settings:  # pip's semantics: the best version across all indexes (uv: the first index's)
        lines.append('index-strategy = "unsafe-best-match"')
    for key, value in settings.items():
        name, is_list = _UV_KEYS[key]
        if is_list is None:  # a pip boolean
            lines.append(f"{name} = {'true' if value.strip().lower() in ('1', 'true', 'yes', 'on') else 'false'}")
        elif is_list:
            lines.append(f"{name} = [{', '.join(_toml_string(v) for v in value.split())}]")
        else:
            lines.append(f"{name} = {_toml_string(value.strip())}")
    return "".join(line + "\n" for line in lines)


def _toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}" if ord(c) < 0x10000
                         else f"\\U{ord(c):08x}" for c in text) + '"'


def index_urls(uv_toml: str) -> tuple[str, ...]:
    """The URLs a pip.conf's index settings name (index-url, extra-index-url, find-links), as written; from the
    uv.toml uv_config made of it."""
    return tuple(re.findall(r'"([^"]*)"', "\n".join(line for line in uv_toml.splitlines()
                                                     if line.startswith(("index-url", "extra-index-url", "find-links")))))


def index_options(lines: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """A requirements file's index lines (-i, --index-url, --extra-index-url, -f, --find-links, --no-index), each as
    OPTION VALUE."""
    from .requirements import option

    return tuple(f"{key} {value}".strip() for line in lines if line.startswith("-")
                 for key, value in [option(line)] if key in _URL_OPTIONS or key == "--no-index")


def option_urls(options: tuple[str, ...]) -> tuple[str, ...]:
    """The URLs index lines name."""
    return tuple(value for line in options for key, _, value in [line.partition(" ")] if key in _URL_OPTIONS and value)


def google_index_hosts(urls: tuple[str, ...] | list[str], named: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The hosts that get a Google access token: every Artifact Registry Python repository the URLs name (a
    requirement's own URL too: `pkg @ https://...`), and the hosts named in pip_google_auth."""
    found = set(named)
    for text in urls:
        for url in re.findall(r"https?://[^\s\"']+", text):
            try:
                host = urllib.parse.urlsplit(url).hostname
            except ValueError:  # not a URL: nothing to log in to
                continue
            if host and _GOOGLE_INDEX.fullmatch(host):
                found.add(host)
    return tuple(sorted(found))


def google_logins(hosts: tuple[str, ...]) -> GoogleLogins | None:
    """An access token from Application Default Credentials for each host (the login Artifact Registry takes:
    oauth2accesstoken and the token); None without hosts. No credentials, or none that give a token, exit 9 saying
    which identity needs the reader role."""
    if not hosts:
        return None
    from ..google import adc

    where = ", ".join(hosts)
    credentials, _ = adc.default(PackageIndexError, f"{adc.LOGIN_HINT} for an identity with {READER_ROLE} on the "
                                                    f"repository (the index {where})")
    who = adc.identity(credentials)
    token = adc.token(credentials, PackageIndexError, f"for the index {where} from the credentials of {who}",
                      f"; run `gcloud auth application-default login` again, or give GOOGLE_APPLICATION_CREDENTIALS "
                      f"the key of an identity with {READER_ROLE}")
    if not token or any(ch.isspace() or not ch.isprintable() for ch in token):
        raise PackageIndexError(f"the credentials of {who} gave an access token (not shown) that a netrc cannot hold")
    return GoogleLogins(tuple(Credential(host, adc.TOKEN_LOGIN, token) for host in hosts), who)


def refusal_hint(output: str, hosts: tuple[str, ...], identity: Identity) -> str | None:
    """What to grant, when an index that got a Google token for IDENTITY refused it (401 or 403 in the output)."""
    if not hosts or not re.search(r"\b40[13]\b", output):
        return None
    refused = [host for host in hosts if host in output] or list(hosts)
    return (f"{', '.join(refused)} refused the access token of {identity}: grant it {READER_ROLE} on the "
            f"repository (gcloud artifacts repositories add-iam-policy-binding REPOSITORY --location LOCATION "
            f"--member {identity.member} --role {READER_ROLE}), or log in as an identity that has it")


def logins_netrc(url: tuple[Credential, ...], google: GoogleLogins | None) -> str:
    """The netrc of a build or lock: a requirement URL's own login wins over a token for the same host."""
    merged = {c.host: c for c in (google.credentials if google else ())} | {c.host: c for c in url}
    return netrc(tuple(merged.values()))


def without_credentials(text: str) -> str:
    """The requirement with every URL's credentials cut out: what a Dockerfile line, a plan or a message may show."""
    return _URL_USERINFO.sub(lambda m: m.group("scheme") + m.group("host"), text)


def url_credentials(texts: tuple[str, ...] | list[str], field: str) -> tuple[Credential, ...]:
    """The credentials the requirements' URLs carry, one per host. Refused (exit 2, never showing them): two logins
    for one host (a netrc holds one), or one a netrc cannot hold (whitespace, quotes)."""
    found: dict[str, Credential] = {}
    for text in texts:
        for match in _URL_USERINFO.finditer(text):
            user, colon, password = match.group("userinfo").partition(":")
            host = match.group("host").lower()
            credential = Credential(host, urllib.parse.unquote(user),
                                    urllib.parse.unquote(password) if colon else None)
            if any(ch.isspace() or ch in "\"'\\" or not ch.isprintable()
                   for ch in credential.login + (credential.password or "")) or not credential.login:
                raise ConfigError(f"the credentials of a URL for {host} (not shown) cannot be passed to the build: a "
                                  "login and password without spaces, quotes or control characters", field=field)
            if found.setdefault(host, credential) != credential:
                raise ConfigError(f"two different credentials (not shown) for {host}: the build passes one per host; "
                                  "give the others in pip_conf", field=field)
    return tuple(found.values())


def netrc(credentials: tuple[Credential, ...]) -> str:
    """The credentials as a netrc, which uv (NETRC) sends to their host for index pages and downloads alike."""
    return "".join(f"machine {c.host} login {c.login}" + (f" password {c.password}" if c.password is not None else "")
                   + "\n" for c in credentials)


def first_credentials_line(text: str, source: str) -> str | None:
    """Where a file's first URL with credentials is ("requirements.txt:3"), comments included; None."""
    return next((f"{source}:{n}" for n, line in enumerate(text.split("\n"), 1) if _URL_USERINFO.search(line)), None)
