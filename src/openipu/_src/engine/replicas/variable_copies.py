"""Each replica's own copy of the program's variables.

On an IPU every replica holds a copy of each variable. The host writes all copies
(weights are streamed to every replica) and reads replica 0's
(tensorflow/compiler/plugin/poplar/driver/poplar_executor.cc: only replica 0's
copy is connected to the host buffer). Copies stay equal when the replicas apply
all-reduced updates, and drift apart when each updates its own (metrics, batch
statistics, a replica's own counter).

Here the variable itself is replica 0's copy. Replica r > 0 uses a hidden copy,
created the first time a replicated program touches the variable: while replica r's
ops are built, the variable's `handle` is the copy's (`integration.variable_handles`).

Host writes reach every copy: the program starts by comparing each variable with
the value it held when a replicated program last ended (its *shadow*); if anything
changed in between (the host assigned it, loaded weights, reset a metric, or a
one-replica program trained it), every replica's copy takes the variable's value.
Values the replicas left in their own copies otherwise stay there from one program
call to the next, as on the device.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf
from tensorflow.python.framework import ops
from tensorflow.python.ops import resource_variable_ops

from openipu._src.engine.engine_variables import engine_variable
from openipu._src.engine.replicas import lockstep
from openipu._src.integration import variable_handles

_ATTRIBUTE = "_openipu_replica_copies"
_COUNTERPARTS = "_openipu_replica_counterparts"
_INTERNAL = "_openipu_internal"


class _Copies:
    """A variable's copies for replicas 1, 2, ..., its shadow, and whether they are filled."""

    def __init__(self, variable: resource_variable_ops.BaseResourceVariable) -> None:
        if not variable.shape.is_fully_defined():
            raise NotImplementedError(
                f"Variable {variable.name} has shape {variable.shape}: replicated programs need "
                "variables of a fully defined shape"
            )
        self._variable = variable
        self.copies: list[tf.Variable] = []
        # Filled by the first run that uses them (the variable may not hold a value yet).
        self.shadow = self._hidden("shadow")
        self.filled = self._hidden("filled", False)

    def ensure(self, replicas: int) -> None:
        while len(self.copies) < replicas - 1:
            self.copies.append(self._hidden(f"replica_{len(self.copies) + 1}"))

    def _hidden(self, suffix: str, initial_value: object = None) -> tf.Variable:
        variable = self._variable
        with outside_programs(), ops.device(variable.device):
            if initial_value is None:
                initial_value = tf.zeros(variable.shape, variable.dtype)
            hidden = engine_variable(initial_value, name=f"{variable.name.split(':')[0]}/{suffix}")
        setattr(hidden, _INTERNAL, True)
        return hidden


@contextlib.contextmanager
def outside_programs() -> Iterator[None]:
    """Where hidden variables are created: the outermost context, outside any region.

    A program traced once shares what is built there (TF1: the same graph) among replicas.
    """
    with lockstep.unrecorded(), ops.init_scope():
        graph = ops.get_default_graph()
        saved = graph._get_control_flow_context()  # noqa: SLF001 - TF1 regions set one
        graph._set_control_flow_context(None)  # noqa: SLF001
        try:
            yield
        finally:
            graph._set_control_flow_context(saved)  # noqa: SLF001


def set_counterparts(
    variable: tf.Variable, of_replica: Callable[[int], tf.Variable]
) -> tf.Variable:
    """`of_replica(r)` is replica r's own variable standing for `variable` (replica 0's).

    For engine state kept per replica (accumulators, seed streams): in a program traced
    once, replica r's copy of replica 0's ops uses `of_replica(r)` where they used
    `variable` (see `ReplicatedVariables._handle`).
    """
    setattr(variable, _COUNTERPARTS, of_replica)
    return variable


def _counterpart(variable: tf.Variable, replica: int) -> tf.Variable:
    of_replica = getattr(variable, _COUNTERPARTS, None)
    return variable if of_replica is None else of_replica(replica)


