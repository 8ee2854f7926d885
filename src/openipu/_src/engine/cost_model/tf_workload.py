"""A compiled region's `Workload`, read off its TensorFlow graph when it is compiled.

Operations are read in the order they were built; the bodies of loops are read in
place, repeated by their trip count where the engine knows it (device loops record
theirs as the `_openipu_trip_count` attribute). Variables are the resources the
region reads or updates; an optimizer's slots are told apart from the weights as the
extra resources of `ResourceApply*` updates, gradient accumulators by the engine's
name for them. An operation's IPU is the one its device names (pipeline stages and
shards place their operations); operations without one (gradients) follow the IPU of
their first input.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.framework import ops
from tensorflow.python.ops import handle_data_util

from openipu._src.engine.cost_model import op_flops
from openipu._src.engine.cost_model.workload import Operation, Variable, VariableKind, Workload

TRIP_COUNT_ATTR = "_openipu_trip_count"
_LOOPS = frozenset({"While", "StatelessWhile"})
_CONDS = frozenset({"If", "StatelessIf", "Case", "StatelessCase"})
_CALLS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
_COLLECTIVES = ("CollectiveReduce", "CollectiveGather", "CrossReplica", "NcclAllReduce")
_MAX_OPERATIONS = 200_000  # a bound on very large (unrolled) graphs
# Variables of the emulation, not of the program: the replicas' hidden copies and their
# bookkeeping, the device seed streams; outfeed buffers are host streams on an IPU.
_EMULATION_VARIABLE = re.compile(r"/(replica_[0-9]+|shadow|filled)(:0)?$|ipu_seed_state")
_STREAM_VARIABLE = re.compile(r"_buffer(_[0-9]+)?(:0)?$")
# Ops built under a name scope starting so emulate what the chip does in hardware within
# another operation (stochastic rounding of its results, which `cycles.py` charges as a
# share of fp16 work): they are not operations of the program.
IN_HARDWARE_SCOPE = "in_hardware"


def mark_trip_count(loop_outputs: Iterable[object], count: int) -> None:
    """Records on a loop's While op how many iterations it runs (read by the walk below)."""
    for value in loop_outputs:
        op = getattr(value, "op", None)
        # while_v2 passes its results through Identity ops.
        while op is not None and op.type == "Identity" and op.inputs:
            op = op.inputs[0].op
        if op is not None and op.type in _LOOPS:
            op._set_attr(TRIP_COUNT_ATTR, attr_value_pb2.AttrValue(i=int(count)))  # noqa: SLF001
            return


def _resource_shape(tensor: tf.Tensor) -> tuple[list[int], int]:
    """The shape and byte size of the variable a resource handle names (unknown: [], 0)."""
    try:
        data = handle_data_util.get_resource_handle_data(tensor)
    except (AttributeError, TypeError, ValueError):
        return [], 0
    if data is None or not data.shape_and_type:
        return [], 0
    entry = data.shape_and_type[0]
    if entry.shape.unknown_rank:
        return [], 0
    shape = [max(int(d.size), 1) for d in entry.shape.dim]
    elements = 1
    for d in shape:
        elements *= d
    return shape, elements * tf.as_dtype(entry.dtype).size


def _shapes(tensors: list[tf.Tensor], facts: list[_TensorFacts]) -> list[list[int]]:
    """The shapes the FLOP counts take: a resource's is its variable's."""
    return [
        _resource_shape(t)[0] if f.dtype == tf.resource else f.shape
        for t, f in zip(tensors, facts, strict=True)
    ]


_HALF_TYPES = (tf.float16, tf.bfloat16)


@dataclasses.dataclass(frozen=True)
class _TensorFacts:
    """What the walk reads of a tensor: its name (with the walk's prefix), type, shape
    (unknown dimensions as 1) and bytes."""

    name: str
    dtype: tf.DType
    shape: list[int]
    bytes: int

    @staticmethod
    def of(tensor: tf.Tensor, prefix: str) -> _TensorFacts:
        dtype = tensor.dtype
        static = tensor.shape
        if static.rank is None:
            shape: list[int] = []
        else:
            shape = [d if d is not None and d > 0 else 1 for d in static.as_list()]
        if dtype == tf.resource or dtype == tf.variant or dtype == tf.string:
            size = 0
        else:
            size = int(dtype.size)
            for d in shape:
                size *= d
        return _TensorFacts(prefix + tensor.name, dtype, shape, size)


