"""PopART's exception types, with the hierarchy python/popart/popart_core/popart.cpp gives
them (PopART's, Poplibs' and Poplar's errors, each a Python exception class)."""

import enum


class popart_exception(RuntimeError):  # noqa: N801 - the original's name
    """The error PopART raises for bad models, options, inputs and tensor ids."""


class popart_runtime_error(popart_exception):  # noqa: N801 - the original's name
    """A failure while a session runs."""


class popart_internal_exception(popart_exception):  # noqa: N801 - the original's name
    """An error in PopART itself (popart::internal_error), not in the user's model."""


class poplibs_exception(RuntimeError):  # noqa: N801 - the original's name
    """An error from the Poplibs libraries (poputil::poplibs_error)."""


class poplar_exception(RuntimeError):  # noqa: N801 - the original's name
    """An error from Poplar (popart.cpp registers Poplar's exceptions under these names)."""


class poplar_runtime_error(poplar_exception):  # noqa: N801 - the original's name
    """An error while Poplar runs a program."""


class poplar_application_runtime_error(poplar_runtime_error):  # noqa: N801 - the original's name
    """The program failed on the device (a floating-point exception with the checks on)."""


class poplar_system_runtime_error(poplar_runtime_error):  # noqa: N801 - the original's name
    """The system (device, link, driver) failed while a program ran."""


class RecoveryAction(enum.Enum):
    """What a recoverable system error asks for (poplar::RecoveryAction)."""

    IPU_RESET = 0
    LINK_RESET = 1
    PARTITION_RESET = 2
    FULL_RESET = 3


class poplar_recoverable_runtime_error(poplar_system_runtime_error):  # noqa: N801
    """A system error the `recoveryAction` recovers from (the original's name)."""

    def __init__(self, message: str = "", recoveryAction: RecoveryAction | None = None) -> None:  # noqa: N803
        super().__init__(message)
        self.recoveryAction = recoveryAction


class poplar_unrecoverable_runtime_error(poplar_system_runtime_error):  # noqa: N801
    """A system error nothing recovers from (the original's name)."""


class poplar_unknown_runtime_error(poplar_system_runtime_error):  # noqa: N801
    """A system error of unknown cause (the original's name)."""


class OutOfMemoryException(popart_exception):
    """The modelled IPU memory is too small for the graph (raised by prepareDevice).

    `OutOfMemoryException(e)` as in the original takes an error whose getSummaryReport and
    getProfilePath it forwards; sessions give the cost model's summary directly.
    """

    def __init__(self, e: object = "", summary_report: str = "", profile_path: str = "") -> None:
        super().__init__(str(e))
        self.error = e
        forwarded = getattr(e, "getSummaryReport", None)
        self._summary_report = summary_report or (forwarded() if callable(forwarded) else "")
        path = getattr(e, "getProfilePath", None)
        self._profile_path = profile_path or (path() if callable(path) else "")

    def getProfilePath(self) -> str:  # noqa: N802 - the original's names
        """The absolute path of profile.pop, or "" when there is none (always, emulated)."""
        return self._profile_path

    def getSummaryReport(self) -> str:  # noqa: N802
        return self._summary_report


class LoweringError(popart_exception):
    """An ONNX model that cannot be lowered to TensorFlow (bad node, attribute or graph)."""


class UnsupportedOpError(LoweringError):
    """No lowering is registered for an op's (domain, type, opset version)."""


class InvalidAttributeError(LoweringError):
    """A node's attribute is missing, unknown or has a value the op does not accept."""


class UnsupportedOpsetError(popart_exception, ValueError):
    """An operator-set version the builder does not implement.

    The original raises ValueError here; being a popart_exception as well lets
    callers catch every builder error the same way.
    """


class TensorInfoError(popart_exception, TypeError):
    """A TensorInfo built from an unknown data type or a malformed shape.

    The original raises TypeError here; see UnsupportedOpsetError for why it is
    also a popart_exception.
    """


class OptionTypeError(popart_exception, TypeError):
    """An option (SessionOptions, an option class, a device option) given a value of the wrong type.

    The original's Python bindings raise TypeError here; see UnsupportedOpsetError for why it
    is also a popart_exception.
    """


class IncompatibleArgumentsError(OptionTypeError):
    """A binding given arguments of types none of its overloads takes.

    The original's pybind11 bindings raise TypeError("...: incompatible function arguments");
    see UnsupportedOpsetError for why it is also a popart_exception.
    """

    detail = ""  # which argument the closest overload refused, in openipu's words


def incompatible_arguments(
    function: str,
    overloads: list[str],
    invoked_with: list,
    detail: str = "",
    kwargs: dict | None = None,
) -> IncompatibleArgumentsError:
    """The error pybind11 raises when no overload of a binding takes the arguments.

    `function` is "" for a property setter: pybind11 (2.6, which PopART builds with) leaves
    def_readwrite's setter unnamed, so its message starts "(): incompatible function arguments".
    """
    return _incompatible(
        f"{function}(): incompatible function", overloads, invoked_with, kwargs, detail
    )


def incompatible_constructor_arguments(
    overloads: list[str], invoked_with: list, detail: str = "", kwargs: dict | None = None
) -> IncompatibleArgumentsError:
    """pybind11's error for a constructor no overload takes; `overloads` read "Class(args)"."""
    return _incompatible(
        "__init__(): incompatible constructor", overloads, invoked_with, kwargs, detail
    )


def _incompatible(
    start: str, overloads: list[str], invoked_with: list, kwargs: dict | None, detail: str
) -> IncompatibleArgumentsError:
    # pybind11.h's dispatcher words it so, keyword arguments after "; kwargs: ". The detail
    # (which argument the closest overload refused) is openipu's addition, in parentheses.
    supported = "\n".join(f"    {number}. {text}" for number, text in enumerate(overloads, 1))
    invoked = ", ".join(repr(argument) for argument in invoked_with)
    if kwargs:
        keywords = ", ".join(f"{name}={value!r}" for name, value in kwargs.items())
        invoked += ("; " if invoked else "") + f"kwargs: {keywords}"
    error = IncompatibleArgumentsError(
        f"{start} arguments. The following argument types are supported:\n{supported}\n\n"
        f"Invoked with: {invoked}" + (f" ({detail})" if detail else "")
    )
    error.detail = detail
    return error


def check_tensor_ids(function: str, args: object) -> None:
    """`args` is a list of tensor ids (str), as the bindings' std::vector<TensorId> takes."""
    if isinstance(args, (list, tuple)) and all(isinstance(name, str) for name in args):
        return
    raise incompatible_arguments(
        function, ["(self, args: List[str], ...)"], [args], "args must be a list of tensor ids"
    )
