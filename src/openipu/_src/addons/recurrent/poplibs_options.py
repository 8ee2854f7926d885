"""The `options`/`options_bwd` dictionaries of the Popnn recurrent layers.

The original passes them to PopLibs as implementation options of the forward
and backward cells (ipu_tensorflow_addons/keras/layers/rnn.py). They steer how
the chip computes, not what: the host keeps them for the config. PopLibs
refuses a value it cannot use when the graph is built, as an InternalError
"[Poplar][Build graph] invalid_option: ..." (rnn_test.py `test_options`); the
values of the options that the host can judge are checked the same way.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import tensorflow as tf

#: PopLibs' names of the partials types.
PARTIALS_TYPES = ("half", "float")


def as_dict(owner: str, name: str, value) -> dict:
    """`value` (None for none) as a dict of option names to values."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    # The original takes `dict(options)` (ipu_tensorflow_addons/keras/layers/rnn.py): pairs
    # work; anything else is dict()'s TypeError or ValueError.
    try:
        return dict(value)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{owner}: {name} must be a dict of PopLibs options ({error})") from None


def check_when_built(options: dict) -> None:
    """Raises PopLibs' error for a value it refuses when the graph is built."""
    proportion = options.get("availableMemoryProportion")
    if proportion is not None and (
        isinstance(proportion, bool) or not isinstance(proportion, numbers.Real)
    ):
        _invalid(f"availableMemoryProportion: Value must be a number, got {proportion!r}")
    if proportion is not None and float(proportion) < 0.0:
        # PopLibs bounds the proportion below only (lstm_training_test.py matches this text).
        _invalid(
            f"availableMemoryProportion: Value must be greater than or equal to 0, got {proportion!r}"
        )
    partials = options.get("partialsType")
    if partials is not None and str(partials).lower() not in PARTIALS_TYPES:
        _invalid(f"partialsType must be one of {PARTIALS_TYPES}, got {partials!r}")


def _invalid(detail: str) -> None:
    raise tf.errors.InternalError(None, None, f"[Poplar][Build graph] invalid_option: {detail}")
