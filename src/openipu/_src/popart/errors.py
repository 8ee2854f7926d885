"""PopART's exception types."""


class popart_exception(RuntimeError):  # noqa: N801 - the original's name
    """The error PopART raises for bad models, options, inputs and tensor ids."""


class popart_runtime_error(popart_exception):  # noqa: N801 - the original's name
    """A failure while a session runs."""


class OutOfMemoryException(popart_exception):
    """The (modelled) IPU memory is too small for the graph."""
