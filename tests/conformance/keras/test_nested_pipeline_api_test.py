"""Conformance: graphcore/keras `keras/ipu/extensions/nested_pipeline_api_test.py`.

Models nested in models (functional, Sequential and subclassed, in every combination, up to
three levels, one model called four times): the default assignment has a record per nested
model holding its own records, all unassigned; numbering every layer invocation (depth first)
and setting the assignment gives those stages back; stages from `PipelineStage` scopes on
layer construction reach into nested models.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tf_keras as keras
from tf_keras import layers
from tf_keras.ipu import extensions
from tf_keras.src.engine.functional import Functional
from tf_keras.src.engine.sequential import Sequential

PipelineStage = extensions.pipeline_stage_assignment.PipelineStage


class ModelSubclass(keras.Model):
    def __init__(self, layers_list, name=None):
        super().__init__(name=name)
        self.layers_list = layers_list

    def call(self, inputs):
        x = inputs
        for layer in self.layers_list:
            x = layer(x)
        return x


class LayerDef:
    def __init__(self, layer_class, units=None, stage=None):
        self.layer_class = layer_class
        self.args = [] if units is None else [units]
        self.stage = stage

    def flat(self):
        return [self]

    def build(self):
        if self.stage is None:
            return self.layer_class(*self.args)
        with PipelineStage(self.stage):
            return self.layer_class(*self.args)


class ModelDef:
    """A model of one of several classes; `flat()` gives one definition per combination of
    the classes of it and of its nested models (a child listed twice is one instance)."""

    def __init__(self, classes, children, input_shape=(32,)):
        self.classes = classes
        self.children = children
        self.input_shape = input_shape

    def flat(self):
        distinct = list(dict.fromkeys(self.children))
        result = []
        for cls in self.classes:
            for choice in itertools.product(*(child.flat() for child in distinct)):
                chosen = dict(zip(distinct, choice, strict=True))
                result.append(ModelDef([cls], [chosen[c] for c in self.children], self.input_shape))
        return result

    def build(self):
        built = {child: child.build() for child in dict.fromkeys(self.children)}
        children = [built[child] for child in self.children]
        cls = self.classes[0]
        if cls is Functional:
            inputs = layers.Input(self.input_shape)
            outputs = inputs
            for child in children:
                outputs = child(outputs)
            model = Functional(inputs, outputs)
        elif cls is Sequential:
            model = Sequential([layers.Input(self.input_shape), *children])
        else:
            model = ModelSubclass(children)
        model.build((1, *self.input_shape))
        return model

    def name(self):
        kinds = [self.classes[0].__name__] + [
            c.name() for c in dict.fromkeys(self.children) if isinstance(c, ModelDef)
        ]
        return "_".join(kinds)


ALL = [Functional, Sequential, ModelSubclass]
_REPEATED_INNER = ModelDef(ALL, [LayerDef(layers.Dense, 16)], input_shape=(16,))
DEFINITIONS = {
    "simple": ModelDef(
        ALL,
        [
            LayerDef(layers.Flatten),
            ModelDef(ALL, [LayerDef(layers.Dense, 32), LayerDef(layers.Dense, 16)]),
            LayerDef(layers.Dense, 8),
        ],
    ),
    "double": ModelDef(
        ALL,
        [
            LayerDef(layers.Flatten),
            ModelDef(ALL, [LayerDef(layers.Dense, 32)]),
            ModelDef(ALL, [LayerDef(layers.Dense, 16)]),
            LayerDef(layers.Dense, 8),
        ],
    ),
    "three_level": ModelDef(
        ALL,
        [
            LayerDef(layers.Flatten),
            ModelDef(
                ALL, [LayerDef(layers.Dense, 32), ModelDef(ALL, [LayerDef(layers.Dense, 16)])]
            ),
            LayerDef(layers.Dense, 8),
        ],
    ),
    # Sequential models cannot call a layer twice.
    "repeated": ModelDef(
        [Functional, ModelSubclass],
        [
            LayerDef(layers.Flatten),
            LayerDef(layers.Dense, 16),
            _REPEATED_INNER,
            _REPEATED_INNER,
            _REPEATED_INNER,
            _REPEATED_INNER,
            LayerDef(layers.Dense, 8),
        ],
    ),
}
SCOPED = ModelDef(
    [Functional, ModelSubclass],
    [
        LayerDef(layers.Flatten, stage=0),
        ModelDef(
            [Functional, ModelSubclass],
            [LayerDef(layers.Dense, 32, stage=1), LayerDef(layers.Dense, 16, stage=2)],
        ),
        LayerDef(layers.Dense, 8, stage=3),
    ],
)


def _cases(definitions, quick=1):
    """Every combination; the first `quick` of each definition in the quick run."""
    cases = []
    for key, definition in definitions.items():
        for index, flat in enumerate(definition.flat()):
            marks = [] if index < quick else [pytest.mark.slow]
            cases.append(pytest.param(flat, id=f"{key}_{flat.name()}", marks=marks))
    return cases


GENERAL = _cases(DEFINITIONS)


@pytest.fixture
def scope(strategy_on):
    with strategy_on(1).scope():
        yield


def _leaves(assignments):
    nested = (
        extensions.NestedModelPipelineStageAssignment,
        extensions.FunctionalNestedModelPipelineStageAssignment,
        extensions.SequentialNestedModelPipelineStageAssignment,
    )
    for assignment in assignments:
        if isinstance(assignment, nested):
            assert assignment.is_nested_model
            yield from _leaves(assignment.pipeline_stage_assignments)
        else:
            assert not assignment.is_nested_model
            yield assignment


@pytest.mark.follows("testGetPipelineStageAssignmentDefault")
@pytest.mark.parametrize("definition", GENERAL)
def test_get_pipeline_stage_assignment_default(scope, definition):
    m = definition.build()
    leaves = list(_leaves(m.get_pipeline_stage_assignment()))
    assert leaves and all(a.pipeline_stage is None for a in leaves)


@pytest.mark.follows("testSetPipelineStageAssignment")
@pytest.mark.parametrize("definition", GENERAL)
def test_set_pipeline_stage_assignment(scope, definition):
    m = definition.build()
    assignments = m.get_pipeline_stage_assignment()
    leaves = list(_leaves(assignments))
    for n, leaf in enumerate(leaves):
        leaf.pipeline_stage = n
    m.set_pipeline_stage_assignment(assignments)
    assert [a.pipeline_stage for a in _leaves(m.get_pipeline_stage_assignment())] == list(
        range(len(leaves))
    )
    # A nested model is one layer invocation per call: four calls of the repeated model
    # give its layer four records.
    weights_of = {id(leaf.layer) for leaf in leaves}
    assert len(leaves) >= len(weights_of)


@pytest.mark.follows("testPipelineStageAssignmentWithScopes")
@pytest.mark.parametrize("definition", _cases({"scoped": SCOPED}, quick=4))
def test_assignment_with_scopes(scope, definition):
    m = definition.build()
    assert [a.pipeline_stage for a in _leaves(m.get_pipeline_stage_assignment())] == [0, 1, 2, 3]
    x = np.ones((2, 32), np.float32)
    assert m(x).shape == (2, 8)
