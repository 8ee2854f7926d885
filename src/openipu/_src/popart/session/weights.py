"""A session's weights in their three places, as in the original.

- *host* weights: the IR's tensor data, which `writeWeights` and `resetHostWeights` change;
- *device* weights: `tf.Variable`s on the session's emulated IPU, which the program reads;
  `weightsFromHost` copies host -> device;
- *streamed* weights: the host stream buffers that `weightsToHost` fills from the device
  and `readWeights` copies out of.

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

import numpy as np
import onnx
import tensorflow as tf
from tensorflow.python.framework import tensor_util

from openipu._src.popart import reserved_names
from openipu._src.popart.errors import popart_exception
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

    def from_device(self) -> None:
        streamed = {name: np.array(array, copy=True) for name, array in self.host.items()}
        streamed.update({name: variable.numpy() for name, variable in self.device.items()})
        self._streamed = streamed

    def current(self) -> dict[str, np.ndarray]:
        """The weights the program uses now (the device's once it has them)."""
        values = dict(self.host)
        values.update({name: variable.numpy() for name, variable in self.device.items()})
        return values

    # -- user arrays ---------------------------------------------------------------------

    # readWeights and writeWeights go over the session's weights and use the arrays the user
    # gave for them; other ids are ignored, as Devicex::readWeights and writeWeights do
    # (willow/src/popx/devicex.cpp).

    def read_into(self, weights_io: PyWeightsIO) -> None:
        for name in weights_io.weightIds():
            if name not in self.host:
                continue
            if self._streamed is None:
                # Before weightsToHost the host stream buffers hold what Devicex::prepare
                # allocated them with: zeros.
                value = np.zeros_like(self.host[name])
            else:
                value = self._streamed[name]
            if name in self.grouped:
                value = self.grouped[name].host_copies(value)
            target = weights_io.array(name)
            self._check_array(name, target, value, "readWeights")
            target[...] = value.reshape(target.shape)

    def write_from(self, weights_io: PyWeightsIO) -> None:
        written = [name for name in weights_io.weightIds() if name in self.host]
        for name in written:
            if name not in self.weight_ids and name not in self.state_ids:
                raise popart_exception(
                    f"writeWeights: '{name}' ({self.host[name].dtype}) is constant data compiled "
                    "into the program, not a weight: it cannot be written"
                )
            source = weights_io.array(name)
            expected = self.host[name]
            if name in self.grouped and source.size != expected.size:
                # One copy per returning replica (VariableRetrievalMode.AllReplicas).
                expected = self.grouped[name].host_copies(expected)
            self._check_array(name, source, expected, "writeWeights")
        for name in written:
            array, shape = np.array(weights_io.array(name)), self.host[name].shape
            grouped = self.grouped.get(name)
            self.host[name] = (
                array.reshape(shape) if grouped is None else grouped.from_host_copies(array, shape)
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

    def _check_array(self, name: str, given: np.ndarray, weight: np.ndarray, what: str) -> None:
        if given.size != weight.size or given.dtype != weight.dtype:
            raise popart_exception(
                f"{what}: the array for '{name}' has dtype {given.dtype} and shape "
                f"{list(given.shape)}, but the weight is {weight.dtype} {list(weight.shape)}"
            )


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
