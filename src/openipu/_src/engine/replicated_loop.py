"""Device loops of replicated programs: one loop, each iteration run by every replica.

On an IPU every replica runs the same loop, and collectives in the loop body
(a cross-replica sum, an optimizer's all-reduce) synchronise the replicas
once per iteration. tf.distribute synchronises replicas only at the top
level of a replica function, not inside loops built there. So a device loop
built by a replica asks its strategy (`merge_call`) to build *one* loop for
all replicas, whose every iteration runs the body through `strategy.run`:
the same iterations, the same synchronisation points, and, with all replicas
on one device, one XLA computation.

Replicas get consecutive infeed elements: iteration i of replica r reads
element i * R + r, as on the hardware.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf
from tensorflow.python.distribute import values as distribute_values
from tensorflow.python.util import nest

from openipu._src.engine import replication, thread_state
from openipu._src.engine.replicas.shared_loop import InterleavedInfeed as _InterleavedInfeed


def in_replicated_replica_context() -> bool:
    """Whether code is being built by one replica of several."""
    if tf.distribute.in_cross_replica_context():
        return False
    context = tf.distribute.get_replica_context()
    return context is not None and context.num_replicas_in_sync > 1


def repeat(n: int, body: Callable, inputs, infeed, build_loop: Callable):
    """`device_loop.repeat` for one replica of several: merges into one shared loop.

    `build_loop(n, body, inputs, infeed)` builds an ordinary device loop; it is
    called once, in cross-replica context, with a body that runs every replica.
    Returns this replica's final loop values (or an operation when there are none).
    """
    context = tf.distribute.get_replica_context()
    saved = thread_state.snapshot()
    carried = _as_list(inputs)
    # A device-side infeed (stacked tensors) differs per replica: it travels as values.
    device_buffer = infeed if getattr(infeed, "is_device_buffer", False) else None
    buffer_values = device_buffer._stacked if device_buffer is not None else None  # noqa: SLF001

    def shared(strategy, per_replica_carried, per_replica_buffer):
        with thread_state.restored(saved):
            source = (
                _ReplicaAxisBuffer(strategy, per_replica_buffer)
                if device_buffer is not None
                else _InterleavedInfeed(infeed, replication.local_replica_count(strategy))
                if infeed is not None
                else None
            )
            return _shared_repeat(strategy, n, body, per_replica_carried, source, build_loop)

    return context.merge_call(shared, args=(carried, buffer_values))


def while_loop(condition, body, inputs, infeed, maximum_iterations, build_loop: Callable):
    """`device_loop.while_loop` for one replica of several: one shared loop.

    Replicas of one program must agree on when a loop ends (on an IPU a
    replica that disagreed would hang its collectives): the shared loop
    continues while replica 0's condition holds.
    """
    context = tf.distribute.get_replica_context()
    saved = thread_state.snapshot()

    def shared(strategy, per_replica_carried):
        with thread_state.restored(saved):
            return _shared_while(
                strategy,
                condition,
                body,
                per_replica_carried,
                infeed,
                maximum_iterations,
                build_loop,
            )

    return context.merge_call(shared, args=(_as_list(inputs),))


def _shared_while(
    strategy, condition, body, per_replica_carried, infeed, maximum_iterations, build_loop
):
    from openipu._src.engine import device_loop

    replicas = replication.local_replica_count(strategy)
    count = len(per_replica_carried)
    flat_inputs = [c for value in per_replica_carried for c in _local_values(strategy, value)]
    source = _InterleavedInfeed(infeed, replicas) if infeed is not None else None

    def replica_zero_condition(per_replica):
        decisions = strategy.run(
            thread_state.for_replicas(
                lambda *values: tf.convert_to_tensor(condition(*values), tf.bool)
            ),
            args=tuple(per_replica),
        )
        return strategy.experimental_local_results(decisions)[0]

    def regroup(flat):
        return [
            _per_replica(strategy, flat[i * replicas : (i + 1) * replicas]) for i in range(count)
        ]

    def shared_body(*args):
        arguments = regroup(list(args[:-1]))
        if source is not None:
            arguments.append(_distribute(strategy, source.fetch_iteration()))

        def replica_body(*values):
            own = list(values[:count])
            replica_element = values[count] if source is not None else None
            tensors, operations = device_loop._call_body(body, own, replica_element)  # noqa: SLF001
            with tf.control_dependencies(operations):
                return tensors + [tf.constant(0)]

        outputs = _as_list(
            strategy.run(thread_state.for_replicas(replica_body), args=tuple(arguments))
        )
        flat = [c for value in outputs[:-1] for c in _local_values(strategy, value)]
        with tf.control_dependencies(_local_values(strategy, outputs[-1])):
            flat = [tf.identity(t) for t in flat]
        return flat + [replica_zero_condition(regroup(flat))]

    keep_going = replica_zero_condition(per_replica_carried)
    results = build_loop(
        lambda *args: args[-1], shared_body, flat_inputs + [keep_going], None, maximum_iterations
    )
    tensors = [r for r in _as_list(results) if not isinstance(r, tf.Operation)][:-1]
    if count == 0:
        return results
    grouped = [
        distribute_values.PerReplica(tuple(tensors[i * replicas : (i + 1) * replicas]))
        for i in range(count)
    ]
    return grouped[0] if count == 1 else grouped


def _as_list(values) -> list:
    if values is None:
        return []
    return list(values) if isinstance(values, (list, tuple)) else [values]


def _shared_repeat(strategy, n, body, per_replica_carried, source, build_loop):
    from openipu._src.engine import device_loop

    replicas = replication.local_replica_count(strategy)
    count = len(per_replica_carried)
    flat_inputs = [c for value in per_replica_carried for c in _local_values(strategy, value)]

    def shared_body(*args):
        carried = list(args[: count * replicas])
        element = args[count * replicas :]
        arguments = [
            _per_replica(strategy, carried[i * replicas : (i + 1) * replicas]) for i in range(count)
        ]
        if source is not None:
            arguments.append(_distribute(strategy, element[0]))

        def replica_body(*values):
            own = list(values[:count])
            replica_element = values[count] if source is not None else None
            tensors, operations = device_loop._call_body(body, own, replica_element)  # noqa: SLF001
            with tf.control_dependencies(operations):
                done = tf.constant(0)  # keeps the replica's side effects (outfeeds) in the loop
            return tensors + [done]

        outputs = strategy.run(thread_state.for_replicas(replica_body), args=tuple(arguments))
        outputs = _as_list(outputs)
        flat = [c for value in outputs[:-1] for c in _local_values(strategy, value)]
        return flat + [tf.group(_local_values(strategy, outputs[-1]))]

    results = build_loop(n, shared_body, flat_inputs, source)
    if count == 0:
        return results
    tensors = [r for r in _as_list(results) if not isinstance(r, tf.Operation)]
    grouped = [
        distribute_values.PerReplica(tuple(tensors[i * replicas : (i + 1) * replicas]))
        for i in range(count)
    ]
    return grouped[0] if count == 1 else grouped


def _local_values(strategy, value) -> list[tf.Tensor]:
    """One tensor per replica (a value every replica passed alike is repeated)."""
    if isinstance(value, distribute_values.DistributedValues):
        return [tf.convert_to_tensor(v) for v in strategy.experimental_local_results(value)]
    return [tf.convert_to_tensor(value)] * replication.local_replica_count(strategy)


def _per_replica(strategy, components: list[tf.Tensor]):
    return distribute_values.PerReplica(tuple(components))


def _distribute(strategy, stacked):
    """Replica r's slice of an element stacked along a replica axis (per-replica leaves)."""
    replicas = replication.local_replica_count(strategy)
    return nest.map_structure(
        lambda t: distribute_values.PerReplica(tuple(t[r] for r in range(replicas))), stacked
    )


class _ReplicaAxisBuffer:
    """Every replica's stacked device buffer, as one buffer with a replica axis."""

    is_device_buffer = True

    def __init__(self, strategy, per_replica_buffer) -> None:
        self._stacked = nest.map_structure(
            lambda value: tf.stack(_local_values(strategy, value), axis=1), per_replica_buffer
        )

    def _fetch_stacked(self, count: int):
        return (self._stacked,)

    def _fetch_one(self):
        raise ValueError("Stacked inputs can only feed a loop of known length")
