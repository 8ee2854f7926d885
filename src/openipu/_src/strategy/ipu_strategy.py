"""`IPUStrategy`: the tf.distribute strategy that targets an emulated IPU device.

Everything `run` executes is a compiled region (see `engine.region`). A
function decorated with `tf.function(jit_compile=True)` is traced again
without TensorFlow's own XLA request, inside a region: that way dataset
iterators and outfeeds in it run on the host while the rest compiles, which
stock XLA could not do with the iterator inside.

Replication is a property of the compiled program, as on the IPU: from
tf.distribute's view the strategy has one replica (`num_replicas_in_sync` is 1,
tensorflow/python/ipu/ipu_strategy.py), and each program `run` compiles holds R
replicas built by the engine (`engine.replicas`), R being the IPUs of the device
configured when it is compiled over the IPUs one replica needs. Reductions in
replica context (an optimizer summing gradients) are cross-replica sums over
those R replicas, as the original's `_reduce_to` is on the IPU; outside a
program they change nothing. `run` returns replica 0's outputs.
"""

from __future__ import annotations

import contextlib
import weakref

import numpy as np
import tensorflow as tf
from tensorflow.python.autograph.core import ag_ctx
from tensorflow.python.autograph.impl import api as autograph
from tensorflow.python.distribute import distribute_lib, one_device_strategy
from tensorflow.python.distribute import values as distribute_values
from tensorflow.python.eager.polymorphic_function import polymorphic_function

from openipu._src.engine import device_scope, region, replicated_program
from openipu._src.engine.replicas import exchange_ops, lockstep, replicated
from openipu._src.feeds import infeed_iterator
from openipu._src.integration import dataset_iterators, patching
from openipu._src.strategy.keras_layer_extensions import KerasLayerExtensions
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
        # Any device string is accepted, as the original's IPUExtendedV1 does
        # (tensorflow/python/ipu/ipu_strategy.py): on a device other than an IPU, `fn` runs
        # there as ordinary TensorFlow and reductions leave values unchanged.
        ordinal = configure.ipu_ordinal(ipu_device)
        self._ipu_ordinal = ordinal
        self._ipu_device_name = ipu_device
        self._cpu_device_name = cpu_device
        device = ipu_device if ordinal is None else _host_device_for(ordinal)
        super().__init__(container_strategy, device)

    @property
    def ipu_ordinal(self) -> int | None:
        """The ordinal of the strategy's IPU device; None when it names another device."""
        return self._ipu_ordinal

    def _reduce_to(self, reduce_op, value, destinations, options):
        # tensorflow/python/ipu/ipu_strategy.py: inside an IPU program a reduction is a
        # cross-replica sum (or mean) over the program's replicas; elsewhere the identity.
        if (
            self._ipu_ordinal is None
            or lockstep.current() is None
            or isinstance(value, distribute_values.DistributedValues)
        ):
            return super()._reduce_to(reduce_op, value, destinations, options)
        total = exchange_ops.replica_sum(tf.convert_to_tensor(value))
        if reduce_op == tf.distribute.ReduceOp.MEAN:
            return total / tf.cast(lockstep.replica_count(), total.dtype)
        return total

    def _distribute_datasets_from_function(self, dataset_fn, options):
        # tensorflow/python/ipu/ipu_strategy.py: one input pipeline, the dataset as made.
        del options
        return dataset_fn(distribute_lib.InputContext())


