"""The scoping contexts of `ipu.scopes` (spec section 21.3).

Placement, sharding and numerical-precision hints are recorded on the
operations as the attributes the original used (XLA frontend attributes,
`_XlaSharding`), so they are visible to tools and to the cost model; the
emulated IPU computes in the requested precision where TensorFlow can.
"""

from __future__ import annotations

import contextlib
import numbers
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import cast

import numpy as np
import tensorflow as tf
from tensorflow.compiler.xla import xla_data_pb2
from tensorflow.core.framework import attr_value_pb2
from tensorflow.python.framework import ops

from openipu._src.compiler import sharding
from openipu._src.engine import device_scope, ipu_placement
from openipu._src.engine import region as region_lib
from openipu._src.engine.replicas import replicated
from openipu._src.system import configure, host_devices

FRONTEND_ATTRIBUTES_NAME = "_XlaFrontendAttributes"
SHARDING_ATTR_NAME = sharding.SHARDING_ATTR_NAME
OUTSIDE_COMPILATION_ATTR_NAME = "_xla_outside_compilation"
OUTSIDE_COMPILATION_NAME = OUTSIDE_COMPILATION_ATTR_NAME
PARTIALS_TYPE_ATTRIBUTE = "PARTIALS_TYPE"
STOCHASTIC_ROUNDING_ATTRIBUTE = "STOCHASTIC_ROUNDING"


def _graph_attr_scope(attrs: dict[str, attr_value_pb2.AttrValue]):
    # Eager operations have no attributes to annotate: the scope is then a no-op.
    if tf.executing_eagerly():
        return contextlib.nullcontext()
    return ops.get_default_graph()._attr_scope(attrs)  # noqa: SLF001 - TF's own scoping hook


@contextlib.contextmanager
def frontend_attribute(
    attribute_name: str, attribute_value: str | None, restore_to: str | None = None
) -> Iterator[None]:
    """Sets an XLA frontend attribute on the operations built inside the scope."""
    if not isinstance(attribute_name, str):
        raise TypeError(f"attribute_name must be a string, got {attribute_name!r}")
    if attribute_value is not None and not isinstance(attribute_value, str):
        raise TypeError(f"attribute_value must be a string, got {attribute_value!r}")
    proto = xla_data_pb2.FrontendAttributes()
    if not tf.executing_eagerly():
        current = ops.get_default_graph()._attr_scope_map.get(FRONTEND_ATTRIBUTES_NAME)  # noqa: SLF001
        if current is not None:
            proto.ParseFromString(current.s)
    previous = proto.map.get(attribute_name)
    if attribute_value is None:
        proto.map.pop(attribute_name, None)
    else:
        proto.map[attribute_name] = attribute_value
    with _graph_attr_scope(
        {FRONTEND_ATTRIBUTES_NAME: attr_value_pb2.AttrValue(s=proto.SerializeToString())}
    ):
        yield
    if previous is None and restore_to is not None and not tf.executing_eagerly():
        # The attribute was undefined before the scope: from now on it is `restore_to`.
        _set_frontend_default(attribute_name, restore_to)


def _set_frontend_default(attribute_name: str, value: str) -> None:
    graph = ops.get_default_graph()
    proto = xla_data_pb2.FrontendAttributes()
    current = graph._attr_scope_map.get(FRONTEND_ATTRIBUTES_NAME)  # noqa: SLF001
    if current is not None:
        proto.ParseFromString(current.s)
    proto.map[attribute_name] = value
    graph._attr_scope_map[FRONTEND_ATTRIBUTES_NAME] = attr_value_pb2.AttrValue(  # noqa: SLF001
        s=proto.SerializeToString()
    )


@contextlib.contextmanager
def ipu_jit_scope(ipu_scope: str) -> Iterator[None]:
    """Operations built inside are compiled together (as the JIT scope `ipu_scope`)."""
    attrs = {
        "_XlaCompile": attr_value_pb2.AttrValue(b=True),
        "_XlaSeparateCompiledGradients": attr_value_pb2.AttrValue(b=False),
        "_XlaScope": attr_value_pb2.AttrValue(s=f"jit_scope_ipu_{ipu_scope}".encode()),
    }
    with _graph_attr_scope(attrs):
        yield


@contextlib.contextmanager
def ipu_scope(device: str) -> Iterator[None]:
    """Places the operations built inside onto an IPU device, such as '/device:IPU:0'."""
    ordinal = configure.ipu_ordinal(device) if isinstance(device, str) else None
    if ordinal is None:
        # The original's ipu_scope is `ops.device(device)` in a JIT scope, whatever the device
        # (tensorflow/python/ipu/scopes.py): another device places the ops there.
        with ops.device(device), ipu_jit_scope("0"):
            yield
        return
    # A TF1 graph may be built before the system is configured (`engine/deferred_builds.py`).
    system = configure.maybe_current_system()
    host_device = (
        system.device(ordinal).host_device()
        if system is not None and ordinal < len(system.devices)
        else host_devices.host_device_for_ipu(ordinal)
    )
    with device_scope.building_for(ordinal), ops.device(host_device), ipu_jit_scope(str(ordinal)):
        yield