def own_variable(variable: tf.Variable) -> tf.Variable:
    """Marks `variable` as one replica's own (engine state kept per replica): no copies."""
    setattr(variable, _INTERNAL, True)
    return variable


def _copies_of(variable: resource_variable_ops.BaseResourceVariable) -> _Copies:
    copies: _Copies | None = variable.__dict__.get(_ATTRIBUTE)
    if copies is None:
        copies = _Copies(variable)
        setattr(variable, _ATTRIBUTE, copies)
    return copies


def _is_user_variable(variable: tf.Variable) -> bool:
    return not getattr(variable, _INTERNAL, False) and not isinstance(
        variable,
        resource_variable_ops._UnreadVariable,  # noqa: SLF001 - handle already mapped
    )


class ReplicatedVariables:
    """The variables one replicated program touches, and how it keeps their copies.

    Created where the program's replicas are built (`graph`, the program's top level);
    `replica(r)` maps variables to replica r's copies while replica r builds, and
    `finish()` makes the program end by recording each variable's shadow.
    """

    def __init__(self, replicas: int, graph: ops.Graph) -> None:
        self._replicas = replicas
        self._graph = graph
        self._first_op = len(graph.get_operations())
        self._top_context = graph._get_control_flow_context()  # noqa: SLF001
        self._touched: dict[
            int, tuple[resource_variable_ops.BaseResourceVariable, tf.Operation]
        ] = {}
        self._refresh_ops: set[tf.Operation] = set()

    @contextlib.contextmanager
    def replica(self, index: int) -> Iterator[None]:
        """Within this context (this thread), variables resolve to replica `index`'s copies.

        A variable that replica r > 0 creates itself (rather than finding replica 0's)
        is that replica's own and has no copies.
        """

        def created_by_replica(
            next_creator: Callable[..., tf.Variable], **kwargs: object
        ) -> tf.Variable:
            return own_variable(next_creator(**kwargs))

        created_by_replica.replica_only = True  # type: ignore[attr-defined] # see lockstep
        with (
            tf.variable_creator_scope(created_by_replica)
            if index > 0
            else contextlib.nullcontext(),
            variable_handles.redirected(lambda variable: self._handle(variable, index)),
        ):
            yield

    @property
    def touched(self) -> bool:
        """Whether the program has read or written a variable (its copies are made)."""
        return bool(self._touched)

    def shrink(self, replicas: int) -> None:
        """The program has `replicas` replicas after all (no variable touched yet)."""
        self._replicas = replicas

    def _handle(self, variable: tf.Variable, index: int) -> tf.Tensor:
        if self._replicas == 1:  # shrunk to one replica (`shrink`): no copies
            return variable_handles.stock_handle(variable)
        if index == 0:
            # A program traced once: replica r's copies of ops reading this handle read
            # that of replica r's copy (or counterpart) of the variable.
            lockstep.register(
                variable_handles.stock_handle(variable),
                lambda r: self._handle(_counterpart(variable, r), r),
                variable=True,
            )
        if not _is_user_variable(variable):
            return variable_handles.stock_handle(variable)
        copies = self._prepare(variable)
        if index == 0:
            return variable_handles.stock_handle(variable)
        return variable_handles.stock_handle(copies.copies[index - 1])

    def _prepare(self, variable: resource_variable_ops.BaseResourceVariable) -> _Copies:
        """The variable's copies, refreshed at the program's start if the host changed it."""
        key = id(variable)
        with variables_untouched(), lockstep.unrecorded():
            copies = _copies_of(variable)
            if key in self._touched:
                return copies
            copies.ensure(self._replicas)
            before = len(self._graph.get_operations())
            refresh = self._build_refresh(variable, copies)
            self._refresh_ops.update(self._graph.get_operations()[before:])
            self._touched[key] = (variable, refresh)
        return copies

    def _build_refresh(
        self, variable: resource_variable_ops.BaseResourceVariable, copies: _Copies
    ) -> tf.Operation:
        """At the program's top level, before anything reads the variable: refresh copies."""
        with (
            self._graph.as_default(),
            ops.control_dependencies(None),
            ops.name_scope("replica_copies"),
        ):
            value = variable.read_value()
            changed = tf.cond(
                copies.filled.read_value(),
                lambda: _differs(value, copies.shadow.read_value()),
                lambda: tf.constant(True),
            )

            def refresh() -> tf.Tensor:
                writes = [copy.assign(value) for copy in copies.copies]
                writes.append(copies.filled.assign(True))
                with tf.control_dependencies(writes):
                    return tf.constant(True)

            return tf.cond(changed, refresh, lambda: tf.constant(False)).op

    def finish(self) -> None:
        """Orders the refreshes first and ends the program by recording every shadow.

        TF2 functions order resource ops by their creation order anyway; TF1 graphs
        need the control edges said explicitly. Ops inside a TF1 loop's frame are
        ordered through the frame's entries (`Enter`), which may wait for ops outside.
        """
        if not self._touched:
            return
        built = [
            op
            for op in self._graph.get_operations()[self._first_op :]
            if op not in self._refresh_ops
        ]
        handles = self._handle_tensors()
        top_level = []
        for op in built:
            frame = op._get_control_flow_context()  # noqa: SLF001
            at_top = frame is self._top_context
            if at_top:
                top_level.append(op)
            waiting = self._waiting_op(op, frame)
            if waiting is None:
                continue
            for tensor in op.inputs:
                key = handles.get(id(tensor))
                if key is not None:
                    refresh = self._touched[key][1]
                    if refresh not in waiting.control_inputs:
                        waiting._add_control_input(refresh)  # noqa: SLF001 - ordering a built op
        with (
            variables_untouched(),
            self._graph.as_default(),
            ops.name_scope("replica_copies"),
            ops.control_dependencies(top_level),
        ):
            for variable, _ in self._touched.values():
                _copies_of(variable).shadow.assign(variable.read_value())

    def _waiting_op(self, op: tf.Operation, frame: Any) -> tf.Operation | None:
        """The op that waits for the refreshes of the variables `op` reads, or None.

        At the top level, `op` itself; of a TF1 frame, where the variable enters it: a while
        loop's `Enter`, or a cond's predicate when `op` is the cond's `Switch` of the handle
        (a control edge into a cond's Switch breaks XLA's reading of the cond).
        """
        if frame is self._top_context:
            return op
        if getattr(frame, "outer_context", None) is not self._top_context:
            return None
        if op.type == "Enter":
            return op
        if op.type in ("Switch", "RefSwitch"):
            return op.inputs[1].op
        return None

    def _handle_tensors(self) -> dict[int, int]:
        """id of each tensor that is a touched variable's (or its copy's) handle in the graph."""
        captured = dict(_captures(self._graph))
        handles: dict[int, int] = {}
        for key, (variable, _) in self._touched.items():
            for owner in [variable, *_copies_of(variable).copies]:
                handle = variable_handles.stock_handle(owner)
                handles[id(handle)] = key
                internal = captured.get(id(handle))
                if internal is not None:
                    handles[id(internal)] = key
        return handles


def _captures(graph: ops.Graph) -> Iterator[tuple[int, tf.Tensor]]:
    """(id of the outer tensor, its placeholder) for every capture of a function graph."""
    for external, internal in getattr(graph, "captures", ()):
        yield id(external), internal


def _differs(value: tf.Tensor, shadow: tf.Tensor) -> tf.Tensor:
    """Whether any element changed (NaN where NaN was counts as unchanged)."""
    different = tf.not_equal(value, shadow)
    if value.dtype.is_floating or value.dtype.is_complex:
        both_nan = tf.logical_and(tf.math.is_nan(tf.abs(value)), tf.math.is_nan(tf.abs(shadow)))
        different = tf.logical_and(different, tf.logical_not(both_nan))
    return tf.reduce_any(different)


@contextlib.contextmanager
def variables_untouched() -> Iterator[None]:
    """Within this context, variables resolve to themselves (the engine's own reads)."""
    with variable_handles.redirected(None), lockstep.untouched():
        yield
