"""The build backends' names, and the module and class of each: what the config checks a `builder` against, loading
no backend (nor the interface, which is typed by the config)."""

from __future__ import annotations

# buildkit: a Docker CLI with BuildKit (buildx, or a client with it built in); legacy: the engine's
# classic builder through the Docker SDK (no cache or secret mounts); buildah: no Docker engine; cloudbuild: Google
# Cloud Build, no engine on this machine.
BACKENDS = {"buildkit": ("buildkit_cli", "BuildkitCliBuilder"), "legacy": ("legacy", "LegacyBuilder"),
            "buildah": ("buildah", "BuildahBuilder"), "cloudbuild": ("cloudbuild", "CloudBuildBuilder")}
ALIASES = {"auto": "buildkit"}
BUILDERS = (*ALIASES, *BACKENDS)
