"""A trainer package with compiled parts (setup.py ext_modules): autopackage builds them in a stage of their own, as
`pip install .` would, copies the compiled module beside the code, and a code edit takes the full build, said."""

from __future__ import annotations

import json
import uuid

from test_build_e2e import docker

from conftest import run_cli

FAST_C = """#define PY_SSIZE_T_CLEAN
#include <Python.h>
static PyObject *answer(PyObject *self, PyObject *args) { return PyLong_FromLong(ANSWER); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fast", NULL, -1, methods};
PyMODINIT_FUNC PyInit__fast(void) { return PyModule_Create(&module); }
"""
CY_PYX = "def double(int x):\n    return 2 * x\n"
SETUP = ("from Cython.Build import cythonize\nfrom setuptools import Extension, setup\n"
         "setup(name='fast-trainer', version='0.1', packages=['trainer'],\n"
         "      ext_modules=cythonize([Extension('trainer._fast', ['trainer/_fast.c'], define_macros=[('ANSWER', '42')]),\n"
         "                             Extension('trainer._cy', ['trainer/_cy.pyx'])]))\n")


def test_compiled_extensions_are_built_in_their_own_stage_and_imported_beside_the_code(testenv, project, tmp_path):
    root = project({"setup.py": SETUP, "trainer/__init__.py": "", "trainer/_fast.c": FAST_C, "trainer/_cy.pyx": CY_PYX,
                    "trainer/task.py": "from trainer import _cy, _fast\nprint('FAST', _fast.answer(), _cy.double(21))\n"})
    dry = run_cli("autopackage", str(root), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    inferred = json.loads(dry.stdout)["inferred"]
    assert inferred["config_keys"]["build_extensions"] is True
    assert any("compiled parts (setup.py:4 (cythonize))" in n for n in inferred["notes"]), inferred["notes"]

    image = f"{testenv['BUILDKIT_TEST_REGISTRY']}/extensions/fast-{uuid.uuid4().hex[:8]}"
    env = {**testenv, "BUILDKIT_PY_DOCKER": testenv["BUILDKIT_DOCKER"], "XDG_CACHE_HOME": str(tmp_path / "cache")}
    proc = run_cli("autopackage", str(root), "--image", image, "--json", env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    assert out["run"]["exit_code"] == 0 and "FAST 42 42" in proc.stderr, proc.stderr[-3000:]
    # The compiler stayed in the build stage.
    which = docker(testenv, "run", "--rm", "--entrypoint", "sh", out["image"], "-c", "command -v gcc || echo none").stdout
    assert which.strip() == "none", which

    # A code edit cannot be appended: the extension may have changed with it.
    (root / "trainer" / "_fast.c").write_text(FAST_C.replace("ANSWER)", "ANSWER + 1)"))
    (root / "buildkit.yaml").write_text("trainer:\n  module: trainer.task\nframework: none\n")
    edit = run_cli("build", "--dir", str(root), "--image", image, "--push", "--network", "host", "--progress", "plain",
                   "--build-extensions", env=env)
    assert edit.returncode == 0, edit.stderr[-3000:]
    assert "the trainer's compiled extensions are built from its whole directory (build_extensions): a code edit " \
           "rebuilds them: full build" in edit.stderr, edit.stderr[-3000:]
