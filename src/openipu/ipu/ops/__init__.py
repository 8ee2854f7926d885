"""`tensorflow.python.ipu.ops`: the IPU operator modules (also reachable as `ipu.<module>`)."""

import importlib

import _openipu_startup


def __getattr__(name: str):
    if name in _openipu_startup.IPU_OPERATOR_MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'tensorflow.python.ipu.ops' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _openipu_startup.IPU_OPERATOR_MODULES)
