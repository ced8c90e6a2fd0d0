"""A pip.conf's package index settings as uv reads them (a uv.toml): what the build passes its installer, uv, as a
secret beside the pip.conf, and what `lock` and the resolution before a build hand `uv pip compile`. And the
credentials in a requirement's URL, cut out of it and passed the same way, as a netrc."""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

from .errors import ConfigError

# A URL's userinfo, up to its last "@" before the path (as URL parsers read it: a password may hold a raw "@").
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s]*)@(?P<host>[^/:\s?#]+)")


@dataclass(frozen=True)
class Credential:
    """A login a requirement's URL carried, for its host: what the build's netrc secret holds."""

    host: str
    login: str
    password: str | None  # None: a lone token (https://TOKEN@host), sent as the user name as pip sends it

# pip.conf keys an install reads ([install] over [global]) -> uv.toml keys; uv takes lists where pip
# takes whitespace-separated values. Other pip keys (timeout, retries, cert) have no uv.toml form:
# the CA bundle reaches uv as SSL_CERT_FILE.
_UV_KEYS = {"index-url": ("index-url", False), "extra-index-url": ("extra-index-url", True),
            "find-links": ("find-links", True), "trusted-host": ("allow-insecure-host", True),
            "no-index": ("no-index", None)}


def uv_config(pip_conf: str, where: str) -> str:
    """The index settings of a pip.conf as a uv.toml."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(pip_conf, source=where)
    except configparser.Error as exc:
        # Its lines may carry credentials: name the kind of error, never the text.
        raise ConfigError(f"the pip.conf cannot be read as an INI file ({type(exc).__name__})", where=where) from None
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
