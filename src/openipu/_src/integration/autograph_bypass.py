"""Patch: autograph leaves openipu's own functions unconverted, as it left the original's.

Target (TensorFlow 2.21): `tensorflow.python.autograph.impl.conversion.is_allowlisted`, a
module-level function that `api.converted_call` looks up on its module for every call a
converted function makes (it also calls itself through the module for `__call__`).

Why: the original's IPU API lived in the `tensorflow` package, which autograph's
conversion rules never convert (`autograph/core/config.py`: DoNotConvert('tensorflow')).
openipu's implementation lives in `openipu`, so a user's `tf.function` that calls, say,
`infeed._dequeue()` or `loops.repeat` had autograph transpile every openipu function on
the way: measured, a two-replica strategy program's first trace took 12 s, 0.5 s with the
bypass. It also matches the original's semantics: a callable a user hands to the API
(a loop body, a pipeline stage) is called as plain Python by the API's code, not
converted by autograph. A user's own functions, and a user's subclass methods that
override ours, are converted as before.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from openipu._src.integration.patching import Kind, Patch, apply, register


def _defined_in_openipu(entity: Any) -> bool:
    target = entity.func if isinstance(entity, functools.partial) else entity
    module = inspect.getmodule(target)
    name = getattr(module, "__name__", "")
    return name == "openipu" or name.startswith("openipu.")


def _bypassing_openipu(stock: Callable[..., bool]) -> Callable[..., bool]:
    @functools.wraps(stock)
    def is_allowlisted(
        o: Any, check_call_override: bool = True, allow_namedtuple_subclass: bool = False
    ) -> bool:
        if _defined_in_openipu(o):
            return True
        return stock(o, check_call_override, allow_namedtuple_subclass)

    return is_allowlisted


AUTOGRAPH_ALLOWLIST = register(
    Patch(
        module="tensorflow.python.autograph.impl.conversion",
        attribute="is_allowlisted",
        kind=Kind.FUNCTION,
        replacement=_bypassing_openipu,
        reason="autograph never converted the original's IPU API (it was part of the "
        "`tensorflow` package): openipu's functions are called unconverted too",
        tensorflow=("2.21",),
    )
)


def install() -> None:
    """Applies the patch for the rest of the process (at import of `openipu`)."""
    apply(AUTOGRAPH_ALLOWLIST)
