"""`PyStepIO` and `PyStepIOCallback`: where a run reads its inputs and writes its anchors.

A run reads, for each input, one value per micro-batch and replica: `bps * af * rf` values of
the tensor's shape (`bps * af` for a `ReplicatedStreamMode.Broadcast` input), laid out
`[bps, af, rf, *shape]` in a flat buffer (replica r of a micro-batch reads the r-th value). Like the
original, only the element count of a host array is checked, not its shape; with runtime
asserts off a wrong-sized buffer is read and written cyclically (the original's wrapping
offset) instead of raising.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from openipu._src.popart.errors import OptionTypeError, popart_exception
from openipu._src.popart.options.typed_fields import check_bool
from openipu._src.popart.session.anchors import AnchorPlan
from openipu._src.popart.session.tensor_types import TensorSignature


@dataclass(frozen=True)
class InputPlan:
    """One streamed input of a session and how many values of it a run reads."""

    tensor_id: str
    signature: TensorSignature
    batches_per_step: int
    replication_factor: int
    broadcast: bool = False  # ReplicatedStreamMode.Broadcast: one value for all replicas
    accumulation_factor: int = 1

    @property
    def replicas_read(self) -> int:
        """Values per micro-batch on the host: one per replica, or one for all (Broadcast)."""
        return 1 if self.broadcast else self.replication_factor

    @property
    def fetches(self) -> int:
        return self.batches_per_step * self.accumulation_factor * self.replicas_read

    @property
    def stacked_shape(self) -> list[int]:
        """How the session holds a run's values read from the host: [fetches, *shape], in
        the host layout's order (batch, accumulation step, replica)."""
        return [self.fetches, *self.signature.shape]

    @property
    def program_shape(self) -> list[int]:
        """What the program reads: one value per micro-batch and replica, [bps * af * rf,
        *shape] (a broadcast value repeated for every replica)."""
        steps = self.batches_per_step * self.accumulation_factor
        return [steps * self.replication_factor, *self.signature.shape]

    def program_values(self, stacked: np.ndarray) -> np.ndarray:
        """The program's input from the values read (`stacked_shape`)."""
        if not self.broadcast or self.replication_factor == 1:
            return stacked
        return np.repeat(stacked, self.replication_factor, axis=0)


def _describe(array: np.ndarray) -> str:
    return f"shape {list(array.shape)}, dtype {array.dtype}"


def _check_dtype(array: np.ndarray, signature: TensorSignature, tensor_id: str, role: str) -> None:
    if signature.is_string:
        if array.dtype.kind in "OUS":
            return
    elif array.dtype == signature.numpy_dtype:
        return
    raise popart_exception(
        f"The {role} array for tensor '{tensor_id}' has dtype {array.dtype}, but the tensor is "
        f"{signature.dtype.name}: convert it, e.g. array.astype(np.{signature.numpy_dtype})"
    )


def _host_input(array: np.ndarray, signature: TensorSignature) -> np.ndarray:
    """The input as the stream takes it: int64 data for an int32 tensor is cast (as the
    original's Devicex::InputDatastream::read does, e.g. after GraphTransformer's
    convertINT64ToINT32), any other type must match (`_check_dtype`)."""
    if array.dtype == np.int64 and not signature.is_string and signature.numpy_dtype == np.int32:
        return array.astype(np.int32)
    return array


def _fitted(array: np.ndarray, count: int, asserts: bool, message: Callable[[], str]) -> np.ndarray:
    """`array` flattened to `count` elements: exact, or wrapped when asserts are off."""
    flat = array.reshape(-1)
    if flat.size == count:
        return flat
    if asserts or flat.size == 0:
        raise popart_exception(message())
    return np.resize(flat, count)


def _write_cyclically(target: np.ndarray, values: np.ndarray) -> None:
    """Writes values into target's flat buffer, wrapping as the original's offset does."""
    flat = target.reshape(-1)
    if not np.shares_memory(flat, target):
        raise popart_exception("Anchor arrays must be contiguous to be written in place")
    flat[np.arange(values.size) % flat.size] = values.reshape(-1)


