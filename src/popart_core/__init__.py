"""`popart_core`, the original's compiled module that `popart` re-exports: here the other way
round, `popart`'s names plus the functions that test how errors reach Python."""
# ruff: noqa: F401, F403 - every import here is a re-export

from openipu._src.popart.error_translation import (
    _throw_application_runtime_error,
    _throw_popart_error,
    _throw_popart_internal_error,
    _throw_popart_runtime_error,
    _throw_poplar_error,
    _throw_poplar_runtime_error,
    _throw_poplibs_error,
    _throw_recoverable_runtime_error,
    _throw_system_runtime_error,
    _throw_unknown_runtime_error,
    _throw_unrecoverable_runtime_error,
)
from popart import *
