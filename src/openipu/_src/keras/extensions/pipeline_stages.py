"""Pipeline stages of Keras models: `PipelineStage`, assignment records, validation.

A pipelined model's layers are split into stages, each on its own IPU. The
stages change where computation happens, not what is computed: a pipelined
model trains like the same model with gradient accumulation over the
pipeline depth. openipu keeps the assignment, validates it with the original's
rules and messages (keras/ipu/extensions/*_extensions.py: every layer invocation
assigned, in execution order, no stage taking a later stage's outputs, no empty
stage), and feeds it to the cost model; the compiled program of a replica holds
all its stages.

Stages come from `tf.keras.ipu.PipelineStage(n)` scopes around layer calls or
layer constructions (recorded on the functional graph's nodes and on layers; a
subclassed model's `call` is traced on Keras inputs into such a graph, as the
original's), or from `set_pipeline_stage_assignment`. Models nested in models
have records holding their own records.
"""

from __future__ import annotations

import contextlib
import numbers
import threading
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf
import tf_keras
from tensorflow.python.platform import tf_logging
from tf_keras.src.engine import functional, sequential

from openipu._src.integration import keras_internals, keras_node_init
from openipu._src.strategy.ipu_strategy import IPUStrategyV1

_state = threading.local()


def current_stage() -> int | None:
    stack = getattr(_state, "stages", [])
    return stack[-1] if stack else None


class PipelineStage:
    """Context manager: layers called inside it are assigned to pipeline stage `stage`."""

    def __init__(self, stage: int) -> None:
        # The original (keras/ipu/extensions/pipeline_stage_assignment.py) keeps the stage as
        # given and refuses a negative one on entering the scope (`stage < 0`: a TypeError
        # for a stage that is no number); NumPy integers work as ints.
        if isinstance(stage, numbers.Integral) and not isinstance(stage, bool):
            stage = int(stage)
        self._stage = stage

    @property
    def stage(self) -> int:
        return self._stage

    def __enter__(self) -> PipelineStage:
        if self._stage < 0:
            raise ValueError(f"{self._stage} is not a valid pipeline stage.")
        self._check_context()
        _install_node_recorder()
        _mark_staged_model()
        _state.__dict__.setdefault("stages", []).append(self._stage)
        return self

    def __exit__(self, *exc_info) -> None:
        _state.stages.pop()

    def _check_context(self) -> None:
        # graphcore/keras keras/ipu/extensions/pipeline_stage_assignment.py: the scope is
        # entered only under an IPUStrategy (the original's PopDistStrategy and
        # IPUMultiWorkerStrategyV1 are no IPUStrategyV1 there), and never inside another.
        if not _is_original_ipu_strategy(tf.distribute.get_strategy()):
            raise RuntimeError("PipelineStage may only be used from within an IPUStrategy context.")
        self._check_not_nested()

    @staticmethod
    def _check_not_nested() -> None:
        if current_stage() is not None:
            raise RuntimeError("Pipeline stages must not be nested.")


class FirstApiPipelineStage(PipelineStage):
    """`ipu.keras.PipelineStage` of the first IPU Keras API (SDK 2.0,
    tensorflow/python/ipu/keras/pipeline.py): it refused only nested scopes, so models
    were built with it outside any strategy."""

    def _check_context(self) -> None:
        self._check_not_nested()


def _is_original_ipu_strategy(strategy) -> bool:
    # Imported when a scope is entered: the multi-process strategies stay out of start-up.
    from openipu._src.distributed.multi_worker_strategy import IPUMultiWorkerStrategyV1

    # Imported when a scope is entered, as the line above.
    from openipu._src.distributed.popdist_strategy import PopDistStrategy

    return isinstance(strategy, IPUStrategyV1) and not isinstance(
        strategy, (IPUMultiWorkerStrategyV1, PopDistStrategy)
    )


def _install_node_recorder() -> None:
    """Makes functional-graph nodes and layers remember the stage they were created in."""
    keras_node_init.install(_record_stage, _record_layer_stage)


