"""The private tf_keras attributes openipu reads exist on real Keras objects.

A failure here means a Keras upgrade renamed or removed one: fix its accessor in
`openipu._src.integration.keras_internals` and the version in its record.
"""

from __future__ import annotations

import importlib
import tempfile

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from tf_keras.src.engine import data_adapter

from openipu._src.integration import keras_internals


def _resolve(path: str):
    module_path, _, name = path.rpartition(".")
    try:
        return importlib.import_module(path)
    except ImportError:
        return getattr(importlib.import_module(module_path), name)


def _functional_model():
    inputs = tf_keras.Input((3,))
    outputs = tf_keras.layers.Dense(2)(tf_keras.layers.Dense(4)(inputs))
    model = tf_keras.Model(inputs, outputs)
    model.compile(optimizer=tf_keras.optimizers.legacy.SGD(0.1), loss="mse", steps_per_execution=2)
    return model


def _data_handler(x, **kwargs):
    return data_adapter.get_data_handler(x=x, model=_functional_model(), **kwargs)


def _generator():
    while True:
        yield np.zeros((5, 3), np.float32), np.zeros((5, 2), np.float32)


@pytest.fixture(scope="module")
def keras_objects():
    model = _functional_model()
    sequential = tf_keras.Sequential([tf_keras.layers.Dense(2)])
    sequential.build((None, 3))
    handler = _data_handler(np.zeros((8, 3), np.float32), batch_size=4)
    generator_handler = _data_handler(_generator(), steps_per_epoch=1)
    with tempfile.TemporaryDirectory() as directory:
        model.save(directory, save_format="tf")
        revived = tf_keras.models.load_model(directory)
    return {
        "tf_keras.src.engine.training.Model": model,
        # Revived from a SavedModel: its loader sets `_serialized_attributes`.
        "tf_keras.src.engine.functional.Functional": revived,
        "tf_keras.src.engine.base_layer.Layer": model.layers[1],
        "tf_keras.src.optimizers.legacy.optimizer_v2.OptimizerV2": model.optimizer,
        "tf_keras.src.engine.data_adapter.DataHandler": handler,
        "tf_keras.src.engine.data_adapter.GeneratorDataAdapter": generator_handler._adapter,
        "sequential": sequential,
    }


@pytest.mark.parametrize(
    "internal", keras_internals.INTERNALS, ids=lambda i: f"{i.owner}.{i.attribute}"
)
def test_the_attribute_exists(internal, keras_objects):
    owner = _resolve(internal.owner)
    example = keras_objects.get(internal.owner, owner)
    assert isinstance(example, type(owner)) or example is owner or isinstance(example, owner)
    assert hasattr(example, internal.attribute), (
        f"{internal.owner} has no {internal.attribute} any more ({internal.reason})"
    )
    assert _major_minor(tf_keras.__version__) in internal.tf_keras


def _major_minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def test_the_accessors_read_what_keras_keeps(keras_objects):
    model = keras_objects["tf_keras.src.engine.training.Model"]
    for kind in ("train", "test", "predict"):
        assert isinstance(keras_internals.step_counter(model, kind), tf.Variable)
    assert int(keras_internals.steps_per_execution(model).numpy()) == 2
    dense = model.layers[1]
    assert keras_internals.inbound_nodes(dense)[0].layer is dense
    depths = keras_internals.nodes_by_depth(model)
    assert sorted(depths) == [0, 1, 2]  # the input layer, then the two Dense layers
    revived = keras_objects["tf_keras.src.engine.functional.Functional"]
    assert keras_internals.saved_model_config(revived)["name"] == model.name
    assert keras_internals.saved_model_config(model) == {}
    sequential = keras_objects["sequential"]
    assert tuple(keras_internals.build_input_shape(sequential)) == (None, 3)

    variable = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(variable * variable)
    pairs = keras_internals.legacy_compute_gradients(
        model.optimizer, loss, var_list=[variable], tape=tape
    )
    np.testing.assert_allclose(pairs[0][0].numpy(), [2.0, 4.0])
    adam = tf_keras.optimizers.legacy.Adam(beta_1=0.8)
    assert float(keras_internals.optimizer_hyper(adam, "beta_1", tf.float32)) == pytest.approx(0.8)

    weighted = keras_internals.class_weight_map_fn({0: 1.0, 1: 3.0})(
        tf.zeros((2, 3)), tf.constant([0, 1])
    )
    np.testing.assert_allclose(weighted[2].numpy(), [1.0, 3.0])
    adapter = keras_objects["tf_keras.src.engine.data_adapter.GeneratorDataAdapter"]
    assert keras_internals.first_batch_size(adapter) == 5
    handler = keras_objects["tf_keras.src.engine.data_adapter.DataHandler"]
    assert keras_internals.first_batch_size(handler._adapter) is None
