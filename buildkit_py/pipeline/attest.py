"""The SBOM and the provenance of a pushed image, attached to it in its registry (oci/referrers.py), and checked by
`verify`.

The SBOM is CycloneDX 1.5 JSON: the image as its subject component, the base image, the system packages the plan
installs (Debian/Ubuntu purls, versions from the base's archive: not recorded), and the Python packages: exactly
buildkit.lock's (name, version, sha256 of every file the lock allows) where the build was locked, else the pins
the plan and the requirements name (the composition then says "incomplete"). The provenance is an in-toto
Statement v1 with a SLSA v1 predicate: the source revision, the config's and the lock's digests, the base's
digest, the builder and the command (credentials cut out), and the SBOM's digest as a byproduct, so that an SBOM
swapped in the registry no longer matches. Neither holds a timestamp or anything of this machine: the same build
gives the same bytes, and pushing the same image again attaches nothing new.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import AttestationError, RegistryError, mask_credentials, show
from ..fsutil import MAX_TEXT_FILE, read_small
from ..oci.refs import ImageRef, parse_ref
from ..progress import Reporter
from ..sources.pip_config import without_credentials
from ..sources.requirements import pinned, requirement_name
from ..version import __version__
from .buildtypes import BuildOptions, BuildResult
from .names import ATTESTATION_ANNOTATION, CONTENT_LABEL, LABEL_PREFIX, LOCK_LABEL

if TYPE_CHECKING:
    from ..oci.referrers import Artifact, Attached
    from .lock import Lock
    from .recipe import Recipe

SBOM_TYPE = "application/vnd.cyclonedx+json"  # CycloneDX's registered media type: artifactType and layer
PROVENANCE_TYPE = "application/vnd.in-toto+json"  # an in-toto Statement, as BuildKit's attestation layers carry it
STATEMENT = "https://in-toto.io/Statement/v1"
SLSA_PROVENANCE = "https://slsa.dev/provenance/v1"
PREDICATE_ANNOTATION = "in-toto.io/predicate-type"  # BuildKit's annotation of an in-toto layer
BUILD_TYPE = "https://buildkit-py.dev/attestations/build/v1"  # docs/attestations.md describes its parameters
BUILDER_ID = "https://buildkit-py.dev/attestations/builder"
_SERIAL_NAMESPACE = uuid.UUID("5d8f1f6e-6a43-4c1e-9a55-6b2f1c0e7d11")  # the SBOM's serial number: a UUID of its content


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _json(value: dict) -> bytes:
    return json.dumps(value, sort_keys=True, indent=1, ensure_ascii=False).encode() + b"\n"


@dataclass(frozen=True)
class Package:
    """A Python distribution the image installs: its name as the lock or the requirement writes it, its version
    (None: not pinned) and the sha256 of each file it may be installed from."""

    name: str
    version: str | None
    hashes: tuple[str, ...] = ()

    @property
    def purl(self) -> str:
        # purl's pypi type: the name lowercased, '_' as '-'
        name = requirement_name(self.name) or self.name.lower()
        return f"pkg:pypi/{name}" + (f"@{self.version}" if self.version else "")


def _text(path: Path) -> str | None:
    try:
        _, data = read_small(path, MAX_TEXT_FILE)
    except OSError:
        return None
    return data[:MAX_TEXT_FILE].decode("utf-8", errors="replace")


def python_packages(recipe: Recipe) -> tuple[tuple[Package, ...], bool, str]:
    """The image's Python packages, whether that is all of them, and where they are from."""
    plan = recipe.plan
    for key, source in (("lock", "buildkit.lock"), ("requirements_export", "lock file")):
        if isinstance(plan.get(key), dict):
            text = _text(Path(plan[key]["source"]))
            if text is not None:
                found, other = pinned(text)
                where = plan[key].get("origin", source) if key == "requirements_export" else source
                return tuple(Package(n, v, h) for n, v, h in found), not other, str(where)
    lines = [str(x) for x in (plan.get("framework") or {}).get("requirement", "").split() if x] \
        + ([str(plan["hypertune"])] if plan.get("hypertune") else []) + [str(p) for p in plan.get("pip") or ()]
    if plan.get("requirements"):
        text = _text(recipe.root / str(plan["requirements"]))
        lines += [text] if text is not None else []
    found, other = pinned(without_credentials("\n".join(lines)))
    names = {requirement_name(n) for n, _, _ in found}
    loose = sorted({name for line in other if (name := requirement_name(line)) and name not in names})
    return tuple([Package(n, v, h) for n, v, h in found] + [Package(n, None) for n in loose]), False, "the plan"


