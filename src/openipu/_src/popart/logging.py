"""`popart.getLogger()`: PopART's loggers, on Python's `logging`.

The original has one logger per module ("session", "devicex", "ir", ...) plus "all", with
levels named TRACE, DEBUG, INFO, WARN, ERR, CRITICAL and OFF; `POPART_LOG_LEVEL` sets the
level of all of them. Here "all" is the Python logger "popart" and a module is a child of it.
"""

from __future__ import annotations

import logging as _logging
import os

from openipu._src.popart.errors import popart_exception

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
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise popart_exception(f"Unknown log level {level!r}: one of {', '.join(LEVELS)}")
        self._logger.setLevel(LEVELS[level.upper()])

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


def _level_from_environment() -> None:
    level = os.environ.get("POPART_LOG_LEVEL", "").strip().upper()
    if level in LEVELS:
        python_logger().setLevel(LEVELS[level])


_level_from_environment()
