"""Image references: Docker's reference grammar, checked against what the real engine accepts."""

from __future__ import annotations

import io
import tarfile

import pytest

from buildkit_py.errors import ConfigError, show
from buildkit_py.oci.refs import REF_MAX, ImageRef, parse_ref

H64, H96, H128 = "0123456789abcdef" * 4, "0123456789abcdef" * 6, "0123456789abcdef" * 8
HUB = "docker.io"

# (reference, registry, path, tag, digest). Every name is this test's own (refs-test...): the
# engine check below creates and removes these tags on a shared engine.
VALID = [
    ("refs-test/app", HUB, "refs-test/app", None, None),
    ("refs-test/app:v1.0_rc-1", HUB, "refs-test/app", "v1.0_rc-1", None),
    ("refs-test/app:_x", HUB, "refs-test/app", "_x", None),
    ("refs-test/app:" + "T" * 128, HUB, "refs-test/app", "T" * 128, None),  # uppercase tags are fine
    ("refs-test/a.b_c__d---e/f9", HUB, "refs-test/a.b_c__d---e/f9", None, None),
    ("refs-test-official", HUB, "library/refs-test-official", None, None),
    ("docker.io/refs-test/app", HUB, "refs-test/app", None, None),
    ("index.docker.io/refs-test/app:v1", HUB, "refs-test/app", "v1", None),  # the legacy Docker Hub name
    ("localhost/refs-test/app", "localhost", "refs-test/app", None, None),
    ("localhost:5000/refs-test/app:v1", "localhost:5000", "refs-test/app", "v1", None),
    ("LOCALHOST:5000/refs-test/app", "LOCALHOST:5000", "refs-test/app", None, None),  # hosts may be uppercase
    ("localhost:5000", HUB, "library/localhost", "5000", None),  # no '/': a name and a tag, not a host
    ("127.0.0.1:5000/refs-test/app", "127.0.0.1:5000", "refs-test/app", None, None),
    ("Example.COM/refs-test/app", "Example.COM", "refs-test/app", None, None),
    ("registry-1.example.com:443/refs-test/app", "registry-1.example.com:443", "refs-test/app", None, None),
    ("example.com:99999999/refs-test/app", "example.com:99999999", "refs-test/app", None, None),  # grammar: [0-9]+
    (H64 + ":v1", HUB, f"library/{H64}", "v1", None),  # 64 hex digits with a tag are a name
    (f"refs-test/app@sha256:{H64}", HUB, "refs-test/app", None, f"sha256:{H64}"),
    (f"refs-test/app:v1@sha256:{H64}", HUB, "refs-test/app", "v1", f"sha256:{H64}"),
    (f"refs-test/app@sha384:{H96}", HUB, "refs-test/app", None, f"sha384:{H96}"),
    (f"refs-test/app@sha512:{H128}", HUB, "refs-test/app", None, f"sha512:{H128}"),
    # 255 characters counting "docker.io/library/" (18) or the host, as Docker 20.10 counts them.
    ("refs" + "x" * 233, HUB, "library/refs" + "x" * 233, None, None),
    ("docker.io/refs" + "x" * 233, HUB, "library/refs" + "x" * 233, None, None),
    ("localhost:5000/refs-test/" + "x" * 230, "localhost:5000", "refs-test/" + "x" * 230, None, None),
    ("[::1]:5000/refs-test/app:v1", "[::1]:5000", "refs-test/app", "v1", None),
    ("[2001:db8::1]/refs-test/app", "[2001:db8::1]", "refs-test/app", None, None),
]

# (reference, what the error must say)
INVALID = [
    ("", "non-empty string"),
    ("refs-test/App", "repository name must be lowercase"),
    ("Refs-test/app", "repository name must be lowercase"),
    ("Localhost/refs-test/app", "repository name must be lowercase"),
    ("refs-test/app:tägg", "'ä' at position 15"),
    ("refs-test/äpp", "only printable ASCII"),
    ("refs-test/\u0430pp", "only printable ASCII"),  # Cyrillic a, looks like "app"
    ("refs-test/app:v\uff11", "only printable ASCII"),  # fullwidth digit one: Python's \w takes it
    ("refs-test/app:v1 ", "' ' at position 16"),
    ("refs-test/app:v1\n", "'\\n' at position 16"),
    ("refs-test/app\t", "'\\t'"),
    ("refs-test/\x1b[31mapp", "'\\x1b'"),
    ("refs-test/app\x00", "'\\x00'"),
    ("refs-test/app:" + "a" * 129, "a tag is 1-128"),
    ("refs-test/app:.v1", "not starting with '.' or '-'"),
    ("refs-test/app:-v1", "not starting with '.' or '-'"),
    ("refs-test/app:", "tag '' is not valid"),
    ("refs-test/app:v1:v2", "tag 'v1:v2' is not valid"),
    ("refs-test/-app", "path component '-app'"),
    ("refs-test/app-", "path component 'app-'"),
    ("refs-test/a.-b", "path component 'a.-b'"),
    ("refs-test/a._b", "path component"),
    ("refs-test/a___b", "one or two '_'"),
    ("refs-test/a..b", "path component"),
    ("refs-test//app", "empty component"),
    ("/refs-test/app", "empty component"),
    ("refs-test/app/", "empty component"),
    (":v1", "empty component"),
    ("-example.com/refs-test/app", "registry host '-example.com'"),
    ("example.com:port/refs-test/app", "registry host 'example.com:port'"),
    ("example.com:/refs-test/app", "registry host"),
    ("foo:bar/baz", "registry host 'foo:bar'"),
    ("[::1/refs-test/app", "registry host"),
    ("refs-test/app@", "digest '' is not valid"),
    ("refs-test/app@sha256", "ALGORITHM:HEX"),
    (f"refs-test/app@sha256:{H64[:-1]}", "exactly 64 lowercase hex digits; this one has 63"),
    (f"refs-test/app@sha256:{H64}0", "this one has 65"),
    (f"refs-test/app@sha256:{H64.upper()}", "uppercase"),
    (f"refs-test/app@sha512:{H64}", "exactly 128"),
    (f"refs-test/app@md5:{H64[:32]}", "algorithm 'md5' is not supported"),
    (f"refs-test/app@sha256+b64:{H64}", "not supported"),
    (f"refs-test/app@SHA256:{H64}", "not supported"),
    ("refs-test/app@sha256:" + "g" * 64, "ALGORITHM:HEX"),
    (f"refs-test/app@sha256:{H64}@x", "ALGORITHM:HEX"),
    (H64, "an image ID"),
    ("refs" + "x" * 234, "256 characters; at most 255"),
    ("docker.io/refs" + "x" * 234, "at most 255"),
    ("refs-test/" + "x" * 240, "at most 255"),  # the path alone is 250: the host counts too
    ("localhost:5000/refs-test/" + "x" * 231, "at most 255"),
    ("refs-test/" + "x" * 1000, f"the longest valid reference has {REF_MAX}"),
    ("exa_mple.com/refs-test/app", "registry host 'exa_mple.com'"),
]

