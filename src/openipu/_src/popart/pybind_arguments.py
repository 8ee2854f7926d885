"""pybind11's argument conversion and overload resolution, for the functions the original binds.

The original's Python API is pybind11 bindings (python/popart/popart_core/popart.cpp). When no
overload of a binding takes the arguments, pybind11 raises TypeError ("f(): incompatible function
arguments", "__init__(): incompatible constructor arguments") before any PopART code runs; a
value of the right type but a bad value reaches PopART, which raises its own error. `bind` does
that resolution as pybind11 2.6 (the version PopART builds with) does in pybind11.h: every
overload without implicit conversions first, then every overload with them.

What each C++ type takes (pybind11/cast.h and stl.h):
- int: an int (a bool too) or anything with __index__, never a float; with conversions, any
  other number int() takes (numpy.float32, Decimal). It must fit the C++ type (`unsigned`:
  no negative value).
- float: a float; with conversions, anything with __float__ or __index__ (ints, bools, numpy).
- str: str, or bytes (as raw bytes).
- List[T]: any sequence but a str (a tuple, a numpy array, bytes), not a set or a generator.
- Set[T]: a set, not a frozenset. Dict[K, V] and py::dict: a dict, not another mapping.
- a bound class or enum: an instance of it (None is refused for reference parameters).
"""

from __future__ import annotations

import enum
import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from openipu._src.popart.errors import incompatible_arguments, incompatible_constructor_arguments


class Refused(Exception):
    """Why one overload does not take the arguments, and how close it came (for the detail)."""

    def __init__(self, message: str, depth: int = 0) -> None:
        super().__init__(message)
        self.position = -1  # how many parameters loaded before this one; -1: the arity is wrong
        self.depth = depth  # how deep inside a list or dict the refused value was


class Caster:
    """One C++ parameter type: `load` gives the value as the C++ function receives it."""

    text = "object"  # the type as pybind11's signatures spell it

    def load(self, value: Any, convert: bool, where: str) -> Any:
        raise NotImplementedError

    def refuse(self, value: Any, where: str) -> Refused:
        return Refused(f"{where} must be {self.text}, got {value!r} ({type(value).__name__})")


def _has(value: Any, *methods: str) -> bool:
    return any(hasattr(type(value), method) for method in methods)


class _Int(Caster):
    text = "int"

    def __init__(self, bits: int) -> None:
        self.limit = 2 ** (bits - 1)

    def load(self, value: Any, convert: bool, where: str) -> Any:
        if isinstance(value, float):
            raise self.refuse(value, where)
        number = None
        if _has(value, "__index__"):
            try:
                number = operator.index(value)
            except TypeError:  # numpy.array(1.0) has __index__ but refuses it
                number = None
        if number is None and convert and _has(value, "__int__", "__float__"):
            try:  # PyNumber_Long, as the converting pass does
                number = int(value)
            except (TypeError, ValueError, OverflowError):
                number = None
        if number is None or not -self.limit <= number < self.limit:
            raise self.refuse(value, where)
        return number


class _Unsigned(Caster):
    """`unsigned`: what int takes, but no negative value (PyLong_AsUnsignedLong fails)."""

    text = "int"

    def __init__(self, bits: int) -> None:
        self.wide = _Int(bits + 1)  # every value of `bits` bits, and the negative ones

    def load(self, value: Any, convert: bool, where: str) -> Any:
        number = self.wide.load(value, convert, where)
        if number < 0:
            raise self.refuse(value, where)
        return number


class _Float(Caster):
    text = "float"

    def load(self, value: Any, convert: bool, where: str) -> Any:
        if isinstance(value, float):
            return float(value)
        if convert and _has(value, "__float__", "__index__"):
            try:
                return float(value)
            except (TypeError, ValueError, OverflowError):
                pass
        raise self.refuse(value, where)


class _Bool(Caster):
    """pybind11 2.6's bool: True and False; with conversions (and for NumPy's bool) None is
    False and anything with __bool__ (numbers, NumPy scalars) its truth, but not a str or a
    container (whose truth comes from their length)."""

    text = "bool"

    def load(self, value: Any, convert: bool, where: str) -> Any:
        if value is True or value is False:
            return value
        if convert or type(value).__module__ == "numpy":
            if value is None:
                return False
            if _has(value, "__bool__"):
                try:
                    return bool(value)
                except Exception:  # noqa: BLE001 - pybind11 clears the error and refuses
                    pass
        raise self.refuse(value, where)


