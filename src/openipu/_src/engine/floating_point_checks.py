"""Floating-point exceptions: the IPU's `inv`, `div0` and `oflo` traps, checked on the host.

On the IPU, `IPUConfig.floating_point_behaviour.inv/div0/oflo` (or PopART's
`enableFloatingPointChecks`) make a tile that performs an invalid operation,
a division by zero or an overflow stop the program; the run then fails with
Poplar's "Tiles in excepted state" (the original's tests,
tensorflow/python/ipu/tests/floating_point_control_bits_test.py and
application_runtime_test.py; the error text is built in
tensorflow/compiler/plugin/poplar/driver/tools/poplar_util.cc).

Here, while a region is traced with any of these bits on, every floating-point
operation gets a check of what it produced (`checking`): an op that makes a NaN
from inputs without one (or casts a NaN or infinity to an integer) is an invalid
operation; a division (or reciprocal, reciprocal square root, logarithm) of a
non-zero value by zero is a division by zero; an op that makes an infinity from
finite inputs otherwise is an overflow. A failed check stops the run with the
chip's message, as an `InternalError` (`integration/run_errors.py`). Regions with checks run as TensorFlow graphs; without the bits
nothing is added, so programs keep their speed.

`nanoo` raises nothing: it makes a half-precision result that overflows a NaN
(floating_point_control_bits_test.py `test_nan_overflow_enabled`), which the same
callback does. Without it the chip saturates such results at the largest half value,
±65504 (`test_overflow`, `test_nan_overflow`; the original's ALS tests rely on it):
regions of a configured IPU system without `nanoo` get the callback for that alone,
which adds no checks and keeps the region compiled. The same callback gives two more of
the chip's results the host computes otherwise: a half-precision division by zero is NaN
(`test_division_by_zero`; IEEE's infinity would saturate here), and a NaN converted to
int32 is the smallest int32 (`test_invalid_operation`; the host gives 0). `esr`
(stochastic rounding) is kept.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_callbacks, ops
from tensorflow.python.ops import gen_math_ops

from openipu._src.integration import run_errors
from openipu._src.system import configure

#: The exception bits of `floating_point_behaviour` and what each traps.
BITS = {
    "inv": "invalid operation",
    "div0": "division by zero",
    "oflo": "overflow",
}

#: With `nanoo`, a half-precision result that overflows is a NaN (the chip's default
#: saturates it at the largest half value, which the host does not model).
ALL_BITS = frozenset([*BITS, "nanoo"])

_FLOAT_TYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64)
_DIVISIONS = {"RealDiv": 1, "Div": 1, "FloorDiv": 1, "TruncateDiv": 1, "DivNoNan": None}
_POLES = {"Reciprocal", "Inv", "Rsqrt", "Log"}  # one input, infinite at zero
# Ops that only move, pick or combine values: a NaN or infinity in their output was
# produced upstream (or came from the host), never by them.
_PASS_THROUGH = {
    "Identity",
    "IdentityN",
    "StopGradient",
    "Reshape",
    "Squeeze",
    "ExpandDims",
    "Transpose",
    "ConcatV2",
    "Pack",
    "Unpack",
    "Split",
    "SplitV",
    "Slice",
    "StridedSlice",
    "Gather",
    "GatherV2",
    "GatherNd",
    "Select",
    "SelectV2",
    "Tile",
    "BroadcastTo",
    "Fill",
    "ZerosLike",
    "OnesLike",
    "Enter",
    "Exit",
    "Merge",
    "Switch",
    "NextIteration",
    "TensorListGetItem",
    "TensorListSetItem",
    "TensorListStack",
    "TensorListFromTensor",
    "TensorListReserve",
    "Max",
    "Min",
    "Maximum",
    "Minimum",
    "Assert",
    "CheckNumerics",
    "CheckNumericsV2",
}
# Ops whose float16 results are never larger in magnitude than their inputs (or are
# bounded): they cannot make an infinity from finite inputs, so no overflow replacement
# is built for them (each replacement costs the program about ten ops). Their exception
# checks (e.g. `inv` of Sqrt) still apply.
_CANNOT_OVERFLOW = {
    "Abs",
    "Neg",
    "Sign",
    "Relu",
    "Relu6",
    "Elu",
    "Sqrt",
    "Tanh",
    "Sigmoid",
    "Softmax",
    "Sin",
    "Cos",
    "Floor",
    "Ceil",
    "Round",
    "Rint",
    "ReluGrad",
    "Relu6Grad",
    "TanhGrad",
    "SigmoidGrad",
    "Pad",
    "PadV2",
    "MirrorPad",
    "ReverseV2",
}
#: The message the chip's run fails with (poplar_util.cc `PoplarExceptionToTensorflowStatus`).
MESSAGE = (
    "[Poplar][Execute engine] application_runtime_error: [Recovery action: IPU_RESET] "
    "Tiles in excepted state [IPU {ordinal}]: floating-point exception: {what} "
    "(floating_point_behaviour.{bit}) in operation '{op}'. IPU will be reset the next "
    "time a program is executed."
)

#: The part of `MESSAGE` a front end recognises a trap by.
TRAPPED = "Tiles in excepted state"

_state = threading.local()


def _as_device_error(error: Exception) -> Exception:
    """A trap's failed run is an `InternalError`, as the original's (poplar_util.cc).

    The trap's `Assert` fails with an InvalidArgumentError; run by the embedded runtime
    from a TF1 graph, it reaches the session through a `py_function`, as an UnknownError.
    """
    converted: Exception = error
    failed_runs = (tf.errors.InvalidArgumentError, tf.errors.UnknownError)
    if isinstance(error, failed_runs) and TRAPPED in (error.message or ""):
        converted = tf.errors.InternalError(error.node_def, error.op, error.message)
    return converted


def convert_trap_errors() -> None:
    """Failed runs of this process whose checks trapped raise the original's InternalError
    (a program built elsewhere with checks, an executable, runs here)."""
    run_errors.install(_as_device_error)


def trap_message(error_message: str) -> str:
    """Poplar's own words from the message of a run a check stopped (PopART shows those)."""
    text = error_message.replace("\\'", "'")  # TensorFlow escapes quotes in assert messages
    match = re.search(r"Tiles in excepted state.*?in operation '[^']*'\.", text, re.S)
    return match.group(0) if match else text


