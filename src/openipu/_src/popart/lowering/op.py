"""The base class of op lowerings, their attributes and the per-run context they see."""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import numpy as np
import onnx
import tensorflow as tf
from onnx import AttributeProto, numpy_helper

from openipu._src.popart.errors import InvalidAttributeError, LoweringError

if TYPE_CHECKING:
    from openipu._src.popart.lowering.graph import Body, Lowerer


# One fixed algorithm, so eager kernels and XLA draw the same numbers from the same seed.
RNG_ALGORITHM = "philox"


def decode_attribute(attribute: AttributeProto) -> Any:
    """The Python value of an attribute: str for strings, numpy arrays for tensors."""
    kind = attribute.type
    if kind == AttributeProto.STRING:
        return attribute.s.decode("utf-8", errors="replace")
    if kind == AttributeProto.STRINGS:
        return [item.decode("utf-8", errors="replace") for item in attribute.strings]
    if kind == AttributeProto.TENSOR:
        return numpy_helper.to_array(attribute.t)
    if kind == AttributeProto.TENSORS:
        return [numpy_helper.to_array(item) for item in attribute.tensors]
    if kind == AttributeProto.SPARSE_TENSOR:
        return sparse_to_dense(attribute.sparse_tensor)
    if kind == AttributeProto.INTS:
        return [int(item) for item in attribute.ints]
    if kind == AttributeProto.FLOATS:
        return [float(item) for item in attribute.floats]
    return onnx.helper.get_attribute_value(attribute)


def sparse_to_dense(sparse: onnx.SparseTensorProto) -> np.ndarray:
    values = numpy_helper.to_array(sparse.values)
    indices = numpy_helper.to_array(sparse.indices).astype(np.int64)
    shape = tuple(sparse.dims)
    dense = np.zeros(int(np.prod(shape)), dtype=values.dtype)
    if indices.ndim == 2:  # [nnz, rank] coordinates rather than flat positions
        indices = np.ravel_multi_index(tuple(indices.T), shape)
    dense[indices] = values
    return dense.reshape(shape)


@functools.cache
def onnx_schema(op_type: str, version: int, domain: str) -> onnx.defs.OpSchema | None:
    try:
        return onnx.defs.get_schema(op_type, max_inclusive_version=version, domain=domain)
    except onnx.defs.SchemaError:
        return None


class Attributes(dict):
    """A node's attributes with defaults filled in, readable as ``attrs.name``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass
class RunContext:
    """What one evaluation of a lowered graph knows beyond its tensors."""

    training: bool = False
    seed: tf.Tensor | None = None  # int64 [2]: the base of every stateless random op's seed
    # int64 [2]: with stochastic rounding, the seed float16 results are rounded with
    # (`stochastic_rounding.py`); None rounds to nearest. `tensor_is_half` tells, for the
    # tensors whose type is known, whether it is float16.
    rounding_seed: tf.Tensor | None = None
    tensor_is_half: Mapping[str, bool] | None = None
    fetch: frozenset[str] = field(default_factory=frozenset)
    # The values visible to the op being run: ops with subgraphs evaluate them inside it.
    scope: Any = None
    # Sessions that shard a model: where a top-level op runs (a context such as tf.device
    # that the op is built in; None: where the caller builds it).
    op_scope: Callable[[Op], AbstractContextManager | None] | None = None
    # Ops run for their effect alone (Abort's check): the run's results wait for them, as
    # PopART never prunes an op with side effects.
    side_effects: list[Any] = field(default_factory=list)

    def salted(self, salt: Any) -> RunContext:
        """This context with its seed folded with `salt` (an int or int tensor), for a
        subgraph run that must draw its own random numbers; unseeded draws are fresh anyway."""
        if self.seed is None:
            return self
        folded = tf.random.experimental.stateless_fold_in(
            tf.cast(self.seed, tf.int64), tf.cast(salt, tf.int64), alg=RNG_ALGORITHM
        )
        return replace(self, seed=folded)

    def op_seed(self, op: Op) -> tf.Tensor:
        """A seed for one random op: the run's seed folded with a stable hash of the op."""
        salt = op.salt
        if self.seed is None:
            # No seed was given: draw one, as an unseeded ONNX random op would.
            base = tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int64)
        else:
            base = tf.cast(self.seed, tf.int64)
        return tf.random.experimental.stateless_fold_in(base, salt, alg=RNG_ALGORITHM)


