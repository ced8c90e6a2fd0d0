from __future__ import annotations

import ast

from buildkit_py.inference.api_usage import find_removed, notes, removed_uses


def _apis(uses):
    return {u.api.api: u.where for u in uses}


def test_estimator_through_an_alias_is_found_with_its_line():
    uses = find_removed({"trainer/task.py": "import os\nimport tensorflow as tf\n\nest = tf.estimator.DNNClassifier()\n"})
    assert _apis(uses) == {"tensorflow.estimator": "trainer/task.py:4"}


def test_from_imports_and_contrib_are_found():
    uses = find_removed({"a.py": "from tensorflow import estimator\n", "b.py": "from tensorflow.contrib import slim\n"})
    assert _apis(uses) == {"tensorflow.estimator": "a.py:1", "tensorflow.contrib": "b.py:1"}
    assert _apis(find_removed({"c.py": "import tensorflow.contrib.layers as layers\n"})) == {"tensorflow.contrib": "c.py:1"}
    compat = find_removed({"d.py": "import tensorflow.compat.v1 as v1\nv1.estimator.Estimator\n"})
    assert _apis(compat) == {"tensorflow.compat.v1.estimator": "d.py:2"}


def test_lookalikes_are_not_uses():
    sources = {"e.py": "import tensorflow as tf\nestimator = 1\ntf.keras.layers.Dense(1)\n", "f.py": "import mytf.estimator\n",
               "g.py": "def broken(:\n"}
    assert find_removed(sources) == ()


def test_notes_name_the_call_and_the_pin_from_parsed_modules():
    trees = {"trainer/task.py": ast.parse("import tensorflow as tf\ntf.estimator.RunConfig()\n"),
             "trainer/a.py": ast.parse("import tensorflow as tf\n\n\ntf.estimator.Estimator\n")}
    (note,) = notes(removed_uses(trees))
    assert note.startswith("trainer/a.py:4 uses tensorflow.estimator, which tensorflow removed in 2.16")  # by path
    assert "pin tensorflow<2.16" in note