class _Walk:
    def __init__(self, ipu_of_device: Callable[[str], int | None]) -> None:
        self.ipu_of_device = ipu_of_device
        self.operations: list[Operation] = []
        self.variables: dict[str, Variable] = {}
        self.slots: set[str] = set()
        self.ipu_of_tensor: dict[str, int] = {}
        self.known_variables: dict[int, tf.Variable] = {}
        self.variable_names: dict[str, str] = {}  # handle tensor -> variable name
        self.read_of: dict[str, str] = {}  # value read -> variable name
        self.placed: set[str] = set()
        self.prefix_of_handle = ""
        self.stream_bytes = 0  # outfeed buffers seen (bytes of a whole call)
        self.streams: set[str] = set()

    def graph(self, operations: Iterable[ops.Operation], repeats: int, prefix: str) -> None:
        for op in operations:
            if len(self.operations) >= _MAX_OPERATIONS:
                return
            self.operation(op, repeats, prefix)

    def operation(self, op: ops.Operation, repeats: int, prefix: str) -> None:
        op_name = op.name
        if IN_HARDWARE_SCOPE in op_name and any(
            scope.startswith(IN_HARDWARE_SCOPE) for scope in op_name.split("/")[:-1]
        ):
            return
        # Each tensor's facts read once: every property is a call into TensorFlow's C API.
        op_inputs, op_outputs = list(op.inputs), list(op.outputs)
        inputs = [_TensorFacts.of(t, prefix) for t in op_inputs]
        outputs = [_TensorFacts.of(t, prefix) for t in op_outputs]
        ipu = self._ipu(op, inputs)
        self.prefix_of_handle = prefix
        for tensor, facts in zip(op_inputs, inputs, strict=True):
            if facts.dtype == tf.resource:
                self._variable(tensor, op, ipu)
        op_type = op.type
        if op_type in _LOOPS or op_type in _CONDS or op_type in _CALLS:
            self._nested(op, repeats, prefix, ipu)
        self._place_variables_read(op, inputs, outputs, ipu)
        flops, matmul = op_flops.flops(
            op_type, _shapes(op_inputs, inputs), _shapes(op_outputs, outputs), _equation(op)
        )
        half = any(f.dtype in _HALF_TYPES for f in outputs) or any(
            f.dtype in _HALF_TYPES for f in inputs
        )
        produced = tuple((f.name, f.bytes) for f in outputs)
        for facts in outputs:
            self.ipu_of_tensor[facts.name] = ipu
        input_bytes = sum(f.bytes for f in inputs)
        self.operations.append(
            Operation(
                name=prefix + op_name,
                type=op_type,
                ipu=ipu,
                flops=int(flops),
                matmul=matmul,
                half=half,
                input_bytes=input_bytes,
                output_bytes=sum(b for _, b in produced),
                inputs=tuple(f.name for f in inputs),
                outputs=produced,
                repeats=repeats,
                collective_bytes=input_bytes if op_type.startswith(_COLLECTIVES) else 0,
            )
        )

    def _place_variables_read(
        self,
        op: ops.Operation,
        inputs: list[_TensorFacts],
        outputs: list[_TensorFacts],
        ipu: int,
    ) -> None:
        """A variable lives on the IPU of the first operation using what was read of it.

        Pipelines and shards read their variables with the region's (so on its first IPU's
        host device); the stage that computes with a variable holds it on its IPU.
        """
        if op.type == "ReadVariableOp" and inputs:
            name = self.variable_names.get(inputs[0].name)
            if name is not None:
                self.read_of[outputs[0].name] = name
            return
        for facts in inputs:
            name = self.read_of.get(facts.name)
            if name is not None and name not in self.placed:
                self.placed.add(name)
                variable = self.variables.get(name)
                if variable is not None:
                    self.variables[name] = dataclasses.replace(variable, ipu=ipu)

    def _ipu(self, op: ops.Operation, inputs: list[_TensorFacts]) -> int:
        device = op.device
        ipu = self.ipu_of_device(device) if device else None
        if ipu is not None:
            return ipu
        for facts in inputs:
            known = self.ipu_of_tensor.get(facts.name)
            if known is not None:
                return known
        return 0

    def _variable(self, handle: tf.Tensor, op: ops.Operation, ipu: int) -> None:
        shape, size = _resource_shape(handle)
        if size == 0:
            return
        name = _variable_name(handle, self.known_variables)
        self.variable_names[f"{self.prefix_of_handle}{handle.name}"] = name
        if _EMULATION_VARIABLE.search(name):
            return
        if _STREAM_VARIABLE.search(name):
            if name not in self.streams:
                self.streams.add(name)
                self.stream_bytes += size
            return
        if op.type.startswith("ResourceApply") and op.inputs[0] is not handle:
            self.slots.add(name)
        if name not in self.variables:
            lowered = name.lower()
            if "gradient_accumulat" in lowered:
                kind = VariableKind.ACCUMULATOR
            elif _OPTIMIZER_STATE.search(name):
                kind = VariableKind.OPTIMIZER_STATE
            else:
                kind = VariableKind.WEIGHT
            self.variables[name] = Variable(name, size, kind, ipu)

    def _nested(self, op: ops.Operation, repeats: int, prefix: str, ipu: int) -> None:
        if op.type in _LOOPS:
            try:
                count = int(op.get_attr(TRIP_COUNT_ATTR))
            except ValueError:
                count = 1  # a loop of unknown length: counted once
            names = ["body", "cond"]
            times = [repeats * max(count, 1), repeats * (max(count, 1) + 1)]
        elif op.type in _CONDS:
            # The branch taken is unknown when compiling: the most expensive one is charged.
            names = ["then_branch"] if op.type.endswith("If") else []
            times = [repeats]
        else:
            names, times = ["f"], [repeats]
        for attr, times_run in zip(names, times, strict=True):
            try:
                function_name = op.get_attr(attr).name
            except ValueError:
                continue
            function = op.graph._get_function(function_name)  # noqa: SLF001
            body = getattr(function, "graph", None)
            if body is None:
                continue
            # Inner placeholders stand for the op's inputs: their IPU follows the op's.
            for placeholder in body.inputs:
                self.ipu_of_tensor[f"{prefix}{op.name}/{placeholder.name}"] = ipu
            self.graph(body.get_operations(), times_run, f"{prefix}{op.name}/")

    def workload(self, ipus_per_replica: int, stream_bytes: int, stages: int) -> Workload:
        variables = tuple(
            Variable(v.name, v.bytes, VariableKind.OPTIMIZER_STATE, v.ipu)
            if v.name in self.slots and v.kind is VariableKind.WEIGHT
            else v
            for v in self.variables.values()
        )
        return Workload(
            operations=tuple(self.operations),
            variables=variables,
            ipus_per_replica=ipus_per_replica,
            stream_bytes_per_step=stream_bytes,
            stages=stages,
        )


