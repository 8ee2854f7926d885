"""Pipeline stages of Keras models: `PipelineStage`, assignment records, validation.

A pipelined model's layers are split into stages, each on its own IPU. The
stages change where computation happens, not what is computed: a pipelined
model trains like the same model with gradient accumulation over the
pipeline depth. openipu keeps the assignment, validates it as the original
does (every layer invocation assigned, stages in data-flow order, a device
for every stage), and feeds it to the cost model; the compiled program of a
replica holds all its stages.

Stages come from `tf.keras.ipu.PipelineStage(n)` contexts around layer calls
(recorded on the functional graph's nodes, or on invocations traced from a
subclassed model's `call`), or from `set_pipeline_stage_assignment`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf
import tf_keras
from tensorflow.python.platform import tf_logging
from tf_keras.src.engine import functional, sequential

from openipu._src.integration import keras_internals, keras_layer_call, keras_node_init

_state = threading.local()


def current_stage() -> int | None:
    stack = getattr(_state, "stages", [])
    return stack[-1] if stack else None


class PipelineStage:
    """Context manager: layers called inside it are assigned to pipeline stage `stage`."""

    def __init__(self, stage: int) -> None:
        if isinstance(stage, bool) or not isinstance(stage, int) or stage < 0:
            raise ValueError(f"PipelineStage: the stage must be an int >= 0, got {stage!r}")
        self._stage = stage

    @property
    def stage(self) -> int:
        return self._stage

    def __enter__(self) -> PipelineStage:
        _install_node_recorder()
        _state.__dict__.setdefault("stages", []).append(self._stage)
        return self

    def __exit__(self, *exc_info) -> None:
        _state.stages.pop()


def _install_node_recorder() -> None:
    """Makes functional-graph nodes remember the stage they were created in."""
    keras_node_init.install(_record_stage)


def _record_stage(node) -> None:
    node._ipu_pipeline_stage = current_stage()


# Assignment records -------------------------------------------------------------------------


class _PipelineStageAssignment:
    """One layer invocation and the pipeline stage it runs in (None: not assigned)."""

    def __init__(self, layer, pipeline_stage: int | None = None) -> None:
        self._layer = layer
        self.pipeline_stage = pipeline_stage

    @property
    def layer(self):
        return self._layer

    @property
    def pipeline_stage(self) -> int | None:
        return self._pipeline_stage

    @pipeline_stage.setter
    def pipeline_stage(self, value: int | None) -> None:
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise ValueError(
                f"The pipeline stage of {self._layer.name!r} must be an int >= 0, got {value!r}"
            )
        self._pipeline_stage = value

    def _key(self):
        return (id(self._layer),)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(layer={self._layer.name!r}, pipeline_stage={self.pipeline_stage})"


class SequentialLayerPipelineStageAssignment(_PipelineStageAssignment):
    """A layer of a Sequential model and its pipeline stage."""

    @property
    def inbound_layers(self) -> list:
        nodes = keras_internals.inbound_nodes(self._layer)
        if not nodes:
            return []
        inbound = nodes[0].inbound_layers
        return inbound if isinstance(inbound, list) else [inbound]


class FunctionalLayerPipelineStageAssignment(_PipelineStageAssignment):
    """An invocation (node) of a layer in a functional model and its pipeline stage."""

    def __init__(self, layer, node_index: int, pipeline_stage: int | None = None) -> None:
        super().__init__(layer, pipeline_stage)
        self._node_index = node_index

    @property
    def node_index(self) -> int:
        return self._node_index

    @property
    def inbound_layers(self) -> list:
        inbound = keras_internals.inbound_nodes(self._layer)[self._node_index].inbound_layers
        return inbound if isinstance(inbound, list) else [inbound]

    def _key(self):
        return (id(self._layer), self._node_index)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(layer={self._layer.name!r}, node_index={self._node_index}, "
            f"pipeline_stage={self.pipeline_stage})"
        )


class FunctionalNestedModelPipelineStageAssignment(FunctionalLayerPipelineStageAssignment):
    """An invocation of a nested model inside a functional model and its pipeline stage."""

    @property
    def nested_model(self):
        return self._layer


class ModelLayerPipelineStageAssignment(_PipelineStageAssignment):
    """An invocation of a layer in a subclassed model's `call` and its pipeline stage."""

    def __init__(self, layer, invocation_index: int, pipeline_stage: int | None = None) -> None:
        super().__init__(layer, pipeline_stage)
        self._invocation_index = invocation_index

    @property
    def node_index(self) -> int:
        return self._invocation_index

    @property
    def inbound_layers(self) -> list:
        return []

    def _key(self):
        return (id(self._layer), self._invocation_index)


