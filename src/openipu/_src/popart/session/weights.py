"""A session's weights in their three places, as in the original.

- *host* weights: the IR's tensor data, which `writeWeights` and `resetHostWeights` change;
- *device* weights: `tf.Variable`s on the session's emulated IPU, which the program reads;
  `weightsFromHost` copies host -> device;
- *streamed* weights: the host stream buffers that `weightsToHost` fills from the device
  and `readWeights` copies out of. With `SessionOptions.enableVariablesCaching` off (it is on
  by default) a variable of which the host reads one copy per group has no buffer of its
  own: `weightsToHost` writes the device's value into its host weight, and `readWeights`
  reads the host weight (`streams_into_host`).

Training sessions keep their optimizer state here too (`add_state`): PopART's optimizer state
tensors are variables like the weights (`Accl___<w>`, ...), which weightsFromHost, weightsToHost,
readWeights and checkpoints move; the program reads them itself, not as model initializers.
Initializers with PopART's reserved names (optimizer state a training session wrote with
modelToHost) are not weights: a training session of the same optimizer restores its state
from them.

Floating-point initializers are the weights. Other initializers (shapes, indices, tables)
are constant data compiled into the program, as values that decide shapes must be known
when compiling; they can be read but not written. The few constants a TensorFlow graph
cannot embed (scalars of the float8 "fnuz" types) reach the program as float32 tensors that
the step casts back.

Weights whose VariableSettings give each group of replicas its own value, and their optimizer
state, hold every group's value here (`grouped_weights.py`); a step reads and writes them
through `read` and `assign`, which give each replica its group's row.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import onnx
import tensorflow as tf
from tensorflow.python.framework import tensor_util

from openipu._src.popart import reserved_names
from openipu._src.popart.errors import (
    popart_exception,
    popart_internal_exception,
    popart_runtime_error,
)
from openipu._src.popart.external_data import initializer_array
from openipu._src.popart.lowering.dtypes import is_narrow
from openipu._src.popart.lowering.tensor_utils import cast
from openipu._src.popart.session import grouped_weights
from openipu._src.popart.session.grouped_weights import GroupedVariable
from openipu._src.popart.session.weights_io import PyWeightsIO


def _is_weight(name: str, array: np.ndarray) -> bool:
    if reserved_names.is_reserved(name):
        return False
    try:
        dtype = tf.as_dtype(array.dtype)
    except TypeError:
        return False
    # TensorFlow stores float8 but has no variables of it: such tensors stay constants.
    return dtype.is_floating and not is_narrow(dtype)


class WeightStore:
    def __init__(
        self,
        initializers: dict[str, np.ndarray],
        grouped: dict[str, GroupedVariable] | None = None,
    ) -> None:
        self.host = {name: np.array(array, copy=True) for name, array in initializers.items()}
        self.grouped = dict(grouped or {})
        self.weight_ids = [name for name, array in self.host.items() if _is_weight(name, array)]
        self.state_ids: list[str] = []
        self.device: dict[str, tf.Variable] = {}
        self.unembeddable: dict[str, tuple[tf.Tensor, tf.DType]] = {}
        self._streamed: dict[str, np.ndarray] | None = None
        # Set by the session: whether the initializers are constants, not variables (an
        # inference session with constantWeights), and the variables weightsToHost leaves out.
        self.constant_weights = False
        self.unstreamed: set[str] = set()
        # Set by the session: not SessionOptions.enableVariablesCaching.
        self.no_variables_caching = False

    # -- device copies -------------------------------------------------------------------

    def add_state(
        self, values: dict[str, np.ndarray], grouped: dict[str, GroupedVariable] | None = None
    ) -> None:
        """Optimizer state tensors, with their starting values (before place_on), and how
        those of grouped weights are grouped."""
        self.grouped.update(grouped or {})
        for name, value in values.items():
            self.host[name] = np.array(value, copy=True)
            if name not in self.state_ids:
                self.state_ids.append(name)

    def place_on(self, host_device: str) -> None:
        with tf.init_scope(), tf.device(host_device):
            self.device = {
                name: tf.Variable(self.host[name], trainable=False, name=variable_name(name))
                for name in [*self.weight_ids, *self.state_ids]
            }
            self.unembeddable = {
                name: (tf.constant(array.astype(np.float32)), tf.as_dtype(array.dtype))
                for name, array in self.host.items()
                if name not in self.device and not _embeddable(array)
            }

    def program_values(self) -> dict[str, tf.Tensor | tf.Variable]:
        """Inside a step: what the program reads for initializers (others are compiled in)."""
        values: dict[str, tf.Tensor | tf.Variable] = {
            n: self.read(n) if n in self.grouped else self.device[n] for n in self.weight_ids
        }
        for name, (wide, dtype) in self.unembeddable.items():
            values[name] = cast(wide, dtype)
        return values

    def read(self, name: str) -> tf.Tensor:
        """Inside a step: the value of a device variable this replica uses, read now."""
        value = self.device[name].read_value()
        grouped = self.grouped.get(name)
        if grouped is None or not grouped.split:
            return value
        return grouped_weights.replica_row(value, grouped)

    def assign(self, name: str, value: tf.Tensor) -> object:
        """Inside a step: this replica's new value of a device variable (all replicas assign)."""
        variable = self.device[name]
        value = tf.cast(value, variable.dtype)
        grouped = self.grouped.get(name)
        if grouped is not None and grouped.split:
            value = grouped_weights.gathered_rows(value, grouped)
        return variable.assign(value)

    def replica_shape(self, name: str) -> tuple[int, ...]:
        """The shape of a variable on one replica."""
        shape = tuple(self.host[name].shape)
        grouped = self.grouped.get(name)
        return shape[1:] if grouped is not None and grouped.split else shape

    def to_device(self) -> None:
        for name, variable in self.device.items():
            variable.assign(self.host[name])

    def streams_into_host(self, name: str) -> bool:
        """Whether the device-to-host stream of `name` writes its host weight (the IR's tensor
        data) itself, with no buffer between: Devicex::needsIntermediaryD2hWeightBuffer
        (willow/src/popx/devicex.cpp:1910-1940) is false when enableVariablesCaching is off
        and the host reads as many copies as there are groups (an AllReplicas weight of groups
        of more than one replica still has its buffer). getD2hWeightData (devicex.cpp:1962)
        then gives the tensor data, which readWeights copies from (hostStreamToHost,
        devicex.cpp:864-941) and the WeightsToHost program writes into (devicex.cpp:1551-1566)."""
        if not self.no_variables_caching:
            return False
        grouped = self.grouped.get(name)
        return grouped is None or grouped.returned == grouped.groups

    def from_device(self) -> None:
        previous = self._streamed
        streamed = {name: np.array(array, copy=True) for name, array in self.host.items()}
        streamed.update({name: variable.numpy() for name, variable in self.device.items()})
        # Tensors whose storing is disabled keep what their buffers held (Ir::
        # storingIsDisabledForTensor, willow/src/ir.cpp; Devicex::d2hWeightBuffersToTensorData).
        for name in self.unstreamed & set(streamed):
            streamed[name] = previous[name] if previous else np.zeros_like(self.host[name])
        self._streamed = streamed
        for name in set(self.device) - self.unstreamed:
            if self.streams_into_host(name):
                # The stream's buffer is the host weight (its stream is connected only when
                # streaming is enabled for it: devicex.cpp:1559).
                self.host[name] = np.array(streamed[name], copy=True)

    def current(self) -> dict[str, np.ndarray]:
        """The weights the program uses now (the device's once it has them)."""
        values = dict(self.host)
        values.update({name: variable.numpy() for name, variable in self.device.items()})
        return values

    # -- user arrays ---------------------------------------------------------------------

    def restore(self, values: dict[str, np.ndarray]) -> None:
        """Host values as the session saved them (an executable's variables)."""
        for name, value in values.items():
            if name in self.host:
                self.host[name] = np.asarray(value).reshape(self.host[name].shape)

    # readWeights and writeWeights go over the session's variables and use the arrays the user
    # gave for them; other ids are ignored, as Devicex::readWeights and writeWeights do
    # (willow/src/popx/devicex.cpp:534-562, over Executablex::getWeightTensors: the
    # TensorType::Variable tensors).

    def io_ids(self) -> list[str]:
        """The tensors readWeights and writeWeights see. With constantWeights an inference
        session's initializers are constants, but for those of which more than one copy reaches
        the host (willow/src/ir.cpp, Ir::addInitializer... "inference_constants")."""
        if not self.constant_weights:
            return list(self.host)
        return [n for n, g in self.grouped.items() if n in self.host and g.returned != 1]

    def _returned(self, name: str) -> int:
        grouped = self.grouped.get(name)
        return 1 if grouped is None else grouped.returned

    def read_into(self, weights_io: PyWeightsIO) -> None:
        for name in self.io_ids():
            if not weights_io._contains(name):
                continue
            target = weights_io._weight(name)
            if self.streams_into_host(name):
                # No buffer of its own: the host weight, whether weightsToHost was called or
                # not (its initial value, or what writeWeights gave it, until then).
                value = self.host[name]
            elif self._streamed is None:
                # Before weightsToHost the host stream buffers hold what Devicex::prepare
                # allocated them with: zeros.
                value = np.zeros_like(self.host[name])
            else:
                value = self._streamed[name]
            if name in self.grouped:
                value = self.grouped[name].host_copies(value)
            # Only the byte counts must agree: the bytes are copied whatever the array's
            # dtype and shape (Devicex::hostStreamToHost, willow/src/popx/devicex.cpp:931-941).
            if target.nbytes != value.nbytes:
                raise popart_runtime_error(
                    f"sizes (in bytes) of src ({value.nbytes}) and dst ({target.nbytes}) differ "
                    f"in hostStreamToHost for {name}"
                )
            target.reshape(-1).view(np.uint8)[...] = (
                np.ascontiguousarray(value).reshape(-1).view(np.uint8)
            )

    def write_from(self, weights_io: PyWeightsIO) -> None:
        # Each weight is checked, then written, in turn (Devicex::writeWeights).
        for name in self.io_ids():
            if not weights_io._contains(name):
                continue
            source = weights_io._weight(name)
            replica_shape = list(self.replica_shape(name))
            returned = self._returned(name)
            write_shape = replica_shape if returned == 1 else [returned, *replica_shape]
            if list(source.shape) != write_shape:
                # Tensor::verifyMutableVoidInfo (willow/src/tensor.cpp:1229): the array's shape
                # must be the tensor's, with one row per returned copy; its dtype is not checked.
                raise popart_internal_exception(
                    "The shape of the MutableVoidData for IO does not not match the expected "
                    f"write region of this tensor. Tensor Write ({len(replica_shape)}): "
                    f"{_sequence(write_shape)} != MutableVoidData ({source.ndim}): "
                    f"{_sequence(source.shape)}"
                )
            host = self.host[name]
            if source.nbytes != host.nbytes:
                # TensorData::resetData (willow/src/tensordata.cpp): the host data has one value
                # per group, so the byte counts differ for another dtype's array, or for one
                # copy per replica (AllReplicas) of a weight with fewer groups.
                raise popart_exception(
                    "cannot reset tensor data with data of non-matching size "
                    f"{host.nbytes} vs {source.nbytes}"
                )
            if name not in self.weight_ids and name not in self.state_ids:
                # openipu compiles non-float initializers into the program: they cannot change.
                raise popart_exception(
                    f"writeWeights: '{name}' ({host.dtype}) is constant data compiled "
                    "into the program, not a weight: it cannot be written"
                )
            # The bytes are copied, as memcpy does: an array of another dtype of the same
            # size is taken bit for bit.
            self.host[name] = (
                np.frombuffer(source.tobytes(), dtype=host.dtype).reshape(host.shape).copy()
            )

    def reset_from_model(self, model: onnx.ModelProto, ignore_unknown: bool) -> None:
        updates = {}
        for tensor in model.graph.initializer:
            if tensor.name not in self.host:
                if ignore_unknown:
                    continue
                # The original's message exactly: its tests compare the whole text
                # (session_api_tests/reset_host_weights_test.py).
                raise popart_exception(f"resetWeights, no tensor '{tensor.name}' in tensors")
            value = initializer_array(tensor)
            known = self.host[tensor.name]
            if value.shape != known.shape or value.dtype != known.dtype:
                raise popart_exception(
                    f"resetHostWeights: the TensorInfo of '{tensor.name}' in the model "
                    f"({value.dtype} {list(value.shape)}) does not match the session's "
                    f"({known.dtype} {list(known.shape)})"
                )
            updates[tensor.name] = value
        self.host.update(updates)


def _sequence(values: Iterable[object]) -> str:
    """A sequence as the original's messages print it (appendSequence, util.hpp): "[4 3]"."""
    return "[" + " ".join(str(value) for value in values) + "]"


def _embeddable(array: np.ndarray) -> bool:
    try:
        tensor_util.make_tensor_proto(array)
    except (TypeError, ValueError):
        return False
    return True


def variable_name(tensor_id: str) -> str:
    # TensorFlow variable names allow fewer characters than ONNX tensor ids.
    cleaned = "".join(c if c.isalnum() or c in "_.-" else "_" for c in tensor_id)
    return cleaned.lstrip("_.-") or "weight"
