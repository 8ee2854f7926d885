"""`tensorflow.python.ipu.ops`: the IPU operator modules (also reachable as `ipu.<module>`)."""

import _openipu_startup
from openipu._src.lazy_submodules import LazySubmodules

_submodules = LazySubmodules(
    __name__, "tensorflow.python.ipu.ops", _openipu_startup.IPU_OPERATOR_MODULES
)
__getattr__ = _submodules.attribute


def __dir__() -> list[str]:
    return _submodules.listing(globals())
