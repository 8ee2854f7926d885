"""The host's side of a host embedding: its connection state, lookups and updates.

On an IPU the table stays in host memory; the device streams indices out and
rows back while it runs, and (training) streams the rows' updates out, which
the host adds into the table. Here those streams are host operations built
inside the device loop: a gather from the table and a scatter-add into it,
both placed on the host CPU, so the compiled region that holds them runs as a
graph (as one with `outside_compilation_scope` does). Iterations of a device
loop run in order, so each lookup sees the updates of the steps before it.

The connection (`HostEmbedding.register`) is engine state: a flag a lookup
checks, made with `engine_variable` so that programs neither initialise nor
save it. SGD with gradient accumulation ("SGD+GA") holds the updates of a
mini-batch on the host and adds them all into the table once per
`accumulation_factor` mini-batches (the original's host kept them until the
device notified it at the end of each accumulation).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import tensorflow as tf
from tensorflow.python.framework import ops

from openipu._src.engine import region as region_lib
from openipu._src.engine.engine_variables import engine_variable
from openipu._src.engine.replicas import lockstep, variable_copies

SGD = "SGD"
SGD_WITH_ACCUMULATION = "SGD+GA"

# Per (embedding name, table): its host state.
_states: dict = {}


def op_name(embedding_name: str, suffix: str) -> str:
    """A TensorFlow op name for `suffix` of an embedding: the original names embeddings by
    any string (a string attribute), which op names cannot all hold ("", spaces, ...)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.\-/]", "_", embedding_name)
    if not re.match(r"[A-Za-z0-9.]", cleaned):
        cleaned = f"embedding{cleaned}"
    return f"{cleaned}_{suffix}"


class HostTableState:
    """The host's state of one embedding: whether it is registered, and pending updates."""

    def __init__(self, name: str, table, accumulation_factor: int) -> None:
        self.name = name
        self.table = table
        self.accumulation_factor = accumulation_factor
        with outside_region(), tf.init_scope():
            self.registered = engine_variable(False, name=op_name(name, "registered"))
            self.pending = None
            self.pending_count = None
            if accumulation_factor > 1:
                self.pending = engine_variable(
                    tf.zeros(table.shape, table.dtype), name=op_name(name, "pending_updates")
                )
                self.pending_count = engine_variable(0, name=op_name(name, "pending_count"))

    def register(self, optimizer_name: str):
        """Connects the table; a new connection holds no pending updates."""
        with on_host():
            operations = [self.registered.assign(True)]
            if (
                self.pending is not None
                and self.pending_count is not None
                and optimizer_name == SGD_WITH_ACCUMULATION
            ):
                operations += [
                    self.pending.assign(tf.zeros_like(self.pending)),
                    self.pending_count.assign(0),
                ]
            return tf.group(operations, name=op_name(self.name, "register"))

    def deregister(self) -> tf.Tensor:
        """Disconnects the table; its value (the original's deregister op returned it)."""
        with on_host():
            with tf.control_dependencies([self.registered.assign(False)]):
                return tf.identity(self.table, name=op_name(self.name, "deregister"))

    def lookup(self, indices: tf.Tensor) -> tf.Tensor:
        """The rows `indices` of the table, read on the host once the table is registered."""
        with on_host():
            check = tf.debugging.Assert(
                self.registered,
                [
                    f"HostEmbedding {self.name} is not registered: run the program inside "
                    "`with embedding.register(session):`"
                ],
                name="check_registered",
            )
            with tf.control_dependencies([check]):
                # The table is not a variable of the program: no gradient flows into it.
                return tf.stop_gradient(tf.gather(self.table, indices))

    def update(self, indices: tf.Tensor, updates: tf.Tensor, optimizer_name: str):
        """Adds `updates` (already scaled by the learning rate) into the rows `indices`.

        The replicas of a program share the host's table: their updates of a step are
        added together, once every replica has looked its rows up.
        """
        if not isinstance(self.table, tf.Variable):
            # A plain tensor has no storage that outlives the step: its updates are lost, as
            # the original's host wrote them into a temporary buffer.
            return tf.no_op()

        def add_all(values: list[tuple[tf.Tensor, tf.Tensor]]) -> list[tf.Operation]:
            with on_host():
                all_indices = tf.concat([i for i, _ in values], 0)
                all_updates = tf.concat([tf.cast(u, self.table.dtype) for _, u in values], 0)
                added = self._add(all_indices, all_updates, optimizer_name)
            return [added] * len(values)

        return lockstep.exchange((indices, updates), add_all, "a host embedding's update")

    def _add(self, indices: tf.Tensor, updates: tf.Tensor, optimizer_name: str):
        with on_host():
            if (
                optimizer_name != SGD_WITH_ACCUMULATION
                or self.pending is None
                or self.pending_count is None
            ):
                return tf.compat.v1.scatter_add(self.table, indices, updates).op
            pending, pending_count = self.pending, self.pending_count
            held = tf.compat.v1.scatter_add(pending, indices, updates)
            with tf.control_dependencies([held]):
                count = pending_count.assign_add(1)
            return tf.cond(
                count >= self.accumulation_factor,
                lambda: self._apply_pending(pending, pending_count),
                tf.no_op,
                name="notify",
            )

    def notify(self) -> tf.Operation:
        """Adds the held updates into the table now (the device's notification)."""
        if self.pending is None or self.pending_count is None:
            return tf.no_op()
        with on_host():
            return self._apply_pending(self.pending, self.pending_count)

    def notify_unless(self, hold: tf.Tensor) -> tf.Operation:
        """Adds the held updates into the table unless the bool tensor `hold` is true.

        Arithmetic rather than a conditional: the operation runs whether or not the
        program uses its result, as the device's stateful operations do.
        """
        if self.pending is None or self.pending_count is None:
            return tf.no_op()
        with on_host():
            keep = tf.cast(hold, self.pending.dtype)
            pending = self.pending.read_value()
            applied = self.table.assign_add(pending * (1 - keep))
            with tf.control_dependencies([applied]):
                return tf.group(
                    self.pending.assign(pending * keep),
                    self.pending_count.assign(
                        self.pending_count * tf.cast(hold, self.pending_count.dtype)
                    ),
                )

    def _apply_pending(self, pending: tf.Variable, pending_count: tf.Variable) -> tf.Operation:
        applied = self.table.assign_add(pending.read_value())
        with tf.control_dependencies([applied]):
            return tf.group(pending.assign(tf.zeros_like(pending)), pending_count.assign(0))


def state_for(name: str, table, accumulation_factor: int) -> HostTableState:
    """The host state of the embedding `name` held in `table` (made on first use)."""
    key = (name, table.ref())
    state = _states.get(key)
    if state is None:
        state = _states[key] = HostTableState(name, table, accumulation_factor)
    return state


@contextlib.contextmanager
def on_host() -> Iterator[None]:
    """Builds the enclosed operations on the host CPU; a region holding them runs as a graph."""
    region = region_lib.current_region()
    if region is not None:
        region.require_graph_mode("host embedding lookups and updates run on the host")
    # The table is the host's, one for every replica: replicas read and update it itself,
    # not copies of it as they do the program's variables.
    with ops.device("/device:CPU:0"), variable_copies.variables_untouched():
        yield


@contextlib.contextmanager
def outside_region() -> Iterator[None]:
    """Builds the enclosed operations on the host, outside the compiled region if in one."""
    region = region_lib.current_region()
    if region is None:
        with ops.device("/device:CPU:0"):
            yield
    else:
        with region.on_host():
            yield
