"""Errors shared across openipu."""


class HardwareOnlyError(NotImplementedError):
    """Raised by a public name whose behaviour needs real IPU hardware."""

    def __init__(self, what: str, why: str = "") -> None:
        message = f"{what} needs real IPU hardware, which openipu emulates but does not have"
        if why:
            message += f": {why}"
        super().__init__(message)


def unavailable_function(name: str, message: str):
    """A function `name` that raises `NotImplementedError(message)` whatever it is given:
    an original's function that cannot work here, with `message` saying why."""

    def function(*args, **kwargs):
        raise NotImplementedError(message)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"`{name}` of the original: not available here. {message}"
    return function
