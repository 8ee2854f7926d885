"""A replicated program's Python traced once: replica 0 builds, the others are copies.

On an IPU the user's function is traced once and Poplar runs R copies of the
compiled program (the original's ipu_strategy.py / ipu_compiler.py trace it once).
Here replica 0 runs the Python; the ops it creates in the program's graph between
two meetings (a *segment*) are recorded, and at the meeting each replica r > 0 gets
a copy of them, built into the same graph, whose inputs are mapped to replica r's:

- an output of a recorded op -> the output of replica r's copy of it;
- an input the caller named per replica (`per_replica_inputs`) -> replica r's;
- a tensor the engine registered (`register`: a variable's handle -> replica r's
  copy of the variable, a replica's seed stream) -> what its builder gives for r;
- a capture of a function graph -> the capture of the mapped outer tensor (the
  enclosing group maps it when this group is nested in a shared device loop);
- anything else (constants, what all replicas share) -> itself.

Engine code whose Python depends on the replica (an outfeed's buffers, the replica
index) runs as a *per-replica call* (`call`): replayed by calling its builder for r.
Then the meeting's combine runs once with every replica's value, as with lock-step
threads, and replica r's share of its result is mapped to replica 0's. So the ops are
created in the order lock-step threads create them and compile into one computation.

TF1 control flow (a v1 `cond` or `while_loop`: Switch/Merge, Enter/Exit frames, and
the gradient loops TF1 builds for them) is copied op by op too: the copies of a frame's
ops are wired as replica 0's, without the frame's Python object (`_create_in_frame`),
inputs and control inputs made after their op are added once copied, and each copy of
a while loop gets a frame name of its own.

What cannot be copied makes the program be built again with one Python trace per
replica (`lockstep.TraceEachReplica`; a TF1 graph's collections are then restored,
`abandoned_build`): engine code that reads the replica index in Python outside a
per-replica call (PopART's builders), and collectives or per-replica engine code inside
a TF1 frame.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, cast

import tensorflow as tf
from tensorflow import autograph
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.framework import func_graph, ops
from tensorflow.python.ops import handle_data_util, variable_scope
from tensorflow.python.util import nest

from openipu._src.engine import random_ops

Builder = Callable[[int, Any], Any]

# Colocation with replica 0's ops; the compile context's mark (it marks the copy itself).
_NOT_COPIED_ATTRS = frozenset({"_class", "_xla_compile_id"})

# The ops that make TF1 frames: their copies are wired as replica 0's, never through
# a frame's Python object (which would add an Enter of its own for their inputs).
_FRAME_OPS = frozenset(
    {
        "Enter",
        "RefEnter",
        "Exit",
        "RefExit",
        "NextIteration",
        "RefNextIteration",
        "LoopCond",
        "Switch",
        "RefSwitch",
        "Merge",
        "RefMerge",
    }
)

# Autograph converts what a converted function calls: the engine's building is plain Python
# (and must not be rewritten while it copies the program).
F = TypeVar("F", bound=Callable[..., Any])


def not_converted(function: F) -> F:
    """`function`, called as it is from functions autograph converts."""
    return cast(F, autograph.experimental.do_not_convert(function))


_not_converted = not_converted


class MeetingInBranch(Exception):
    """Replicas met inside a conditional's branch: it is built for every replica instead."""


@dataclasses.dataclass
class _Call:
    """A per-replica call recorded in replica 0: replayed as `builder(r, inputs_r)`."""

    position: int  # ops in the graph before it
    builder: Builder
    inputs: Any
    outputs: Any
    control: list[ops.Operation]