class _Str(Caster):
    text = "str"

    def load(self, value: Any, convert: bool, where: str) -> Any:
        if isinstance(value, str):
            return value
        if isinstance(value, bytes):
            return value.decode("utf-8", "surrogateescape")
        raise self.refuse(value, where)


class _DebugContext(_Str):
    # debugcontext.cpp: py::implicitly_convertible<std::string, DebugContext>().
    text = "popart._internal.ir.DebugContext"

    def load(self, value: Any, convert: bool, where: str) -> Any:
        return value if _has(value, "getPathName") else super().load(value, convert, where)


class _PyDict(Caster):
    text = "dict"

    def load(self, value: Any, convert: bool, where: str) -> Any:
        if isinstance(value, dict):
            return value
        raise self.refuse(value, where)


class OptionalOf(Caster):
    """nonstd::optional<T>: None, or what T takes."""

    def __init__(self, item: Caster) -> None:
        self.item = item
        self.text = f"Optional[{item.text}]"

    def load(self, value: Any, convert: bool, where: str) -> Any:
        return None if value is None else self.item.load(value, convert, where)


class _Array(Caster):
    """py::array (an ONNX tensor attribute): anything NumPy makes an array of."""

    text = "numpy.ndarray"

    def load(self, value: Any, convert: bool, where: str) -> Any:
        if value is None or isinstance(value, (str, bytes, dict)):
            raise self.refuse(value, where)
        return value


INT: Caster = _Int(32)
INT64: Caster = _Int(64)
UINT: Caster = _Unsigned(32)
FLOAT: Caster = _Float()
BOOL: Caster = _Bool()
STR: Caster = _Str()
DEBUG_CONTEXT: Caster = _DebugContext()
PY_DICT: Caster = _PyDict()
ARRAY: Caster = _Array()


class InstanceOf(Caster):
    def __init__(self, cls: type, text: str) -> None:
        self.cls = cls
        self.text = text

    def load(self, value: Any, convert: bool, where: str) -> Any:
        if isinstance(value, self.cls):
            return value
        raise self.refuse(value, where)


class EnumOf(InstanceOf):
    """A member of the enum; openipu's sibling enums (builder and session API) stand in."""

    def __init__(self, cls: type[enum.Enum], text: str) -> None:
        super().__init__(cls, text)
        self.enum_type = cls

    def load(self, value: Any, convert: bool, where: str) -> Any:
        members = self.enum_type.__members__
        if (
            isinstance(value, enum.Enum)
            and not isinstance(value, self.cls)
            and value.name in members
        ):
            return members[value.name]
        return super().load(value, convert, where)


def _items(caster: Caster, pairs: list[tuple[str, Any]], convert: bool, where: str) -> list[Any]:
    loaded = []
    for suffix, item in pairs:
        try:
            loaded.append(caster.load(item, convert, where + suffix))
        except Refused as refused:
            refused.depth += 1
            raise
    return loaded


class ListOf(Caster):
    def __init__(self, item: Caster) -> None:
        self.item = item
        self.text = f"List[{item.text}]"

    def load(self, value: Any, convert: bool, where: str) -> Any:
        # PySequence_Check, then item by item (pybind11's sequence iterates by index).
        if isinstance(value, (str, Mapping)) or not _has(value, "__getitem__", "__len__"):
            raise self.refuse(value, where)
        try:
            items = [value[index] for index in range(len(value))]
        except Exception:
            raise self.refuse(value, where) from None
        pairs = [(f"[{index}]", item) for index, item in enumerate(items)]
        return _items(self.item, pairs, convert, where)


class SetOf(Caster):
    def __init__(self, item: Caster) -> None:
        self.item = item
        self.text = f"Set[{item.text}]"

    def load(self, value: Any, convert: bool, where: str) -> Any:
        if not isinstance(value, set):
            raise self.refuse(value, where)
        return set(_items(self.item, [(" item", item) for item in value], convert, where))


class DictOf(Caster):
    def __init__(self, key: Caster, value: Caster) -> None:
        self.key = key
        self.value = value
        self.text = f"Dict[{key.text}, {value.text}]"

    def load(self, value: Any, convert: bool, where: str) -> Any:
        if not isinstance(value, dict):
            raise self.refuse(value, where)
        keys = _items(self.key, [(" key", key) for key in value], convert, where)
        pairs = [(f"[{key!r}]", item) for key, item in value.items()]
        return dict(zip(keys, _items(self.value, pairs, convert, where), strict=True))


REQUIRED = object()


