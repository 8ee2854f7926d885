"""graphcore/popart tests/unittests/test_error.py: each of PopART's, Poplibs' and Poplar's
errors reaches Python as its own exception class (the `popart_core._throw_*` functions raise
them), and the classes nest as the original registers them: PopART's internal and runtime
errors are popart_exceptions; Poplar's application and system runtime errors are
poplar_runtime_errors; its recoverable (with a `recoveryAction`), unrecoverable and unknown
runtime errors are system runtime errors."""

import pytest

import popart
import popart_core


def _raises(throw, *exception_types, message="what went wrong"):
    for exception_type in exception_types:
        with pytest.raises(exception_type) as error:
            throw(message)
        assert str(error.value) == message
    return error.value


@pytest.mark.follows("test_popart_error")
def test_popart_error():
    error = _raises(popart_core._throw_popart_error, popart.popart_exception)
    # PopART's errors are not Poplar's.
    assert not isinstance(error, popart.poplar_exception)


@pytest.mark.follows("test_popart_internal_error")
def test_popart_internal_error():
    _raises(
        popart_core._throw_popart_internal_error,
        popart.popart_internal_exception,
        popart.popart_exception,
    )


@pytest.mark.follows("test_popart_runtime_error")
def test_popart_runtime_error():
    _raises(
        popart_core._throw_popart_runtime_error,
        popart.popart_runtime_error,
        popart.popart_exception,
    )


@pytest.mark.follows("test_poplibs_error")
def test_poplibs_error():
    _raises(popart_core._throw_poplibs_error, popart.poplibs_exception)


@pytest.mark.follows("test_poplar_error")
def test_poplar_error():
    _raises(popart_core._throw_poplar_error, popart.poplar_exception)


@pytest.mark.follows("test_poplar_runtime_error")
def test_poplar_runtime_error():
    _raises(
        popart_core._throw_poplar_runtime_error,
        popart.poplar_runtime_error,
        popart.poplar_exception,
    )


@pytest.mark.follows("test_application_runtime_error")
def test_application_runtime_error():
    _raises(
        popart_core._throw_application_runtime_error,
        popart.poplar_application_runtime_error,
        popart.poplar_runtime_error,
    )


@pytest.mark.follows("test_system_runtime_error")
def test_system_runtime_error():
    _raises(
        popart_core._throw_system_runtime_error,
        popart.poplar_system_runtime_error,
        popart.poplar_runtime_error,
    )


@pytest.mark.follows("test_recoverable_runtime_error")
def test_recoverable_runtime_error():
    error = _raises(
        popart_core._throw_recoverable_runtime_error,
        popart.poplar_recoverable_runtime_error,
        popart.poplar_system_runtime_error,
    )
    assert error.recoveryAction == popart.RecoveryAction.IPU_RESET


@pytest.mark.follows("test_unrecoverable_runtime_error")
def test_unrecoverable_runtime_error():
    _raises(
        popart_core._throw_unrecoverable_runtime_error,
        popart.poplar_unrecoverable_runtime_error,
        popart.poplar_system_runtime_error,
    )


@pytest.mark.follows("test_unknown_runtime_error")
def test_unknown_runtime_error():
    _raises(
        popart_core._throw_unknown_runtime_error,
        popart.poplar_unknown_runtime_error,
        popart.poplar_system_runtime_error,
    )