def saturates_half() -> bool:
    """Whether half-precision overflows saturate: on a configured IPU system (TensorFlow's)
    without `nanoo`, unless a front end asked for checks of its own (PopART)."""
    return (
        configure.maybe_current_system() is not None
        and "nanoo" not in configured_bits()
        and not requested_bits()
    )


def configured_bits(ipu_ordinal: int = 0) -> frozenset[str]:
    """The exception bits on for the configured IPU system (`set_all` turns on all)."""
    system = configure.maybe_current_system()
    if system is None:
        return frozenset()
    behaviour = system.config.floating_point_behaviour
    if behaviour.set_all:
        return ALL_BITS
    return frozenset(bit for bit in ALL_BITS if getattr(behaviour, bit))


def requested_bits() -> frozenset[str]:
    """The bits a front end asked for in this thread with `requesting` (PopART sessions)."""
    stack = getattr(_state, "requested", [])
    return stack[-1] if stack else frozenset()


@contextlib.contextmanager
def requesting(bits: Iterable[str]) -> Iterator[None]:
    """Regions built in this thread within the context check for the exceptions of `bits`."""
    stack = _state.__dict__.setdefault("requested", [])
    stack.append(frozenset(bits))
    try:
        yield
    finally:
        stack.pop()


@contextlib.contextmanager
def checking(bits: frozenset[str], ipu_ordinal: int = 0, saturate: bool = False) -> Iterator[None]:
    """Ops built in this thread within the context check for the exceptions of `bits`
    (and, with `saturate` and no `nanoo`, saturate their half-precision overflows)."""
    saturate = saturate and "nanoo" not in bits
    if not (bits or saturate) or getattr(_state, "checking", False):
        # One callback per thread (a replica thread of a region re-enters it).
        yield
        return
    if bits:
        run_errors.install(_as_device_error)
    if saturate:
        # import cycle: the stepwise updates read `saturating_now`
        from openipu._src.engine import half_precision_updates

        half_precision_updates.install()
    callback = _Callback(frozenset(bits), ipu_ordinal, saturate)
    op_callbacks.add_op_callback(callback)
    _state.checking, _state.saturating = True, saturate
    try:
        yield
    finally:
        _state.checking, _state.saturating = False, False
        op_callbacks.remove_op_callback(callback)