@contextlib.contextmanager
def ipu_shard(index: int | Iterable[int]) -> Iterator[None]:
    """Puts the enclosed operations (and their gradients) on shard `index` of a multi-IPU device.

    In a compiled program the ops run on the host device of the shard's IPU (of this
    replica: a replica spans as many IPUs as the program has shards, so a device of N
    IPUs runs N / shards replicas, as the original's poplar_compiler.cc).
    """
    # Any integer, numpy's too: the original puts them in an OpSharding proto's int64 field.
    # A non-integer fails in that field's assignment, a TypeError (a str is iterated first).
    given: list[object]
    if isinstance(index, numbers.Integral):
        given = [index]
    else:
        try:
            given = list(cast(Iterable[object], index))
        except TypeError:
            raise TypeError(
                f"ipu_shard: the shard index must be an int or ints, got {index!r}"
            ) from None
    for i in given:
        if not isinstance(i, numbers.Integral):
            raise TypeError(f"ipu_shard: the shard index must be an int or ints, got {index!r}")
        if isinstance(i, bool) or i < 0:
            raise ValueError(f"ipu_shard: the shard index must be an int >= 0, got {index!r}")
    indices = [int(cast(int, i)) for i in given]
    if not indices:
        raise ValueError(f"ipu_shard: give at least one shard index, got {index!r}")
    if tf.executing_eagerly():
        yield  # eager ops carry no attributes: nothing to shard (as the original)
        return
    # The original enables sharded tapes when `ipu` is imported (its __init__.py); they
    # matter from the first shard on, so here they are enabled then.
    sharding.enable_sharded_gradient_tape()
    graph = ops.get_default_graph()
    first_new = len(graph.get_operations())
    # A replica of this program spans the shards' IPUs (more replicas are built again).
    replicated.require_ipus_per_replica(max(indices) + 1)
    with (
        _graph_attr_scope(
            {
                sharding.SHARDING_ATTR_NAME: attr_value_pb2.AttrValue(
                    s=sharding.sharding_proto(indices)
                )
            }
        ),
        _on_shard_ipu(indices[0]),
    ):
        yield
    _make_gradients_sharded(graph.get_operations()[first_new:])


def _on_shard_ipu(shard: int) -> contextlib.AbstractContextManager[None]:
    placement = ipu_placement.replica_ipu_host_device(shard)
    if placement is None:
        return contextlib.nullcontext()
    return ops.device(ipu_placement.placer(*placement))


class _ShardedGradient:
    """An op's gradient function, built in the op's `ipu_shard` (the original's wrapper)."""

    def __init__(self, gradient_fn: Callable[..., object]) -> None:
        self.gradient_fn = gradient_fn

    def __call__(self, op: ops.Operation, *args: object, **kwargs: object) -> object:
        shard = sharding.get_sharding(op)
        if shard is None:
            return self.gradient_fn(op, *args, **kwargs)
        with ipu_shard(shard):
            return self.gradient_fn(op, *args, **kwargs)


def _make_gradients_sharded(new_ops: list[ops.Operation]) -> None:
    """Gradients of `new_ops` (tf.gradients, optimizers) are built on their op's shard."""
    for op in new_ops:
        try:
            gradient_fn = ops.get_gradient_function(op)
        except LookupError:
            continue
        if gradient_fn is None or isinstance(gradient_fn, _ShardedGradient):
            continue
        # The op's own gradient function takes precedence over the registry's.
        op._gradient_function = _ShardedGradient(gradient_fn)  # noqa: SLF001


class _OutsideDepth(threading.local):
    # Per thread: graphs built in other threads (workers of a between-graph program) have
    # their own scopes.
    depth = 0


_outside = _OutsideDepth()


@contextlib.contextmanager
def outside_compilation_scope(name: str = "outside") -> Iterator[None]:
    """Runs the enclosed operations on the host, outside the compiled IPU program."""
    region = region_lib.current_region()
    if region is None:
        # The original's messages first (tensorflow/python/ipu/scopes.py).
        raise ValueError(
            "outside_compilation_scope is only allowed in XLA context: inside an IPU "
            "compilation (ipu_compiler.compile, IPUStrategy.run or a device loop)"
        )
    if _outside.depth:
        raise ValueError(
            "Illegal nesting of outside_compilation_scope: it cannot be inside another one"
        )
    region.require_graph_mode(f"outside_compilation_scope({name!r})")
    _outside.depth += 1
    try:
        attrs = {OUTSIDE_COMPILATION_ATTR_NAME: attr_value_pb2.AttrValue(s=name.encode())}
        with ops.device("/device:CPU:0"), _graph_attr_scope(attrs):
            yield
    finally:
        _outside.depth -= 1


@contextlib.contextmanager
def partials_type(override_type) -> Iterator[None]:
    """EXPERIMENTAL: the type (float16 or float32) of conv/matmul partial results inside."""
    try:
        dtype = tf.as_dtype(override_type)
    except TypeError:
        dtype = None
    if dtype not in (tf.float16, tf.float32):
        try:
            given = str(np.dtype(override_type))
        except TypeError:
            given = repr(override_type)
        # The original's text (frontend_attributes_test.py matches it).
        raise ValueError(
            f"Only support float16, float32, provided {given} (partials_type override_type)"
        )
    value = np.dtype(dtype.as_numpy_dtype).name
    with frontend_attribute(PARTIALS_TYPE_ATTRIBUTE, value):
        yield


@contextlib.contextmanager
def stochastic_rounding(override: object) -> Iterator[None]:
    """EXPERIMENTAL: force stochastic rounding on or off for the enclosed operations.

    Any truth value is taken, as the original's `ON if override else OFF` (scopes.py)."""
    # Operations built after the outermost scope say "undefined", as the original's do.
    with frontend_attribute(
        STOCHASTIC_ROUNDING_ATTRIBUTE,
        "THREESTATE_ON" if override else "THREESTATE_OFF",
        restore_to="THREESTATE_UNDEFINED",
    ):
        yield
