"""Generic machinery for a tree of typed options grouped into nested categories.

A category is a `ConfigCategory` subclass that declares its options with `Option` and its
nested categories with `Subcategory`, both as class attributes:

    class _MathConfig(ConfigCategory):
        fast = Option(bool, False, "Enables fast maths.")

    class _OptimizationsConfig(ConfigCategory):
        math = Subcategory(_MathConfig, "Maths options.")

Every instance holds its own option values and its own subcategory instances, so values
are checked against their type on assignment and unknown names are rejected instead of
silently creating new attributes.
"""

import copy
import dataclasses
import difflib
import enum
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar

from openipu._src.config.attribute_metadata import AttributeMetadata, logger
from openipu._src.config.type_hints import (
    TypeHint,
    check_type_hint,
    from_json_value,
    to_json_value,
    value_matches_type_hint,
)


class UnknownAttributeError(ValueError, AttributeError):
    """An attribute name that is neither an option nor a category.

    A ValueError, like the original's, and an AttributeError, so that `hasattr`, `getattr`
    with a default and the copy/pickle protocols keep working.
    """


@dataclasses.dataclass(frozen=True)
class LegacyValue:
    """Values of an older type that an option still accepts, converted and with a warning."""

    type_hint: TypeHint
    convert: Callable[[Any], Any]
    deprecated_msg: str


class Option:
    """Declares one typed option of a `ConfigCategory` (a data descriptor)."""

    def __init__(
        self,
        type_hint: TypeHint,
        default: Any,
        doc: str,
        *,
        deprecated_msg: str | None = None,
        also_sets: str | None = None,
        legacy_value: LegacyValue | None = None,
    ) -> None:
        """
        Args:
          type_hint: the allowed type of the value.
          default: the value of a new config; copied for each config.
          doc: the documentation of the option.
          deprecated_msg: makes the option deprecated; setting it logs this message.
          also_sets: dotted name, relative to the category, of the option that replaced this
            deprecated one; setting this option sets that one to the same value.
          legacy_value: values of another type that are still accepted.
        """
        check_type_hint(type_hint)
        if not value_matches_type_hint(default, type_hint):
            raise TypeError(f"default {default!r} does not match the type hint {type_hint!r}")
        self.name = ""
        self.type_hint = type_hint
        self.default = default
        self.deprecated_msg = deprecated_msg
        self.also_sets = also_sets
        self.legacy_value = legacy_value
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, category: "ConfigCategory | None", owner: type) -> Any:
        if category is None:
            return self
        return category._values[self.name]

    def __set__(self, category: "ConfigCategory", value: Any) -> None:
        category._set_option(self, value)


class Subcategory:
    """Declares a nested category of a `ConfigCategory` (a read-only data descriptor)."""

    def __init__(
        self,
        category_class: "type[ConfigCategory]",
        doc: str | None = None,
        *,
        deprecated_msg: str | None = None,
    ) -> None:
        """
        Args:
          category_class: the category's class.
          doc: the documentation of the category; by default its class's docstring.
          deprecated_msg: makes the category, and every option and category inside it that has
            no message of its own, deprecated with this message.
        """
        self.name = ""
        self.category_class = category_class
        self.deprecated_msg = deprecated_msg
        self.__doc__ = doc if doc is not None else category_class.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, category: "ConfigCategory | None", owner: type) -> Any:
        if category is None:
            return self
        return category._subcategories[self.name]

    def __set__(self, category: "ConfigCategory", value: Any) -> None:
        # The original's words (tensorflow/python/ipu/config.py _ConfigBase).
        raise AttributeError(
            f"{category._full_name(self.name)} is a category and cannot be assigned to (tried "
            f"with {value!r}); set the options inside it instead"
        )


