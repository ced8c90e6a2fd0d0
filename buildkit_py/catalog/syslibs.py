"""System libraries that Python wheels load at import and do not bundle (base_images/system_libraries.yaml): the
Debian or Ubuntu package that provides each on the image's base, for inference (a distribution the trainer installs
brings its packages into the system-packages layer) and for the import check's advice (`libgomp.so.1: cannot open
shared object file` names the package to add)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import DataError
from ..patterns import lazy_pattern

_LIBRARY = lazy_pattern(r"(lib[A-Za-z0-9_+.-]*?\.so(?:\.[0-9]+)*)", re.ASCII)


@dataclass(frozen=True)
class SystemLibraries:
    """system_libraries.yaml: the package that provides each library on Debian and Ubuntu, and the libraries each
    distribution's wheels load."""

    libraries: dict[str, dict[str, str]]  # library file -> {"debian" | "ubuntu" | "ubuntu24.04": package}
    # (canonical distribution name, the releases it applies to: "" for all) -> the libraries their wheels load
    distributions: dict[tuple[str, str], tuple[str, ...]]

    def package(self, library: str, ubuntu: str | None) -> str | None:
        """The package that provides `library` on the base: Ubuntu `ubuntu` (a release, e.g. 22.04), else Debian."""
        names = self.libraries.get(library)
        if names is None:
            return None
        if ubuntu is not None:
            return names.get(f"ubuntu{ubuntu}") or names.get("ubuntu")
        return names.get("debian")

    def for_distributions(self, names: Iterable[tuple[str, str | None]], ubuntu: str | None) -> dict[str, list[str]]:
        """{package: [the distributions that need it]} for the (canonical distribution name, release or None) given:
        a row for some releases only applies where the release is known and one of them."""
        from packaging.specifiers import SpecifierSet

        found: dict[str, list[str]] = {}
        for name, version in names:
            for (row, releases), needed in self.distributions.items():
                if row != name or (releases and (version is None or
                                                 not SpecifierSet(releases).contains(version, prereleases=True))):
                    continue
                for library in needed:
                    package = self.package(library, ubuntu)
                    if package is not None and name not in found.setdefault(package, []):
                        found[package].append(name)
        return found


def library_named(error: str) -> str | None:
    """The shared library an import error says is missing: `libgomp.so.1: cannot open shared object file`."""
    if "cannot open shared object file" not in error and "No such file" not in error:
        return None
    found = _LIBRARY.search(error)
    return found.group(1) if found else None


def system_libraries() -> SystemLibraries:
    from .resources import read_data, resource_dir

    where = "base_images/system_libraries.yaml"
    data = read_data(resource_dir("base_images") / "system_libraries.yaml", where)
    libraries, distributions = data.get("libraries"), data.get("distributions")
    if not isinstance(libraries, dict) or not isinstance(distributions, dict):
        raise DataError(f"{where}: needs `libraries` and `distributions` mappings")
    for library, names in libraries.items():
        if not isinstance(names, dict) or not all(isinstance(v, str) for v in names.values()) or "debian" not in names:
            raise DataError(f"{where}: libraries.{library} must map debian (and ubuntu, ubuntuXX.YY) to package names")
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    rows: dict[tuple[str, str], tuple[str, ...]] = {}
    for key, needed in distributions.items():
        if not isinstance(needed, list) or not all(n in libraries for n in needed):
            raise DataError(f"{where}: distributions.{key} must list libraries of `libraries`")
        try:  # NAME, or NAME with the releases it applies to ("xgboost<1.3")
            row = Requirement(str(key))
        except InvalidRequirement:
            raise DataError(f"{where}: distributions.{key} must be a distribution name, with releases or not") from None
        rows[(canonicalize_name(row.name), str(row.specifier))] = tuple(needed)
    return SystemLibraries({k: dict(v) for k, v in libraries.items()}, rows)