@dataclass(frozen=True)
class Arg:
    name: str
    caster: Caster
    default: Any = REQUIRED
    default_text: str = ""  # how the signature shows the default, when not its repr
    # False for a parameter bound without py::arg: pybind11 names it "arg<i>" in the
    # signature but takes it only by position (a keyword argument refuses the overload).
    keyword: bool = True

    def text(self) -> str:
        text = f"{self.name}: {self.caster.text}"
        if self.default is REQUIRED:
            return text
        return f"{text} = {self.default_text or repr(self.default)}"


def unnamed(*casters: Caster) -> tuple[Arg, ...]:
    """The parameters of a binding without py::arg annotations (`cls.def("f", &C::f)`):
    pybind11 shows them as arg0, arg1, ... and takes no keyword argument for them."""
    return tuple(Arg(f"arg{index}", caster, keyword=False) for index, caster in enumerate(casters))


@dataclass(frozen=True)
class Signature:
    """One overload: its parameters (after self) and what it returns."""

    args: tuple[Arg, ...] = ()
    returns: str = "None"

    def text(self, owner: str, constructor: bool) -> str:
        params = ", ".join(arg.text() for arg in self.args)
        if constructor:  # pybind11 rewrites "(self: C, args) -> None" as "C(args)"
            return f"{owner}({params})"
        return f"(self: {owner}{', ' if params else ''}{params}) -> {self.returns}"

    def load(self, args: tuple, kwargs: dict, convert: bool, where: str) -> dict[str, Any]:
        names = [arg.name for arg in self.args if arg.keyword]
        unexpected = [name for name in kwargs if name not in names]
        if unexpected:
            raise Refused(f"{where} has no argument {unexpected[0]!r}")
        if len(args) > len(self.args):
            raise Refused(f"{where} takes {len(self.args)} arguments, got {len(args)}")
        values = {}
        for position, arg in enumerate(self.args):
            by_keyword = arg.keyword and arg.name in kwargs
            if position < len(args) and by_keyword:
                raise Refused(f"{where} got two values for {arg.name}")
            if position < len(args) or by_keyword:
                value = args[position] if position < len(args) else kwargs[arg.name]
            elif arg.default is not REQUIRED:
                values[arg.name] = arg.default
                continue
            else:
                raise Refused(f"{where} needs {arg.name}")
            try:
                values[arg.name] = arg.caster.load(value, convert, f"{where} {arg.name}")
            except Refused as refused:
                refused.position = position
                raise
        return values


def bind(
    function: str,
    signatures: Sequence[Signature],
    args: tuple,
    kwargs: dict,
    *,
    owner: str,
    constructor: bool = False,
) -> tuple[int, dict[str, Any]]:
    """(the overload's index, its arguments by name as C++ receives them), or pybind11's
    TypeError. `owner` is the bound class as pybind11 names it ("popart_core.DataFlow")."""
    where = owner.rpartition(".")[2] if constructor else function
    refusals: list[Refused] = []
    for convert in (False, True):
        for index, signature in enumerate(signatures):
            try:
                return index, signature.load(args, kwargs, convert, where)
            except Refused as refused:
                if convert:
                    refusals.append(refused)
    closest = str(max(refusals, key=lambda refused: (refused.position, refused.depth)))
    texts = [signature.text(owner, constructor) for signature in signatures]
    if constructor:
        raise incompatible_constructor_arguments(texts, list(args), closest, kwargs)
    raise incompatible_arguments(function, texts, list(args), closest, kwargs)


_Method = TypeVar("_Method", bound=Callable[..., Any])


def binding(
    owner: str, *args: Arg, returns: str = "None", constructor: bool = False
) -> Callable[[_Method], _Method]:
    """A method (or constructor) bound with one overload: its arguments converted, or
    pybind11's TypeError. The method's parameters (after self) are the `args`: by name,
    or by position for `unnamed` ones."""
    signature = Signature(args, returns)
    by_position = [arg.name for arg in args if not arg.keyword]
    by_name = [arg.name for arg in args if arg.keyword]

    def decorate(method: _Method) -> _Method:
        @functools.wraps(method)
        def call(self: Any, *call_args: Any, **kwargs: Any) -> Any:
            _, values = bind(
                method.__name__, [signature], call_args, kwargs,
                owner=owner, constructor=constructor,
            )  # fmt: skip
            positional = [values[name] for name in by_position]
            return method(self, *positional, **{name: values[name] for name in by_name})

        return call  # type: ignore[return-value]

    return decorate
