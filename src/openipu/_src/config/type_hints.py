"""The small type-hint language of config options: checking, printing and JSON conversion.

Options are typed with plain classes (`bool`, `int`, `float`, `str`, `dict`, an `enum.Enum`)
or with unions of them and of homogeneous `list[...]` / `tuple[..., ...]` containers.
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


def _homogeneous_tuple_item(hint: TypeHint) -> TypeHint:
    item_hint, ellipsis = typing.get_args(hint)
    if ellipsis is not Ellipsis:
        raise TypeError(f"only tuple[X, ...] hints are supported, got {hint!r}")
    return item_hint


def type_hint_to_string(hint: TypeHint) -> str:
    """Spells a hint the way the IPU documentation does, e.g. `Union[int, List[int]]`."""
    members = _union_members(hint)
    if members is not None:
        return f"Union[{', '.join(type_hint_to_string(member) for member in members)}]"
    origin = _origin(hint)
    if origin is list:
        (item_hint,) = typing.get_args(hint)
        return f"List[{type_hint_to_string(item_hint)}]"
    if origin is tuple:
        return f"Tuple[{type_hint_to_string(_homogeneous_tuple_item(hint))}, ...]"
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
        item_hint = _homogeneous_tuple_item(hint)
        return type(value) is tuple and all(value_matches_type_hint(v, item_hint) for v in value)
    if hint in (bool, int, float, str):
        return type(value) is hint
    return isinstance(value, hint)


def to_json_value(value: Any) -> Any:
    """Converts an option value to JSON-compatible data; enum members become their names."""
    if isinstance(value, enum.Enum):
        return value.name
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
    if isinstance(hint, type) and issubclass(hint, enum.Enum) and isinstance(data, str):
        return _enum_member_from_name(hint, data)
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
