"""Patch: the errors of failed runs, made the type the original's device raised.

Targets (TensorFlow 2.21): `tensorflow.python.eager.context.Context.call_function` (a
method; every `tf.function` call runs its graph through it, `atomic_function.py`) and
`tensorflow.python.client.session.BaseSession._do_call` (a method; every TF1
`Session.run` goes through it).

Why: openipu checks the IPU's floating-point traps with `Assert` ops
(`engine/floating_point_checks.py`), whose failure is an `InvalidArgumentError`; on the
original a trap is Poplar's application runtime error, which the backend reports as an
`InternalError` (tensorflow/compiler/plugin/poplar/driver/tools/poplar_util.cc
`PoplarExceptionToTensorflowStatus`). The engine installs converters that recognise its
checks' messages (traps; a LAST-mode outfeed read before anything was enqueued, a
FailedPreconditionError on the original); other errors pass unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from tensorflow.python.framework import errors

from openipu._src.integration.patching import Kind, Patch, apply, register

#: `convert(error) -> error`: the error to raise instead (or the same one).
_converter: list[Callable] = []


def _convert(error):
    for convert in _converter:
        converted = convert(error)
        if converted is not error:
            return converted
    return error


def _converting(stock: Callable) -> Callable:
    """`stock`, raising the converted error of a failed run."""

    @functools.wraps(stock)
    def replacement(*args, **kwargs):
        try:
            return stock(*args, **kwargs)
        except Exception as error:
            converted = _convert(error)
            if converted is error:
                raise
            raise converted from None

    return replacement


CALL_FUNCTION = register(
    Patch(
        module="tensorflow.python.eager.context",
        attribute="Context.call_function",
        kind=Kind.METHOD,
        replacement=_converting,
        reason="a floating-point trap of a tf.function run is an InternalError, as the "
        "original's device error",
        tensorflow=("2.21",),
    )
)

SESSION_DO_CALL = register(
    Patch(
        module="tensorflow.python.client.session",
        attribute="BaseSession._do_call",
        kind=Kind.METHOD,
        replacement=_converting,
        reason="a floating-point trap of a TF1 session run is an InternalError, as the "
        "original's device error",
        tensorflow=("2.21",),
    )
)


class assertion_as:  # noqa: N801 - used as a function: run_errors.assertion_as(...)
    """A converter: a failed assertion (InvalidArgumentError) whose message holds `marker`
    becomes `error_type` with the assertion's message (the engine's checks standing in for
    the original's kernels). Equal converters are installed once."""

    def __init__(self, error_type: type, marker: str) -> None:
        self.error_type, self.marker = error_type, marker

    def __eq__(self, other: object) -> bool:
        return isinstance(other, assertion_as) and (other.error_type, other.marker) == (
            self.error_type,
            self.marker,
        )

    def __hash__(self) -> int:
        return hash((self.error_type, self.marker))

    def __call__(self, error):
        if isinstance(error, errors.InvalidArgumentError) and self.marker in (error.message or ""):
            text = _assertion_text(error.message, self.marker)
            return self.error_type(error.node_def, error.op, text)
        return error


def _assertion_text(message: str, marker: str) -> str:
    """The assertion's own text: of the data it printed, the entry holding `marker`.

    TensorFlow's Assert kernel reports "assertion failed: [a] [b] ..." (each datum in
    brackets, on the message's first line); the original's kernels report the text alone.
    """
    for line in message.replace("\\'", "'").split("\n"):
        if marker not in line:
            continue
        # A function's error starts with "{{function_node ...}} " before the assertion.
        _, found, after = line.partition(_ASSERT_PREFIX)
        line = after if found else line
        entry = next(part for part in line.split("] [") if marker in part)
        return entry.strip().strip("[]").strip("'\"")
    return message


_ASSERT_PREFIX = "assertion failed: "


def install(convert: Callable) -> None:
    """Failed runs' errors pass through `convert(error) -> error` (idempotent); of several
    converters, the first that converts an error decides."""
    marker = getattr(convert, "marker", None)
    if all(
        convert is not installed
        and (marker is None or getattr(installed, "marker", None) != marker)
        for installed in _converter
    ):
        _converter.append(convert)
    apply(CALL_FUNCTION)
    apply(SESSION_DO_CALL)