# Where this module is stricter or newer than Docker 20.10, on purpose (see refs.py). The engine
# check asserts the engine's opposite verdict, so a change there shows up here.
ENGINE_DIFFERS = {
    "[::1]:5000/refs-test/app:v1": "IPv6 hosts entered the grammar after Docker 20.10",
    "[2001:db8::1]/refs-test/app": "IPv6 hosts entered the grammar after Docker 20.10",
    "exa_mple.com/refs-test/app": "the engine reads an invalid host as a Docker Hub path, then pushes to that host",
}


@pytest.mark.parametrize("value, registry, path, tag, digest", VALID)
def test_valid_references_parse(value, registry, path, tag, digest):
    ref = parse_ref(value)
    assert ref == ImageRef(registry, path, tag, digest)
    assert parse_ref(str(ref)) == ref  # the short form written back means the same image


@pytest.mark.parametrize("value, rule", INVALID)
def test_invalid_references_name_the_field_value_and_rule(value, rule):
    with pytest.raises(ConfigError) as err:
        parse_ref(value, field="--tag")
    message = str(err.value)
    assert message.startswith(f"--tag: {show(value)} is not a valid image reference: "), message
    assert rule in message


@pytest.mark.parametrize("value", [None, 5, b"refs-test/app"])
def test_non_strings_are_refused(value):
    with pytest.raises(ConfigError, match="image: .* non-empty string"):
        parse_ref(value)


def test_a_digest_can_be_refused_where_a_tag_is_created():
    value = f"refs-test/app:v1@sha256:{H64}"
    with pytest.raises(ConfigError) as err:
        parse_ref(value, field="--tag", allow_digest=False)
    assert str(err.value).startswith(f"--tag: {value!r} is not a valid image reference: a digest ")
    assert "give a tag" in str(err.value)
    assert parse_ref("refs-test/app:v1", allow_digest=False).tag == "v1"


def test_a_huge_value_is_refused_quickly_and_shown_short():
    with pytest.raises(ConfigError) as err:
        parse_ref("a" * 1_000_000)
    assert len(str(err.value)) < 400 and "1000000 characters" in str(err.value)


# ---------------------------------------------------------------------------------------------
# The same table against the real engine: `docker tag` (the engine's own parser) must agree.


def tiny_image(client, repository: str, tag: str) -> str:
    """A one-file image made locally (no pull can work here): its id."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        data = f"{repository}:{tag}\n".encode()
        info = tarfile.TarInfo("hello.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    client.api.import_image_from_data(buf.getvalue(), repository=repository, tag=tag)
    return client.images.get(f"{repository}:{tag}").id


@pytest.fixture(scope="module")
def engine(testenv):
    docker = pytest.importorskip("docker")
    client = docker.DockerClient(base_url=testenv["DOCKER_HOST"])
    image = tiny_image(client, "refs-test/base", "v1")
    yield client, image
    client.api.remove_image(image, force=True)
    client.close()


def engine_accepts(client, image: str, value: str) -> bool:
    from docker.errors import APIError

    try:
        assert client.api.tag(image, value)
    except APIError as exc:
        # A digest parses, then tagging is refused for that reason alone.
        return exc.status_code == 400 and "refusing to create a tag with a digest reference" in str(exc.explanation)
    client.api.remove_image(value)  # only the tag: the base image keeps its own
    return True


@pytest.mark.parametrize("value", [v[0] for v in VALID] + [v[0] for v in INVALID if v[0]])
def test_verdict_matches_the_engine(engine, value):
    client, image = engine
    try:
        parse_ref(value)
        ours = True
    except ConfigError:
        ours = False
    theirs = engine_accepts(client, image, value)
    if value in ENGINE_DIFFERS:
        assert theirs != ours, f"the engine now agrees on {value!r}: {ENGINE_DIFFERS[value]}"
    else:
        assert theirs == ours, f"{value!r}: engine {'accepts' if theirs else 'refuses'} it, parse_ref does not agree"