class StepIO:
    """What a session asks of a step IO: a run's inputs, and a place for its anchors."""

    def read_inputs(self, plans: list[InputPlan]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def write_anchors(self, plans: list[AnchorPlan], values: dict[str, np.ndarray]) -> None:
        raise NotImplementedError


def _require_contiguous(array: Any, tensor_id: str, direction: str) -> None:
    """The original's PyStepIO takes C-contiguous arrays only (python/popart/popart_core/
    popart.cpp): a conversion would cost a copy per step."""
    if isinstance(array, np.ndarray) and not array.flags["C_CONTIGUOUS"]:
        raise popart_exception(
            f"PyStepIO is unable to use the numpy {direction} array for tensor '{tensor_id}' "
            "as it is not c-contiguous (a data conversion here could have a significant "
            "impact on performance and hence is not allowed)"
        )


class PyStepIO(StepIO):
    """Inputs and anchors in dicts of numpy arrays: `PyStepIO(inputs, outputs)`."""

    def __init__(self, inputs: Mapping[str, Any], outputs: Mapping[str, np.ndarray]) -> None:
        if not isinstance(inputs, Mapping) or not isinstance(outputs, Mapping):
            raise OptionTypeError(
                "PyStepIO(inputs, outputs) takes two dicts {tensor id: numpy array}, got "
                f"{type(inputs).__name__} and {type(outputs).__name__}"
            )
        self._inputs = {}
        for tensor_id, value in inputs.items():
            _require_contiguous(value, tensor_id, "input")
            try:
                self._inputs[tensor_id] = np.asarray(value)
            except (TypeError, ValueError) as error:
                raise OptionTypeError(
                    f"PyStepIO input '{tensor_id}' is not convertible to a numpy array: {error}"
                ) from None
        for tensor_id, value in outputs.items():
            _require_contiguous(value, tensor_id, "output")
            if not isinstance(value, np.ndarray):
                raise OptionTypeError(
                    f"PyStepIO output '{tensor_id}' must be a numpy array (written in place), "
                    f"got {type(value).__name__}"
                )
        self._outputs = dict(outputs)
        self._asserts = True

    def enableRuntimeAsserts(self, enable: bool) -> None:  # noqa: N802 - the original's name
        self._asserts = check_bool(enable, "PyStepIO.enableRuntimeAsserts(enable)")

    def held_arrays(self) -> tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]:
        """The input and anchor arrays this stepio holds (fixed when it was made)."""
        return self._inputs, self._outputs

    def read_inputs(self, plans: list[InputPlan]) -> dict[str, np.ndarray]:
        known = {plan.tensor_id for plan in plans}
        for tensor_id in self._inputs:
            if tensor_id not in known:
                raise popart_exception(
                    f"The tensor '{tensor_id}' has been provided as one of the inputs to the "
                    f"stepIO, but it is not registered as one of the inputs to the model "
                    f"(inputs: {sorted(known)})"
                )
        return {plan.tensor_id: self._read(plan) for plan in plans}

    def _read(self, plan: InputPlan) -> np.ndarray:
        if plan.tensor_id not in self._inputs:
            raise popart_exception(f"No tensor {plan.tensor_id} provided in PyStepIO's inputs")
        array = _host_input(self._inputs[plan.tensor_id], plan.signature)
        _check_dtype(array, plan.signature, plan.tensor_id, "input")
        count = plan.signature.nelms * plan.fetches

        def message() -> str:
            return (
                f"Unexpected number of input elements for Tensor {plan.tensor_id}. Expected "
                f"{count}, but received {array.size}: the array has {_describe(array)}; "
                f"expected an array of shape {_host_input_shape(plan)} (tensor shape "
                f"{list(plan.signature.shape)}, batches per step {plan.batches_per_step}, "
                f"accumulation factor {plan.accumulation_factor}, replication factor "
                f"{plan.replicas_read})"
            )

        return _fitted(array, count, self._asserts, message).reshape(plan.stacked_shape)

    def write_anchors(self, plans: list[AnchorPlan], values: dict[str, np.ndarray]) -> None:
        for plan in plans:
            if plan.tensor_id not in self._outputs:
                raise popart_exception(f"No tensor {plan.tensor_id} provided in PyStepIO's outputs")
        for plan in plans:
            target = self._outputs[plan.tensor_id]
            _check_dtype(target, plan.signature, plan.tensor_id, "output")
            value = values[plan.tensor_id]
            if target.size == value.size:
                # Element order is the flat buffer's; the array's own shape does not matter.
                target[...] = value.reshape(target.shape)
                continue
            if self._asserts:
                raise popart_exception(
                    f"Unexpected number of output elements for Tensor {plan.tensor_id}. "
                    f"Expected {value.size}, but received {target.size}: the array has "
                    f"{_describe(target)}; expected shape {plan.shape} (use "
                    "session.initAnchorArrays())"
                )
            _write_cyclically(target, value)


