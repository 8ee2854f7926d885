"""`popart.getLogger()`: PopART's loggers, on Python's `logging`.

The original has one logger per module ("session", "devicex", "ir", ...) plus "all", with
levels named TRACE, DEBUG, INFO, WARN, ERR, CRITICAL and OFF; `POPART_LOG_LEVEL` sets the
level of all of them. Here "all" is the Python logger "popart" and a module is a child of it.
"""

from __future__ import annotations

import logging as _logging
import os
import sys

from openipu._src.popart.errors import OptionTypeError

TRACE = 5
OFF = _logging.CRITICAL + 10
LEVELS = {
    "TRACE": TRACE,
    "DEBUG": _logging.DEBUG,
    "INFO": _logging.INFO,
    "WARN": _logging.WARNING,
    "ERR": _logging.ERROR,
    "CRITICAL": _logging.CRITICAL,
    "OFF": OFF,
}
ROOT = "popart"
_logging.addLevelName(TRACE, "TRACE")


def python_logger(module: str = "all") -> _logging.Logger:
    """The Python logger of a PopART module ("all" is their parent)."""
    return _logging.getLogger(ROOT if module == "all" else f"{ROOT}.{module}")


class Logger:
    """A PopART logger: `setLevel("DEBUG")`, `debug(msg)`, `info(msg)`, ..."""

    def __init__(self, name: str = "all") -> None:
        self.name = name
        self._logger = python_logger(name)

    def setLevel(self, level: str) -> None:  # noqa: N802 - the original's name
        if not isinstance(level, str):
            # pybind11's refusal of an argument that is not a std::string.
            raise OptionTypeError(
                "setLevel(): incompatible function arguments. The following argument types "
                f"are supported:\n    1. (self: popart_core.Logger, arg0: str) -> None\n\n"
                f"Invoked with: {self!r}, {level!r}"
            )
        # The original matches the names exactly and takes any other string as OFF, without
        # an error (willow/src/logging.cpp, logLevelFromString).
        self._logger.setLevel(LEVELS.get(level, OFF))

    def trace(self, message: str) -> None:
        self._logger.log(TRACE, message)

    def debug(self, message: str) -> None:
        self._logger.debug(message)

    def info(self, message: str) -> None:
        self._logger.info(message)

    def warn(self, message: str) -> None:
        self._logger.warning(message)

    def error(self, message: str) -> None:
        self._logger.error(message)

    def critical(self, message: str) -> None:
        self._logger.critical(message)


def getLogger(name: str = "all") -> Logger:  # noqa: N802 - the original's name
    return Logger(name)


class _StderrHandler(_logging.StreamHandler):
    """Writes to whatever sys.stderr is when a message comes (it may be replaced)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def _log_to_stderr() -> None:
    """PopART writes its log to stderr (spdlog's console sink), whatever the level: a
    handler of its own, so that TRACE and DEBUG messages show once enabled."""
    logger = python_logger()
    if not logger.handlers:
        handler = _StderrHandler()
        handler.setFormatter(_logging.Formatter("[%(name)s] [%(levelname)s] %(message)s"))
        logger.addHandler(handler)


def _level_from_environment() -> None:
    level = os.environ.get("POPART_LOG_LEVEL", "").strip().upper()
    if level in LEVELS:
        python_logger().setLevel(LEVELS[level])


_log_to_stderr()
_level_from_environment()