def saturating_now() -> bool:
    """Whether ops built in this thread now saturate their half-precision overflows."""
    return bool(getattr(_state, "saturating", False))


class _Callback:
    def __init__(self, bits: frozenset[str], ipu_ordinal: int, saturate: bool) -> None:
        self.bits = bits
        self.ipu_ordinal = ipu_ordinal
        self.saturate = saturate
        self.building = False

    def __call__(
        self,
        op_type: str,
        inputs: Sequence[Any],
        attrs: Any,
        outputs: Sequence[Any] | None,
        op_name: str | bytes | None = None,
        graph: Any = None,
    ) -> list[Any] | None:
        # With nothing to do, the outputs as given: TensorFlow takes a callback's return
        # as the op's outputs, so None would drop an earlier callback's replacements (the
        # engine's random ops); None when given None (the op's own outputs are kept).
        given = None if outputs is None else list(outputs)
        if self.building or graph is None:
            return given
        if outputs is None:
            # An earlier callback (the engine's random ops) kept the outputs: TensorFlow then
            # passes None on.
            try:
                outputs = graph.get_operation_by_name(_text(op_name)).outputs
            except (KeyError, ValueError):
                return given
        if not outputs:
            return given
        if op_type in _PASS_THROUGH:
            return given
        self.building = True
        try:
            # Without exception bits (saturation alone) no check is built.
            checks = _checks(op_type, list(inputs), list(outputs), self.bits) if self.bits else []
            may_overflow_half = op_type not in _CANNOT_OVERFLOW and _half_results(inputs, outputs)
            nan_on_overflow = "nanoo" in self.bits and may_overflow_half
            saturating = self.saturate and may_overflow_half
            nan_to_int32 = _casts_float_to_int32(op_type, inputs, outputs)
            if not checks and not nan_on_overflow and not saturating and not nan_to_int32:
                return given
            if nan_to_int32:
                outputs = [_nan_as_int32_min(inputs[0], outputs[0])]
            if nan_on_overflow:
                outputs = _replace_overflows(op_type, list(inputs), list(outputs), float("nan"))
            elif saturating:
                outputs = _replace_overflows(op_type, list(inputs), list(outputs), None)
            if not checks:
                return list(outputs)
            name = _text(op_name)
            asserts = []
            with ops.name_scope(None), ops.name_scope(f"{name}_fp_check"):
                for bit, failed in checks:
                    message = MESSAGE.format(
                        ordinal=self.ipu_ordinal, what=BITS[bit], bit=bit, op=name
                    )
                    asserts.append(tf.debugging.Assert(tf.logical_not(failed), [message]))
                with ops.control_dependencies(asserts):
                    return [tf.identity(o) if isinstance(o, tf.Tensor) else o for o in outputs]
        finally:
            self.building = False


def _half_results(inputs: Sequence[Any], outputs: Sequence[Any]) -> bool:
    return any(_is_float(t) for t in inputs) and any(
        isinstance(t, tf.Tensor) and t.dtype == tf.float16 for t in outputs
    )