class NestedModelPipelineStageAssignment(ModelLayerPipelineStageAssignment):
    """An invocation of a nested model in a subclassed model's `call` and its pipeline stage."""

    @property
    def nested_model(self):
        return self._layer


# Building and checking assignments -----------------------------------------------------------


def default_assignment(model) -> list[_PipelineStageAssignment]:
    """The model's layer invocations, with the stages their PipelineStage contexts gave."""
    if isinstance(model, sequential.Sequential):
        return [
            SequentialLayerPipelineStageAssignment(layer, _stage_of_layer(layer))
            for layer in model.layers
        ]
    if isinstance(model, functional.Functional):
        return _functional_assignment(model)
    return _subclassed_assignment(model)


def _stage_of_layer(layer) -> int | None:
    stages = {getattr(n, "_ipu_pipeline_stage", None) for n in keras_internals.inbound_nodes(layer)}
    stages.discard(None)
    return stages.pop() if len(stages) == 1 else None


def _functional_assignment(model) -> list[_PipelineStageAssignment]:
    records: list[_PipelineStageAssignment] = []
    nodes_by_depth = keras_internals.nodes_by_depth(model)
    for depth in sorted(nodes_by_depth, reverse=True):  # topological order
        for node in nodes_by_depth[depth]:
            layer = node.layer
            if isinstance(layer, tf_keras.layers.InputLayer):
                continue
            node_index = keras_internals.inbound_nodes(layer).index(node)
            record_class = (
                FunctionalNestedModelPipelineStageAssignment
                if isinstance(layer, tf_keras.Model)
                else FunctionalLayerPipelineStageAssignment
            )
            records.append(
                record_class(layer, node_index, getattr(node, "_ipu_pipeline_stage", None))
            )
    return records


def _subclassed_assignment(model) -> list[_PipelineStageAssignment]:
    """Traces the model's `call` once to list its layer invocations (the model must be built)."""
    if not model.built:
        raise ValueError(
            f"Model {model.name!r} must be built (called on data, or `build(input_shape)`) before "
            "its pipeline stage assignment can be read"
        )
    invocations = trace_layer_invocations(model)
    counts: dict[int, int] = {}
    records: list[_PipelineStageAssignment] = []
    for layer, stage in invocations:
        index = counts.get(id(layer), 0)
        counts[id(layer)] = index + 1
        record_class = (
            NestedModelPipelineStageAssignment
            if isinstance(layer, tf_keras.Model)
            else ModelLayerPipelineStageAssignment
        )
        records.append(record_class(layer, index, stage))
    return records


def trace_layer_invocations(model) -> list[tuple[object, int | None]]:
    """The (layer, stage) of each direct sublayer call in one symbolic run of `model.call`."""
    import tensorflow as tf

    invocations: list[tuple[object, int | None]] = []
    direct = {id(layer) for layer in model.layers}
    depth = {"value": 0}

    def recording_call(stock_call, layer, *args, **kwargs):
        if id(layer) in direct and depth["value"] == 0:
            invocations.append((layer, current_stage()))
        depth["value"] += id(layer) in direct
        try:
            return stock_call(layer, *args, **kwargs)
        finally:
            depth["value"] -= id(layer) in direct

    inputs = _traced_inputs(model)
    with keras_layer_call.intercepted(recording_call):
        # Through `__call__`, not `call`: a model whose `call` adds metrics or losses needs
        # Keras's call context (the next real call clears the traced losses).
        concrete = tf.function(lambda x: model(x)).get_concrete_function(inputs)
        del concrete
    return invocations


def _traced_inputs(model):
    """Specs of the inputs the model was last called on (their dtypes), else float32 ones of
    its build input shape; a batch of 1 where unknown."""
    saved = model.save_spec(dynamic_batch=False)
    if saved is not None:
        args, _ = saved
        if len(args) == 1:
            return tf.nest.map_structure(
                lambda spec: tf.TensorSpec(
                    [1 if d is None else d for d in spec.shape.as_list()], spec.dtype
                ),
                args[0],
            )
    return _input_specs(keras_internals.build_input_shape(model))


def _input_specs(shape):
    """TensorSpecs (batch of 1 where unknown) for a model's recorded build input shape."""
    import tensorflow as tf

    if isinstance(shape, dict):
        return {k: _input_specs(v) for k, v in shape.items()}
    dims = shape.as_list() if isinstance(shape, tf.TensorShape) else shape
    if isinstance(dims, (list, tuple)) and all(isinstance(d, (int, type(None))) for d in dims):
        return tf.TensorSpec([1 if d is None else d for d in dims], tf.float32)
    return type(shape)(_input_specs(s) for s in shape)


