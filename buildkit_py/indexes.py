"""A pip.conf's package index settings as uv reads them (a uv.toml): what the build passes its installer, uv, as a
secret beside the pip.conf, and what `lock` and the resolution before a build hand `uv pip compile`."""

from __future__ import annotations

from .errors import ConfigError

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