def _equation(op: ops.Operation) -> str:
    """An Einsum's equation (its FLOPs depend on it), "" for other operations."""
    if op.type != "Einsum":
        return ""
    try:
        return str(op.get_attr("equation").decode())
    except (ValueError, AttributeError):
        return ""


def _variable_name(handle: tf.Tensor, known: dict[int, tf.Variable]) -> str:
    """A stable name for the variable behind a handle, the same in every nested function.

    `known` holds the variables every graph of the region reads (`_variables_read`: the
    graph, its outer graphs and their functions), so the handle's chain of captures ends
    at one of them.
    """
    tensor = handle
    for _ in range(64):  # function nesting depth
        op = getattr(tensor, "op", None)
        if op is not None and op.type == "VarHandleOp":
            try:
                return str(op.get_attr("shared_name").decode() or op.name)
            except ValueError:
                return str(op.name)
        graph = getattr(tensor, "graph", None)
        if graph is None:
            break
        outer = None
        for external, internal in getattr(graph, "captures", ()):
            if internal is tensor:
                outer = external
                break
        if outer is None:
            break
        tensor = outer
    variable = known.get(id(tensor))
    if variable is not None:
        return str(variable.name)
    return str(getattr(tensor, "name", None) or id(tensor))


def _variables_read(graph: ops.Graph) -> dict[int, tf.Variable]:
    """Every variable that `graph`, its outer graphs and its functions read, by handle."""
    found: dict[int, tf.Variable] = {}
    pending = []
    outer: ops.Graph | None = graph
    while outer is not None:
        pending.append(outer)
        outer = getattr(outer, "outer_graph", None)
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for variable in getattr(current, "variables", ()):
            found.setdefault(id(getattr(variable, "handle", None)), variable)
        for function in getattr(current, "_functions", {}).values():
            inner = getattr(function, "graph", None)
            if inner is not None:
                pending.append(inner)
    return found


