"""`ipu_compiler.compile`: build a computation as one program for an emulated IPU."""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf
from tensorflow.python.util import nest

from openipu._src.compiler import device_scope
from openipu._src.engine import region, replication
from openipu._src.engine.replicas import lockstep, replicated
from openipu._src.system import configure


def compile(computation: Callable, inputs=None):  # noqa: A001 - the original's name
    """Builds `computation(*inputs)` as one compiled program on the current IPU device.

    Returns the same structure as `computation`, except that a None output or
    an operation-only output becomes a NoOp, and a single value becomes a
    1-tuple (spec section 21.2).

    The program is replicated as on the IPU: a device of N IPUs runs N / k replicas
    of a program that spans k IPUs (tensorflow/compiler/plugin/poplar/driver/
    poplar_compiler.cc sets the replication factor to the IPUs over the shards).
    The values returned are replica 0's (only its outputs reach the host).
    """
    ordinal = device_scope.current_ipu_ordinal()
    if ordinal is None:
        raise ValueError(
            "ipu_compiler.compile must be called for an IPU device: build it inside "
            "`with ipu.scopes.ipu_scope('/device:IPU:0'):` (or an IPUStrategy scope)"
        )
    if not callable(computation):
        raise TypeError(f"computation must be callable, got {computation!r}")
    device = configure.current_system("ipu_compiler.compile").device(ordinal)
    if not _replicates_here():
        return region.compile_region(computation, inputs, device.host_device(), ipu_ordinal=ordinal)
    ipus_per_replica = 1
    while True:
        replicas = device.num_ipus // ipus_per_replica
        try:
            return region.compile_region(
                _replicated(computation, replicas, device.num_ipus),
                inputs,
                device.host_device(),
                ipu_ordinal=ordinal,
            )
        except replicated.TooManyReplicas as retry:
            if retry.ipus_per_replica > device.num_ipus:
                raise ValueError(
                    f"The program needs {retry.ipus_per_replica} IPUs per replica but its "
                    f"device /device:IPU:{ordinal} has {device.num_ipus}"
                ) from None
            ipus_per_replica = retry.ipus_per_replica


def _replicates_here() -> bool:
    """Whether this compile decides its own replicas (not inside replicas built already)."""
    if lockstep.current() is not None or region.current_region() is not None:
        return False
    # Programs of a tf.distribute strategy's replicas are replicated by the strategy.
    return replication.local_replica_count() == 1


def _replicated(computation: Callable, replicas: int, ipus: int) -> Callable:
    """`computation` built once per replica; it returns replica 0's outputs after all ran."""
    if replicas == 1:
        return computation

    def run(*args):
        outputs = replicated.build(lambda _: computation(*args), replicas, ipus)
        others = [
            value
            for output in outputs[1:]
            for value in nest.flatten(output)
            if isinstance(value, (tf.Tensor, tf.Operation))
        ]
        if not others:
            return outputs[0]
        with tf.control_dependencies(others):
            done = tf.no_op(name="replicas_done")
        return _after(outputs[0], done)

    return run


def _after(outputs, done: tf.Operation):
    """`outputs` (replica 0's) made to wait for `done` (every other replica's work)."""
    if outputs is None:
        return done
    if isinstance(outputs, tf.Operation):
        return tf.group(outputs, done)

    def wait(value):
        if isinstance(value, tf.Operation):
            return tf.group(value, done)
        if value is None:
            return None
        with tf.control_dependencies([done]):
            return tf.identity(value)

    return nest.map_structure(wait, outputs)
