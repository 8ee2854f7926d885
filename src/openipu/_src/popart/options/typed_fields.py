"""Typed attributes for option objects: every option has a type, a default and a check.

The original's options are C++ struct members bound with pybind11, which rejects a value of
the wrong type with a TypeError when it is assigned. `TypedOptions` does the same in Python,
with a message naming the option, the value and the type it needs. Whether a well-typed value
makes sense with the others (a replication factor that divides the IPU count, ...) is checked
when a session is created, as the original does.
"""

from __future__ import annotations

import copy
import difflib
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from openipu._src.popart import pybind_arguments as pybind
from openipu._src.popart.errors import (
    IncompatibleArgumentsError,
    OptionTypeError,
    incompatible_arguments,
)


class Kind:
    """A type an option value can have, as the documentation spells it."""

    description = "a value"

    def check(self, value: Any, where: str) -> Any:
        """The value as stored, or OptionTypeError naming `where`."""
        raise NotImplementedError

    def fail(self, value: Any, where: str) -> OptionTypeError:
        return OptionTypeError(
            f"{where} must be {self.description}, got {value!r} ({type(value).__name__})"
        )


class _Converted(Kind):
    """A C++ number or bool member: the value as pybind11's caster converts it, since a
    def_readwrite setter converts (pybind_arguments; `opts.enableOutlining = 1` works)."""

    def __init__(self, caster: pybind.Caster) -> None:
        self.caster = caster
        self.description = caster.text

    def check(self, value: Any, where: str) -> Any:
        try:
            return self.caster.load(value, True, where)
        except pybind.Refused:
            raise self.fail(value, where) from None


class _Str(Kind):
    description = "str"

    def check(self, value: Any, where: str) -> str:
        if isinstance(value, str):
            return value
        raise self.fail(value, where)


BOOL: Kind = _Converted(pybind.BOOL)
INT: Kind = _Converted(pybind.INT64)
FLOAT: Kind = _Converted(pybind.FLOAT)
STR: Kind = _Str()


def check_int(value: Any, where: str) -> int:
    return INT.check(value, where)


def check_bool(value: Any, where: str) -> bool:
    return BOOL.check(value, where)


def check_enum(value: Any, enum_type: type[enum.Enum], where: str) -> Any:
    return EnumOf(enum_type).check(value, where)


_T = TypeVar("_T")


def check_instance(value: object, cls: type[_T], where: str) -> _T:
    """`value` itself (not a copy) if it is a `cls`, else pybind11's TypeError (an
    IncompatibleArgumentsError) naming `where`."""
    if isinstance(value, cls):
        return value
    # pybind11's wording, as the original's bindings refuse the argument.
    function, _, parameter = where.partition(" ")
    raise incompatible_arguments(
        function,
        [f"({parameter or 'arg0'}: {cls.__name__}, ...)"],
        [value],
        f"{where} must be a {cls.__name__}, got {type(value).__name__}",
    )


class EnumOf(Kind):
    """A member of one enum; another enum's member of the same name is taken as that member."""

    def __init__(self, enum_type: type[enum.Enum]) -> None:
        self.enum_type = enum_type
        self.description = enum_type.__name__

    def check(self, value: Any, where: str) -> enum.Enum:
        if isinstance(value, self.enum_type):
            return value
        # The builder and the session API have sibling enums with the same members.
        if isinstance(value, enum.Enum) and value.name in self.enum_type.__members__:
            return self.enum_type.__members__[value.name]
        members = ", ".join(self.enum_type.__members__)
        raise OptionTypeError(
            f"{where} must be a {self.description} ({members}), got {value!r} "
            f"({type(value).__name__})"
        )