def validate(
    model, records: list[_PipelineStageAssignment], device_mapping: list[int] | None
) -> int:
    """Checks an assignment; returns the number of stages."""
    unassigned = [r.layer.name for r in records if r.pipeline_stage is None]
    if unassigned:
        raise ValueError(
            f"Every layer invocation of a pipelined model needs a pipeline stage; "
            f"{', '.join(repr(n) for n in unassigned)} of model {model.name!r} has none. "
            "Use tf.keras.ipu.PipelineStage or set_pipeline_stage_assignment."
        )
    stages = sorted({r.pipeline_stage for r in records if r.pipeline_stage is not None})
    if stages != list(range(len(stages))):
        raise ValueError(
            f"The pipeline stages of model {model.name!r} are {stages}: they must be "
            f"0, 1, ..., {len(stages) - 1} with none missing"
        )
    _check_data_flow_order(model, records)
    if device_mapping is not None and len(device_mapping) < len(stages):
        raise ValueError(
            f"device_mapping {list(device_mapping)} has {len(device_mapping)} entries but model "
            f"{model.name!r} has {len(stages)} pipeline stages: give one IPU per stage"
        )
    return len(stages)


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


def _check_data_flow_order(model, records) -> None:
    if isinstance(model, sequential.Sequential) or not isinstance(model, functional.Functional):
        ordered = [r for r in records]
        for before, after in zip(ordered, ordered[1:], strict=False):
            if after.pipeline_stage < before.pipeline_stage:
                raise ValueError(
                    f"Pipeline stages must follow the data flow: {after.layer.name!r} is in stage "
                    f"{after.pipeline_stage} but comes after {before.layer.name!r} in stage "
                    f"{before.pipeline_stage}"
                )
        return
    stage_of = {r._key(): r.pipeline_stage for r in records}  # noqa: SLF001
    for record in records:
        node = keras_internals.inbound_nodes(record.layer)[record.node_index]
        for parent in node.parent_nodes:
            if isinstance(parent.layer, tf_keras.layers.InputLayer):
                continue
            parent_key = (
                id(parent.layer),
                keras_internals.inbound_nodes(parent.layer).index(parent),
            )
            if stage_of.get(parent_key, 0) > record.pipeline_stage:
                raise ValueError(
                    f"Pipeline stages must follow the data flow: {record.layer.name!r} is in stage "
                    f"{record.pipeline_stage} but takes the output of {parent.layer.name!r} in "
                    f"stage {stage_of[parent_key]}"
                )


def from_user_assignment(model, assignment) -> list[_PipelineStageAssignment]:
    """Records from `set_pipeline_stage_assignment`'s argument (ints or records)."""
    if not isinstance(assignment, (list, tuple)):
        raise TypeError(
            "set_pipeline_stage_assignment takes a list of ints (one per layer invocation) or of "
            f"assignment records, got {type(assignment).__name__}"
        )
    records = default_assignment(model)
    if len(assignment) != len(records):
        raise ValueError(
            f"set_pipeline_stage_assignment got {len(assignment)} entries but model {model.name!r} "
            f"has {len(records)} layer invocations to assign"
        )
    if all(isinstance(a, _PipelineStageAssignment) for a in assignment):
        known = {r._key() for r in records}  # noqa: SLF001
        for given in assignment:
            if given._key() not in known:  # noqa: SLF001
                raise ValueError(
                    f"The assignment record for layer {given.layer.name!r} does not belong to "
                    f"model {model.name!r}"
                )
        return list(assignment)
    for record, stage in zip(records, assignment, strict=True):
        if isinstance(stage, bool) or not isinstance(stage, int):
            raise TypeError(
                f"set_pipeline_stage_assignment: the stage of {record.layer.name!r} must be an "
                f"int, got {stage!r}"
            )
        record.pipeline_stage = stage
    return records


def summary_lines(model, records, line_length: int | None = None) -> list[str]:
    width = line_length or 98
    header = f"{'Layer (type)':<{width // 2}}{'Inbound layers':<{width // 3}}{'Pipeline stage'}"
    lines = [f'Model: "{model.name}"', "_" * width, header, "=" * width]
    for record in records:
        layer = record.layer
        name = f"{layer.name} ({type(layer).__name__})"
        inbound = ", ".join(getattr(l, "name", str(l)) for l in record.inbound_layers)  # noqa: E741
        stage = "-" if record.pipeline_stage is None else str(record.pipeline_stage)
        lines.append(f"{name:<{width // 2}}{inbound:<{width // 3}}{stage}")
    lines.append("=" * width)
    return lines


@contextlib.contextmanager
def no_stage() -> Iterator[None]:
    saved = getattr(_state, "stages", [])
    _state.stages = []
    try:
        yield
    finally:
        _state.stages = saved


def print_summary(model, records, line_length=None, print_fn: Callable | None = None) -> None:
    for line in summary_lines(model, records, line_length):
        (print_fn or print)(line)