class ConfigCategory:
    """A node of a config tree: options and nested categories, declared on the subclass."""

    _option_fields: ClassVar[dict[str, Option]] = {}
    _subcategory_fields: ClassVar[dict[str, Subcategory]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._option_fields = {}
        cls._subcategory_fields = {}
        for klass in reversed(cls.__mro__):
            for name, field in vars(klass).items():
                if isinstance(field, Option):
                    cls._option_fields[name] = field
                elif isinstance(field, Subcategory):
                    cls._subcategory_fields[name] = field

    def __init__(self) -> None:
        # Internal state bypasses __setattr__, which only lets declared fields through.
        object.__setattr__(
            self,
            "_values",
            {name: copy.deepcopy(option.default) for name, option in self._option_fields.items()},
        )
        object.__setattr__(
            self,
            "_subcategories",
            {name: sub.category_class() for name, sub in self._subcategory_fields.items()},
        )
        # A new category is a root until its parent places it in the tree.
        self._place_in_tree("", type(self).__name__, None)

    def _place_in_tree(self, path: str, root_name: str, deprecated_msg: str | None) -> None:
        """Records where this category sits, and the deprecation it inherits from the nearest
        deprecated category above it (if any)."""
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_root_name", root_name)
        object.__setattr__(self, "_inherited_deprecation", deprecated_msg)
        for name, subcategory in self._subcategories.items():
            field = self._subcategory_fields[name]
            subcategory._place_in_tree(
                self._full_name(name), root_name, field.deprecated_msg or deprecated_msg
            )

    def _full_name(self, name: str) -> str:
        return f"{self._path}.{name}" if self._path else name

    def _get_full_name(self, attr: str) -> str:
        """The name of this category's `attr` relative to the root (the original's name)."""
        if attr not in self._option_fields and attr not in self._subcategory_fields:
            raise self._unknown_attribute_error(attr)
        return self._full_name(attr)

    # Attribute access.

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._option_fields and name not in self._subcategory_fields:
            raise self._unknown_attribute_error(name)
        if name in self._subcategory_fields:
            # Setting anything inside a deprecated category warns, as the original does.
            self.get_attribute_metadata(name).warn_if_deprecated()
        object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails. Private and dunder names get a plain
        # AttributeError: copy, pickle and hasattr probe them, sometimes on a half-built
        # instance that has no state yet.
        if name.startswith("_"):
            raise AttributeError(name)
        raise self._unknown_attribute_error(name)

    def _set_option(self, option: Option, value: Any, *, warn_if_deprecated: bool = True) -> None:
        metadata = self._option_metadata(option)
        legacy = option.legacy_value
        if (
            legacy is not None
            and not value_matches_type_hint(value, option.type_hint)
            and value_matches_type_hint(value, legacy.type_hint)
        ):
            logger.warning("%s: %s", metadata.name, legacy.deprecated_msg)
            value = legacy.convert(value)
        metadata.check_type(value)
        if warn_if_deprecated:
            metadata.warn_if_deprecated()
        # A copy, so that later changes to the caller's list or dict do not bypass the checks.
        self._values[option.name] = copy.copy(value)
        if option.also_sets is not None:
            owner, replacement = self._resolve_option(option.also_sets)
            owner._set_option(replacement, value)

    # Names and metadata.

    def _option_metadata(self, option: Option) -> AttributeMetadata:
        return AttributeMetadata(
            name=self._full_name(option.name),
            doc=option.__doc__ or "",
            type_hint=option.type_hint,
            default=option.default,
            deprecated_msg=option.deprecated_msg or self._inherited_deprecation,
        )

    def get_attribute_metadata(self, attr: str) -> AttributeMetadata:
        """Get the attribute metadata for `attr`.

        Args:
          attr: required, a string which specifies which attribute to retrieve metadata for.
            Must be its full name relative to the category this method is being called on.

        Returns:
          An AttributeMetadata object containing the metadata for the attribute.
        """
        if not isinstance(attr, str):
            raise TypeError(f"attr must be a dotted attribute name (str), got {attr!r}")
        try:
            category, name = self._resolve(attr)
        except UnknownAttributeError as error:
            # The original's words (tensorflow/python/ipu/config.py get_attribute_metadata).
            raise UnknownAttributeError(
                f"Could not get attribute metadata for '{attr}': {error}"
            ) from None
        if name in category._option_fields:
            return category._option_metadata(category._option_fields[name])
        subcategory = category._subcategory_fields[name]
        return AttributeMetadata(
            name=category._full_name(name),
            doc=subcategory.__doc__ or "",
            deprecated_msg=subcategory.deprecated_msg or category._inherited_deprecation,
        )

    def _resolve(self, dotted_name: str) -> "tuple[ConfigCategory, str]":
        """Returns the category that declares `dotted_name` and its last name component."""
        *category_names, name = dotted_name.split(".")
        category = self
        for category_name in category_names:
            if category_name not in category._subcategories:
                raise category._unknown_attribute_error(category_name, self, dotted_name)
            category = category._subcategories[category_name]
        if name not in category._option_fields and name not in category._subcategory_fields:
            raise category._unknown_attribute_error(name, self, dotted_name)
        return category, name

    def _resolve_option(self, dotted_name: str) -> "tuple[ConfigCategory, Option]":
        category, name = self._resolve(dotted_name)
        return category, category._option_fields[name]

    def _iter_options(self, prefix: str = "") -> "Iterator[tuple[str, ConfigCategory, Option]]":
        """Yields (dotted name relative to self, declaring category, option) for every option."""
        for name, option in self._option_fields.items():
            yield prefix + name, self, option
        for name, subcategory in self._subcategories.items():
            yield from subcategory._iter_options(f"{prefix}{name}.")

    def _iter_category_names(self, prefix: str = "") -> Iterator[str]:
        for name, subcategory in self._subcategories.items():
            yield prefix + name
            yield from subcategory._iter_category_names(f"{prefix}{name}.")

    def _unknown_attribute_error(
        self,
        name: str,
        lookup_start: "ConfigCategory | None" = None,
        dotted_name: str | None = None,
    ) -> UnknownAttributeError:
        """The error for `name`, which this category lacks; `dotted_name` is the whole name
        being looked up from `lookup_start`, when the lookup is by a dotted name."""
        # First the original's message and suggestion: the closest name in this category
        # (tensorflow/python/ipu/config.py _ConfigBase.__getattr__).
        message = f"'{name}' is not a valid attribute of this config."
        own_names = [*self._option_fields, *self._subcategory_fields]
        suggestions = [
            self._full_name(match) for match in difflib.get_close_matches(name, own_names, n=1)
        ]
        # Then the names anywhere below the lookup's start that it was probably meant to be,
        # e.g. `io_tiles.num_io_tiles` for `config.num_io_tiles`.
        start = lookup_start if lookup_start is not None else self
        wanted = dotted_name if dotted_name is not None else name
        for match in start._closest_names(wanted, dotted=dotted_name is not None):
            if start._full_name(match) not in suggestions:
                suggestions.append(start._full_name(match))
        if suggestions:
            message += f" Did you mean '{suggestions[0]}'?"
        if len(suggestions) > 1:
            message += f" Or {', '.join(f'{s!r}' for s in suggestions[1:])}?"
        return UnknownAttributeError(message)

    def _closest_names(self, name: str, dotted: bool) -> list[str]:
        """Valid names, relative to self, that `name` was probably meant to be."""
        nested_names = [dotted_name for dotted_name, _, _ in self._iter_options()]
        nested_names += list(self._iter_category_names())
        names_by_leaf: dict[str, list[str]] = {}
        for nested_name in nested_names:
            names_by_leaf.setdefault(nested_name.rsplit(".", 1)[-1], []).append(nested_name)
        leaf = name.rsplit(".", 1)[-1]
        # The right name in the wrong category, e.g. `config.num_io_tiles`.
        if leaf in names_by_leaf:
            return names_by_leaf[leaf]
        candidates = nested_names if dotted else [*self._option_fields, *self._subcategory_fields]
        close_names = difflib.get_close_matches(name, candidates, n=1)
        if close_names:
            return close_names
        close_leaves = difflib.get_close_matches(leaf, list(names_by_leaf), n=1)
        return names_by_leaf[close_leaves[0]] if close_leaves else []

    def _take_values_from(self, other: "ConfigCategory") -> None:
        object.__setattr__(self, "_values", other._values)
        for name, subcategory in self._subcategories.items():
            subcategory._take_values_from(other._subcategories[name])

    # Python protocols.

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return bool(self._values == other._values and self._subcategories == other._subcategories)

    __hash__ = None  # type: ignore[assignment]  # Mutable.

    def __repr__(self) -> str:
        # The original's form: the class name, then one indented `name = value` line per
        # option, with full names.
        lines = [
            f"  {category._full_name(option.name)} = {_format_value(category._values[option.name])}"
            for _, category, option in self._iter_options()
        ]
        return "\n".join([f"{type(self).__name__}:", *lines])

    def __str__(self) -> str:
        where = f"{self._root_name}.{self._path}" if self._path else self._root_name
        lines = [f"{where}:"]
        for name, category, option in self._iter_options():
            metadata = category._option_metadata(option)
            lines.append(
                f"  {name}: {metadata.type} = {_format_value(category._values[option.name])}"
            )
        return "\n".join(lines)


class ConfigTree(ConfigCategory):
    """The root category of a config tree, which can be exported and restored."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Every option and category, documented under the root class (the nested classes are an
        # implementation detail), as the original's generated documentation.
        cls.__doc__ = (cls.__doc__ or "") + "\n\n" + "".join(_document_fields(cls, "", None))

    def to_dict(self) -> dict[str, Any]:
        """Export the configuration stored within this configuration object to a dict.

        Returns:
          A dictionary containing the configuration: full dotted option names to values.
        """
        # Enum members are written as their values, as the original writes them.
        return {
            name: _enum_as_value(copy.deepcopy(category._values[option.name]))
            for name, category, option in self._iter_options()
        }

    def from_dict(self, dct: dict[str, Any]) -> None:
        """Restore configuration from a dict object.

        Options not named in `dct` keep their current value. Names may be full dotted names
        (as `to_dict` writes them) or nested dicts per category. Either every option is set or,
        if one value is rejected, none is.

        Args:
          dct: A dictionary containing a configuration.
        """
        self._apply_assignments(self._with_enum_members(self._flatten_assignments(dct)))

    def to_json(self) -> str:
        """Export the configuration stored within this configuration object as a JSON string.

        Enum values are written as their member names.

        Returns:
          A JSON string containing the configuration.
        """
        return json.dumps(
            {name: to_json_value(value) for name, value in self.to_dict().items()}, indent=2
        )

    def from_json(self, json_cfg: str) -> None:
        """Restore configuration from a JSON string.

        Args:
          json_cfg: A JSON string containing a configuration.
        """
        self._apply_assignments(
            self._with_enum_members(self._flatten_assignments(json.loads(json_cfg)))
        )

    def _with_enum_members(self, assignments: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        """Values as the options hold them: enum values and names become members, JSON lists
        stand for tuples."""
        converted = []
        for name, data in assignments:
            _, option = self._resolve_option(name)  # only options are left (see above)
            converted.append((name, from_json_value(data, option.type_hint)))
        return converted

    def _flatten_assignments(self, dct: Any, prefix: str = "") -> list[tuple[str, Any]]:
        """The (option name, value) pairs `dct` gives. As the original's from_dict
        (tensorflow/python/ipu/config.py), which looks each option's full name up in `dct`,
        other keys (unknown names, categories, keys that are not str) are ignored, and a
        `dct` that is not a mapping gives nothing if `in` works on it, else a TypeError."""
        if not isinstance(dct, Mapping):
            try:
                iter(dct)
            except TypeError:
                raise TypeError(
                    f"argument of type '{type(dct).__name__}' is not iterable"
                ) from None
            return []
        assignments = []
        for key, value in dct.items():
            if not isinstance(key, str):
                continue
            name = prefix + key
            try:
                category, local_name = self._resolve(name)
            except UnknownAttributeError:
                logger.debug("from_dict: %r is not an option of this config, ignored", name)
                continue
            if local_name in category._option_fields:
                assignments.append((name, value))
            elif isinstance(value, Mapping):
                # A category's options as a nested dict (an extension of the original's form).
                assignments += self._flatten_assignments(value, prefix=f"{name}.")
        return assignments

    def _apply_assignments(self, assignments: list[tuple[str, Any]]) -> None:
        # Deprecated options first, so that a value given at the option that replaced one wins.
        # They warn only when they change the default: `to_dict` output names them all.
        staged = copy.deepcopy(self)
        deprecated_first = sorted(assignments, key=lambda item: not staged._is_deprecated(item[0]))
        for name, value in deprecated_first:
            category, option = staged._resolve_option(name)
            changes_default = not (type(value) is type(option.default) and value == option.default)
            category._set_option(option, value, warn_if_deprecated=changes_default)
        self._take_values_from(staged)

    def _is_deprecated(self, dotted_name: str) -> bool:
        try:
            category, name = self._resolve(dotted_name)
        except UnknownAttributeError:
            return False
        option = category._option_fields.get(name)
        return option is not None and option.deprecated_msg is not None


def _declared_fields(cls: type) -> "list[tuple[str, Option | Subcategory]]":
    """The options and categories of `cls`, in declaration order (base classes first)."""
    fields: dict[str, Option | Subcategory] = {}
    for klass in reversed(cls.__mro__):
        for name, field in vars(klass).items():
            if isinstance(field, Option | Subcategory):
                fields[name] = field
    return list(fields.items())


def _document_fields(cls: type, prefix: str, inherited_deprecation: str | None) -> Iterator[str]:
    """Sphinx/RST entries for the fields of category `cls`: a label, a `py:attribute::`, the
    type and default of an option, a note for a deprecated one, its description; indented
    by depth. Sphinx strips what it takes for a class name from nested attribute names, so
    the first entry of a category deeper than two gets that part repeated (as the original
    does)."""
    for index, (name, field) in enumerate(_declared_fields(cls)):
        full_name = prefix + name
        deprecated_msg = field.deprecated_msg or inherited_deprecation
        metadata = AttributeMetadata(
            name=full_name,
            doc=field.__doc__ or "",
            type_hint=field.type_hint if isinstance(field, Option) else None,
            default=field.default if isinstance(field, Option) else None,
            deprecated_msg=deprecated_msg,
        )
        shown_name = full_name
        if index == 0 and metadata._depth > 2:
            shown_name = full_name.rsplit(".", 2)[0] + "." + full_name
        lines = [f".. _{full_name}:", f".. py:attribute:: {shown_name}"]
        if isinstance(field, Option):
            default = f'"{field.default}"' if isinstance(field.default, str) else field.default
            lines += [f"   :type: {metadata.type}", f"   :value: {default}"]
        lines.append("")
        if metadata.deprecated:
            lines += ["   .. note::\n", f"      DEPRECATED: {deprecated_msg}\n"]
        lines += ["   " + line for line in (metadata.__doc__ or "").split("\n")]
        indent = "   " * (metadata._depth + 1)
        yield "\n".join(indent + line for line in lines) + "\n\n"
        if isinstance(field, Subcategory):
            yield from _document_fields(field.category_class, full_name + ".", deprecated_msg)


def _enum_as_value(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _format_value(value: Any) -> str:
    # str() of an enum member reads like the code that sets it: `SelectionOrder.SNAKE`.
    return str(value) if isinstance(value, enum.Enum) else repr(value)