def _base(recipe: Recipe) -> tuple[str, str | None]:
    plan = recipe.plan
    return str(plan.get("base_image") or ""), (plan.get("lock") or {}).get("base_digest")


def _oci_purl(repository: str, digest: str) -> str:
    """purl's oci type: the last path segment as the name, the digest as the version, the repository as a qualifier."""
    return f"pkg:oci/{repository.rsplit('/', 1)[-1].lower()}@{digest.replace(':', '%3A')}?repository_url={repository}"


def sbom(recipe: Recipe, repository: str, digest: str) -> bytes:
    """The CycloneDX 1.5 document of the image at REPOSITORY@DIGEST."""
    plan = recipe.plan
    packages, complete, source = python_packages(recipe)
    base, base_digest = _base(recipe)
    image = {"type": "container", "bom-ref": "image", "name": repository, "version": digest,
             "purl": _oci_purl(repository, digest)}
    components: list[dict] = []
    python_refs = []
    for package in packages:
        entry = {"type": "library", "bom-ref": package.purl, "name": package.name, "purl": package.purl}
        if package.version:
            entry["version"] = package.version
        if package.hashes:
            entry["hashes"] = [{"alg": "SHA-256", "content": h.removeprefix("sha256:")} for h in package.hashes]
        components.append(entry)
        python_refs.append(package.purl)
    base_entry = {"type": "container", "bom-ref": "base", "name": base}
    if base_digest:
        base_entry["version"] = base_digest
        base_entry["purl"] = _oci_purl(parse_ref(base, field="base_image").repository, base_digest)
    components.append(base_entry)
    ubuntu = plan.get("ubuntu")
    distro = f"pkg:deb/ubuntu/{{}}?distro=ubuntu-{ubuntu}" if ubuntu else "pkg:deb/debian/{}"
    system = sorted(set(plan.get("system_packages") or ()) | set((plan.get("python") or {}).get("apt_packages") or ()))
    system_refs = []
    for name in system:
        purl = distro.format(name)
        components.append({"type": "library", "bom-ref": purl, "name": name, "purl": purl})
        system_refs.append(purl)
    components.sort(key=lambda c: c["bom-ref"])
    properties = {f"{LABEL_PREFIX}:python-packages": source}
    if (plan.get("lock") or {}).get("digest"):
        properties[f"{LABEL_PREFIX}:lock-digest"] = plan["lock"]["digest"]
    if recipe.variant:
        properties[f"{LABEL_PREFIX}:variant"] = recipe.variant
    body = {
        "$schema": "http://cyclonedx.org/schema/bom-1.5.schema.json", "bomFormat": "CycloneDX", "specVersion": "1.5",
        "version": 1,
        "metadata": {"component": image,
                     "tools": {"components": [{"type": "application", "name": "buildkit-py", "version": __version__}]},
                     "properties": [{"name": k, "value": v} for k, v in sorted(properties.items())]},
        "components": components,
        "dependencies": [{"ref": "image", "dependsOn": sorted(c["bom-ref"] for c in components)}],
        "compositions": [{"aggregate": "complete" if complete else "incomplete", "assemblies": sorted(python_refs)},
                         # the base's own packages are not listed: what its archive installed is not read here
                         {"aggregate": "incomplete", "assemblies": sorted(system_refs + ["base"])}],
    }
    body["serialNumber"] = f"urn:uuid:{uuid.uuid5(_SERIAL_NAMESPACE, _sha(_json(body)))}"
    return _json(body)


def _command() -> list[str]:
    """The command line, each word without the credentials a URL or query may carry."""
    words = [Path(sys.argv[0]).name if sys.argv else "python", *sys.argv[1:]]
    return [mask_credentials(without_credentials(w)) for w in words]


def _config_digest(recipe: Recipe) -> str | None:
    path = recipe.root / "buildkit.yaml"
    try:
        _, data = read_small(path, MAX_TEXT_FILE)
    except OSError:
        return None
    return _sha(data[:MAX_TEXT_FILE + 1])


@dataclass(frozen=True)
class Built:
    """What the provenance says of one pushed image beside its recipe."""

    image: ImageRef  # the repository it was pushed to
    digest: str
    tags: tuple[str, ...]
    content_digest: str
    revision: str | None
    builder: str  # the recipe's builder, or "fast-path" for a code layer appended in the registry


