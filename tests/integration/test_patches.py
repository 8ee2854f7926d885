"""Every patch openipu applies to TensorFlow/Keras: its target still exists, and undo restores it.

These fail first when a TensorFlow/Keras upgrade moves, renames or changes a
patched name: fix the patch's module in `openipu._src.integration`, then add
the new version to its record.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading

import pytest
import tensorflow as tf
import tf_keras

from openipu._src import integration
from openipu._src.integration import patching, registry

PATCHES = registry.all_patches()
INSTALLED = {"tensorflow": tf.__version__, "tf_keras": tf_keras.__version__}


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def test_every_family_module_is_listed_in_the_registry():
    package = pathlib.Path(integration.__file__).parent
    declaring = {
        path.stem
        for path in package.glob("*.py")
        if "register(" in path.read_text() and path.stem not in ("patching", "registry")
    }
    assert declaring == set(registry.PATCH_FAMILIES)


def test_the_registry_lists_the_known_patches():
    targets = {patch.target for patch in PATCHES}
    assert {
        "tensorflow.python.autograph.operators.control_flow:_tf_range_for_stmt",
        "tensorflow.python.data.ops.iterator_ops:OwnedIterator._next_internal",
        "tensorflow.python.eager.context:Context.configure_collective_ops",
        "tf_keras.src.engine.training:Model.__new__",
        "tf_keras.src.engine.training:Model.from_config",
        "tf_keras.src.engine.sequential:Sequential.from_config",
        "tf_keras.src.engine.data_adapter:get_data_handler",
        "tf_keras.src.engine.node:Node.__init__",
        "tf_keras.src.engine.base_layer:Layer.__init__",
        "tf_keras.src.engine.training:Model.get_config",
        "tf_keras:ipu",
    } <= targets


@pytest.mark.parametrize("patch", PATCHES, ids=str)
def test_the_target_is_where_and_what_the_patch_expects(patch):
    patching.check_target(patch)
    assert patch.reason
    assert patch.tensorflow or patch.tf_keras, "a patch names the versions it was checked with"


@pytest.mark.parametrize("patch", PATCHES, ids=str)
def test_the_patch_was_checked_with_the_installed_versions(patch):
    for package, checked in (("tensorflow", patch.tensorflow), ("tf_keras", patch.tf_keras)):
        installed = _major_minor(INSTALLED[package])
        assert not checked or installed in checked, (
            f"{patch.target} was checked with {package} {', '.join(checked)}, not {installed}: "
            f"check its reason still holds, then add {installed} to its record"
        )


def _current(patch):
    owner = patching.owner_of(patch)
    name = patch.attribute.rsplit(".", 1)[-1]
    if isinstance(owner, type):
        return owner.__dict__.get(name, None)
    return getattr(owner, name, None)


@pytest.mark.parametrize("patch", PATCHES, ids=str)
def test_applying_and_undoing_restores_the_original(patch):
    # The owner first: importing a Keras API module applies its `ipu` patch (start-up hook).
    patching.owner_of(patch)
    was_applied = patching.is_applied(patch)
    stock = patching.original(patch)
    patching.undo(patch)
    try:
        assert _current(patch) is stock
        patching.apply(patch)
        patching.apply(patch)  # idempotent
        replaced = _current(patch)
        assert replaced is not None and replaced is not stock
        patching.undo(patch)
        assert _current(patch) is stock
        assert not patching.is_applied(patch)
    finally:
        if was_applied:
            patching.apply(patch)


def _temporary_patch():
    """A patch of a throwaway class, so that the counting is tested without touching TensorFlow."""

    class Owner:
        def method(self):
            return "stock"

    patch = patching.Patch(
        module=__name__,
        attribute="Owner.method",
        kind=patching.Kind.METHOD,
        replacement=lambda stock: lambda self: "patched",
        reason="test",
    )
    globals()["Owner"] = Owner
    return Owner, patch


def test_applied_contexts_are_counted_and_restore_on_the_last_exit():
    owner, patch = _temporary_patch()
    with patching.applied(patch):
        with patching.applied(patch):
            assert owner().method() == "patched"
        assert owner().method() == "patched"
    assert owner().method() == "stock"
    assert not patching.is_applied(patch)


def test_apply_inside_an_applied_context_keeps_the_patch():
    owner, patch = _temporary_patch()
    with patching.applied(patch):
        patching.apply(patch)
    assert owner().method() == "patched"
    patching.undo(patch)
    assert owner().method() == "stock"


def test_applied_from_many_threads_restores_once_all_left():
    owner, patch = _temporary_patch()
    barrier = threading.Barrier(8)
    seen = []

    def use():
        with patching.applied(patch):
            barrier.wait()
            seen.append(owner().method())

    threads = [threading.Thread(target=use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == ["patched"] * 8
    assert owner().method() == "stock"


def _patch_of(module: str, attribute: str, kind=patching.Kind.METHOD) -> patching.Patch:
    return patching.Patch(module, attribute, kind, replacement=lambda stock: stock, reason="test")


def test_check_target_fails_loudly_when_a_name_moved():
    with pytest.raises(TypeError, match="Model.__no_such_method__"):
        patching.check_target(_patch_of("tf_keras.src.engine.training", "Model.__no_such_method__"))
    with pytest.raises(TypeError, match="expected a staticmethod"):
        patching.check_target(
            _patch_of("tf_keras.src.engine.training", "Model.fit", patching.Kind.STATICMETHOD)
        )
    with pytest.raises(ImportError):
        patching.check_target(_patch_of("tf_keras.src.engine.no_such_module", "f"))


def test_two_patches_of_one_target_are_refused():
    patch = PATCHES[0]
    with pytest.raises(ValueError, match="Two patches"):
        patching.register(_patch_of(patch.module, patch.attribute, patch.kind))


def test_keras_api_modules_have_their_ipu_attribute():
    from openipu._src.integration import keras_api_attribute

    assert patching.is_applied(keras_api_attribute.IPU_ATTRIBUTES["tf_keras"])
    assert tf_keras.ipu.PipelineStage is tf.keras.ipu.PipelineStage


IMPORT_ORDER_PROGRAM = """
import importlib, sys
imports, first = sys.argv[1].split(","), sys.argv[2]
for name in imports:
    importlib.import_module(name)
