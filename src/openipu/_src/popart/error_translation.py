"""The functions `popart_core` offers to test how errors reach Python
(python/popart/popart_core/popart.cpp, "Some functions to test the error translation"):
each raises the Python exception its C++ error becomes."""

from __future__ import annotations

from typing import NoReturn

from openipu._src.popart import errors


def _throw_popart_error(msg: str) -> NoReturn:
    raise errors.popart_exception(msg)


def _throw_popart_internal_error(msg: str) -> NoReturn:
    raise errors.popart_internal_exception(msg)


def _throw_popart_runtime_error(msg: str) -> NoReturn:
    raise errors.popart_runtime_error(msg)


def _throw_poplibs_error(msg: str) -> NoReturn:
    raise errors.poplibs_exception(msg)


def _throw_poplar_error(msg: str) -> NoReturn:
    raise errors.poplar_exception(msg)


def _throw_poplar_runtime_error(msg: str) -> NoReturn:
    raise errors.poplar_runtime_error(msg)


def _throw_application_runtime_error(msg: str) -> NoReturn:
    raise errors.poplar_application_runtime_error(msg)


def _throw_system_runtime_error(msg: str) -> NoReturn:
    raise errors.poplar_system_runtime_error(msg)


def _throw_recoverable_runtime_error(msg: str) -> NoReturn:
    # The original throws it with RecoveryAction::IPU_RESET.
    raise errors.poplar_recoverable_runtime_error(msg, errors.RecoveryAction.IPU_RESET)


def _throw_unrecoverable_runtime_error(msg: str) -> NoReturn:
    raise errors.poplar_unrecoverable_runtime_error(msg)


def _throw_unknown_runtime_error(msg: str) -> NoReturn:
    raise errors.poplar_unknown_runtime_error(msg)
