"""`tensorflow.python.ipu.ops`: the IPU operator modules (also reachable as `ipu.<module>`)."""

import _openipu_startup
from openipu._src.lazy_submodules import LazySubmodules

# `op_util` is an internal module of the original that its operator modules import, so
# `ipu.ops.op_util` is reachable there (but not `ipu.op_util`).
_submodules = LazySubmodules(
    __name__, "tensorflow.python.ipu.ops", _openipu_startup.IPU_OPERATOR_MODULES | {"op_util"}
)
__getattr__ = _submodules.attribute


def __dir__() -> list[str]:
    return _submodules.listing(globals())
