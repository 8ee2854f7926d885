"""`AttributeMetadata`: what is known about one option or category of a config tree."""

import copy
import inspect
import logging
from typing import Any

from openipu._src.config.type_hints import TypeHint, type_hint_to_string, value_matches_type_hint

logger = logging.getLogger("openipu.config")


class AttributeMetadata:
    """Metadata of one option or category of an `IPUConfig`.

    Obtained with `IPUConfig.get_attribute_metadata(name)`. Categories have no type and no
    default.
    """

    def __init__(
        self,
        name: str,
        doc: str,
        type_hint: TypeHint | None = None,
        default: Any = None,
        deprecated_msg: str | None = None,
    ) -> None:
        self._name = name
        # How deep in the tree: 1 for an option of the root (the original's `_depth`).
        self._depth = name.count(".") + 1
        self._type_hint = type_hint
        self._default = default
        self._deprecated_msg = deprecated_msg
        # The original normalises the indentation of docstrings and has a text for none.
        self.__doc__ = inspect.cleandoc(doc) if doc.strip() else "No description provided."

    @property
    def name(self) -> str:
        """The full name of the option/category, relative to the config structure's root."""
        return self._name

    @property
    def type(self) -> str | None:
        """The type of this option, as a string (a Python type or a type hint).

        Categories themselves do not have types.
        """
        if self._type_hint is None:
            return None
        return type_hint_to_string(self._type_hint)

    @property
    def default(self) -> Any:
        """The default value for this option. Categories themselves do not have default values."""
        # A copy, so that mutating the returned list or dict cannot change later defaults.
        return copy.deepcopy(self._default)

    @property
    def deprecated(self) -> bool:
        """Whether or not this option/category is deprecated."""
        return self._deprecated_msg is not None

    @property
    def deprecated_msg(self) -> str | None:
        """The deprecation message for this attribute. None if it is not deprecated."""
        return self._deprecated_msg

    def check_type(self, value: Any) -> bool:
        """Checks if `value` is one of the allowed types for this option.

        Returns True if it is; raises a TypeError naming the option, the value and the allowed
        type if not.
        """
        if self._type_hint is None:
            raise TypeError(
                f"{self._name} is a category and cannot be assigned to (tried with {value!r}); "
                "set the options inside it instead"
            )
        if not value_matches_type_hint(value, self._type_hint):
            raise TypeError(
                f"Trying to set {self._name} to {value!r}, but it must be of type {self.type} "
                f"(got {type(value).__name__})"
            )
        return True

    def warn_if_deprecated(self) -> None:
        """Outputs a log warning if this option/category is deprecated."""
        if self.deprecated:
            logger.warning("%s has been deprecated: %s", self._name, self._deprecated_msg)

    def __repr__(self) -> str:
        if self._type_hint is None:
            description = f"AttributeMetadata(name={self._name!r}, category"
        else:
            description = (
                f"AttributeMetadata(name={self._name!r}, type={self.type!r}, "
                f"default={self._default!r}"
            )
        if self.deprecated:
            description += f", deprecated_msg={self._deprecated_msg!r}"
        return description + ")"