_STAGED = "_ipu_stage_scopes_in_call"


def _mark_staged_model() -> None:
    """Marks the model whose call (or build) enters this scope: its call must be traced to
    read its stages."""
    model = keras_internals.calling_layer() or getattr(_state, "building", None)
    if model is not None:
        model.__dict__[_STAGED] = True


@contextlib.contextmanager
def building(model) -> Iterator[None]:
    """While `model.build` runs its call, scopes entered in it mark the model."""
    saved = getattr(_state, "building", None)
    _state.building = model
    try:
        yield
    finally:
        _state.building = saved


def uses_stage_scopes(model) -> bool:
    """Whether the model's call entered a PipelineStage scope, or a layer of it was made in
    one: only then can scopes give a subclassed model stages."""
    return model.__dict__.get(_STAGED, False) or any(
        "_ipu_pipeline_stage" in layer.__dict__ for layer in model.layers
    )


def _record_stage(node) -> None:
    stage = current_stage()
    if stage is not None:
        node.__dict__["_ipu_pipeline_stage"] = stage


def _record_layer_stage(layer) -> None:
    stage = current_stage()
    if stage is not None:
        layer.__dict__["_ipu_pipeline_stage"] = stage


def _stage_of_node(node) -> int | None:
    """The stage of a layer invocation: its own scope's, else its layer's construction
    scope's (as the original's functional_extensions.py `_get_pipelining_from_nodes`)."""
    stage = node.__dict__.get("_ipu_pipeline_stage")
    if stage is None:
        stage = node.layer.__dict__.get("_ipu_pipeline_stage")
    return stage


# Assignment records (keras/ipu/extensions/pipeline_stage_assignment.py) ---------------------


class _LayerRecord:
    """A layer and its pipeline stage (None: not assigned)."""

    is_nested_model = False

    def __init__(self, layer, pipeline_stage=None) -> None:
        self._layer = layer
        self.pipeline_stage = pipeline_stage

    @property
    def layer(self):
        return self._layer

    @property
    def pipeline_stage(self):
        return self._pipeline_stage

    @pipeline_stage.setter
    def pipeline_stage(self, value) -> None:
        # Checked when the assignment is set, as the original's.
        self._pipeline_stage = value


class SequentialLayerPipelineStageAssignment(_LayerRecord):
    """A layer of a Sequential model and its pipeline stage (None: not assigned)."""

    def __str__(self) -> str:
        return f"Layer: {self._layer.name} is assigned to pipeline stage: {self.pipeline_stage}"


class ModelLayerPipelineStageAssignment(_LayerRecord):
    """An invocation (`node_index`: which call) of a layer in a model and its pipeline stage."""

    def __init__(self, layer, node_index, pipeline_stage=None) -> None:
        super().__init__(layer, pipeline_stage)
        self._node_index = node_index

    @property
    def node_index(self):
        return self._node_index

    @property
    def inbound_layers(self) -> list:
        return _inbound_layers(self._layer, self._node_index)

    def __str__(self) -> str:
        return (
            f"Layer: {self._layer.name} (node index {self._node_index}) is assigned to "
            f"pipeline stage: {self.pipeline_stage}"
        )


class FunctionalLayerPipelineStageAssignment(ModelLayerPipelineStageAssignment):
    """An invocation of a layer in a functional model and its pipeline stage."""


class _NestedRecord:
    """A nested model and the records of its own layers."""

    is_nested_model = True

    def __init__(self, nested_model, pipeline_stage_assignments) -> None:
        self._nested_model = nested_model
        self._pipeline_stage_assignments = pipeline_stage_assignments

    @property
    def nested_model(self):
        return self._nested_model

    @property
    def pipeline_stage_assignments(self) -> list:
        return list(self._pipeline_stage_assignments)


