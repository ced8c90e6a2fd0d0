"""buildkit-py: ML trainers to container images and Vertex AI / AI Platform training jobs.

The Python API, for notebooks and pipeline code (`import buildkit_py as bk`): the same calls the
command line makes, one per stage (resolve, dockerfile, build, push, package, job, plan, submit,
cancel, autopackage, tune). Keyword arguments are named like the config keys and flags, a config
dict or path is accepted, results are typed and frozen, and errors are the typed exceptions of
buildkit_py.errors (each with the field, the value and what is allowed). See docs/python-api-guide.md
for what is public and stable.

    import buildkit_py as bk
    image = bk.build("examples/quickstart", image="127.0.0.1:5000/quickstart", push=True)
    job = bk.submit("examples/quickstart", image=image.pushed[0].image, wait=True)

Nothing heavy is imported until a call needs it (PEP 562): `buildkit-py --version` stays fast.
"""

from __future__ import annotations

# Nothing at import: `typing` and `importlib` alone cost every start (the warm process's client, --version) more
# than the rest of it. TYPE_CHECKING as typing defines it, for the checkers that read this file.
TYPE_CHECKING = False

__all__ = ["__version__", "autopackage", "build", "cancel", "dockerfile", "job", "logs", "package", "plan", "push",
           "resolve", "submit", "tune"]


def __getattr__(name: str) -> object:
    if name == "__version__":  # from the bottom of the package (version.py), read where asked: `import` loads nothing
        from .version import __version__

        globals()[name] = __version__
        return __version__
    if name in __all__ or name == "api":  # bk.api: the options and result types, before any call imported it
        import importlib

        api = importlib.import_module(f"{__name__}.api")
        value = globals()[name] = api if name == "api" else getattr(api, name)  # found once: not asked again
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:
    from .api import autopackage, build, cancel, dockerfile, job, logs, package, plan, push, resolve, submit, tune
    from .version import __version__
