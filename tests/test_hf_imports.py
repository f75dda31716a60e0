"""classes.py's reuse of transformers' import structure (_reuse_models_structure): the
transformers.models package it leaves behind knows what transformers' own reading of the models'
sources gives it, object by object.

Marker hf: needs torch and transformers (the extra `hf`).
"""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from modtrans.hf import classes

pytestmark = pytest.mark.hf


def test_the_models_package_knows_what_transformers_own_reading_gives() -> None:
    """The package (built from the top-level structure where classes.py was imported first, as in
    modtrans's process) against a _LazyModule built from define_import_structure reading the
    models' sources: the same objects in the same modules, the same submodules, the same missing
    backends (as sets: their order follows a set's)."""
    import transformers.models
    from transformers.utils import import_utils

    assert classes.known("gpt_oss")  # transformers.models imported
    package = sys.modules["transformers.models"]
    assert package is transformers.models
    source = os.path.join(os.path.dirname(transformers.__file__), "models", "__init__.py")
    assert [source] == classes.REUSED  # this process's package came from the reuse
    structure = import_utils.define_import_structure(source)
    read = import_utils._LazyModule("transformers.models", source, structure)
    assert len(read._class_to_module) > 1000
    assert package._class_to_module == read._class_to_module
    assert package._modules == read._modules
    ours = {k: set(v) for k, v in package._object_missing_backend.items()}
    assert ours == {k: set(v) for k, v in read._object_missing_backend.items()}