class SequentialNestedModelPipelineStageAssignment(_NestedRecord):
    """The assignments of a model nested in a Sequential model."""

    def __str__(self) -> str:
        inner = "".join(f"\n  {x}" for x in self._pipeline_stage_assignments)
        return (
            f"Model: {self._nested_model.name} has the following pipeline stage assignments:{inner}"
        )


class NestedModelPipelineStageAssignment(_NestedRecord):
    """The assignments of one invocation (`node_index`) of a model nested in a model."""

    def __init__(self, nested_model, node_index, pipeline_stage_assignments) -> None:
        super().__init__(nested_model, pipeline_stage_assignments)
        self._node_index = node_index

    @property
    def node_index(self):
        return self._node_index

    @property
    def inbound_layers(self) -> list:
        return _inbound_layers(self._nested_model, self._node_index)

    def __str__(self) -> str:
        inner = "".join(f"\n  {x}" for x in self._pipeline_stage_assignments)
        return (
            f"Model: {self._nested_model.name} (node index {self._node_index}) has the "
            f"following pipeline stage assignments:{inner}"
        )


class FunctionalNestedModelPipelineStageAssignment(NestedModelPipelineStageAssignment):
    """The assignments of one invocation of a model nested in a functional model."""


def _inbound_layers(layer, node_index: int) -> list:
    node = keras_internals.inbound_nodes(layer)[node_index]
    return [parent.layer for parent in node.parent_nodes]


_LAYER_RECORD: dict[str, Any] = {
    "sequential": SequentialLayerPipelineStageAssignment,
    "functional": FunctionalLayerPipelineStageAssignment,
    "model": ModelLayerPipelineStageAssignment,
}
_NESTED_RECORD: dict[str, Any] = {
    "sequential": SequentialNestedModelPipelineStageAssignment,
    "functional": FunctionalNestedModelPipelineStageAssignment,
    "model": NestedModelPipelineStageAssignment,
}


def kind_of(model) -> str:
    if isinstance(model, sequential.Sequential):
        return "sequential"
    if isinstance(model, functional.Functional):
        return "functional"
    return "model"


def is_extended_model(layer) -> bool:
    """Whether `layer` is a model nested as a layer, with assignments of its own."""
    return isinstance(layer, tf_keras.Model) and hasattr(layer, "get_pipeline_stage_assignment")


def flatten(assignment) -> list:
    """The layer records of an assignment, those of nested models in place."""
    flat = []
    for record in assignment:
        if getattr(record, "is_nested_model", False):
            flat.extend(flatten(record.pipeline_stage_assignments))
        else:
            flat.append(record)
    return flat


# The graph of a model: its layer invocations in execution order -------------------------------


def post_order(model) -> list:
    """The nodes of a functional model (or of a subclassed model's traced graph), inputs
    excluded, in execution order (the original's extensions_base.py `_create_post_order`)."""
    if kind_of(model) == "model":
        return model._ipu_traced_graph().post_order  # noqa: SLF001
    return _post_order(keras_internals.nodes_by_depth(model), model.inputs)


def _post_order(nodes_by_depth: dict, inputs) -> list:
    visited = {str(id(x)) for x in tf.nest.flatten(inputs)}
    order = []
    for depth in sorted(nodes_by_depth, reverse=True):
        for node in nodes_by_depth[depth]:
            if node.is_input or any(t not in visited for t in node.flat_input_ids):
                continue
            visited.update(node.flat_output_ids)
            order.append(node)
    return order