class IPUStrategyV1(KerasLayerExtensions, distribute_lib.StrategyV1):
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
        self._enable_iterators = bool(enable_dataset_iterators)
        if self._enable_iterators:
            patching.apply(dataset_iterators.DATASET_ITER)
        self._enable_keras_extensions = bool(enable_keras_extensions)
        if self._enable_keras_extensions:
            # import cycle: keras.extensions.activation imports this module (Keras is above)
            from openipu._src.keras.extensions import activation

            activation.install()
        self._region_functions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __deepcopy__(self, memo):
        # TensorFlow's strategy copy (distribute_lib.py `StrategyBase.__deepcopy__`) copies
        # every field; the programs traced for this strategy are not copied (their graphs
        # cannot be): the copy traces its own.
        memo[id(self._region_functions)] = weakref.WeakKeyDictionary()
        return super().__deepcopy__(memo)

    def _create_extended(self, ipu_device: str, cpu_device: str):
        """The strategy internals (strategies spanning processes override this)."""
        return IPUExtended(self, ipu_device, cpu_device)

    @property
    def enable_dataset_iterators(self) -> bool:
        return self._enable_iterators

    def _enable_dataset_iterators(self) -> bool:
        """Whether `iter(dataset)` in this scope gives the strategy's iterator: when eager
        (the original's keras_extensions.py; asked by `integration/dataset_iterators.py`)."""
        return tf.executing_eagerly() and self._enable_iterators

    def _create_dataset_iterator(self, dataset: tf.data.Dataset):
        return infeed_iterator.DatasetIPUOwnedIterator(dataset)

    @property
    def enable_keras_extensions(self) -> bool:
        return self._enable_keras_extensions

    @property
    def supports_loss_scaling(self) -> bool:
        """Keras accepts loss scaling in this strategy's scope (as the original's)."""
        return True

    #: Whether `run` refuses a plain Python function eagerly: IPUStrategyV1 does
    #: (ipu_strategy.py `_validate_run_function`); the original's PopDistStrategy and
    #: IPUMultiWorkerStrategyV1 are no IPUStrategyV1 and run one.
    _refuses_eager_python = True

    def run(self, fn, args=(), kwargs=None, options=None):
        """Runs `fn(*args, **kwargs)` on the IPU device as a compiled program (every replica)."""
        if (
            self._refuses_eager_python
            and tf.executing_eagerly()
            and not isinstance(
                fn, (polymorphic_function.Function, tf.types.experimental.ConcreteFunction)
            )
        ):
            raise ValueError(
                "IPUStrategyV1.run(fn, ...) does not support eager execution. Either convert "
                "`fn` into a tf.function or consider calling strategy.run inside a tf.function."
            )
        kwargs = kwargs or {}
        if self.extended.ipu_ordinal is None:
            return self._run_off_ipu(fn, args, kwargs, options)
        configure.current_system("IPUStrategy.run")
        with device_scope.building_for(self.extended.ipu_ordinal):
            if tf.executing_eagerly():
                try:
                    return self._call_region_function(fn, args, kwargs)
                except Exception as error:  # noqa: BLE001 - autograph re-raises it as its own
                    if not replicated.must_trace_each_replica(error):
                        raise
                # Its replicas' Python cannot be traced once: a function tracing each replica
                # (the abandoned trace is dropped with its graph).
                self._region_function(fn, trace_each=True)
                return self._call_region_function(fn, args, kwargs)
            # Already inside a function being traced: the region joins it.
            return self._run_in_region(fn, args, kwargs, options)

    def _run_off_ipu(self, fn, args, kwargs, options):
        """`fn` as ordinary TensorFlow on the strategy's non-IPU device (no program, no
        configured system needed), with the original's float64 check on a tf.function."""
        if isinstance(fn, polymorphic_function.Function):
            _validate_dtypes(tf.nest.flatten((args, kwargs)), "input")
            _validate_dtypes(fn.get_concrete_function(*args, **kwargs).outputs, "output")
        return distribute_lib.StrategyV1.run(self, fn, args, kwargs, options)

    def experimental_run_v2(self, fn, args=(), kwargs=None, options=None):
        """The older name of `run`."""
        return self.run(fn, args, kwargs, options)

    def _run_in_region(self, fn, args, kwargs, options=None):
        """One compiled program holding every replica's run of `fn`."""
        converted = _converted(fn)
        if region.current_region() is not None or lockstep.current() is not None:
            # Inside a program being built (a Keras step): it is replicated already.
            return distribute_lib.StrategyV1.run(self, converted, args, kwargs, options)
        return replicated_program.compile_replicated(
            lambda: distribute_lib.StrategyV1.run(self, converted, args, kwargs, options),
            [],
            self.extended.ipu_ordinal,
            "IPUStrategy.run",
            flat_return_rules=False,
        )

    def _call_region_function(self, fn, args, kwargs):
        function = self._region_function(fn)
        if isinstance(fn, polymorphic_function.Function):
            _validate_dtypes(tf.nest.flatten((args, kwargs)), "input")
            concrete = function.get_concrete_function(*args, **kwargs)
            _validate_dtypes(concrete.outputs, "output")
        return function(*args, **kwargs)

    def _region_function(self, fn, trace_each: bool = False):
        """A tf.function (cached per `fn` and configuration) that runs `fn` as one program.

        A reconfigured system compiles the program again: its replica count follows the
        configuration in force, as the original recompiles for the configured device.
        `trace_each` makes (and caches) one whose replicas' Python is traced per replica.
        """
        system = configure.maybe_current_system()
        try:
            cached = self._region_functions.get(fn)
        except TypeError:  # not weak-referenceable
            cached = None
        if cached is not None and cached[0] is system and not trace_each:
            return cached[1]
        strategy = self
        each = lockstep.tracing_each_replica if trace_each else contextlib.nullcontext

        def run_everywhere(*args, **kwargs):
            with each():
                return strategy._run_in_region(fn, args, kwargs)

        signature = fn.input_signature if isinstance(fn, polymorphic_function.Function) else None
        function = tf.function(run_everywhere, autograph=False, input_signature=signature)
        try:
            self._region_functions[fn] = (system, function)
        except TypeError:
            pass
        return function


IPUStrategy = IPUStrategyV1


def _validate_dtypes(values, name: str) -> None:
    """The IPU has no float64: the original refuses it in a program's inputs and outputs."""
    for value in values:
        if getattr(value, "dtype", None) in (tf.float64, np.float64):
            raise TypeError(f"Unsupported data type for {name}: float64")


def _converted(fn):
    """`fn` (a Python function or a tf.function) ready to trace: autograph applied once."""
    python_function = fn.python_function if isinstance(fn, polymorphic_function.Function) else fn
    if not getattr(fn, "_autograph", True):
        return python_function
    return autograph.tf_convert(python_function, ag_ctx.ControlStatusCtx(ag_ctx.Status.ENABLED))
