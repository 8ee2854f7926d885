"""`ipu_compiler.compile`: build a computation as one program for an emulated IPU."""

from __future__ import annotations

import functools
from collections.abc import Callable

import tensorflow as tf
from tensorflow.python.distribute import device_util
from tensorflow.python.framework import ops

from openipu._src.compiler import scopes
from openipu._src.engine import (
    deferred_builds,
    device_scope,
    region,
    replicated_program,
    replication,
    variable_reuse,
)
from openipu._src.engine.replicas import lockstep
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
        plain = _ipu_of_device_scope()
        if plain is not None:  # as if in `ipu_scope`: the ops go to the IPU's host device
            with scopes.ipu_scope(f"/device:IPU:{plain}"):
                return compile(computation, inputs)
    if not callable(computation):
        raise TypeError(f"computation must be callable, got {computation!r}")
    computation = _refusing_estimator_specs(computation)
    if ordinal is None:
        if tf.executing_eagerly():
            return _compile_on_the_host(computation, inputs)
        return _compile_placed_by_computation(computation, inputs)
    if deferred_builds.is_deferred_here():
        return _built_before_configuration(computation, inputs, ordinal)
    return _compile_configured(computation, inputs, ordinal)


def _not_placed_on_an_ipu() -> ValueError:
    # The original's message (its tests match on its start); ValueError is an Exception,
    # which is what the original raises.
    return ValueError(
        "A computation has been compiled, however it was not placed on an IPU device. "
        "ipu_compiler.compile must be called for an IPU device: build it inside "
        "`with ipu.scopes.ipu_scope('/device:IPU:0'):` (or an IPUStrategy scope)"
    )


_ESTIMATOR_SPECS = ("EstimatorSpec", "IPUEstimatorSpec", "IPUPipelineEstimatorSpec")


def _refusing_estimator_specs(computation: Callable) -> Callable:
    """A computation that returns an estimator spec is an IPUEstimator's `model_fn`
    compiled by hand: refused with the original's ValueError (ipu_compiler.py)."""

    @functools.wraps(computation)
    def checked(*args, **kwargs):
        outputs = computation(*args, **kwargs)
        if _holds_an_estimator_spec(outputs):
            raise ValueError(
                "Your computation output contains an EstimatorSpec or IPUEstimatorSpec "
                "object. When you use an IPUEstimator, it already handles all the xla "
                "compilation and no manual call to compile() is needed."
            )
        return outputs

    return checked


