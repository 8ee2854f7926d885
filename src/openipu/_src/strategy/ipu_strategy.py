"""`IPUStrategy`: the tf.distribute strategy that targets an emulated IPU device.

Everything `run` executes is a compiled region (see `engine.region`). A
function decorated with `tf.function(jit_compile=True)` is traced again
without TensorFlow's own XLA request, inside a region: that way dataset
iterators and outfeeds in it run on the host while the rest compiles, which
stock XLA could not do with the iterator inside.

A device of R IPUs runs R replicas of the program (one IPU each), on
tf.distribute's mirrored machinery (`replicated_extended`); one region holds
all replicas. With one IPU the strategy is a one-device strategy.
"""

from __future__ import annotations

import weakref

import tensorflow as tf
from tensorflow.python.autograph.core import ag_ctx
from tensorflow.python.autograph.impl import api as autograph
from tensorflow.python.distribute import distribute_lib, one_device_strategy
from tensorflow.python.distribute import values as distribute_values
from tensorflow.python.eager.polymorphic_function import polymorphic_function
from tensorflow.python.util import nest

from openipu._src.compiler import device_scope
from openipu._src.engine import region, thread_state
from openipu._src.strategy.replicated_extended import IPUReplicatedExtended
from openipu._src.system import configure, host_devices


def _host_device_for(ordinal: int) -> str:
    system = configure.maybe_current_system()
    if system is not None and ordinal < len(system.devices):
        return system.device(ordinal).host_device()
    # Not configured yet: device N is most often IPU N (one IPU per device).
    return host_devices.host_device_for_ipu(ordinal)


class IPUExtended(one_device_strategy.OneDeviceExtended):
    """Strategy internals: one IPU device, whose work runs as compiled regions."""

    def __init__(self, container_strategy, ipu_device: str, cpu_device: str) -> None:
        ordinal = configure.ipu_ordinal(ipu_device)
        if ordinal is None:
            raise ValueError(
                f"IPUStrategy: ipu_device={ipu_device!r} is not an IPU device name such as "
                "'/device:IPU:0'"
            )
        self._ipu_ordinal = ordinal
        self._ipu_device_name = ipu_device
        self._cpu_device_name = cpu_device
        super().__init__(container_strategy, _host_device_for(ordinal))

    @property
    def ipu_ordinal(self) -> int:
        return self._ipu_ordinal


def _replica_count(ordinal: int) -> int:
    """Replicas of a one-IPU program on the configured device: one per IPU."""
    system = configure.maybe_current_system()
    if system is None or ordinal >= len(system.devices):
        return 1
    return system.device(ordinal).num_ipus


def _parse_ordinal(ipu_device: str) -> int:
    ordinal = configure.ipu_ordinal(ipu_device)
    if ordinal is None:
        raise ValueError(
            f"IPUStrategy: ipu_device={ipu_device!r} is not an IPU device name such as "
            "'/device:IPU:0'"
        )
    return ordinal