class TracedGraph:
    """A subclassed model's `call`, run once on Keras inputs: its layer invocations are nodes
    of a functional graph (as the original's model_extensions.py `_trace_graph_network`)."""

    def __init__(self, model) -> None:
        # Node indices count from the trace: forget the calls of earlier traces.
        for layer in model.layers:
            keras_internals.inbound_nodes(layer).clear()
            keras_internals.outbound_nodes(layer).clear()
        self.specs = _input_specs_of(model)
        self.inputs = tf.nest.map_structure(
            lambda spec: tf_keras.Input(
                batch_size=spec.shape[0] or 1, shape=spec.shape[1:], dtype=spec.dtype
            ),
            self.specs,
        )
        with keras_internals.call_context(model, self.inputs):
            self.outputs = model.call(self.inputs)
        nodes_by_depth = keras_internals.map_graph_network(self.inputs, self.outputs)
        self.post_order = _post_order(nodes_by_depth, self.inputs)

    def current(self, model) -> bool:
        """Whether the model's inputs are still those of this trace."""
        return repr(_input_specs_of(model)) == repr(self.specs)


def _input_specs_of(model):
    """Specs of the inputs the model was last called on, else of its build input shape
    (float32)."""
    saved = model.save_spec(dynamic_batch=False)
    if saved is not None and len(saved[0]) == 1:
        return saved[0][0]
    return _input_specs(keras_internals.build_input_shape(model))


def _input_specs(shape):
    """TensorSpecs for a model's recorded build input shape."""
    if isinstance(shape, dict):
        return {k: _input_specs(v) for k, v in shape.items()}
    dimension = (int, type(None), tf.compat.v1.Dimension)
    if isinstance(shape, tf.TensorShape) or all(isinstance(d, dimension) for d in shape):
        return tf.TensorSpec(tf.TensorShape(shape), tf.float32)
    return type(shape)(_input_specs(s) for s in shape)


def default_assignment(model) -> list:
    """Unassigned records of every layer invocation, in execution order; nested models give
    a record holding their own current assignment."""
    kind = kind_of(model)
    if kind == "sequential":
        return [
            _NESTED_RECORD[kind](layer, layer.get_pipeline_stage_assignment())
            if is_extended_model(layer)
            else _LAYER_RECORD[kind](layer)
            for layer in model.layers
        ]
    records = []
    for node in post_order(model):
        layer = node.layer
        node_index = keras_internals.inbound_nodes(layer).index(node)
        if is_extended_model(layer):
            records.append(
                _NESTED_RECORD[kind](layer, node_index, layer.get_pipeline_stage_assignment())
            )
        else:
            records.append(_LAYER_RECORD[kind](layer, node_index))
    return records


def assignment_from_scopes(model) -> list | None:
    """The assignment the model's PipelineStage scopes give, None if it has none; every
    layer invocation needs one then (functional_extensions.py `_get_pipelining_from_nodes`)."""
    kind = kind_of(model)
    order = post_order(model)
    if not any(_stage_of_node(node) is not None for node in order):
        return None
    records = []
    for node in order:
        layer = node.layer
        node_index = keras_internals.inbound_nodes(layer).index(node)
        if is_extended_model(layer):
            records.append(
                _NESTED_RECORD[kind](layer, node_index, layer.get_pipeline_stage_assignment())
            )
            continue
        stage = _stage_of_node(node)
        if stage is None:
            raise ValueError(
                "All layers of a pipelined model must have an associated pipeline stage. "
                f"However, {layer.name} has not been assigned to one. Pipeline stages can be "
                "assigned when a layer is constructed, or each time a layer is called. "
                "Different pipeline stages can assigned to each call."
            )
        records.append(_LAYER_RECORD[kind](layer, node_index, stage))
    return records


# Checking an assignment (the original's messages) ----------------------------------------------