def provenance(recipe: Recipe, built: Built, sbom_digest: str) -> bytes:
    """The in-toto Statement v1 with a SLSA provenance v1 predicate of the image."""
    plan = recipe.plan
    repository = built.image.repository
    base, base_digest = _base(recipe)
    dependencies: list[dict] = []
    base_entry = {"name": "base", "uri": f"docker://{base}"}
    if base_digest:
        base_entry["digest"] = {"sha256": base_digest.removeprefix("sha256:")}
    dependencies.append(base_entry)
    config = _config_digest(recipe)
    if config:
        dependencies.append({"name": "buildkit.yaml", "digest": {"sha256": config}})
    lock = plan.get("lock") or {}
    if lock.get("digest"):
        dependencies.append({"name": "buildkit.lock", "digest": {"sha256": lock["digest"].removeprefix("sha256:")},
                             "annotations": {"section": recipe.variant or "_base"}})
        dependencies.append({"name": lock.get("requirements", ""),
                             "digest": {"sha256": Path(lock.get("source", "")).stem}})
    dependencies.append({"name": "context", "digest": {"sha256": built.content_digest}})
    framework = plan.get("framework") or {}
    if framework.get("index_url"):
        dependencies.append({"name": "framework index", "uri": without_credentials(str(framework["index_url"]))})
    external = {"image": repository, "tags": sorted(built.tags), "platform": recipe.platform,
                "variant": recipe.variant, "command": _command(),
                "source": {"revision": built.revision} if built.revision else {}}
    internal = {"builder": built.builder, "dockerfile": {"sha256": _sha(recipe.dockerfile.encode())},
                "buildkit-py": __version__}
    statement = {
        "_type": STATEMENT,
        "subject": [{"name": repository, "digest": {"sha256": built.digest.removeprefix("sha256:")}}],
        "predicateType": SLSA_PROVENANCE,
        "predicate": {
            "buildDefinition": {"buildType": BUILD_TYPE, "externalParameters": external,
                                "internalParameters": internal, "resolvedDependencies": dependencies},
            "runDetails": {"builder": {"id": f"{BUILDER_ID}/{built.builder}", "version": {"buildkit-py": __version__}},
                           "metadata": {},
                           "byproducts": [{"name": "sbom", "mediaType": SBOM_TYPE,
                                           "digest": {"sha256": sbom_digest.removeprefix("sha256:")}}]},
        },
    }
    return _json(statement)


def artifacts(recipe: Recipe, built: Built) -> tuple[Artifact, ...]:
    """The SBOM and provenance of one image, as the artifacts attached to it."""
    from ..oci.referrers import Artifact

    document = sbom(recipe, built.image.repository, built.digest)
    statement = provenance(recipe, built, "sha256:" + _sha(document))
    return (Artifact(SBOM_TYPE, SBOM_TYPE, document, ((ATTESTATION_ANNOTATION, "sbom"),)),
            Artifact(PROVENANCE_TYPE, PROVENANCE_TYPE, statement,
                     ((ATTESTATION_ANNOTATION, "provenance"), (PREDICATE_ANNOTATION, SLSA_PROVENANCE))))


def attach(recipe: Recipe, built: Built, reporter: Reporter) -> tuple[Attached, ...]:
    """Make the SBOM and provenance of one pushed image and attach them to it."""
    from ..oci.client import RegistryClient
    from ..oci.referrers import attach as attach_artifacts
    from ..oci.referrers import pushed_subject

    ref = replace(built.image, tag=None, digest=None)
    return attach_artifacts(ref, pushed_subject(RegistryClient(ref), ref, built.digest), artifacts(recipe, built),
                            reporter)


def attested(result: BuildResult, refs: Sequence[ImageRef], options: BuildOptions, reporter: Reporter,
             revision: str | None) -> BuildResult:
    """The build's result with the SBOM and provenance attached to each repository it pushed to (referrers are per
    repository). refs: what was pushed, in the order of result.pushed. A registry that cannot take them leaves the
    image pushed and says so: `verify` finds none."""
    from ..oci.referrers import unattached

    if not options.attest or not result.pushed:
        return result
    builder = "fast-path" if result.timings else result.recipe.builder
    done: list[Attached] = []
    seen: set[tuple[str, str]] = set()
    for ref, pushed in zip(refs, result.pushed, strict=True):
        if (ref.repository, pushed.digest) in seen:
            continue
        seen.add((ref.repository, pushed.digest))
        tags = tuple(p.tag for p in result.pushed if p.image == pushed.image)
        built = Built(ref, pushed.digest, tags, result.content_digest, revision, builder)
        try:
            done += attach(result.recipe, built, reporter)
        except RegistryError as exc:
            reporter.message(unattached(pushed.image, exc))
    return replace(result, attestations=tuple(done))