_HALF_MAX = float(np.finfo(np.float16).max)


_INT32_MIN = int(np.iinfo(np.int32).min)


def _casts_float_to_int32(op_type: str, inputs: Sequence[Any], outputs: Sequence[Any]) -> bool:
    return (
        op_type == "Cast"
        and len(inputs) == 1
        and _is_float(inputs[0])
        and isinstance(outputs[0], tf.Tensor)
        and outputs[0].dtype == tf.int32
    )


def _nan_as_int32_min(value: tf.Tensor, converted: tf.Tensor) -> tf.Tensor:
    """The chip converts a NaN to the smallest int32 (floating_point_control_bits_test.py
    `test_invalid_operation`, exceptions off); the host's conversion gives 0. Other values
    the host converts as the chip's tests expect."""
    return tf.where(tf.math.is_nan(value), tf.constant(_INT32_MIN, tf.int32), converted)


def _replace_overflows(
    op_type: str, inputs: list[Any], outputs: list[Any], value: float | None
) -> list[Any]:
    """Infinities a half-precision op makes from finite inputs become `value` (`nanoo`'s
    NaN), or, with None, the largest half value of their sign (the chip's saturation) --
    except those of a division by zero, which the chip makes NaN with or without `nanoo`
    (floating_point_control_bits_test.py `test_division_by_zero`: 10000 / 0 is NaN).

    Every half-precision op of a saturating region gets this, so it is built from few
    generated ops (a region's trace time grows with their number): saturation is a clip
    to [-65504, 65504] where the inputs were finite, which leaves finite values and NaNs
    as they are and takes an infinity to the largest half value of its sign."""
    finite_in = _all_finite([t for t in inputs if _is_float(t)])
    divides = op_type in _DIVISIONS and len(inputs) == 2 and _is_float(inputs[1])
    replaced = []
    for t in outputs:
        if isinstance(t, tf.Tensor) and t.dtype == tf.float16:
            if value is None and not divides:
                clipped = gen_math_ops.minimum(
                    gen_math_ops.maximum(t, _half_constant(-_HALF_MAX)), _half_constant(_HALF_MAX)
                )
                t = _where(finite_in, clipped, t)
                replaced.append(t)
                continue
            overflowed = gen_math_ops.logical_and(gen_math_ops.is_inf(t), finite_in)
            if value is None:
                substitute = tf.sign(t) * _half_constant(_HALF_MAX)
                by_zero = tf.broadcast_to(tf.equal(inputs[1], 0), tf.shape(t))
                substitute = tf.where(by_zero, _half_constant(np.nan), substitute)
            else:
                substitute = _half_constant(value)
            t = tf.where(overflowed, substitute, t)
        replaced.append(t)
    return replaced


def _all_finite(tensors: list[tf.Tensor]) -> tf.Tensor:
    """A scalar: whether every element of `tensors` is finite (True for none)."""
    finite = None
    for t in tensors:
        all_of_t = _per_graph(("all finite", t.ref()), functools.partial(_all_finite_of, t))
        finite = all_of_t if finite is None else gen_math_ops.logical_and(finite, all_of_t)
    return finite if finite is not None else tf.constant(True)


def _all_finite_of(t: tf.Tensor) -> tf.Tensor:
    axes = _int32_range(t.shape.rank) if t.shape.rank is not None else tf.range(tf.rank(t))
    return gen_math_ops._all(gen_math_ops.is_finite(t), axes)  # noqa: SLF001