class Op:
    """The lowering of one ONNX node to TensorFlow.

    Subclasses implement ``compute(*inputs)`` (missing optional inputs arrive as None) returning a
    tensor, or a tuple of tensors for ops with several outputs. A Python list is a sequence value.
    Ops that need the run's context (training flag, seeds, subgraphs) override ``run`` instead.
    """

    # Set on the class by register_op; a FunctionOp sets them per node.
    domain: str = ""
    op_type: str = ""
    since_versions: ClassVar[tuple[int, ...]] = ()
    # False when XLA cannot compile the op (strings, data-dependent output shapes, numpy);
    # some ops decide per node, in setup.
    compilable: bool = True
    # True when the op draws random numbers or has side effects: never constant-folded.
    stateful: ClassVar[bool] = False
    # Attribute defaults for domains whose ops have no ONNX schema (ai.graphcore).
    attribute_defaults: ClassVar[dict[str, Any]] = {}
    # Attributes PopART's op reads beyond its ONNX schema (of some opset versions).
    popart_attributes: ClassVar[frozenset[str]] = frozenset()
    # True when each output element depends only on the inputs' elements at its (broadcast)
    # position: the op computes the same in any layout (see `channels_last`).
    elementwise: ClassVar[bool] = False
    # True when `run_channels_last` is worth running even on a channels-first input (the op
    # would transpose it anyway); otherwise only when its input already is channels-last.
    channels_last_always: ClassVar[bool] = False

    def __init__(self, node: onnx.NodeProto, opset_version: int, lowerer: Lowerer) -> None:
        self.node = node
        self.name = node.name or (node.output[0] if node.output else node.op_type)
        self.key = f"{node.op_type}:{node.name}:{','.join(node.output)}"
        # A stable hash of the node: what its random numbers are folded with.
        self.salt = zlib.crc32(self.key.encode("utf-8")) & 0x7FFFFFFF
        self.opset_version = opset_version
        self.lowerer = lowerer
        self.attrs = self._resolve_attributes(node, opset_version)
        self.subgraphs: dict[str, Body] = {
            attribute.name: lowerer.lower_subgraph(attribute.g, owner=self)
            for attribute in node.attribute
            if attribute.type == AttributeProto.GRAPH
        }
        self.setup()

    def setup(self) -> None:
        """Hook: validate attributes and precompute what does not depend on inputs."""

    def _resolve_attributes(self, node: onnx.NodeProto, version: int) -> Attributes:
        schema = onnx_schema(node.op_type, version, node.domain)
        values: dict[str, Any] = dict(self.attribute_defaults)
        if schema is not None:
            for name, spec in schema.attributes.items():
                default = spec.default_value
                values[name] = (
                    decode_attribute(default) if default.type != AttributeProto.UNDEFINED else None
                )
        for attribute in node.attribute:
            if attribute.type == AttributeProto.GRAPH:
                values[attribute.name] = attribute.g
                continue
            # "__"-prefixed attributes are PopART annotations (pipeline stage, recompute...).
            annotation = attribute.name.startswith("__")
            known = attribute.name in schema.attributes if schema is not None else True
            if not (known or annotation or attribute.name in self.popart_attributes):
                self.bad_attribute(attribute.name, "is not an attribute of this op")
            values[attribute.name] = decode_attribute(attribute)
        if schema is not None:
            given = {attribute.name for attribute in node.attribute}
            for name, spec in schema.attributes.items():
                if spec.required and name not in given:
                    self.bad_attribute(name, "is required but missing")
        return Attributes(values)

    def bad_attribute(self, attribute: str, problem: str) -> NoReturn:
        raise InvalidAttributeError(
            f"Node '{self.name}' ({self.op_type or self.node.op_type}): attribute "
            f"'{attribute}' {problem}"
        )

    def error(self, problem: str) -> LoweringError:
        return LoweringError(f"Node '{self.name}' ({self.node.op_type}): {problem}")

    def run(self, context: RunContext, inputs: Sequence[Any]) -> tuple[Any, ...]:
        return as_outputs(self.compute(*inputs))

    # True for an op of an ONNX schema's function body, written for ONNX's semantics where
    # PopART's op differs (see control_flow.Scan).
    onnx_semantics: bool = False

    def link(self, graph_ops: Sequence[Op]) -> None:
        """Called once the op's graph is lowered, with all its ops in order: for an op whose
        lowering depends on others of its graph. Most ops need nothing."""

    def compute(self, *inputs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} implements neither run nor compute")

    def run_channels_last(self, context: RunContext, inputs: Sequence[Any]) -> Any:
        """Like ``run``, with input 0 and output 0 channels-last (N, spatial..., C), for ops of
        images (see `channels_last`); None when this node cannot (it then runs as usual)."""
        return None

    # -- helpers for static (trace-time) values ---------------------------------------------

    def static(self, value: Any, what: str) -> np.ndarray:
        """The value of an input that must be known when the graph is traced."""
        result = static_value(value)
        if result is None:
            raise self.error(f"input '{what}' must be a constant (known when tracing)")
        return result

    def static_ints(self, value: Any, what: str) -> list[int]:
        return [int(item) for item in np.asarray(self.static(value, what)).reshape(-1)]


def as_outputs(result: Any) -> tuple[Any, ...]:
    return result if isinstance(result, tuple) else (result,)


def static_value(value: Any) -> np.ndarray | None:
    """The numpy value of a tensor when it is known without running the graph, else None."""
    if value is None or isinstance(value, list):
        return None
    if isinstance(value, np.ndarray):
        return value
    if not tf.is_symbolic_tensor(value):
        return value.numpy()
    return tf.get_static_value(value)


def static_shape(value: tf.Tensor) -> list[int | None] | None:
    return value.shape.as_list() if value.shape.rank is not None else None