class IPUStrategyV1(distribute_lib.StrategyV1):
    """Runs computations on an emulated IPU device (`/device:IPU:0` by default).

    Use `scope()` to build models and variables for the IPU, and `run()` to
    execute functions on it. A device of several IPUs runs one replica per IPU.
    """

    # The mirrored machinery numbers its collectives from here.
    _collective_key_base = 0

    def __init__(
        self,
        ipu_device: str = "/device:IPU:0",
        cpu_device: str = "/device:CPU:0",
        enable_dataset_iterators: bool = True,
        enable_keras_extensions: bool = True,
    ) -> None:
        host_devices.ensure_logical_devices()
        super().__init__(self._create_extended(ipu_device, cpu_device))
        self._enable_dataset_iterators = bool(enable_dataset_iterators)
        self._enable_keras_extensions = bool(enable_keras_extensions)
        if self._enable_keras_extensions:
            from openipu._src.keras.extensions import activation

            activation.install()
        self._region_functions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def _create_extended(self, ipu_device: str, cpu_device: str):
        """The strategy internals (strategies spanning processes override this)."""
        ordinal = _parse_ordinal(ipu_device)
        replicas = _replica_count(ordinal)
        if replicas > 1:
            return IPUReplicatedExtended(self, ordinal, _host_device_for(ordinal), replicas)
        return IPUExtended(self, ipu_device, cpu_device)

    @property
    def enable_dataset_iterators(self) -> bool:
        return self._enable_dataset_iterators

    @property
    def enable_keras_extensions(self) -> bool:
        return self._enable_keras_extensions

    def run(self, fn, args=(), kwargs=None, options=None):
        """Runs `fn(*args, **kwargs)` on the IPU device as a compiled program (every replica)."""
        configure.current_system("IPUStrategy.run")
        kwargs = kwargs or {}
        with device_scope.building_for(self.extended.ipu_ordinal):
            if tf.executing_eagerly():
                return self._region_function(fn)(*args, **kwargs)
            # Already inside a function being traced: the region joins it.
            return self._run_in_region(fn, args, kwargs, options)

    def experimental_run_v2(self, fn, args=(), kwargs=None, options=None):
        """The older name of `run`."""
        return self.run(fn, args, kwargs, options)

    def _run_in_region(self, fn, args, kwargs, options=None):
        """One compiled region holding every replica's run of `fn`."""
        converted = _converted(fn)
        ordinal = self.extended.ipu_ordinal

        def build():
            replica_fn = thread_state.for_replicas(converted, ordinal)
            outputs = distribute_lib.StrategyV1.run(self, replica_fn, args, kwargs, options)
            return _flatten_replicated(self, outputs)

        outputs = region.compile_region(
            build,
            [],
            _host_device_for(ordinal),
            ipu_ordinal=ordinal,
            flat_return_rules=False,
        )
        return _unflatten_replicated(outputs)

    def _region_function(self, fn):
        """A tf.function (cached per `fn`) that runs `fn` in one compiled region."""
        try:
            cached = self._region_functions.get(fn)
        except TypeError:  # not weak-referenceable
            cached = None
        if cached is not None:
            return cached
        strategy = self

        def run_everywhere(*args, **kwargs):
            return strategy._run_in_region(fn, args, kwargs)

        signature = fn.input_signature if isinstance(fn, polymorphic_function.Function) else None
        function = tf.function(run_everywhere, autograph=False, input_signature=signature)
        try:
            self._region_functions[fn] = function
        except TypeError:
            pass
        return function


IPUStrategy = IPUStrategyV1


def _converted(fn):
    """`fn` (a Python function or a tf.function) ready to trace: autograph applied once."""
    python_function = fn.python_function if isinstance(fn, polymorphic_function.Function) else fn
    if not getattr(fn, "_autograph", True):
        return python_function
    return autograph.tf_convert(python_function, ag_ctx.ControlStatusCtx(ag_ctx.Status.ENABLED))


def _flatten_replicated(strategy, outputs):
    """Per-replica values become tuples of their components (regions return tensors)."""
    if outputs is None:
        return None

    def flatten(value):
        if isinstance(value, distribute_values.DistributedValues):
            return {_REPLICATED_KEY: tuple(strategy.experimental_local_results(value))}
        return value

    return nest.map_structure(flatten, outputs)


_REPLICATED_KEY = "__openipu_per_replica__"


def _unflatten_replicated(outputs):
    """Inverse of `_flatten_replicated`, after the region."""
    if isinstance(outputs, dict) and set(outputs) == {_REPLICATED_KEY}:
        return distribute_values.PerReplica(tuple(outputs[_REPLICATED_KEY]))
    if isinstance(outputs, dict):
        return {k: _unflatten_replicated(v) for k, v in outputs.items()}
    if isinstance(outputs, (list, tuple)) and not hasattr(outputs, "_fields"):
        return type(outputs)(_unflatten_replicated(v) for v in outputs)
    return outputs


def current_strategy_ordinal() -> int | None:
    """The IPU device ordinal of the IPUStrategy whose scope is active, if any."""
    strategy = tf.distribute.get_strategy()
    if isinstance(strategy, IPUStrategyV1):
        return strategy.extended.ipu_ordinal
    return None
