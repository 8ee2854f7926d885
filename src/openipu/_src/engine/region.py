"""Compiled regions: the part of a program that runs on an emulated IPU.

A region is what `ipu_compiler.compile` builds, what `IPUStrategy.run` runs
and what every device loop lives in. Its operations are marked for XLA with
TensorFlow's XLA compile context (the mechanism under `xla.compile`, which
the IPU's own compiler interface mirrors), so the whole region becomes one
XLA computation, in TF1 graphs and TF2 functions alike.

Host work that a real IPU hands to its host (fetching infeed elements,
receiving outfeed data) is built *outside* the region with `on_host()`:
host operations feed the region's inputs, and finalizers run after the
region's outputs exist. If, once traced, the region holds operations that
XLA cannot compile (or that run slower under XLA, see `compile_policy`), its
marks are removed and it runs as a plain TensorFlow graph instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator, Sequence

import tensorflow as tf
from tensorflow.compiler.jit.ops import xla_ops
from tensorflow.python.compiler.xla import xla
from tensorflow.python.framework import ops
from tensorflow.python.ops import control_flow_ops, control_flow_util
from tensorflow.python.util import nest

from openipu._src.config.enums import DeviceConnectionType
from openipu._src.engine import (
    autograph_loops,
    compile_policy,
    compiled_program,
    floating_point_checks,
    op_rewrites,
    random_ops,
)
from openipu._src.engine.cost_model import out_of_memory, report_files, tf_workload
from openipu._src.engine.cost_model.workload import Workload
from openipu._src.engine.replicas.layout import ReplicaLayout
from openipu._src.engine.value_types import Nested
from openipu._src.integration import eager_context, region_summaries
from openipu._src.system import configure

_XLA_COMPILE_ATTR = "_xla_compile_id"
logger = logging.getLogger(__name__)
_state = threading.local()


class _RegionContext(xla.XLACompileContext):  # type: ignore[misc]  # TensorFlow is untyped
    """The XLA compile context, remembering the operations it marked."""

    def __init__(self, name: str, pivot: ops.Operation) -> None:
        super().__init__(name=name, pivot=pivot)
        self.marked_ops: list[ops.Operation] = []

    def AddOp(self, op: ops.Operation) -> None:  # noqa: N802 - TensorFlow's interface
        super().AddOp(op)
        self.marked_ops.append(op)


class _PlainContext:
    """Stands in for the XLA compile context when a region is built for graph mode only.

    Built inside the XLA context, control flow stays functional (While, If), which
    TensorFlow's executor runs far slower than the lowered form it otherwise uses;
    a region known to run as a graph is therefore built outside that context.
    """

    def __init__(self, graph: ops.Graph) -> None:
        self.outer_context = graph._get_control_flow_context()  # noqa: SLF001
        self.marked_ops: list[ops.Operation] = []

    def Enter(self) -> None:  # noqa: N802 - the compile context's interface
        pass

    def Exit(self) -> None:  # noqa: N802
        pass

    def ExitResult(self, result: list[tf.Tensor]) -> None:  # noqa: N802
        pass


class CompiledRegion:
    """One region being built: its compile context and its host-side work."""

    def __init__(
        self, graph: ops.Graph, context: _RegionContext | _PlainContext, device: str | None
    ) -> None:
        self.graph = graph
        self.context = context
        self.device = device
        self.built_on_host: set[ops.Operation] = set()  # by `on_host`: not the region's
        self.mode: compile_policy.CompileMode | None = None
        self.graph_mode_reasons: list[str] = []
        #: Floating-point exceptions its ops check for (`floating_point_checks`).
        self.fp_bits: frozenset[str] = frozenset()
        # Half-precision overflows saturate, as on the chip without `nanoo`.
        self.saturates_half = False
        self.ipu_ordinal = 0
        #: A pipeline built in the region: (schedule name, gradient accumulation count,
        #: whether its optimizer state is offloaded to streaming memory).
        self.pipeline: tuple[str, int, bool] | None = None
        self._finalizers: list[
            Callable[[list[tf.Tensor | ops.Operation]], list[ops.Operation]]
        ] = []

    @contextlib.contextmanager
    def on_host(self) -> Iterator[None]:
        """Builds the enclosed operations outside the region, on the host."""
        saved = self.graph._get_control_flow_context()  # noqa: SLF001
        self.graph._set_control_flow_context(self.context.outer_context)  # noqa: SLF001
        first = len(self.graph.get_operations())
        try:
            # The region's graph even from a function nested in it (a loop body).
            with (
                self.graph.as_default(),
                ops.control_dependencies(None),
                ops.device("/device:CPU:0"),
            ):
                yield
        finally:
            self.graph._set_control_flow_context(saved)  # noqa: SLF001
            self.built_on_host.update(self.graph.get_operations()[first:])

    def move_to_host(self, op: ops.Operation, host_inputs: list[tf.Tensor]) -> None:
        """Moves an op the region does not use out of it, fed by host values instead.

        For ops that XLA could not compile (a range of a length known only at run time).
        """
        for index, tensor in enumerate(host_inputs):
            op._update_input(index, tensor)  # noqa: SLF001 - no public way to rewire an op
        if op in self.context.marked_ops:
            self.context.marked_ops.remove(op)
            _unmark_op(op)

    def require_graph_mode(self, reason: str) -> None:
        """Makes the region run as a plain graph (something in it must run on the host)."""
        self.graph_mode_reasons.append(reason)

    def add_finalizer(
        self, finalizer: Callable[[list[tf.Tensor | ops.Operation]], list[ops.Operation]]
    ) -> None:
        """`finalizer(region_outputs)` builds host operations that run after the region."""
        self._finalizers.append(finalizer)


def current_region() -> CompiledRegion | None:
    """The region being built in the current graph (or a graph nested in it)."""
    stack: list[CompiledRegion] = getattr(_state, "regions", [])
    if not stack:
        return None
    graph = ops.get_default_graph()
    region = stack[-1]
    while graph is not None:
        if graph is region.graph:
            return region
        graph = getattr(graph, "outer_graph", None)
    return None


def in_region_top_level() -> bool:
    """Whether ops built now land directly in the region graph (not in a nested function)."""
    region = current_region()
    return region is not None and ops.get_default_graph() is region.graph


def compile_region(
    computation: Callable[..., Nested],
    inputs: list[Nested] | tuple[Nested, ...] | None = None,
    device: str | None = None,
    *,
    ipu_ordinal: int = 0,
    flat_return_rules: bool = True,
    mode: compile_policy.CompileMode | None = None,
    on_mode: Callable[[compile_policy.CompileMode, Workload | None, bool], None] | None = None,
    record_as: str | None = None,
    replicas: int = 1,
    ipus_per_replica: int = 1,
    layout: ReplicaLayout | None = None,
) -> Nested:
    """Builds `computation(*inputs)` as one compiled region and returns its outputs.

    With `flat_return_rules` the return value follows `ipu_compiler.compile`:
    a list/tuple of tensors followed by operations, None or a single value
    becomes a tuple, and operation-only outputs become one NoOp.

    `mode` forces XLA or graph (XLA only if the region can compile);
    `on_mode(mode, workload, xla_capable)` learns which one the region got, what it does
    (for the cost model; its caller checks that it fits), and whether it would get XLA if
    it asked for nothing (a graph on request that could move to XLA). Without `on_mode` the region's
    decisions are recorded (`compiled_program.record`) under the name `record_as` (its
    cluster's by default) with `replicas` replicas of `ipus_per_replica` IPUs, or as
    `layout` says once the region is built (a replicated program decides while building).
    """
    if inputs is None:
        inputs = []
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"inputs must be a list or tuple of values, got {type(inputs).__name__}")
    connection = device_connection_type()
    if connection is DeviceConnectionType.NEVER:
        # The original's executable refuses to run with InvalidArgument
        # (poplar_executable.cc); here when the program is built (in TF1, before its run).
        raise tf.errors.InvalidArgumentError(
            None,
            None,
            "Trying to run an executable on a device that was configured for compilation "
            "only (device_connection.type = NEVER). Use ALWAYS or ON_DEMAND to run it.",
        )
    if tf.executing_eagerly() and connection is not DeviceConnectionType.PRE_COMPILE:
        return tf.function(
            lambda: compile_region(
                computation,
                inputs,
                device,
                ipu_ordinal=ipu_ordinal,
                flat_return_rules=flat_return_rules,
                mode=mode,
                on_mode=on_mode,
                record_as=record_as,
                replicas=replicas,
                ipus_per_replica=ipus_per_replica,
                layout=layout,
            ),
            autograph=False,
        )()
    eager_context.repair()  # TF1 programs after disable_eager_execution (see the module)
    if connection is DeviceConnectionType.PRE_COMPILE:
        return _precompiled_outputs(
            computation,
            inputs,
            flat_return_rules,
            _Record(
                record_as or "ipu_precompiled",
                device,
                ipu_ordinal,
                replicas,
                ipus_per_replica,
                layout,
            ),
        )
    if current_region() is not None:
        # Regions do not nest: an inner compile is part of the outer region.
        return _call_inside_region(computation, inputs, flat_return_rules)

    graph = ops.get_default_graph()
    name = graph.unique_name("ipu_cluster")
    with ops.device(device) if device else contextlib.nullcontext():
        pivot = control_flow_ops.no_op(name=name + "/pivot")
        if control_flow_util.GraphOrParentsInXlaContext(graph):
            # Inside a function TensorFlow compiles whole (`tf.function(jit_compile=True)`
            # around `strategy.run`): XLA takes the region with its function, unmarked.
            mode = compile_policy.CompileMode.GRAPH
            fp_bits: frozenset[str] = frozenset()  # its checks could not compile
        else:
            fp_bits = (
                floating_point_checks.configured_bits() | floating_point_checks.requested_bits()
            )
            if fp_bits:
                mode = compile_policy.CompileMode.GRAPH  # the checks run on the host
        graph_only = compile_policy.CompileMode.GRAPH in (mode, compile_policy.forced_mode())
        context = _PlainContext(graph) if graph_only else _RegionContext(name, pivot)
        region = CompiledRegion(graph, context, device)
        region.fp_bits, region.ipu_ordinal = fp_bits, ipu_ordinal
        region.saturates_half = floating_point_checks.saturates_half()
        stack = _state.__dict__.setdefault("regions", [])
        stack.append(region)
        first_op = len(graph.get_operations())
        context.Enter()
        try:
            flat_inputs = [tf.identity(x, name=f"input_{i}") for i, x in enumerate(_flat(inputs))]
            region_inputs = nest.pack_sequence_as(inputs, flat_inputs)
            with (
                region_summaries.summaries_skipped(),  # summaries cannot compile
                random_ops.seeded_from_device(ipu_ordinal),
                autograph_loops.fusing_iterator_loops(region),
                floating_point_checks.checking(fp_bits, ipu_ordinal, region.saturates_half),
                op_rewrites.rewriting(),  # as the IPU computes
            ):
                outputs = computation(*region_inputs)
            tensors, operations, structure = _split_outputs(outputs, flat_return_rules)
            tensors = [tf.identity(t) for t in tensors]
            # Depending on this op runs the region even when it returns no tensor.
            operations.append(control_flow_ops.no_op(name="done"))
            region.mode = (
                compile_policy.CompileMode.GRAPH
                if region.graph_mode_reasons
                else compile_policy.choose_mode(graph, context.marked_ops, requested=mode)
            )
            if layout is not None:
                replicas, ipus_per_replica = layout.replicas, layout.ipus_per_replica
            workload = _workload(graph, first_op, device, ipu_ordinal, ipus_per_replica)
            if workload is not None and region.pipeline is not None:
                schedule, accumulation, offloaded = region.pipeline
                workload = dataclasses.replace(
                    workload,
                    pipeline_schedule=schedule,
                    gradient_accumulation_count=accumulation,
                    offload_optimizer_state=offloaded,
                )
            if on_mode is not None:
                xla_capable = region.mode is compile_policy.CompileMode.XLA or (
                    graph_only
                    and not fp_bits
                    and not region.graph_mode_reasons
                    and compile_policy.would_choose_xla(graph, graph.get_operations()[first_op:])
                )
                on_mode(region.mode, workload, xla_capable)
            else:
                # The region's decisions, unless its caller records its own (LoopProgram).
                compiled = compiled_program.record(
                    compiled_program.CompiledProgram(
                        name=record_as or name,
                        executor=region.mode,
                        host_device=device or "",
                        ipu_ordinal=ipu_ordinal,
                        replicas=replicas,
                        ipus_per_replica=ipus_per_replica,
                        steps_per_call=1,  # loops inside are the computation's own
                        step_schedule=compiled_program.StepSchedule.LOOP,
                        workload=workload,
                    )
                )
                check_fits(compiled, record_as or name)
            logger.debug(
                "Region %s runs as %s (%s)",
                name,
                region.mode.value,
                region.graph_mode_reasons
                or sorted(compile_policy.unsupported_by_xla(graph, context.marked_ops)),
            )
            context.ExitResult(tensors)
        finally:
            context.Exit()
            stack.pop()

        if region.mode is compile_policy.CompileMode.XLA:
            tensors = [
                xla_ops.xla_cluster_output(t, name=f"output{i}") for i, t in enumerate(tensors)
            ]
            # XlaClusterOutput nodes must not carry control edges: host work hangs off copies.
            tensors = [tf.identity(t) for t in tensors]
        else:
            _unmark(context)
            # The original compiles the whole computation (xla.compile), so its side effects
            # run whatever it returns; a graph runs only what its outputs need.
            operations += _side_effects(region, first_op)
        region_outputs = tensors + operations
        host_after = [op for finalize in region._finalizers for op in finalize(region_outputs)]  # noqa: SLF001
        return _pack_outputs(tensors, operations + host_after, structure, name)


def _side_effects(region: CompiledRegion, first_op: int) -> list[ops.Operation]:
    """The region's operations that only have effects (stateful, without outputs: variable
    updates, prints) at its own control-flow level; not the initializers of the variables
    it made, nor what it built on the host."""
    graph = region.graph
    initializers = {
        variable.initializer
        for key in (ops.GraphKeys.GLOBAL_VARIABLES, ops.GraphKeys.LOCAL_VARIABLES)
        for variable in graph.get_collection(key)
        if getattr(variable, "initializer", None) is not None
    }
    # A region built in its compile context holds its ops there (even when it then runs
    # as a graph); one built for graph mode only, in the enclosing context.
    context = region.context
    level = context if isinstance(context, _RegionContext) else context.outer_context
    return [
        op
        for op in graph.get_operations()[first_op:]
        if not op.outputs
        and op._is_stateful  # noqa: SLF001 - TensorFlow's own flag
        and op._get_control_flow_context() is level  # noqa: SLF001
        and op not in initializers
        and op not in region.built_on_host
    ]


def _call_inside_region(
    computation: Callable[..., Nested], inputs: Sequence[Nested], flat_return_rules: bool
) -> Nested:
    outputs = computation(*inputs)
    tensors, operations, structure = _split_outputs(outputs, flat_return_rules)
    return _pack_outputs(tensors, operations, structure, "ipu_nested")


def _flat(inputs: Nested) -> list[tf.Tensor]:
    return [ops.convert_to_tensor(x) for x in nest.flatten(inputs)]


_FLAT = object()  # marks outputs returned as a flat list (the compile return rules)


def _split_outputs(
    outputs: Nested, flat_return_rules: bool
) -> tuple[list[tf.Tensor], list[ops.Operation], Nested]:
    """Tensors, operations, and how to pack the tensors back (`_FLAT`: as a list)."""
    if flat_return_rules and xla.is_flat(outputs):
        if outputs is None:
            outputs = ()
        if not isinstance(outputs, (list, tuple)):
            outputs = (outputs,)
        items = list(outputs)
        converted = [o if isinstance(o, ops.Operation) else ops.convert_to_tensor(o) for o in items]
        tensors = [o for o in converted if not isinstance(o, ops.Operation)]
        operations = [o for o in converted if isinstance(o, ops.Operation)]
        if converted != tensors + operations:
            raise ValueError(
                "The computation must return zero or more tensors followed by zero or more "
                "operations; a tensor came after an operation"
            )
        return tensors, operations, _FLAT
    if isinstance(outputs, ops.Operation):
        return [], [outputs], None
    flat = nest.flatten(outputs)
    # An operation anywhere in the structure (`train_op, loss = strategy.run(step)` in a
    # TF1 program, as tf.distribute allows) comes back as one that runs with the region.
    operations = [o for o in flat if isinstance(o, ops.Operation)]
    tensors = [
        ops.convert_to_tensor(o) for o in flat if o is not None and not isinstance(o, ops.Operation)
    ]
    return tensors, operations, outputs


def _pack_outputs(
    tensors: list[tf.Tensor], operations: list[ops.Operation], structure: Nested, name: str
) -> Nested:
    nested_operations = structure is not _FLAT and _has_operation(structure)
    if not tensors and not nested_operations and (structure is _FLAT or not tf.inside_function()):
        return control_flow_ops.group(operations, name=name + "/output")
    with ops.control_dependencies(operations):
        tensors = [tf.identity(t, name=f"output_{i}") for i, t in enumerate(tensors)]
    if structure is _FLAT:
        return tensors
    if not tensors and not nested_operations:
        # Only None values: the structure comes back as it was, after the operations ran.
        return structure
    flat = nest.flatten(structure)
    done = None
    if nested_operations:
        done = control_flow_ops.group(*operations, *tensors, name=name + "/output_op")
    remaining = iter(tensors)
    return nest.pack_sequence_as(
        structure,
        [
            None if o is None else done if isinstance(o, ops.Operation) else next(remaining)
            for o in flat
        ],
    )


def _has_operation(structure: Nested) -> bool:
    return any(isinstance(o, ops.Operation) for o in nest.flatten(structure))


def _unmark(context: _RegionContext | _PlainContext) -> None:
    """Turns a traced region into plain graph operations (it will not go to XLA)."""
    for op in context.marked_ops:
        _unmark_op(op)


def _unmark_op(op: ops.Operation) -> None:
    op._clear_attr(_XLA_COMPILE_ATTR)  # noqa: SLF001
    op.graph._unfetchable_ops.discard(op)  # noqa: SLF001
    for tensor in op.outputs:
        op.graph._unfeedable_tensors.discard(tensor)  # noqa: SLF001


def device_connection_type() -> DeviceConnectionType | None:
    system = configure.maybe_current_system()
    return None if system is None else system.config.device_connection.type


@dataclasses.dataclass(frozen=True)
class _Record:
    """How a program compiled without a region is recorded (name, device, replicas)."""

    name: str
    device: str | None
    ipu_ordinal: int
    replicas: int
    ipus_per_replica: int
    layout: ReplicaLayout | None = None

    def as_built(self) -> _Record:
        """The record once the program is built (its replicas decided by then)."""
        if self.layout is None:
            return self
        return dataclasses.replace(
            self, replicas=self.layout.replicas, ipus_per_replica=self.layout.ipus_per_replica
        )


@contextlib.contextmanager
def _precompiled_region(record: _Record) -> Iterator[None]:
    """The pre-compiled program is a region while it is built: what builds its own region
    when none encloses it (a device loop, a nested compile) takes part in this one."""
    graph = ops.get_default_graph()
    region = CompiledRegion(graph, _PlainContext(graph), record.device)
    region.ipu_ordinal = record.ipu_ordinal
    stack = _state.__dict__.setdefault("regions", [])
    stack.append(region)
    try:
        yield
    finally:
        stack.pop()


def _precompiled_outputs(
    computation: Callable[..., Nested],
    inputs: Sequence[Nested],
    flat_return_rules: bool,
    record: _Record,
) -> Nested:
    """PRE_COMPILE: the program is built (and checked) but never runs; outputs are zeros.

    In a TF2 function the program is traced as a function that nothing calls; in a
    TF1 graph it is built but nothing depends on it, so a session never runs it. As the
    original's pre-compilation, it is compiled for the chip: the cost model estimates it
    (and a program that does not fit fails here), which is how profiles are made without
    an IPU.
    """
    if tf.executing_eagerly() or tf.inside_function():

        def traced() -> Nested:
            with _precompiled_region(record):
                outputs = computation(*inputs)
            # A function returns no operations (its own run in it): they come back as None.
            return nest.map_structure(
                lambda o: None if isinstance(o, ops.Operation) else o, outputs
            )

        concrete = tf.function(traced, autograph=False).get_concrete_function()
        outputs = concrete.structured_outputs
        graph, first_op = concrete.graph, 0
    else:
        graph = ops.get_default_graph()
        first_op = len(graph.get_operations())
        with _precompiled_region(record):
            outputs = computation(*inputs)
    record = record.as_built()
    workload = _workload(
        graph, first_op, record.device, record.ipu_ordinal, record.ipus_per_replica
    )
    compiled = compiled_program.record(
        compiled_program.CompiledProgram(
            name=record.name,
            executor=compile_policy.CompileMode.XLA,
            host_device=record.device or "",
            ipu_ordinal=record.ipu_ordinal,
            replicas=record.replicas,
            ipus_per_replica=record.ipus_per_replica,
            steps_per_call=1,
            step_schedule=compiled_program.StepSchedule.LOOP,
            workload=workload,
        )
    )
    check_fits(compiled, record.name)
    zeros = nest.map_structure(
        lambda t: tf.zeros(t.shape, t.dtype) if isinstance(t, tf.Tensor) else None,
        outputs,
    )
    tensors, operations, structure = _split_outputs(zeros, flat_return_rules)
    return _pack_outputs(tensors, [], structure, "ipu_precompiled")


def _workload(
    graph: ops.Graph, first_op: int, device: str | None, ipu_ordinal: int, ipus_per_replica: int
) -> Workload | None:
    """What the region's operations (those built since `first_op`) do, for the cost model.

    An operation's IPU is read from its host device: the configured device's IPUs (pipeline
    stages, shards), or the region's one device where no system is configured (PopART).
    """
    system = configure.maybe_current_system()
    if system is not None and ipu_ordinal < len(system.devices):
        ipu_device = system.device(ipu_ordinal)
        per_replica = max(1, min(ipus_per_replica, ipu_device.num_ipus))
        hosts = [ipu_device.host_device(i) for i in range(per_replica)]
    else:
        per_replica, hosts = 1, [device or "/device:CPU:0"]
    try:
        return tf_workload.from_operations(
            graph.get_operations()[first_op:],
            tf_workload.ipu_of_host_devices(hosts),
            ipus_per_replica=per_replica,
        )
    except Exception as error:  # noqa: BLE001 - the estimate must never stop a program
        logger.warning("No cost estimate for a compiled program: reading it failed (%s)", error)
        return None


def check_fits(compiled: compiled_program.CompiledProgram, name: str) -> None:
    """After a compile: fails it, as the hardware would, if the program does not fit in
    memory, and writes its cost report where one is asked for (`cost_model.report_files`)."""
    try:
        estimate = compiled.cost()
    except Exception as error:  # noqa: BLE001 - the estimate must never stop a program
        logger.warning("No cost estimate for %s: the cost model failed (%s)", name, error)
        return
    if estimate is None:
        return
    directory = report_files.requested_directory()
    if directory is not None:
        report_files.write_cost_json(estimate.to_report(compiled.to_dict()), directory)
    out_of_memory.check(estimate, name)