def check_assignment(model, assignment, nested: bool = False) -> None:
    """Raises ValueError unless `assignment` is a valid assignment of `model` (the checks of
    the original's `_validate_pipeline_stage_assignment`, per model kind). A `nested`
    model's assignment is checked as part of the graph it is called in (a nested Sequential
    model's first layer need not be in stage 0)."""
    kind = kind_of(model)
    plain = not any(is_extended_model(layer) for layer in model.layers)
    if kind == "sequential" and plain and not nested:
        _check_sequential(model, assignment)
        return
    if not isinstance(assignment, list):
        raise ValueError("`pipeline_stage_assignment` needs to be a list.")
    expected = _invocations(model)
    _check_length(assignment, len(expected))
    stages: dict[int, tuple[int, int]] = {}  # node id -> (first, last) stage
    for record, (layer, node) in zip(assignment, expected, strict=True):
        key = id(node) if node is not None else id(record)
        if is_extended_model(layer):
            stages[key] = _check_nested(model, kind, record, layer)
            continue
        cls = _LAYER_RECORD[kind]
        if not isinstance(record, cls):
            raise ValueError(
                f"The pipeline stage assignment for layer {layer.name} in {model.name} must be "
                f"an instance of `{cls.__name__}`. Instead the assignment was of type "
                f"{type(record).__name__}."
            )
        _check_same_layer(record.layer, layer)
        if record.pipeline_stage is None:
            where = "" if kind == "sequential" else f" with node_index {record.node_index}"
            raise ValueError(
                f"Layer {layer.name}{where} has not been assigned a pipeline stage in "
                "`pipeline_stage_assignment`."
            )
        if node is not None and keras_internals.inbound_nodes(layer)[record.node_index] is not node:
            raise ValueError(
                "The order of `pipeline_stage_assignment` does not match the post-order "
                f"generated from the graph (missmatched nodes of layer {layer.name})."
            )
        stages[key] = (record.pipeline_stage, record.pipeline_stage)
    _check_dependencies(model, expected, assignment, stages)


def _invocations(model) -> list[tuple[Any, Any]]:
    """(layer, node) of each invocation; Sequential models have no node per layer here."""
    if kind_of(model) == "sequential":
        return [(layer, None) for layer in model.layers]
    return [(node.layer, node) for node in post_order(model)]


def _check_length(assignment, count: int) -> None:
    if len(assignment) != count:
        raise ValueError(
            f"The length of the provided `pipeline_stage_assignment` ({len(assignment)}) does "
            f"not match the number of layers in the graph ({count}). Each layer needs to be "
            "assigned a pipeline stage (excluding input layers)."
        )


def _check_same_layer(given, expected) -> None:
    if given is not expected:
        raise ValueError(
            "The order of `pipeline_stage_assignment` does not match the post-order generated "
            f"from the graph ({given.name} != {expected.name})."
        )


def _check_nested(model, kind: str, record, nested) -> tuple[int, int]:
    cls = _NESTED_RECORD[kind]
    if not isinstance(record, cls):
        raise ValueError(
            f"The pipeline stage assignment for nested model {nested.name} in {model.name} "
            f"must be an instance of `{cls.__name__}`. Instead the assignment was of type "
            f"{type(record).__name__}."
        )
    _check_same_layer(record.nested_model, nested)
    inner = record.pipeline_stage_assignments
    check_assignment(nested, inner, nested=True)
    leaves = [r.pipeline_stage for r in flatten(inner)]
    return min(leaves), max(leaves)


def _check_dependencies(model, expected, assignment, stages) -> None:
    """Stage by stage, each invocation's inputs must have been computed by then (the
    original's `_get_pipelined_post_order`: a stage's layers may only take outputs of the
    same or earlier stages)."""
    keys = [
        id(node) if node is not None else id(rec)
        for (_, node), rec in zip(expected, assignment, strict=True)
    ]
    last = max(hi for _, hi in stages.values())
    ordered = sorted(
        (stages[key][0], index) for index, key in enumerate(keys) if 0 <= stages[key][0] <= last
    )
    for stage, index in ordered:
        layer, node = expected[index]
        if node is None:
            parents = [keys[index - 1]] if index else []
        else:
            parents = [id(p) for p in node.parent_nodes if id(p) in stages]
        for parent in parents:
            first, final = stages[parent]
            if first < 0 or final > stage:
                raise ValueError(
                    f"Layer {layer.name} in pipeline stage {stage} has a dependency from a "
                    "pipeline stage which has not yet been executed. Layers can only use "
                    "outputs from current or previous pipeline stages."
                )


