"""Errors shared across openipu."""


class HardwareOnlyError(NotImplementedError):
    """Raised by a public name whose behaviour needs real IPU hardware."""

    def __init__(self, what: str, why: str = "") -> None:
        message = f"{what} needs real IPU hardware, which openipu emulates but does not have"
        if why:
            message += f": {why}"
        super().__init__(message)
