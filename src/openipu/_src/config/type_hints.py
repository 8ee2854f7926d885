"""The small type-hint language of config options: checking, printing and JSON conversion.

Options are typed with plain classes (`bool`, `int`, `float`, `str`, `dict`, an `enum.Enum`)
or with unions of them and of `list[...]`, `tuple[X, ...]` and fixed `tuple[X, Y]` containers.
"""

import enum
import types
import typing
from typing import Any

TypeHint = Any  # A class, a `X | Y` union, `list[X]` or `tuple[X, ...]`.


def _origin(hint: TypeHint) -> object:
    # typing.get_origin's first overload (ParamSpecArgs -> ParamSpec) would type an Any hint.
    return typing.get_origin(hint)


def _union_members(hint: TypeHint) -> tuple[TypeHint, ...] | None:
    if isinstance(hint, types.UnionType) or _origin(hint) is typing.Union:
        return typing.get_args(hint)
    return None


def type_hint_to_string(hint: TypeHint) -> str:
    """Spells a hint as the original's metadata does (its annotation's source text), e.g.
    `typing.Union[int, typing.List[int]]`."""
    members = _union_members(hint)
    if members is not None:
        return f"typing.Union[{', '.join(type_hint_to_string(member) for member in members)}]"
    origin = _origin(hint)
    if origin is list:
        args = typing.get_args(hint)
        return f"typing.List[{type_hint_to_string(args[0])}]" if args else "list"
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"typing.Tuple[{type_hint_to_string(args[0])}, ...]"
        return f"typing.Tuple[{', '.join(type_hint_to_string(arg) for arg in args)}]"
    name: str = hint.__name__
    return name


def value_matches_type_hint(value: Any, hint: TypeHint) -> bool:
    """Whether `value` is of type `hint`.

    Strict about numbers, as the original is: a bool is not an int and an int is not a float,
    so that a misplaced `True` or `1` is caught instead of silently meaning 1 or 1.0.
    """
    members = _union_members(hint)
    if members is not None:
        return any(value_matches_type_hint(value, member) for member in members)
    origin = _origin(hint)
    if origin is list:
        (item_hint,) = typing.get_args(hint)
        return type(value) is list and all(value_matches_type_hint(v, item_hint) for v in value)
    if origin is tuple:
        args = typing.get_args(hint)
        if type(value) is not tuple:
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(value_matches_type_hint(v, args[0]) for v in value)
        # A fixed-length tuple, e.g. Tuple[str]: one value per position.
        return len(value) == len(args) and all(map(value_matches_type_hint, value, args))
    if hint in (bool, int, float, str):
        return type(value) is hint
    return isinstance(value, hint)


def check_type_hint(hint: TypeHint) -> None:
    """Raises a ValueError for a hint the original refuses: a union of int and an enum, whose
    serialised (integer) values could not be told apart (tensorflow/python/ipu/config.py)."""
    members = _union_members(hint)
    if members is None:
        return
    if int in members and any(isinstance(m, type) and issubclass(m, enum.Enum) for m in members):
        raise ValueError(
            f"cannot have a Union of int and Enum: deserialising this attribute may be invalid "
            f"(type hint {type_hint_to_string(hint)})"
        )


def to_json_value(value: Any) -> Any:
    """Converts an option value to JSON-compatible data; enum members become their values, as
    the original's `to_dict`/`to_json` write them."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [to_json_value(item) for item in value]
    if isinstance(value, dict):
        return {key: to_json_value(item) for key, item in value.items()}
    return value


def from_json_value(data: Any, hint: TypeHint) -> Any:
    """Inverse of `to_json_value` for an option typed `hint`.

    JSON has no tuples, so a `tuple[...]` value comes back as a list (which every hint that
    allows tuples here also allows). Data that cannot be converted is returned unchanged for
    the option's own type check to reject with a message naming the option.
    """
    members = _union_members(hint)
    if members is not None:
        for member in members:
            converted = from_json_value(data, member)
            if value_matches_type_hint(converted, member):
                return converted
        return data
    if isinstance(hint, type) and issubclass(hint, enum.Enum) and not isinstance(data, bool):
        if isinstance(data, str):
            return _enum_member_from_name(hint, data)
        try:
            return hint(data)  # The member's value, as the original writes it.
        except ValueError:
            return data
    if _origin(hint) is list and isinstance(data, list):
        (item_hint,) = typing.get_args(hint)
        return [from_json_value(item, item_hint) for item in data]
    return data


def _enum_member_from_name(enum_class: type[enum.Enum], name: str) -> enum.Enum | str:
    # Accept "MEMBER" and "EnumClass.MEMBER"; str(member) gives the latter.
    class_prefix = f"{enum_class.__name__}."
    if name.startswith(class_prefix):
        name = name[len(class_prefix) :]
    try:
        return enum_class[name]
    except KeyError:
        return name
