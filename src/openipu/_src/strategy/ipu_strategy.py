"""`IPUStrategy`: the tf.distribute strategy that targets an emulated IPU device.

Everything `run` executes is a compiled region (see `engine.region`). A
function decorated with `tf.function(jit_compile=True)` is traced again
without TensorFlow's own XLA request, inside a region: that way dataset
iterators and outfeeds in it run on the host while the rest compiles, which
stock XLA could not do with the iterator inside.
"""

from __future__ import annotations

import weakref

import tensorflow as tf
from tensorflow.python.autograph.core import ag_ctx
from tensorflow.python.autograph.impl import api as autograph
from tensorflow.python.distribute import distribute_lib, one_device_strategy
from tensorflow.python.eager.polymorphic_function import polymorphic_function

from openipu._src.compiler import device_scope
from openipu._src.engine import region
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


class IPUStrategyV1(distribute_lib.StrategyV1):
    """Runs computations on an emulated IPU device (`/device:IPU:0` by default).

    Use `scope()` to build models and variables for the IPU, and `run()` to
    execute functions on it.
    """

    def __init__(
        self,
        ipu_device: str = "/device:IPU:0",
        cpu_device: str = "/device:CPU:0",
        enable_dataset_iterators: bool = True,
        enable_keras_extensions: bool = True,
    ) -> None:
        host_devices.ensure_logical_devices()
        super().__init__(IPUExtended(self, ipu_device, cpu_device))
        self._enable_dataset_iterators = bool(enable_dataset_iterators)
        self._enable_keras_extensions = bool(enable_keras_extensions)
        if self._enable_keras_extensions:
            from openipu._src.keras.extensions import activation

            activation.install()
        self._region_functions: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    @property
    def enable_dataset_iterators(self) -> bool:
        return self._enable_dataset_iterators

    @property
    def enable_keras_extensions(self) -> bool:
        return self._enable_keras_extensions

    def run(self, fn, args=(), kwargs=None, options=None):
        """Runs `fn(*args, **kwargs)` on the IPU device as a compiled program."""
        configure.current_system("IPUStrategy.run")
        kwargs = kwargs or {}
        with device_scope.building_for(self.extended.ipu_ordinal):
            if tf.executing_eagerly():
                return self._region_function(fn)(*args, **kwargs)
            # Already inside a function being traced: the region joins it.
            return super().run(_in_region(fn, self.extended.ipu_ordinal), args, kwargs, options)

    def experimental_run_v2(self, fn, args=(), kwargs=None, options=None):
        """The older name of `run`."""
        return self.run(fn, args, kwargs, options)

    def _region_function(self, fn):
        """A tf.function (cached per `fn`) that runs `fn` in one compiled region."""
        try:
            cached = self._region_functions.get(fn)
        except TypeError:  # not weak-referenceable
            cached = None
        if cached is not None:
            return cached
        strategy = self
        compiled = _in_region(fn, self.extended.ipu_ordinal)

        def run_in_replica(*args, **kwargs):
            return distribute_lib.StrategyV1.run(strategy, compiled, args, kwargs)

        signature = fn.input_signature if isinstance(fn, polymorphic_function.Function) else None
        function = tf.function(run_in_replica, autograph=False, input_signature=signature)
        try:
            self._region_functions[fn] = function
        except TypeError:
            pass
        return function


IPUStrategy = IPUStrategyV1


def _in_region(fn, ipu_ordinal: int):
    """`fn` (a Python function or a tf.function) as a function that builds a compiled region."""
    python_function = fn.python_function if isinstance(fn, polymorphic_function.Function) else fn
    uses_autograph = getattr(fn, "_autograph", True)
    converted = (
        autograph.tf_convert(python_function, ag_ctx.ControlStatusCtx(ag_ctx.Status.ENABLED))
        if uses_autograph
        else python_function
    )

    def build(*args, **kwargs):
        return region.compile_region(
            lambda: converted(*args, **kwargs),
            [],
            ipu_ordinal=ipu_ordinal,
            flat_return_rules=False,
        )

    return build


def current_strategy_ordinal() -> int | None:
    """The IPU device ordinal of the IPUStrategy whose scope is active, if any."""
    strategy = tf.distribute.get_strategy()
    if isinstance(strategy, IPUStrategyV1):
        return strategy.extended.ipu_ordinal
    return None