# ---------------------------------------------------------------------------------------------
# verify


@dataclass(frozen=True)
class Verified:
    """What verify found: the image, where its attestations are listed, the SBOM and provenance it checked, and each
    check made."""

    image: str  # repository@digest
    listed: str  # "referrers API" or "tag schema"
    sbom: str  # the SBOM blob's digest
    provenance: str  # the provenance blob's digest
    packages: int  # the SBOM's Python packages
    checks: tuple[str, ...]


def _document(data: bytes, what: str, digest: str) -> dict:
    from ..oci.client import json_object

    return json_object(data, f"the {what} {digest}", AttestationError)


def _statement(data: bytes, digest: str) -> dict:
    value = _document(data, "provenance", digest)
    if value.get("_type") != STATEMENT or value.get("predicateType") != SLSA_PROVENANCE:
        raise AttestationError(f"the provenance {digest} is not an in-toto Statement v1 of SLSA provenance v1")
    return value


def _sha256s(entries: object, name: str | None = None) -> list[str]:
    """The sha256 digests of resource descriptors (a statement's subject, byproducts, dependencies), of NAME only."""
    return ["sha256:" + str(e["digest"]["sha256"]) for e in entries or [] if isinstance(e, dict)
            and isinstance(e.get("digest"), dict) and "sha256" in e["digest"] and (name is None or e.get("name") == name)] \
        if isinstance(entries, list) else []


def sbom_packages(document: dict) -> dict[str, tuple[str | None, tuple[str, ...]]]:
    """The SBOM's Python packages: normalised name -> (version, sorted sha256 digests)."""
    out: dict[str, tuple[str | None, tuple[str, ...]]] = {}
    for c in document.get("components") or []:
        if isinstance(c, dict) and str(c.get("purl", "")).startswith("pkg:pypi/"):
            name = requirement_name(str(c.get("name", ""))) or str(c.get("name"))
            hashes = tuple(sorted("sha256:" + str(h.get("content")) for h in c.get("hashes") or []
                                  if isinstance(h, dict) and h.get("alg") == "SHA-256"))
            out[name] = (c.get("version"), hashes)
    return out


def lock_differences(document: dict, locked: Sequence[tuple[str, str, tuple[str, ...]]]) -> list[str]:
    """How the SBOM's Python packages differ from the lock's (name, version, hashes)."""
    listed = sbom_packages(document)
    wanted = {requirement_name(n) or n: (v, tuple(sorted(h))) for n, v, h in locked}
    problems = []
    for name in sorted(set(listed) | set(wanted)):
        if name not in listed:
            problems.append(f"{name}=={wanted[name][0]} is locked but not in the SBOM")
        elif name not in wanted:
            problems.append(f"{show(name)}=={show(listed[name][0])} is in the SBOM but not in the lock")
        elif listed[name][0] != wanted[name][0]:
            problems.append(f"{name}: the SBOM says version {show(listed[name][0])}, the lock {wanted[name][0]}")
        elif listed[name][1] != wanted[name][1]:
            problems.append(f"{name}=={wanted[name][0]}: the SBOM's file hashes are not the lock's")
    return problems


