"""Conformance: graphcore/keras `keras/ipu/extensions/model_pipeline_api_test.py`.

The pipeline stage assignment of a subclassed `keras.Model`, one record per layer call in
its `call` (traced on Keras inputs once built): reading it before the model is built
fails; the default, set, reset; the original's errors (wrong number, wrong class, missing
stage, out of order, empty stages at predict, dependency on a later stage); stages from
`PipelineStage` scopes in `call` and on a layer's construction; calls in no scope refused;
saving and loading (a model restoring its layers), dict inputs in fit/evaluate/predict;
the pipelining options' errors, saving them; the summary's layout.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pipeline_api_checks as checks
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow.python.ipu import gradient_accumulation as ga
from tf_keras import layers
from tf_keras.ipu import extensions

PipelineStage = extensions.pipeline_stage_assignment.PipelineStage


class SimpleModel(keras.Model):
    def __init__(self):
        super().__init__()
        self.flatten_layer = layers.Flatten()
        self.dense_layers = [layers.Dense(4), layers.Dense(8)]

    def call(self, inputs):
        def net(x):
            for layer in self.dense_layers:
                x = layer(x)
            return x

        return net(self.flatten_layer(inputs[0])), net(self.flatten_layer(inputs[1]))


class RestorableModel(SimpleModel):
    """Restores its layers from its config (rather than making new ones)."""

    def get_config(self):
        config = super().get_config()
        config["flatten_layer"] = self.flatten_layer
        config["dense_layer_0"] = self.dense_layers[0]
        config["dense_layer_1"] = self.dense_layers[1]
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        instance = cls()
        instance.flatten_layer = config["flatten_layer"]
        instance.dense_layers = [config["dense_layer_0"], config["dense_layer_1"]]
        return instance


class ModelWithPipelineStageAssignments(keras.Model):
    def __init__(self):
        super().__init__()
        self.flatten_layer = layers.Flatten()
        with PipelineStage(2):  # its calls' stage unless a call has a scope of its own
            self.dense_layer_1 = layers.Dense(4)
        self.dense_layer_2 = layers.Dense(8)

    def call(self, inputs):
        x1, x2 = inputs
        with PipelineStage(0):
            x1 = self.flatten_layer(x1)
        with PipelineStage(1):
            x2 = self.flatten_layer(x2)
        x1 = self.dense_layer_1(x1)
        with PipelineStage(3):
            x2 = self.dense_layer_1(x2)
        with PipelineStage(4):
            x1 = self.dense_layer_2(x1)
        with PipelineStage(5):
            x2 = self.dense_layer_2(x2)
        return x1, x2


class ModelWithMissingPipelineStage(keras.Model):
    def __init__(self):
        super().__init__()
        self.flatten_layer = layers.Flatten()
        self.dense_layer = layers.Dense(4)

    def call(self, inputs):
        with PipelineStage(0):
            x = self.flatten_layer(inputs)
        return self.dense_layer(x)


class ModelWithDictInputs(ModelWithPipelineStageAssignments):
    def __init__(self, keys):
        super().__init__()
        self._keys = keys

    def call(self, inputs):
        return super().call([inputs[key] for key in self._keys])


@pytest.fixture
def scope(strategy_on):
    with strategy_on(1).scope():
        yield


def _built_simple_model():
    m = SimpleModel()
    m.build([(1, 32), (1, 32)])
    return m


def _check_records(assignments):
    record = extensions.model_extensions.ModelLayerPipelineStageAssignment
    assert all(isinstance(a, record) for a in assignments)


def _numbered(model):
    assignments = model.get_pipeline_stage_assignment()
    stage_of_call = {}
    for i, assignment in enumerate(assignments):
        assignment.pipeline_stage = i
        stage_of_call[(id(assignment.layer), assignment.node_index)] = i
    return assignments, stage_of_call


@pytest.mark.follows("testGetPipelistStageAssignmentOnUninitializedModel")
def test_get_assignment_of_model_not_built(scope):
    with pytest.raises(
        RuntimeError,
        match=r"Cannot get pipeline stage assignments for model `.*` which has not been "
        r"built yet",
    ):
        SimpleModel().get_pipeline_stage_assignment()


@pytest.mark.follows("testGetPipelineStageAssignmentDefault")
def test_get_pipeline_stage_assignment_default(scope):
    assignments = _built_simple_model().get_pipeline_stage_assignment()
    assert len(assignments) == 6  # 3 layers called twice
    _check_records(assignments)
    assert all(a.pipeline_stage is None for a in assignments)


@pytest.mark.follows("testSetPipelineStageAssignment")
def test_set_pipeline_stage_assignment(scope):
    m = _built_simple_model()
    assignments, stage_of_call = _numbered(m)
    m.set_pipeline_stage_assignment(assignments)
    assignments = m.get_pipeline_stage_assignment()
    _check_records(assignments)
    for a in assignments:
        assert a.pipeline_stage == stage_of_call[(id(a.layer), a.node_index)]


@pytest.mark.follows("testResetPipelineStageAssignment")
def test_reset_pipeline_stage_assignment(scope):
    m = _built_simple_model()
    m.set_pipeline_stage_assignment(_numbered(m)[0])
    assert m._is_pipelined()
    m.reset_pipeline_stage_assignment()
    assignments = m.get_pipeline_stage_assignment()
    _check_records(assignments)
    assert all(a.pipeline_stage is None for a in assignments)


@pytest.mark.follows("testSetPipelineStageAssignmentWithInvalidNumberOfAssignments")
def test_invalid_number_of_assignments(scope):
    checks.check_invalid_number_of_assignments(_built_simple_model())


@pytest.mark.follows("testSetPipelineStageAssignmentWithInvalidAssignmentClass")
def test_invalid_assignment_class(scope):
    checks.check_invalid_assignment_class(
        _built_simple_model(), "ModelLayerPipelineStageAssignment"
    )


@pytest.mark.follows("testSetPipelineStageAssignmentWithMissingAssignment")
def test_missing_assignment(scope):
    checks.check_missing_assignment(_built_simple_model())


@pytest.mark.follows("testSetPipelineStageAssignmentWithAssignmentForNonExistantNode")
def test_assignments_out_of_order(scope):
    checks.check_assignments_out_of_order(_built_simple_model())


@pytest.mark.follows("testSetPipelineStageAssignmentWithEmptyStages")
def test_empty_stages(scope):
    checks.check_empty_stages(_built_simple_model())


@pytest.mark.follows("testSetPipelineStageAssignmentWithDependencyOnLaterStage")
def test_dependency_on_later_stage(scope):
    checks.check_dependency_on_later_stage(_built_simple_model())


def _stages_by_name(model, names):
    return {
        (names[id(a.layer)], a.node_index): a.pipeline_stage
        for a in model.get_pipeline_stage_assignment()
    }


_SCOPED = {
    ("flatten", 0): 0,
    ("flatten", 1): 1,
    ("dense_1", 0): 2,
    ("dense_1", 1): 3,
    ("dense_2", 0): 4,
    ("dense_2", 1): 5,
}


@pytest.mark.follows("testPipelineStageAssignmentWithScopes")
def test_assignment_with_scopes(scope):
    m = ModelWithPipelineStageAssignments()
    m.compile(steps_per_execution=6)
    m.set_pipelining_options(device_mapping=[0] * 6)
    predictions = m.predict(checks.two_inputs(), batch_size=1)  # builds the model
    assert m._is_pipelined()
    names = {
        id(m.flatten_layer): "flatten",
        id(m.dense_layer_1): "dense_1",
        id(m.dense_layer_2): "dense_2",
    }
    assert _stages_by_name(m, names) == _SCOPED
    expected = m(checks.two_inputs(), training=False)
    for ours, theirs in zip(predictions, expected, strict=True):
        np.testing.assert_allclose(ours, theirs.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.follows("testRunModelWithPartialPipelineStageAssignments")
def test_partial_assignments(scope):
    m = ModelWithMissingPipelineStage()
    m.compile(steps_per_execution=6)
    m.set_pipelining_options(device_mapping=[0] * 6)
    message = (
        r"All layers of a pipelined model must have an associated pipeline stage. However, "
        r"dense.* has not been assigned to one."
    )
    with pytest.raises(ValueError, match=message):
        m.predict(np.ones((6, 32), np.int32), batch_size=1)
    with pytest.raises(ValueError, match=message):
        m.build((6, 32))


def _restorable_stages(model):
    names = {
        id(model.flatten_layer): "flatten",
        id(model.dense_layers[0]): "dense_1",
        id(model.dense_layers[1]): "dense_2",
    }
    return _stages_by_name(model, names)


@pytest.mark.follows("testSaveRestore")
def test_save_restore(scope, tmp_path):
    m = RestorableModel()
    m.build([(1, 32), (1, 32)])
    names = {
        id(m.flatten_layer): "flatten",
        id(m.dense_layers[0]): "dense_1",
        id(m.dense_layers[1]): "dense_2",
    }
    assignments = m.get_pipeline_stage_assignment()
    for a in assignments:
        a.pipeline_stage = _SCOPED[(names[id(a.layer)], a.node_index)]
    m.set_pipeline_stage_assignment(assignments)
    assert _restorable_stages(m) == _SCOPED
    m.set_pipelining_options(device_mapping=[0] * 6)
    m.compile(steps_per_execution=6)
    expected = m.predict(checks.two_inputs(), batch_size=1)

    path = os.path.join(tmp_path, "model")
    m.save(path)
    m = keras.models.load_model(path, custom_objects={"RestorableModel": RestorableModel})
    assert m._is_pipelined()
    assert _restorable_stages(m) == _SCOPED
    m.compile(steps_per_execution=6)
    for ours, theirs in zip(m.predict(checks.two_inputs(), batch_size=1), expected, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
    m.build([(1, 32), (1, 32)])
    for ours, theirs in zip(m.predict(checks.two_inputs(), batch_size=1), expected, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)


@pytest.mark.follows("testModelWithDictInputs")
@pytest.mark.parametrize("keys", [[True, False], ["key1", "key2"]])
def test_model_with_dict_inputs(scope, keys):
    m = ModelWithDictInputs(keys)
    m.set_pipelining_options(device_mapping=[0] * 6, gradient_accumulation_steps_per_replica=12)
    m.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(),
        optimizer=keras.optimizers.legacy.RMSprop(),
        metrics=["accuracy"],
        steps_per_execution=12,
    )
    inputs = {key: np.ones((12, 32), np.int32) for key in keys}
    labels = [np.ones((12,), np.int32) for _ in keys]
    predictions = m.predict(inputs, batch_size=1)
    assert [p.shape for p in predictions] == [(12, 8), (12, 8)]
    m.fit(inputs, labels, batch_size=1, verbose=0)
    assert m._is_pipelined()
    results = m.evaluate(inputs, labels, batch_size=1, verbose=0)
    # The evaluated loss is that of the trained model's outputs (sparse cross-entropy of
    # label 1 over each output's logits, summed over the two outputs).
    outputs = [o.numpy() for o in m(inputs, training=False)]
    loss = sum(
        _sparse_cross_entropy(label, output) for label, output in zip(labels, outputs, strict=True)
    )
    np.testing.assert_allclose(results[0], loss, rtol=1e-4)


def _sparse_cross_entropy(labels, probabilities):
    """Keras' sparse categorical cross-entropy of (non-logit) outputs, in numpy: clipped,
    then normalised (the softmax of their logarithms)."""
    p = np.clip(probabilities, 1e-7, 1 - 1e-7)
    p = p / p.sum(axis=-1, keepdims=True)
    return float(np.mean(-np.log(p[np.arange(len(labels)), labels])))


@pytest.mark.follows("testSetPipeliningOptionsWithNegativeSteps")
def test_negative_steps(scope):
    checks.check_negative_steps(SimpleModel())


@pytest.mark.follows("testSetPipeliningOptionsWithNonIntegerTypeDeviceMapping")
def test_non_integer_device_mapping(scope):
    checks.check_non_integer_device_mapping(SimpleModel())


@pytest.mark.follows("testSetPipeliningOptionsWithInvalidKeys")
def test_invalid_keys(scope):
    checks.check_invalid_keys(SimpleModel())


@pytest.mark.follows("testSaveAndRestorePipeliningOptions")
def test_save_and_restore_pipelining_options(scope, tmp_path):
    m = SimpleModel()
    m.build([(1, 1), (1, 1)])
    for i, assignment in enumerate(m.get_pipeline_stage_assignment()):
        assignment.pipeline_stage = i  # not set on the model, as in the original
    m.set_pipelining_options(
        gradient_accumulation_steps_per_replica=10,
        device_mapping=[4, 3, 2, 1, 0],
        accumulate_outfeed=True,
        gradient_accumulation_reduction_method="mean",
    )
    path = os.path.join(tmp_path, "model")
    m.save(path)
    m = keras.models.load_model(path, custom_objects={"SimpleModel": SimpleModel})
    assert m._pipelining_gradient_accumulation_steps_per_replica == 10
    assert m._pipelining_device_mapping == [4, 3, 2, 1, 0]
    assert m._pipelining_accumulate_outfeed is True
    assert m._gradient_accumulation_reduction_method == ga.GradientAccumulationReductionMethod.MEAN


class SimplePrintableModel(keras.Model):
    def __init__(self):
        super().__init__(name="simple_printable_model")
        self.flatten_layer = layers.Flatten(name="flatten")
        self.concat_layer = layers.Concatenate(name="concatenate")
        self.dense_layer = layers.Dense(4, name="dense")

    def call(self, inputs):
        d1, d2 = inputs
        c1 = self.concat_layer([self.flatten_layer(d1), self.flatten_layer(d2)])
        return tf.multiply(1.0, self.dense_layer(c1))


@pytest.mark.follows("testPrintPipelineStageSummary")
def test_print_pipeline_stage_summary(scope):
    m = SimplePrintableModel()
    m.build([(1, 1), (1, 1)])
    strings = []
    m.print_pipeline_stage_assignment_summary(line_length=85, print_fn=strings.append)

    row = checks.summary_row

    assert strings[:4] == [
        'Model: "simple_printable_model"',
        "_" * 85,
        row("Layer (type) (node index)", "Input Layers", "Pipeline Stage"),
        "=" * 85,
    ]
    assert strings[4] == row("flatten (Flatten) (0)", strings[4][34:68].strip(), "None")
    assert strings[6] == row("flatten (Flatten) (1)", strings[6][34:68].strip(), "None")
    assert strings[4][34:].startswith("input_") and strings[6][34:].startswith("input_")
    assert strings[5] == strings[7] == "_" * 85
    assert strings[8:] == [
        row("concatenate (Concatenate) (0)", "flatten", "None"),
        row("", "flatten", ""),
        "_" * 85,
        row("dense (Dense) (0)", "concatenate", "None"),
        "_" * 85,
        strings[13],
        "=" * 85,
    ]
    # The operation's layer is named by a process-wide count (`_1` after another's).
    op = strings[13][:34].split(" (")[0]
    assert re.fullmatch(r"tf\.math\.multiply(_\d+)?", op)
    assert strings[13] == row(f"{op} (TFOpLambda) (0)"[:33], "dense", "None")
