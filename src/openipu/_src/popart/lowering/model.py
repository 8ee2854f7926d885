"""The entry point: an ONNX ModelProto lowered to a pure TensorFlow function."""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import tensorflow as tf

from openipu._src.popart.errors import LoweringError, popart_exception
from openipu._src.popart.lowering.dtypes import ONNX_TO_TF
from openipu._src.popart.lowering.graph import Body, Lowerer
from openipu._src.popart.lowering.op import Op, RunContext

# Importing the op modules registers their lowerings.
from openipu._src.popart.lowering import ops as _ops  # noqa: F401  isort: skip


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output as declared in the model (dims may be None when symbolic)."""

    name: str
    dtype: tf.DType | None
    shape: tuple[int | None, ...] | None
    kind: str  # "tensor", "sequence", "optional", "map", "sparse_tensor" or "unknown"

    @classmethod
    def from_value_info(cls, value: onnx.ValueInfoProto) -> TensorSpec:
        kind = value.type.WhichOneof("value") or "unknown"
        kind = {
            "tensor_type": "tensor",
            "sequence_type": "sequence",
            "optional_type": "optional",
        }.get(kind, kind.removesuffix("_type"))
        dtype = shape = None
        if kind == "tensor":
            dtype = ONNX_TO_TF.get(value.type.tensor_type.elem_type)
            if value.type.tensor_type.HasField("shape"):
                shape = tuple(
                    dim.dim_value if dim.HasField("dim_value") else None
                    for dim in value.type.tensor_type.shape.dim
                )
        return cls(value.name, dtype, shape, kind)


class LoweredGraph:
    """An ONNX model as a TensorFlow function of its inputs and weights.

    ``run`` is pure: the weights (the model's initializers) are arguments, so a caller can keep
    them in ``tf.Variable``s and differentiate through ``run`` with ``tf.GradientTape``. It can be
    traced by ``tf.function``, and compiled with ``jit_compile=True`` when ``compilable``.
    """

    def __init__(self, model: onnx.ModelProto, body: Body) -> None:
        graph = model.graph
        self.model = model
        self._body = body
        self.initializers: dict[str, np.ndarray] = dict(body.constants)
        initializer_names = set(self.initializers)
        self.inputs = [
            TensorSpec.from_value_info(value)
            for value in graph.input
            if value.name not in initializer_names
        ]
        self.outputs = [TensorSpec.from_value_info(value) for value in graph.output]
        self.opsets = {entry.domain or "ai.onnx": entry.version for entry in model.opset_import}
        self.non_compilable_ops = body.non_compilable_ops()
        self.value_types = _value_types(model)

    @property
    def input_names(self) -> list[str]:
        return [spec.name for spec in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [spec.name for spec in self.outputs]

    @property
    def compilable(self) -> bool:
        """Whether XLA can compile ``run`` (no string, data-dependent-shape or numpy ops)."""
        return not self.non_compilable_ops

    def tensor_names(self) -> list[str]:
        """Every tensor ``run`` can fetch: inputs, initializers and every node output."""
        names = [*self.input_names, *self.initializers]
        for op in self._body.ops:
            names.extend(name for name in op.node.output if name)
        return names

    def has_op(self, op_type: str) -> bool:
        """Whether a top-level node of the graph is of `op_type`."""
        return any(op.node.op_type == op_type for op in self._body.ops)

    def run(
        self,
        inputs: Mapping[str, Any],
        weights: Mapping[str, Any] | None = None,
        training: bool = False,
        seed: Any = None,
        fetch: Iterable[str] = (),
        op_scope: Callable[[Op], AbstractContextManager | None] | None = None,
        rounding_seed: Any = None,
        tensor_is_half: Mapping[str, bool] | None = None,
    ) -> dict[str, Any]:
        """Evaluate the graph.

        Args:
            inputs: a value for every graph input (tensors or numpy arrays).
            weights: values for initializers, e.g. ``tf.Variable``s. An initializer left out is
                used as a constant with its value in the model.
            training: selects the training behaviour of Dropout and BatchNormalization.
            seed: an int or int tensor of shape [2] seeding the random ops (stateless, so the
                same seed gives the same numbers, compiled or not); None draws fresh numbers.
            fetch: names of intermediate tensors to return beside the graph outputs.
            op_scope: a context to build each top-level op in, e.g. its device (sharded
                sessions); ops inside subgraphs are built in their parent op's.
            rounding_seed: an int64 [2] seed: float16 results are rounded stochastically
                with it (`stochastic_rounding.py`); None rounds them to nearest.
            tensor_is_half: with `rounding_seed`, whether each tensor of known type is
                float16 (the results of ops with one of unknown type round to nearest).

        Returns:
            The graph outputs and the fetched tensors, by name. Sequences are lists of tensors.
        """
        weights = dict(weights or {})
        fetch = list(fetch)
        unknown = set(weights) - set(self.initializers)
        if unknown:
            raise popart_exception(f"Weights {sorted(unknown)} are not initializers of the model")
        scope: ChainMap = ChainMap()
        for spec in self.inputs:
            if spec.name not in inputs:
                raise popart_exception(
                    f"No value given for input '{spec.name}' (inputs are {self.input_names})"
                )
            scope[spec.name] = _as_value(inputs[spec.name], spec)
        for name, value in weights.items():
            scope[name] = tf.convert_to_tensor(value)
        for name in set(inputs) & set(self.initializers):
            # An initializer listed among the graph inputs is a default the caller may override.
            scope[name] = tf.convert_to_tensor(inputs[name])
        context = RunContext(
            training=training,
            seed=_seed_tensor(seed),
            rounding_seed=_seed_tensor(rounding_seed),
            tensor_is_half=tensor_is_half,
            fetch=frozenset(fetch),
            op_scope=op_scope,
        )
        self._body.evaluate(context, scope)
        results = {}
        for name in [*self.output_names, *fetch]:
            if name not in scope:
                raise popart_exception(
                    f"Cannot fetch '{name}': no tensor of that name in the graph"
                )
            results[name] = scope[name]
        if context.side_effects:
            with tf.control_dependencies(context.side_effects):
                results = {
                    name: tf.identity(value) if isinstance(value, tf.Tensor) else value
                    for name, value in results.items()
                }
        return results

    def __repr__(self) -> str:
        return (
            f"LoweredGraph(inputs={self.input_names}, outputs={self.output_names}, "
            f"initializers={len(self.initializers)}, compilable={self.compilable})"
        )


def lower_model(model: onnx.ModelProto) -> LoweredGraph:
    """Lower an ONNX model to TensorFlow.

    Raises ``UnsupportedOpError`` for a node with no lowering for its (domain, type, opset),
    ``InvalidAttributeError`` for a bad attribute and ``LoweringError`` for a malformed graph,
    all naming the node.
    """
    if not isinstance(model, onnx.ModelProto):
        raise LoweringError(f"lower_model needs an onnx.ModelProto, not {type(model).__name__}")
    opsets = {entry.domain: entry.version for entry in model.opset_import}
    functions = {(function.domain, function.name): function for function in model.functions}
    lowerer = Lowerer(opsets, functions)
    body = lowerer.lower_graph(model.graph)
    return LoweredGraph(model, body)


def _as_value(value: Any, spec: TensorSpec) -> Any:
    if spec.kind == "sequence" and isinstance(value, list | tuple):
        return [tf.convert_to_tensor(item) for item in value]
    if spec.kind == "optional" and value is None:
        return None
    if isinstance(value, list) and spec.kind == "optional":
        return [tf.convert_to_tensor(item) for item in value]
    if isinstance(value, tf.Tensor | tf.Variable):
        return tf.convert_to_tensor(value)
    array = np.asarray(value)
    if spec.dtype is not None and spec.dtype != tf.string and array.dtype == object:
        array = array.astype(spec.dtype.as_numpy_dtype)
    if spec.dtype is not None and array.dtype.kind in "fiub" and spec.dtype != tf.string:
        return tf.constant(array, dtype=spec.dtype)
    return tf.constant(array)


def _seed_tensor(seed: Any) -> tf.Tensor | None:
    if seed is None:
        return None
    seed = tf.cast(tf.convert_to_tensor(seed), tf.int64)
    if seed.shape.rank == 0:
        seed = tf.stack([seed, tf.zeros_like(seed)])
    return tf.reshape(seed, [2])


def _value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """Types of the tensors the model declares (inputs, outputs, value_info)."""
    graph = model.graph
    return {value.name: value.type for value in [*graph.input, *graph.output, *graph.value_info]}