def verify(ref: ImageRef, lock: Lock | None, reporter: Reporter) -> Verified:
    """Read the image's attestations back and check them: each names the image's digest as its subject; the
    provenance's subject is the image and its SBOM byproduct is the SBOM attached; every SBOM of ours is one a
    provenance names; the image's own labels (content digest, lock digest) are the provenance's; with LOCK, the
    SBOM's Python packages are exactly the lock's for the image's variant and the image was built from that lock."""
    from ..oci.client import RegistryClient
    from ..oci.referrers import config_labels, fetch, referrers, subject_of

    client = RegistryClient(ref)
    subject = subject_of(client, ref, ref.digest or ref.tag or "latest")
    image = f"{ref.repository}@{subject.digest}"
    found, listed = referrers(client, ref, subject.digest)
    ours = [r for r in found if dict(r.annotations).get(ATTESTATION_ANNOTATION) in ("sbom", "provenance")]
    reporter.message(f"{image}: {len(found)} referrer(s) ({listed}), {len(ours)} of buildkit-py")
    checks: list[str] = []
    sboms: dict[str, dict] = {}  # blob digest -> document
    statements: dict[str, dict] = {}
    for referrer in ours:
        fetched = fetch(client, ref, referrer.digest)
        named = (fetched.manifest.get("subject") or {}).get("digest") if isinstance(fetched.manifest.get("subject"), dict) \
            else None
        if named != subject.digest:
            raise AttestationError(f"artifact {referrer.digest} names {show(named)} as its subject, not the image "
                                   f"{subject.digest}")
        kind = dict(referrer.annotations)[ATTESTATION_ANNOTATION]
        if kind == "sbom":
            sboms[fetched.blob] = _document(fetched.data, "SBOM", fetched.blob)
        else:
            statements[fetched.blob] = _statement(fetched.data, fetched.blob)
    if not statements or not sboms:
        missing = " and ".join(w for w, have in (("no SBOM", sboms), ("no provenance", statements)) if not have)
        raise AttestationError(f"{image} has {missing} of buildkit-py ({listed}): it was pushed with --no-attest, "
                               "by another tool, or to a registry that refused them")
    checks.append(f"{len(ours)} attestation(s) name {subject.digest} as their subject")
    named_sboms: set[str] = set()
    for blob, statement in statements.items():
        if subject.digest not in _sha256s(statement.get("subject")):
            raise AttestationError(f"the provenance {blob} is about {', '.join(_sha256s(statement.get('subject'))) or 'nothing'}"
                                   f", not {subject.digest}")
        named_sboms.update(_sha256s(((statement.get("predicate") or {}).get("runDetails") or {}).get("byproducts"), "sbom"))
    for blob, document in sboms.items():
        if blob not in named_sboms:
            raise AttestationError(f"the SBOM {blob} is not the one the provenance names ("
                                   f"{', '.join(sorted(named_sboms)) or 'none'}): it was replaced or added afterwards")
        component = (document.get("metadata") or {}).get("component") or {}
        if component.get("version") != subject.digest:
            raise AttestationError(f"the SBOM {blob} describes {show(component.get('version'))}, not {subject.digest}")
    checks.append("the SBOM is the provenance's byproduct, byte for byte")
    sbom_blob, document = sorted(sboms.items())[0]
    provenance_blob, statement = sorted(statements.items())[0]
    dependencies = ((statement.get("predicate") or {}).get("buildDefinition") or {}).get("resolvedDependencies")
    labels = config_labels(client, ref, subject.digest)
    said_lock = next(iter(_sha256s(dependencies, "buildkit.lock")), None)
    if labels is not None:
        for label, said in ((CONTENT_LABEL, next(iter(_sha256s(dependencies, "context")), None)), (LOCK_LABEL, said_lock)):
            have = labels.get(label)
            if label == CONTENT_LABEL and have is not None:
                have = "sha256:" + have.removeprefix("sha256:")
            if have != said:
                raise AttestationError(f"the image's label {label} is {show(have)}, the provenance says {show(said)}")
        checks.append("the image's content and lock digests (its labels) are the provenance's")
    if lock is not None:
        variant = ((statement.get("predicate") or {}).get("buildDefinition") or {}).get("externalParameters", {}).get("variant")
        checks += _against_lock(lock, variant if isinstance(variant, str) else None, said_lock, document)
    reporter.message(f"{image}: verified ({'; '.join(checks)})")
    return Verified(image, listed, sbom_blob, provenance_blob, len(sbom_packages(document)), tuple(checks))


def _against_lock(lock: Lock, variant: str | None, said_lock: str | None, document: dict) -> list[str]:
    from .lock import LOCK_NAME

    path = lock.path
    # A multi-platform image's index carries its first platform's SBOM: the section (VARIANT@PLATFORM) it names.
    section = next((i for i in lock.images if i.variant == variant and i.several and i.digest == said_lock), None) \
        or lock.image(variant)
    if section is None:
        raise AttestationError(f"{path} has no section for {show(variant or '_base')}, the image's variant")
    if said_lock is None:
        raise AttestationError(f"the image was built unlocked (its provenance names no {LOCK_NAME}), {path} holds "
                               f"{section.digest} for {variant or '_base'}: build it with --locked to check it against "
                               "the lock")
    if said_lock != section.digest:
        raise AttestationError(f"the image was built from lock section {show(said_lock)}, {path} holds {section.digest}"
                               f" for {variant or '_base'}: not this {LOCK_NAME}")
    problems = lock_differences(document, [(p.name, p.version, p.hashes) for p in section.packages])
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise AttestationError(f"the SBOM does not match {path}: {'; '.join(problems[:3])}{more}")
    return [f"the SBOM's {len(section.packages)} Python packages are {path}'s"]