class TracedOnceGroup:
    """One replicated build traced once: replica 0's recording and every replica's map."""

    def __init__(
        self,
        count: int,
        per_replica_inputs: Sequence[Any] | None,
        parent: TracedOnceGroup | None,
    ) -> None:
        self.count = count
        self.variable_scope = variable_scope.get_variable_scope()
        self.graph = ops.get_default_graph()
        self.parent = parent
        self._top_context = self.graph._get_control_flow_context()  # noqa: SLF001
        # The TF1 while loops around the program (a device loop the replicas share).
        self._shared_frames = set()
        context = self._top_context
        while context is not None:
            if context.IsWhileContext():
                self._shared_frames.add(context.name)
            context = getattr(context, "outer_context", None)
        scope = self.graph.get_name_scope()
        self._scope = f"{scope}/" if scope else ""
        # Per replica r: ref of replica 0's tensor (or its op) -> replica r's.
        self._maps: list[dict[Any, Any]] = [{} for _ in range(count)]
        self._builders: dict[Any, Callable[[int], Any]] = {}
        self._built: list[dict[Any, Any]] = [{} for _ in range(count)]  # of `_builders`
        self._variable_keys: set[Any] = set()  # registered variable handles
        self._captures_made: list[dict[Any, Any]] = [{} for _ in range(count)]
        self._untouched: list[tuple[int, int]] = []
        self._devices: dict[str, Callable[[int], str]] = {}
        self._excluded: list[tuple[int, int]] = []
        self._calls: list[_Call] = []
        self._copying: set[ops.Operation] = set()  # the ops of the segment being copied
        # (copy, input index, replica 0's input, redirected): inputs made after their op.
        self._later_inputs: list[tuple[ops.Operation, int, tf.Tensor, bool]] = []
        self._later_controls: list[tuple[ops.Operation, ops.Operation]] = []
        self._start = self._op_count()
        self.replaying: int | None = None  # the replica whose copy is being built
        self.calling = False  # inside a per-replica call of replica 0
        self.must_trace_each = False  # set when replica 0 read the replica index
        self.count_read = False  # set when engine code read the replica count
        self._met = False  # set at the first meeting (the replicas' copies made)
        self._inputs_given = per_replica_inputs is not None
        self._branches_may_meet = False
        self._captured: dict[int, Any] = {}  # id of a capture placeholder -> outer tensor
        self._captures_seen = -1
        if per_replica_inputs is not None:
            for r in range(1, count):
                self._bind(per_replica_inputs[0], per_replica_inputs[r], r)

    # Recording ------------------------------------------------------------------------

    def _op_count(self) -> int:
        return len(self.graph._nodes_by_id)  # noqa: SLF001

    @_not_converted
    @contextlib.contextmanager
    def unrecorded(self) -> Iterator[None]:
        """Ops built here in replica 0's turn are shared, not copied for the others."""
        start = self._op_count()
        try:
            yield
        finally:
            self._excluded.append((start, self._op_count()))

    @_not_converted
    def call(self, builder: Builder, inputs: Any) -> Any:
        """`builder(0, inputs)` now; `builder(r, inputs_r)` in replica r's copy."""
        self._refuse_in_frame("per-replica Python")
        control = list(self.graph._current_control_dependencies())  # noqa: SLF001
        start = self._op_count()
        self.calling = True
        try:
            outputs = builder(0, inputs)
        finally:
            self.calling = False
        self._excluded.append((start, self._op_count()))
        self._calls.append(_Call(start, builder, inputs, outputs, control))
        return outputs

    @_not_converted
    def register(self, tensor: Any, builder: Callable[[int], Any], variable: bool) -> None:
        """Replica r's counterpart of `tensor` (replica 0's) is `builder(r)`.

        A `variable` handle is mapped only in ops built while variables resolve to the
        replica's copies (not under `variable_copies.variables_untouched`).
        """
        key = _key(tensor)
        self._builders.setdefault(key, builder)
        if variable:
            self._variable_keys.add(key)

    @_not_converted
    @contextlib.contextmanager
    def untouched(self) -> Iterator[None]:
        """Ops built here by replica 0 read the variables themselves, as every replica's do."""
        start = self._op_count()
        try:
            yield
        finally:
            self._untouched.append((start, self._op_count()))

    @_not_converted
    def register_device(self, device: str, builder: Callable[[int], str]) -> None:
        """Replica r's copies of ops placed on `device` (replica 0's) go to `builder(r)`."""
        if device:
            self._devices.setdefault(device, builder)

    @contextlib.contextmanager
    def branches_may_meet(self) -> Iterator[None]:
        """Within, replicas meeting in a function nested in the program (a `tf.cond`'s
        branch) raise `MeetingInBranch`: the conditional is then built for every replica
        (`shared_cond`)."""
        previous = self._branches_may_meet
        self._branches_may_meet = True
        try:
            yield
        finally:
            self._branches_may_meet = previous

    # The replica count ---------------------------------------------------------------

    def may_shrink(self) -> bool:
        """Whether nothing built so far depends on the replica count."""
        return (
            self.parent is None
            and self.replaying is None
            and not self.calling
            and not self.count_read
            and not self._met
            and not self._inputs_given
        )

    def shrink(self, count: int) -> None:
        """From now on the program has `count` replicas (no copy was made yet)."""
        self.count = count
        del self._maps[count:], self._built[count:], self._captures_made[count:]

    # Meetings -------------------------------------------------------------------------

    @_not_converted
    def meet(self, value: Any, combine: Callable[[list[Any]], Sequence[Any]], kind: str) -> Any:
        # import cycle: lockstep imports this module
        from openipu._src.engine.replicas import lockstep

        if ops.get_default_graph() is not self.graph:
            if self._branches_may_meet:
                raise MeetingInBranch(kind)
            raise lockstep.ReplicaDivergenceError(
                f"{kind} was called inside a loop or conditional that is not a device loop: "
                "replicas can only meet at the top level of their program or of a device loop "
                "(ipu.loops.repeat, a pipeline, Keras' steps)"
            )
        self._refuse_in_frame(kind)
        self._met = True
        self.replay_segment()
        values = [value] + [self.mapped(value, r) for r in range(1, self.count)]
        with self.unrecorded():
            results = combine(values)
        if len(results) != self.count:
            raise AssertionError(f"{kind}: combine returned {len(results)} results")
        for r in range(1, self.count):
            self._bind(results[0], results[r], r)
        self._start = self._op_count()
        return results[0]

    @_not_converted
    def finish(self, result: Any) -> list[Any]:
        """Every replica's result, once replica 0's Python has returned `result`."""
        self.replay_segment()
        return [result] + [self.mapped(result, r) for r in range(1, self.count)]

    # Replay ---------------------------------------------------------------------------

    @_not_converted
    def replay_segment(self) -> None:
        """Copies the ops replica 0 built since the last meeting for every other replica."""
        end = self._op_count()
        events = self._segment(self._start, end)
        self._copying = {event[0] for event in events if not isinstance(event, _Call)}
        self._excluded = []
        self._calls = []
        self._untouched = []
        for r in range(1, self.count):
            with self._replaying(r):
                self._later_inputs = []
                self._later_controls = []
                for event in events:
                    if isinstance(event, _Call):
                        self._replay_call(event, r)
                    else:
                        self._copy(*event, r)
                for copy, index, tensor, redirected in self._later_inputs:
                    copy._update_input(index, self.resolve(tensor, r, redirected))  # noqa: SLF001
                for copy, control in self._later_controls:
                    copy._add_control_input(self.resolve_op(control, r))  # noqa: SLF001
        self._start = self._op_count()

    def _segment(self, start: int, end: int) -> list[tuple[ops.Operation, bool] | _Call]:
        # import cycle: lockstep imports this module
        from openipu._src.engine.replicas import lockstep

        built = self.graph.get_operations()[start:end]
        internal = {id(t) for t in getattr(self.graph, "internal_captures", ())}
        excluded = _within(self._excluded, start, end)
        untouched = _within(self._untouched, start, end)
        events: list[tuple[int, int, tuple[ops.Operation, bool] | _Call]] = [
            (call.position, 0, call) for call in self._calls
        ]
        for offset, op in enumerate(built):
            position = start + offset
            if excluded[offset]:
                continue
            if op.type == "Placeholder" and op.outputs and id(op.outputs[0]) in internal:
                continue  # a capture: mapped, not copied
            if op.type in random_ops.REPLACED_OPS and not any(o.consumers() for o in op.outputs):
                continue
            context = op._get_control_flow_context()  # noqa: SLF001
            outside = context is not self._top_context and self._encloses(context)
            if context is not self._top_context and not outside and not self._in_frame(context):
                self.must_trace_each = True
                raise lockstep.TraceEachReplica(
                    f"op {op.name} is in a control flow context the program does not hold"
                )
            redirected = not untouched[offset]
            events.append((position, 1, (op, redirected)))
        events.sort(key=lambda e: (e[0], e[1]))
        return [event for _, _, event in events]

    def _in_frame(self, context: Any) -> bool:
        """Whether `context` is a TF1 control flow frame (a v1 cond or while) of the program."""
        while context is not None:
            context = getattr(context, "outer_context", None)
            if context is self._top_context:
                return True
        return False

    def _refuse_in_frame(self, what: str) -> None:
        """Inside a TF1 cond or while of the program, `what` (built for each replica, or
        combining them, outside the frame) cannot be: one Python trace per replica then."""
        context = self.graph._get_control_flow_context()  # noqa: SLF001
        if context is not self._top_context and self._in_frame(context):
            # import cycle: lockstep imports this module
            from openipu._src.engine.replicas import lockstep

            self.must_trace_each = True
            raise lockstep.TraceEachReplica(f"{what} inside a TF1 control flow frame")

    def _encloses(self, context: Any) -> bool:
        """Whether `context` (an op's control flow context) is outside the program's."""
        outer = self._top_context
        while outer is not None:
            outer = getattr(outer, "outer_context", None)
            if outer is context:
                return True
        return context is None

    @contextlib.contextmanager
    def _replaying(self, replica: int) -> Iterator[None]:
        # import cycle: lockstep imports this module
        from openipu._src.engine.replicas import lockstep

        graph = self.graph
        saved = (
            graph._gradient_override_map,  # noqa: SLF001
            graph._op_to_kernel_label_map,  # noqa: SLF001
            graph._attr_scope_map,  # noqa: SLF001
        )
        graph._gradient_override_map = {}  # noqa: SLF001
        graph._op_to_kernel_label_map = {}  # noqa: SLF001
        graph._attr_scope_map = {}  # noqa: SLF001
        self.replaying = replica
        try:
            with (
                lockstep.replica_scope(lockstep.ReplicaContext(replica, self.count, self)),
                graph.as_default(),
                ops.control_dependencies(None),
                ops.colocate_with(None, ignore_existing=True),
                ops.name_scope(f"{self._scope}replica_{replica}/"),
            ):
                # `control_dependencies(None)` left the control flow context (a region's
                # XLA context marks the copies as it marked replica 0's ops).
                saved_context = graph._get_control_flow_context()  # noqa: SLF001
                graph._set_control_flow_context(self._top_context)  # noqa: SLF001
                try:
                    yield
                finally:
                    graph._set_control_flow_context(saved_context)  # noqa: SLF001
        finally:
            self.replaying = None
            (
                graph._gradient_override_map,  # noqa: SLF001
                graph._op_to_kernel_label_map,  # noqa: SLF001
                graph._attr_scope_map,  # noqa: SLF001
            ) = saved

    def _replay_call(self, call: _Call, r: int) -> None:
        inputs = self.mapped(call.inputs, r)
        control = [self.resolve_op(op, r) for op in call.control]
        with ops.control_dependencies(control):
            outputs = call.builder(r, inputs)
        self._bind(call.outputs, outputs, r)

    def _copy(self, op: ops.Operation, redirected: bool, r: int) -> None:
        graph = self.graph
        inputs = [self.resolve(t, r, redirected) for t in op.inputs]
        # TF1 control flow gives ops inputs made after them (a cond's Switch, a while
        # loop's NextIteration): the copy takes replica 0's until they are copied too.
        later = [
            (index, tensor)
            for index, tensor in enumerate(op.inputs)
            if tensor.op in self._copying and self._maps[r].get(tensor.op) is None
        ]
        name = op.name
        if self._scope and name.startswith(self._scope):
            name = name[len(self._scope) :]
        with graph.name_scope(None):
            unique = graph.unique_name(f"{self._scope}replica_{r}/{name}")
        attrs = {
            key: value for key, value in op.node_def.attr.items() if key not in _NOT_COPIED_ATTRS
        }
        context = op._get_control_flow_context()  # noqa: SLF001
        # Control inputs made after the op (TF1 gradients make a loop's ops wait for
        # later ones) are added once they are copied.
        later_controls = [
            c for c in op.control_inputs if c in self._copying and self._maps[r].get(c) is None
        ]
        controls = [self.resolve_op(c, r) for c in op.control_inputs if c not in later_controls]
        if "frame_name" in attrs:
            frame = op.get_attr("frame_name").decode()
            if frame not in self._shared_frames:
                # The copies of a TF1 while loop of the program are told apart by their
                # frames' names, which is what the runtime and XLA read.
                attrs["frame_name"] = attr_value_pb2.AttrValue(
                    s=f"{self._scope}replica_{r}/{frame}".encode()
                )
        if op.type in _FRAME_OPS or (context is not self._top_context and self._in_frame(context)):
            copy = self._create_in_frame(op, inputs, controls, unique, attrs)
        else:
            # Ops replica 0 built outside the program's context (on the host, outside the
            # compiled region) are copied there too.
            graph._set_control_flow_context(context)  # noqa: SLF001
            try:
                copy = self._create_copy(op, inputs, unique, attrs)
            finally:
                graph._set_control_flow_context(self._top_context)  # noqa: SLF001
            if controls:
                copy._add_control_inputs(controls)  # noqa: SLF001
        device = op.device
        builder = self._devices.get(device)
        copy._set_device(builder(r) if builder is not None else device)  # noqa: SLF001
        for original, copied in zip(op.outputs, copy.outputs, strict=True):
            try:
                copied.set_shape(original.shape)
            except ValueError:
                pass
            if original.dtype in (tf.resource, tf.variant):
                handle_data_util.copy_handle_data(original, copied)
            self._maps[r][_key(original)] = copied
        self._maps[r][op] = copy
        self._later_inputs.extend((copy, index, tensor, redirected) for index, tensor in later)
        self._later_controls.extend((copy, control) for control in later_controls)

    def _create_in_frame(
        self,
        op: ops.Operation,
        inputs: list[Any],
        controls: list[ops.Operation],
        name: str,
        attrs: dict[str, Any],
    ) -> ops.Operation:
        """The copy of an op of a TF1 cond or while frame (replica 0's `op`).

        The frame's Python object knows replica 0's ops: adding the copy to it would
        route the copy's inputs into replica 0's frame. So the copy is made as TensorFlow
        makes ops it imports (no context processing), is given `op`'s context (engine
        code that orders the program, `variable_copies.finish`, reads it), and is marked
        by the program's compile context as inner ops of frames are.
        """
        node_def = ops._NodeDef(op.type, name, attrs)  # noqa: SLF001
        c_op = ops._create_c_op(self.graph, node_def, inputs, controls, op_def=op.op_def)  # noqa: SLF001
        copy = self.graph._create_op_from_tf_operation(c_op, compute_device=False)  # noqa: SLF001
        context = op._get_control_flow_context()  # noqa: SLF001
        copy._set_control_flow_context(context)  # noqa: SLF001
        if self._top_context is not None:
            self._top_context.AddInnerOp(copy)
        # The frames and the program's loop know the copy's outputs as their own values
        # (else a copy of an op outside the frame, its Merge or Exit, would enter them).
        names = [t.name for t in copy.outputs]
        while context is not None:
            context._values.update(names)  # noqa: SLF001
            context = context.outer_context
        return copy

    def _create_copy(
        self, op: ops.Operation, inputs: list[Any], name: str, attrs: dict[str, Any]
    ) -> ops.Operation:
        return self.graph._create_op_internal(  # noqa: SLF001
            op.type,
            inputs,
            [t.dtype for t in op.outputs],
            input_types=[t.dtype for t in op.inputs] if op.inputs else None,
            name=name + "/",
            attrs=attrs,
            op_def=op.op_def,
            compute_device=False,
        )

    # Mapping --------------------------------------------------------------------------

    def _bind(self, ours: Any, theirs: Any, r: int) -> None:
        """Replica r's `theirs` stands for replica 0's `ours` (same structure)."""
        mine = _leaves(ours)
        others = _leaves(theirs)
        for a, b in zip(mine, others, strict=True):
            if isinstance(a, (tf.Tensor, ops.Operation)) and a is not b:
                self._maps[r][_key(a)] = b

    def mapped(self, value: Any, r: int) -> Any:
        def one(leaf: Any) -> Any:
            if isinstance(leaf, tf.IndexedSlices):
                return tf.IndexedSlices(
                    self.resolve(leaf.values, r),
                    self.resolve(leaf.indices, r),
                    None if leaf.dense_shape is None else self.resolve(leaf.dense_shape, r),
                )
            if isinstance(leaf, tf.Tensor):
                return self.resolve(leaf, r)
            if isinstance(leaf, ops.Operation):
                return self.resolve_op(leaf, r)
            return leaf

        return nest.map_structure(one, value)

    def resolve_op(self, op: ops.Operation, r: int) -> ops.Operation:
        found = self._maps[r].get(op)
        if found is not None:
            return found
        if self.parent is not None and op.graph is not self.graph:
            return self.parent.resolve_op(op, r)
        return op

    def resolve(self, tensor: Any, r: int, variables: bool = True) -> Any:
        """Replica r's counterpart of replica 0's `tensor`.

        With `variables` False (an op built under `variables_untouched`), a variable's
        handle stands for the variable itself, in every replica.
        """
        key = _key(tensor)
        # What the engine registered comes first: a TF1 variable made in replica 0's
        # segment has its handle op copied too, but replica r uses its own copy.
        if variables or key not in self._variable_keys:
            found = self._built[r].get(key)
            if found is not None:
                return found
            builder = self._builders.get(key)
            if builder is not None:
                built = builder(r)
                built = built if isinstance(built, tf.Tensor) else tf.convert_to_tensor(built)
                self._built[r][key] = built
                return built
        found = self._maps[r].get(key)
        if found is not None:
            return found
        if getattr(tensor, "graph", None) is self.graph and tensor.op.type == "Placeholder":
            made = self._captures_made[r].get((key, variables))
            if made is not None:
                return made
            external = self._external_of(tensor)
            if external is not None:
                mapped = self._resolve_outer(external, r, variables)
                if mapped is not external:
                    assert isinstance(self.graph, func_graph.FuncGraph)  # it has captures
                    captured = self.graph.capture(mapped)
                    self._captures_made[r][(key, variables)] = captured
                    return captured
        elif self.parent is not None and getattr(tensor, "graph", None) is not self.graph:
            return self.parent.resolve(tensor, r, variables)
        return tensor

    def _external_of(self, placeholder: tf.Tensor) -> Any:
        """The outer tensor a function graph's placeholder captures, or None."""
        graph = self.graph
        if not isinstance(graph, func_graph.FuncGraph):
            return None
        captures = graph.captures
        if len(captures) != self._captures_seen:
            self._captured = {id(internal): external for external, internal in captures}
            self._captures_seen = len(captures)
        return self._captured.get(id(placeholder))

    def _resolve_outer(self, external: Any, r: int, variables: bool) -> Any:
        key = _key(external)
        if key in self._builders:
            return self.resolve(external, r, variables)
        if self.parent is not None:
            return self.parent.resolve(external, r, variables)
        return external


def _within(ranges: list[tuple[int, int]], start: int, end: int) -> bytearray:
    """For each position from `start` to `end`, whether one of `ranges` holds it."""
    marked = bytearray(end - start)
    for a, b in ranges:
        a, b = max(a, start), min(b, end)
        if a < b:
            marked[a - start : b - start] = b"\x01" * (b - a)
    return marked


def _key(value: Any) -> Any:
    if isinstance(value, (tf.Tensor, tf.Variable)):
        return value.ref()
    return value


def _leaves(value: Any) -> list[Any]:
    leaves = []
    for leaf in nest.flatten(value):
        if isinstance(leaf, tf.IndexedSlices):
            leaves.extend([leaf.values, leaf.indices, leaf.dense_shape])
        else:
            leaves.append(leaf)
    return leaves