def _host_input_shape(plan: InputPlan) -> list[int]:
    outer = (plan.batches_per_step, plan.accumulation_factor, plan.replicas_read)
    return [d for d in outer if d != 1] + list(plan.signature.shape)


class PyStepIOCallback(StepIO):
    """Inputs and anchors through callbacks, one call per batch (and replica).

    `input_callback(id, prefetch) -> array` then `input_complete_callback(id)` for each value
    read; `output_callback(id) -> array` then `output_complete_callback(id)` for each value
    written. A run reads all its inputs before it computes, then writes its anchors.
    """

    def __init__(
        self,
        input_callback: Callable[[str, bool], np.ndarray],
        input_complete_callback: Callable[[str], None],
        output_callback: Callable[[str], np.ndarray],
        output_complete_callback: Callable[[str], None],
    ) -> None:
        callbacks = (
            input_callback,
            input_complete_callback,
            output_callback,
            output_complete_callback,
        )
        if not all(callable(callback) for callback in callbacks):
            raise OptionTypeError("PyStepIOCallback takes four callables")
        self._in, self._in_complete, self._out, self._out_complete = callbacks

    def read_inputs(self, plans: list[InputPlan]) -> dict[str, np.ndarray]:
        return {plan.tensor_id: self._read(plan) for plan in plans}

    def _read(self, plan: InputPlan) -> np.ndarray:
        values = []
        for _ in range(plan.fetches):
            array = self._in(plan.tensor_id, False)
            _require_contiguous(array, plan.tensor_id, "input")
            if array is None:
                raise popart_exception(
                    f"input_callback returned no data for tensor '{plan.tensor_id}'"
                )
            array = _host_input(np.asarray(array), plan.signature)
            _check_dtype(array, plan.signature, plan.tensor_id, "input")
            if array.size != plan.signature.nelms:
                raise popart_exception(
                    f"Unexpected number of input elements for Tensor {plan.tensor_id} from "
                    f"input_callback. Expected {plan.signature.nelms} (shape "
                    f"{list(plan.signature.shape)}), but received {array.size} ({_describe(array)})"
                )
            values.append(array.reshape(plan.signature.shape))
            self._in_complete(plan.tensor_id)
        return np.stack(values).reshape(plan.stacked_shape)

    def write_anchors(self, plans: list[AnchorPlan], values: dict[str, np.ndarray]) -> None:
        for plan in plans:
            for value in plan.per_batch(values[plan.tensor_id]):
                target = self._out(plan.tensor_id)
                _require_contiguous(target, plan.tensor_id, "output")
                if not isinstance(target, np.ndarray) or target.size != value.size:
                    got = _describe(target) if isinstance(target, np.ndarray) else repr(target)
                    raise popart_exception(
                        f"output_callback for tensor '{plan.tensor_id}' must return an array "
                        f"of {value.size} elements (shape {list(value.shape)}), got {got}"
                    )
                _check_dtype(target, plan.signature, plan.tensor_id, "output")
                target[...] = value.reshape(target.shape)
                self._out_complete(plan.tensor_id)