def _check_sequential(model, assignment) -> None:
    """sequential_extensions.py `set_pipeline_stage_assignment` and its validation."""
    previous = 0
    for index, record in enumerate(assignment):
        if record.pipeline_stage is None:
            raise ValueError(f"Layer {record.layer.name} has not been assigned a pipeline stage.")
        layer = model.layers[index]
        if layer is not record.layer:
            raise ValueError(
                f"The provided assignment at index {index} `pipeline_stage_assignment` is for "
                f"layer {record.layer.name}, but the layer in the Sequential model at index "
                f"{index} is {layer.name}."
            )
        if index == 0:
            if record.pipeline_stage != 0:
                raise ValueError(
                    "The first layer in a pipelined sequential model needs to be assigned to "
                    "the 0th pipeline stage, however it was assigned to "
                    f"{record.pipeline_stage}."
                )
        elif record.pipeline_stage not in (previous, previous + 1):
            raise ValueError(
                f"Layer {record.layer.name} has been assigned to pipeline stage "
                f"{record.pipeline_stage}, however the previous layer in the Sequential model "
                f"was assigned to pipeline stage {previous}. A layer in a Sequential model can "
                "only be assigned to the same pipeline stage as the previous layer or to the "
                "next pipeline stage."
            )
        previous = record.pipeline_stage


def sequential_assignment(model, assignment) -> list:
    """A Sequential model's `set_pipeline_stage_assignment` argument as records: ints become
    records in place, as in the original's sequential_extensions.py."""
    if not isinstance(assignment, list):
        raise ValueError("`pipeline_stage_assignment` needs to be a list.")
    _check_length(assignment, len(model.layers))
    for index, item in enumerate(assignment):
        if isinstance(item, int):
            assignment[index] = SequentialLayerPipelineStageAssignment(model.layers[index], item)
    records = (SequentialLayerPipelineStageAssignment, SequentialNestedModelPipelineStageAssignment)
    if not all(isinstance(record, records) for record in assignment):
        raise ValueError(
            "All elements of `pipeline_stage_assignment` must be instances of "
            "`SequentialLayerPipelineStageAssignment` for layers or  "
            "`SequentialNestedModelPipelineStageAssignment` for nested models."
        )
    check_assignment(model, assignment)
    return assignment


def check_no_empty_stage(records) -> None:
    """Every stage up to the last one used needs a layer (extensions_base.py
    `_get_pipeline_post_order`)."""
    used = {r.pipeline_stage for r in records}
    highest = max(used)
    missing = sorted(set(range(highest + 1)) - used)
    if missing:
        raise RuntimeError(
            "All stages in a pipeline must have at lease one layer assigned to them. The "
            f"highest stage with an assignment is stage {highest}, however the preceeding "
            f"stages {missing} had no assignments."
        )


def validate(model, records: list, device_mapping: list[int] | None) -> int:
    """Checks the layer records of a pipelined model before it runs; returns its stage count."""
    unassigned = [r.layer.name for r in records if r.pipeline_stage is None]
    if unassigned:
        raise ValueError(
            f"Layer {unassigned[0]} has not been assigned a pipeline stage in "
            "`pipeline_stage_assignment`."
        )
    check_no_empty_stage(records)
    stages = max(r.pipeline_stage for r in records) + 1
    if device_mapping is not None and len(device_mapping) != stages:
        # The original's pipeline (pipelining_ops.py), given the model's device_mapping.
        raise ValueError(
            f"Each stage must be mapped to an IPU: {len(device_mapping)} mappings != {stages} "
            f"stages (the device_mapping {list(device_mapping)} of model {model.name!r})"
        )
    return stages