# Names optimizers give their slots (Keras: "Adam/m/dense/kernel"; TF1: "dense/kernel/Adam_1").
_OPTIMIZER_STATE = re.compile(
    r"(^|/)(m|v|vhat|momentum|velocity|accumulator|moment|ms|mom|rms|mg)(/|:|$)"
    r"|adam|momentum|rmsprop|adagrad|adadelta|adamax|nadam|ftrl|lamb|lars",
    re.IGNORECASE,
)


def from_operations(
    operations: Iterable[ops.Operation],
    ipu_of_device: Callable[[str], int | None],
    ipus_per_replica: int = 1,
    stream_bytes_per_step: int = 0,
    stages: int = 1,
    steps: int = 1,
) -> Workload:
    """The workload of `operations` (a region's, in build order), per step of `steps`."""
    operations = list(operations)
    walk = _Walk(ipu_of_device)
    if operations:
        walk.known_variables = _variables_read(operations[0].graph)
    walk.graph(operations, 1, "")
    streamed = stream_bytes_per_step + walk.stream_bytes // max(steps, 1)
    workload = walk.workload(ipus_per_replica, streamed, stages)
    if steps <= 1:
        return workload
    return per_step(workload, steps)


def per_step(workload: Workload, steps: int) -> Workload:
    """`workload` (of a whole call of `steps` steps) as the cost of one step.

    Steps run in a device loop repeat its body; steps run together (vectorized or
    unrolled) make every operation `steps` times larger or more numerous.
    """
    if steps <= 1:
        return workload
    looped = any(op.repeats >= steps for op in workload.operations)

    def one_step(op: Operation) -> Operation:
        if looped:
            return (
                dataclasses.replace(op, repeats=max(op.repeats // steps, 1))
                if op.repeats >= steps
                else op
            )
        return dataclasses.replace(
            op,
            flops=op.flops // steps,
            input_bytes=op.input_bytes // steps,
            output_bytes=op.output_bytes // steps,
            outputs=tuple((name, size // steps) for name, size in op.outputs),
        )

    return dataclasses.replace(
        workload, operations=tuple(one_step(op) for op in workload.operations)
    )


def ipu_of_host_devices(host_devices: list[str]) -> Callable[[str], int | None]:
    """Maps an op's device to the IPU (of one replica) whose host device it names."""
    canonical = {tf.DeviceSpec.from_string(d).to_string(): i for i, d in enumerate(host_devices)}

    def ipu_of(device: str) -> int | None:
        try:
            spec = tf.DeviceSpec.from_string(device)
        except ValueError:
            return None
        name = tf.DeviceSpec(device_type=spec.device_type, device_index=spec.device_index)
        return canonical.get(name.to_string())

    return ipu_of


def per_replica(workload: Workload, replicas: int) -> Workload:
    """One replica's share of a workload built for `replicas` replicas in one graph.

    The engine builds a program's R replicas into one graph (engine.replicas), so the
    operations read off it are every replica's: each IPU runs 1 / R of them. Variables
    are read once (the replicas' copies are the emulation's), except each replica's own
    gradient accumulators.
    """
    if replicas <= 1:
        return workload

    def share(op: Operation) -> Operation:
        return dataclasses.replace(
            op,
            flops=op.flops // replicas,
            input_bytes=op.input_bytes // replicas,
            output_bytes=op.output_bytes // replicas,
            outputs=tuple((name, size // replicas) for name, size in op.outputs),
        )

    variables = tuple(
        dataclasses.replace(v, bytes=v.bytes // replicas)
        if v.kind is VariableKind.ACCUMULATOR
        else v
        for v in workload.variables
    )
    return dataclasses.replace(
        workload,
        operations=tuple(share(op) for op in workload.operations),
        variables=variables,
    )