class InstanceOf(Kind):
    """An instance of an option class (stored as a copy, as pybind11 copies structs)."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.description = cls.__name__

    def check(self, value: Any, where: str) -> Any:
        if isinstance(value, self.cls):
            return copy.deepcopy(value)
        raise self.fail(value, where)


class Optional(Kind):
    def __init__(self, kind: Kind) -> None:
        self.kind = kind
        self.description = f"Optional[{kind.description}]"

    def check(self, value: Any, where: str) -> Any:
        return None if value is None else self.kind.check(value, where)


class ListOf(Kind):
    def __init__(self, item: Kind) -> None:
        self.item = item
        self.description = f"List[{item.description}]"

    def check(self, value: Any, where: str) -> list:
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
            raise self.fail(value, where)
        return [self.item.check(item, f"{where}[{index}]") for index, item in enumerate(value)]


class SetOf(Kind):
    def __init__(self, item: Kind) -> None:
        self.item = item
        self.description = f"Set[{item.description}]"

    def check(self, value: Any, where: str) -> set:
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(
            value, (set, frozenset, list, tuple)
        ):
            raise self.fail(value, where)
        return {self.item.check(item, f"{where} item") for item in value}


class CheckedDict(dict):
    """A dict option: item assignment writes back into the option and is type-checked.

    (The original wraps `engineOptions` the same way, so `opts.engineOptions[k] = v` works.)
    """

    def __init__(self, items: Mapping, kind: DictOf, where: str) -> None:
        super().__init__()
        self._kind = kind
        self._where = where
        for key, value in items.items():
            self[key] = value

    def __setitem__(self, key: Any, value: Any) -> None:
        key = self._kind.key.check(key, f"{self._where} key")
        super().__setitem__(key, self._kind.value.check(value, f"{self._where}[{key!r}]"))

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def __deepcopy__(self, memo: dict) -> CheckedDict:
        return CheckedDict(copy.deepcopy(dict(self), memo), self._kind, self._where)

    def __reduce__(self):
        return (CheckedDict, (dict(self), self._kind, self._where))


class DictOf(Kind):
    def __init__(self, key: Kind, value: Kind) -> None:
        self.key = key
        self.value = value
        self.description = f"Dict[{key.description}, {value.description}]"

    def check(self, value: Any, where: str) -> CheckedDict:
        if not isinstance(value, Mapping):
            raise self.fail(value, where)
        return CheckedDict(value, self, where)


@dataclass(frozen=True)
class Option:
    """One option: its type, its default (a factory for mutable defaults) and what it does."""

    kind: Kind
    default: Any
    doc: str = ""

    def default_value(self) -> Any:
        return self.default() if callable(self.default) else copy.deepcopy(self.default)


class TypedOptions:
    """Attributes declared in `OPTIONS`, type-checked on every assignment.

    `ALIASES` maps other names of an option (deprecated ones, Python-only spellings) to it.
    Names starting with an underscore are private state unless declared in `OPTIONS`.
    """

    OPTIONS: ClassVar[dict[str, Option]] = {}
    ALIASES: ClassVar[dict[str, str]] = {}

    def __init__(self, *args: Any, **values: Any) -> None:
        # Positional arguments follow the declaration order, which is the original's ctor order.
        names = list(self.OPTIONS)
        if len(args) > len(names):
            raise OptionTypeError(
                f"{type(self).__name__} takes at most {len(names)} arguments ({', '.join(names)}), "
                f"got {len(args)}"
            )
        for name, option in self.OPTIONS.items():
            default = option.kind.check(option.default_value(), self._where(name))
            object.__setattr__(self, name, default)
        for name, value in [*zip(names, args, strict=False), *values.items()]:
            try:
                setattr(self, name, value)
            except IncompatibleArgumentsError as error:
                # A constructor argument, not the setter the error names.
                raise OptionTypeError(error.detail) from None

    def __setattr__(self, name: str, value: Any) -> None:
        name = self.ALIASES.get(name, name)
        option = self.OPTIONS.get(name)
        if option is None:
            if name.startswith("_"):
                object.__setattr__(self, name, value)
                return
            raise AttributeError(self._unknown(name))
        try:
            checked = option.kind.check(value, self._where(name))
        except OptionTypeError as error:
            if not isinstance(option.kind, InstanceOf):
                raise
            # A struct-typed option is a def_readwrite in popart.cpp, whose setter refuses another
            # type as pybind11 does; pybind11 2.6 leaves that setter unnamed, hence "()".
            signature = (
                f"(self: popart_core.{type(self).__name__}, "
                f"arg0: popart_core.{option.kind.description}) -> None"
            )
            raise incompatible_arguments("", [signature], [value], str(error)) from None
        object.__setattr__(self, name, checked)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: aliases, then a helpful error.
        target = type(self).ALIASES.get(name)
        if target is not None:
            return getattr(self, target)
        if name.startswith("_"):
            # copy, pickle and hasattr probe private and special names (`__deepcopy__`) many
            # times per session: no option starts with "_", so no close-match search.
            raise AttributeError(name)
        raise AttributeError(self._unknown(name))

    def validate(self) -> None:
        """Checks every value again (lists and sets can be changed in place)."""
        for name, option in self.OPTIONS.items():
            object.__setattr__(
                self, name, option.kind.check(getattr(self, name), self._where(name))
            )

    def option_values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.OPTIONS}

    def _where(self, name: str) -> str:
        return f"{type(self).__name__}.{name}"

    def _unknown(self, name: str) -> str:
        known = [*self.OPTIONS, *self.ALIASES]
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"{type(self).__name__} has no option {name!r}{hint}"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.option_values() == other.option_values()

    __hash__ = None  # type: ignore[assignment]  # mutable, so unhashable

    def __repr__(self) -> str:
        changed = {
            name: value
            for name, value in self.option_values().items()
            if value != self.OPTIONS[name].default_value()
        }
        fields = ", ".join(f"{name}={value!r}" for name, value in changed.items())
        return f"{type(self).__name__}({fields})"