def warn_of_batch_normalization(records) -> bool:
    """Warns (as the original's extensions_base.py) when a pipelined model trains batch
    normalization layers with moving statistics; returns whether it warned."""
    for record in records:
        layer = record.layer
        if isinstance(layer, tf_keras.layers.BatchNormalization) and 0 < layer.momentum < 1:
            tf_logging.warning(
                "The moving statistics for keras.BatchNormalization layers in pipelined models "
                "are not properly updated when training. This means that during evaluation or "
                "inference, these batch normalization layers will not necessarily normalize "
                "their input data in a way that is consistent with the distribution of the "
                "data they saw when training."
            )
            return True
    return False


def check_weights_on_one_ipu(records, device_mapping: list[int] | None) -> None:
    """A layer's weights may only be used by stages on one IPU.

    As the original's compiler (poplar/driver/tools/pipeline_util.cc): a variable is an
    input of every stage that uses it, and stages on different IPUs cannot share one; it
    fails with an UnimplementedError that says so.
    """
    stages_of: dict[int, tuple[Any, list[int]]] = {}
    for record in records:
        if record.layer.weights and record.pipeline_stage is not None:
            stages_of.setdefault(id(record.layer), (record.layer, []))[1].append(
                record.pipeline_stage
            )

    def ipu_of(stage: int) -> int:
        return device_mapping[stage] if device_mapping else stage

    for layer, stages in stages_of.values():
        first = stages[0]
        for other in stages[1:]:
            if ipu_of(other) != ipu_of(first):
                raise tf.errors.UnimplementedError(
                    None,
                    None,
                    f"The pipeline stage {other} is trying to use an input (a weight of layer "
                    f"{layer.name!r}) which is already used by the pipeline stage {first}. This "
                    "violates the dataflow constraints because an input can only be used by "
                    "pipeline stages on the same IPU.\nIf the model requires for multiple "
                    "pipeline stages to access the same `tf.Variable` then these pipeline "
                    "stages need to placed onto the same IPU using the `device_mapping` "
                    "argument.",
                )


def summary_lines(model, assignment, line_length: int | None = None) -> list[str]:
    """The lines of `print_pipeline_stage_assignment_summary` (the original's layout: a
    Sequential model's layers and stages; other models' invocations, their input layers one
    per line, and stages; a nested model's assignment under its name)."""
    sequential_kind = kind_of(model) == "sequential"
    width = line_length or (60 if sequential_kind else 89)
    fractions = (0.5, 1.0) if sequential_kind else (0.4, 0.8, 1.0)
    positions = [int(width * f) for f in fractions]
    lines = []

    def row(fields) -> None:
        line = ""
        for index, field in enumerate(fields):
            if index:
                line = line[:-1] + " "
            line = (line + str(field))[: positions[index]]
            line += " " * (positions[index] - len(line))
        lines.append(line)

    def records(assignment) -> None:
        for index, record in enumerate(assignment):
            if record.is_nested_model:
                lines.append(f'Nested Model: "{record.nested_model.name}"')
                lines.append("-" * width)
                records(record.pipeline_stage_assignments)
                continue
            name = f"{record.layer.name} ({type(record.layer).__name__})"
            if sequential_kind:
                row([name, str(record.pipeline_stage)])
            else:
                inputs = [layer.name for layer in tf.nest.flatten(record.inbound_layers)]
                row(
                    [
                        f"{name} ({record.node_index})",
                        inputs[0] if inputs else "",
                        str(record.pipeline_stage),
                    ]
                )
                for other in inputs[1:]:
                    row(["", other, ""])
            last = index == len(assignment) - 1 or assignment[index + 1].is_nested_model
            lines.append(("=" if last else "_") * width)

    lines += [f'Model: "{model.name}"', "_" * width]
    row(
        ["Layer (type)", "Pipeline Stage"]
        if sequential_kind
        else ["Layer (type) (node index)", "Input Layers", "Pipeline Stage"]
    )
    lines.append("=" * width)
    records(assignment)
    return lines


def print_summary(model, assignment, line_length=None, print_fn: Callable | None = None) -> None:
    for line in summary_lines(model, assignment, line_length):
        (print_fn or print)(line)
