"""The version of buildkit-py: at the bottom of the package, where every module may read it (pyproject.toml says the
same; tests/test_import_graph.py keeps the two equal)."""

__version__ = "0.1.0"
