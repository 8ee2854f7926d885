"""`tensorflow.python.ipu.application_compile_op`: compile a function into an executable."""

from openipu._src.serving.application_compile import experimental_application_compile_op

__all__ = ["experimental_application_compile_op"]
