"""Device loops of replicated programs: one loop, each iteration building every replica.

On an IPU every replica runs the same loop, and collectives in its body synchronise
the replicas once per iteration. Replicas built in lock-step (`lockstep`) would each
build a loop of their own, whose bodies could not meet; so a device loop built by a
replica is a meeting point where the replicas build *one* loop, whose body builds
every replica's body (`replicated.build`), each with its own loop values and its
own infeed elements: iteration i of replica r reads element i * R + r, as on the
hardware (tensorflow/compiler/plugin/poplar/driver/poplar_executor.cc fills the
replicas' infeed queues in turn).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf
from tensorflow.python.util import nest

from openipu._src.engine import host_stream
from openipu._src.engine.replicas import lockstep, replicated
from openipu._src.engine.replicas.variable_copies import variables_untouched
from openipu._src.engine.value_types import Infeed, Nested

#: How device_loop builds an ordinary loop (`device_loop.repeat` or `device_loop.while_loop`).
LoopBuilder = Callable[..., Nested]


def in_replicas() -> bool:
    """Whether code is being built by one replica of several."""
    return lockstep.replica_count() > 1


def repeat(
    n: int,
    body: Callable[..., Nested],
    inputs: Nested,
    infeed: Infeed | None,
    build_loop: LoopBuilder,
) -> Nested:
    """`device_loop.repeat` for one replica of several: builds one loop for all replicas.

    `build_loop(n, body, inputs, infeed)` builds an ordinary device loop. Returns this
    replica's final loop values (or an operation when there are none).
    """
    carried = _as_list(inputs)
    # A device buffer (device_loop.StackedInput) holds its stacked elements in `_stacked`.
    buffer = (
        getattr(infeed, "_stacked", None) if getattr(infeed, "is_device_buffer", False) else None
    )

    def combine(values: list[tuple[list[Nested], Nested, Callable[..., Nested]]]) -> list[Any]:
        replicas = len(values)
        count = len(carried)
        # Each replica runs its own body (it may close over that replica's own objects).
        bodies = [own_body for _, _, own_body in values]
        flat_inputs = [tf.convert_to_tensor(c) for own, _, _ in values for c in own]
        source: _ReplicaAxisBuffer | InterleavedInfeed | None
        if buffer is not None:
            source = _ReplicaAxisBuffer([stacked for _, stacked, _ in values])
        elif infeed is not None:
            source = InterleavedInfeed(infeed, replicas)
        else:
            source = None

        def shared_body(*args: Nested) -> list[tf.Tensor | tf.Operation]:
            element = args[count * replicas :]
            # Each replica's loop values and infeed element, made before its body is built.
            per_replica = []
            for index in range(replicas):
                own = list(args[index * count : (index + 1) * count])
                own_element = (
                    nest.map_structure(lambda t, i=index: t[i], element[0]) if source else None
                )
                if buffer is not None:
                    # A device buffer's element is one argument, whatever its structure.
                    own_element = (own_element,)
                per_replica.append((own, own_element))

            def replica_body(
                index: int, inputs: tuple[list[tf.Tensor], Nested]
            ) -> tuple[list[tf.Tensor], tf.Tensor]:
                # device_loop calls this module: importing it at the top would be a cycle.
                from openipu._src.engine import device_loop

                own, own_element = inputs
                tensors, operations = device_loop._call_body(bodies[index], own, own_element)  # noqa: SLF001
                with tf.control_dependencies(operations):
                    return tensors, tf.constant(0)

            outputs = replicated.build_once(replica_body, replicas, per_replica)
            flat = [t for tensors, _ in outputs for t in tensors]
            return flat + [tf.group([done for _, done in outputs])]

        with lockstep.outside_replicas(), variables_untouched():
            results = build_loop(n, shared_body, flat_inputs, source)
        return _per_replica(results, count, replicas)

    return lockstep.exchange((carried, buffer, body), combine, "a device loop")


def while_loop(
    condition: Callable[..., Nested],
    body: Callable[..., Nested],
    inputs: Nested,
    infeed: Infeed | None,
    maximum_iterations: int | None,
    build_loop: LoopBuilder,
) -> Nested:
    """`device_loop.while_loop` for one replica of several: one shared loop.

    Replicas of one program must agree on when a loop ends (on an IPU a replica that
    disagreed would hang its collectives): the shared loop goes on while replica 0's
    condition holds.
    """
    carried = _as_list(inputs)

    def combine(
        values: list[tuple[list[Nested], Callable[..., Nested], Callable[..., Nested]]],
    ) -> list[Any]:
        replicas = len(values)
        count = len(carried)
        # Each replica runs its own body; replica 0's condition decides.
        bodies = [own_body for _, _, own_body in values]
        replica_zero_test = values[0][1]
        flat_inputs = [tf.convert_to_tensor(c) for own, _, _ in values for c in own]
        source = InterleavedInfeed(infeed, replicas) if infeed is not None else None

        def replica_zero_condition(flat: list[tf.Tensor]) -> tf.Tensor:
            return tf.convert_to_tensor(replica_zero_test(*flat[:count]), tf.bool)

        def shared_body(*args: tf.Tensor) -> list[tf.Tensor]:
            flat = list(args[:-1])
            element = source.fetch_iteration() if source is not None else None

            per_replica = [
                (
                    flat[index * count : (index + 1) * count],
                    nest.map_structure(lambda t, i=index: t[i], element) if source else None,
                )
                for index in range(replicas)
            ]

            def replica_body(
                index: int, inputs: tuple[list[tf.Tensor], Nested]
            ) -> tuple[list[tf.Tensor], tf.Tensor]:
                # device_loop calls this module: importing it at the top would be a cycle.
                from openipu._src.engine import device_loop

                own, own_element = inputs
                tensors, operations = device_loop._call_body(bodies[index], own, own_element)  # noqa: SLF001
                with tf.control_dependencies(operations):
                    return tensors, tf.constant(0)

            outputs = replicated.build_once(replica_body, replicas, per_replica)
            new_flat = [t for tensors, _ in outputs for t in tensors]
            with tf.control_dependencies([done for _, done in outputs]), variables_untouched():
                return new_flat + [replica_zero_condition(new_flat)]

        with lockstep.outside_replicas(), variables_untouched():
            keep_going = replica_zero_condition(flat_inputs)
            results = build_loop(
                lambda *args: args[-1],
                shared_body,
                flat_inputs + [keep_going],
                None,
                maximum_iterations,
            )
        if not count:
            return [results] * replicas
        return _per_replica(_as_list(results)[:-1], count, replicas)

    return lockstep.exchange((carried, condition, body), combine, "a device loop")


def _per_replica(results: Nested, count: int, replicas: int) -> list[Any]:
    if count == 0:
        return [results] * replicas
    tensors = [r for r in _as_list(results) if not isinstance(r, tf.Operation)]
    grouped = [tensors[r * count : (r + 1) * count] for r in range(replicas)]
    return [group[0] if count == 1 else group for group in grouped]


def _as_list(values: Nested) -> list[Nested]:
    if values is None:
        return []
    return list(values) if isinstance(values, (list, tuple)) else [values]


class InterleavedInfeed:
    """A host infeed read R elements per iteration: element i * R + r is replica r's."""

    def __init__(self, infeed: Infeed, replicas: int) -> None:
        self._infeed = infeed
        self._replicas = replicas

    def _fetch_stacked(self, count: int) -> tuple[Nested, ...]:
        with host_stream.read_for_replicas(self._replicas):
            stacked = self._infeed._fetch_stacked(count * self._replicas)  # noqa: SLF001
        # One argument per iteration: the dataset element with a replica axis.
        return (
            nest.map_structure(
                lambda t: tf.reshape(t, [count, self._replicas, *t.shape[1:]]), stacked
            ),
        )

    def _fetch_one(self) -> Nested:
        raise ValueError("A replicated loop reads its infeed through fetch_iteration")

    def fetch_iteration(self) -> tuple[Nested, ...]:
        """The next R elements (one per replica), stacked along a replica axis."""
        with host_stream.read_for_replicas(self._replicas):
            return self._infeed._fetch_stacked(self._replicas)  # noqa: SLF001


class _ReplicaAxisBuffer:
    """Every replica's stacked device buffer, as one buffer with a replica axis."""

    is_device_buffer = True

    def __init__(self, per_replica_buffers: list[Nested]) -> None:
        self._stacked = nest.map_structure(
            lambda *buffers: tf.stack(buffers, axis=1), *per_replica_buffers
        )

    def _fetch_stacked(self, count: int) -> tuple[Nested, ...]:
        return (self._stacked,)

    def _fetch_one(self) -> Nested:
        raise ValueError("Stacked inputs can only feed a loop of known length")