def _holds_an_estimator_spec(value) -> bool:
    # Before tf.nest: a spec is a namedtuple, which nest would take apart.
    if type(value).__name__ in _ESTIMATOR_SPECS:
        return True
    if isinstance(value, dict):
        return any(_holds_an_estimator_spec(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_an_estimator_spec(v) for v in value)
    return False


def _compile_placed_by_computation(computation: Callable, inputs):
    """A graph's computation compiled outside any IPU scope, as the original allows: it
    builds the computation, then refuses it unless the computation placed some of its ops
    on an IPU (a device scope inside it) or made NoOps only
    (tensorflow/python/ipu/ipu_compiler.py). Built for IPU 0, the original's JIT scope;
    refused as soon as the computation is built, so that no program waits for its run."""

    @functools.wraps(computation)
    def watched(*args, **kwargs):
        graph = ops.get_default_graph()
        first_new_op = len(graph.get_operations())
        scopes_before = device_scope.scopes_entered()
        outputs = computation(*args, **kwargs)
        entered_an_ipu = device_scope.scopes_entered() > scopes_before
        new_ops = graph.get_operations()[first_new_op:]
        if not entered_an_ipu and not all(op.type == "NoOp" for op in new_ops):
            raise _not_placed_on_an_ipu()
        return outputs

    with scopes.ipu_scope("/device:IPU:0"):
        return compile(watched, inputs)


def _compile_on_the_host(computation: Callable, inputs):
    """An eager compile outside any IPU scope runs, as the original's does.

    There `xla.compile` wraps the computation in a `tf.function` when executing eagerly
    (tensorflow/python/compiler/xla/xla.py:120-125), and the placement check scans the
    eager default graph, where no op was added, so it refuses nothing
    (tensorflow/python/ipu/ipu_compiler.py:72-92). The function's ops have no device
    scope (`ipu_jit_scope(0)` sets attributes of the eager graph, not of the function),
    so TensorFlow places them by device priority: on the host's CPU, which outranks the
    IPU device (the IPU's factory takes the default priority, driver/xla_ipu_common.h:68;
    the CPU's is higher, common_runtime/threadpool_device_factory.cc:74). So the
    computation runs on the host, needing no configured IPU, with compile's return rules.
    """
    return region.compile_region(computation, inputs, "/device:CPU:0")


def _ipu_of_device_scope() -> int | None:
    """N when `compile` is called in a plain `tf.device('/device:IPU:N')` scope (also within a
    job's or task's device scope), as the original accepts; None otherwise."""
    if tf.executing_eagerly():
        return None
    spec = tf.DeviceSpec.from_string(device_util.current() or "")
    if spec.device_type != "IPU" or spec.device_index is None:
        return None
    return spec.device_index


def _compile_configured(computation: Callable, inputs, ordinal: int):
    if not _replicates_here():
        device = configure.current_system("ipu_compiler.compile").device(ordinal)
        return region.compile_region(computation, inputs, device.host_device(), ipu_ordinal=ordinal)
    return replicated_program.compile_replicated(
        computation, inputs, ordinal, "ipu_compiler.compile"
    )


def _built_before_configuration(computation: Callable, inputs, ordinal: int):
    """A TF1 program built before `configure_ipu_system`, finished at the first run."""
    variable_scope = tf.compat.v1.get_variable_scope()
    name_scope = ops.get_default_graph().get_name_scope()
    provisional_device = deferred_builds.unconfigured_host_device(ordinal)
    built_once: list[bool] = []
    made = _VariablesMade()
    numbering = variable_reuse.ScopeNumbering()

    def build():
        if not built_once:
            built_once.append(True)
            with tf.variable_creator_scope(made.record):
                return region.compile_region(
                    computation, inputs, provisional_device, ipu_ordinal=ordinal
                )
        # Again, in the scopes it was built in: its variables are found, not made again
        # (those of `get_variable` by its reuse, the others, such as Keras layers', by name).
        with (
            variable_reuse.finding_variables_again(variable_scope, numbering),
            ops.name_scope(f"{name_scope}/" if name_scope else None),
            scopes.ipu_scope(f"/device:IPU:{ordinal}"),
            tf.variable_creator_scope(made.reuse),
        ):
            return _compile_configured(computation, inputs, ordinal)

    def needs_rebuild() -> bool:
        device = configure.current_system("ipu_compiler.compile").device(ordinal)
        return device.num_ipus > 1 or device.host_device() != provisional_device

    return deferred_builds.build_deferred(build, needs_rebuild)


class _VariablesMade:
    """The variables a provisional build made, by name scope and requested name, so that
    building it again takes them instead of making uninitialised twins (a Keras layer
    makes its variables with `tf.Variable`, which a variable scope's reuse does not
    reach)."""

    def __init__(self) -> None:
        self._made: dict[str, list[tf.Variable]] = {}  # in the order they were made

    @staticmethod
    def _key(kwargs: dict) -> str | None:
        name = kwargs.get("name")
        if not isinstance(name, str):
            return None
        scope = ops.get_default_graph().get_name_scope()
        return f"{scope}/{name}" if scope else name

    def record(self, next_creator: Callable, **kwargs):
        variable = next_creator(**kwargs)
        key = self._key(kwargs)
        if key is not None:
            self._made.setdefault(key, []).append(variable)
        return variable

    def reuse(self, next_creator: Callable, **kwargs):
        key = self._key(kwargs)
        made = self._made.get(key) if key is not None else None
        if not made:
            return next_creator(**kwargs)
        return made.pop(0)


def _replicates_here() -> bool:
    """Whether this compile decides its own replicas (not inside replicas built already)."""
    if lockstep.current() is not None or region.current_region() is not None:
        return False
    # Programs of a tf.distribute strategy's replicas are replicated by the strategy.
    return replication.local_replica_count() == 1