def _where(condition: tf.Tensor, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """`tf.where` of a scalar condition, as one generated op with the static shape kept."""
    result = gen_math_ops.select_v2(condition, x, y)
    result.set_shape(y.shape)
    return result


def _half_constant(value: float) -> tf.Tensor:
    return _graph_constant(value, tf.float16)


def _int32_range(rank: int) -> tf.Tensor:
    return _graph_constant(tuple(range(rank)), tf.int32)


_PER_GRAPH: weakref.WeakKeyDictionary[ops.Graph, dict[tuple[Any, ...], tf.Tensor]] = (
    weakref.WeakKeyDictionary()
)


def _graph_constant(value: Any, dtype: tf.DType) -> tf.Tensor:
    return _per_graph((repr(value), dtype), lambda: tf.constant(value, dtype, name="saturation"))


def _per_graph(key: tuple[Any, ...], build: Callable[[], tf.Tensor]) -> tf.Tensor:
    """`build()` once per graph, control-flow context and control dependencies (a tensor
    made outside the context would not be a constant to XLA's cluster of a TF1 graph, one
    made under other dependencies would order the ops that read it)."""
    graph = ops.get_default_graph()
    full_key = (
        *key,
        graph._get_control_flow_context(),  # noqa: SLF001
        frozenset(graph._current_control_dependencies()),  # noqa: SLF001
    )
    built = _PER_GRAPH.setdefault(graph, {})
    if full_key not in built:
        with ops.name_scope(None):
            built[full_key] = build()
    return built[full_key]


def _text(name: str | bytes | None) -> str:
    return name.decode() if isinstance(name, bytes) else str(name)


def _is_float(t: Any) -> bool:
    return isinstance(t, tf.Tensor) and t.dtype in _FLOAT_TYPES


def _any(t: tf.Tensor) -> tf.Tensor:
    return tf.reduce_any(t)


def _checks(
    op_type: str, inputs: list[Any], outputs: list[Any], bits: frozenset[str]
) -> list[tuple[str, tf.Tensor]]:
    """(bit, scalar bool tensor that is True when the op trapped) for this op."""
    float_inputs = [t for t in inputs if _is_float(t)]
    float_outputs = [t for t in outputs if _is_float(t)]
    checks = []
    if op_type == "Cast" and float_inputs and not float_outputs:
        # A NaN or infinity converted to an integer.
        if "inv" in bits and outputs[0].dtype.is_integer:
            checks.append(("inv", _any(~tf.math.is_finite(float_inputs[0]))))
        return checks
    if not float_inputs or not float_outputs:
        return checks  # constants, variable reads, host data: nothing computed here
    zero_divisor = None
    if op_type in _DIVISIONS and len(inputs) == 2 and _is_float(inputs[1]):
        if op_type == "DivNoNan":
            return checks  # defined as 0 where the divisor is 0
        numerator, divisor = inputs
        zero_divisor = tf.equal(divisor, 0)
        if "div0" in bits:
            nonzero = tf.logical_and(tf.not_equal(numerator, 0), tf.math.is_finite(numerator))
            checks.append(("div0", _any(tf.logical_and(zero_divisor, nonzero))))
    elif op_type in _POLES and len(inputs) == 1:
        zero_divisor = tf.equal(inputs[0], 0)
        if "div0" in bits:
            checks.append(("div0", _any(zero_divisor)))
    if "inv" in bits:
        nan_in = tf.reduce_any([_any(tf.math.is_nan(t)) for t in float_inputs])
        nan_out = tf.reduce_any([_any(tf.math.is_nan(t)) for t in float_outputs])
        checks.append(("inv", tf.logical_and(nan_out, tf.logical_not(nan_in))))
    if "oflo" in bits:
        inf_in = tf.reduce_any([_any(tf.math.is_inf(t)) for t in float_inputs])
        produced = []
        for t in float_outputs:
            inf = tf.math.is_inf(t)
            if zero_divisor is not None:
                # Infinities from a division by zero are div0's, not overflows.
                inf = tf.logical_and(inf, tf.logical_not(zero_divisor))
            produced.append(_any(inf))
        checks.append(("oflo", tf.logical_and(tf.reduce_any(produced), tf.logical_not(inf_in))))
    return checks