from openipu._src.integration import keras_api_attribute, patching
patches = keras_api_attribute.IPU_ATTRIBUTES.values()
for patch in patches:  # before anything touched tf.keras: some owners are not imported yet
    if first == "apply":
        patching.apply(patch)
    stock = patching.original(patch)
    assert stock is None, (patch, stock)
    assert patching.is_applied(patch), patch
for patch in patches:
    owner = patching.owner_of(patch)
    patching.undo(patch)
    assert "ipu" not in vars(owner) and patching.original(patch) is None, patch
    patching.apply(patch)
    assert vars(owner)["ipu"].PipelineStage, patch
import tensorflow as tf
import tf_keras
import tensorflow.keras.ipu
from openipu.keras_ipu import PipelineStage
assert tf.keras.ipu.PipelineStage is tf_keras.ipu.PipelineStage is PipelineStage
print("ok")
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "imports, first",
    [
        # The xdist worker that failed: the conftest's import, then `original` of a patch
        # whose owner (`tensorflow.keras`) no test had imported yet.
        ("tensorflow.python.ipu,tf_keras", "original"),
        ("tensorflow.python.ipu,tf_keras", "apply"),
        ("tensorflow.keras.ipu,tf_keras", "original"),
        ("tf_keras,tensorflow.keras.ipu", "apply"),
    ],
)
def test_the_ipu_attribute_record_holds_in_any_import_order(imports, first):
    """Importing an owner applies its `ipu` patch: `original`/`apply` must not mistake that
    replacement for the stock value (a fresh interpreter, so the import order is the one given)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, "-c", IMPORT_ORDER_PROGRAM, imports, first]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")


def test_integration_is_a_leaf_that_imports_no_other_openipu_module():
    import ast

    package = pathlib.Path(integration.__file__).parent
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                assert not name.startswith("openipu") or name.startswith(
                    "openipu._src.integration"
                ), f"{path.name} imports {name}: integration/ must not import openipu's features"
